/* view_lens.c — the logit lens of the inspector's query (issue 15, §4).
 *
 * For the query position q: after each block l, the final layer norm and
 * the unembedding applied to the residual stream there (gpt2_session_unembed
 * on the residual the store kept), softmaxed: the top tokens with their
 * probabilities, and the rank and probability of the model's final choice
 * (the last block's top token, as `gptscope lens` defines it). The last row
 * is the model's real next-token distribution (temperature 1). Where the
 * prediction forms is where that token's rank falls to #1.
 *
 * The table is computed when the query, the context or the ablation set
 * changes (n_layer unembeddings) and drawn from the cache otherwise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"
#include "viz/export.h"

enum { LENS_TOP = 12 }; /* guesses kept per layer; as many are drawn as fit */

typedef struct {
    int32_t id[LENS_TOP];
    float p[LENS_TOP];
    int rank;     /* of the target, 1 = top */
    float p_target;
} lens_row;

struct lens_cache {
    const gpt2_session *s; /* what the table is for */
    int q, n_tok;
    unsigned long version; /* the store's, when computed */
    int32_t target;
    int ok;          /* 0: residuals not kept */
    lens_row *rows;  /* (n_layer) */
    float *logits;   /* (n_vocab) */
};

/* Softmax of z (n) into the top LENS_TOP and the target's rank and
 * probability (viz's ranking: the CLI's `lens` gives the same). */
static void lens_summarize(const float *z, int n, int32_t target, lens_row *r) {
    viz_candidate top[LENS_TOP];
    long k = viz_top_candidates(z, n, LENS_TOP, top);
    for (int i = 0; i < LENS_TOP; i++) {
        r->id[i] = i < k ? top[i].id : -1;
        r->p[i] = i < k ? (float)top[i].prob : 0;
    }
    viz_candidate t = viz_candidate_of(z, n, target);
    r->rank = (int)t.rank;
    r->p_target = (float)t.prob;
}

/* The table for query q (recomputed only when something it depends on moved). */
static struct lens_cache *lens_for(app *a, const inspect_focus *f) {
    struct lens_cache *c = a->lens;
    const int L = a->cfg->n_layer, V = a->cfg->n_vocab;
    if (!c) {
        if (!(c = calloc(1, sizeof *c))) return NULL;
        c->rows = calloc((size_t)L, sizeof *c->rows);
        c->logits = malloc((size_t)V * sizeof *c->logits);
        if (!c->rows || !c->logits) return free(c->rows), free(c->logits), free(c), NULL;
        c->q = -1;
        a->lens = c;
    }
    /* the residuals change with the context, an ablation's re-evaluation, another session */
    const unsigned long v = istore_version(a->store);
    if (c->s == a->s && c->q == f->query && c->n_tok == f->n_tok && c->version == v) return c;
    c->s = a->s, c->q = f->query, c->n_tok = f->n_tok, c->version = v, c->ok = 0;
    const float *last = istore_residual(a->store, L - 1, f->query);
    gpt2_error err;
    if (!last || gpt2_session_unembed(a->s, last, c->logits, &err) != GPT2_OK) return c;
    viz_candidate final;
    if (viz_top_candidates(c->logits, V, 1, &final) != 1) return c;
    c->target = final.id;
    for (int l = 0; l < L; l++) {
        const float *x = istore_residual(a->store, l, f->query);
        if (!x || gpt2_session_unembed(a->s, x, c->logits, &err) != GPT2_OK) return c;
        lens_summarize(c->logits, V, c->target, &c->rows[l]);
    }
    c->ok = 1;
    return c;
}

void app_lens_free(app *a) {
    if (!a->lens) return;
    free(a->lens->rows), free(a->lens->logits), free(a->lens);
    a->lens = NULL;
}

/* One token and its probability in `width` columns (the label cut to fit
 * by display columns): `·the   12.0%`. */
static int put_choice(pane *p, int y, int x, int width, int32_t id, float prob, attr_t at) {
    char lab[64], pc[8];
    app_token_label(p->a, id, lab, sizeof lab);
    ui_percent(prob, pc);
    term_fill(p->win, y, x, width - 1, at);
    term_put(p->win, y, x, lab, strlen(lab), width - 7, at);
    term_printf(p->win, y, x + width - 7, 6, at, "%s", pc);
    return width;
}

/* The lens table from row y, h rows. Returns the rows used. Every layer
 * shows when the rows allow (with more guesses on more rows per layer when
 * there is room); else the last layers, with the final prediction, and a
 * line saying which are left out. */
int view_lens(pane *p, int y, int h, const inspect_focus *f) {
    app *a = p->a;
    if (f->query < 0 || h < 3) return 0;
    struct lens_cache *c = lens_for(a, f);
    char q[80], t[80];
    app_token_label(a, f->toks[f->query], q, sizeof q);
    if (!c || !c->ok) {
        term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_DIM),
                    c ? "logit lens: this model's residual stream is not kept (over the inspector's memory budget)"
                      : "logit lens: out of memory");
        return 1;
    }
    app_token_label(a, c->target, t, sizeof t);
    term_printf(p->win, y, 1, p->w - 2, term_attr(UI_ROLE_DIM), "after #%d \"%s\": each block's guess",
                f->query, q);
    term_printf(p->win, y + 1, 1, p->w - 2, term_attr(UI_ROLE_DIM), "#rank p: of \"%s\", the final choice", t);
    /* as many choices as fit at 13 columns each (6 of label), on up to 3 rows a layer */
    const int L = a->cfg->n_layer;
    int per_row = (p->w - 2 - 4 - 13) / 13;
    per_row = per_row > LENS_TOP ? LENS_TOP : per_row < 1 ? 1 : per_row;
    const int col = (p->w - 2 - 4 - 13) / per_row;
    int lines = (h - 2) / L;
    lines = lines > 3 ? 3 : lines < 1 ? 1 : lines;
    while (lines > 1 && (lines - 1) * per_row >= LENS_TOP) lines--; /* no row without guesses */
    const int n_show = per_row * lines > LENS_TOP ? LENS_TOP : per_row * lines;
    int first = 0, rows = 2;
    if (L > h - 2) { /* not every layer fits: the last ones, which end in the prediction */
        first = L - (h - 3);
        term_printf(p->win, y + rows++, 1, p->w - 2, term_attr(UI_ROLE_DIM), "L0-L%d above (F10: more room)", first - 1);
    }
    for (int l = first; l < L && rows < h; l++) {
        const lens_row *r = &c->rows[l];
        const int top = y + rows, x_rank = 5 + per_row * col;
        char pc[8];
        term_printf(p->win, top, 1, 4, term_attr(UI_ROLE_DIM), "L%-2d ", l);
        term_printf(p->win, top, x_rank, p->w - 1 - x_rank, term_attr(r->rank == 1 ? UI_ROLE_CONF_HIGH : UI_ROLE_DIM),
                    " #%-4d%s", r->rank, ui_percent(r->p_target, pc));
        int used = 1;
        for (int k = 0; k < n_show && r->id[k] >= 0; k++) {
            const int line = k / per_row;
            if (line >= lines || rows + line >= h) break;
            used = line + 1;
            put_choice(p, top + line, 5 + (k % per_row) * col, col, r->id[k], r->p[k],
                       term_attr(r->id[k] == c->target ? UI_ROLE_SELECTION : UI_ROLE_TEXT));
        }
        rows += used;
    }
    return rows;
}
