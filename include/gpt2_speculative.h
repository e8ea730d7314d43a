/* gpt2_speculative.h — speculative sampling: a small draft model proposes K
 * tokens, the target model accepts or corrects them in one batched pass.
 *
 * (Chen et al., "Accelerating Large Language Model Decoding with Speculative
 * Sampling", DeepMind 2023.) One iteration:
 *   1. the draft decodes K tokens x_1..x_K autoregressively over its own KV
 *      cache, each drawn from its filtered distribution p_i;
 *   2. the target scores the last committed token and x_1..x_K in ONE
 *      gpt2_context_eval (K + 1 positions), giving q_1..q_{K+1};
 *   3. x_i is accepted with probability min(1, q_i(x_i) / p_i(x_i)); at the
 *      first rejection a replacement is drawn from max(0, q_i - p_i)
 *      renormalised and the rest is discarded; if all K are accepted one more
 *      token (the bonus) is drawn from q_{K+1};
 *   4. both caches are rewound (gpt2_context_rewind) to the accepted length.
 * So an iteration emits 1..K+1 tokens for one target pass, and the emitted
 * sequence follows the target's filtered distribution exactly.
 *
 * Filtering. Repetition penalty, temperature, top-k, top-p and min-p are
 * applied to BOTH models' logits exactly as gpt2_sampler does (same stages,
 * order, ranking and tie rules, same float arithmetic; see gpt2_sampler.h),
 * the penalty over the real history (committed tokens, then the drafts
 * before the position). At temperature 0 both distributions are one-hot, so
 * a draft token is accepted iff it is the target's argmax, the correction is
 * the target's argmax, and the output is exactly target-only greedy decoding.
 * Randomness comes from one splitmix64 stream seeded with sampling.seed (the
 * stream differs from gpt2_sampler's: same distribution, not the same draws).
 *
 * Caches. The decoder keeps the committed sequence; each context's cache holds
 * a prefix of it (all of it but the last token or two, which the next
 * iteration evaluates first). Do not eval into the two contexts between calls
 * (if you do, the next step notices the cache no longer matches the sequence
 * and re-evaluates from the first difference).
 *
 * Hooks. The caller may set hooks on either context (an inspector's attention
 * or logits observers): the decoder never touches them. While one of its
 * evals runs it pushes its own observer above them (gpt2_context_push_hooks:
 * capturing the target's logits, asking params.cancel during start's
 * prefill) and pops it when the eval returns, errors included; the caller's
 * get every callback of theirs from the context, with its positions.
 * A step's target pass therefore reports K + 1 positions, drafts that are
 * rejected afterwards included; the draft's evals run under the caller's own
 * hooks of the draft context. A non-zero progress or cancel from the caller's hooks
 * fails the step with GPT2_CANCELLED, the sequence unchanged.
 *
 * The context window: the sequence never grows past the smaller window W of
 * the two contexts (W tokens, as plain decoding: the last token is sampled,
 * not evaluated). A step at committed length n drafts K' = min(K, W - n - 1)
 * tokens (0 at the last position: the target alone samples the final
 * token), so the output is never cut, only the drafts near the end; when the
 * sequence already holds W tokens the step fails with GPT2_ERR_CONTEXT_FULL
 * and changes nothing — never silent truncation.
 *
 *     gpt2_speculative_params sp = gpt2_speculative_default_params();
 *     sp.k = 4; sp.sampling.temperature = 0.7f;
 *     gpt2_speculative *sd;
 *     if (gpt2_speculative_new(target_ctx, draft_ctx, sp, &sd, &err) != GPT2_OK) ...
 *     gpt2_speculative_start(sd, prompt_ids, n_prompt, &err);   // prefill both
 *     gpt2_spec_token out[GPT2_SPEC_MAX_K + 1];
 *     int n_out;
 *     while (gpt2_speculative_step(sd, out, &n_out, &err) == GPT2_OK)
 *         for (int i = 0; i < n_out; i++) emit(out[i].id);  // out[i].kind: accepted/...
 *     gpt2_speculative_stats st = gpt2_speculative_get_stats(sd);
 *     double r = gpt2_speculative_acceptance_rate(&st, sp.k);
 *     gpt2_speculative_free(sd);   // the contexts stay the caller's
 */
#ifndef GPT2_SPECULATIVE_H
#define GPT2_SPECULATIVE_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_context.h"
#include "gpt2_sampler.h"
#include "gpt2_status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { GPT2_SPEC_MAX_K = 16 };

/* The acceptance/residual step on given distributions, with no models.
 * p: (n) the draft's filtered distribution that x was drawn from; q: (n) the
 * target's filtered distribution at the same position; u_accept, u_residual
 * uniform in [0, 1). x is accepted iff u_accept * p[x] < q[x] (probability
 * min(1, q[x]/p[x])); then *accepted = 1 and x is returned. Otherwise
 * *accepted = 0 and the returned id is drawn with u_residual from
 * max(0, q - p) renormalised (walking ids in increasing order); should that
 * residual sum to 0 through rounding, from q. Drawing x ~ p and applying this
 * gives exactly q. Returns -1 for bad arguments. */
int32_t gpt2_speculative_accept(const float *p, const float *q, int n, int32_t x,
                                double u_accept, double u_residual, int *accepted);

/* Same signature, for replacing the rule (tests show a wrong rule is caught). */
typedef int32_t (*gpt2_speculative_accept_fn)(const float *p, const float *q, int n, int32_t x,
                                              double u_accept, double u_residual, int *accepted);

