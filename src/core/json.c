/* json.c — the library's JSON reading: parse a file, then typed getters
 * with one message shape ("PATH: FIELD: expected ..., found ..."); and
 * the writing of small JSON files. */
#include "json.h"

#include "error.h"
#include "gpt2_fileio.h"
#include "textio.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *json_type_name(const cJSON *j) {
    if (!j) return "nothing";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "an invalid value";
}

static int by_key(const void *x, const void *y) {
    return strcmp((*(const cJSON *const *)x)->string, (*(const cJSON *const *)y)->string);
}

/* A key given twice in one object, anywhere under j (cJSON keeps both and
 * its getters return the first, while another reader may take the last):
 * that key's item, else NULL. keys: room for the largest object's items. */
static const cJSON *duplicate_key(const cJSON *j, const cJSON **keys, int depth) {
    if (depth > 10000) return NULL; /* cJSON's own nesting limit is far below */
    int n = 0;
    for (const cJSON *c = j->child; c; c = c->next) {
        if (cJSON_IsObject(j) && c->string) keys[n++] = c;
    }
    if (n > 1) {
        qsort(keys, (size_t)n, sizeof *keys, by_key);
        for (int i = 1; i < n; i++)
            if (!strcmp(keys[i - 1]->string, keys[i]->string)) return keys[i];
    }
    for (const cJSON *c = j->child; c; c = c->next) {
        const cJSON *d = duplicate_key(c, keys, depth + 1);
        if (d) return d;
    }
    return NULL;
}

static int max_children(const cJSON *j) {
    int n = 0, most = 0;
    for (const cJSON *c = j->child; c; c = c->next) {
        n++;
        int m = max_children(c);
        if (m > most) most = m;
    }
    return n > most ? n : most;
}

gpt2_status json_parse(const char *path, const char *text, size_t len, gpt2_status code, cJSON **out,
                       gpt2_error *err) {
    *out = NULL;
    long nul = text_json_nul(text, len);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    long at = end && end >= text && end <= text + len ? (long)(end - text) : -1;
    if (root)
        while (at >= 0 && (size_t)at < len && text[at] && strchr(" \t\r\n", text[at])) at++;
    if (!root) return gpt2_fail(err, code, "%s: not valid JSON (parse error at byte %ld)", path, at);
    if ((size_t)at != len) {
        cJSON_Delete(root);
        return gpt2_fail(err, code, "%s: not valid JSON (text after the value at byte %ld)", path, at);
    }
    if (nul >= 0) {
        cJSON_Delete(root);
        return gpt2_fail(err, code, "%s: a string holds a NUL character (at byte %ld)", path, nul);
    }
    const cJSON **keys = malloc(((size_t)max_children(root) + 1) * sizeof *keys);
    if (!keys) {
        cJSON_Delete(root);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    }
    const cJSON *dup = duplicate_key(root, keys, 0);
    free(keys);
    if (dup) {
        char shown[160];
        gpt2_text_escape(dup->string, strlen(dup->string), shown, sizeof shown);
        gpt2_fail(err, code, "%s: the key \"%s\" appears twice in one object (which one counts is not clear)", path,
                  shown);
        cJSON_Delete(root);
        return code;
    }
    *out = root;
    return GPT2_OK;
}

gpt2_status json_read_file(const char *path, size_t max_bytes, gpt2_status code, const char *what, cJSON **out,
                           gpt2_error *err) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    gpt2_status st = text_read_file(path, max_bytes, code, what, &text, &len, err);
    if (st != GPT2_OK) return st;
    st = json_parse(path, text, len, code, out, err);
    free(text);
    if (st == GPT2_OK && !cJSON_IsObject(*out)) {
        st = gpt2_fail(err, code, "%s: expected a JSON object, found %s", path, json_type_name(*out));
        cJSON_Delete(*out);
        *out = NULL;
    }
    return st;
}

gpt2_status json_bad(const json_src *s, const char *key, const char *expected, const char *found) {
    return gpt2_fail(s->err, s->code, "%s: %s%s: expected %s, found %s", s->path, s->prefix ? s->prefix : "", key,
                     expected, found);
}

int json_has(const cJSON *obj, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    return j && !cJSON_IsNull(j);
}

gpt2_status json_only_keys(const json_src *s, const cJSON *obj, const char *const *keys, int n) {
    const cJSON *it;
    char shown[TEXT_SHOW_BUF];
    cJSON_ArrayForEach(it, obj) {
        const char *k = it->string ? it->string : "";
        int ok = 0;
        for (int i = 0; i < n && !ok; i++) ok = strcmp(k, keys[i]) == 0;
        if (!ok)
            return gpt2_fail(s->err, s->code, "%s: %s%s: unknown field", s->path, s->prefix ? s->prefix : "",
                             text_show(k, strlen(k), shown));
    }
    return GPT2_OK;
}

