/* patch.c — activation patching (gpt2_patch.h): the clean run's activations
 * caught by observers, then the corrupt prompt run again once per cell with
 * an editor putting one of them back, each run from the cache's prefix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"
#include "gpt2_patch.h"
#include "error.h"

const char *gpt2_patch_what_name(gpt2_patch_what what) {
    switch (what) {
    case GPT2_PATCH_RESID: return "resid";
    case GPT2_PATCH_MLP: return "mlp";
    case GPT2_PATCH_HEADS: return "heads";
    }
    return NULL;
}

typedef struct {
    gpt2_patch_what what;
    int L, T, C, Q, hd;
    float *store;    /* the clean run's: resid, mlp (L, T, C); heads' values (L, T, Q) */
    int layer, cell; /* the cell being patched: layer, and a position (resid, mlp) or a head */
} patcher;

/* The clean activation of layer l at pos. */
static float *at(const patcher *p, int l, int pos) {
    const int n = p->what == GPT2_PATCH_HEADS ? p->Q : p->C;
    return p->store + ((size_t)l * p->T + pos) * n;
}

/* --- catching the clean run (observers: the pass's floats untouched) -------- */

static void on_embed(void *ud, int pos, const float *x, int n) {
    patcher *p = ud;
    if (p->what == GPT2_PATCH_RESID && pos < p->T) memcpy(at(p, 0, pos), x, (size_t)n * sizeof *x);
}

static int want_resid(void *ud, int l) {
    const patcher *p = ud;
    return p->what == GPT2_PATCH_RESID && l + 1 < p->L;
}

static void on_resid(void *ud, int l, int pos, const float *x, int n) { /* after block l: entering l + 1 */
    patcher *p = ud;
    if (pos < p->T) memcpy(at(p, l + 1, pos), x, (size_t)n * sizeof *x);
}

static int want_mlp(void *ud, int l) {
    (void)l;
    return ((const patcher *)ud)->what == GPT2_PATCH_MLP;
}

static void on_mlp(void *ud, int l, int pos, const float *y, int n) {
    patcher *p = ud;
    if (pos < p->T) memcpy(at(p, l, pos), y, (size_t)n * sizeof *y);
}

static int want_values(void *ud, int l) {
    (void)l;
    return ((const patcher *)ud)->what == GPT2_PATCH_HEADS;
}

static void on_values(void *ud, int l, int pos, const float *z, int n_head, int head_dim) {
    patcher *p = ud;
    if (pos < p->T) memcpy(at(p, l, pos), z, (size_t)n_head * head_dim * sizeof *z);
}

/* --- the patched runs (an editor) ------------------------------------------- */

static const int edit_of[] = {[GPT2_PATCH_RESID] = GPT2_EDIT_RESIDUAL, [GPT2_PATCH_MLP] = GPT2_EDIT_MLP_OUT,
                              [GPT2_PATCH_HEADS] = GPT2_EDIT_HEAD_VALUES};

static int want_edit(void *ud, int what, int l) {
    const patcher *p = ud;
    return what == edit_of[p->what] && l == p->layer;
}

static void edit(void *ud, int what, int l, int pos, float *v, int n) {
    patcher *p = ud;
    (void)what;
    if (p->what == GPT2_PATCH_HEADS) /* head `cell`'s slice, at every position */
        memcpy(v + (size_t)p->cell * p->hd, at(p, l, pos) + (size_t)p->cell * p->hd, (size_t)p->hd * sizeof *v);
    else if (pos == p->cell)
        memcpy(v, at(p, l, pos), (size_t)n * sizeof *v);
}

/* --- the experiment ------------------------------------------------------------ */

static double logit_diff(const gpt2_context *ctx, int32_t a, int32_t b) {
    const float *z = gpt2_context_logits(ctx);
    return (double)z[a] - (double)z[b];
}

