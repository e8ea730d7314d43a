/* safetensors.c — maps a .safetensors file and checks its header before trusting it. */
#include "safetensors.h"

#include <cjson/cJSON.h>

#include "json.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "gpt2_fileio.h"
#include "kernels.h"
#include "textio.h"

/* Header sizes beyond this are not GPT-2 files (gpt2-xl's header is ~60 KB). */
#define ST_MAX_HEADER (100u << 20)

static int dtype_size(const char *dt) {
    static const struct { const char *name; int size; } table[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"U64", 8},
        {"I32", 4}, {"U32", 4}, {"I16", 2}, {"U16", 2}, {"I8", 1},   {"U8", 1},
        {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(dt, table[i].name) == 0) return table[i].size;
    return 0;
}

/* 2^53: above it a JSON number (a double) no longer holds every integer. */
#define ST_EXACT_MAX 9007199254740992.0

/* A JSON number that is an exact integer in [0, 2^53]: 1 and *out set. Else 0
 * and why it is not, for a message ("= -5 is negative", "is a string"...). */
static int json_u53(const cJSON *j, uint64_t *out, char *why, size_t cap) {
    if (!cJSON_IsNumber(j)) {
        snprintf(why, cap, "is %s, expected a non-negative integer", json_type_name(j));
        return 0;
    }
    const double v = j->valuedouble;
    if (v < 0.0) snprintf(why, cap, "= %.17g is negative, expected a non-negative integer", v);
    else if (floor(v) != v) snprintf(why, cap, "= %.17g is not an integer", v);
    else if (v > ST_EXACT_MAX && v < 18446744073709551616.0)
        snprintf(why, cap, "= %llu is too large: at most 2^53 = 9007199254740992 (the largest integer a JSON "
                           "number holds exactly)", (unsigned long long)v);
    else if (v > ST_EXACT_MAX)
        snprintf(why, cap, "= %.17g is too large: at most 2^53 = 9007199254740992 (the largest integer a JSON "
                           "number holds exactly)", v);
    else {
        *out = (uint64_t)v;
        return 1;
    }
    return 0;
}

/* Checks data_offsets: [begin, end] within the data section's data_size bytes. */
static gpt2_status parse_offsets(const char *path, const char *name, const cJSON *offs, uint64_t data_size,
                                 uint64_t *begin, uint64_t *end, gpt2_error *err) {
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: tensor '%s': data_offsets must be an array [begin, end], found %s",
                         path, name, cJSON_IsArray(offs) ? "an array of another length" : json_type_name(offs));
    const cJSON *e = offs->child;
    uint64_t *v[2] = {begin, end};
    char why[160];
    for (int i = 0; i < 2; i++, e = e->next) {
        if (json_u53(e, v[i], why, sizeof why)) continue;
        if (cJSON_IsNumber(e) && e->valuedouble > ST_EXACT_MAX) /* past 2^53 is past any real file */
            return gpt2_fail(err, GPT2_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets[%d] %s, and past the end of the data section (%llu bytes)",
                             path, name, i, why, (unsigned long long)data_size);
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: tensor '%s': data_offsets[%d] %s", path, name, i, why);
    }
    if (*begin > *end)
        return gpt2_fail(err, GPT2_ERR_FORMAT,
                         "%s: tensor '%s': data_offsets = [%llu, %llu]: begin is after end, expected [begin, end]", path,
                         name, (unsigned long long)*begin, (unsigned long long)*end);
    if (*end > data_size)
        return gpt2_fail(err, GPT2_ERR_FORMAT,
                         "%s: tensor '%s': bytes [%llu, %llu) lie outside the data section of %llu bytes "
                         "(file truncated?)",
                         path, name, (unsigned long long)*begin, (unsigned long long)*end,
                         (unsigned long long)data_size);
    return GPT2_OK;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static int cmp_offset(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    uintptr_t px = (uintptr_t)x->data, py = (uintptr_t)y->data;
    return (px > py) - (px < py);
}

