/* app.h — the chat app's state and its panes (application layer, curses).
 *
 * Panes are vtables {draw, key, resize, free} under a small screen manager
 * (chat.c): the manager lays them out, routes a key to the focused pane first
 * and then to the global keys, and redraws what a handler flagged. Data lives
 * in the app (session, attention rows, candidate snapshots); panes only draw
 * it. */
#ifndef GPTSCOPE_UI_APP_H
#define GPTSCOPE_UI_APP_H

#include <stdio.h>

#include "gpt2.h"
#include "ui/term.h"

/* key handler result flags */
enum { PANE_IGNORED = 0, PANE_HANDLED = 1, PANE_REDRAW = 2, PANE_QUIT = 4 };

typedef struct app app;
typedef struct pane pane;

typedef struct {
    const char *name;
    void (*draw)(pane *p);
    int (*key)(pane *p, int key, int is_code); /* is_code: a KEY_* code from keypad */
    void (*resize)(pane *p);
    void (*free)(pane *p);
} pane_ops;

struct pane {
    const pane_ops *ops;
    app *a;
    WINDOW *win;
    int y, x, h, w;
    int focusable;
};

enum { SNAP_K = GPT2_SESSION_CANDIDATES }; /* candidates kept per generated token */

/* The next-token candidates as they were when a token was sampled. */
typedef struct {
    int valid;
    int32_t chosen;     /* the sampled id */
    float chosen_prob;  /* its probability (temperature 1, before filters) */
    int n;
    gpt2_candidate c[SNAP_K];
    gpt2_sampler_params params; /* the knobs at that step */
} token_snap;

/* One reply token as the conversation pane marks it. */
typedef struct {
    float p;              /* the probability the model gave it (temperature 1) */
    unsigned char origin; /* gpt2_token_origin */
} tok_note;

enum { PANE_CONV = 0, PANE_SAMPLING, PANE_INSPECTOR, PANE_INPUT, PANE_STATUS, N_PANES };
enum { SP_TEMP = 0, SP_TOPK, SP_TOPP, SP_MINP, SP_REP, SP_MAXNEW, SP_SEED, SP_DRAFTK, SP_COUNT };

struct app {
    /* model and session */
    gpt2_model *model;
    const gpt2_tokenizer *tok;
    const gpt2_config *cfg;
    gpt2_session *s;
    gpt2_model *draft;  /* draft mode's model (owned), NULL: none */
    char draft_name[128];
    const char *model_dir;
    char model_name[128];
    char themes_dir[4096];
    FILE *log;          /* --log, NULL: none, or stopped after a write failed */
    const char *log_path;
    char log_error[600]; /* why the log stopped ("": it did not); the exit status is then 1 */

    /* attention rows from the hooks: (n_att_layers, n_head, n_ctx, n_ctx);
       row p holds keys 0..p. All layers when they fit the budget, else only
       the shown layer (att_layer_of_row says which layer a row was computed for). */
    float *att;
    int n_ctx;
    int all_layers;
    int *att_row_layer; /* (n_ctx), single-layer mode only */

    /* the latest token's candidates (earlier tokens': gpt2_session_candidates) */
    token_snap last_snap;

    /* what each reply token was, per turn: its probability (the confidence
       view, F2) and how it came about (draft mode marks) */
    tok_note **turn_notes;
    int *turn_nnotes, *turn_capnotes;
    int turns_cap;

    /* UI state */
    pane panes[N_PANES];
    int focus;       /* PANE_* with focusable set */
    int too_small;
    int help;        /* the help screen is open */
    int help_top;    /* its first line shown (it scrolls when taller than the screen) */
    int msg_rows;    /* rows the message line takes in the layout (a long one wraps, up to 3) */
    char pending_load[4096]; /* a /load of another model's file, waiting to be repeated */
    int conf_view;   /* colour tokens by probability */
    int conv_scroll; /* lines scrolled back from the bottom */
    int sp_sel;      /* selected sampling item */
    int layer, head; /* head -1: average of heads */
    int heat_cursor; /* query under the cursor, -1: follow the newest */
    int heat_scroll;
    int quit;
    int generating;
    int exit_code;

    /* reply timing */
    double reply_t0;
    int reply_tokens;  /* tokens the current (or last) reply kept */
    int turn_prefill;  /* tokens evaluated before it: its send's prefill, or regen's re-evaluation */
    double last_tps;
    char prefill_msg[128];

    /* one-line message above the input (notices, errors, command results) */
    char msg[512];
    int msg_role; /* ui_role */
    unsigned seen_notices;
};

/* the pane tables (panes.c) */
extern const pane_ops conv_pane_ops, sampling_pane_ops, inspector_pane_ops, input_pane_ops, status_pane_ops;

/* helpers panes use (chat.c, screen.c) */
void app_message(app *a, ui_role role, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
const float *app_att_row(const app *a, int layer, int head, int pos); /* NULL if not stored */
void app_apply_sampling(app *a, int item, int dir, int big);
void app_set_layer(app *a, int layer);
void app_set_head(app *a, int head);
void app_draw_help(app *a);
/* A key while the help is open: 1 if it scrolled the help (Up, Down, PgUp,
 * PgDn, Home, End), 0 if it is a key that closes it. */
int app_help_scroll(app *a, int key);
/* text of one token for display: control chars and spaces made visible */
void app_token_label(const app *a, int32_t id, char *buf, size_t cap);

/* The chat's slash commands (chat.c): the help screen lists them from here. */
typedef struct {
    const char *name, *alias; /* "/quit", "/q" */
    const char *args;         /* "FILE", "" for none */
    const char *help;         /* one line; NULL: an alias the help does not list */
    int path_arg;             /* the first argument is a path (~ expanded) */
    void (*fn)(app *a, char *arg1, char *arg2);
} app_command;
const app_command *app_commands(int *n);

/* the screen manager (screen.c) */
void screen_layout(app *a);           /* (re)creates the panes' windows for LINES x COLS */
void screen_draw(app *a);             /* draws every pane (or "window too small") and the help */
/* the message (or a prefill's progress) wrapped into the top rows of w */
void screen_draw_message(app *a, WINDOW *w, int width);
void screen_focus_next(app *a, int dir);

/* the input line: GNU readline's callback interface (input.c) */
void input_setup(app *a);             /* installs the line handler, reads the history */
/* out = $XDG_STATE_HOME/gptscope/NAME (default ~/.local/state/gptscope/),
   the directory made if missing; 0 when there is no such place */
int input_state_path(const char *name, char *out, size_t cap);
void input_teardown(void);            /* removes it, writes the history */
void input_key(int key, int is_code); /* one key for the line (KEY_* mapped to emacs bytes) */
void input_meta_key(int key);         /* Esc + key: readline's Meta bindings (Alt-B, ...) */
char *input_take_line(int *got);      /* *got = 1 once a line was accepted; returns it
                                         (malloc'd; NULL for Ctrl-D on an empty line) */
void input_insert_newline(void);
void input_clear(void);
int input_empty(void);
void input_history_add(const char *line);
void input_draw_line(pane *p);        /* prompt, line and cursor in the input pane */

#endif
