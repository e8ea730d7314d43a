/* gguf.c — maps a GGUF file and checks every field of it before trusting it. */
#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "error.h"
#include "quant.h"
#include "textio.h"

/* Limits past anything a GPT-2 file holds (gpt2-xl: 581 tensors, 30 keys, one
 * 50,257-string array), far below what would strain memory. */
enum {
    GGUF_MAX_TENSORS = 1 << 16,
    GGUF_MAX_KV = 1 << 16,
    GGUF_MAX_KEY = 65535, /* the specification's limit */
    GGUF_MAX_NAME = 256,
};
/* At most 2^53 elements in a tensor: past any file, and every count stays exact in a double. */
#define GGUF_MAX_ELEMS ((uint64_t)1 << 53)

static const char *const type_names[GGUF_N_TYPES] = {"uint8", "int8",   "uint16", "int16",  "uint32",
                                                     "int32", "float32", "bool",   "string", "array",
                                                     "uint64", "int64",  "float64"};
static const int type_sizes[GGUF_N_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

int gguf_sniff(const void *head, size_t n) { return n >= 4 && memcmp(head, "GGUF", 4) == 0; }

const char *gguf_dtype_name(gpt2_dtype dt) {
    const quant_format *f = quant_format_of(dt);
    return f ? f->name : "Q8 (per-row)";
}

/* --- a bounds-checked reader ------------------------------------------------- */

typedef struct {
    const uint8_t *base, *p, *end;
    const char *path;
    gpt2_error *err;
} cursor;

static size_t at(const cursor *c) { return (size_t)(c->p - c->base); }

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* n more bytes for `what` (a phrase: "the tensor count"), or a message. */
static gpt2_status need(cursor *c, uint64_t n, const char *what) {
    if (n <= (uint64_t)(c->end - c->p)) return GPT2_OK;
    return gpt2_fail(c->err, GPT2_ERR_FORMAT,
                     "%s: truncated: %s at byte %zu needs %llu bytes, but the file ends %zu bytes later", c->path, what,
                     at(c), (unsigned long long)n, (size_t)(c->end - c->p));
}

static gpt2_status read_le(cursor *c, int n, const char *what, uint64_t *v) {
    gpt2_status st = need(c, (uint64_t)n, what);
    if (st) return st;
    *v = le(c->p, n);
    c->p += n;
    return GPT2_OK;
}

/* A string: u64 length (at most max) and its bytes. */
static gpt2_status read_string(cursor *c, const char *what, uint64_t max, const char **s, uint64_t *len) {
    const size_t start = at(c);
    uint64_t n;
    gpt2_status st = read_le(c, 8, what, &n);
    if (st) return st;
    if (n > max)
        return gpt2_fail(c->err, GPT2_ERR_FORMAT, "%s: %s at byte %zu has length %llu, over the limit of %llu bytes",
                         c->path, what, start, (unsigned long long)n, (unsigned long long)max);
    if ((st = need(c, n, what))) return st;
    *s = (const char *)c->p;
    *len = n;
    c->p += n;
    return GPT2_OK;
}

/* --- metadata ------------------------------------------------------------------ */

/* The value of kv (its type already read) at the cursor: checked and skipped. */
static gpt2_status read_value(cursor *c, gguf_kv *kv, const char *what) {
    char w[96];
    uint64_t v;
    gpt2_status st;
    if (kv->type >= GGUF_N_TYPES)
        return gpt2_fail(c->err, GPT2_ERR_FORMAT, "%s: %s has value type %u at byte %zu, expected 0 to %d", c->path,
                         what, kv->type, at(c) - 4, GGUF_N_TYPES - 1);
    kv->val = c->p;
    if (kv->type == GGUF_STRING) {
        const char *s;
        snprintf(w, sizeof w, "the string value of %s", what);
        st = read_string(c, w, UINT64_MAX, &s, &kv->n);
        kv->val = (const uint8_t *)s;
        return st;
    }
    if (kv->type != GGUF_ARRAY) {
        if ((st = need(c, (uint64_t)type_sizes[kv->type], what))) return st;
        c->p += type_sizes[kv->type];
        return GPT2_OK;
    }
    snprintf(w, sizeof w, "the array header of %s", what);
    if ((st = read_le(c, 4, w, &v)) || (st = read_le(c, 8, w, &kv->n))) return st;
    kv->elem_type = (uint32_t)v;
    if (kv->elem_type == GGUF_ARRAY || kv->elem_type >= GGUF_N_TYPES)
        return gpt2_fail(c->err, GPT2_ERR_FORMAT, "%s: %s is an array of element type %u (%s), expected 0 to %d but 9",
                         c->path, what, kv->elem_type, kv->elem_type == GGUF_ARRAY ? "nested arrays are not supported"
                                                                                  : "no such type", GGUF_N_TYPES - 1);
    kv->val = c->p;
    const uint64_t left = (uint64_t)(c->end - c->p), least = kv->elem_type == GGUF_STRING ? 8 : (uint64_t)type_sizes[kv->elem_type];
    if (kv->n > left / least)
        return gpt2_fail(c->err, GPT2_ERR_FORMAT,
                         "%s: truncated: %s has %llu elements of %s at byte %zu, more than the %llu bytes left hold",
                         c->path, what, (unsigned long long)kv->n, type_names[kv->elem_type], at(c),
                         (unsigned long long)left);
    if (kv->elem_type != GGUF_STRING) {
        c->p += kv->n * least;
        return GPT2_OK;
    }
    for (uint64_t i = 0; i < kv->n; i++) {
        const char *s;
        uint64_t n;
        snprintf(w, sizeof w, "string %llu of %s", (unsigned long long)i, what);
        if ((st = read_string(c, w, UINT64_MAX, &s, &n))) return st;
    }
    return GPT2_OK;
}

static int key_cmp(const void *a, const void *b) {
    const gguf_kv *x = *(const gguf_kv *const *)a, *y = *(const gguf_kv *const *)b;
    const size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    const int c = memcmp(x->key, y->key, n);
    return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* Two entries with one key are refused: which would a reader believe? */
static gpt2_status check_unique_keys(const gguf_file *f, gpt2_error *err) {
    if (f->n_kv < 2) return GPT2_OK;
    const gguf_kv **by_key = malloc(f->n_kv * sizeof *by_key);
    if (!by_key) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", f->path);
    for (size_t i = 0; i < f->n_kv; i++) by_key[i] = &f->kv[i];
    qsort(by_key, f->n_kv, sizeof *by_key, key_cmp);
    gpt2_status st = GPT2_OK;
    for (size_t i = 1; i < f->n_kv && !st; i++)
        if (key_cmp(&by_key[i - 1], &by_key[i]) == 0) {
            char shown[TEXT_SHOW_BUF];
            st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: metadata key '%s' appears twice", f->path,
                           text_show(by_key[i]->key, by_key[i]->key_len, shown));
        }
    free(by_key);
    return st;
}

static gpt2_status read_metadata(cursor *c, gguf_file *f, uint64_t n_kv) {
    char what[64];
    gpt2_status st;
    if (!(f->kv = calloc(n_kv ? n_kv : 1, sizeof *f->kv)))
        return gpt2_fail(c->err, GPT2_ERR_NOMEM, "%s: out of memory for %llu metadata entries", c->path,
                         (unsigned long long)n_kv);
    for (uint64_t i = 0; i < n_kv; i++, f->n_kv++) {
        gguf_kv *kv = &f->kv[i];
        uint64_t len, type;
        snprintf(what, sizeof what, "the key of metadata entry %llu", (unsigned long long)i);
        if ((st = read_string(c, what, GGUF_MAX_KEY, &kv->key, &len))) return st;
        kv->key_len = (size_t)len;
        for (size_t j = 0; j < kv->key_len; j++)
            if (kv->key[j] < 0x20 || kv->key[j] > 0x7e)
                return gpt2_fail(c->err, GPT2_ERR_FORMAT,
                                 "%s: the key of metadata entry %llu has byte 0x%02X at offset %zu, expected "
                                 "printable ASCII", c->path, (unsigned long long)i, (unsigned char)kv->key[j], j);
        if (kv->key_len == 0)
            return gpt2_fail(c->err, GPT2_ERR_FORMAT, "%s: metadata entry %llu has an empty key", c->path,
                             (unsigned long long)i);
        char shown[TEXT_SHOW_BUF];
        snprintf(what, sizeof what, "metadata '%s'", text_show(kv->key, kv->key_len, shown));
        if ((st = read_le(c, 4, what, &type))) return st;
        kv->type = (uint32_t)type;
        if ((st = read_value(c, kv, what))) return st;
    }
    return check_unique_keys(f, c->err);
}

static gpt2_status read_alignment(gguf_file *f, gpt2_error *err) {
    f->alignment = 32;
    const gguf_kv *kv = gguf_find(f, "general.alignment");
    if (!kv) return GPT2_OK;
    if (kv->type != GGUF_U32)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: metadata 'general.alignment' is a %s, expected a uint32", f->path,
                         kv->type == GGUF_ARRAY ? "array" : type_names[kv->type]);
    const uint64_t a = le(kv->val, 4);
    if (a == 0 || (a & (a - 1)))
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: metadata 'general.alignment' is %llu, expected a power of two",
                         f->path, (unsigned long long)a);
    f->alignment = (size_t)a;
    return GPT2_OK;
}

