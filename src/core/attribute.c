/* attribute.c — direct logit attribution (gpt2_attribute.h): the residual
 * stream's parts at one position, caught by the engine's hooks, each taken
 * through the frozen final norm onto the target's unembedding; the heads'
 * outputs made here, once, from their values and the output projection. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gpt2_attribute.h"
#include "kernels.h"
#include "model_internal.h"

gpt2_attribution_params gpt2_attribution_default_params(void) {
    return (gpt2_attribution_params){.pos = -1, .target = -1, .baseline = -1};
}

void gpt2_attribution_free(gpt2_attribution *a) {
    if (!a) return;
    free(a->heads);
    free(a->attn_bias);
    free(a->mlp);
    memset(a, 0, sizeof *a);
}

/* What the hooks deliver for the one position wanted. */
typedef struct {
    int pos, L, Q, C, got; /* got: deliveries, 2 + 2 L when all came */
    float *embed;          /* (C) what enters block 0 */
    float *z;              /* (L, Q) every head's attention-weighted values */
    float *mlp;            /* (L, C) each MLP's output */
    float *x;              /* (C) the stream after the last block */
} capture;

static void on_embed(void *ud, int pos, const float *x, int n) {
    capture *c = ud;
    if (pos == c->pos) memcpy(c->embed, x, (size_t)n * sizeof *x), c->got++;
}
static void on_values(void *ud, int l, int pos, const float *z, int n_head, int hd) {
    capture *c = ud;
    if (pos == c->pos) memcpy(c->z + (size_t)l * c->Q, z, (size_t)n_head * hd * sizeof *z), c->got++;
}
static void on_mlp(void *ud, int l, int pos, const float *y, int n) {
    capture *c = ud;
    if (pos == c->pos) memcpy(c->mlp + (size_t)l * c->C, y, (size_t)n * sizeof *y), c->got++;
}
static int want_last(void *ud, int l) { return l == ((capture *)ud)->L - 1; }
static void on_resid(void *ud, int l, int pos, const float *x, int n) {
    capture *c = ud;
    if (pos == c->pos && l == c->L - 1) memcpy(c->x, x, (size_t)n * sizeof *x), c->got++;
}

/* The frozen final norm: a part's contribution is (c - mean(c)) . u / scale
 * (LayerNorm) or c . u / scale (RMSNorm), u = g * d. */
typedef struct {
    const double *u; /* (C) */
    double sum_u, scale;
    int C, rms;
    double *total;   /* (C) the parts added up, for the check against x */
} frozen;

static double contribution(const frozen *f, const double *c) {
    double dot = 0, sum = 0;
    for (int i = 0; i < f->C; i++) {
        dot += c[i] * f->u[i];
        sum += c[i];
        f->total[i] += c[i];
    }
    if (!f->rms) dot -= sum / f->C * f->sum_u;
    return dot / f->scale;
}

static double contribution_f(const frozen *f, const float *c, double *tmp) {
    for (int i = 0; i < f->C; i++) tmp[i] = c[i];
    return contribution(f, tmp);
}

static gpt2_status check_args(const gpt2_context *ctx, const int32_t *tokens, int n, gpt2_attribution_params *p,
                              gpt2_error *err) {
    const gpt2_model *m = gpt2_context_model(ctx);
    const int V = m->cfg.n_vocab;
    if (n < 1 || !tokens) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "attribute: no tokens: at least one is needed");
    if (p->pos == -1) p->pos = n - 1;
    if (p->pos < 0 || p->pos >= n)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "attribute: position %d is outside the %d tokens (0..%d)", p->pos,
                         n, n - 1);
    if (p->pos >= gpt2_context_n_ctx(ctx))
        return gpt2_fail(err, GPT2_ERR_CONTEXT_FULL, "attribute: position %d is past the context of %d positions",
                         p->pos, gpt2_context_n_ctx(ctx));
    for (int i = 0; i <= p->pos; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                             "attribute: token %d (at index %d) is outside the vocabulary of model %s (0..%d)",
                             tokens[i], i, gpt2_model_name(m), V - 1);
    const int32_t ids[2] = {p->target, p->baseline};
    const char *what[2] = {"target", "baseline"};
    for (int i = 0; i < 2; i++)
        if (ids[i] < -1 || ids[i] >= V)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                             "attribute: %s token %d is outside the vocabulary of model %s (0..%d)", what[i], ids[i],
                             gpt2_model_name(m), V - 1);
    if (p->target >= 0 && p->target == p->baseline)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                         "attribute: the target and the baseline are the same token (%d): their difference is 0",
                         p->target);
    return GPT2_OK;
}

