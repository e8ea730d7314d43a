/* term.h — the terminal: curses init and shutdown, colour pairs and the theme.
 * The only global state of the app (htop's CRT): every pane draws through
 * term_attr()/term_heat() and the helpers below.
 *
 * Colour support, best first: direct colour (COLORS >= 2^24: #rrggbb as is),
 * 256 colours (nearest xterm index), 8/16 colours (nearest basic colour), none
 * (NO_COLOR set, or a terminal without colours: attributes only). With fewer
 * than 256 colours the heatmap shades with " ░▒▓█" instead of the theme's ramp. */
#ifndef GPTSCOPE_UI_TERM_H
#define GPTSCOPE_UI_TERM_H

#define _XOPEN_SOURCE_EXTENDED 1
#include <ncurses.h>

#include "ui/heatmap.h"
#include "ui/theme.h"
#include "ui/wrap.h"

/* Starts curses (raw, no echo, keypad, mouse wheel) with theme. 0 on success;
 * -1 (message in err) when the terminal cannot be set up. */
int term_init(const ui_theme *theme, char *err, size_t errlen);

/* Puts the terminal back as term_init found it (modes, cursor, main screen)
 * with async-signal-safe calls only: for a handler of a fatal signal. */
void term_emergency_restore(void);

/* Ends curses; safe to call more than once and before term_init. */
void term_end(void);
int term_active(void);

/* The next key, as get_wch reports it (OK and a character, KEY_CODE_YES and a
 * KEY_* code, ERR when none is waiting, within stdscr's timeout), but decoded
 * from bytes here: ncurses' get_wch drops an invalid UTF-8 byte together with
 * the bytes after it (a paste lost its end); here each invalid byte becomes
 * U+FFFD and every valid one is kept. term_invalid_bytes() counts them. */
int term_get_key(wint_t *ch);
unsigned term_invalid_bytes(void);

/* Bracketed paste (xterm's mode 2004, on while curses is): a paste arrives
 * between these two codes (KEY_CODE_YES), its newlines as '\r'. */
enum { TERM_KEY_PASTE_BEGIN = KEY_MAX + 1, TERM_KEY_PASTE_END = KEY_MAX + 2 };

/* A key read while the app is busy (a prefill's progress) that is not for
 * now: term_get_key hands it out again later, in order, after the others
 * put back. term_get_fresh_key reads past them (only new input). */
void term_defer_key(wint_t ch, int r); /* r: what term_get_key returned with it */
int term_get_fresh_key(wint_t *ch);

/* Ctrl-Z: the terminal as it was before curses (paste mode off), the process
 * stopped (SIGTSTP) until `fg`; then curses again, at the terminal's size
 * now. The caller redraws. */
void term_suspend(void);

/* Replaces the theme (re-initialises the colour pairs). */
/* Whether the terminal has gone (its other end closed: a killed terminal
 * emulator or tmux, a dropped ssh) without a SIGHUP reaching us: reads then
 * fail at once, and a loop waiting for keys would spin. */
int term_lost(void);

void term_set_theme(const ui_theme *theme);
const ui_theme *term_theme(void);
int term_has_color(void);

/* Attributes (colour pair included) of a role; of heat level 0..term_heat_levels()-1. */
attr_t term_attr(ui_role r);
attr_t term_heat(int level);
int term_heat_levels(void);
/* The glyph for a heat cell: a space (the ramp's background shows) with 256
 * colours or more, else " ░▒▓█" by level. */
const char *term_heat_glyph(int level);

/* Text shaded by heat level (the text view): with 256 colours or more the
 * ramp's colour behind black or white text (whichever reads), level 0 plain;
 * with fewer or none, attributes from dim to reverse. */
attr_t term_shade(int level);
/* 1 when heat cells can show two rows each (a '▀' whose foreground is the
 * upper row's colour and background the lower's): 256 colours or more. */
int term_half_blocks(void);
/* One such cell at (y, x) (lower -1: no lower row). */
void term_put_half(WINDOW *w, int y, int x, int upper, int lower);

/* Draws len bytes of UTF-8 at (y, x) of w with attr, at most max_cols columns;
 * control characters as '·', bad bytes as U+FFFD. Returns columns drawn. */
int term_put(WINDOW *w, int y, int x, const char *s, size_t len, int max_cols, attr_t attr);
/* The same for a line of words: when it does not fit in max_cols it ends at
 * the last word that does, with "…" (a single word too long is cut). */
int term_put_words(WINDOW *w, int y, int x, const char *s, int max_cols, attr_t attr);
/* Fills columns x .. x + n - 1 of row y with spaces in attr. */
void term_fill(WINDOW *w, int y, int x, int n, attr_t attr);
/* printf into (y, x), clipped to max_cols. */
int term_printf(WINDOW *w, int y, int x, int max_cols, attr_t attr, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

#endif