/* --- tensor infos ---------------------------------------------------------------- */

static void shape_text(const uint64_t *ne, int n, char *out, size_t cap) {
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; i < n && k + 24 < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%llu", i ? ", " : "", (unsigned long long)ne[i]);
}

/* A tensor's dims and type: its element count and bytes, or a message. */
static gpt2_status check_shape_type(cursor *c, gguf_tensor *t, uint32_t type) {
    char shape[128];
    shape_text(t->ne, t->n_dims, shape, sizeof shape);
    uint64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) {
        if (t->ne[d] == 0)
            return gpt2_fail(c->err, GPT2_ERR_FORMAT, "%s: tensor '%s' has shape [%s]: dimension %d is 0", c->path,
                             t->name, shape, d);
        if (t->ne[d] > GGUF_MAX_ELEMS / n)
            return gpt2_fail(c->err, GPT2_ERR_FORMAT,
                             "%s: tensor '%s' has shape [%s]: more than 2^53 elements (the product overflows)",
                             c->path, t->name, shape);
        n *= t->ne[d];
    }
    const quant_format *q = quant_format_ggml(type);
    if (!q) {
        const char *name = quant_ggml_unsupported_name(type);
        if (name)
            return gpt2_fail(c->err, GPT2_ERR_FORMAT,
                             "%s: tensor '%s' has type %u (%s), which this engine does not run (it runs F32, F16, "
                             "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", c->path, t->name, type, name);
        return gpt2_fail(c->err, GPT2_ERR_FORMAT, "%s: tensor '%s' has type %u, which is not a GGUF tensor type",
                         c->path, t->name, type);
    }
    if (t->ne[0] % (uint64_t)q->block)
        return gpt2_fail(c->err, GPT2_ERR_FORMAT,
                         "%s: tensor '%s' of type %s has shape [%s]: its rows of %llu are not a multiple of the "
                         "%d-element block", c->path, t->name, q->name, shape, (unsigned long long)t->ne[0], q->block);
    t->dtype = q->dtype;
    t->n_bytes = (size_t)(n / (uint64_t)q->block * (uint64_t)q->block_bytes); /* < 2^53 * 210 / 256 */
    return GPT2_OK;
}

