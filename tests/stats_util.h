/* stats_util.h — randomness and statistics shared by the cmocka tests that
 * check distributions (the sampler, speculative sampling). */
#ifndef GPTSCOPE_STATS_UTIL_H
#define GPTSCOPE_STATS_UTIL_H

#include <math.h>
#include <stdint.h>

/* The test's own splitmix64: the stream for random logits and for simulating
 * wrong rules, and a reference for the library's generator. */
static inline uint64_t t_next(uint64_t *s) {
    uint64_t x = (*s += 0x9E3779B97F4A7C15u);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBu;
    return x ^ (x >> 31);
}

static inline double t_uniform(uint64_t *s) { return (double)(t_next(s) >> 11) * 0x1.0p-53; }

/* Regularised upper incomplete gamma Q(a, x) (Numerical Recipes' gammq):
 * the chi-square p-value of statistic x with 2a degrees of freedom. */
static inline double gamma_q(double a, double x) {
    if (x <= 0.0) return 1.0;
    double lead = exp(-x + a * log(x) - lgamma(a));
    if (x < a + 1.0) {
        double term = 1.0 / a, sum = term;
        for (int n = 1; n < 10000 && term > sum * 1e-16; n++) {
            term *= x / (a + n);
            sum += term;
        }
        return 1.0 - sum * lead;
    }
    const double tiny = 1e-300;
    double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
    for (int i = 1; i < 10000; i++) {
        double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < 1e-16) break;
    }
    return lead * h;
}

#endif
