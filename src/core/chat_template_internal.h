/* chat_template_internal.h — chat templates as JSON, for the session file
 * (library-private; chat_template.c). */
#ifndef GPT2_CORE_CHAT_TEMPLATE_INTERNAL_H
#define GPT2_CORE_CHAT_TEMPLATE_INTERNAL_H

#include <cjson/cJSON.h>

#include "gpt2_session.h"
#include "json.h"

/* Builds a template from a parsed JSON object (the chat_template.json
 * format); messages name src's path and prefix, then the field. On success
 * *out is a gpt2_chat_template_copy-style allocation; src->code otherwise. */
gpt2_status chat_template_from_json(const cJSON *obj, const json_src *src, gpt2_chat_template **out);

/* Adds the template's fields to a JSON object (the same format). 0 on
 * allocation failure. */
int chat_template_to_json(const gpt2_chat_template *t, cJSON *obj);

#endif