/* One tensor info: name, dims, type, offset (relative to the data section). */
static gpt2_status read_tensor_info(cursor *c, gguf_file *f, size_t i, uint64_t *offset) {
    char what[96];
    const char *s;
    uint64_t len, v;
    gpt2_status st;
    snprintf(what, sizeof what, "the name of tensor %zu", i);
    if ((st = read_string(c, what, GGUF_MAX_NAME, &s, &len))) return st;
    gguf_tensor *t = &f->tensors[i];
    if (memchr(s, '\0', (size_t)len) || len == 0)
        return gpt2_fail(c->err, GPT2_ERR_FORMAT, "%s: the name of tensor %zu at byte %zu is %s", c->path, i,
                         at(c) - (size_t)len, len ? "not a string (it holds a NUL byte)" : "empty");
    if (!(t->name = strndup(s, (size_t)len))) return gpt2_fail(c->err, GPT2_ERR_NOMEM, "%s: out of memory", c->path);
    char shown[TEXT_SHOW_BUF];
    snprintf(what, sizeof what, "tensor '%s'", text_show(s, (size_t)len, shown));
    if ((st = read_le(c, 4, what, &v))) return st;
    if (v < 1 || v > GGUF_MAX_DIMS)
        return gpt2_fail(c->err, GPT2_ERR_FORMAT, "%s: %s has %llu dimensions at byte %zu, expected 1 to %d", c->path,
                         what, (unsigned long long)v, at(c) - 4, GGUF_MAX_DIMS);
    t->n_dims = (int)v;
    for (int d = 0; d < t->n_dims; d++)
        if ((st = read_le(c, 8, what, &t->ne[d]))) return st;
    if ((st = read_le(c, 4, what, &v)) || (st = check_shape_type(c, t, (uint32_t)v))) return st;
    if ((st = read_le(c, 8, what, offset))) return st;
    if (*offset % f->alignment)
        return gpt2_fail(c->err, GPT2_ERR_FORMAT, "%s: %s has offset %llu, not a multiple of the alignment %zu",
                         c->path, what, (unsigned long long)*offset, f->alignment);
    return GPT2_OK;
}

