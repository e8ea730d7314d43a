/* screen.c — the screen manager: lays the panes out for the terminal's size,
 * draws them (the input pane last: it owns the cursor), the help overlay
 * (its command list drawn from the command table), the focus order, and the
 * keys: each goes to the focused pane first, then to the global keys. A
 * terminal below 50x12 gets "window too small" instead. */
#define _XOPEN_SOURCE_EXTENDED 1
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"

/* The message line's text: a prefill's progress, else the last message. */
static const char *message_text(const app *a) { return a->prefill_msg[0] ? a->prefill_msg : a->msg; }

/* The rows a message may take: 3, or 2 on a short screen, where the views
 * need the rows more (the log has every message whole). */
static int message_max_rows(void) { return LINES >= 30 ? 3 : 2; }

/* Rows the message takes at width W: wrapped, up to message_max_rows (the rest ends in "…"). */
static int message_rows(const app *a, int W) {
    const char *m = message_text(a);
    if (!*m || W < 1) return 1;
    int n = ui_wrap(m, strlen(m), W, NULL, 0), most = message_max_rows();
    return n < 1 ? 1 : n > most ? most : n;
}

/* ---- panes ---- */

void pane_place(pane *p, int y, int x, int h, int w) {
    if (p->win) delwin(p->win), p->win = NULL;
    p->y = y, p->x = x, p->h = h, p->w = w;
    if (h > 0 && w > 0) p->win = newwin(h, w, y, x);
}

void pane_release(pane *p) {
    if (p->win) delwin(p->win);
    free(p);
}

int screen_focused(const pane *p) { return p->a->panes[p->a->focus] == p; }

void pane_title(pane *p, const char *title) {
    attr_t a = term_attr(screen_focused(p) ? UI_ROLE_SELECTION : UI_ROLE_TITLE);
    char t[512];
    snprintf(t, sizeof t, " %s ", title);
    term_fill(p->win, 0, 0, p->w, term_attr(UI_ROLE_BORDER));
    term_put_words(p->win, 0, 1, t, p->w - 1, a);
}

void pane_left_border(pane *p) {
    if (p->x == 0) return; /* nothing to its left (zoomed) */
    wattrset(p->win, term_attr(UI_ROLE_BORDER));
    mvwvline(p->win, 0, 0, ACS_VLINE, p->h);
    wattrset(p->win, 0);
}

/* ---- layout and drawing ---- */

void screen_layout(app *a) {
    int H = LINES, W = COLS;
    a->msg_rows = message_rows(a, W);
    a->too_small = H < 12 || W < 50;
    if (a->too_small) {
        for (int i = 0; i < N_PANES; i++) a->panes[i]->ops->resize(a->panes[i], 0, 0, 0, 0);
        return;
    }
    int right = W >= 100 ? W * 45 / 100 : W >= 72 ? 36 : 0;
    int top_h = H - 2 - a->msg_rows;
    int samp_h = right ? 5 : 0;
    struct { int y, x, h, w; } g[N_PANES] = {
        [PANE_CONV] = {0, 0, top_h, W - right},
        [PANE_SAMPLING] = {0, W - right, samp_h, right},
        [PANE_INSPECTOR] = {samp_h, W - right, top_h - samp_h, right},
        [PANE_INPUT] = {top_h, 0, a->msg_rows + 1, W},
        [PANE_STATUS] = {H - 1, 0, 1, W},
    };
    /* zoom: one pane over the whole top; the inspector's text view is drawn
       by the conversation pane, which then takes it (the keys stay the inspector's) */
    int z = a->zoom == PANE_INSPECTOR && inspector_view(a->panes[PANE_INSPECTOR]) == INSPECT_TEXT ? PANE_CONV : a->zoom;
    if (z == PANE_INSPECTOR || z == PANE_CONV) {
        for (int i = PANE_CONV; i <= PANE_INSPECTOR; i++) g[i].h = g[i].w = 0;
        g[z].y = 0, g[z].x = 0, g[z].h = top_h, g[z].w = W;
    }
    for (int i = 0; i < N_PANES; i++) a->panes[i]->ops->resize(a->panes[i], g[i].y, g[i].x, g[i].h, g[i].w);
    if (!a->panes[a->focus]->win && !(a->focus == PANE_INSPECTOR && a->zoom == PANE_INSPECTOR)) a->focus = PANE_INPUT;
}