/* Runs tokens[0..pos] through ctx (its cache kept up to the first
 * difference) with the capture's hooks pushed over the caller's. */
static gpt2_status evaluate(gpt2_context *ctx, const int32_t *tokens, int pos, capture *c, gpt2_error *err) {
    const int n_past = gpt2_context_n_past(ctx);
    const int32_t *have = gpt2_context_tokens(ctx);
    int keep = 0;
    while (keep < n_past && keep < pos && have[keep] == tokens[keep]) keep++;
    gpt2_status st = gpt2_context_rewind(ctx, keep, err);
    const gpt2_hooks hooks = {.user_data = c, .on_embed = on_embed, .on_head_values = on_values,
                              .on_mlp_out = on_mlp, .want_residual = want_last, .on_residual = on_resid};
    if (st == GPT2_OK) st = gpt2_context_push_hooks(ctx, &hooks, err);
    if (st != GPT2_OK) return st;
    st = gpt2_context_eval(ctx, tokens + keep, pos + 1 - keep, err);
    gpt2_context_pop_hooks(ctx);
    if (st == GPT2_OK && c->got != 2 + 2 * c->L)
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "attribute: %d of the %d parts of position %d were delivered", c->got,
                       2 + 2 * c->L, pos);
    return st;
}

/* The parts' contributions into a (its arrays allocated); the stream the
 * parts add up to in f->total. */
static gpt2_status attribute_parts(const gpt2_model *m, const capture *c, frozen *f, gpt2_attribution *a,
                                   gpt2_error *err) {
    const gpt2_config *cfg = &m->cfg;
    const int L = cfg->n_layer, H = cfg->n_head, hd = gpt2_config_head_dim(cfg), C = c->C, Q = c->Q;
    float *w = malloc((size_t)Q * C * sizeof *w), *tmp = malloc((size_t)Q * sizeof *tmp); /* W_O (Q, C) */
    double *part = malloc((size_t)C * sizeof *part);
    a->heads = calloc((size_t)L * H, sizeof *a->heads);
    a->attn_bias = calloc((size_t)L, sizeof *a->attn_bias);
    a->mlp = calloc((size_t)L, sizeof *a->mlp);
    gpt2_status st = GPT2_OK;
    if (!w || !tmp || !part || !a->heads || !a->attn_bias || !a->mlp) {
        st = gpt2_fail(err, GPT2_ERR_NOMEM, "attribute: out of memory for the output projection (%d x %d)", Q, C);
        goto done;
    }
    a->embed = contribution_f(f, c->embed, part);
    for (int l = 0; l < L; l++) {
        const gpt2_layer *ly = &m->layers[l];
        kernel_widen(w, tmp, &ly->proj_w);
        for (int h = 0; h < H; h++) { /* head_out = z_h W_O[h hd .. (h + 1) hd) */
            const float *z = c->z + (size_t)l * Q + (size_t)h * hd;
            memset(part, 0, (size_t)C * sizeof *part);
            for (int k = 0; k < hd; k++) {
                const float *row = w + (size_t)(h * hd + k) * C;
                for (int i = 0; i < C; i++) part[i] += (double)z[k] * row[i];
            }
            a->heads[(size_t)l * H + h] = contribution(f, part);
        }
        if (ly->proj_b) a->attn_bias[l] = contribution_f(f, ly->proj_b, part);
        a->mlp[l] = contribution_f(f, c->mlp + (size_t)l * C, part);
    }
done:
    free(w), free(tmp), free(part);
    return st;
}