static int tensor_cmp_name(const void *a, const void *b) {
    return strcmp((*(const gguf_tensor *const *)a)->name, (*(const gguf_tensor *const *)b)->name);
}
static int tensor_cmp_data(const void *a, const void *b) {
    const uint8_t *x = (*(const gguf_tensor *const *)a)->data, *y = (*(const gguf_tensor *const *)b)->data;
    return (x > y) - (x < y);
}

/* No two tensors with one name, no two byte ranges overlapping. */
static gpt2_status check_tensor_set(const gguf_file *f, const uint8_t *data, gpt2_error *err) {
    if (f->n_tensors < 2) return GPT2_OK;
    const gguf_tensor **v = malloc(f->n_tensors * sizeof *v);
    if (!v) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", f->path);
    for (size_t i = 0; i < f->n_tensors; i++) v[i] = &f->tensors[i];
    gpt2_status st = GPT2_OK;
    qsort(v, f->n_tensors, sizeof *v, tensor_cmp_name);
    for (size_t i = 1; i < f->n_tensors && !st; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0)
            st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: tensor '%s' appears twice", f->path, v[i]->name);
    qsort(v, f->n_tensors, sizeof *v, tensor_cmp_data);
    for (size_t i = 1; i < f->n_tensors && !st; i++) {
        const gguf_tensor *a = v[i - 1], *b = v[i];
        if ((const uint8_t *)a->data + a->n_bytes > (const uint8_t *)b->data)
            st = gpt2_fail(err, GPT2_ERR_FORMAT,
                           "%s: tensors '%s' (data bytes %td to %td) and '%s' (from data byte %td) overlap", f->path,
                           a->name, (const uint8_t *)a->data - data, (const uint8_t *)a->data - data + (ptrdiff_t)a->n_bytes,
                           b->name, (const uint8_t *)b->data - data);
    }
    free(v);
    return st;
}

static gpt2_status read_tensors(cursor *c, gguf_file *f, uint64_t n) {
    uint64_t *offsets = malloc((n ? n : 1) * sizeof *offsets);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    gpt2_status st = GPT2_OK;
    if (!offsets || !f->tensors) st = gpt2_fail(c->err, GPT2_ERR_NOMEM, "%s: out of memory", c->path);
    for (uint64_t i = 0; i < n && !st; i++) {
        st = read_tensor_info(c, f, (size_t)i, &offsets[i]);
        f->n_tensors = (size_t)i + 1; /* its name is freed by gguf_close */
    }
    const uint64_t start = ((uint64_t)at(c) + f->alignment - 1) / f->alignment * f->alignment;
    if (!st && start > f->map_size)
        st = gpt2_fail(c->err, GPT2_ERR_FORMAT,
                       "%s: truncated: the data section would start at byte %llu (after the tensor infos, aligned to "
                       "%zu), past the end of the file (%zu bytes)", c->path, (unsigned long long)start, f->alignment,
                       f->map_size);
    const uint64_t size = st ? 0 : f->map_size - start;
    for (size_t i = 0; i < f->n_tensors && !st; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (offsets[i] > size || t->n_bytes > size - offsets[i])
            st = gpt2_fail(c->err, GPT2_ERR_FORMAT,
                           "%s: tensor '%s' (%zu bytes at data offset %llu) lies outside the data section "
                           "(%llu bytes from file byte %llu)", c->path, t->name, t->n_bytes,
                           (unsigned long long)offsets[i], (unsigned long long)size, (unsigned long long)start);
        else
            t->data = c->base + start + offsets[i];
    }
    free(offsets);
    return st ? st : check_tensor_set(f, c->base + start, c->err);
}

