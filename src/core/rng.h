/* rng.h — splitmix64 (Steele, Lea, Flood 2014), the library's one random number
 * generator (library-private). Its whole state is one uint64_t, so saving and
 * restoring it is exact; any seed, 0 included, is fine.
 */
#ifndef GPT2_CORE_RNG_H
#define GPT2_CORE_RNG_H

#include <math.h>
#include <stdint.h>

static inline uint64_t rng_mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBu;
    return x ^ (x >> 31);
}

static inline uint64_t rng_next(uint64_t *state) { return rng_mix(*state += 0x9E3779B97F4A7C15u); }

/* Uniform in [0, 1) from the top 53 bits: every value is a multiple of 2^-53. */
static inline double rng_uniform(uint64_t *state) { return (double)(rng_next(state) >> 11) * 0x1.0p-53; }

/* Standard normal (Box-Muller; one draw per call, the sine half is dropped). */
static inline double rng_normal(uint64_t *state) {
    double u1 = 1.0 - rng_uniform(state), u2 = rng_uniform(state); /* u1 in (0, 1] */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
