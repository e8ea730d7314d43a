/* sampler_internal.h — pieces of the sampler's arithmetic that the
 * speculative decoder must reproduce exactly (library-private): the clamping
 * of parameters, the summation of weights, and the ranking key. */
#ifndef GPT2_CORE_SAMPLER_INTERNAL_H
#define GPT2_CORE_SAMPLER_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "gpt2_sampler.h"

/* Out-of-range parameters mapped to their documented meaning (e.g. top_p
 * outside (0, 1] -> 1, off). */
gpt2_sampler_params sampler_clamp_params(gpt2_sampler_params p);

/* Sum in double with eight independent accumulators: exact enough for 50257
 * terms and not bound by the latency of one long add chain. */
double sampler_sum_weights(const float *w, int n);

/* 64-bit keys that order tokens the sampler's one way (higher z first, then
 * lower id): the float's bits mapped to an unsigned integer of the same order,
 * then the complemented id, so one integer compare ranks two tokens. Equal
 * floats must have equal bits for this: z never holds NaN or -0. */
static inline uint64_t sampler_rank_key(float z, int32_t id) {
    uint32_t u;
    memcpy(&u, &z, sizeof u);
    u = u >> 31 ? ~u : u | 0x80000000u;
    return (uint64_t)u << 32 | (uint32_t)~id;
}

static inline int32_t sampler_key_id(uint64_t key) { return (int32_t)~(uint32_t)key; }

#endif
