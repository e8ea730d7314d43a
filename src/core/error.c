/* error.c — status names and the message buffer every module fills on failure. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

const char *gpt2_status_name(gpt2_status status) {
    switch (status) {
    case GPT2_OK: return "ok";
    case GPT2_ERR_IO: return "i/o error";
    case GPT2_ERR_FORMAT: return "format error";
    case GPT2_ERR_CONFIG: return "config error";
    case GPT2_ERR_TOKENIZER: return "tokenizer error";
    case GPT2_ERR_CONTEXT_FULL: return "context full";
    case GPT2_ERR_INVALID_ARG: return "invalid argument";
    case GPT2_ERR_NOMEM: return "out of memory";
    case GPT2_CANCELLED: return "cancelled";
    }
    return "unknown status";
}

gpt2_status gpt2_fail(gpt2_error *err, gpt2_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

void gpt2_error_clear(gpt2_error *err) {
    if (err) {
        err->status = GPT2_OK;
        err->msg[0] = '\0';
    }
}
