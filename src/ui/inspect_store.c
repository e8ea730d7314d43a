/* inspect_store.c — the inspector's data: attention rows, the latest token's
 * candidates, per-token notes. See inspect_store.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ui/inspect_store.h"

typedef struct {
    istore_note *v;
    int n, cap;
} note_list;

struct istore {
    int n_layer, n_head, n_ctx;
    int all_layers;
    int shown_layer; /* single-layer mode: the layer the hooks keep */
    float *att;      /* (n_att_layers, n_head, n_ctx, n_ctx); row pos holds keys 0..pos */
    int *row_layer;  /* (n_ctx): single-layer mode, the layer row pos was computed for (-1: none) */
    int hi;          /* rows at positions >= hi were never written (or were truncated) */
    istore_snap last;
    float *res;           /* (n_layer, n_ctx, n_embd) residual stream after each block; NULL: not kept */
    unsigned char *res_ok; /* (n_ctx) position p's residuals are current */
    int n_embd;
    unsigned long version; /* bumped by every change to rows or residuals */
    note_list *notes; /* (turns_cap); turns 0 .. n_turns - 1 in use */
    int n_turns, turns_cap;
};

istore_status istore_new(int n_layer, int n_head, int n_ctx, size_t budget, istore **out) {
    *out = NULL;
    if (n_layer < 1 || n_head < 1 || n_ctx < 1) return ISTORE_ERR_ARG;
    istore *st = calloc(1, sizeof *st);
    if (!st) return ISTORE_ERR_NOMEM;
    size_t per_layer = (size_t)n_head * (size_t)n_ctx * (size_t)n_ctx;
    st->n_layer = n_layer, st->n_head = n_head, st->n_ctx = n_ctx;
    st->all_layers = per_layer * sizeof(float) * (size_t)n_layer <= budget;
    st->att = calloc(per_layer * (st->all_layers ? (size_t)n_layer : 1), sizeof *st->att);
    st->row_layer = malloc((size_t)n_ctx * sizeof *st->row_layer);
    if (!st->att || !st->row_layer) {
        istore_free(st);
        return ISTORE_ERR_NOMEM;
    }
    for (int i = 0; i < n_ctx; i++) st->row_layer[i] = -1;
    *out = st;
    return ISTORE_OK;
}

void istore_free(istore *st) {
    if (!st) return;
    free(st->att);
    free(st->row_layer);
    free(st->res);
    free(st->res_ok);
    for (int i = 0; i < st->turns_cap; i++) free(st->notes[i].v);
    free(st->notes);
    free(st);
}

int istore_n_ctx(const istore *st) { return st->n_ctx; }
int istore_all_layers(const istore *st) { return st->all_layers; }

/* ---- attention rows ---- */

static float *row_at(const istore *st, int layer, int head, int pos) {
    size_t li = st->all_layers ? (size_t)layer : 0;
    return st->att + ((li * (size_t)st->n_head + (size_t)head) * (size_t)st->n_ctx + (size_t)pos) * (size_t)st->n_ctx;
}

void istore_show_layer(istore *st, int layer) { st->shown_layer = layer; }

int istore_hook_want(void *ud, int layer, int head) {
    const istore *st = ud;
    (void)head;
    return st->all_layers || layer == st->shown_layer;
}

void istore_hook_put(void *ud, int layer, int head, int pos, const float *probs, int n_keys) {
    istore *st = ud;
    st->version++;
    if (layer < 0 || layer >= st->n_layer || head < 0 || head >= st->n_head || pos < 0 || pos >= st->n_ctx ||
        n_keys < 0 || n_keys > st->n_ctx)
        return;
    if (!st->all_layers && layer != st->shown_layer) return;
    memcpy(row_at(st, layer, head, pos), probs, (size_t)n_keys * sizeof *probs);
    /* a row is the layer's once its last head is in (the heads of a layer come in order) */
    if (!st->all_layers && head == st->n_head - 1) st->row_layer[pos] = layer;
    if (pos + 1 > st->hi) st->hi = pos + 1;
}

const float *istore_row(const istore *st, int layer, int head, int pos) {
    if (pos < 0 || pos >= st->n_ctx || head < 0 || head >= st->n_head || layer < 0 || layer >= st->n_layer) return NULL;
    if (!st->all_layers && st->row_layer[pos] != layer) return NULL;
    return row_at(st, layer, head, pos);
}

float istore_weight(const istore *st, int layer, int head, int q, int k) {
    if (k < 0 || k > q) return NAN;
    if (head >= 0) {
        const float *row = istore_row(st, layer, head, q);
        return row ? row[k] : NAN;
    }
    float s = 0, mx = 0;
    for (int h = 0; h < st->n_head; h++) {
        const float *row = istore_row(st, layer, h, q);
        if (!row) return NAN;
        s += row[k];
        if (row[k] > mx) mx = row[k];
    }
    return head == ISTORE_MAX ? mx : s / (float)st->n_head;
}

void istore_weights(const istore *st, int layer, int head, int q, float *out) {
    for (int k = 0; k <= q; k++) out[k] = istore_weight(st, layer, head, q, k);
}

unsigned long istore_version(const istore *st) { return st->version; }

