/* gpt2_status.h — status codes and error messages shared by every libgpt2 module.
 *
 * The library never prints and never exits. A call that can fail returns a
 * gpt2_status and, when the caller passes a gpt2_error, fills it with one line
 * that names the file or object, what was expected and what was found:
 *
 *     gpt2_error err;
 *     gpt2_model *m;
 *     if (gpt2_model_load("models/gpt2", &m, &err) != GPT2_OK) {
 *         fprintf(stderr, "gptscope: %s\n", err.msg);
 *         return 1;
 *     }
 *
 * Passing NULL for the error is allowed; the status alone is then returned.
 */
#ifndef GPT2_STATUS_H
#define GPT2_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    GPT2_OK = 0,
    GPT2_ERR_IO,           /* a file could not be opened, read, mapped or written */
    GPT2_ERR_FORMAT,       /* a file's contents are malformed (safetensors, JSON, merges) */
    GPT2_ERR_CONFIG,       /* config.json is missing values or disagrees with the weights */
    GPT2_ERR_TOKENIZER,    /* vocabulary/merges unusable, or a token id out of range */
    GPT2_ERR_CONTEXT_FULL, /* more tokens than the context window holds */
    GPT2_ERR_INVALID_ARG,  /* a caller passed a value outside its documented range */
    GPT2_ERR_NOMEM,        /* an allocation failed */
    GPT2_CANCELLED,        /* a cancel callback asked to stop; state is consistent */
    GPT2_ERR_TEMPLATE      /* a chat template refused to render: its raise_exception, or an error
                              in running it (an undefined value used, a bound exceeded) */
} gpt2_status;

enum { GPT2_ERROR_MSG_MAX = 512 };

typedef struct {
    gpt2_status status;
    char msg[GPT2_ERROR_MSG_MAX]; /* one line, no trailing newline */
} gpt2_error;

/* A short fixed name for a status, e.g. "format error". */
const char *gpt2_status_name(gpt2_status status);

/* Writes n bytes of s to out (cap bytes, always NUL-terminated) in a form
 * fit for a one-line message on a terminal, so that untrusted bytes (a file
 * name, a value from a file) can never move the cursor or retitle a window:
 * valid UTF-8 passes through; newline, tab and carriage return read \n \t
 * \r; every other control character (C0, DEL, C1 U+0080..U+009F) and every
 * byte that is not part of valid UTF-8 reads \xNN, byte by byte. Backslashes
 * stay as they are, so escaping a message twice changes nothing. Output that
 * does not fit is cut between characters and ends in "...". Every gpt2_error
 * message has been through it. Returns out. */
char *gpt2_text_escape(const char *s, size_t n, char *out, size_t cap);

/* The two callback shapes of every long call in the library (a model load,
 * a prefill, a session load, a BPE training, a speculative iteration, a
 * training step); a gpt2_progress_fn is always named progress, a
 * gpt2_cancel_fn always cancel.
 *
 * progress: told how much of the call's work is done (n_done of n_total, in
 * the call's own unit: tokens, merges), between units of work; returns
 * non-zero to cancel, and the call then returns GPT2_CANCELLED with the state
 * its header describes. */
typedef int (*gpt2_progress_fn)(void *user_data, int n_done, int n_total);

/* cancel: asked often (every layer, every iteration) whether to stop; returns
 * non-zero to stop. Keep it cheap: read a flag. */
typedef int (*gpt2_cancel_fn)(void *user_data);

#ifdef __cplusplus
}
#endif
#endif
