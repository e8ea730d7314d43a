/* input.c — the input pane: the message line above it (notices, errors, a
 * prefill's progress) and the line being typed, edited by GNU readline
 * through its callback interface.
 *
 * Readline never touches the terminal here: no prep/deprep, no signals, its
 * output stream is /dev/null. The pane's key handler feeds it one byte at a
 * time through rl_getc_function; KEY_* codes become the emacs bytes readline
 * knows (Left -> C-b, Up -> C-p, ...), an Alt combination (KEY_META_BIT) its
 * Meta binding. rl_redisplay_function draws prompt, line and cursor into the
 * pane. An accepted line goes to history, then to app_submit_line. Keys that
 * are the screen's (Tab, F-keys, PgUp/PgDn, Ctrl-C, Ctrl-L, ? on an empty
 * line) are left to the global keys. History lives in
 * $XDG_STATE_HOME/gptscope/history (default ~/.local/state/...).
 * Readline is one per process, and so is this pane. */
#define _XOPEN_SOURCE_EXTENDED 1
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "ui/app.h"

typedef struct {
    pane base;
    int byte, have_byte; /* the byte readline reads next */
    char *pending_line;  /* the line readline accepted (malloc'd; NULL: Ctrl-D on an empty line) */
    int got_line;
    FILE *devnull;       /* readline's output stream */
    char history_path[PATH_MAX + 16];
    int history_read; /* entries read from history_path at start */
} input_pane;

static input_pane *in_pane; /* readline's callbacks take no user data */

static int in_getc(FILE *f) {
    (void)f;
    in_pane->have_byte = 0;
    return in_pane->byte;
}
static int in_avail(void) { return in_pane->have_byte; }

static void in_feed(unsigned char c) {
    in_pane->byte = c;
    in_pane->have_byte = 1;
    rl_callback_read_char();
}

static void in_line_cb(char *line) {
    free(in_pane->pending_line);
    in_pane->pending_line = line; /* NULL: Ctrl-D on an empty line */
    in_pane->got_line = 1;
}