gpt2_status gpt2_attribute(gpt2_context *ctx, const int32_t *tokens, int n_tokens, gpt2_attribution_params p,
                           gpt2_attribution *out, gpt2_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!ctx || !out) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "attribute: NULL context or result");
    gpt2_status st = check_args(ctx, tokens, n_tokens, &p, err);
    if (st != GPT2_OK) return st;
    const gpt2_model *m = gpt2_context_model(ctx);
    const gpt2_config *cfg = &m->cfg;
    const gpt2_arch *ar = &cfg->arch;
    if (ar->post_norms || ar->final_softcap > 0) /* the parts would not add up to the stream or the logit */
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "attribute: %s's norms of the attention's and MLP's outputs%s are "
                         "not decomposed yet: no attribution for it", ar->family,
                         ar->final_softcap > 0 ? " and its capped logits" : "");
    const int L = cfg->n_layer, C = cfg->n_embd, V = cfg->n_vocab;
    const int Q = gpt2_config_head_dim(cfg) * cfg->n_head;
    capture c = {.pos = p.pos, .L = L, .Q = Q, .C = C};
    c.embed = malloc((size_t)C * sizeof(float));
    c.z = malloc((size_t)L * Q * sizeof(float));
    c.mlp = malloc((size_t)L * C * sizeof(float));
    c.x = malloc((size_t)C * sizeof(float));
    float *row = malloc((size_t)C * sizeof *row);
    double *d = malloc((size_t)C * sizeof *d), *u = malloc((size_t)C * sizeof *u);
    double *total = calloc((size_t)C, sizeof *total);
    if (!c.embed || !c.z || !c.mlp || !c.x || !row || !d || !u || !total)
        st = gpt2_fail(err, GPT2_ERR_NOMEM, "attribute: out of memory for the parts of %d layers", L);
    if (st == GPT2_OK) st = evaluate(ctx, tokens, p.pos, &c, err);
    gpt2_attribution *a = out;
    if (st == GPT2_OK) {
        const float *logits = gpt2_context_logits(ctx);
        if (p.target < 0) {
            p.target = 0;
            for (int i = 1; i < V; i++)
                if (logits[i] > logits[p.target]) p.target = i;
        }
        *a = (gpt2_attribution){.pos = p.pos, .n_layer = L, .n_head = cfg->n_head, .target = p.target,
                                .baseline = p.baseline, .rms_norm = cfg->arch.rms_norm};
        a->logit = (double)logits[p.target] - (p.baseline >= 0 ? (double)logits[p.baseline] : 0.0);
        for (int i = 0; i < V; i++) a->logits_max_abs = fmax(a->logits_max_abs, fabs(logits[i]));
        /* d = W_U[A] - W_U[B], u = g * d; the frozen scale from x */
        kernel_row(row, &m->lm_head, p.target);
        for (int i = 0; i < C; i++) d[i] = row[i];
        if (p.baseline >= 0) {
            kernel_row(row, &m->lm_head, p.baseline);
            for (int i = 0; i < C; i++) d[i] -= row[i];
        }
        double mean = 0, var = 0, sum_u = 0;
        for (int i = 0; i < C; i++) mean += c.x[i];
        mean = a->rms_norm ? 0 : mean / C;
        for (int i = 0; i < C; i++) var += (c.x[i] - mean) * (c.x[i] - mean);
        a->scale = sqrt(var / C + cfg->ln_eps);
        for (int i = 0; i < C; i++) sum_u += (u[i] = m->lnf_g[i] * d[i]);
        frozen f = {u, sum_u, a->scale, C, a->rms_norm, total};
        st = attribute_parts(m, &c, &f, a, err);
        for (int i = 0; m->lnf_b && !a->rms_norm && i < C; i++) a->ln_f_bias += m->lnf_b[i] * d[i];
    }
    if (st == GPT2_OK) {
        a->sum = a->embed + a->ln_f_bias;
        for (int l = 0; l < L; l++) {
            a->sum += a->attn_bias[l] + a->mlp[l];
            for (int h = 0; h < a->n_head; h++) a->sum += a->heads[(size_t)l * a->n_head + h];
        }
        /* the parts must be the stream: a description with a part this file
         * does not know (a norm after a branch, a scaled embedding) fails here */
        double diff = 0, norm = 0;
        for (int i = 0; i < C; i++) diff += (total[i] - c.x[i]) * (total[i] - c.x[i]), norm += (double)c.x[i] * c.x[i];
        if (!(diff <= 1e-4 * norm))
            st = gpt2_fail(err, GPT2_ERR_FORMAT,
                           "attribute: model %s (%s): the parts add up to a residual stream %.3g (relative) away from "
                           "the model's at position %d: its architecture adds something attribution does not know",
                           gpt2_model_name(m), gpt2_config_family(cfg), sqrt(diff / norm), p.pos);
        /* and through the frozen norm to the logit: float rounding, or the
         * activations 8-bit kernels quantize, stay under 1e-4 of the scale */
        else if (!(fabs(a->sum - a->logit) <= 1e-3 * fmax(1.0, a->logits_max_abs)))
            st = gpt2_fail(err, GPT2_ERR_FORMAT,
                           "attribute: model %s (%s): the parts add up to %.6g, its logit is %.6g: its final norm or "
                           "head does something attribution does not know",
                           gpt2_model_name(m), gpt2_config_family(cfg), a->sum, a->logit);
    }
    if (st != GPT2_OK) gpt2_attribution_free(a);
    free(c.embed), free(c.z), free(c.mlp), free(c.x), free(row), free(d), free(u), free(total);
    return st;
}
