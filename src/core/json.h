/* json.h — small helpers for the library's JSON readers (library-private). */
#ifndef GPT2_CORE_JSON_H
#define GPT2_CORE_JSON_H

#include <cjson/cJSON.h>

/* What a JSON value is, for messages: "a string", "an array", ... "nothing"
 * for NULL (a missing key). */
const char *json_type_name(const cJSON *j);

#endif
