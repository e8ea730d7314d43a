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

#include "gpt2_model.h"
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
    /* The model's own template: Jinja source, as tokenizer_config.json's
     * chat_template. When set, the strings above (but name and description)
     * are unused: the conversation is rendered by it as Hugging Face's
     * apply_chat_template renders it (gpt2_session.h, "Rendering"), and a
     * reply ends at a token that ends a turn (gpt2_model_is_end, or the
     * special token the template puts after a reply). */
    const char *jinja;
    const char *bos_token;        /* the texts the Jinja template reads as bos_token and */
    const char *eos_token;        /* eos_token; "" or NULL: none (left undefined) */
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

/* The model's own template (gpt2_model_chat_template), named "model", with the
 * model's bos/eos token texts; *out NULL (and GPT2_OK) when the model carries
 * none. A template Jinja cannot parse fails with GPT2_ERR_FORMAT, naming the
 * line and column. Free with gpt2_chat_template_free. */
gpt2_status gpt2_chat_template_from_model(const gpt2_model *m, gpt2_chat_template **out, gpt2_error *err);

/* The template a loaded model asks for: model_path's chat_template.json when
 * there is one (gptscope's own format, chosen by whoever put it there), else
 * the model's own Jinja template (gpt2_chat_template_from_model), else a copy
 * of "transcript". */
gpt2_status gpt2_chat_template_of_model(const gpt2_model *m, const char *model_path, gpt2_chat_template **out,
                                        gpt2_error *err);

/* Frees a template from copy, load or for_model; NULL is allowed. */
void gpt2_chat_template_free(gpt2_chat_template *t);

#ifdef __cplusplus
}
#endif
#endif
