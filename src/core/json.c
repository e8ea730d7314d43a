/* json.c — small helpers for the library's JSON readers: one wording of a
 * value's type for every message (model, tokenizer, templates, sessions). */
#include "json.h"

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
