/* app.h — the chat app (application layer, curses): the state the whole app
 * shares, the pane vtable and what each file offers the others.
 *
 *   chat.c            chat_run: startup, the event loop, teardown (chat.h)
 *   screen.c          the screen manager: layout, drawing order, help, focus,
 *                     key routing and the global keys
 *   actions.c         what keys and commands do to the session (send, step,
 *                     stop, start a reply), the message line and the --log
 *   commands.c        the slash-command table: /help and the help screen list it
 *   pane_conv.c, pane_sampling.c, pane_inspector.c, pane_status.c, input.c
 *                     the panes, each with its own state
 *   inspect_store.c   the inspector's data (attention rows, candidates, notes):
 *                     plain data, no curses; the panes only read it
 *
 * Panes are vtables {draw, key, resize, free} (htop's Panel, tmux's
 * window_mode). Each pane type is a struct with `pane` first and its own
 * state after it (the conversation's scroll, the sampling panel's selection,
 * the inspector's layer/head/cursor, the input line); resize gives it its
 * window and clamps its state, free releases both. A key goes to the focused
 * pane first; what it ignores goes to the global keys (screen_key). The app
 * struct keeps what is not a pane's: the model and session, the store, the
 * message line, the reply's timing, the log. */
#ifndef GPTSCOPE_UI_APP_H
#define GPTSCOPE_UI_APP_H

#include <signal.h>
#include <stdio.h>

#include "gpt2.h"
#include "ui/chat.h"
#include "ui/inspect_store.h"
#include "ui/term.h"

/* key handler results: nonzero = handled */
enum { PANE_IGNORED = 0, PANE_HANDLED = 1, PANE_REDRAW = 2, PANE_QUIT = 4 };

/* An Alt combination (Esc then a character) reaches the panes as the
 * character with this bit set (is_code 0). */
enum { KEY_META_BIT = 1 << 24 };

typedef struct app app;
typedef struct pane pane;

typedef struct {
    const char *name;
    void (*draw)(pane *p);
    int (*key)(pane *p, int key, int is_code); /* is_code: a KEY_* code from keypad */
    /* the pane's new place; h or w 0: no room (no window). Creates the window. */
    void (*resize)(pane *p, int y, int x, int h, int w);
    void (*free)(pane *p); /* the window and the pane */
} pane_ops;

struct pane {
    const pane_ops *ops;
    app *a;
    WINDOW *win; /* NULL while the pane has no room */
    int y, x, h, w;
};

enum { PANE_CONV = 0, PANE_SAMPLING, PANE_INSPECTOR, PANE_INPUT, PANE_STATUS, N_PANES };

struct app {
    /* model and session */
    gpt2_model *model;
    const gpt2_tokenizer *tok;
    const gpt2_config *cfg;
    gpt2_session *s;
    int n_ctx;          /* the session's context */
    gpt2_model *draft;  /* draft mode's model (owned), NULL: none */
    char draft_name[128];
    const char *model_dir;
    char model_name[128];
    char themes_dir[4096];
    const chat_host *host;
    istore *store;      /* what the inspector shows (the session's hooks fill it) */

    FILE *log;          /* --log, NULL: none, or stopped after a write failed */
    const char *log_path;
    char log_error[600]; /* why the log stopped ("": it did not); the exit status is then 1 */

    /* the screen */
    pane *panes[N_PANES];
    int focus;       /* PANE_* */
    int too_small;
    int help;        /* the help screen is open */
    int help_top;    /* its first line shown (it scrolls when taller than the screen) */
    int msg_rows;    /* rows the message line takes in the layout (a long one wraps, up to 3) */

    /* the loop */
    int quit;
    const volatile sig_atomic_t *signalled; /* SIGTERM/SIGINT/SIGHUP seen: stop */
    int step_delay_ms;                       /* tests only: GPTSCOPE_TEST_STEP_DELAY_MS */

    /* the reply */
    int generating;
    double reply_t0;
    int reply_tokens;  /* tokens the current (or last) reply kept */
    int turn_prefill;  /* tokens evaluated before it: its send's prefill, or regen's re-evaluation */
    double last_tps;
    char prefill_msg[128];

