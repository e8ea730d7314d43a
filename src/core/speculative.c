/* speculative.c — speculative sampling over a draft and a target context.
 *
 * State: seq[0..n_seq) is the committed sequence; seq[n_seq..n_seq+K) holds
 * the current iteration's drafts. Each context caches a prefix of seq of
 * length <= n_seq - 1; a step first evaluates what is missing (1 or 2 tokens
 * after a normal step: the correction, or the last draft + the bonus).
 *
 * Both models' logits go through gpt2_sampler_filter (one sampler owned by
 * the decoder, used for its scratch and its params only), so the p and q the
 * acceptance rule compares are exactly the distributions gpt2_sampler draws
 * from; the decoder's own RNG drives the draws.
 */
#include "gpt2_speculative.h"

#include "error.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gpt2_speculative {
    gpt2_context *target, *draft;
    gpt2_speculative_params params; /* sampling clamped */
    int n_vocab;
    uint64_t rng;

    int32_t *seq;   /* (cap_seq) committed tokens, then the drafts */
    int n_seq, cap_seq;

    float *p;       /* (GPT2_SPEC_MAX_K, n_vocab) draft distributions */
    float *q;       /* (GPT2_SPEC_MAX_K + 1, n_vocab) target distributions */
    float *tlog;    /* (GPT2_SPEC_MAX_K + 1, n_vocab) target logits captured by on_logits */
    int tlog_pos0;  /* absolute position of tlog row 0 */
    int tlog_rows;
    int last_n_out; /* tokens of the last step; tlog rows 0..last_n_out-1 are theirs */

    gpt2_sampler *filt;     /* the kept-set filter, with params.sampling */

    gpt2_speculative_stats stats;
};

/* ---- parameters ---- */

gpt2_speculative_params gpt2_speculative_default_params(void) {
    gpt2_speculative_params p;
    memset(&p, 0, sizeof p);
    p.k = 4;
    p.sampling = gpt2_sampler_default_params();
    return p;
}

static gpt2_status check_params(const gpt2_speculative_params *p, gpt2_error *err) {
    if (p->k < 1 || p->k > GPT2_SPEC_MAX_K)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                         "speculative: draft length K = %d is outside [1, %d]", p->k, GPT2_SPEC_MAX_K);
    return GPT2_OK;
}

/* ---- the acceptance step ---- */

int32_t gpt2_speculative_accept(const float *p, const float *q, int n, int32_t x,
                                double u_accept, double u_residual, int *accepted) {
    if (!p || !q || !accepted || n < 1 || x < 0 || x >= n) return -1;
    if (u_accept * (double)p[x] < (double)q[x]) {
        *accepted = 1;
        return x;
    }
    *accepted = 0;
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        double d = (double)q[i] - (double)p[i];
        if (d > 0.0) total += d;
    }
    int use_q = !(total > 0.0);
    if (use_q) {
        total = 0.0;
        for (int i = 0; i < n; i++) total += q[i] > 0.0f ? (double)q[i] : 0.0;
        if (!(total > 0.0)) return x; /* q has no mass at all: nothing better to offer */
    }
    double r = u_residual * total, cum = 0.0;
    int32_t pick = -1;
    for (int i = 0; i < n; i++) {
        double d = use_q ? (double)q[i] : (double)q[i] - (double)p[i];
        if (d > 0.0) {
            cum += d;
            pick = i;
            if (r < cum) break;
        }
    }
    return pick;
}

gpt2_status gpt2_speculative_filter(gpt2_speculative *sd, const float *logits,
                                    const int32_t *history, size_t n_history, float *prob,
                                    gpt2_error *err) {
    if (!sd || !logits || !prob)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "speculative_filter: NULL argument");
    gpt2_sampler_filter(sd->filt, logits, history, n_history, prob);
    return GPT2_OK;
}

/* One draw from a dense distribution, ids in increasing order. */
static int32_t draw_dense(const float *prob, int n, double u) {
    double total = 0.0;
    for (int i = 0; i < n; i++) total += prob[i];
    double r = u * total, cum = 0.0;
    int32_t pick = 0;
    for (int i = 0; i < n; i++) {
        if (prob[i] > 0.0f) {
            cum += prob[i];
            pick = i;
            if (r < cum) break;
        }
    }
    return pick;
}

/* ---- lifecycle ---- */