/* ctx holds tokens[0 .. keep) after this and tokens[keep .. n) evaluated
 * with `hooks` pushed (NULL: none); LD of the last position into *ld. */
static gpt2_status run_from(gpt2_context *ctx, const int32_t *tokens, int keep, int n, const gpt2_hooks *hooks,
                            int32_t a, int32_t b, double *ld, gpt2_error *err) {
    gpt2_status st = gpt2_context_rewind(ctx, keep, err);
    if (st == GPT2_OK && hooks) st = gpt2_context_push_hooks(ctx, hooks, err);
    if (st != GPT2_OK) return st;
    st = gpt2_context_eval(ctx, tokens + keep, n - keep, err);
    if (hooks) gpt2_context_pop_hooks(ctx);
    if (st == GPT2_OK) *ld = logit_diff(ctx, a, b);
    return st;
}

static gpt2_status check_args(const gpt2_context *ctx, const int32_t *clean, const int32_t *corrupt, int n,
                              int32_t answer, int32_t wrong, gpt2_patch_what what, gpt2_error *err) {
    const gpt2_model *m = gpt2_context_model(ctx);
    const gpt2_config *c = gpt2_model_config(m);
    const int V = c->n_vocab;
    if (!gpt2_patch_what_name(what))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "patch: unknown activation kind %d (resid, mlp or heads)", (int)what);
    if (n < 1 || n > gpt2_context_n_ctx(ctx))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "patch: %d tokens; the context holds 1 to %d", n,
                         gpt2_context_n_ctx(ctx));
    for (int i = 0; i < 2 * n; i++) {
        const int32_t id = i < n ? clean[i] : corrupt[i - n];
        if (id < 0 || id >= V)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "patch: token %d of the %s prompt is %d, outside the "
                             "vocabulary of model %s (0..%d)", i % n, i < n ? "clean" : "corrupt", id, gpt2_model_name(m),
                             V - 1);
    }
    const int32_t ab[2] = {answer, wrong};
    for (int i = 0; i < 2; i++)
        if (ab[i] < 0 || ab[i] >= V)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "patch: the %s token %d is outside the vocabulary of model %s "
                             "(0..%d)", i ? "wrong" : "answer", ab[i], gpt2_model_name(m), V - 1);
    if (answer == wrong)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "patch: the answer and the wrong token are the same (%d): their "
                         "logit difference is 0", answer);
    if (!memcmp(clean, corrupt, (size_t)n * sizeof *clean))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "patch: the clean and corrupt prompts are the same %d tokens: "
                         "patching one into the other changes nothing", n);
    if (what == GPT2_PATCH_MLP && c->arch.post_norms)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "patch: mlp is not patched in %s, whose MLP output is normed "
                         "before it is added (resid and heads are)", c->arch.family);
    return GPT2_OK;
}

/* Every cell of the grid: resid and mlp from the cell's position on, heads
 * from the first difference, cells before it 0 without a run. A patched
 * run leaves its position's keys and values in the cache: before the next
 * position's cells keep it as their prefix, it is evaluated again unpatched. */
static gpt2_status run_cells(gpt2_context *ctx, const int32_t *corrupt, patcher *p, gpt2_patch_result *r,
                             gpt2_error *err) {
    const gpt2_hooks editor = {.user_data = p, .want_edit = want_edit, .edit = edit};
    const int heads = p->what == GPT2_PATCH_HEADS;
    gpt2_status st = GPT2_OK;
    for (int c = 0; c < r->cols; c++) { /* positions outer: each keeps the cache's longest prefix */
        for (int l = 0; l < r->rows; l++) {
            double *ld = &r->ld[(size_t)l * r->cols + c];
            if (!heads && c < r->first_diff) {
                *ld = r->ld_corrupt;
                continue;
            }
            p->layer = l, p->cell = c;
            const int from = heads ? r->first_diff : c;
            if ((st = run_from(ctx, corrupt, from, r->n_tokens, &editor, r->answer, r->wrong, ld, err))) return st;
            r->n_runs++, r->n_positions += r->n_tokens - from;
        }
        double unused;
        if (!heads && c >= r->first_diff && c + 1 < r->cols &&
            (st = run_from(ctx, corrupt, c, c + 1, NULL, r->answer, r->wrong, &unused, err)))
            return st;
    }
    return GPT2_OK;
}

