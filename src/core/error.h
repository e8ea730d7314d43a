/* error.h — internal helper to fill a gpt2_error (library-private). */
#ifndef GPT2_CORE_ERROR_H
#define GPT2_CORE_ERROR_H

#include "gpt2_status.h"

/* Sets err (if non-NULL) to status and a printf-formatted message; returns status
 * so that callers can write `return gpt2_fail(err, GPT2_ERR_IO, "...", ...);`. */
gpt2_status gpt2_fail(gpt2_error *err, gpt2_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Clears err (if non-NULL) to GPT2_OK with an empty message. */
void gpt2_error_clear(gpt2_error *err);

#endif
