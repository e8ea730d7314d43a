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
 *   view_attn.c       the inspector's attention drawings (zoomed heatmap,
 *                     binned overview, legend, readout); the text view is
 *                     drawn by the conversation pane (pane_conv.c)
 *   view_model.c      the model view: every head's thumbnail and scores (F9, /heads)
 *   view_lens.c       the logit lens of the inspector's query (a view of the inspector)
 *   view_why.c        why this token: direct logit attribution at the query (w, /why)
 *   export.c          /export: the microscope's data as JSON, CSV, SVG or PNG (src/viz)
 *   microscope.c      ablation (keys and /ablate) and prompt mode (/inspect,
 *                     `gptscope inspect`, /generate, /chat)
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
#include "ui/state.h"
#include "ui/term.h"
#include "viz/export.h"

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

enum { APP_ATT_BUDGET = 256 << 20 }; /* bytes of attention rows a store keeps for all layers */
enum { APP_RES_BUDGET = 128 << 20 }; /* bytes of residual stream a store keeps for the logit lens */

enum { PANE_CONV = 0, PANE_SAMPLING, PANE_INSPECTOR, PANE_INPUT, PANE_STATUS, N_PANES };

struct app {
    /* model and session */
    gpt2_model *model;
    const gpt2_tokenizer *tok;
    const gpt2_config *cfg;
    gpt2_session *s;
    int n_ctx;          /* the session's context */
    int n_batch;        /* its prefill batch (progress and Esc between batches) */
    gpt2_model *draft;  /* draft mode's model (owned), NULL: none */
    char draft_name[128];
    const char *model_dir;
    char model_name[128];
    char model_kind[24];        /* "nanoGPT", "llm.c", "PyTorch": the status bar's tag; "" for safetensors */
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
    int zoom;        /* PANE_INSPECTOR or PANE_CONV given all the screen above the input (F10); -1: none */
    int zoom_from;   /* the pane focused when the zoom began, focused again when it ends */

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
    char prefill_msg[160];

    const char *progress_what; /* what app_progress says is running ("prefill", "ablation: ...") */

    /* the microscope (microscope.c) */
    gpt2_sampler *probe;  /* temperature 1, no cuts: reads a next-token distribution off the logits */
    gpt2_context *probe_ctx; /* evaluates the "before" when the session's cache has no logits (NULL: not yet) */
    float *cmp_logits;    /* (n_vocab) the logits before the last ablation change */
    float *at_logits, *at_probs; /* (n_vocab) app_next_at's */
    float *cmp_before, *cmp_after; /* (n_vocab) the distributions before and after it */
    int32_t cmp_ids[2 * ISTORE_SNAP_K]; /* the tokens the comparison lists */
    int cmp_n;
    int cmp_n_tok;        /* the context length they are for; -1: none (shown while it is the same) */
    char cmp_what[96];    /* "ablated L3 H1", "ablation lifted" */
    int prompt_mode;      /* a->s and a->store are the prompt's; the chat's wait in other_s, other_store */
    struct model_view *model_view; /* the model view, open over everything (view_model.c); NULL: closed */
    struct lens_cache *lens;       /* the logit lens's last table (view_lens.c) */
    struct why_cache *why;         /* the last attribution (view_why.c) */
    gpt2_session *other_s;
    istore *other_store;

    /* commands */
    char pending[4200];      /* a command that asked first (/load of another model's file, a /save or
                              * /export over a file): the same line again goes ahead */
    int pending_new;         /* pending was set by the command now running */
    state_keeper keep;       /* the conversation's file in the state directory (state.h) */
    char keep_error[512];    /* the last save's failure, told once ("": it worked) */
    int keep_dirty;          /* the session changed since it was loaded (--continue) or kept */
    char continued_from[4096]; /* --continue's file ("": none) */
    int term_lost;           /* the terminal went away (term_lost) */

    /* one-line message above the input (notices, errors, command results) */
    char msg[512];
    int msg_role; /* ui_role */
    int msg_while_reply; /* the message says what the reply is doing: it goes when the reply ends */
    int restore_max_new; /* /generate N's reply limit replaced this one until it ends (-1: none) */
    unsigned seen_notices;
};

/* ---- actions.c: the session, the message line, the log ---- */

