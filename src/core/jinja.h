/* jinja.h — a small Jinja interpreter for chat templates (library-private).
 *
 * Models ship their chat format as a Jinja template (tokenizer_config.json's
 * "chat_template", a GGUF's tokenizer.chat_template). Hugging Face renders it
 * with jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True,
 * lstrip_blocks=True) plus the loopcontrols extension, its own `tojson`
 * filter (json.dumps, ensure_ascii=False) and the globals raise_exception and
 * strftime_now. This module renders the same text, byte for byte, for the
 * subset of Jinja that chat templates use (docs/library.md lists it; anything
 * else is refused by name, never guessed):
 *
 *     jinja_template *t;
 *     if (jinja_parse("chat_template", src, strlen(src), &t, &err) != GPT2_OK) ...  // syntax: LINE:COL
 *     const char *roles[] = {"system", "user"}, *contents[] = {"Be brief.", "Hi!"};
 *     char *text; size_t n;
 *     if (jinja_render_chat(t, roles, contents, 2, 1, "<s>", "</s>", NULL, &text, &n, &err) != GPT2_OK) ...
 *     free(text);
 *     jinja_free(t);
 *
 * A parsed template is immutable: several threads may render it at once.
 * Numbers read and print as Python's whatever LC_NUMERIC the application set:
 * a parse and a render switch their own thread to the C locale (uselocale).
 * Every render is bounded (jinja_opts: output, memory, steps, call depth), so
 * a hostile template fails with a message instead of hanging or exhausting
 * memory; parsing bounds the template's nesting (JINJA_MAX_NESTING).
 */
#ifndef GPT2_CORE_JINJA_H
#define GPT2_CORE_JINJA_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "gpt2_status.h"

/* The default bounds of one render (jinja_default_opts), and of a template. */
#define JINJA_MAX_OUTPUT ((size_t)16 << 20)  /* bytes of rendered text */
#define JINJA_MAX_MEMORY ((size_t)256 << 20) /* bytes of values alive during a render */
#define JINJA_MAX_STEPS 50000000L            /* expressions evaluated + loop turns + bytes copied / 64 */
#define JINJA_MAX_CALLS 40                   /* macro calls inside macro calls */
#define JINJA_MAX_NESTING 96                 /* depth of a template's syntax tree (blocks, brackets, operators) */
#define JINJA_MAX_SOURCE ((size_t)1 << 20)   /* bytes of template source */

typedef struct jinja_template jinja_template;

/* Parses src[0..len) (UTF-8; "\r\n" and "\r" read as "\n"; one final newline
 * dropped, as Jinja does). name starts every message ("chat_template").
 * Syntax errors: GPT2_ERR_FORMAT, "NAME:LINE:COL: what was expected, what was
 * found". Unknown tags, filters and tests are named; so are the parts of
 * Jinja this interpreter does not run (include, call blocks, ...). A filter or
 * test used only inside an {% if %} fails when reached, as in Jinja. */
gpt2_status jinja_parse(const char *name, const char *src, size_t len, jinja_template **out, gpt2_error *err);

/* Frees a template; NULL is allowed. */
void jinja_free(jinja_template *t);

/* What a render may use besides the variables. */
typedef struct {
    const struct tm *now; /* what strftime_now(fmt) formats; NULL: the local time at the call */
    size_t max_output;    /* JINJA_MAX_OUTPUT */
    size_t max_memory;    /* JINJA_MAX_MEMORY */
    long max_steps;       /* JINJA_MAX_STEPS */
    int max_calls;        /* JINJA_MAX_CALLS */
} jinja_opts;

jinja_opts jinja_default_opts(void);

/* Renders t with the variables of vars (a cJSON object, or NULL for none):
 * messages, add_generation_prompt, bos_token, tools, ... JSON values become
 * Python's (a number with an integral value becomes an int: cJSON keeps no
 * difference between 2 and 2.0). opts NULL: jinja_default_opts(). On success
 * *out is malloc'd text with a NUL after *len bytes (the text may hold NULs
 * itself only if the variables do not: cJSON strings cannot).
 * Failures (*out NULL):
 *   GPT2_ERR_TEMPLATE  raise_exception(msg): err->msg is msg alone, verbatim
 *                      (through gpt2_text_escape, cut at GPT2_ERROR_MSG_MAX;
 *                      "raise_exception with an empty message" for "");
 *                      any other runtime error (an undefined value used, a
 *                      type error, a bound exceeded): "NAME:LINE:COL: message",
 *                      with Jinja's wording where Jinja has one;
 *   GPT2_ERR_NOMEM     malloc failed. */
gpt2_status jinja_render(const jinja_template *t, const cJSON *vars, const jinja_opts *opts, char **out, size_t *len,
                         gpt2_error *err);

/* A conversation as Hugging Face's apply_chat_template passes it: messages =
 * [{role, content}] of the n turns (a NULL string reads as ""),
 * add_generation_prompt, tools = None, documents = None, and bos_token /
 * eos_token when not NULL (left undefined otherwise, as a tokenizer without
 * one does). opts and the results as jinja_render's. */
gpt2_status jinja_render_chat(const jinja_template *t, const char *const *roles, const char *const *contents, int n,
                              int add_generation_prompt, const char *bos, const char *eos, const jinja_opts *opts,
                              char **out, size_t *len, gpt2_error *err);

#endif