gpt2_status json_get(const json_src *s, const cJSON *obj, const char *key, const char *expected,
                     const cJSON **out) {
    *out = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!*out)
        return gpt2_fail(s->err, s->code, "%s: %s%s: missing (expected %s)", s->path, s->prefix ? s->prefix : "",
                         key, expected);
    return GPT2_OK;
}

/* A number that failed a range check, as found. */
static const char *number_shown(double v, char buf[32]) {
    snprintf(buf, 32, "%.17g", v);
    return buf;
}

gpt2_status json_get_int(const json_src *s, const cJSON *obj, const char *key, long lo, long hi, int *out) {
    char want[96], found[32];
    snprintf(want, sizeof want, "an integer in [%ld, %ld]", lo, hi);
    const cJSON *j;
    gpt2_status st = json_get(s, obj, key, want, &j);
    if (st != GPT2_OK) return st;
    if (!cJSON_IsNumber(j)) return json_bad(s, key, want, json_type_name(j));
    double v = j->valuedouble;
    if (!(v >= (double)lo && v <= (double)hi) || v != floor(v)) return json_bad(s, key, want, number_shown(v, found));
    *out = (int)v;
    return GPT2_OK;
}

gpt2_status json_get_float(const json_src *s, const cJSON *obj, const char *key, double lo, int open_lo, double hi,
                           float *out) {
    char want[96], found[32];
    snprintf(want, sizeof want, "a number in %c%g, %g]", open_lo ? '(' : '[', lo, hi);
    const cJSON *j;
    gpt2_status st = json_get(s, obj, key, want, &j);
    if (st != GPT2_OK) return st;
    if (!cJSON_IsNumber(j)) return json_bad(s, key, want, json_type_name(j));
    double v = j->valuedouble;
    float f = (float)v;
    if (!(v >= lo && v <= hi) || (open_lo && !((double)f > lo))) return json_bad(s, key, want, number_shown(v, found));
    *out = f;
    return GPT2_OK;
}

gpt2_status json_get_u64(const json_src *s, const cJSON *obj, const char *key, uint64_t *out) {
    const char *want = "a string of decimal digits (an unsigned 64-bit integer)";
    const cJSON *j;
    gpt2_status st = json_get(s, obj, key, want, &j);
    if (st != GPT2_OK) return st;
    if (!cJSON_IsString(j)) return json_bad(s, key, want, json_type_name(j));
    const char *v = j->valuestring;
    size_t n = strlen(v);
    uint64_t x = 0;
    int ok = n > 0 && n <= 20;
    for (size_t i = 0; ok && i < n; i++) {
        unsigned d = (unsigned)(v[i] - '0');
        if (d > 9 || x > (UINT64_MAX - d) / 10) ok = 0;
        else x = x * 10 + d;
    }
    if (!ok) {
        char shown[TEXT_SHOW_BUF], found[TEXT_SHOW_BUF + 2];
        snprintf(found, sizeof found, "\"%s\"", text_show(v, n, shown));
        return json_bad(s, key, want, found);
    }
    *out = x;
    return GPT2_OK;
}

/* json_get of a value of one cJSON type. */
static gpt2_status get_typed(const json_src *s, const cJSON *obj, const char *key, const char *want,
                             cJSON_bool (*is)(const cJSON *), const cJSON **out) {
    gpt2_status st = json_get(s, obj, key, want, out);
    if (st == GPT2_OK && !is(*out)) st = json_bad(s, key, want, json_type_name(*out));
    return st;
}

gpt2_status json_get_str(const json_src *s, const cJSON *obj, const char *key, const char **out) {
    const cJSON *j;
    gpt2_status st = get_typed(s, obj, key, "a string", cJSON_IsString, &j);
    if (st == GPT2_OK) *out = j->valuestring;
    return st;
}

gpt2_status json_get_bool(const json_src *s, const cJSON *obj, const char *key, int *out) {
    const cJSON *j;
    gpt2_status st = get_typed(s, obj, key, "true or false", cJSON_IsBool, &j);
    if (st == GPT2_OK) *out = cJSON_IsTrue(j);
    return st;
}

gpt2_status json_get_object(const json_src *s, const cJSON *obj, const char *key, const cJSON **out) {
    return get_typed(s, obj, key, "an object", cJSON_IsObject, out);
}

gpt2_status json_get_array(const json_src *s, const cJSON *obj, const char *key, const char *expected,
                           const cJSON **out) {
    return get_typed(s, obj, key, expected ? expected : "an array", cJSON_IsArray, out);
}

double json_short_float(float f) {
    char buf[32];
    if (!isfinite(f)) return f;
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) break;
    }
    return strtod(buf, NULL);
}

gpt2_status json_write_file(const char *path, cJSON *j, gpt2_error *err) {
    char *text = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    const size_t n = text ? strlen(text) : 0;
    char *line = text ? realloc(text, n + 2) : NULL;
    if (!line) {
        free(text);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    }
    line[n] = '\n', line[n + 1] = '\0';
    gpt2_status st = gpt2_fileio_write_bytes(path, line, n + 1, err);
    free(line);
    return st;
}