gpt2_status gpt2_patch(gpt2_context *ctx, const int32_t *clean, const int32_t *corrupt, int n, int32_t answer,
                       int32_t wrong, gpt2_patch_what what, gpt2_patch_result *out, gpt2_error *err) {
    memset(out, 0, sizeof *out);
    gpt2_status st = check_args(ctx, clean, corrupt, n, answer, wrong, what, err);
    if (st != GPT2_OK) return st;
    const gpt2_config *c = gpt2_model_config(gpt2_context_model(ctx));
    const int L = c->n_layer, H = c->n_head, hd = gpt2_config_head_dim(c);
    patcher p = {what, L, n, c->n_embd, H * hd, hd, NULL, -1, -1};
    int ran = 0;
    gpt2_patch_result r = {.what = what, .n_tokens = n, .n_layer = L, .n_head = H, .rows = L,
                           .cols = what == GPT2_PATCH_HEADS ? H : n, .answer = answer, .wrong = wrong};
    while (clean[r.first_diff] == corrupt[r.first_diff]) r.first_diff++;
    p.store = malloc((size_t)L * n * (what == GPT2_PATCH_HEADS ? p.Q : p.C) * sizeof *p.store);
    r.ld = malloc((size_t)r.rows * r.cols * sizeof *r.ld);
    r.scores = malloc((size_t)r.rows * r.cols * sizeof *r.scores);
    if (!p.store || !r.ld || !r.scores) {
        st = gpt2_fail(err, GPT2_ERR_NOMEM, "patch: out of memory for a %d x %d grid", r.rows, r.cols);
        goto done;
    }
    /* the clean run, caught; then the corrupt one from the shared prefix */
    const gpt2_hooks catcher = {.user_data = &p, .on_embed = on_embed, .want_residual = want_resid,
                                .on_residual = on_resid, .want_mlp_out = want_mlp, .on_mlp_out = on_mlp,
                                .want_head_values = want_values, .on_head_values = on_values};
    ran = 1;
    if ((st = run_from(ctx, clean, 0, n, &catcher, answer, wrong, &r.ld_clean, err)) ||
        (st = run_from(ctx, corrupt, r.first_diff, n, NULL, answer, wrong, &r.ld_corrupt, err)))
        goto done;
    if (r.ld_clean == r.ld_corrupt) {
        st = gpt2_fail(err, GPT2_ERR_INVALID_ARG, "patch: the clean and corrupt prompts give the same logit "
                       "difference (%.6g): there is nothing for patching to explain", r.ld_clean);
        goto done;
    }
    if ((st = run_cells(ctx, corrupt, &p, &r, err))) goto done;
    for (int i = 0; i < r.rows * r.cols; i++) r.scores[i] = (r.ld[i] - r.ld_corrupt) / (r.ld_clean - r.ld_corrupt);
done:
    free(p.store);
    if (ran) { /* the common prefix, never patched; on a failure too (a cancelled run may have left patched positions) */
        const int keep = gpt2_context_n_past(ctx) < r.first_diff ? gpt2_context_n_past(ctx) : r.first_diff;
        const gpt2_status rw = gpt2_context_rewind(ctx, keep, st == GPT2_OK ? err : NULL);
        if (st == GPT2_OK) st = rw;
    }
    if (st != GPT2_OK) {
        gpt2_patch_result_free(&r);
        return st;
    }
    *out = r;
    return GPT2_OK;
}

void gpt2_patch_result_free(gpt2_patch_result *r) {
    free(r->ld);
    free(r->scores);
    memset(r, 0, sizeof *r);
}
