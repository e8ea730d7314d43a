/* error.c — status names and the message buffer every module fills on failure. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
        /* paths and values from files go into messages: escaped here, so that
         * no caller ever prints a raw control byte from them */
        char raw[2 * GPT2_ERROR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        gpt2_text_escape(raw, strlen(raw), err->msg, sizeof err->msg);
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