/* Checks one header entry and fills t. */
static gpt2_status parse_entry(const char *path, const cJSON *e, const uint8_t *data,
                               uint64_t data_size, st_tensor *t, gpt2_error *err) {
    char shown[TEXT_SHOW_BUF];
    const char *name = text_show(e->string, strlen(e->string), shown); /* for messages; t->name gets the real one */
    if (!cJSON_IsObject(e))
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: tensor '%s': expected a JSON object", path, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt))
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: tensor '%s': missing string \"dtype\"", path, name);
    int es = dtype_size(dt->valuestring);
    if (es == 0 || strlen(dt->valuestring) >= sizeof t->dtype) {
        char dshown[TEXT_SHOW_BUF];
        return gpt2_fail(err, GPT2_ERR_FORMAT,
                         "%s: tensor '%s': unknown dtype \"%.20s\", expected F32, F16, BF16 or another "
                         "safetensors dtype", path, name, text_show(dt->valuestring, strlen(dt->valuestring), dshown));
    }
    if (!cJSON_IsArray(shape))
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: tensor '%s': \"shape\" must be an array", path, name);
    int nd = cJSON_GetArraySize(shape);
    if (nd > ST_MAX_DIMS)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: tensor '%s': shape has %d dimensions, at most %d supported",
                         path, name, nd, ST_MAX_DIMS);
    uint64_t n_elem = 1;
    int d = 0;
    for (const cJSON *s = shape->child; s; s = s->next, d++) {
        uint64_t v;
        char why[160];
        if (!json_u53(s, &v, why, sizeof why))
            return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: tensor '%s': shape[%d] %s", path, name, d, why);
        t->shape[d] = (int64_t)v;
        if (v != 0 && n_elem > UINT64_MAX / 16 / v)
            return gpt2_fail(err, GPT2_ERR_FORMAT,
                             "%s: tensor '%s': shape is too large (its element count overflows 64 bits at "
                             "shape[%d] = %llu)", path, name, d, (unsigned long long)v);
        n_elem *= v;
    }
    uint64_t begin, end;
    gpt2_status st = parse_offsets(path, name, offs, data_size, &begin, &end, err);
    if (st != GPT2_OK) return st;
    if (end - begin != n_elem * (uint64_t)es)
        return gpt2_fail(err, GPT2_ERR_FORMAT,
                         "%s: tensor '%s': %s of shape with %llu elements needs %llu bytes, data_offsets span %llu",
                         path, name, dt->valuestring, (unsigned long long)n_elem,
                         (unsigned long long)(n_elem * (uint64_t)es), (unsigned long long)(end - begin));
    t->name = strdup(e->string);
    if (!t->name) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    strcpy(t->dtype, dt->valuestring);
    t->elem_size = es;
    t->n_dims = nd;
    t->data = data + begin;
    t->n_bytes = (size_t)(end - begin);
    return GPT2_OK;
}

/* Long by design: a loader's validation, every header property checked in
 * order with its own message (each entry's details are in parse_entry). */
static gpt2_status parse_header(st_file *f, const char *json, size_t json_len, const uint8_t *data,
                                uint64_t data_size, gpt2_error *err) {
    const char *path = f->path;
    const char *parse_end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, json_len, &parse_end, 0);
    if (!root) {
        long at = parse_end && parse_end >= json && parse_end <= json + json_len ? (long)(parse_end - json) : -1;
        return gpt2_fail(err, GPT2_ERR_FORMAT,
                         "%s: header is not valid JSON (parse error at header byte %ld of %zu)", path, at,
                         json_len);
    }
    gpt2_status st = GPT2_OK;
    /* After the JSON only padding may follow (writers pad the header with spaces). */
    for (const char *q = parse_end; q && q < json + json_len; q++)
        if (*q != ' ' && *q != '\t' && *q != '\n' && *q != '\r') {
            st = gpt2_fail(err, GPT2_ERR_FORMAT,
                           "%s: header has data after its JSON object (byte 0x%02X at header byte %ld of %zu), "
                           "expected only space padding",
                           path, (unsigned char)*q, (long)(q - json), json_len);
            goto done;
        }
    long nul = text_json_nul(json, json_len);
    if (nul >= 0) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT,
                       "%s: header has a NUL character inside a string (header byte %ld), expected none",
                       path, nul);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: header must be a JSON object of tensors", path);
        goto done;
    }
    int n = 0;
    for (const cJSON *e = root->child; e; e = e->next)
        if (strcmp(e->string, "__metadata__") != 0) n++;
    f->tensors = calloc(n ? (size_t)n : 1, sizeof *f->tensors);
    if (!f->tensors) {
        st = gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) continue;
        st = parse_entry(path, e, data, data_size, &f->tensors[f->n_tensors], err);
        if (st != GPT2_OK) goto done;
        f->n_tensors++;
    }
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, cmp_name);
    for (int i = 1; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0) {
            char shown[TEXT_SHOW_BUF];
            st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: tensor '%s' appears twice", path,
                           text_show(f->tensors[i].name, strlen(f->tensors[i].name), shown));
            goto done;
        }
    /* Overlap: sort by start; each non-empty tensor must begin at or after the end of every
     * non-empty one before it (tracked as the one reaching furthest: an empty tensor in
     * between must not hide an overlap). */
    const st_tensor **by_off = malloc((size_t)(n ? n : 1) * sizeof *by_off);
    if (!by_off) {
        st = gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int i = 0; i < f->n_tensors; i++) by_off[i] = &f->tensors[i];
    qsort(by_off, (size_t)f->n_tensors, sizeof *by_off, cmp_offset);
    const st_tensor *a = NULL; /* the non-empty tensor so far that ends last */
    for (int i = 0; i < f->n_tensors; i++) {
        const st_tensor *b = by_off[i];
        if (!b->n_bytes) continue;
        if (a && (const uint8_t *)b->data < (const uint8_t *)a->data + a->n_bytes) {
            char sa[TEXT_SHOW_BUF], sb[TEXT_SHOW_BUF];
            st = gpt2_fail(err, GPT2_ERR_FORMAT,
                           "%s: tensors '%s' (bytes %td to %td) and '%s' (from byte %td) overlap in the data "
                           "section, expected disjoint ranges",
                           path, text_show(a->name, strlen(a->name), sa), (const uint8_t *)a->data - data,
                           (const uint8_t *)a->data - data + (ptrdiff_t)a->n_bytes, text_show(b->name, strlen(b->name), sb),
                           (const uint8_t *)b->data - data);
            break;
        }
        if (!a || (const uint8_t *)b->data + b->n_bytes > (const uint8_t *)a->data + a->n_bytes) a = b;
    }
    free(by_off);
