/* viz/json.h — JSON output built with cJSON, for the subcommands' --json and
 * the exports (viz/export.h). Two rules make any model's output parse:
 * - text (a token, a file or model name) is a JSON string; where its bytes
 *   are not valid UTF-8 or hold a NUL, those read U+FFFD and a sibling
 *   KEY_bytes lists every byte (0..255), so the exact bytes come back;
 * - a NaN or infinite number is null with a sibling KEY_nonfinite: "nan",
 *   "inf" or "-inf".
 * An allocation that fails is remembered: viz_json_failed() says so (and
 * forgets it) before the document is printed or written.
 *
 *     cJSON *root = cJSON_CreateObject();
 *     viz_json_tokens(root, tok, ids, n);
 *     viz_json_number(root, "loss", loss);
 *     if (viz_json_failed()) ...   // out of memory somewhere above
 */
#ifndef GPTSCOPE_VIZ_JSON_H
#define GPTSCOPE_VIZ_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "gpt2.h"

void viz_json_text(cJSON *obj, const char *key, const char *s, size_t n);
void viz_json_number(cJSON *obj, const char *key, double v);

/* obj takes item under key (item freed if that fails); null under key. */
void viz_json_add(cJSON *obj, const char *key, cJSON *item);
void viz_json_null(cJSON *obj, const char *key);
/* The array arr takes item (item freed if that fails). */
void viz_json_append(cJSON *arr, cJSON *item);

/* A new object appended to the array arr (NULL if that failed). */
cJSON *viz_json_new_object(cJSON *arr);

/* One token's text under key (with key_bytes when needed). */
void viz_json_token(cJSON *obj, const char *key, const gpt2_tokenizer *tok, int32_t id);

/* "ids": [...], "tokens": [...] and, when some token's text is not exact,
 * "tokens_bytes": [null or [bytes], ...] with one entry per token. */
void viz_json_tokens(cJSON *obj, const gpt2_tokenizer *tok, const int32_t *ids, size_t n);

/* key: rows x cols floats as nested arrays (row-major w); the cells that are
 * not finite are null and listed in key_nonfinite as [row, col, "nan"]. */
void viz_json_matrix(cJSON *obj, const char *key, const float *w, int rows, int cols);

/* Whether some call above ran out of memory since the last call; clears it. */
int viz_json_failed(void);

#endif