static int same_tokenizer(const gpt2_model *a, const gpt2_model *b, int *first_diff) {
    const gpt2_tokenizer *ta = gpt2_model_tokenizer(a), *tb = gpt2_model_tokenizer(b);
    if (!ta || !tb) {
        *first_diff = -1;
        return ta == tb;
    }
    int n = gpt2_tokenizer_n_vocab(ta), nb = gpt2_tokenizer_n_vocab(tb);
    int m = n < nb ? n : nb;
    for (int i = 0; i < m; i++) {
        size_t la, lb;
        const char *ba = gpt2_tokenizer_token_bytes(ta, i, &la);
        const char *bb = gpt2_tokenizer_token_bytes(tb, i, &lb);
        if ((ba == NULL) != (bb == NULL) || la != lb || (la && memcmp(ba, bb, la) != 0)) {
            *first_diff = i;
            return 0;
        }
    }
    *first_diff = m;
    return n == nb;
}

gpt2_status gpt2_speculative_new(gpt2_context *target, gpt2_context *draft,
                                 gpt2_speculative_params params, gpt2_speculative **out,
                                 gpt2_error *err) {
    if (!out) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "speculative: NULL out");
    *out = NULL;
    if (!target || !draft)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "speculative: NULL %s context", target ? "draft" : "target");
    if (target == draft)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                         "speculative: target and draft must be two contexts (they may share a model)");
    gpt2_status st = check_params(&params, err);
    if (st != GPT2_OK) return st;
    const gpt2_model *mt = gpt2_context_model(target), *md = gpt2_context_model(draft);
    const gpt2_config *ct = gpt2_model_config(mt), *cd = gpt2_model_config(md);
    if (ct->n_vocab != cd->n_vocab)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER,
                         "speculative: draft model '%s' has %d vocabulary rows, target '%s' has %d; "
                         "they must share one tokenizer",
                         gpt2_model_name(md), cd->n_vocab, gpt2_model_name(mt), ct->n_vocab);
    int diff;
    if (!same_tokenizer(mt, md, &diff)) {
        if (diff < 0)
            return gpt2_fail(err, GPT2_ERR_TOKENIZER,
                             "speculative: only one of target '%s' and draft '%s' has a tokenizer",
                             gpt2_model_name(mt), gpt2_model_name(md));
        return gpt2_fail(err, GPT2_ERR_TOKENIZER,
                         "speculative: draft model '%s' does not share the tokenizer of target '%s': "
                         "token id %d differs (vocabularies of %d and %d ids)",
                         gpt2_model_name(md), gpt2_model_name(mt), diff,
                         gpt2_tokenizer_n_vocab(gpt2_model_tokenizer(md)),
                         gpt2_tokenizer_n_vocab(gpt2_model_tokenizer(mt)));
    }
    gpt2_speculative *sd = calloc(1, sizeof *sd);
    if (!sd) return gpt2_fail(err, GPT2_ERR_NOMEM, "speculative: out of memory");
    const size_t n = (size_t)ct->n_vocab;
    int nc = gpt2_context_n_ctx(target) > gpt2_context_n_ctx(draft) ? gpt2_context_n_ctx(target)
                                                                    : gpt2_context_n_ctx(draft);
    sd->cap_seq = nc + GPT2_SPEC_MAX_K + 2;
    sd->seq = malloc((size_t)sd->cap_seq * sizeof *sd->seq);
    sd->p = malloc(GPT2_SPEC_MAX_K * n * sizeof *sd->p);
    sd->q = malloc((GPT2_SPEC_MAX_K + 1) * n * sizeof *sd->q);
    sd->tlog = malloc((GPT2_SPEC_MAX_K + 1) * n * sizeof *sd->tlog);
    gpt2_sampler_new(params.sampling, (int)n, &sd->filt, NULL);
    if (!sd->seq || !sd->p || !sd->q || !sd->tlog || !sd->filt) {
        gpt2_speculative_free(sd);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "speculative: out of memory for %zu-token distributions", n);
    }
    sd->target = target;
    sd->draft = draft;
    sd->n_vocab = (int)n;
    sd->params = params;
    sd->params.sampling = gpt2_sampler_get_params(sd->filt); /* clamped */
    sd->rng = sd->params.sampling.seed;
    *out = sd;
    return GPT2_OK;
}

void gpt2_speculative_free(gpt2_speculative *sd) {
    if (!sd) return;
    free(sd->seq);
    free(sd->p);
    free(sd->q);
    free(sd->tlog);
    gpt2_sampler_free(sd->filt);
    free(sd);
}

