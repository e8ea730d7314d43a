/* utf8_stream.c — streaming UTF-8 validation for token-by-token output, and
 * the escaping of untrusted bytes for messages (gpt2_text_escape).
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

#include "gpt2_status.h"

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

/* --- escaping for messages --------------------------------------------------- */

/* Length of the valid UTF-8 character at p (left > 0 bytes), 0 if none starts there. */
static size_t valid_char(const unsigned char *p, size_t left) {
    unsigned lo, hi;
    if (p[0] < 0x80) return 1;
    size_t need = (size_t)lead_len(p[0], &lo, &hi);
    if (!need || need > left || p[1] < lo || p[1] > hi) return 0;
    for (size_t k = 2; k < need; k++)
        if (p[k] < 0x80 || p[k] > 0xBF) return 0;
    return need;
}

/* Writes \xNN for byte b at piece; returns 4. */
static size_t hex_escape(unsigned char b, char *piece) {
    static const char hex[] = "0123456789abcdef";
    piece[0] = '\\', piece[1] = 'x', piece[2] = hex[b >> 4], piece[3] = hex[b & 15];
    return 4;
}

/* The message form of the character (or lone byte) at p: written to piece
 * (at most 8 bytes, no NUL), its length returned, the input bytes it covers in *used. */
static size_t escape_piece(const unsigned char *p, size_t left, char piece[8], size_t *used) {
    size_t k = valid_char(p, left);
    *used = k ? k : 1;
    if (k == 1 && p[0] >= 0x20 && p[0] != 0x7F) {
        piece[0] = (char)p[0];
        return 1;
    }
    if (k == 1 && (p[0] == '\n' || p[0] == '\t' || p[0] == '\r')) {
        piece[0] = '\\';
        piece[1] = p[0] == '\n' ? 'n' : p[0] == '\t' ? 't' : 'r';
        return 2;
    }
    if (k == 2 && p[0] == 0xC2 && p[1] < 0xA0) /* C1 controls: terminals act on U+009B (CSI) */
        return hex_escape(p[0], piece) + hex_escape(p[1], piece + 4);
    if (k > 1) {
        memcpy(piece, p, k);
        return k;
    }
    return hex_escape(p[0], piece); /* a control byte, or a byte not part of valid UTF-8 */
}

char *gpt2_text_escape(const char *s, size_t n, char *out, size_t cap) {
    if (cap == 0) return out;
    const unsigned char *u = (const unsigned char *)s;
    char piece[8];
    size_t total = 0, used;
    for (size_t i = 0; i < n && total < cap; i += used) total += escape_piece(u + i, n - i, piece, &used);
    /* when it does not all fit, keep room for "..." */
    const int cut = total > cap - 1;
    const size_t limit = cut && cap > 4 ? cap - 4 : cap - 1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += used) {
        size_t len = escape_piece(u + i, n - i, piece, &used);
        if (o + len > limit) break;
        memcpy(out + o, piece, len);
        o += len;
    }
    if (cut && cap > 4) memcpy(out + o, "...", 3), o += 3;
    out[o] = '\0';
    return out;
}

size_t gpt2_token_escape(const char *s, size_t n, char *out, size_t cap) {
    if (cap == 0) return 0;
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0, used;
    for (size_t i = 0; i < n; i += used) {
        char piece[8];
        size_t len;
        const char *put = piece;
        size_t k = valid_char(u + i, n - i);
        used = k ? k : 1;
        if (k == 1 && u[i] == ' ') put = "\u00B7", len = 2;       /* · */
        else if (k == 1 && u[i] == '\n') put = "\u21B5", len = 3; /* ↵ */
        else if (k == 1 && u[i] == '\t') put = "\u2192", len = 3; /* → */
        else len = escape_piece(u + i, n - i, piece, &used);
        if (o + len + 1 > cap) break;
        memcpy(out + o, put, len);
        o += len;
    }
    out[o] = '\0';
    return o;
}
