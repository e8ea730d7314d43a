/* gpt2_chat_template.h — how a conversation becomes text for a model.
 *
 * A chat template is a handful of strings put around each turn, plus stop
 * strings that end a reply (gpt2_session.h, "Rendering", shows exactly how a
 * session uses them). Templates come built in ("transcript", "dialogpt",
 * "raw"), from a model directory's chat_template.json, or from any JSON file
 * of that format:
 *
 *     gpt2_chat_template *t;
 *     if (gpt2_chat_template_for_model("models/shakespeare", &t, &err) != GPT2_OK) ...
 *     sp.chat_template = t;   // gpt2_session_params copies it
 *     gpt2_chat_template_free(t);
 */
#ifndef GPT2_CHAT_TEMPLATE_H
#define GPT2_CHAT_TEMPLATE_H

#include "gpt2_status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GPT2_TEMPLATE_MAX_STOPS = 16,     /* stop strings per template */
    GPT2_TEMPLATE_MAX_STOP_LEN = 256, /* bytes per stop string */
    GPT2_TEMPLATE_MAX_NAME = 64       /* bytes of a template name */
};

/* How a conversation becomes text (see "Rendering" above). NULL strings count
 * as "". Built-ins, by name:
 *   "transcript" (base GPT-2): preamble "A conversation between a user and an
 *       assistant.\n\n", user_prefix "User: ", user_suffix "\n",
 *       assistant_prefix "Assistant:", assistant_suffix "\n", stop "\nUser:".
 *       The reply begins with the space the model writes after the colon.
 *   "dialogpt": no preamble or prefixes; every turn ends with <|endoftext|>
 *       (eot_after_turn), so a reply ends when the model emits it.
 *   "raw": nothing added; the model continues the text, stopping only at
 *       <|endoftext|> or a limit.
 * A model directory may hold its own in chat_template.json (see
 * gpt2_chat_template_load). */
typedef struct {
    const char *name;             /* non-empty, no spaces or control bytes, < GPT2_TEMPLATE_MAX_NAME bytes */
    const char *description;      /* one line for the UI; may be "" */
    const char *preamble;         /* text before the first turn */
    const char *user_prefix;      /* before each user message */
    const char *user_suffix;      /* after each user message */
    const char *assistant_prefix; /* before each reply; evaluated with the message */
    const char *assistant_suffix; /* after each reply, evaluated when the next turn starts */
    const char *const *stop;      /* n_stop non-empty strings; a reply ends before the first */
    int n_stop;                   /* 0 .. GPT2_TEMPLATE_MAX_STOPS */
    int eot_after_turn;           /* non-zero: <|endoftext|> ends every turn (needs a
                                     vocabulary that has it) */
} gpt2_chat_template;

/* A built-in template by name ("transcript", "dialogpt", "raw"), or NULL.
 * Static: never free it. */
const gpt2_chat_template *gpt2_chat_template_builtin(const char *name);

/* The i-th built-in's name (i from 0), NULL past the last: for completion. */
const char *gpt2_chat_template_builtin_name(int i);

/* Checks the rules in the struct's comments. GPT2_ERR_INVALID_ARG with a
 * message naming the field otherwise. (Whether the model has <|endoftext|>
 * is checked when a session takes the template.) */
gpt2_status gpt2_chat_template_check(const gpt2_chat_template *t, gpt2_error *err);

/* A deep copy in one allocation (free it with gpt2_chat_template_free); NULL
 * strings become "". Fails on a template that gpt2_chat_template_check rejects. */
gpt2_status gpt2_chat_template_copy(const gpt2_chat_template *t, gpt2_chat_template **out, gpt2_error *err);

/* Loads a JSON template file:
 *     { "name": "play", "description": "...", "preamble": "",
 *       "user_prefix": "ROMEO:\n", "user_suffix": "\n\n",
 *       "assistant_prefix": "JULIET:\n", "assistant_suffix": "\n\n",
 *       "stop": ["\n\n"], "eot_after_turn": false }
 * "name" is required; the strings default to "", "stop" to [] and
 * "eot_after_turn" to false. Any other field, a wrong type, a NUL inside a
 * string or a value breaking the rules above fails with GPT2_ERR_FORMAT and a
 * message naming the file, the field, what was expected and what was found
 * (a missing file: GPT2_ERR_IO). Hugging Face's Jinja chat templates (a
 * "chat_template" field) are recognised and refused by name. */
gpt2_status gpt2_chat_template_load(const char *path, gpt2_chat_template **out, gpt2_error *err);

/* The template a model directory asks for: dir/chat_template.json when that
 * file exists (its errors are returned, not skipped), else a copy of
 * "transcript". A model file (ckpt.pt, gpt2_124M.bin) asks through its
 * directory. Free with gpt2_chat_template_free. */
gpt2_status gpt2_chat_template_for_model(const char *model_dir, gpt2_chat_template **out, gpt2_error *err);

/* Frees a template from copy, load or for_model; NULL is allowed. */
void gpt2_chat_template_free(gpt2_chat_template *t);

#ifdef __cplusplus
}
#endif
#endif