/* prompt, line and cursor on the pane's last row (the message lines are above it) */
static void draw_line(pane *p) {
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

static void input_draw(pane *p) {
    app *a = p->a;
    werase(p->win);
    if (a->prefill_msg[0] || a->msg[0])
        screen_draw_message(a, p->win, p->w);
    else {
        wattrset(p->win, term_attr(UI_ROLE_BORDER));
        mvwhline(p->win, 0, 0, ACS_HLINE, p->w);
        wattrset(p->win, 0);
    }
    draw_line(p);
}

static void in_redisplay(void) {
    pane *p = &in_pane->base;
    if (!term_active() || !p->win || p->a->too_small || p->a->help) return;
    input_draw(p);
    wnoutrefresh(p->win);
    doupdate();
}

static void insert_newline(void) {
    rl_insert_text("\n");
    in_redisplay();
}

void input_clear(pane *p) {
    (void)p;
    rl_replace_line("", 0);
    rl_point = 0;
}

int input_empty(const pane *p) {
    (void)p;
    return rl_end == 0;
}

/* A character: its UTF-8 bytes. */
static void feed_char(uint32_t c) {
    char u[4];
    int n = ui_utf8_encode(c, u);
    for (int i = 0; i < n; i++) in_feed((unsigned char)u[i]);
}

void input_insert(pane *p, const char *text) {
    (void)p;
    rl_insert_text(text);
}

/* A KEY_* code as the emacs byte readline knows; 0 for none. */
static int code_byte(int key) {
    switch (key) {
    case KEY_LEFT: return 2;
    case KEY_RIGHT: return 6;
    case KEY_HOME: return 1;
    case KEY_END: return 5;
    case KEY_UP: return 16;
    case KEY_DOWN: return 14;
    case KEY_BACKSPACE: return 127;
    case KEY_DC: return rl_end > 0 ? 4 : 0; /* Ctrl-D on an empty line would quit */
    case KEY_ENTER: return '\r';
    default: return 0;
    }
}

/* The keys the screen handles whatever has focus. */
static int screen_key_code(int key) {
    return (key >= KEY_F0 && key <= KEY_F(63)) || key == KEY_PPAGE || key == KEY_NPAGE || key == KEY_BTAB ||
           key == KEY_MOUSE || key == KEY_RESIZE;
}

/* A line readline accepted (Enter) goes to history and to the app. */
static void take_line(input_pane *ip) {
    if (!ip->got_line) return;
    char *line = ip->pending_line;
    ip->pending_line = NULL, ip->got_line = 0;
    if (line && *line) {
        add_history(line);
        using_history(); /* back to the end: else readline's teardown of the next line rewrites this entry */
    }
    if (app_submit_line(ip->base.a, line) != 0 && line) rl_insert_text(line); /* not sent: back to edit */
    free(line);
}

static int input_key(pane *p, int key, int is_code) {
    input_pane *ip = (input_pane *)p;
    if (is_code) {
        if (screen_key_code(key)) return PANE_IGNORED;
        int b = code_byte(key);
        if (b) in_feed((unsigned char)b);
    } else if (key & KEY_META_BIT) { /* Alt-Enter: a new line; Alt-B, ...: readline's Meta bindings */
        int c = key & ~KEY_META_BIT;
        if (c == '\r' || c == '\n') insert_newline();
        else in_feed(27), feed_char((uint32_t)c);
        return PANE_REDRAW;
    } else if (key == '\t' || key == 12 || key == 3 || key == 27 || (key == '?' && rl_end == 0)) {
        return PANE_IGNORED; /* focus, redraw, stop, help: the screen's */
    } else if (key == '\n') { /* Ctrl-J: a new line in the message */
        insert_newline();
        return PANE_REDRAW;
    } else {
        feed_char((uint32_t)key);
    }
    take_line(ip);
    return PANE_REDRAW;
}

/* The history file, when it is a regular file or missing: a FIFO or a
 * device there would block the chat at start or exit, so it is left alone. */
static void history_setup(input_pane *ip) {
    struct stat st;
    if (!state_path("history", ip->history_path, sizeof ip->history_path)) return;
    if (stat(ip->history_path, &st) == 0 && !S_ISREG(st.st_mode)) {
        app_message(ip->base.a, UI_ROLE_ERROR, "%s is not a regular file: the input history is not read or kept",
                    ip->history_path);
        ip->history_path[0] = '\0';
        return;
    }
    using_history();
    read_history(ip->history_path);
    ip->history_read = history_length;
}

static void input_free(pane *p) {
    input_pane *ip = (input_pane *)p;
    rl_callback_handler_remove();
    if (ip->history_path[0]) { /* this chat's lines appended: another chat's, written meanwhile, stay */
        struct stat st;
        int added = history_length - ip->history_read;
        if (stat(ip->history_path, &st) != 0) write_history(ip->history_path);
        else if (added > 0) append_history(added, ip->history_path);
        history_truncate_file(ip->history_path, 1000);
    }
    if (ip->devnull) fclose(ip->devnull);
    rl_outstream = NULL;
    free(ip->pending_line);
    in_pane = NULL;
    pane_release(p);
}

static const pane_ops input_ops = {
    .name = "input", .draw = input_draw, .key = input_key, .resize = pane_place, .free = input_free};

pane *input_pane_new(app *a) {
    input_pane *ip = calloc(1, sizeof *ip);
    if (!ip) return NULL;
    ip->base = (pane){.ops = &input_ops, .a = a};
    in_pane = ip;
    rl_readline_name = "gptscope";
    rl_catch_signals = 0;
    rl_catch_sigwinch = 0;
    rl_change_environment = 0;
    rl_prep_term_function = NULL;
    rl_deprep_term_function = NULL;
    rl_getc_function = in_getc;
    rl_input_available_hook = in_avail;
    rl_redisplay_function = in_redisplay;
    ip->devnull = fopen("/dev/null", "w");
    if (ip->devnull) rl_outstream = ip->devnull;
    rl_bind_key('\t', rl_insert);
    rl_variable_bind("enable-bracketed-paste", "off");
    rl_callback_handler_install("> ", in_line_cb);
    rl_variable_bind("enable-bracketed-paste", "off");
    history_setup(ip);
    return &ip->base;
}