/* At most 76 columns, so that the box fits 80; taller than the screen, it scrolls. */
static const char *help_lines[] = {
    "gptscope chat \u2014 keys and commands",
    "",
    "Enter         send the message     Ctrl-J, Alt-Enter  a new line in it",
    "Esc           stop the reply (its text is kept), or cancel a prefill",
    "Ctrl-C        the same; on the input line it also clears the line",
    "Ctrl-D        quit (on an empty line); /quit too",
    "Tab, S-Tab    focus: input \u2192 conversation \u2192 sampling \u2192 inspector",
    "PgUp, PgDn    scroll the conversation (mouse wheel too)",
    "F1, ?         this help (? when the line is empty or another pane has focus)",
    "F2            confidence view: reply tokens coloured by their probability",
    "F3, F4        previous / next layer of the inspector",
    "F5, F6        previous / next head (past the last: the average of heads)",
    "F7            average of heads on/off       Ctrl-L  redraw the screen",
    "F8            inspector view: heatmap \u2192 overview \u2192 text view \u2192 logit lens",
    "F9            the model view: every head's pattern and scores (g in the inspector)",
    "F10           zoom: the inspector (or the conversation, when focused) takes the",
    "              whole screen above the input line, and back (z in the inspector)",
    "Ctrl-Z        suspend (the shell's job control; fg comes back)",
    "",
    "Input line    emacs keys (readline): Ctrl-A/E/B/F/K/U/W, Alt-B/F,",
    "              Up/Down history, Ctrl-R search",
    "Conversation  Up/Down/PgUp/PgDn scroll, Home/End top/bottom",
    "Sampling      Up/Down pick a knob, Left/Right (or -/+) change it,",
    "              PgUp/PgDn by 10 steps",
    "Inspector     Up/Down/PgUp/PgDn move the query cursor (that token's",
    "              candidates), End follows the newest token,",
    "              Left/Right or h/H head, l/L layer, a average,",
    "              m head \u2192 mean \u2192 max of heads, v view, s scale",
    "              global/per row, < > (or , .) the key cursor,",
    "              x ablate the head on/off, X the whole layer,",
    "              w why the next token: its logit's parts (attribution;",
    "              there [ ] select a part, Enter opens its head, b vs",
    "              the runner-up)",
    "Text view     the conversation pane shows the model's context",
    "              shaded by the query's attention; click a token",
    "Draft mode    accepted draft tokens in the draft colour, the target's",
    "              corrections in draft-fix, underlined where drafts were",
    "              rejected; the status bar shows k, r and tokens per pass",
    "",
    "Commands (a path may start with ~/):",
};

enum { HELP_W = 80, HELP_TEXT_W = 76, HELP_MAX = 128 };

/* The help's lines: the keys above, then every command of the table
 * (app_commands), "/name ARGS" and its help wrapped beside it. */
static int help_build(char lines[][HELP_TEXT_W * 4 + 1]) {
    int n = 0;
    for (size_t i = 0; i < sizeof help_lines / sizeof *help_lines; i++)
        snprintf(lines[n++], HELP_TEXT_W * 4 + 1, "%s", help_lines[i]);
    int nc;
    const app_command *c = app_commands(&nc);
    for (int i = 0; i < nc && n < HELP_MAX - 4; i++) {
        if (!c[i].help) continue;
        char head[64];
        snprintf(head, sizeof head, "%s%s%s%s%s", c[i].name, c[i].alias ? ", " : "", c[i].alias ? c[i].alias : "",
                 *c[i].args ? " " : "", c[i].args);
        const int col = 24, w = HELP_TEXT_W - col;
        ui_line wl[4];
        int k = ui_wrap(c[i].help, strlen(c[i].help), w, wl, 4);
        for (int j = 0; j < k && j < 4 && n < HELP_MAX; j++)
            snprintf(lines[n++], HELP_TEXT_W * 4 + 1, "%-*s%.*s", col, j == 0 ? head : "",
                     (int)(wl[j].end - wl[j].start), c[i].help + wl[j].start);
    }
    return n;
}

/* Lines of help that fit the box now (the screen's height less the border
 * and the footer line). */
static int help_rows(void) { return LINES - 3 < 1 ? 1 : LINES - 3; }

/* A key while the help is open: 1 if it scrolled the help (Up, Down, PgUp,
 * PgDn, Home, End), 0 if it is a key that closes it. */
