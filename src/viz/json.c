/* json.c — JSON output built with cJSON (never printf'd): the subcommands'
 * --json and the exports (viz/export.c) share it.
 *
 * Two rules make any model's output parse (docs/commands.md, "JSON output"):
 * - text (a token, a file or model name) is a JSON string; where its bytes
 *   are not valid UTF-8, or hold a NUL (cJSON strings end at one), those bytes
 *   read U+FFFD and a sibling KEY_bytes lists every byte of the text as an
 *   integer, so the exact bytes always come back;
 * - JSON has no NaN or infinity: such a number is null, and a sibling
 *   KEY_nonfinite says which ("nan", "inf", "-inf").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "viz/json.h"

static int json_failed; /* some cJSON call ran out of memory */

static cJSON *check(cJSON *item) {
    if (!item) json_failed = 1;
    return item;
}

/* obj (or arr) takes item; on failure item is freed and the failure remembered */
static void add(cJSON *obj, const char *key, cJSON *item) {
    if (!check(item) || !obj || !cJSON_AddItemToObject(obj, key, item)) json_failed = 1, cJSON_Delete(item);
}

static void append(cJSON *arr, cJSON *item) {
    if (!check(item) || !arr || !cJSON_AddItemToArray(arr, item)) json_failed = 1, cJSON_Delete(item);
}

void viz_json_add(cJSON *obj, const char *key, cJSON *item) { add(obj, key, item); }

void viz_json_null(cJSON *obj, const char *key) { add(obj, key, cJSON_CreateNull()); }

void viz_json_append(cJSON *arr, cJSON *item) { append(arr, item); }

cJSON *viz_json_new_object(cJSON *arr) {
    cJSON *obj = cJSON_CreateObject();
    append(arr, obj);
    return json_failed ? NULL : obj;
}

/* s[0, n) as a JSON string item: bytes that are not valid UTF-8 and NULs as
 * U+FFFD. *exact says whether the string is s itself. */
static cJSON *text_item(const char *s, size_t n, int *exact) {
    char *out = malloc(3 * n + 16), *o = out; /* each byte gives at most 3 */
    *exact = 1;
    if (!out) return check(NULL);
    gpt2_utf8_stream us = {0};
    for (size_t at = 0; at <= n;) { /* runs between NULs; a NUL ends any pending character */
        const char *nul = memchr(s + at, '\0', n - at);
        size_t run = nul ? (size_t)(nul - (s + at)) : n - at;
        o += gpt2_utf8_stream_push(&us, s + at, run, o);
        o += gpt2_utf8_stream_flush(&us, o);
        if (!nul) break;
        memcpy(o, "\xEF\xBF\xBD", 3);
        o += 3;
        at += run + 1;
    }
    *o = '\0';
    *exact = (size_t)(o - out) == n && memcmp(out, s, n) == 0;
    cJSON *item = check(cJSON_CreateString(out));
    free(out);
    return item;
}

static cJSON *bytes_item(const char *s, size_t n) {
    cJSON *arr = check(cJSON_CreateArray());
    for (size_t i = 0; arr && i < n; i++) append(arr, cJSON_CreateNumber((unsigned char)s[i]));
    return arr;
}

static void sibling_key(char *buf, size_t cap, const char *key, const char *suffix) {
    snprintf(buf, cap, "%s_%s", key, suffix);
}

void viz_json_text(cJSON *obj, const char *key, const char *s, size_t n) {
    int exact;
    add(obj, key, text_item(s, n, &exact));
    if (!exact) {
        char k[128];
        sibling_key(k, sizeof k, key, "bytes");
        add(obj, k, bytes_item(s, n));
    }
}

static const char *nonfinite_name(double v) { return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

void viz_json_number(cJSON *obj, const char *key, double v) {
    if (isfinite(v)) {
        add(obj, key, cJSON_CreateNumber(v));
        return;
    }
    char k[128];
    sibling_key(k, sizeof k, key, "nonfinite");
    add(obj, key, cJSON_CreateNull());
    add(obj, k, cJSON_CreateString(nonfinite_name(v)));
}

void viz_json_tokens(cJSON *obj, const gpt2_tokenizer *tok, const int32_t *ids, size_t n) {
    cJSON *jids = check(cJSON_CreateArray()), *texts = check(cJSON_CreateArray()),
          *bytes = check(cJSON_CreateArray());
    int all_exact = 1;
    for (size_t i = 0; jids && texts && bytes && i < n; i++) {
        size_t bl = 0;
        const char *b = gpt2_tokenizer_token_bytes(tok, ids[i], &bl);
        int exact;
        append(jids, cJSON_CreateNumber(ids[i]));
        append(texts, text_item(b ? b : "", b ? bl : 0, &exact));
        append(bytes, exact ? cJSON_CreateNull() : bytes_item(b, bl));
        all_exact &= exact;
    }
    add(obj, "ids", jids);
    add(obj, "tokens", texts);
    if (all_exact) cJSON_Delete(bytes); /* "tokens_bytes" only when some token needs it */
    else add(obj, "tokens_bytes", bytes);
}

void viz_json_token(cJSON *obj, const char *key, const gpt2_tokenizer *tok, int32_t id) {
    size_t bl = 0;
    const char *b = gpt2_tokenizer_token_bytes(tok, id, &bl);
    viz_json_text(obj, key, b ? b : "", b ? bl : 0);
}

void viz_json_matrix(cJSON *obj, const char *key, const float *w, int rows, int cols) {
    cJSON *m = check(cJSON_CreateArray()), *bad = check(cJSON_CreateArray());
    for (int i = 0; m && bad && i < rows; i++) {
        cJSON *row = check(cJSON_CreateArray());
        for (int j = 0; row && j < cols; j++) {
            const double v = w[(size_t)i * cols + j];
            append(row, isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull());
            if (isfinite(v)) continue;
            cJSON *where = check(cJSON_CreateArray()); /* [i, j, "nan"] */
            append(where, cJSON_CreateNumber(i));
            append(where, cJSON_CreateNumber(j));
            append(where, cJSON_CreateString(nonfinite_name(v)));
            append(bad, where);
        }
        append(m, row);
    }
    add(obj, key, m);
    char k[128];
    sibling_key(k, sizeof k, key, "nonfinite");
    if (cJSON_GetArraySize(bad) > 0) add(obj, k, bad);
    else cJSON_Delete(bad);
}

int viz_json_failed(void) {
    const int failed = json_failed;
    json_failed = 0;
    return failed;
}
