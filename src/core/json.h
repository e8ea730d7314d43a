/* json.h — the library's one way of reading JSON files (library-private), and of
 * writing the small ones (json_write_file).
 *
 * Every reader (config.json, vocab.json, chat templates, session files, the
 * safetensors header) parses with json_read_file / json_parse and takes its
 * values through the typed getters below, so that every message has the same
 * shape — "PATH: FIELD: expected WHAT, found WHAT" — and every range check is
 * written once.
 *
 *     json_src src = {path, "sampler.", GPT2_ERR_FORMAT, err};
 *     TRY(json_get_float(&src, obj, "top_p", 0, 1, 1, &p.top_p));
 */
#ifndef GPT2_CORE_JSON_H
#define GPT2_CORE_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "gpt2_status.h"

/* Where values come from, for messages. */
typedef struct {
    const char *path;   /* the file, first in every message */
    const char *prefix; /* written before each key ("sampler.", "turns[2]."); NULL: none */
    gpt2_status code;   /* what a bad value fails with (GPT2_ERR_FORMAT, _CONFIG, ...) */
    gpt2_error *err;
} json_src;

/* What a JSON value is, for messages: "a string", "an array", ... "nothing"
 * for NULL (a missing key). */
const char *json_type_name(const cJSON *j);

/* Parses text[0..len) as one JSON value with nothing but whitespace after it
 * and no NUL inside a string; fails with code, naming path and the byte where
 * parsing stopped. */
gpt2_status json_parse(const char *path, const char *text, size_t len, gpt2_status code, cJSON **out,
                       gpt2_error *err);

/* Reads path (at most max_bytes; `what` names the file in messages) and
 * json_parse's it; the root must then be an object. */
gpt2_status json_read_file(const char *path, size_t max_bytes, gpt2_status code, const char *what, cJSON **out,
                           gpt2_error *err);

/* Fails with "PATH: PREFIXKEY: expected EXPECTED, found FOUND". */
gpt2_status json_bad(const json_src *s, const char *key, const char *expected, const char *found);

/* Is key present with a value other than null? */
int json_has(const cJSON *obj, const char *key);

/* Fails on the first key of obj not among keys[0..n), as "unknown field". */
gpt2_status json_only_keys(const json_src *s, const cJSON *obj, const char *const *keys, int n);

/* The typed getters: key must be present (else "missing (expected ...)"),
 * of the type, and in range; *out is written only on success. */
gpt2_status json_get(const json_src *s, const cJSON *obj, const char *key, const char *expected,
                     const cJSON **out);
gpt2_status json_get_int(const json_src *s, const cJSON *obj, const char *key, long lo, long hi, int *out);
/* A number in [lo, hi], checked as the float it becomes (1e-300 is > 0 but
 * rounds to 0); open_lo excludes lo itself. */
gpt2_status json_get_float(const json_src *s, const cJSON *obj, const char *key, double lo, int open_lo, double hi,
                           float *out);
/* An unsigned 64-bit integer written as a string of decimal digits (JSON
 * numbers are doubles: exact only to 2^53). */
gpt2_status json_get_u64(const json_src *s, const cJSON *obj, const char *key, uint64_t *out);
gpt2_status json_get_str(const json_src *s, const cJSON *obj, const char *key, const char **out);
gpt2_status json_get_bool(const json_src *s, const cJSON *obj, const char *key, int *out);
gpt2_status json_get_object(const json_src *s, const cJSON *obj, const char *key, const cJSON **out);
gpt2_status json_get_array(const json_src *s, const cJSON *obj, const char *key, const char *expected,
                           const cJSON **out);

/* --- writing ----------------------------------------------------------- */

/* The shortest decimal that reads back as f (1e-05f as 1e-05, not
 * 9.99999974737875e-06), as the double cJSON prints. */
double json_short_float(float f);

/* Writes j (pretty-printed, then a newline) as the file path, replaced
 * atomically (gpt2_fileio); j is freed whatever happens (NULL: out of memory). */
gpt2_status json_write_file(const char *path, cJSON *j, gpt2_error *err);

#endif
