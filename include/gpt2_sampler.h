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
 *     gpt2_sampler *s = gpt2_sampler_new(sp, n_vocab);
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

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float temperature;    /* >= 0; 0 = greedy */
    int top_k;            /* >= 0; 0 = off */
    float top_p;          /* (0, 1]; 1 = off */
    float min_p;          /* [0, 1); 0 = off */
    float repeat_penalty; /* >= 1 recommended; 1 = off */
    int repeat_last_n;    /* how many recent tokens the penalty looks at */
    uint64_t seed;        /* RNG seed; changing it via set_params reseeds */
} gpt2_sampler_params;

typedef struct gpt2_sampler gpt2_sampler;

/* The defaults: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
 * repeat_penalty 1.1 over the last 64 tokens, seed 42. */
gpt2_sampler_params gpt2_sampler_default_params(void);

/* Returns NULL on allocation failure or an n_vocab < 1. */
gpt2_sampler *gpt2_sampler_new(gpt2_sampler_params params, int n_vocab);
void gpt2_sampler_free(gpt2_sampler *s);

/* Replaces the parameters for the next sample. The RNG state is kept unless
 * params.seed differs from the current seed, in which case it is reseeded.
 * Out-of-range values are clamped to the documented ranges. */
void gpt2_sampler_set_params(gpt2_sampler *s, gpt2_sampler_params params);
gpt2_sampler_params gpt2_sampler_get_params(const gpt2_sampler *s);

/* Picks the next token from logits (n_vocab floats, not modified). history
 * holds the tokens so far (oldest first; may be NULL when n_history is 0);
 * only its last repeat_last_n entries matter. */
int32_t gpt2_sampler_sample(gpt2_sampler *s, const float *logits, const int32_t *history,
                            size_t n_history);

/* The RNG state, to save and restore a session exactly. */
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
 * ranks below max is not listed: gpt2_sampler_last() names it. */
size_t gpt2_sampler_report(const gpt2_sampler *s, gpt2_candidate *out, size_t max);

/* The id chosen by the last gpt2_sampler_sample, or -1 before the first. */
int32_t gpt2_sampler_last(const gpt2_sampler *s);

#ifdef __cplusplus
}
#endif
#endif
