/* session_internal.h — what session.c needs from chat_template.c (library-private). */
#ifndef GPT2_CORE_SESSION_INTERNAL_H
#define GPT2_CORE_SESSION_INTERNAL_H

#include <cjson/cJSON.h>

#include "gpt2_session.h"

/* Builds a template from a parsed JSON object (the chat_template.json format).
 * Messages start with where (e.g. "models/x/chat_template.json: " or
 * "chat.json: template.") followed by the field name. On success *out is a
 * gpt2_chat_template_copy-style allocation. GPT2_ERR_FORMAT otherwise. */
gpt2_status chat_template_from_json(const cJSON *obj, const char *where, gpt2_chat_template **out,
                                    gpt2_error *err);

/* Adds the template's fields to a JSON object (the same format). 0 on
 * allocation failure. */
int chat_template_to_json(const gpt2_chat_template *t, cJSON *obj);

/* Reads path (at most max_bytes; `what` names it in messages) and parses it
 * as one JSON value: GPT2_ERR_IO if it cannot be read, GPT2_ERR_FORMAT for
 * bad JSON, trailing text or a NUL inside a string, naming path and the byte. */
gpt2_status chat_json_read(const char *path, size_t max_bytes, const char *what, cJSON **out, gpt2_error *err);

/* A JSON value's type in words ("a number", "a string", ...), for messages. */

#endif