static int help_scroll(app *a, int key) {
    static char lines[HELP_MAX][HELP_TEXT_W * 4 + 1];
    const int n = help_build(lines), rows = help_rows();
    const int most = n > rows ? n - rows : 0;
    int top = a->help_top;
    switch (key) {
    case KEY_UP: top--; break;
    case KEY_DOWN: top++; break;
    case KEY_PPAGE: top -= rows - 1; break;
    case KEY_NPAGE: top += rows - 1; break;
    case KEY_HOME: top = 0; break;
    case KEY_END: top = most; break;
    default: return 0;
    }
    a->help_top = top < 0 ? 0 : top > most ? most : top;
    return 1;
}

static void draw_help(app *a) {
    static char help[HELP_MAX][HELP_TEXT_W * 4 + 1];
    const int n = help_build(help);
    int rows = help_rows();
    if (rows > n) rows = n;
    if (a->help_top > n - rows) a->help_top = n - rows;
    int h = rows + 3, w = COLS < HELP_W ? COLS : HELP_W;
    if (w < 20 || h < 4) return;
    WINDOW *win = newwin(h, w, (LINES - h) / 2, (COLS - w) / 2);
    if (!win) return;
    wbkgdset(win, ' ' | term_attr(UI_ROLE_TEXT));
    werase(win);
    wattrset(win, term_attr(UI_ROLE_BORDER));
    box(win, 0, 0);
    for (int i = 0; i < rows; i++) {
        const int li = a->help_top + i;
        term_put_words(win, i + 1, 2, help[li], w - 4, term_attr(li == 0 ? UI_ROLE_TITLE : UI_ROLE_TEXT));
    }
    char foot[128];
    if (rows < n)
        snprintf(foot, sizeof foot, "lines %d-%d of %d: \u2191\u2193 PgUp PgDn scroll; any other key closes",
                 a->help_top + 1, a->help_top + rows, n);
    else
        snprintf(foot, sizeof foot, "Press any key to close.");
    term_put_words(win, rows + 1, 2, foot, w - 4, term_attr(UI_ROLE_DIM));
    wnoutrefresh(win);
    delwin(win);
}

void screen_draw_message(app *a, WINDOW *w, int width) {
    const char *m = message_text(a);
    ui_line lines[3];
    const int most = message_max_rows(), n = ui_wrap(m, strlen(m), width, lines, most);
    const int cut = ui_wrap(m, strlen(m), width, NULL, 0) > most; /* more lines than fit */
    attr_t at = term_attr(a->prefill_msg[0] ? UI_ROLE_NOTICE : (ui_role)a->msg_role);
    for (int i = 0; i < n && i < most; i++) {
        if (cut && i == most - 1) /* the rest of the text, ending at a word with an ellipsis */
            term_put_words(w, i, 0, m + lines[i].start, width, at);
        else
            term_put(w, i, 0, m + lines[i].start, lines[i].end - lines[i].start, width, at);
    }
}

void screen_draw(app *a) {
    if (a->too_small) {
        erase();
        static const char *m[3] = {"window too small", "(need 50x12)", "Ctrl-D quits; the chat is kept"};
        for (int i = 0; i < 3 && LINES / 2 - 1 + i < LINES; i++) {
            int len = (int)strlen(m[i]);
            mvaddnstr(LINES / 2 - 1 + i < 0 ? 0 : LINES / 2 - 1 + i, COLS > len ? (COLS - len) / 2 : 0, m[i], COLS > 0 ? COLS : 0);
        }
        wnoutrefresh(stdscr);
        doupdate();
        return;
    }
    if (message_rows(a, COLS) != a->msg_rows) screen_layout(a); /* a longer or shorter message */
    if (a->zoom == PANE_INSPECTOR && /* the view changed between the text view (drawn by the conversation) and another */
        !a->panes[inspector_view(a->panes[PANE_INSPECTOR]) == INSPECT_TEXT ? PANE_CONV : PANE_INSPECTOR]->win)
        screen_layout(a), clearok(curscr, TRUE);
    wnoutrefresh(stdscr); /* so that get_wch's implicit refresh of stdscr never paints over the panes */
    for (int i = 0; i < N_PANES; i++) {
        pane *p = a->panes[i];
        if (!p->win || i == PANE_INPUT) continue;
        p->ops->draw(p);
        wnoutrefresh(p->win);
    }
    if (a->model_view && !a->help) model_view_draw(a);
    if (a->help) {
        draw_help(a);
        curs_set(0);
    } else if (a->model_view) {
        curs_set(0);
    } else {
        curs_set(a->focus == PANE_INPUT ? 1 : 0);
    }
    pane *in = a->panes[PANE_INPUT];
    if (in->win && !a->help && !a->model_view) {
        in->ops->draw(in); /* last: it places the cursor */
        wnoutrefresh(in->win);
    }
    doupdate();
}