/* --- the file ------------------------------------------------------------------- */

static gpt2_status check_header(cursor *c, gguf_file *f, uint64_t n_tensors, uint64_t n_kv) {
    if (!gguf_sniff(c->base, 4))
        return gpt2_fail(c->err, GPT2_ERR_FORMAT, "%s: not a GGUF file: it starts with %02X %02X %02X %02X, not \"GGUF\"",
                         c->path, c->base[0], c->base[1], c->base[2], c->base[3]);
    if (f->version == 1)
        return gpt2_fail(c->err, GPT2_ERR_FORMAT,
                         "%s: GGUF version 1 (2023's first form) is not supported, expected version 2 or 3", c->path);
    if (f->version != 2 && f->version != 3)
        return gpt2_fail(c->err, GPT2_ERR_FORMAT, "%s: GGUF version %u%s, expected 2 or 3", c->path, f->version,
                         f->version >= 0x01000000 ? " (a big-endian file?)" : "");
    if (n_tensors > GGUF_MAX_TENSORS || n_kv > GGUF_MAX_KV)
        return gpt2_fail(c->err, GPT2_ERR_FORMAT, "%s: %s count %llu is over the limit of %d", c->path,
                         n_tensors > GGUF_MAX_TENSORS ? "tensor" : "metadata",
                         (unsigned long long)(n_tensors > GGUF_MAX_TENSORS ? n_tensors : n_kv),
                         n_tensors > GGUF_MAX_TENSORS ? GGUF_MAX_TENSORS : GGUF_MAX_KV);
    /* each tensor info takes at least 33 bytes, each metadata entry 14 */
    const uint64_t least = n_tensors * 33 + n_kv * 14, left = (uint64_t)(c->end - c->p);
    if (least > left)
        return gpt2_fail(c->err, GPT2_ERR_FORMAT,
                         "%s: truncated: %llu tensors and %llu metadata entries need at least %llu bytes, but the "
                         "file ends %llu bytes after the header", c->path, (unsigned long long)n_tensors,
                         (unsigned long long)n_kv, (unsigned long long)least, (unsigned long long)left);
    return GPT2_OK;
}

gpt2_status gguf_open(const char *path, gguf_file *f, gpt2_error *err) {
    void *map;
    size_t size;
    memset(f, 0, sizeof *f);
    gpt2_status st = text_map_file(path, &map, &size, err);
    return st ? st : gguf_open_map(path, map, size, f, err);
}

gpt2_status gguf_open_map(const char *path, void *map, size_t size, gguf_file *f, gpt2_error *err) {
    memset(f, 0, sizeof *f);
    f->map = map, f->map_size = size;
    gpt2_status st;
    if (!(f->path = strdup(path))) {
        st = gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (size < 24) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: truncated: the file is %zu bytes, GGUF's header is 24", path, size);
        goto fail;
    }
    cursor c = {f->map, f->map, (const uint8_t *)f->map + f->map_size, f->path, err};
    uint64_t v, n_tensors, n_kv;
    c.p += 4;
    if ((st = read_le(&c, 4, "the version", &v)) || (st = read_le(&c, 8, "the tensor count", &n_tensors)) ||
        (st = read_le(&c, 8, "the metadata count", &n_kv)))
        goto fail;
    f->version = (uint32_t)v;
    if ((st = check_header(&c, f, n_tensors, n_kv)) || (st = read_metadata(&c, f, n_kv)) ||
        (st = read_alignment(f, err)) || (st = read_tensors(&c, f, n_tensors)))
        goto fail;
    return GPT2_OK;
fail:
    gguf_close(f);
    return st;
}

