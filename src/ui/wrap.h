/* wrap.h — text on a terminal: UTF-8 decoding and display
 * widths (wcwidth; bad bytes show as U+FFFD, one column), word wrapping,
 * probability bars. Widths depend on LC_CTYPE: the app (and the tests) call
 * setlocale(LC_ALL, "") or "C.UTF-8" first.
 * Pure: no curses, no terminal; unit-tested on its own (tests/test_ui_*.c). */
#ifndef GPTSCOPE_UI_WRAP_H
#define GPTSCOPE_UI_WRAP_H

#include <stddef.h>
#include <stdint.h>

/* ---- UTF-8 and widths --------------------------------------------------- */

/* Decodes one character at s (n > 0 bytes available): returns the bytes it
 * takes (1..4) and stores the code point; an invalid or truncated sequence
 * takes 1 byte and decodes as U+FFFD. */
int ui_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* Encodes a code point (at most U+10FFFF) into out: returns the bytes (1..4). */
int ui_utf8_encode(uint32_t cp, char out[4]);

/* Columns a code point takes on screen: 0 for combining marks, 2 for wide
 * characters, 1 for everything else printable; control characters (which the
 * app draws as a placeholder) count 1. */
int ui_cp_width(uint32_t cp);

/* Columns of len bytes of text (no line breaks assumed: '\n' counts 1). */
int ui_text_width(const char *s, size_t len);

/* Input arriving one byte at a time (keys, a paste), decoded as it comes.
 * Each byte yields 0, 1 or 2 code points: a character once its last byte is
 * in, U+FFFD for a byte that cannot begin or continue one (and then the byte
 * that showed it, if it begins a character itself). A valid byte is never
 * lost to an invalid one before it. */
typedef struct {
    unsigned char buf[4];
    int n, need; /* bytes held, bytes the held character takes */
} ui_utf8_input;

int ui_utf8_push(ui_utf8_input *in, unsigned char byte, uint32_t out[2]);

/* A character left incomplete (the input stopped): 1 and U+FFFD in *out; 0 if
 * nothing is held. */
int ui_utf8_flush(ui_utf8_input *in, uint32_t *out);

/* ---- token labels ------------------------------------------------------ */


/* The byte range [*start, *start + return) of character i (0-based) of the
 * UTF-8 string s (len bytes); 0 when s has fewer characters. */
size_t ui_char_at(const char *s, size_t len, int i, size_t *start);

/* ---- word wrapping ------------------------------------------------------ */

typedef struct {
    size_t start, end; /* byte range [start, end) of the text; the '\n' or the
                          spaces at a break are not included */
    int cols;          /* display columns of the range */
} ui_line;

/* Wraps len bytes into lines of at most width columns (width >= 1): breaks at
 * '\n', else after the last space that fits, else inside a word (never inside
 * a character; a character wider than width gets a line of its own). Spaces at
 * a soft break are dropped. An empty text, and a text ending in '\n', end with
 * an empty line. Writes at most max lines to out (out may be NULL when max is
 * 0) and returns how many lines the whole text needs. */
int ui_wrap(const char *s, size_t len, int width, ui_line *out, int max);

/* ---- bars --------------------------------------------------------------- */

/* A bar of width cells for p in [0, 1] with eighth-block resolution
 * (U+2588..U+258F), padded with spaces to width cells: UTF-8 into buf (needs
 * 3 * width + 1 bytes). Returns buf. */
char *ui_bar(float p, int width, char *buf);

/* p as a percentage in 6 columns: " 12.3%", "100.0%", "  <0.1%" style
 * ("<0.1%" for 0 < p < 0.0005). Returns buf (needs 8 bytes). */
char *ui_percent(float p, char *buf);

#endif