void screen_toggle_zoom(app *a) {
    if (a->zoom >= 0) {
        if (a->focus == a->zoom && a->zoom_from >= 0) a->focus = a->zoom_from; /* back where F10 was pressed */
        a->zoom = -1;
        app_message(a, UI_ROLE_TEXT, "zoom off: every pane back");
    } else {
        a->zoom = a->focus == PANE_CONV ? PANE_CONV : PANE_INSPECTOR;
        a->zoom_from = a->focus, a->focus = a->zoom;
        app_message(a, UI_ROLE_TEXT, "zoom: the %s over the screen (F10, z or /zoom: back; Esc: the input line)",
                    a->zoom == PANE_CONV ? "conversation" : "inspector");
    }
    screen_layout(a);
    clearok(curscr, TRUE);
}

void screen_focus_next(app *a, int dir) {
    static const int order[] = {PANE_INPUT, PANE_CONV, PANE_SAMPLING, PANE_INSPECTOR};
    int n = 4, i = 0;
    while (i < n && order[i] != a->focus) i++;
    for (int k = 0; k < n; k++) {
        i = (i + dir + n) % n;
        if (a->panes[order[i]]->win) {
            a->focus = order[i];
            return;
        }
    }
}


/* ---- keys ---- */

/* Ctrl-C: stop the reply; else clear the line; on an empty line, say how to quit. */
static void interrupt_key(app *a) {
    pane *in = a->panes[PANE_INPUT];
    if (a->generating) app_stop(a);
    else if (!input_empty(in)) input_clear(in), a->msg[0] = '\0';
    else app_message(a, UI_ROLE_NOTICE, "Ctrl-C stops a reply and clears the line; /quit (or Ctrl-D on an empty line) quits");
}

/* A click on a token of the text view: that token becomes the query. */
static void click(app *a, int y, int x) {
    int q = conv_token_at(a->panes[PANE_CONV], y, x);
    if (q >= 0) inspector_set_query(a->panes[PANE_INSPECTOR], q, -1);
}

/* Global function and mouse keys: F1 help, F2 confidence, F3-F7 the
 * inspector, Shift-Tab, the wheel, PgUp/PgDn for the conversation. */
static int global_code(app *a, int key) {
    pane *ins = a->panes[PANE_INSPECTOR], *conv = a->panes[PANE_CONV];
    switch (key) {
    case KEY_F(1): a->help = 1; return 1;
    case KEY_F(2): conv_toggle_confidence(conv); return 1;
    case KEY_F(3): inspector_set_layer(ins, inspector_layer(ins) - 1); return 1;
    case KEY_F(4): inspector_set_layer(ins, inspector_layer(ins) + 1); return 1;
    case KEY_F(5): inspector_set_head(ins, inspector_head(ins) - 1); return 1;
    case KEY_F(6): inspector_set_head(ins, inspector_head(ins) + 1); return 1;
    case KEY_F(7): inspector_toggle_average(ins); return 1;
    case KEY_F(8): inspector_next_view(ins); return 1;
    case KEY_F(9): model_view_open(a); return 1;
    case KEY_F(10): screen_toggle_zoom(a); return 1;
    case KEY_BTAB: screen_focus_next(a, -1); return 1;
    case KEY_MOUSE: {
        MEVENT ev;
        if (getmouse(&ev) == OK) {
            if (ev.bstate & BUTTON4_PRESSED) conv_scroll(conv, 3);
            else if (ev.bstate & BUTTON5_PRESSED) conv_scroll(conv, -3);
            else if (ev.bstate & (BUTTON1_PRESSED | BUTTON1_CLICKED)) click(a, ev.y, ev.x);
        }
        return 1;
    }
    case KEY_PPAGE:
    case KEY_NPAGE: return conv->ops->key(conv, key, 1) ? 1 : 0; /* from any pane that does not page itself */
    default: return 0;
    }
}

/* A key no pane took. Typing in another pane goes back to the input line. */
static int global_key(app *a, int key, int is_code) {
    if (is_code) return global_code(a, key);
    if (key & KEY_META_BIT) return 1; /* an Alt combination outside the input line */
    switch (key) {
    case 3: interrupt_key(a); return 1;
    case '\t': screen_focus_next(a, +1); return 1;
    case 12: clearok(curscr, TRUE); return 1; /* Ctrl-L */
    case '?': a->help = 1; return 1;          /* the input line took it unless it is empty */
    default: break;
    }
    pane *in = a->panes[PANE_INPUT];
    a->focus = PANE_INPUT;
    in->ops->key(in, key, 0);
    return 1;
}

