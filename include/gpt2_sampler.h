/* gpt2_sampler.h — turns a logit vector into the next token id.
 *
 * Stages, in this order:
 *   1. repetition penalty over the last repeat_last_n tokens (CTRL rule:
 *      a positive logit is divided by the penalty, a negative one multiplied);
 *   2. temperature (0 means greedy: the argmax after stage 1 is returned);
 *   3. top-k: keep the k most probable (0 = off);
 *   4. top-p: keep the smallest set of most probable tokens whose mass, after
 *      renormalising what top-k kept, is >= top_p (1 = off);
 *   5. min-p: drop tokens whose probability is below min_p times the most
 *      probable one's (0 = off);
 * then one draw from what remains, renormalised, with the sampler's own RNG
 * (a seed reproduces a run exactly).
 *
 * Parameters are a plain struct that may be replaced between any two tokens:
 *
 *     gpt2_sampler_params sp = gpt2_sampler_default_params();
 *     sp.temperature = 0.7f;
 *     gpt2_sampler *s;
 *     if (gpt2_sampler_new(sp, n_vocab, &s, &err) != GPT2_OK) ...
 *     int32_t id = gpt2_sampler_sample(s, logits, history, n_history);
 *     sp.top_k = 10; gpt2_sampler_set_params(s, sp);   // applies to the next token
 *
 * After each sample, gpt2_sampler_report() lists the most probable candidates
 * with the stage (if any) that removed each one, so a UI can show the cut.
 */
#ifndef GPT2_SAMPLER_H
#define GPT2_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Each field's range, and what new/set_params make of a value outside it
 * (NaN included): */
typedef struct {
    float temperature;    /* [0, FLT_MAX]; 0 = greedy. Below 0 or NaN -> 0 */
    int top_k;            /* >= 0; 0 = off, and so is top_k >= n_vocab. Below 0 -> 0 */
    float top_p;          /* (0, 1]; 1 = off. Outside (0, 1] or NaN -> 1 */
    float min_p;          /* [0, 1]; 0 = off; 1 keeps only the ties of the
                             maximum. Below 0 or NaN -> 0, above 1 -> 1 */
    float repeat_penalty; /* (0, FLT_MAX]; 1 = off; >= 1 recommended (below 1
                             favours repeats). <= 0 or NaN -> 1 */
    int repeat_last_n;    /* how many recent tokens the penalty looks at;
                             0 = off. Below 0 -> 0 */
    uint64_t seed;        /* RNG seed; changing it via set_params reseeds */
} gpt2_sampler_params;

typedef struct gpt2_sampler gpt2_sampler;

/* The defaults: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
 * repeat_penalty 1.0 (off; a window of 64 tokens when raised), seed 42. */
gpt2_sampler_params gpt2_sampler_default_params(void);

/* *out: a sampler for n_vocab tokens; GPT2_ERR_INVALID_ARG for n_vocab < 1,
 * GPT2_ERR_NOMEM (*out NULL either way). Everything a sample needs is
 * allocated here (about 50 bytes per vocabulary entry); sampling and
 * reporting never allocate. The RNG starts from params.seed. */
gpt2_status gpt2_sampler_new(gpt2_sampler_params params, int n_vocab, gpt2_sampler **out, gpt2_error *err);
void gpt2_sampler_free(gpt2_sampler *s);

/* Replaces the parameters for the next sample. The RNG state is kept unless
 * params.seed differs from the current seed, in which case it is reseeded.
 * Out-of-range values are clamped to the documented ranges. */
void gpt2_sampler_set_params(gpt2_sampler *s, gpt2_sampler_params params);
gpt2_sampler_params gpt2_sampler_get_params(const gpt2_sampler *s);

