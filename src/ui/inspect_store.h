/* inspect_store.h — what the chat's inspector records while the model runs:
 * attention rows from the forward pass's hooks, the latest token's
 * next-token candidates, and one note per reply token (its probability and
 * how it came about). Plain data: no curses, no session calls (the app passes
 * in what it read from the session); the panes only read it. Unit-tested in
 * tests/test_inspect_store.c.
 *
 * Attention rows: row (layer, head, pos) holds query pos's softmax weights
 * over keys 0..pos. All layers are kept when they fit the memory budget
 * (n_layer * n_head * n_ctx * n_ctx floats); else only the layer the
 * inspector shows (istore_show_layer), and a row then remembers which layer
 * it was computed for, so that a row of another layer reads as missing
 * (NULL, drawn '?') until the model computes that position again.
 *
 *   istore *st;
 *   if (istore_new(cfg->n_layer, cfg->n_head, n_ctx, 256 << 20, &st) != ISTORE_OK) ...;
 *   gpt2_hooks h = {.user_data = st, .want_attention = istore_hook_want,
 *                   .on_attention = istore_hook_put};
 *   ... the model runs ...
 *   const float *row = istore_row(st, layer, head, pos); // (pos + 1) floats, or NULL
 *   istore_free(st);
 */
#ifndef GPTSCOPE_UI_INSPECT_STORE_H
#define GPTSCOPE_UI_INSPECT_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2.h"

typedef enum { ISTORE_OK = 0, ISTORE_ERR_ARG, ISTORE_ERR_NOMEM } istore_status;

typedef struct istore istore;

/* A store for a model of n_layer x n_head attention heads over n_ctx
 * positions; all layers when they take at most budget bytes. */
istore_status istore_new(int n_layer, int n_head, int n_ctx, size_t budget, istore **out);
void istore_free(istore *st);

int istore_n_ctx(const istore *st);
int istore_all_layers(const istore *st); /* 1: every layer kept; 0: only the shown one */

/* ---- attention rows ---- */

/* The layer the inspector shows: in single-layer mode, the one the hooks keep. */
void istore_show_layer(istore *st, int layer);

/* The hooks (gpt2_hooks.want_attention / on_attention, user_data = the store):
 * want says whether (layer, head) is kept; put copies query pos's n_keys
 * weights (pos + 1 of them) into its row. */
int istore_hook_want(void *st, int layer, int head);
void istore_hook_put(void *st, int layer, int head, int pos, const float *probs, int n_keys);

/* Row (layer, head, pos): pos + 1 floats, or NULL when out of range or not
 * kept (single-layer mode: computed for another layer, or forgotten). */
const float *istore_row(const istore *st, int layer, int head, int pos);

/* What a head argument may also name: the mean of the layer's heads, or
 * their maximum (where any head looks). */
enum { ISTORE_MEAN = -1, ISTORE_MAX = -2 };

/* Query q's weight on key k at (layer, head); head ISTORE_MEAN: the mean
 * over the heads, ISTORE_MAX: the maximum over them. NaN when a row it needs
 * is missing. */
float istore_weight(const istore *st, int layer, int head, int q, int k);

/* Row q of (layer, head) (head ISTORE_MEAN / ISTORE_MAX as above) into out[0..q]:
 * NaN where missing. */
void istore_weights(const istore *st, int layer, int head, int q, float *out);

/* A counter that changes whenever any row or residual does (a cache of
 * something drawn from the store compares it). */
unsigned long istore_version(const istore *st);

/* The session dropped every position from n on (undo, reset, /load, a
 * context drop): their rows read as never computed until computed again
 * (all layers: zeros, as at the start; single layer: NULL). */
void istore_truncate(istore *st, int n);

/* ---- residual stream (the logit lens) ---- */

/* Keeps the residual stream after every block for every position (n_layer
 * * n_ctx * n_embd floats) when that takes at most budget bytes; else
 * ISTORE_ERR_NOMEM and nothing is kept (the lens then says so). */
istore_status istore_keep_residuals(istore *st, int n_embd, size_t budget);

/* The hooks (gpt2_hooks.want_residual / on_residual, user_data = the store). */
int istore_hook_want_residual(void *st, int layer);
void istore_hook_put_residual(void *st, int layer, int pos, const float *x, int n);

/* Position pos's residual after block layer (n_embd floats), or NULL when not
 * kept: none are, the position was never computed, or it was truncated. */
const float *istore_residual(const istore *st, int layer, int pos);

/* ---- next-token candidates ---- */

enum { ISTORE_SNAP_K = GPT2_SESSION_CANDIDATES }; /* candidates kept per token */

/* The next-token candidates as they were when a token was sampled. */
typedef struct {
    int valid;
    int32_t chosen;    /* the sampled id */
    float chosen_prob; /* its probability (temperature 1, before filters) */
    int n;
    gpt2_candidate c[ISTORE_SNAP_K];
    gpt2_sampler_params params; /* the knobs at that step */
} istore_snap;

/* The latest token's candidates (earlier tokens' live in the session, which
 * keeps them through context drops and /load: istore_snap_from reads them). */
void istore_set_last(istore *st, int32_t chosen, float prob, gpt2_sampler_params params, const gpt2_candidate *c,
                     int n);
const istore_snap *istore_last(const istore *st);
void istore_clear_last(istore *st);

/* A snapshot of token `chosen` from the candidates the session recorded for
 * it (its probability: its entry's, 0 when it is not among them). 0 when tc
 * holds none. */
int istore_snap_from(int32_t chosen, const gpt2_token_candidates *tc, istore_snap *out);

/* ---- per-token notes ---- */

/* One reply token as the conversation pane marks it. */
typedef struct {
    float p;              /* the probability the model gave it (temperature 1) */
    unsigned char origin; /* gpt2_token_origin */
} istore_note;

/* The session has n_turns turns now: notes of turns past them (undone,
 * reset) are dropped. */
void istore_notes_sync(istore *st, int n_turns);
/* Appends a note to turn (0 .. n_turns - 1 of the last sync); ISTORE_ERR_ARG
 * for a turn out of range. */
istore_status istore_note_push(istore *st, int turn, float p, gpt2_token_origin origin);
/* Turn's notes (*n of them; NULL and 0 when none). */
const istore_note *istore_notes(const istore *st, int turn, int *n);
void istore_notes_clear(istore *st, int turn); /* -1: every turn */

#endif
