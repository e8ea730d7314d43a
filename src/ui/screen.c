/* screen.c — the screen manager: lays the panes out for the terminal's size,
 * draws them (the input pane last: it owns the cursor), the help overlay, and
 * the focus order. A terminal below 50x12 gets "window too small" instead. */
#include <string.h>

#include "ui/app.h"

void screen_layout(app *a) {
    int H = LINES, W = COLS;
    a->too_small = H < 12 || W < 50;
    for (int i = 0; i < N_PANES; i++) {
        pane *p = &a->panes[i];
        if (p->win) delwin(p->win), p->win = NULL;
    }
    if (a->too_small) return;
    int right = W >= 100 ? W * 45 / 100 : W >= 72 ? 36 : 0;
    int top_h = H - 3;
    int samp_h = right ? 5 : 0;
    struct { int y, x, h, w; } g[N_PANES] = {
        [PANE_CONV] = {0, 0, top_h, W - right},
        [PANE_SAMPLING] = {0, W - right, samp_h, right},
        [PANE_INSPECTOR] = {samp_h, W - right, top_h - samp_h, right},
        [PANE_INPUT] = {top_h, 0, 2, W},
        [PANE_STATUS] = {H - 1, 0, 1, W},
    };
    for (int i = 0; i < N_PANES; i++) {
        pane *p = &a->panes[i];
        p->y = g[i].y, p->x = g[i].x, p->h = g[i].h, p->w = g[i].w;
        if (p->h > 0 && p->w > 0) p->win = newwin(p->h, p->w, p->y, p->x);
        if (p->win) p->ops->resize(p);
    }
    if (!a->panes[a->focus].win) a->focus = PANE_INPUT;
}

static const char *help_lines[] = {
    "gptscope chat \u2014 keys and commands",
    "",
    "Enter            send the message          Ctrl-J / Alt-Enter  new line in the message",
    "Esc / Ctrl-C     stop the reply (text kept), cancel a prefill; Ctrl-C also clears the line",
    "Tab / Shift-Tab  focus: input \u2192 conversation \u2192 sampling \u2192 inspector",
    "PgUp / PgDn      scroll the conversation (any focus but sampling/inspector); mouse wheel too",
    "F1, ?            this help (? when the input line is empty or another pane has focus)",
    "F2               confidence view: colour reply tokens by their probability",
    "Draft mode       accepted draft tokens in the draft colour, the target's corrections in",
    "                 draft-fix, underlined where drafts were rejected; status: k, r, tokens/pass",
    "F3 / F4          previous / next layer        F5 / F6  previous / next head (then average)",
    "F7               average of heads on/off      Ctrl-L   redraw",
    "Ctrl-D           quit (on an empty line)",
    "Input line       emacs keys (readline): Ctrl-A/E/B/F/K/U/W, Alt-B/F, Up/Down history, Ctrl-R search",
    "Conversation     Up/Down/PgUp/PgDn scroll, Home/End top/bottom",
    "Sampling         Up/Down pick a knob, Left/Right (or -/+) change it, PgUp/PgDn by 10 steps",
    "Inspector        Up/Down/PgUp/PgDn move the query cursor (shows that token's candidates),",
    "                 End follow the newest token, Left/Right or h/H head, l/L layer, a average",
    "",
    "/help  /reset  /regen  /undo  /quit",
    "/set NAME VALUE  temperature top-k top-p min-p repeat-penalty repeat-last-n max-tokens seed",
    "/layer N   /head N|avg   /theme NAME|PATH   /template NAME|PATH (transcript dialogpt raw model)",
    "/save FILE   /load FILE   /conf (confidence view)",
    "/draft on|off|DIR  speculative sampling with a draft model   /set draft_k K (1..16)",
    "",
    "Press any key to close.",
};

void app_draw_help(app *a) {
    int n = (int)(sizeof help_lines / sizeof *help_lines);
    int h = n + 2 < LINES ? n + 2 : LINES, w = COLS - 2 > 96 ? 96 : COLS - 2;
    if (w < 10 || h < 3) return;
    WINDOW *win = newwin(h, w, (LINES - h) / 2, (COLS - w) / 2);
    if (!win) return;
    wbkgdset(win, ' ' | term_attr(UI_ROLE_TEXT));
    werase(win);
    wattrset(win, term_attr(UI_ROLE_BORDER));
    box(win, 0, 0);
    for (int i = 0; i < n && i + 1 < h - 1; i++)
        term_printf(win, i + 1, 2, w - 4, term_attr(i == 0 ? UI_ROLE_TITLE : UI_ROLE_TEXT), "%s", help_lines[i]);
    wnoutrefresh(win);
    delwin(win);
}

void screen_draw(app *a) {
    if (a->too_small) {
        erase();
        const char *m = "window too small";
        mvaddnstr(LINES / 2, COLS > 16 ? (COLS - 16) / 2 : 0, m, COLS > 0 ? COLS : 0);
        if (LINES > 1) mvaddnstr(LINES / 2 + 1, 0, "(need 50x12; Ctrl-C quits)", COLS > 0 ? COLS : 0);
        wnoutrefresh(stdscr);
        doupdate();
        return;
    }
    wnoutrefresh(stdscr); /* so that get_wch's implicit refresh of stdscr never paints over the panes */
    for (int i = 0; i < N_PANES; i++) {
        pane *p = &a->panes[i];
        if (!p->win || i == PANE_INPUT) continue;
        p->ops->draw(p);
        wnoutrefresh(p->win);
    }
    if (a->help) {
        app_draw_help(a);
        curs_set(0);
    } else {
        curs_set(a->focus == PANE_INPUT ? 1 : 0);
    }
    pane *in = &a->panes[PANE_INPUT];
    if (in->win && !a->help) {
        in->ops->draw(in); /* last: it places the cursor */
        wnoutrefresh(in->win);
    }
    doupdate();
}

void screen_focus_next(app *a, int dir) {
    static const int order[] = {PANE_INPUT, PANE_CONV, PANE_SAMPLING, PANE_INSPECTOR};
    int n = 4, i = 0;
    while (i < n && order[i] != a->focus) i++;
    for (int k = 0; k < n; k++) {
        i = (i + dir + n) % n;
        if (a->panes[order[i]].win) {
            a->focus = order[i];
            return;
        }
    }
}