gpt2_status gpt2_speculative_set_params(gpt2_speculative *sd, gpt2_speculative_params params,
                                        gpt2_error *err) {
    if (!sd) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "speculative: NULL decoder");
    gpt2_status st = check_params(&params, err);
    if (st != GPT2_OK) return st;
    gpt2_sampler_set_params(sd->filt, params.sampling);
    params.sampling = gpt2_sampler_get_params(sd->filt); /* clamped */
    if (params.sampling.seed != sd->params.sampling.seed) sd->rng = params.sampling.seed;
    sd->params = params;
    return GPT2_OK;
}

gpt2_speculative_params gpt2_speculative_get_params(const gpt2_speculative *sd) {
    return sd ? sd->params : gpt2_speculative_default_params();
}

gpt2_speculative_stats gpt2_speculative_get_stats(const gpt2_speculative *sd) {
    gpt2_speculative_stats s;
    memset(&s, 0, sizeof s);
    return sd ? sd->stats : s;
}

double gpt2_speculative_acceptance_rate(const gpt2_speculative_stats *st, int k) {
    if (!st || st->iterations <= 0 || k < 1) return 0.0;
    return (double)st->produced / (double)st->iterations / (double)(k + 1);
}

uint64_t gpt2_speculative_rng_state(const gpt2_speculative *sd) { return sd ? sd->rng : 0; }

void gpt2_speculative_set_rng_state(gpt2_speculative *sd, uint64_t state) {
    if (sd) sd->rng = state;
}

const float *gpt2_speculative_target_logits(const gpt2_speculative *sd, int i) {
    if (!sd || i < 0 || i >= sd->last_n_out) return NULL;
    return sd->tlog + (size_t)i * sd->n_vocab;
}

const int32_t *gpt2_speculative_tokens(const gpt2_speculative *sd, int *n) {
    if (n) *n = sd ? sd->n_seq : 0;
    return sd ? sd->seq : NULL;
}

/* ---- caches ---- */

static int smaller_window(const gpt2_speculative *sd) {
    int a = gpt2_context_n_ctx(sd->target), b = gpt2_context_n_ctx(sd->draft);
    return a < b ? a : b;
}

/* Rewinds ctx to the longest prefix of seq[0..limit) it holds. */
static gpt2_status match_prefix(gpt2_speculative *sd, gpt2_context *ctx, int limit, gpt2_error *err) {
    int np = gpt2_context_n_past(ctx);
    const int32_t *t = gpt2_context_tokens(ctx);
    int m = 0, lim = np < limit ? np : limit;
    while (m < lim && t[m] == sd->seq[m]) m++;
    return m < np ? gpt2_context_rewind(ctx, m, err) : GPT2_OK;
}

/* ---- hooks: the decoder's own, pushed above the caller's for one eval ----
 *
 * While one of the decoder's evals runs, the context has the decoder's
 * observer on top of the caller's (gpt2_context_push_hooks): it captures the
 * target's logits and asks params.cancel during a prefill; the caller's
 * hooks (an inspector's attention/logits) keep getting their own callbacks
 * from the context, with the context's positions. */

static int decoder_cancel(void *ud, int done, int total) {
    const gpt2_speculative *sd = ud;
    (void)done, (void)total;
    return sd->params.cancel(sd->params.user_data);
}

static void decoder_capture(void *ud, int pos, const float *logits, int n_vocab) {
    gpt2_speculative *sd = ud;
    int row = pos - sd->tlog_pos0;
    if (row < 0 || row >= sd->tlog_rows) return;
    memcpy(sd->tlog + (size_t)row * sd->n_vocab, logits, (size_t)n_vocab * sizeof *logits);
}

/* gpt2_context_eval of tokens[0..n) in ctx with the decoder's observer
 * pushed for it (only the parts it needs: an unset hook costs nothing). */
static gpt2_status eval_chained(gpt2_speculative *sd, gpt2_context *ctx, const int32_t *tokens, int n,
                                int cancellable, int capture, gpt2_error *err) {
    gpt2_hooks h = {.user_data = sd,
                    .on_logits = capture ? decoder_capture : NULL,
                    .progress = cancellable && sd->params.cancel ? decoder_cancel : NULL};
    const int push = h.on_logits || h.progress;
    if (push) {
        gpt2_status ps = gpt2_context_push_hooks(ctx, &h, err);
        if (ps != GPT2_OK) return ps;
    }
    gpt2_status st = gpt2_context_eval(ctx, tokens, n, err);
    if (push) gpt2_context_pop_hooks(ctx);
    return st;
}

