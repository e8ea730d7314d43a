/* fastmath.h — branch-free float functions that vectorise (library-private).
 *
 * libm's expf/tanhf are calls the compiler cannot vectorise; on the hot paths
 * (softmax over attention rows and the vocabulary, GELU over the MLP) they
 * cost more than the matrix work around them.
 */
#ifndef GPT2_CORE_FASTMATH_H
#define GPT2_CORE_FASTMATH_H

#include <stdint.h>
#include <string.h>

/* e^x for x <= 0, -inf included, within 2 ulp (relative error < 1.1e-7);
 * exactly 1 at 0, and 0 below about -87.7, where e^x leaves the normal floats.
 * Written without branches or calls so that loops over it vectorise under
 * the project's default flags (libm's expf is about 3.5 ns a call).
 *   x = n ln2 + r, |r| <= ln2/2: e^x = 2^n e^r, e^r by its Taylor series to r^7
 *   (truncation error 5e-9). ln2 is split (Cody-Waite) so n*ln2_hi is exact. */
static inline float fast_exp_nonpos(float x) {
    /* Clamp to [-104, 0] on the bit pattern: for x <= 0 the unsigned pattern
     * grows with |x|, and an integer min vectorises where a float compare
     * (which may trap on NaN) does not. Also turns -inf into -104. */
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = u < 0xC2D00000u ? u : 0xC2D00000u; /* 0xC2D00000 = -104.0f */
    memcpy(&x, &u, sizeof x);
    float t = x * 1.44269504f + 12582912.0f; /* 1.5 * 2^23: rounds x/ln2 to an integer */
    float n = t - 12582912.0f;
    float r = x - n * 0.693359375f - n * -2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* n as an integer from t's mantissa: a float-to-int cast would be
     * undefined for NaN input (NaN weights must not be UB, only NaN out). */
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    int32_t b = (int32_t)(tb - 0x4B400000u) + 127; /* biased exponent of 2^n; <= 0 means underflow */
    b = b > 0 ? b : 0;
    uint32_t bits = (uint32_t)b << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* tanh(x) = sign(x) (1 - e^-2|x|) / (1 + e^-2|x|); absolute error < 2e-7. */
static inline float fast_tanh(float x) {
    float e = fast_exp_nonpos(-2.0f * (x < 0 ? -x : x));
    float t = (1.0f - e) / (1.0f + e);
    return x < 0 ? -t : t;
}

#endif