void gguf_close(gguf_file *f) {
    for (size_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    free(f->kv);
    if (f->map) munmap(f->map, f->map_size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const gguf_kv *gguf_find(const gguf_file *f, const char *key) {
    const size_t n = strlen(key);
    for (size_t i = 0; i < f->n_kv; i++)
        if (f->kv[i].key_len == n && memcmp(f->kv[i].key, key, n) == 0) return &f->kv[i];
    return NULL;
}

/* --- typed getters ---------------------------------------------------------------- */

static const char *kv_type_text(const gguf_kv *kv, char *buf, size_t cap) {
    if (kv->type != GGUF_ARRAY) return type_names[kv->type];
    snprintf(buf, cap, "array of %s", type_names[kv->elem_type]);
    return buf;
}

static gpt2_status find_typed(const gguf_file *f, const char *key, int *present, const char *expected,
                              int (*ok)(const gguf_kv *), const gguf_kv **kv, gpt2_error *err) {
    *kv = gguf_find(f, key);
    if (present) *present = *kv != NULL;
    if (!*kv)
        return present ? GPT2_OK : gpt2_fail(err, GPT2_ERR_FORMAT, "%s: metadata '%s' is missing", f->path, key);
    if (ok(*kv)) return GPT2_OK;
    char buf[32];
    return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: metadata '%s' is a %s, expected %s", f->path, key,
                     kv_type_text(*kv, buf, sizeof buf), expected);
}

static int is_int(const gguf_kv *kv) { return kv->type <= GGUF_I32 || kv->type == GGUF_U64 || kv->type == GGUF_I64; }
static int is_float(const gguf_kv *kv) { return kv->type == GGUF_F32 || kv->type == GGUF_F64; }
static int is_str(const gguf_kv *kv) { return kv->type == GGUF_STRING; }
static int is_str_array(const gguf_kv *kv) { return kv->type == GGUF_ARRAY && kv->elem_type == GGUF_STRING; }

gpt2_status gguf_get_int(const gguf_file *f, const char *key, int64_t lo, int64_t hi, int *present, int64_t *out,
                         gpt2_error *err) {
    const gguf_kv *kv;
    gpt2_status st = find_typed(f, key, present, "an integer", is_int, &kv, err);
    if (st || !kv) return st;
    const int size = type_sizes[kv->type], is_signed = kv->type == GGUF_I8 || kv->type == GGUF_I16 ||
                                                       kv->type == GGUF_I32 || kv->type == GGUF_I64;
    uint64_t u = le(kv->val, size);
    if (is_signed && size < 8 && (u >> (8 * size - 1) & 1)) u |= ~(uint64_t)0 << (8 * size); /* sign-extend */
    if (!is_signed && u > (uint64_t)INT64_MAX) /* shown as unsigned, out of any range */
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: metadata '%s' is %llu, expected %lld to %lld", f->path, key,
                         (unsigned long long)u, (long long)lo, (long long)hi);
    const int64_t v = (int64_t)u;
    if (v < lo || v > hi)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: metadata '%s' is %lld, expected %lld to %lld", f->path, key,
                         (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return GPT2_OK;
}

gpt2_status gguf_get_float(const gguf_file *f, const char *key, double lo, double hi, int *present, double *out,
                           gpt2_error *err) {
    const gguf_kv *kv;
    gpt2_status st = find_typed(f, key, present, "a float32", is_float, &kv, err);
    if (st || !kv) return st;
    double v;
    if (kv->type == GGUF_F32) {
        uint32_t b = (uint32_t)le(kv->val, 4);
        float x;
        memcpy(&x, &b, 4);
        v = x;
    } else {
        uint64_t b = le(kv->val, 8);
        memcpy(&v, &b, 8);
    }
    if (!(v >= lo && v <= hi))
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: metadata '%s' is %g, expected %g to %g", f->path, key, v, lo, hi);
    *out = v;
    return GPT2_OK;
}

gpt2_status gguf_get_str(const gguf_file *f, const char *key, const char **s, size_t *len, gpt2_error *err) {
    const gguf_kv *kv;
    gpt2_status st = find_typed(f, key, NULL, "a string", is_str, &kv, err);
    if (st) return st;
    *s = (const char *)kv->val;
    *len = (size_t)kv->n;
    return GPT2_OK;
}

gpt2_status gguf_get_str_array(const gguf_file *f, const char *key, int *present, const gguf_kv **kv,
                               gpt2_error *err) {
    return find_typed(f, key, present, "an array of string", is_str_array, kv, err);
}