/* Picks the next token from logits (n_vocab floats, not modified). history
 * holds the tokens so far (oldest first; may be NULL when n_history is 0);
 * only its last repeat_last_n entries matter, each distinct id among them is
 * penalised once, a logit of exactly 0 is left alone, and ids outside
 * [0, n_vocab) are ignored.
 *
 * Ranking: "most probable" means the highest penalised logit, ties going to
 * the lower id, in every stage; greedy returns the lowest id among equal
 * maxima. top-p takes the smallest such prefix whose mass reaches top_p (so it
 * always keeps at least one token); min-p compares with the most probable
 * token, which it therefore always keeps.
 *
 * Odd logits: NaN counts as -inf, and -inf is a token of probability 0, never
 * drawn. +inf counts as FLT_MAX, so one +inf logit takes all the mass and
 * several share it equally. A token whose weight exp((z - max) / T) falls
 * below about e^-87 counts as probability 0 (float's normal range). If
 * every logit is -inf or NaN there is no distribution: token 0 is returned
 * and the report is empty.
 *
 * The RNG advances by exactly one draw per call with temperature > 0, kept
 * set of one token included, and not at all with temperature 0, so a run
 * depends on the seed and the calls, not on how the knobs moved in between.
 * Same params, logits, history and RNG state give the same id.
 *
 * Returns -1 if s or logits is NULL. Cost: O(n_vocab), well under a
 * millisecond for GPT-2's 50257 tokens. */
int32_t gpt2_sampler_sample(gpt2_sampler *s, const float *logits, const int32_t *history,
                            size_t n_history);

/* The distribution gpt2_sampler_sample would draw from for the same
 * params, logits and history, written densely: prob[i] for every id
 * (n_vocab floats), 0 outside the kept set, a kept token's weight over the
 * kept mass (the report's prob_final for it, bit for bit). Greedy, or no
 * distribution: 1 at the id sample would return. Consumes no randomness;
 * afterwards gpt2_sampler_report describes this call (gpt2_sampler_last is
 * unchanged). Cost: that of a sample, plus the O(n_vocab) zeroing of prob.
 * Speculative decoding filters
 * both models' logits through this, so its kept sets are the sampler's.
 * Returns the number of kept tokens, or -1 if an argument is NULL. */
int gpt2_sampler_filter(gpt2_sampler *s, const float *logits, const int32_t *history,
                        size_t n_history, float *prob);

/* The RNG state, to save and restore a session exactly. The generator is
 * splitmix64, whose whole state is this one number; seeding sets it to the
 * seed. set_rng_state does not change params.seed, so a later set_params
 * with the same seed keeps the restored state. */
uint64_t gpt2_sampler_rng_state(const gpt2_sampler *s);
void gpt2_sampler_set_rng_state(gpt2_sampler *s, uint64_t state);

/* Which stage removed a candidate. */
typedef enum {
    GPT2_STAGE_KEPT = 0,
    GPT2_STAGE_GREEDY,  /* temperature 0: everything but the argmax */
    GPT2_STAGE_TOP_K,
    GPT2_STAGE_TOP_P,
    GPT2_STAGE_MIN_P
} gpt2_sampler_stage;

typedef struct {
    int32_t id;
    float logit;        /* raw logit from the model */
    float prob;         /* softmax of the penalised logits at temperature 1 */
    float prob_temp;    /* after penalty and temperature, before any cut
                           (equals prob when temperature is 0) */
    float prob_final;   /* probability it was drawn with (0 if removed) */
    gpt2_sampler_stage removed_by;
} gpt2_candidate;

/* Fills out with up to max candidates of the last sample, most probable
 * (by prob_temp) first; returns how many were written. A sampled id that
 * ranks below max is not listed: gpt2_sampler_last() names it.
 *
 * Available are the H best-ranked tokens of the last call, removed or not,
 * H = min(n_vocab, max(256, top_k)) (top_k counting only when it was on), so
 * the report returns min(max, H). removed_by names the first stage that
 * removed a token (GREEDY for all but the argmax at temperature 0); prob_final
 * sums to 1 over all kept tokens, of which those ranked below H are not
 * listed. The report is empty before the first sample and when every logit
 * was -inf/NaN. It reads only the sampler (params changed since the sample do
 * not matter) and costs O(n_vocab): it computes the softmax normalisers that
 * the sample itself did not need. */
size_t gpt2_sampler_report(const gpt2_sampler *s, gpt2_candidate *out, size_t max);

/* The id chosen by the last gpt2_sampler_sample, or -1 before the first. */
int32_t gpt2_sampler_last(const gpt2_sampler *s);

#ifdef __cplusplus
}
#endif
#endif