typedef struct {
    int k;                          /* draft tokens per iteration, 1..GPT2_SPEC_MAX_K; default 4 */
    gpt2_sampler_params sampling;   /* applied to both models; clamped as gpt2_sampler does */
    /* Checked before each iteration; non-zero makes the step return
     * GPT2_CANCELLED with nothing changed. Also passed to the prompt prefill
     * of gpt2_speculative_start. May be NULL. */
    gpt2_cancel_fn cancel;
    void *user_data;
    gpt2_speculative_accept_fn accept; /* NULL = gpt2_speculative_accept (tests only) */
} gpt2_speculative_params;

/* k = 4, sampling = gpt2_sampler_default_params(), no cancel, the true rule. */
gpt2_speculative_params gpt2_speculative_default_params(void);

/* How an emitted token came about. */
typedef enum {
    GPT2_SPEC_ACCEPTED = 0, /* a draft token the target accepted */
    GPT2_SPEC_CORRECTED,    /* drawn from the residual after a rejection */
    GPT2_SPEC_BONUS         /* all K accepted: drawn from the target's last position */
} gpt2_spec_kind;

typedef struct {
    int32_t id;
    gpt2_spec_kind kind;
    float p_draft;   /* p(id) of the draft at this position (0 for a bonus) */
    float q_target;  /* q(id) of the target at this position */
} gpt2_spec_token;

typedef struct {
    long iterations;     /* steps that produced tokens */
    long drafted;        /* draft tokens proposed */
    long accepted;       /* draft tokens accepted */
    long produced;       /* tokens emitted (accepted + corrections + bonuses) */
    long target_passes;  /* batched target evals of the steps (the prefill not counted) */
    long draft_evals;    /* draft gpt2_context_eval calls of the steps */
    double seconds;      /* wall-clock time in the steps that produced tokens, of which: */
    double draft_seconds;  /* drafting (the draft's evals and filtering) */
    double target_seconds; /* the target's verification passes */
} gpt2_speculative_stats;

typedef struct gpt2_speculative gpt2_speculative;

/* Checks that the two models share the tokenizer (same n_vocab in config and
 * tokenizer, and the same bytes for every id): otherwise GPT2_ERR_TOKENIZER
 * naming both models and the first differing id. GPT2_ERR_INVALID_ARG for a
 * k outside 1..GPT2_SPEC_MAX_K or NULL contexts. The contexts stay owned by
 * the caller and must outlive the decoder; target may equal draft's model
 * (not the same context). */
gpt2_status gpt2_speculative_new(gpt2_context *target, gpt2_context *draft,
                                 gpt2_speculative_params params, gpt2_speculative **out,
                                 gpt2_error *err);
void gpt2_speculative_free(gpt2_speculative *sd);

/* Replaces the parameters for the next step (k range checked as in _new;
 * nothing changes on error). A changed sampling.seed reseeds the RNG. */
gpt2_status gpt2_speculative_set_params(gpt2_speculative *sd, gpt2_speculative_params params,
                                        gpt2_error *err);
gpt2_speculative_params gpt2_speculative_get_params(const gpt2_speculative *sd);

/* Sets the committed sequence to ids[0..n) (n >= 1) and evaluates all but its
 * last token in both contexts (reusing any matching cached prefix). Resets the
 * stats. GPT2_ERR_CONTEXT_FULL if n already fills either window. */
gpt2_status gpt2_speculative_start(gpt2_speculative *sd, const int32_t *ids, int n,
                                   gpt2_error *err);

/* One iteration: writes 1..K'+1 tokens to out (room for GPT2_SPEC_MAX_K + 1)
 * and their count to *n_out, and appends them to the sequence. On any error
 * *n_out is 0 and the sequence is unchanged. */
gpt2_status gpt2_speculative_step(gpt2_speculative *sd, gpt2_spec_token *out, int *n_out,
                                  gpt2_error *err);

/* The target's raw logits (n_vocab) at the position of the i-th token the
 * last step emitted (the distribution that token was accepted from or drawn
 * from, before filtering), for an inspector; NULL for i outside
 * [0, n_out) or before a step. Valid until the next step or start. */
const float *gpt2_speculative_target_logits(const gpt2_speculative *sd, int i);

/* The RNG state (splitmix64, one 64-bit number; seeding sets it to the
 * seed), to save a run or to share one stream with a gpt2_sampler:
 * set_rng_state does not change params.sampling.seed. */
uint64_t gpt2_speculative_rng_state(const gpt2_speculative *sd);
void gpt2_speculative_set_rng_state(gpt2_speculative *sd, uint64_t state);

/* The committed sequence (prompt + emitted), oldest first. */
const int32_t *gpt2_speculative_tokens(const gpt2_speculative *sd, int *n);

/* Evaluates whatever of the sequence is not yet in each cache, so that both
 * contexts' gpt2_context_logits are those of the next position (for an
 * inspector, or to compare with a fresh recomputation). The next step works
 * from there. */
gpt2_status gpt2_speculative_sync(gpt2_speculative *sd, gpt2_error *err);

gpt2_speculative_stats gpt2_speculative_get_stats(const gpt2_speculative *sd);

/* The post's acceptance rate r = (produced / iterations) / (k + 1), in
 * [1/(k+1), 1]; 0 before any iteration. */
double gpt2_speculative_acceptance_rate(const gpt2_speculative_stats *st, int k);

/* Fills prob (n_vocab) with the filtered distribution gpt2_sampler would draw
 * from for these logits, params and history: the kept tokens' renormalised
 * weights, 0 elsewhere; one-hot at the argmax for temperature 0 (and at id 0
 * when every logit is -inf/NaN). Uses the decoder's scratch memory. */
gpt2_status gpt2_speculative_filter(gpt2_speculative *sd, const float *logits,
                                    const int32_t *history, size_t n_history, float *prob,
                                    gpt2_error *err);

#ifdef __cplusplus
}
#endif
#endif