    /* commands */
    char pending_load[4096]; /* a /load of another model's file, waiting to be repeated */
    char autosave[4096];     /* where /draft saved the conversation while it loads ("": none) */

    /* one-line message above the input (notices, errors, command results) */
    char msg[512];
    int msg_role; /* ui_role */
    unsigned seen_notices;
};

/* ---- actions.c: the session, the message line, the log ---- */

void app_message(app *a, ui_role role, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* One line in the --log (nothing without one). */
void app_log(app *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void app_log_sampling(app *a); /* the knobs as they are now */
/* text of one token for display: control chars and spaces made visible */
void app_token_label(const app *a, int32_t id, char *buf, size_t cap);
/* The prefill's progress callback (user data: the app): draws it, reads Esc/Ctrl-C. */
int app_progress(void *ud, int done, int total);
void app_send(app *a, const char *text); /* a message: prefill, then the reply starts */
void app_step(app *a);                   /* one token of the reply */
void app_stop(app *a);                   /* the reply stops, its text kept */
void app_start_reply(app *a, int evaluated); /* after a send, /regen or a /load mid-reply */
/* After anything that changed the session: notes and rows follow its turns
 * and tokens, a notice it raised goes on the message line. */
void app_after_change(app *a);
/* Positions moved (a notice, a template switch, /load, /reset): the latest
 * candidates and the inspector's cursor start afresh. */
void app_forget_latest(app *a);

/* ---- commands.c: the slash commands ---- */

/* The table: the help screen lists it, /help points at it. */
typedef struct {
    const char *name, *alias; /* "/quit", "/q" */
    const char *args;         /* "FILE", "" for none */
    const char *help;         /* one line; NULL: an alias the help does not list */
    int path_arg;             /* the first argument is a path (~ expanded) */
    void (*fn)(app *a, char *arg1, char *arg2);
} app_command;
const app_command *app_commands(int *n);
/* A line the input accepted: a command, a message, or NULL (Ctrl-D on an empty line: quit). */
void app_submit_line(app *a, char *line);

/* ---- screen.c: the screen manager ---- */

void screen_layout(app *a);           /* places the panes for LINES x COLS */
void screen_draw(app *a);             /* draws every pane (or "window too small") and the help */
/* the message (or a prefill's progress) wrapped into the top rows of w */
void screen_draw_message(app *a, WINDOW *w, int width);
void screen_focus_next(app *a, int dir);
int screen_focused(const pane *p);
/* One key (as term_get_key reads it): nonzero when the screen needs a redraw. */
int screen_key(app *a, int key, int is_code);
/* The window of a pane at its place (every resize starts here). */
void pane_place(pane *p, int y, int x, int h, int w);
void pane_release(pane *p);           /* the window and the pane (a free for stateless panes) */
/* helpers the panes draw with */
void pane_title(pane *p, const char *title);
void pane_left_border(pane *p);

/* ---- the panes ---- */

pane *conv_pane_new(app *a);
int conv_toggle_confidence(pane *p);  /* returns the new state */
void conv_scroll(pane *p, int lines); /* + back, - forward */

pane *sampling_pane_new(app *a);

pane *inspector_pane_new(app *a);
void inspector_set_layer(pane *p, int layer); /* wraps around */
void inspector_set_head(pane *p, int head);   /* wraps around through -1, the average */
void inspector_toggle_average(pane *p);
int inspector_layer(const pane *p);
int inspector_head(const pane *p);
void inspector_follow_newest(pane *p);         /* the cursor back on the newest token */

pane *status_pane_new(app *a);

/* the input line: GNU readline's callback interface (input.c) */
pane *input_pane_new(app *a);         /* installs the line handler, reads the history */
/* out = $XDG_STATE_HOME/gptscope/NAME (default ~/.local/state/gptscope/),
   the directory made if missing; 0 when there is no such place */
int input_state_path(const char *name, char *out, size_t cap);
void input_clear(pane *p);
int input_empty(const pane *p);

#endif