/* Brings ctx to hold seq[0..upto): rewinds to the common prefix, evaluates the rest. */
static gpt2_status fill_to(gpt2_speculative *sd, gpt2_context *ctx, int upto, int cancellable,
                           gpt2_error *err) {
    gpt2_status st = match_prefix(sd, ctx, upto, err);
    if (st != GPT2_OK) return st;
    int np = gpt2_context_n_past(ctx);
    if (np >= upto) return GPT2_OK;
    return eval_chained(sd, ctx, sd->seq + np, upto - np, cancellable, 0, err);
}

gpt2_status gpt2_speculative_start(gpt2_speculative *sd, const int32_t *ids, int n, gpt2_error *err) {
    if (!sd || (!ids && n > 0)) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "speculative_start: NULL argument");
    if (n < 1) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "speculative_start: the prompt is empty (%d tokens)", n);
    int win = smaller_window(sd);
    if (n >= win)
        return gpt2_fail(err, GPT2_ERR_CONTEXT_FULL,
                         "speculative: the prompt of %d tokens leaves no room in the context window of %d "
                         "(target %d, draft %d)",
                         n, win, gpt2_context_n_ctx(sd->target), gpt2_context_n_ctx(sd->draft));
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= sd->n_vocab)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "speculative_start: token %d (at index %d) is outside [0, %d)",
                             ids[i], i, sd->n_vocab);
    memcpy(sd->seq, ids, (size_t)n * sizeof *ids);
    sd->n_seq = n;
    memset(&sd->stats, 0, sizeof sd->stats);
    sd->last_n_out = 0;
    gpt2_status st = fill_to(sd, sd->target, n - 1, 1, err);
    if (st == GPT2_OK) st = fill_to(sd, sd->draft, n - 1, 1, err);
    return st;
}

gpt2_status gpt2_speculative_sync(gpt2_speculative *sd, gpt2_error *err) {
    if (!sd || sd->n_seq < 1) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "speculative_sync: no sequence (call start)");
    gpt2_status st = fill_to(sd, sd->target, sd->n_seq, 0, err);
    if (st == GPT2_OK) st = fill_to(sd, sd->draft, sd->n_seq, 0, err);
    return st;
}

/* ---- one iteration ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1. The draft: k tokens, one at a time; draft position i predicts seq[n + i]. */
static gpt2_status draft_tokens(gpt2_speculative *sd, int n, int k, gpt2_error *err) {
    gpt2_status st = fill_to(sd, sd->draft, n - 1, 0, err);
    for (int i = 0; i < k && st == GPT2_OK; i++) {
        int np = gpt2_context_n_past(sd->draft);
        if ((st = gpt2_context_eval(sd->draft, sd->seq + np, n + i - np, err)) != GPT2_OK) break;
        sd->stats.draft_evals++;
        float *pi = sd->p + (size_t)i * sd->n_vocab;
        gpt2_sampler_filter(sd->filt, gpt2_context_logits(sd->draft), sd->seq, (size_t)(n + i), pi);
        sd->seq[n + i] = draw_dense(pi, sd->n_vocab, rng_uniform(&sd->rng));
    }
    return st;
}

/* 2. The target: seq[n-1 .. n+k) in one eval (plus anything it lacks before),
 * its logits captured into tlog. */
static gpt2_status verify_tokens(gpt2_speculative *sd, int n, int k, gpt2_error *err) {
    gpt2_status st = fill_to(sd, sd->target, n - 1, 0, err);
    if (st != GPT2_OK) return st;
    int np = gpt2_context_n_past(sd->target);
    sd->tlog_pos0 = n - 1;
    sd->tlog_rows = k + 1;
    st = eval_chained(sd, sd->target, sd->seq + np, n + k - np, 0, 1, err);
    if (st == GPT2_OK) sd->stats.target_passes++;
    return st;
}

/* 3. Accept or correct each draft in turn, then the bonus token when all k
 * were accepted; writes out[0..*m) and the corrected/bonus id into seq. */