done:
    cJSON_Delete(root);
    return st;
}

gpt2_status st_open(const char *path, st_file *f, gpt2_error *err) {
    void *map;
    size_t size;
    memset(f, 0, sizeof *f);
    gpt2_status st = text_map_file(path, &map, &size, err);
    return st ? st : st_open_map(path, map, size, f, err);
}

gpt2_status st_open_map(const char *path, void *map, size_t size, st_file *f, gpt2_error *err) {
    memset(f, 0, sizeof *f);
    f->map = map;
    f->map_size = size;
    f->path = strdup(path);
    if (!f->path) {
        st_close(f);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    }
    gpt2_status st = GPT2_OK;
    if (size == 0) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: file is 0 bytes, expected a safetensors header", path);
        goto fail;
    }
    if (size < 8) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: file is %zu bytes, shorter than the 8-byte header length",
                       path, size);
        goto fail;
    }
    const uint8_t *p = map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | p[i];
    if (hlen > ST_MAX_HEADER && hlen <= size - 8) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT,
                       "%s: header length %llu is over the %u-byte limit (gpt2-xl's is about 60 KB)",
                       path, (unsigned long long)hlen, (unsigned)ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > size - 8 || hlen < 2) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT,
                       "%s: header length %llu does not fit: the file has %zu bytes after the 8-byte length",
                       path, (unsigned long long)hlen, size - 8);
        goto fail;
    }
    st = parse_header(f, (const char *)p + 8, (size_t)hlen, p + 8 + hlen, size - 8 - hlen, err);
    if (st != GPT2_OK) goto fail;
    return GPT2_OK;
fail:
    st_close(f);
    return st;
}

/* The whole pages of [p, p + n) that lie in the mapping [map, map + size). */
static void release_in(const void *map, size_t size, const void *p, size_t n) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)map, hi = lo + size;
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
    if (a < lo || b > hi || a >= b) return; /* not in the map, or no whole page */
    madvise((void *)a, b - a, MADV_DONTNEED);
}

void st_release(const st_file *f, const void *p, size_t n) {
    if (!f->n_shards) {
        release_in(f->map, f->map_size, p, n);
        return;
    }
    /* a sharded set: the shard whose mapping holds p (a handful of shards: a scan is enough) */
    for (int i = 0; i < f->n_shards; i++) {
        const st_shard *s = &f->shards[i];
        if ((uintptr_t)p >= (uintptr_t)s->map && (uintptr_t)p < (uintptr_t)s->map + s->map_size) {
            release_in(s->map, s->map_size, p, n);
            return;
        }
    }
}

