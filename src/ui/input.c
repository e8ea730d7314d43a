/* input.c — the input line: GNU readline through its callback interface,
 * drawing into the input pane's curses window.
 *
 * Readline never touches the terminal here: no prep/deprep, no signals, its
 * output stream is /dev/null. Keys come from curses (chat.c reads them) and are
 * fed to readline one byte at a time through rl_getc_function; KEY_* codes
 * become the emacs bytes readline knows (Left -> C-b, Up -> C-p, ...).
 * rl_redisplay_function draws prompt, line and cursor into the pane. History
 * lives in $XDG_STATE_HOME/gptscope/history (default ~/.local/state/...). */
#define _XOPEN_SOURCE_EXTENDED 1
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "ui/app.h"

static app *in_app; /* readline's callbacks take no user data */
static int in_byte;
static int in_have_byte;
static char *in_pending_line;
static int in_got_line;

static int in_getc(FILE *f) {
    (void)f;
    in_have_byte = 0;
    return in_byte;
}
static int in_avail(void) { return in_have_byte; }

static void in_feed(unsigned char c) {
    in_byte = c;
    in_have_byte = 1;
    rl_callback_read_char();
}

static void in_line_cb(char *line) {
    free(in_pending_line);
    in_pending_line = line; /* NULL: Ctrl-D on an empty line */
    in_got_line = 1;
}

void input_draw_line(pane *p) {
    const char *prompt = rl_display_prompt ? rl_display_prompt : "";
    const char *buf = rl_line_buffer ? rl_line_buffer : "";
    int len = rl_end, point = rl_point;
    const char *pr = *prompt ? prompt : "> ";
    attr_t pa = term_attr(UI_ROLE_USER);
    const int y = p->h - 1; /* the last row: the message lines are above it */
    int pc = term_put(p->win, y, 0, pr, strlen(pr), p->w, pa);
    int avail = p->w - pc - 1;
    if (avail < 1) return;
    /* display columns of each byte offset: newlines shown as U+21B5 */
    int cur_col = 0, total = 0;
    for (int i = 0; i < len;) {
        uint32_t cp;
        int nb = ui_utf8_decode(buf + i, (size_t)(len - i), &cp);
        if (i < point) cur_col += ui_cp_width(cp);
        total += ui_cp_width(cp);
        i += nb;
    }
    if (point >= len) cur_col = total;
    int skip = cur_col > avail - 1 ? cur_col - (avail - 1) : 0; /* horizontal scroll */
    int col = 0, x = pc;
    attr_t ta = term_attr(UI_ROLE_INPUT);
    for (int i = 0; i < len && x < p->w;) {
        uint32_t cp;
        int nb = ui_utf8_decode(buf + i, (size_t)(len - i), &cp);
        int cw = ui_cp_width(cp);
        if (col >= skip) {
            if (x + cw > p->w) break;
            if (cp == '\n') x += term_put(p->win, y, x, "\u21B5", 3, 1, term_attr(UI_ROLE_DIM));
            else x += term_put(p->win, y, x, buf + i, (size_t)nb, p->w - x, ta);
        }
        col += cw;
        i += nb;
    }
    wmove(p->win, y, pc + cur_col - skip < p->w ? pc + cur_col - skip : p->w - 1);
}

static void in_redisplay(void) {
    app *a = in_app;
    pane *in = &a->panes[PANE_INPUT];
    if (!term_active() || !in->win || a->too_small || a->help) return;
    in->ops->draw(in);
    wnoutrefresh(in->win);
    doupdate();
}

static char history_path[PATH_MAX + 16];

int input_state_path(const char *name, char *out, size_t cap) {
    const char *st = getenv("XDG_STATE_HOME");
    char dir[PATH_MAX];
    if (st && *st) snprintf(dir, sizeof dir, "%s/gptscope", st);
    else if (getenv("HOME")) snprintf(dir, sizeof dir, "%s/.local/state/gptscope", getenv("HOME"));
    else return 0;
    /* mkdir -p */
    for (char *q = dir + 1; *q; q++)
        if (*q == '/') {
            *q = '\0';
            mkdir(dir, 0700);
            *q = '/';
        }
    mkdir(dir, 0700);
    return snprintf(out, cap, "%s/%s", dir, name) < (int)cap;
}

static void history_setup(void) {
    if (!input_state_path("history", history_path, sizeof history_path)) return;
    using_history();
    read_history(history_path);
}

static FILE *in_devnull;

void input_setup(app *a) {
    in_app = a;
    rl_readline_name = "gptscope";
    rl_catch_signals = 0;
    rl_catch_sigwinch = 0;
    rl_change_environment = 0;
    rl_prep_term_function = NULL;
    rl_deprep_term_function = NULL;
    rl_getc_function = in_getc;
    rl_input_available_hook = in_avail;
    rl_redisplay_function = in_redisplay;
    in_devnull = fopen("/dev/null", "w");
    if (in_devnull) rl_outstream = in_devnull;
    rl_bind_key('\t', rl_insert);
    rl_variable_bind("enable-bracketed-paste", "off");
    rl_callback_handler_install("> ", in_line_cb);
    rl_variable_bind("enable-bracketed-paste", "off");
    history_setup();
}

void input_teardown(void) {
    rl_callback_handler_remove();
    if (history_path[0]) {
        write_history(history_path);
        history_truncate_file(history_path, 1000);
    }
    if (in_devnull) fclose(in_devnull), in_devnull = NULL;
    rl_outstream = NULL;
    free(in_pending_line);
    in_pending_line = NULL;
}

void input_key(int key, int is_code) {
    if (!is_code) { /* a character: its UTF-8 bytes */
        char u[4];
        int n = 0;
        uint32_t c = (uint32_t)key;
        if (c < 0x80) {
            u[n++] = (char)c;
        } else {
            int extra = c < 0x800 ? 1 : c < 0x10000 ? 2 : 3;
            static const unsigned char lead[4] = {0, 0xC0, 0xE0, 0xF0};
            u[n++] = (char)(lead[extra] | c >> (6 * extra));
            for (int k = extra - 1; k >= 0; k--) u[n++] = (char)(0x80 | ((c >> (6 * k)) & 0x3F));
        }
        for (int i = 0; i < n; i++) in_feed((unsigned char)u[i]);
        return;
    }
    switch (key) {
    case KEY_LEFT: in_feed(2); break;
    case KEY_RIGHT: in_feed(6); break;
    case KEY_HOME: in_feed(1); break;
    case KEY_END: in_feed(5); break;
    case KEY_UP: in_feed(16); break;
    case KEY_DOWN: in_feed(14); break;
    case KEY_BACKSPACE: in_feed(127); break;
    case KEY_DC: if (rl_end > 0) in_feed(4); break;
    case KEY_ENTER: in_feed('\r'); break;
    default: break;
    }
}

void input_meta_key(int key) {
    in_feed(27);
    input_key(key, 0);
}

char *input_take_line(int *got) {
    *got = in_got_line;
    in_got_line = 0;
    char *line = in_pending_line;
    in_pending_line = NULL;
    return line;
}

void input_insert_newline(void) {
    rl_insert_text("\n");
    in_redisplay();
}

void input_clear(void) {
    rl_replace_line("", 0);
    rl_point = 0;
}

int input_empty(void) { return rl_end == 0; }

void input_history_add(const char *line) {
    add_history(line);
    using_history(); /* back to the end: else readline's teardown of the next line rewrites this entry */
}
