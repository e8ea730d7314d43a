/* utf8_stream.c — streaming UTF-8 validation for token-by-token output.
 *
 * A token's bytes can end in the middle of a character (GPT-2 splits most emoji and many CJK
 * characters across tokens), so a chat pane that printed each token's bytes at once would show
 * garbage. The stream passes complete characters through, holds back a tail that is still a
 * valid beginning of one, and turns every byte that cannot be part of a valid character into
 * U+FFFD. Validity is strict (RFC 3629): no overlong forms, no surrogates, nothing past
 * U+10FFFF, which is what pinning the second byte's range below enforces.
 */
#include "gpt2_tokenizer.h"

#include <string.h>

/* Length of the sequence a lead byte starts (0: not a lead byte) and the range its second
 * byte must fall in. */
static int lead_len(unsigned b, unsigned *lo, unsigned *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) *lo = 0xA0; /* below: overlong */
        if (b == 0xED) *hi = 0x9F; /* above: UTF-16 surrogates */
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) *lo = 0x90; /* below: overlong */
        if (b == 0xF4) *hi = 0x8F; /* above: past U+10FFFF */
        return 4;
    }
    return 0;
}

static size_t put_fffd(char *out, int count) {
    for (int i = 0; i < count; i++) memcpy(out + 3 * i, "\xEF\xBF\xBD", 3);
    return 3 * (size_t)count;
}

size_t gpt2_utf8_stream_push(gpt2_utf8_stream *s, const char *bytes, size_t n, char *out) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        unsigned b = (unsigned char)bytes[i], lo, hi;
        if (s->n_pending == 0) {
            i++;
            if (b < 0x80) out[w++] = (char)b;
            else if (lead_len(b, &lo, &hi)) s->pending[s->n_pending++] = (unsigned char)b;
            else w += put_fffd(out + w, 1);
            continue;
        }
        int need = lead_len(s->pending[0], &lo, &hi);
        if (s->n_pending > 1) { /* third and fourth bytes: any continuation byte */
            lo = 0x80;
            hi = 0xBF;
        }
        if (b < lo || b > hi) {
            /* The held sequence can never complete: each of its bytes becomes U+FFFD (as in
             * flush) and b is looked at again as a possible start. */
            w += put_fffd(out + w, s->n_pending);
            s->n_pending = 0;
            continue;
        }
        i++;
        s->pending[s->n_pending++] = (unsigned char)b;
        if (s->n_pending == need) {
            memcpy(out + w, s->pending, (size_t)need);
            w += (size_t)need;
            s->n_pending = 0;
        }
    }
    return w;
}

size_t gpt2_utf8_stream_flush(gpt2_utf8_stream *s, char *out) {
    size_t w = put_fffd(out, s->n_pending);
    s->n_pending = 0;
    return w;
}
