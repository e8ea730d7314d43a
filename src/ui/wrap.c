/* wrap.c — UTF-8 display widths, word wrapping and probability bars (no curses). */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700
#endif
#include <stdio.h>
#include <string.h>
#include <wchar.h>

#include "ui/wrap.h"

int ui_utf8_encode(uint32_t c, char u[4]) {
    static const unsigned char lead[4] = {0, 0xC0, 0xE0, 0xF0};
    if (c < 0x80) return u[0] = (char)c, 1;
    int extra = c < 0x800 ? 1 : c < 0x10000 ? 2 : 3, n = 0;
    u[n++] = (char)(lead[extra] | c >> (6 * extra));
    for (int k = extra - 1; k >= 0; k--) u[n++] = (char)(0x80 | ((c >> (6 * k)) & 0x3F));
    return n;
}

int ui_utf8_decode(const char *str, size_t n, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[0];
    int need;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        need = 1, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3, v = c & 0x07, min = 0x10000;
    } else {
        *cp = 0xFFFD;
        return 1;
    }
    if ((size_t)need >= n) {
        *cp = 0xFFFD;
        return 1;
    }
    for (int i = 1; i <= need; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return 1;
        }
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = 0xFFFD;
        return 1;
    }
    *cp = v;
    return need + 1;
}

int ui_cp_width(uint32_t cp) {
    if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) return 1; /* drawn as a placeholder */
    int w = wcwidth((wchar_t)cp);
    if (w < 0) return 1;
    return w;
}

int ui_text_width(const char *s, size_t len) {
    int w = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += (size_t)ui_utf8_decode(s + i, len - i, &cp);
        w += ui_cp_width(cp);
    }
    return w;
}

/* Bytes a character beginning with lead takes; 0 when lead cannot begin one. */
static int utf8_len(unsigned char lead) {
    return lead < 0x80 ? 1 : lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
         : lead >= 0xF0 && lead <= 0xF4                  ? 4 : 0;
}

int ui_utf8_push(ui_utf8_input *in, unsigned char byte, uint32_t out[2]) {
    int n_out = 0;
    if (in->n > 0 && (byte & 0xC0) != 0x80) { /* the held character ends early */
        out[n_out++] = 0xFFFD;
        in->n = 0;
    }
    if (in->n == 0) {
        in->need = utf8_len(byte);
        if (in->need == 0) {
            out[n_out++] = 0xFFFD;
            return n_out;
        }
    }
    in->buf[in->n++] = byte;
    if (in->n < in->need) return n_out;
    ui_utf8_decode((const char *)in->buf, (size_t)in->n, &out[n_out++]); /* U+FFFD if overlong etc. */
    in->n = 0;
    return n_out;
}

int ui_utf8_flush(ui_utf8_input *in, uint32_t *out) {
    if (in->n == 0) return 0;
    in->n = 0;
    *out = 0xFFFD;
    return 1;
}

static void put_line(ui_line *out, int max, int *n, size_t start, size_t end, int cols) {
    if (*n < max) out[*n] = (ui_line){.start = start, .end = end, .cols = cols};
    (*n)++;
}

int ui_wrap(const char *s, size_t len, int width, ui_line *out, int max) {
    if (width < 1) width = 1;
    int n = 0;
    size_t start = 0, i = 0;
    int cols = 0;
    size_t brk = (size_t)-1; /* byte offset of the last space in the line */
    int brk_cols = 0;        /* columns before that space */
    while (i < len) {
        if (s[i] == '\n') {
            put_line(out, max, &n, start, i, cols);
            i++;
            start = i, cols = 0, brk = (size_t)-1;
            continue;
        }
        uint32_t cp;
        int nb = ui_utf8_decode(s + i, len - i, &cp);
        int w = ui_cp_width(cp);
        if (cols + w > width && cols > 0) {
            if (cp == ' ') { /* break here; drop the spaces */
                size_t e = i;
                while (e > start && s[e - 1] == ' ') e--, cols--;
                put_line(out, max, &n, start, e, cols);
                while (i < len && s[i] == ' ') i++;
                start = i, cols = 0, brk = (size_t)-1;
                continue;
            }
            if (brk != (size_t)-1 && brk > start) {
                size_t e = brk;
                put_line(out, max, &n, start, e, brk_cols);
                size_t ns = brk;
                while (ns < len && s[ns] == ' ') ns++;
                start = ns;
                cols = ui_text_width(s + start, i - start);
            } else {
                put_line(out, max, &n, start, i, cols);
                start = i, cols = 0;
            }
            brk = (size_t)-1;
            continue; /* re-examine this character on the new line */
        }
        if (cp == ' ') {
            /* the first space of a run marks a break point */
            if (!(i > start && s[i - 1] == ' ')) brk = i, brk_cols = cols;
        }
        cols += w;
        i += (size_t)nb;
    }
    put_line(out, max, &n, start, len, cols);
    return n;
}

char *ui_bar(float p, int width, char *buf) {
    static const char *eighths[] = {"", "\u258F", "\u258E", "\u258D", "\u258C", "\u258B", "\u258A", "\u2589"};
    if (!(p > 0)) p = 0;
    if (p > 1) p = 1;
    int units = (int)(p * (float)width * 8.0f + 0.5f);
    char *o = buf;
    int cells = 0;
    for (; units >= 8 && cells < width; units -= 8, cells++) o += sprintf(o, "\u2588");
    if (units > 0 && cells < width) o += sprintf(o, "%s", eighths[units]), cells++;
    for (; cells < width; cells++) *o++ = ' ';
    *o = '\0';
    return buf;
}

char *ui_percent(float p, char *buf) {
    if (!(p > 0)) snprintf(buf, 8, "  0.0%%");
    else if (p < 0.0005f) snprintf(buf, 8, " <0.1%%");
    else snprintf(buf, 8, "%5.1f%%", (double)(p > 1 ? 100.0f : p * 100.0f));
    return buf;
}

size_t ui_char_at(const char *s, size_t len, int i, size_t *start) {
    size_t off = 0;
    for (int k = 0; off < len; k++) {
        uint32_t cp;
        size_t nb = (size_t)ui_utf8_decode(s + off, len - off, &cp);
        if (k == i) {
            *start = off;
            return nb;
        }
        off += nb;
    }
    *start = len;
    return 0;
}