void st_close(st_file *f) {
    for (int i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    if (f->map) munmap(f->map, f->map_size);
    for (int i = 0; i < f->n_shards; i++) {
        if (f->shards[i].map) munmap(f->shards[i].map, f->shards[i].map_size);
        free(f->shards[i].path);
    }
    free(f->shards);
    free((void *)f->path);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name) {
    st_tensor key = {.name = (char *)name};
    return bsearch(&key, f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, cmp_name);
}

/* --- writing ------------------------------------------------------------------ */

typedef struct {
    const st_out *t;
    int n;
    const char *header;  /* with its 8-byte length, padded */
    size_t header_len;
} st_writer;

/* The header: every tensor's dtype, shape and offsets, in order. */
static char *st_header(const st_out *t, int n, size_t *len) {
    cJSON *h = cJSON_CreateObject(), *meta = h ? cJSON_AddObjectToObject(h, "__metadata__") : NULL;
    int ok = meta && cJSON_AddStringToObject(meta, "format", "pt");
    double off = 0;
    for (int i = 0; ok && i < n; i++) {
        const gpt2_dtype dt = t[i].dtype;
        const size_t es = gpt2_dtype_size(dt);
        const char *dname = dt == GPT2_DTYPE_F32 ? "F32" : dt == GPT2_DTYPE_F16 ? "F16" : "BF16";
        const double shape[2] = {(double)(t[i].n_dims == 2 ? t[i].rows : t[i].cols), (double)t[i].cols};
        const double end = off + (double)t[i].rows * (double)t[i].cols * (double)es, offs[2] = {off, end};
        cJSON *e = cJSON_AddObjectToObject(h, t[i].name);
        ok = e && cJSON_AddStringToObject(e, "dtype", dname) &&
             cJSON_AddItemToObject(e, "shape", cJSON_CreateDoubleArray(shape, t[i].n_dims)) &&
             cJSON_AddItemToObject(e, "data_offsets", cJSON_CreateDoubleArray(offs, 2));
        off = end;
    }
    char *json = ok ? cJSON_PrintUnformatted(h) : NULL;
    cJSON_Delete(h);
    size_t hlen = json ? strlen(json) : 0;
    char *out = json ? malloc(8 + hlen + 8) : NULL;
    if (out) {
        memcpy(out + 8, json, hlen);
        while (hlen % 8) out[8 + hlen++] = ' '; /* data starts 8-byte aligned */
        for (int i = 0; i < 8; i++) out[i] = (char)((uint64_t)hlen >> (8 * i));
        *len = 8 + hlen;
    }
    cJSON_free(json);
    return out;
}

static gpt2_status st_put(FILE *f, void *user, gpt2_error *err) {
    const st_writer *w = user;
    fwrite(w->header, 1, w->header_len, f);
    int64_t widest = 1;
    for (int i = 0; i < w->n; i++) widest = w->t[i].cols > widest ? w->t[i].cols : widest;
    float *row = malloc((size_t)widest * sizeof *row);
    unsigned char *bytes = malloc((size_t)widest * 4);
    if (!row || !bytes) {
        free(row), free(bytes);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < w->n; i++) {
        const gpt2_dtype dt = w->t[i].dtype;
        for (int64_t r = 0; r < w->t[i].rows; r++) {
            w->t[i].row(w->t[i].user, r, row);
            for (int64_t c = 0; c < w->t[i].cols; c++) {
                if (dt == GPT2_DTYPE_F32) {
                    memcpy(bytes + 4 * c, &row[c], 4);
                } else {
                    uint16_t h = dt == GPT2_DTYPE_F16 ? gpt2_f32_to_f16(row[c]) : gpt2_f32_to_bf16(row[c]);
                    memcpy(bytes + 2 * c, &h, 2);
                }
            }
            fwrite(bytes, gpt2_dtype_size(dt), (size_t)w->t[i].cols, f);
        }
    }
    free(row);
    free(bytes);
    return GPT2_OK;
}

gpt2_status st_write(const char *path, const st_out *t, int n, gpt2_error *err) {
    for (int i = 0; i < n; i++)
        if (t[i].dtype != GPT2_DTYPE_F32 && t[i].dtype != GPT2_DTYPE_F16 && t[i].dtype != GPT2_DTYPE_BF16)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "%s: cannot write dtype %s", path, gpt2_dtype_name(t[i].dtype));
    st_writer w = {t, n, NULL, 0};
    char *header = st_header(t, n, &w.header_len);
    if (!header) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    w.header = header;
    gpt2_status st = gpt2_fileio_write_atomic(path, st_put, &w, err);
    free(header);
    return st;
}