void istore_truncate(istore *st, int n) {
    st->version++;
    if (n < 0) n = 0;
    if (st->res_ok && n < st->n_ctx) memset(st->res_ok + n, 0, (size_t)(st->n_ctx - n));
    if (n >= st->hi) return;
    if (!st->all_layers) {
        for (int p = n; p < st->hi; p++) st->row_layer[p] = -1;
    } else {
        for (int l = 0; l < st->n_layer; l++)
            for (int h = 0; h < st->n_head; h++)
                memset(row_at(st, l, h, n), 0, (size_t)(st->hi - n) * (size_t)st->n_ctx * sizeof(float));
    }
    st->hi = n;
}

/* ---- residual stream ---- */

istore_status istore_keep_residuals(istore *st, int n_embd, size_t budget) {
    if (!st || n_embd < 1) return ISTORE_ERR_ARG;
    if (st->res && st->n_embd == n_embd) return ISTORE_OK; /* kept already */
    size_t n = (size_t)st->n_layer * (size_t)st->n_ctx * (size_t)n_embd;
    if (n * sizeof(float) > budget) return ISTORE_ERR_NOMEM;
    float *res = malloc(n * sizeof *res);
    unsigned char *ok = calloc((size_t)st->n_ctx, 1);
    if (!res || !ok) {
        free(res), free(ok);
        return ISTORE_ERR_NOMEM;
    }
    free(st->res), free(st->res_ok);
    st->res = res, st->res_ok = ok, st->n_embd = n_embd;
    return ISTORE_OK;
}

int istore_hook_want_residual(void *ud, int layer) {
    const istore *st = ud;
    return st->res != NULL && layer >= 0 && layer < st->n_layer;
}

void istore_hook_put_residual(void *ud, int layer, int pos, const float *x, int n) {
    istore *st = ud;
    if (!st->res || layer < 0 || layer >= st->n_layer || pos < 0 || pos >= st->n_ctx || n != st->n_embd) return;
    memcpy(st->res + ((size_t)layer * st->n_ctx + pos) * st->n_embd, x, (size_t)n * sizeof *x);
    st->version++;
    /* a position is current once its last block is in (blocks arrive in order) */
    st->res_ok[pos] = layer == st->n_layer - 1;
}

const float *istore_residual(const istore *st, int layer, int pos) {
    if (!st->res || layer < 0 || layer >= st->n_layer || pos < 0 || pos >= st->n_ctx || !st->res_ok[pos]) return NULL;
    return st->res + ((size_t)layer * st->n_ctx + pos) * st->n_embd;
}

/* ---- next-token candidates ---- */

void istore_set_last(istore *st, int32_t chosen, float prob, gpt2_sampler_params params, const gpt2_candidate *c,
                     int n) {
    istore_snap *s = &st->last;
    if (n < 0) n = 0;
    if (n > ISTORE_SNAP_K) n = ISTORE_SNAP_K;
    *s = (istore_snap){.valid = 1, .chosen = chosen, .chosen_prob = prob, .n = n, .params = params};
    if (n) memcpy(s->c, c, (size_t)n * sizeof *c);
}

const istore_snap *istore_last(const istore *st) { return &st->last; }
void istore_clear_last(istore *st) { st->last.valid = 0; }

int istore_snap_from(int32_t chosen, const gpt2_token_candidates *tc, istore_snap *out) {
    if (tc->n <= 0) return 0;
    int n = tc->n > ISTORE_SNAP_K ? ISTORE_SNAP_K : tc->n;
    *out = (istore_snap){.valid = 1, .chosen = chosen, .n = n, .params = tc->params};
    memcpy(out->c, tc->c, (size_t)n * sizeof *tc->c);
    for (int k = 0; k < n; k++)
        if (tc->c[k].id == chosen) out->chosen_prob = tc->c[k].prob;
    return 1;
}

/* ---- per-token notes ---- */

void istore_notes_sync(istore *st, int n_turns) {
    if (n_turns < 0) n_turns = 0;
    if (n_turns > st->turns_cap) {
        int cap = st->turns_cap ? st->turns_cap : 16;
        while (cap < n_turns) cap *= 2;
        note_list *nl = realloc(st->notes, (size_t)cap * sizeof *nl);
        if (!nl) return; /* the turns past the old capacity get no notes */
        memset(nl + st->turns_cap, 0, (size_t)(cap - st->turns_cap) * sizeof *nl);
        st->notes = nl;
        st->turns_cap = cap;
    }
    for (int i = n_turns; i < st->turns_cap; i++) st->notes[i].n = 0; /* turns removed (undo, reset) */
    st->n_turns = n_turns < st->turns_cap ? n_turns : st->turns_cap;
}

istore_status istore_note_push(istore *st, int turn, float p, gpt2_token_origin origin) {
    if (turn < 0 || turn >= st->n_turns) return ISTORE_ERR_ARG;
    note_list *l = &st->notes[turn];
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        istore_note *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return ISTORE_ERR_NOMEM;
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = (istore_note){p, (unsigned char)origin};
    return ISTORE_OK;
}

const istore_note *istore_notes(const istore *st, int turn, int *n) {
    if (turn < 0 || turn >= st->n_turns || st->notes[turn].n == 0) {
        *n = 0;
        return NULL;
    }
    *n = st->notes[turn].n;
    return st->notes[turn].v;
}

void istore_notes_clear(istore *st, int turn) {
    for (int i = 0; i < st->turns_cap; i++)
        if (turn < 0 || i == turn) st->notes[i].n = 0;
}