static gpt2_status accept_tokens(gpt2_speculative *sd, int n, int k, gpt2_spec_token *out, int *m,
                                 gpt2_error *err) {
    const int nv = sd->n_vocab;
    gpt2_speculative_accept_fn accept = sd->params.accept ? sd->params.accept : gpt2_speculative_accept;
    int j = 0;
    *m = 0;
    for (; j < k; j++) {
        const float *pj = sd->p + (size_t)j * nv;
        float *qj = sd->q + (size_t)j * nv;
        gpt2_sampler_filter(sd->filt, sd->tlog + (size_t)j * nv, sd->seq, (size_t)(n + j), qj);
        int32_t x = sd->seq[n + j];
        double ua = rng_uniform(&sd->rng), ur = rng_uniform(&sd->rng);
        int ok = 0;
        int32_t y = accept(pj, qj, nv, x, ua, ur, &ok);
        if (y < 0 || y >= nv)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "speculative: the acceptance rule returned id %d", y);
        out[(*m)++] = (gpt2_spec_token){y, ok ? GPT2_SPEC_ACCEPTED : GPT2_SPEC_CORRECTED, pj[y], qj[y]};
        if (!ok) {
            sd->seq[n + j] = y;
            break;
        }
    }
    sd->stats.drafted += k;
    sd->stats.accepted += j;
    if (j == k) {
        float *qk = sd->q + (size_t)k * nv;
        gpt2_sampler_filter(sd->filt, sd->tlog + (size_t)k * nv, sd->seq, (size_t)(n + k), qk);
        int32_t b = draw_dense(qk, nv, rng_uniform(&sd->rng));
        sd->seq[n + k] = b;
        out[(*m)++] = (gpt2_spec_token){b, GPT2_SPEC_BONUS, 0.0f, qk[b]};
    }
    return GPT2_OK;
}

/* 4. Roll back: each cache keeps at most seq[0 .. n_seq - 1). */
static gpt2_status roll_back(gpt2_speculative *sd, gpt2_error *err) {
    int keep = sd->n_seq - 1;
    gpt2_status st = GPT2_OK;
    if (gpt2_context_n_past(sd->target) > keep) st = gpt2_context_rewind(sd->target, keep, err);
    if (st == GPT2_OK && gpt2_context_n_past(sd->draft) > keep) st = gpt2_context_rewind(sd->draft, keep, err);
    return st;
}

gpt2_status gpt2_speculative_step(gpt2_speculative *sd, gpt2_spec_token *out, int *n_out, gpt2_error *err) {
    const double t0 = now_s();
    if (n_out) *n_out = 0;
    if (sd) sd->last_n_out = 0;
    if (!sd || !out || !n_out) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "speculative_step: NULL argument");
    if (sd->n_seq < 1) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "speculative_step: no sequence (call start)");
    if (sd->params.cancel && sd->params.cancel(sd->params.user_data))
        return gpt2_fail(err, GPT2_CANCELLED, "speculative: cancelled before iteration %ld",
                         sd->stats.iterations + 1);
    const int n = sd->n_seq, win = smaller_window(sd);
    if (n >= win)
        return gpt2_fail(err, GPT2_ERR_CONTEXT_FULL,
                         "speculative: the sequence of %d tokens fills the context window of %d "
                         "(target '%s' %d, draft '%s' %d)",
                         n, win, gpt2_model_name(gpt2_context_model(sd->target)), gpt2_context_n_ctx(sd->target),
                         gpt2_model_name(gpt2_context_model(sd->draft)), gpt2_context_n_ctx(sd->draft));
    /* the sequence never grows past the window: n + k + 1 <= win (k = 0 at
     * the last position: the target alone gives the final token) */
    const int k = sd->params.k < win - n - 1 ? sd->params.k : win - n - 1;
    /* On failure the sequence is unchanged; caches may hold drafts, which the
     * next step's prefix match discards (the caller's hooks are back in place). */
    gpt2_status st = draft_tokens(sd, n, k, err);
    if (st != GPT2_OK) return st;
    const double t1 = now_s();
    if ((st = verify_tokens(sd, n, k, err)) != GPT2_OK) return st;
    const double t2 = now_s();
    int m = 0;
    if ((st = accept_tokens(sd, n, k, out, &m, err)) != GPT2_OK) return st;
    sd->n_seq = n + m;
    if ((st = roll_back(sd, err)) != GPT2_OK) return st;
    sd->stats.iterations++;
    sd->stats.produced += m;
    const double t3 = now_s();
    sd->stats.draft_seconds += t1 - t0;
    sd->stats.target_seconds += t2 - t1;
    sd->stats.seconds += t3 - t0;
    sd->last_n_out = m;
    *n_out = m;
    return GPT2_OK;
}
