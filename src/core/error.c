/* error.c — status names and the message buffer every module fills on failure. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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
    case GPT2_ERR_TEMPLATE: return "template error";
    }
    return "unknown status";
}

/* s (len bytes of valid UTF-8) into out (cap bytes): whole when it fits, else
 * its start and its end around "…", each cut at a character boundary. A
 * message names a path first and says what went wrong last: both stay. */
static void fit_message(const char *s, size_t len, char *out, size_t cap) {
    if (len < cap) {
        memcpy(out, s, len + 1);
        return;
    }
    size_t head = (cap - 4) * 3 / 8, tail = cap - 4 - head;
    while (head > 0 && (s[head] & 0xC0) == 0x80) head--;        /* s[head] begins a character */
    size_t from = len - tail;
    while (from < len && (s[from] & 0xC0) == 0x80) from++;
    memcpy(out, s, head);
    memcpy(out + head, "\xE2\x80\xA6", 3);
    memcpy(out + head + 3, s + from, len - from + 1);
}

gpt2_status gpt2_fail(gpt2_error *err, gpt2_status status, const char *fmt, ...) {
    if (err) {
        /* paths and values from files go into messages: escaped here, so that
         * no caller ever prints a raw control byte from them */
        char small[4 * GPT2_ERROR_MSG_MAX], *raw = small, *shown = NULL;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(small, sizeof small, fmt, ap);
        va_end(ap);
        if (n >= (int)sizeof small && (raw = malloc((size_t)n + 1))) { /* a long path: its end matters */
            va_start(ap, fmt);
            vsnprintf(raw, (size_t)n + 1, fmt, ap);
            va_end(ap);
        }
        if (!raw) raw = small;
        size_t rl = strlen(raw), cap = 4 * rl + 1; /* \xNN: 4 bytes for 1 */
        if ((shown = malloc(cap))) {
            gpt2_text_escape(raw, rl, shown, cap);
            fit_message(shown, strlen(shown), err->msg, sizeof err->msg);
        } else {
            gpt2_text_escape(raw, rl, err->msg, sizeof err->msg);
        }
        free(shown);
        if (raw != small) free(raw);
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