void app_message(app *a, ui_role role, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* One line in the --log (nothing without one). */
/* A message about the reply under way ("regenerating ..."), cleared when it ends. */
void app_reply_message(app *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
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
/* A message: prefill, then the reply starts. 0, or -1 when it was not sent
 * (cancelled, too long: the message line says why). */
int app_send(app *a, const char *text);
void app_step(app *a);                   /* one token of the reply */
void app_stop(app *a);                   /* the reply stops, its text kept */
void app_start_reply(app *a, int evaluated); /* after a send, /regen or a /load mid-reply */
/* After anything that changed the session: notes and rows follow its turns
 * and tokens, a notice it raised goes on the message line. */
void app_after_change(app *a);
/* Saves the chat's conversation (not prompt mode's text) to its kept file
 * (state.h); a failure is told once on the message line and in the log. */
void app_keep(app *a);
/* Positions moved (a notice, a template switch, /load, /reset): the latest
 * candidates and the inspector's cursor start afresh. */
void app_forget_latest(app *a);

/* ---- view_model.c: the model view, every head at once (F9, /heads) ---- */

void model_view_open(app *a);
void model_view_close(app *a);
void model_view_draw(app *a);                      /* over the panes, full screen */
int model_view_key(app *a, int key, int is_code); /* takes every key while open */
/* Every head's scores over the context (rows: n_layer * n_head), for /export;
 * fails when a layer's rows are not kept. */
gpt2_status app_head_scores(app *a, viz_head_row *rows, gpt2_error *err);

/* ---- export.c: /export KIND FILE (attention, heads, lens, topk; JSON, CSV, SVG, PNG) ---- */
gpt2_status app_export(app *a, const char *kind, const char *path, gpt2_error *err);

/* ---- microscope.c: ablation ---- */

int app_microscope_open(app *a);  /* the probe sampler and buffers; -1 out of memory */
void app_microscope_close(app *a);
/* Toggles head (layer, head) (head -1: the whole layer, on unless all of it
 * is) and re-evaluates the context under the new set, with progress. */
void app_ablate_toggle(app *a, int layer, int head);
/* Replaces the set (NULL: none): the same, and the before/after comparison. */
void app_ablate_set(app *a, const unsigned char *mask, const char *what);
int app_ablation_count(const app *a);
/* "3.1 4.*" (a whole layer as L.*), "" for none */
void app_ablation_text(const app *a, char *buf, size_t cap);
/* The next-token distribution before and after the last ablation change,
 * from row y (rows at most), while the context is as it was then: 1 drawn. */
int app_compare_draw(app *a, pane *p, int y, int rows);
/* The next-token distribution at the end of the context (temperature 1, no
 * cuts) when nothing was sampled there (prompt mode): 1 when the cache has it. */
int app_next_now(app *a, istore_snap *out);
/* The model's next-token distribution after context position q (temperature
 * 1, no cuts), from the last block's residual the store kept (the logits, bit
 * for bit): for a token nothing was sampled at. 1 when kept. */
int app_next_at(app *a, int q, istore_snap *out);
/* The app's probe context (made once, the session's n_ctx) under the
 * session's ablation set: for what the session's own cache cannot give (the
 * "before" of an ablation, attribution). NULL with err filled. */
gpt2_context *app_probe_context(app *a, gpt2_error *err);
/* Token id's rank (1: the most probable; ties by id) and probability in the
 * distribution app_next_at computed last. 1, or 0 when there is none. */
int app_rank_at(const app *a, int32_t id, long *rank, float *prob);

/* ---- microscope.c: prompt mode ---- */

/* Prompt mode on text: a second session on the raw template (made once,
 * with its own store) holds the text as its one user turn; sending it
 * evaluates it and opens the reply, which is left unstepped. The chat's
 * session and store wait aside, untouched, until app_back_to_chat. */
void app_inspect_text(app *a, const char *text);
void app_hook_store(gpt2_session *s, istore *st); /* the session's hooks fill the store */
void app_generate(app *a, int n); /* prompt mode: continue the text by n tokens */
void app_back_to_chat(app *a);

/* ---- commands.c: the slash commands ---- */

/* The table: the help screen lists it, /help points at it. */
typedef struct {
    const char *name, *alias; /* "/quit", "/q" */
    const char *args;         /* "FILE", "" for none */
    const char *help;         /* one line; NULL: an alias the help does not list */
    int path_arg;             /* the first argument is a path (~ expanded) */
    void (*fn)(app *a, char *arg1, char *arg2);
    int rest_arg;             /* arg1 is the rest of the line, spaces kept (/inspect TEXT) */
} app_command;
const app_command *app_commands(int *n);
/* A line the input accepted: a command, a message, or NULL (Ctrl-D on an
 * empty line: quit). -1 when a message was not sent: the input line gets it
 * back to edit. */
int app_submit_line(app *a, char *line);

/* ---- screen.c: the screen manager ---- */

void screen_layout(app *a);           /* places the panes for LINES x COLS */
void screen_draw(app *a);             /* draws every pane (or "window too small") and the help */
/* the message (or a prefill's progress) wrapped into the top rows of w */
void screen_draw_message(app *a, WINDOW *w, int width);
void screen_focus_next(app *a, int dir);
/* F10, z in the inspector, /zoom: the focused pane (the inspector from the
 * input line or the knobs) takes the whole screen above the input, or gives it back. */
void screen_toggle_zoom(app *a);
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
/* The context position of the token drawn at screen cell (y, x) in the
 * text view; -1 for none (another view, or no token there). */
int conv_token_at(const pane *p, int y, int x);

pane *sampling_pane_new(app *a);

pane *inspector_pane_new(app *a);
void inspector_set_layer(pane *p, int layer); /* wraps around */
void inspector_set_head(pane *p, int head);   /* wraps around through -1, the average */
void inspector_toggle_average(pane *p);
void inspector_cycle_mode(pane *p);            /* the selected head -> mean of heads -> max over heads */
void inspector_next_view(pane *p);
void inspector_set_view(pane *p, int view); /* an inspect_view */
void inspector_toggle_why(pane *p);         /* w, /why: the why view, and back */
int inspector_layer(const pane *p);
int inspector_view(const pane *p);             /* an inspect_view */
int inspector_head(const pane *p);             /* 0..n_head-1, ISTORE_MEAN or ISTORE_MAX */
void inspector_follow_newest(pane *p);         /* the cursor back on the newest token */
void inspector_set_query(pane *p, int q, int key); /* a click: query q (key -1: its top key) */

/* The inspector's views: different drawings of the same store. To add one,
 * add it here, name it in view_name (pane_inspector.c) and draw it in
 * inspector_draw's switch. */
/* INSPECT_WHY (w, /why: direct logit attribution) is outside F8's cycle:
 * F8 or w from it goes back to the view it was opened from. */
typedef enum {
    INSPECT_ZOOM = 0, INSPECT_OVERVIEW, INSPECT_TEXT, INSPECT_LENS, N_INSPECT_VIEWS, INSPECT_WHY = N_INSPECT_VIEWS
} inspect_view;

/* What the views draw: the inspector's choices, resolved for this frame. */
typedef struct {
    inspect_view view;
    int layer, head;     /* head: 0..n_head-1, ISTORE_MEAN or ISTORE_MAX */
    int query;           /* the query under the cursor; -1: no tokens */
    int key;             /* the key under the key cursor (<= query) */
    int key_auto;        /* key is the query's top key, not one the user moved to */
    int row_scale;       /* 1: each query row scaled to its own maximum */
    int n_tok;
    const int32_t *toks; /* the context (n_tok ids) */
} inspect_focus;

void inspector_focus(pane *p, inspect_focus *f);
/* "L2 H3", "L2 mean", "L2 max": the head(s) a drawing shows */
void inspector_head_name(const app *a, const inspect_focus *f, char *buf, size_t cap);

/* view_attn.c. Query q's weights under the focus into out[0..q] (NaN where
 * missing); returns the scale for ui_heat_scaled: 0 global, else the row's
 * maximum (per-row scale). */
float view_row(const app *a, const inspect_focus *f, int q, float *out);
/* y is a row of p's window; legend and readout return the rows they used.
 * Buffers: row n_ctx floats, rows2 and bins 2 * n_ctx. */
int view_legend(pane *p, int y, const inspect_focus *f, const char *how);
int view_readout(pane *p, int y, int max_rows, const inspect_focus *f, float *row);
void view_zoom(pane *p, int y, int h, const inspect_focus *f, float *row, int *scroll);
void view_overview(pane *p, int y, int h, const inspect_focus *f, float *row, float *bins);
/* A weight under scale (view_row's) as a ramp level: what the text view and the heatmap colour by. */
int view_level(float w, float scale);

/* view_lens.c: the logit lens of the query, from row y, h rows; returns the rows used. */
int view_lens(pane *p, int y, int h, const inspect_focus *f);
void app_lens_free(app *a);

/* view_why.c: why this token (gpt2_attribute.h) after the query: the token
 * that follows it in the context (at the newest, the model's top 1), its
 * logit split into the embeddings, every head, the attention biases, the
 * MLPs and the final norm's bias; vs: against the best other token (A - B).
 * Computed by the core in the app's probe context (its cache reused up to
 * the query) when the query, the context or the ablation changes. sel: the
 * selected part among them, largest first (clamped). Draws from row y, h rows. */
typedef struct {
    int vs;  /* 1: the difference to the best other candidate */
    int sel; /* the selected part, 0 = the largest */
} why_choice;
void view_why(pane *p, int y, int h, const inspect_focus *f, why_choice *c);
/* The selected part when it is a head: 1 with its layer and head. */
int app_why_head(app *a, const inspect_focus *f, const why_choice *c, int *layer, int *head);
/* /export why FILE: the attribution the view shows, as JSON or CSV (src/viz). */
gpt2_status app_why_export(app *a, const inspect_focus *f, const why_choice *c, const char *path, gpt2_error *err);
void app_why_free(app *a);
why_choice *inspector_why(pane *p); /* the inspector's (the why view's state) */

pane *status_pane_new(app *a);

/* the input line: GNU readline's callback interface (input.c) */
pane *input_pane_new(app *a);         /* installs the line handler, reads the history */
void input_clear(pane *p);
void input_insert(pane *p, const char *text); /* at the cursor, as typed (newlines kept); nothing is sent */
int input_empty(const pane *p);

#endif