/* Escape: alone, stop the reply (or give the input focus back); followed at
 * once by a key, an Alt combination (KEY_META_BIT) or an escape sequence
 * curses did not know. */
static int escape_key(app *a) {
    wint_t nx;
    nodelay(stdscr, TRUE);
    int r = term_get_key(&nx);
    if (r == OK) return screen_key(a, (int)nx | KEY_META_BIT, 0);
    if (r == KEY_CODE_YES) return screen_key(a, (int)nx, 1);
    if (a->generating) app_stop(a);
    else a->focus = PANE_INPUT;
    return 1;
}

/* The states that take every key: the help (arrows scroll it, any other key
 * closes it), a window too small (Ctrl-C stops a reply, Ctrl-D quits) and
 * the model view (Ctrl-C closes it, as Esc and q do). No key here quits
 * without the conversation kept. -1: neither. */
static int modal_key(app *a, int key, int is_code) {
    if (a->help) {
        if (!(is_code && help_scroll(a, key))) a->help = 0, a->help_top = 0;
        return 1;
    }
    if (a->too_small) {
        if (!is_code && key == 3 && a->generating) app_stop(a);
        else if (!is_code && key == 4) a->quit = 1;
        return 1;
    }
    if (a->model_view) {
        if (!is_code && key == 3) model_view_close(a);
        else if (!(is_code && key == KEY_RESIZE)) return model_view_key(a, key, is_code);
        return 1;
    }
    return -1;
}

/* A bracketed paste: everything up to its end goes into the input line as
 * text, newlines kept ("\r\n" and "\r" become "\n"), other control
 * characters and keys dropped; the help or the model view closes so that it
 * shows. Nothing is sent: Enter sends it as one message. */
static int paste(app *a) {
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    int lines = 0, prev_cr = 0;
    wint_t ch;
    int r;
    wtimeout(stdscr, 2000); /* the end should follow at once; a terminal that lost it is not waited on for ever */
    while (buf && (r = term_get_key(&ch)) != ERR) {
        if (r == KEY_CODE_YES) {
            if (ch == TERM_KEY_PASTE_END) break;
            continue;
        }
        if (ch == '\n' && prev_cr) {
            prev_cr = 0;
            continue;
        }
        prev_cr = ch == '\r';
        if (ch == '\r') ch = '\n';
        if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7F || (ch >= 0x80 && ch < 0xA0)) continue;
        if (n + 5 > cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) break;
            buf = nb;
        }
        lines += ch == '\n';
        n += (size_t)ui_utf8_encode((uint32_t)ch, buf + n);
    }
    if (!buf) return 1;
    buf[n] = '\0';
    lines += n > 0 && buf[n - 1] != '\n'; /* a last line without its newline */
    a->help = 0;
    if (a->model_view) model_view_close(a);
    a->focus = PANE_INPUT;
    input_insert(a->panes[PANE_INPUT], buf);
    if (lines > 1) app_message(a, UI_ROLE_NOTICE, "pasted %d lines into the input line: Enter sends them as one message", lines);
    free(buf);
    return 1;
}

/* Ctrl-Z: the shell's job control, as in any terminal program; `fg` redraws. */
static int suspend(app *a) {
    app_log(a, "suspended (Ctrl-Z)");
    term_suspend();
    screen_layout(a);
    app_log(a, "resumed");
    return 1;
}

int screen_key(app *a, int key, int is_code) {
    if (is_code && key == KEY_RESIZE) {
        screen_layout(a);
        clearok(curscr, TRUE);
        return 1;
    }
    if (is_code && key == TERM_KEY_PASTE_BEGIN) return paste(a);
    if (is_code && key == TERM_KEY_PASTE_END) return 0; /* its beginning was lost */
    if (!is_code && key == 26) return suspend(a);
    int m = modal_key(a, key, is_code);
    if (m >= 0) return m;
    if (!is_code && key == 27) return escape_key(a);
    pane *fp = a->panes[a->focus];
    int r = fp->ops->key(fp, key, is_code);
    if (r & PANE_QUIT) a->quit = 1;
    return r ? 1 : global_key(a, key, is_code);
}
