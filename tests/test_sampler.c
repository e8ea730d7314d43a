/* test_sampler.c — the sampler against a brute-force reference and against
 * chi-square tests of its empirical frequencies.
 *
 * The reference (ref_compute) does everything the slow, obvious way in double:
 * full sort, softmax, cumulative sums. The sampler's report is compared with it
 * field by field. Where a cut lies within 1e-6 of its threshold (so float vs
 * double may legitimately disagree by one token) the reference accepts either
 * position, and checks everything else against the one the sampler chose.
 *
 * Chi-square: 10^5 seeded draws per configuration, threshold p = 1e-6. With a
 * fixed seed a correct sampler gives one fixed statistic (it cannot flake), and
 * test_chi_square_power shows the threshold has teeth: draws from deliberately
 * wrong rules (temperature multiplied instead of divided; top-p measured
 * without renormalising after top-k; top-p dropping the token that crosses p;
 * min-p against the total instead of the maximum) fail it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpt2_sampler.h"
#include "stats_util.h"
#include "test_util.h"

/* ---- test helpers ---- */


static double t_gauss(uint64_t *s) {
    double u = t_uniform(s), v = t_uniform(s);
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

static float *random_logits(uint64_t *rng, int n, double scale) {
    float *l = malloc((size_t)n * sizeof *l);
    assert_non_null(l);
    for (int i = 0; i < n; i++) l[i] = (float)(scale * t_gauss(rng));
    return l;
}

static gpt2_sampler_params plain_params(float temperature) {
    gpt2_sampler_params p = gpt2_sampler_default_params();
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    return p;
}

static void check_close(double got, double want, double abs_tol, double rel_tol, const char *what,
                        int index) {
    if (!(fabs(got - want) <= abs_tol + rel_tol * fabs(want)))
        fail_msg("%s[%d]: got %.9g, want %.9g", what, index, got, want);
}

/* ---- brute-force reference ---- */

typedef struct {
    float z;
    int id;
} zid;

static int zid_cmp(const void *a, const void *b) {
    const zid *x = a, *y = b;
    if (x->z != y->z) return x->z > y->z ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

typedef struct {
    int n;
    double temperature;
    float *z;          /* (n) penalised logits, same float arithmetic as the spec */
    int *order;        /* (n) ids by rank */
    int *rank;         /* (n) rank of each id */
    double *prob;      /* (n) by id: softmax at temperature 1 */
    double *prob_temp; /* (n) by id */
    double *prob_final;/* (n) by id, for the cuts last given to ref_fill */
    int *stage;        /* (n) by id, likewise */
    /* The cuts as ranks: top-k keeps [0, k), top-p [0, c), and all stages
     * [0, l). The sampler's float weights agree with these double sums to
     * about 1e-6, so a cut that close to its threshold may legitimately land
     * one token either way: any c in [c_lo, c_hi] and l in [l_lo, l_hi] is
     * right, and c, l are the exact (double) answers. */
    int k, c, l, c_lo, c_hi, l_lo, l_hi;
    int ambiguous;     /* c_lo != c_hi or l_lo != l_hi */
} ref_t;

static void ref_free(ref_t *r) {
    free(r->z);
    free(r->order);
    free(r->rank);
    free(r->prob);
    free(r->prob_temp);
    free(r->prob_final);
    free(r->stage);
}

/* Stages and prob_final for the cuts c (top-p) and l (all stages). */
static void ref_fill(ref_t *r, int c, int l) {
    if (r->temperature == 0.0) {
        for (int i = 0; i < r->n; i++) {
            r->stage[i] = GPT2_STAGE_GREEDY;
            r->prob_final[i] = 0.0;
        }
        r->stage[r->order[0]] = GPT2_STAGE_KEPT;
        r->prob_final[r->order[0]] = 1.0;
        return;
    }
    double mass = 0.0;
    for (int i = 0; i < l; i++) mass += r->prob_temp[r->order[i]];
    for (int i = 0; i < r->n; i++) {
        int id = r->order[i];
        r->stage[id] = i >= r->k ? GPT2_STAGE_TOP_K
                       : i >= c  ? GPT2_STAGE_TOP_P
                       : i >= l  ? GPT2_STAGE_MIN_P
                                 : GPT2_STAGE_KEPT;
        r->prob_final[id] = i < l ? r->prob_temp[id] / mass : 0.0;
    }
}

/* First rank in [1, k) whose prob_temp is below thr times the maximum's, or k. */
static int first_below(const ref_t *r, double thr) {
    double pmax = r->prob_temp[r->order[0]];
    for (int i = 1; i < r->k; i++)
        if (r->prob_temp[r->order[i]] < thr * pmax) return i;
    return r->k;
}

/* First rank whose cumulative mass over [0, k) reaches target, or k. */
static int first_reaching(const ref_t *r, double target) {
    double cum = 0.0;
    for (int i = 0; i < r->k; i++) {
        cum += r->prob_temp[r->order[i]];
        if (cum >= target) return i + 1;
    }
    return r->k;
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* p must already be in range (take it from gpt2_sampler_get_params). */
static void ref_compute(ref_t *r, const float *logits, int n, const int32_t *hist, size_t nh,
                        gpt2_sampler_params p) {
    memset(r, 0, sizeof *r);
    r->n = n;
    r->temperature = p.temperature;
    r->z = malloc((size_t)n * sizeof *r->z);
    r->order = malloc((size_t)n * sizeof *r->order);
    r->rank = malloc((size_t)n * sizeof *r->rank);
    r->prob = malloc((size_t)n * sizeof *r->prob);
    r->prob_temp = malloc((size_t)n * sizeof *r->prob_temp);
    r->prob_final = malloc((size_t)n * sizeof *r->prob_final);
    r->stage = malloc((size_t)n * sizeof *r->stage);
    zid *zs = malloc((size_t)n * sizeof *zs);
    assert_true(r->z && r->order && r->rank && r->prob && r->prob_temp && r->prob_final &&
                r->stage && zs);

    for (int i = 0; i < n; i++) {
        float v = logits[i];
        r->z[i] = isnan(v) ? -INFINITY : v == INFINITY ? FLT_MAX : v;
    }
    /* penalty: each distinct id in the window once, by a quadratic scan */
    size_t w = (size_t)p.repeat_last_n, start = nh > w ? nh - w : 0;
    for (size_t i = start; hist && i < nh; i++) {
        int32_t t = hist[i];
        int dup = 0;
        for (size_t j = start; j < i; j++) dup |= hist[j] == t;
        if (dup || t < 0 || t >= n) continue;
        float v = r->z[t];
        if (v > 0.0f) r->z[t] = fminf(v / p.repeat_penalty, FLT_MAX);
        else if (v < 0.0f) r->z[t] = v * p.repeat_penalty;
    }
    for (int i = 0; i < n; i++) zs[i] = (zid){r->z[i], i};
    qsort(zs, (size_t)n, sizeof *zs, zid_cmp);
    for (int i = 0; i < n; i++) {
        r->order[i] = zs[i].id;
        r->rank[zs[i].id] = i;
    }
    free(zs);

    double m = r->z[r->order[0]], s1 = 0.0, st = 0.0, t = p.temperature;
    for (int i = 0; i < n; i++) s1 += exp((double)r->z[i] - m);
    for (int i = 0; i < n; i++) r->prob[i] = exp((double)r->z[i] - m) / s1;
    if (t == 0.0) {
        for (int i = 0; i < n; i++) r->prob_temp[i] = r->prob[i];
        r->k = r->c = r->l = r->c_lo = r->c_hi = r->l_lo = r->l_hi = 1;
        ref_fill(r, 1, 1);
        return;
    }
    for (int i = 0; i < n; i++) st += exp(((double)r->z[i] - m) / t);
    for (int i = 0; i < n; i++) r->prob_temp[i] = exp(((double)r->z[i] - m) / t) / st;

    r->k = p.top_k > 0 && p.top_k < n ? p.top_k : n;
    double mass_k = 0.0;
    for (int i = 0; i < r->k; i++) mass_k += r->prob_temp[r->order[i]];
    r->c = r->c_lo = r->c_hi = r->k;
    if (p.top_p < 1.0f) {
        double target = p.top_p * mass_k, tol = 1e-6 * mass_k;
        r->c = first_reaching(r, target);
        r->c_lo = first_reaching(r, target - tol);
        r->c_hi = first_reaching(r, target + tol);
    }
    const double tol = 1e-6;
    r->l = min_int(r->c, first_below(r, p.min_p));
    r->l_lo = min_int(r->c_lo, first_below(r, p.min_p * (1.0 + tol)));
    r->l_hi = min_int(r->c_hi, first_below(r, p.min_p * (1.0 - tol)));
    r->ambiguous = r->c_lo != r->c_hi || r->l_lo != r->l_hi;
    ref_fill(r, r->c, r->l);
}

/* How many candidates the report must offer (the header's H). */
static size_t report_depth(int n, gpt2_sampler_params p) {
    size_t h = p.top_k > 0 && p.top_k < n && p.top_k > 256 ? (size_t)p.top_k : 256;
    return h < (size_t)n ? h : (size_t)n;
}

/* Compares the last call's report and drawn id with the reference, all
 * fields. The sampler's cuts are read off its flags, checked to lie in the
 * reference's range, and the reference is then filled with them. */
static void check_report(const gpt2_sampler *s, ref_t *r, const float *logits,
                         gpt2_sampler_params p) {
    const int depth = (int)report_depth(r->n, p);
    gpt2_candidate *c = malloc((size_t)(depth + 1) * sizeof *c);
    assert_non_null(c);
    size_t got = gpt2_sampler_report(s, c, (size_t)depth + 1);
    assert_int_equal(got, depth);

    int cut_p = depth, cut_l = depth; /* depth stands for "not within the report" */
    for (int i = depth - 1; i >= 0; i--) {
        if (c[i].removed_by == GPT2_STAGE_TOP_P || c[i].removed_by == GPT2_STAGE_TOP_K) cut_p = i;
        if (c[i].removed_by != GPT2_STAGE_KEPT) cut_l = i;
    }
    int fill_c = r->c, fill_l = r->l;
    if (r->temperature > 0.0) {
        if (cut_p < depth ? cut_p < r->c_lo || cut_p > r->c_hi : r->c_hi < depth)
            fail_msg("top-p cut at rank %d, want [%d, %d]", cut_p, r->c_lo, r->c_hi);
        if (cut_l < depth ? cut_l < r->l_lo || cut_l > r->l_hi : r->l_hi < depth)
            fail_msg("kept set ends at rank %d, want [%d, %d]", cut_l, r->l_lo, r->l_hi);
        if (cut_p < depth) fill_c = cut_p;
        else if (fill_c < depth) fill_c = r->c_hi;
        if (cut_l < depth) fill_l = cut_l;
        else if (fill_l < depth) fill_l = r->l_hi;
        ref_fill(r, fill_c, fill_l);
    }

    double sum_final = 0.0;
    for (int i = 0; i < depth; i++) {
        int id = r->order[i];
        if (c[i].id != id) fail_msg("rank %d: id %d, want %d", i, (int)c[i].id, id);
        if (!(c[i].logit == logits[id] || (isnan(c[i].logit) && isnan(logits[id]))))
            fail_msg("rank %d: logit %g, want the raw %g", i, c[i].logit, logits[id]);
        if ((int)c[i].removed_by != r->stage[id])
            fail_msg("rank %d (id %d): removed_by %d, want %d", i, id, (int)c[i].removed_by,
                     r->stage[id]);
        check_close(c[i].prob, r->prob[id], 1e-6, 1e-4, "prob", i);
        check_close(c[i].prob_temp, r->prob_temp[id], 1e-6, 1e-4, "prob_temp", i);
        check_close(c[i].prob_final, r->prob_final[id], 1e-6, 1e-4, "prob_final", i);
        if (i > 0 && c[i].prob_temp > c[i - 1].prob_temp)
            fail_msg("rank %d: prob_temp %g above rank %d's %g", i, c[i].prob_temp, i - 1,
                     c[i - 1].prob_temp);
        sum_final += c[i].prob_final;
    }
    if (fill_l <= depth) check_close(sum_final, 1.0, 1e-5, 0.0, "sum prob_final", 0);

    int32_t id = gpt2_sampler_last(s);
    if (id < 0 || id >= r->n) fail_msg("drew id %d", (int)id);
    int kept_to = cut_l < depth ? cut_l : r->l_hi;
    if (r->rank[id] >= kept_to)
        fail_msg("drew id %d of rank %d; the kept set ends at rank %d", (int)id, r->rank[id],
                 kept_to);
    if (!(r->prob_temp[id] > 0.0)) fail_msg("drew id %d of probability 0", (int)id);
    free(c);
}

/* gpt2_sampler_filter on the same inputs, against the sampler that just
 * sampled them (s) and the reference: the report after the filter equals
 * the sample's bit for bit, the dense distribution holds each reported
 * token's prob_final bit for bit, every id (reported or not) matches the
 * reference unless a cut was within rounding, the drawn id is in it, and no
 * randomness is consumed. */
static void check_filter(const gpt2_sampler *s, const ref_t *r, const float *l, const int32_t *hist,
                         size_t nh) {
    const int n = r->n;
    gpt2_sampler *f = new_sampler(gpt2_sampler_get_params(s), n);
    float *prob = malloc((size_t)n * sizeof *prob);
    gpt2_candidate *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    assert_true(f && prob && a && b);
    const uint64_t rng0 = gpt2_sampler_rng_state(f);
    int kept = gpt2_sampler_filter(f, l, hist, nh, prob);
    assert_int_equal(gpt2_sampler_rng_state(f), rng0);
    size_t na = gpt2_sampler_report(s, a, (size_t)n), nb = gpt2_sampler_report(f, b, (size_t)n);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        if (a[i].id != b[i].id || a[i].removed_by != b[i].removed_by ||
            memcmp(&a[i].prob_final, &b[i].prob_final, sizeof(float)) != 0 ||
            memcmp(&a[i].prob_temp, &b[i].prob_temp, sizeof(float)) != 0)
            fail_msg("rank %zu: the report after filter differs from the sample's", i);
        if (memcmp(&prob[b[i].id], &b[i].prob_final, sizeof(float)) != 0)
            fail_msg("rank %zu (id %d): filter %.9g, report's prob_final %.9g", i, (int)b[i].id,
                     prob[b[i].id], b[i].prob_final);
    }
    double sum = 0.0;
    int nonzero = 0;
    for (int id = 0; id < n; id++) {
        sum += prob[id];
        nonzero += prob[id] > 0.0f;
        if (!r->ambiguous) check_close(prob[id], r->prob_final[id], 1e-6, 1e-4, "filter prob", id);
    }
    check_close(sum, 1.0, 1e-5, 0.0, "sum of filter", 0);
    assert_true(nonzero <= kept);
    assert_true(prob[gpt2_sampler_last(s)] > 0.0f);
    free(prob);
    free(a);
    free(b);
    gpt2_sampler_free(f);
}

/* ---- lifecycle and parameters ---- */

static void test_defaults_and_lifecycle(void **state) {
    (void)state;
    gpt2_sampler_params p = gpt2_sampler_default_params();
    assert_true(p.temperature == 0.8f);
    assert_int_equal(p.top_k, 40);
    assert_true(p.top_p == 0.95f);
    assert_true(p.min_p == 0.05f);
    assert_true(p.repeat_penalty == 1.0f);
    assert_int_equal(p.repeat_last_n, 64);
    assert_true(p.seed == 42);

    gpt2_sampler *none = (gpt2_sampler *)&p;
    gpt2_error err;
    assert_int_equal(gpt2_sampler_new(p, 0, &none, &err), GPT2_ERR_INVALID_ARG);
    assert_null(none);
    assert_non_null(strstr(err.msg, "a vocabulary of 0 tokens"));
    assert_int_equal(gpt2_sampler_new(p, -5, &none, &err), GPT2_ERR_INVALID_ARG);
    assert_null(none);
    gpt2_sampler_free(NULL);

    gpt2_sampler *s = new_sampler(p, 10);
    assert_non_null(s);
    assert_int_equal(gpt2_sampler_last(s), -1);
    gpt2_candidate c[4];
    assert_int_equal(gpt2_sampler_report(s, c, 4), 0);
    assert_true(gpt2_sampler_rng_state(s) == 42);
    assert_int_equal(gpt2_sampler_sample(s, NULL, NULL, 0), -1);
    float l[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    int32_t id = gpt2_sampler_sample(s, l, NULL, 0);
    assert_true(id >= 0 && id < 10);
    assert_int_equal(gpt2_sampler_last(s), id);
    assert_int_equal(gpt2_sampler_report(s, c, 0), 0);
    assert_int_equal(gpt2_sampler_report(s, c, 4), 4);
    gpt2_sampler_free(s);

    /* n_vocab = 1: the only token, whatever the knobs */
    s = new_sampler(p, 1);
    assert_non_null(s);
    float one = -3.0f;
    for (int i = 0; i < 5; i++) assert_int_equal(gpt2_sampler_sample(s, &one, NULL, 0), 0);
    assert_int_equal(gpt2_sampler_report(s, c, 4), 1);
    assert_true(c[0].prob == 1.0f && c[0].prob_final == 1.0f);
    gpt2_sampler_free(s);
}

static void test_clamping(void **state) {
    (void)state;
    gpt2_sampler_params p = gpt2_sampler_default_params();
    p.temperature = -1.0f;
    p.top_k = -3;
    p.top_p = 0.0f;
    p.min_p = -0.5f;
    p.repeat_penalty = -2.0f;
    p.repeat_last_n = -1;
    gpt2_sampler *s = new_sampler(p, 50);
    assert_non_null(s);
    gpt2_sampler_params q = gpt2_sampler_get_params(s);
    assert_true(q.temperature == 0.0f);
    assert_int_equal(q.top_k, 0);
    assert_true(q.top_p == 1.0f);
    assert_true(q.min_p == 0.0f);
    assert_true(q.repeat_penalty == 1.0f);
    assert_int_equal(q.repeat_last_n, 0);

    p.temperature = NAN;
    p.top_p = 1.5f;
    p.min_p = 2.0f;
    p.repeat_penalty = NAN;
    gpt2_sampler_set_params(s, p);
    q = gpt2_sampler_get_params(s);
    assert_true(q.temperature == 0.0f);
    assert_true(q.top_p == 1.0f);
    assert_true(q.min_p == 1.0f);
    assert_true(q.repeat_penalty == 1.0f);

    p.temperature = INFINITY;
    p.top_p = NAN;
    p.min_p = NAN;
    p.repeat_penalty = INFINITY;
    gpt2_sampler_set_params(s, p);
    q = gpt2_sampler_get_params(s);
    assert_true(q.temperature == FLT_MAX);
    assert_true(q.top_p == 1.0f);
    assert_true(q.min_p == 0.0f);
    assert_true(q.repeat_penalty == FLT_MAX);

    /* in-range values pass untouched */
    p = gpt2_sampler_default_params();
    p.top_p = 1e-6f;
    p.min_p = 1.0f;
    p.top_k = 1000000;
    p.repeat_penalty = 0.5f;
    gpt2_sampler_set_params(s, p);
    q = gpt2_sampler_get_params(s);
    assert_true(q.top_p == 1e-6f && q.min_p == 1.0f && q.top_k == 1000000 &&
                q.repeat_penalty == 0.5f);

    /* temperature = FLT_MAX is uniform over the finite logits, not NaN */
    float l[50];
    for (int i = 0; i < 50; i++) l[i] = (float)i;
    l[7] = -INFINITY;
    p = plain_params(FLT_MAX);
    gpt2_sampler_set_params(s, p);
    int32_t id = gpt2_sampler_sample(s, l, NULL, 0);
    assert_true(id >= 0 && id < 50 && id != 7);
    gpt2_candidate c[50];
    assert_int_equal(gpt2_sampler_report(s, c, 50), 50);
    for (int i = 0; i < 49; i++) check_close(c[i].prob_temp, 1.0 / 49, 1e-6, 0, "uniform", i);
    assert_int_equal(c[49].id, 7);
    assert_true(c[49].prob_temp == 0.0f);
    gpt2_sampler_free(s);
}

/* ---- greedy ---- */

static int brute_argmax(const float *l, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

static void test_greedy_argmax(void **state) {
    (void)state;
    uint64_t rng = 1;
    const int sizes[] = {1, 2, 7, 255, 256, 257, 5000};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        int n = sizes[si];
        gpt2_sampler_params p = gpt2_sampler_default_params();
        p.temperature = 0.0f;
        p.repeat_penalty = 1.0f;
        gpt2_sampler *s = new_sampler(p, n);
        assert_non_null(s);
        for (int trial = 0; trial < 50; trial++) {
            float *l = random_logits(&rng, n, trial % 2 ? 10.0 : 0.01);
            if (trial % 5 == 0 && n > 3) { /* ties at the top: the lowest id wins */
                float top = l[brute_argmax(l, n)] + 1.0f;
                l[n - 1] = top;
                l[n / 2] = top;
                l[1] = top;
            }
            uint64_t before = gpt2_sampler_rng_state(s);
            assert_int_equal(gpt2_sampler_sample(s, l, NULL, 0), brute_argmax(l, n));
            assert_true(gpt2_sampler_rng_state(s) == before); /* greedy draws nothing */
            ref_t r;
            ref_compute(&r, l, n, NULL, 0, gpt2_sampler_get_params(s));
            check_report(s, &r, l, gpt2_sampler_get_params(s));
            assert_int_equal(r.rank[gpt2_sampler_last(s)], 0);
            ref_free(&r);
            free(l);
        }
        gpt2_sampler_free(s);
    }
    /* all equal: id 0 */
    float flat[300];
    for (int i = 0; i < 300; i++) flat[i] = 1.5f;
    gpt2_sampler *s = new_sampler(plain_params(0.0f), 300);
    assert_int_equal(gpt2_sampler_sample(s, flat, NULL, 0), 0);
    flat[299] = 1.5000001f;
    assert_int_equal(gpt2_sampler_sample(s, flat, NULL, 0), 299);
    gpt2_sampler_free(s);
}

static void test_top_k1_is_greedy(void **state) {
    (void)state;
    uint64_t rng = 2;
    const float temps[] = {0.05f, 0.7f, 1.0f, 5.0f, 1000.0f};
    for (int n = 2; n <= 4000; n *= 3) {
        gpt2_sampler_params p = plain_params(1.0f);
        p.top_k = 1;
        p.top_p = 0.5f;
        gpt2_sampler *s = new_sampler(p, n);
        for (int trial = 0; trial < 200; trial++) {
            p.temperature = temps[trial % 5];
            gpt2_sampler_set_params(s, p);
            float *l = random_logits(&rng, n, trial % 3 ? 3.0 : 1e-3);
            if (trial % 7 == 0) l[n - 1] = l[0] = l[brute_argmax(l, n)];
            assert_int_equal(gpt2_sampler_sample(s, l, NULL, 0), brute_argmax(l, n));
            free(l);
        }
        gpt2_sampler_free(s);
    }
}

/* ---- every stage against brute force ---- */

/* One random case: a sample, then the report and the drawn id against the
 * reference. A negative scale rounds the logits to multiples of 0.5, so that
 * ties straddle every cut. Returns 1 if a cut was within rounding of its
 * threshold. */
static int stage_case(uint64_t *rng, int n, double scale, gpt2_sampler_params p, int with_history) {
    float *l = random_logits(rng, n, fabs(scale));
    if (scale < 0)
        for (int i = 0; i < n; i++) l[i] = roundf(l[i] * 2.0f) / 2.0f;
    int32_t hist[80];
    size_t nh = 0;
    if (with_history) {
        nh = 1 + t_next(rng) % 80;
        for (size_t i = 0; i < nh; i++) hist[i] = (int32_t)(t_next(rng) % (uint64_t)(n + 2)) - 1;
    }
    p.seed = t_next(rng);
    gpt2_sampler *s = new_sampler(p, n);
    assert_non_null(s);
    gpt2_sampler_sample(s, l, hist, nh);
    ref_t r;
    gpt2_sampler_params q = gpt2_sampler_get_params(s);
    ref_compute(&r, l, n, hist, nh, q);
    check_report(s, &r, l, q);
    check_filter(s, &r, l, hist, nh);
    int ambiguous = r.ambiguous;
    ref_free(&r);
    gpt2_sampler_free(s);
    free(l);
    return ambiguous;
}

static void test_stages_vs_brute_force(void **state) {
    (void)state;
    uint64_t rng = 3;
    const int sizes[] = {2, 10, 100, 256, 257, 1000, 5000};
    const double scales[] = {0.1, 1.0, 3.0, 10.0, -1.0, -3.0};
    const int ks[] = {0, 1, 5, 40, 300, 100000};
    const float ps[] = {1e-6f, 0.1f, 0.5f, 0.9f, 0.95f, 0.999f, 1.0f};
    const float mins[] = {0.0f, 0.0f, 0.01f, 0.05f, 0.3f, 1.0f};
    const float temps[] = {0.05f, 0.5f, 0.8f, 1.0f, 1.7f, 4.0f};
    int cases = 0, near = 0;
    for (int trial = 0; trial < 3000; trial++) {
        gpt2_sampler_params p = gpt2_sampler_default_params();
        p.temperature = temps[t_next(&rng) % 6];
        p.top_k = ks[t_next(&rng) % 6];
        p.top_p = ps[t_next(&rng) % 7];
        p.min_p = mins[t_next(&rng) % 6];
        p.repeat_penalty = trial % 3 ? 1.3f : 1.0f;
        p.repeat_last_n = (int)(t_next(&rng) % 70);
        int n = sizes[t_next(&rng) % 7];
        double scale = scales[t_next(&rng) % 6];
        near += stage_case(&rng, n, scale, p, trial % 3 != 0);
        cases++;
    }
    print_message("stages vs brute force: %d cases, %d with a cut within rounding\n", cases,
                  near);
}

/* Nuclei deeper than the 256 sorted ranks, where sample_deep does the work. */
static void test_deep_nucleus_vs_brute_force(void **state) {
    (void)state;
    uint64_t rng = 4;
    int cases = 0, near = 0;
    const float ps[] = {0.3f, 0.7f, 0.9f, 0.95f, 0.99f, 1.0f};
    const float mins[] = {0.0f, 0.0f, 0.001f, 0.05f, 0.2f};
    for (int trial = 0; trial < 300; trial++) {
        gpt2_sampler_params p = plain_params(trial % 2 ? 1.0f : 0.6f);
        p.top_p = ps[trial % 6];
        p.min_p = mins[(trial / 6) % 5];
        int n = trial % 4 ? 3000 : 50257;
        near += stage_case(&rng, n, trial % 3 ? 0.5 : 1.5, p, 0);
        cases++;
    }
    print_message("deep nuclei: %d cases, %d with a cut within rounding\n", cases, near);
}

static void expect_stages(const float *l, int n, gpt2_sampler_params p, const int *want_stage) {
    gpt2_sampler *s = new_sampler(p, n);
    assert_non_null(s);
    int32_t id = gpt2_sampler_sample(s, l, NULL, 0);
    gpt2_candidate c[64];
    size_t got = gpt2_sampler_report(s, c, 64);
    assert_int_equal(got, n);
    for (size_t i = 0; i < got; i++)
        if ((int)c[i].removed_by != want_stage[c[i].id])
            fail_msg("id %d: removed_by %d, want %d", (int)c[i].id, (int)c[i].removed_by,
                     want_stage[c[i].id]);
    assert_int_equal(want_stage[id], GPT2_STAGE_KEPT);
    gpt2_sampler_free(s);
}

static void test_boundaries(void **state) {
    (void)state;
    enum { K = GPT2_STAGE_KEPT, TK = GPT2_STAGE_TOP_K, TP = GPT2_STAGE_TOP_P, MP = GPT2_STAGE_MIN_P };
    /* probabilities (T = 1) 0.5, 0.25, 0.125, 0.0625, 0.0625 by id */
    const float l[5] = {logf(8), logf(4), logf(2), 0.0f, 0.0f};
    gpt2_sampler_params p = plain_params(1.0f);

    p.top_p = 1e-6f; /* tiny p: just the top */
    expect_stages(l, 5, p, (const int[]){K, TP, TP, TP, TP});
    p.top_p = 0.74f; /* 0.5 + 0.25 crosses it */
    expect_stages(l, 5, p, (const int[]){K, K, TP, TP, TP});
    p.top_p = 0.76f;
    expect_stages(l, 5, p, (const int[]){K, K, K, TP, TP});
    p.top_p = 0.9f; /* 0.875 short of it: the tie at 0.0625, lower id first */
    expect_stages(l, 5, p, (const int[]){K, K, K, K, TP});
    p.top_p = 1.0f; /* off */
    expect_stages(l, 5, p, (const int[]){K, K, K, K, K});

    /* top-p after top-k renormalises: among the top 2, 0.5/0.75 = 0.667 */
    p.top_k = 2;
    p.top_p = 0.6f;
    expect_stages(l, 5, p, (const int[]){K, TP, TK, TK, TK});
    p.top_p = 0.7f;
    expect_stages(l, 5, p, (const int[]){K, K, TK, TK, TK});
    p.top_k = 4; /* the cut falls between the tied ids 3 and 4 */
    p.top_p = 1.0f;
    expect_stages(l, 5, p, (const int[]){K, K, K, K, TK});

    /* min-p: relative to the maximum (0.5) */
    p.top_k = 0;
    p.min_p = 0.2f; /* 0.125 / 0.5 = 0.25 >= 0.2 > 0.125 */
    expect_stages(l, 5, p, (const int[]){K, K, K, MP, MP});
    p.min_p = 0.3f;
    expect_stages(l, 5, p, (const int[]){K, K, MP, MP, MP});
    p.min_p = 1.0f; /* only the maximum, and its ties */
    expect_stages(l, 5, p, (const int[]){K, MP, MP, MP, MP});
    const float tied[4] = {1.0f, 3.0f, 3.0f, 2.0f};
    expect_stages(tied, 4, p, (const int[]){MP, K, K, MP});
    /* min-p only judges what top-p kept: the first stage to remove wins */
    p.min_p = 0.6f;
    p.top_p = 0.6f;
    expect_stages(l, 5, p, (const int[]){K, MP, TP, TP, TP});

    /* a dominant token */
    float dom[40];
    for (int i = 0; i < 40; i++) dom[i] = 0.0f;
    dom[17] = 12.0f;
    p = plain_params(1.0f);
    p.top_p = 0.95f;
    int want[40];
    for (int i = 0; i < 40; i++) want[i] = TP;
    want[17] = K;
    expect_stages(dom, 40, p, want);
}

/* ---- repetition penalty ---- */

/* prob of each id in the report, T = 1, nothing cut */
static void report_probs(gpt2_sampler *s, int n, double *prob) {
    gpt2_candidate c[64];
    assert_int_equal(gpt2_sampler_report(s, c, 64), n);
    for (int i = 0; i < n; i++) prob[c[i].id] = c[i].prob;
}

static void test_repetition_penalty(void **state) {
    (void)state;
    const float l[6] = {2.0f, -1.0f, 0.5f, 0.0f, 3.0f, 1.0f};
    gpt2_sampler_params p = plain_params(1.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 64;
    gpt2_sampler *s = new_sampler(p, 6);
    double prob[6];

    /* id 0 positive: divided; id 1 negative: multiplied; id 3 zero: unchanged;
     * repeats count once; out-of-range ids are ignored */
    const int32_t hist[] = {0, 1, 3, 0, 0, 1, -4, 6, 1000};
    gpt2_sampler_sample(s, l, hist, sizeof hist / sizeof *hist);
    report_probs(s, 6, prob);
    const double z[6] = {1.0, -2.0, 0.5, 0.0, 3.0, 1.0};
    for (int i = 0; i < 6; i++)
        check_close(prob[i] / prob[4], exp(z[i] - 3.0), 1e-7, 1e-5, "penalised ratio", i);
    gpt2_candidate c[6];
    gpt2_sampler_report(s, c, 6);
    for (int i = 0; i < 6; i++) assert_true(c[i].logit == l[c[i].id]); /* raw logits */

    /* only the last repeat_last_n entries count */
    p.repeat_last_n = 3;
    gpt2_sampler_set_params(s, p);
    const int32_t hist2[] = {0, 5, 5, 5};
    gpt2_sampler_sample(s, l, hist2, 4);
    report_probs(s, 6, prob);
    check_close(prob[0] / prob[4], exp(2.0 - 3.0), 1e-7, 1e-5, "outside window", 0);
    check_close(prob[5] / prob[4], exp(0.5 - 3.0), 1e-7, 1e-5, "inside window", 5);
    p.repeat_last_n = 4;
    gpt2_sampler_set_params(s, p);
    gpt2_sampler_sample(s, l, hist2, 4);
    report_probs(s, 6, prob);
    check_close(prob[0] / prob[4], exp(1.0 - 3.0), 1e-7, 1e-5, "window edge", 0);
    p.repeat_last_n = 0; /* off */
    gpt2_sampler_set_params(s, p);
    gpt2_sampler_sample(s, l, hist2, 4);
    report_probs(s, 6, prob);
    check_close(prob[0] / prob[4], exp(2.0 - 3.0), 1e-7, 1e-5, "last_n 0", 0);
    p.repeat_last_n = 64;
    gpt2_sampler_set_params(s, p);
    gpt2_sampler_sample(s, l, NULL, 5); /* NULL history: no penalty, no crash */
    report_probs(s, 6, prob);
    check_close(prob[0] / prob[4], exp(2.0 - 3.0), 1e-7, 1e-5, "NULL history", 0);
    gpt2_sampler_free(s);

    /* the effect on greedy choices */
    p = plain_params(0.0f);
    p.repeat_penalty = 2.0f;
    s = new_sampler(p, 2);
    const int32_t h0[] = {0};
    assert_int_equal(gpt2_sampler_sample(s, (const float[]){2.0f, 1.5f}, h0, 1), 1);
    assert_int_equal(gpt2_sampler_sample(s, (const float[]){2.0f, 0.9f}, h0, 1), 0);
    assert_int_equal(gpt2_sampler_sample(s, (const float[]){-1.0f, -1.5f}, h0, 1), 1);
    assert_int_equal(gpt2_sampler_sample(s, (const float[]){-1.0f, -2.1f}, h0, 1), 0);
    p.repeat_penalty = 0.5f; /* below 1 favours the repeat */
    gpt2_sampler_set_params(s, p);
    assert_int_equal(gpt2_sampler_sample(s, (const float[]){1.0f, 1.5f}, h0, 1), 0);
    gpt2_sampler_free(s);
}

/* ---- chi-square ---- */


typedef struct {
    double stat;
    int df;
    double p;
    long outside; /* draws of tokens the expected distribution gives probability 0 */
} chi2_t;

/* Pearson's statistic of counts[0..n) against probabilities expect[0..n)
 * (cells of expected count below 5 pooled into one). */
static chi2_t chi_square(const long *counts, const double *expect, int n, long draws) {
    chi2_t r = {0.0, -1, 1.0, 0};
    double pool_e = 0.0;
    long pool_o = 0;
    for (int i = 0; i < n; i++) {
        double e = expect[i] * draws;
        if (expect[i] == 0.0) {
            r.outside += counts[i];
        } else if (e < 5.0) {
            pool_e += e;
            pool_o += counts[i];
        } else {
            r.stat += (counts[i] - e) * (counts[i] - e) / e;
            r.df++;
        }
    }
    if (pool_e > 0.0) {
        r.stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        r.df++;
    }
    r.p = r.df > 0 ? gamma_q(r.df / 2.0, r.stat / 2.0) : 1.0;
    if (r.outside) r.p = 0.0;
    return r;
}

enum { CHI_N = 12, CHI_DRAWS = 100000 };
#define CHI_P_MIN 1e-6

/* Twelve tokens, most probable not first, one tie (ids 8 and 2 at 0.8). */
static const float chi_logits[CHI_N] = {0.2f, -0.9f, 0.8f, 2.0f, -2.5f, 1.1f,
                                        0.0f, 1.6f,  0.8f, -0.4f, 1.3f, -1.5f};

typedef struct {
    const char *name;
    float temperature;
    int top_k;
    float top_p, min_p;
} chi_cfg;

static const chi_cfg chi_cfgs[] = {
    {"T=1, no cuts", 1.0f, 0, 1.0f, 0.0f},
    {"T=0.7, top_k=5 (cut inside a tie)", 0.7f, 5, 1.0f, 0.0f},
    {"T=1.3, top_p=0.8", 1.3f, 0, 0.8f, 0.0f},
    {"T=0.9, top_k=8, top_p=0.9, min_p=0.05", 0.9f, 8, 0.9f, 0.05f},
    {"T=2, min_p=0.2", 2.0f, 0, 1.0f, 0.2f},
    {"T=0.5, top_k=10, top_p=0.97, min_p=0.02", 0.5f, 10, 0.97f, 0.02f},
};

static gpt2_sampler_params chi_params(const chi_cfg *c) {
    gpt2_sampler_params p = plain_params(c->temperature);
    p.top_k = c->top_k;
    p.top_p = c->top_p;
    p.min_p = c->min_p;
    return p;
}

static void test_chi_square_frequencies(void **state) {
    (void)state;
    for (size_t ci = 0; ci < sizeof chi_cfgs / sizeof *chi_cfgs; ci++) {
        gpt2_sampler_params p = chi_params(&chi_cfgs[ci]);
        p.seed = 1000 + ci;
        gpt2_sampler *s = new_sampler(p, CHI_N);
        long counts[CHI_N] = {0};
        for (long d = 0; d < CHI_DRAWS; d++) counts[gpt2_sampler_sample(s, chi_logits, NULL, 0)]++;
        ref_t r;
        ref_compute(&r, chi_logits, CHI_N, NULL, 0, gpt2_sampler_get_params(s));
        assert_false(r.ambiguous);
        chi2_t x = chi_square(counts, r.prob_final, CHI_N, CHI_DRAWS);
        print_message("chi2 %-42s X2 = %7.2f  df %2d  p = %.3g\n", chi_cfgs[ci].name, x.stat, x.df,
                      x.p);
        if (x.outside) fail_msg("%s: %ld draws of removed tokens", chi_cfgs[ci].name, x.outside);
        if (!(x.p > CHI_P_MIN)) fail_msg("%s: X2 = %g, p = %g", chi_cfgs[ci].name, x.stat, x.p);
        ref_free(&r);
        gpt2_sampler_free(s);
    }
}

/* The same filtered distribution computed by a deliberately wrong rule, for
 * test_chi_square_power. */
typedef enum {
    WRONG_TEMP_MULTIPLY,   /* softmax(z * T) instead of softmax(z / T) */
    WRONG_NO_RENORM,       /* top-p measured against the mass before top-k */
    WRONG_TOP_P_EXCLUSIVE, /* top-p stops before the token that reaches p */
    WRONG_MIN_P_ABSOLUTE   /* min-p against the total (p >= min_p) instead of the maximum */
} wrong_rule;

static void wrong_distribution(wrong_rule rule, const chi_cfg *cfg, double *out) {
    const int n = CHI_N;
    ref_t r;
    ref_compute(&r, chi_logits, n, NULL, 0, chi_params(cfg));
    double q[CHI_N], m = chi_logits[r.order[0]], sum = 0.0;
    for (int i = 0; i < n; i++) {
        double x = chi_logits[i] - m;
        q[i] = exp(rule == WRONG_TEMP_MULTIPLY ? x * cfg->temperature : x / cfg->temperature);
        sum += q[i];
    }
    for (int i = 0; i < n; i++) q[i] /= sum;
    int k = cfg->top_k > 0 && cfg->top_k < n ? cfg->top_k : n;
    double mass_k = 0.0;
    for (int i = 0; i < k; i++) mass_k += q[r.order[i]];
    double target = cfg->top_p * (rule == WRONG_NO_RENORM ? 1.0 : mass_k), cum = 0.0;
    int c = k;
    if (cfg->top_p < 1.0f) {
        for (int i = 0; i < k; i++) {
            cum += q[r.order[i]];
            if (cum >= target) {
                c = rule == WRONG_TOP_P_EXCLUSIVE && i > 0 ? i : i + 1;
                break;
            }
        }
    }
    double ref_p = rule == WRONG_MIN_P_ABSOLUTE ? 1.0 : q[r.order[0]];
    double kept = 0.0;
    for (int i = 0; i < n; i++) out[i] = 0.0;
    for (int i = 0; i < c; i++) {
        int id = r.order[i];
        if (i > 0 && q[id] < cfg->min_p * ref_p) break;
        out[id] = q[id];
        kept += q[id];
    }
    for (int i = 0; i < n; i++) out[i] /= kept;
    ref_free(&r);
}

/* Draws CHI_DRAWS tokens from dist with the test's own generator (what a
 * sampler implementing the wrong rule would produce) and tests them against
 * the correct distribution at the same threshold. */
static chi2_t wrong_rule_chi2(const double *dist, const double *correct, uint64_t seed) {
    long counts[CHI_N] = {0};
    for (long d = 0; d < CHI_DRAWS; d++) {
        double u = t_uniform(&seed), cum = 0.0;
        int pick = CHI_N - 1;
        for (int i = 0; i < CHI_N; i++) {
            cum += dist[i];
            if (u < cum) {
                pick = i;
                break;
            }
        }
        counts[pick]++;
    }
    return chi_square(counts, correct, CHI_N, CHI_DRAWS);
}

static void test_chi_square_power(void **state) {
    (void)state;
    static const struct {
        wrong_rule rule;
        int cfg;
        const char *name;
    } cases[] = {
        {WRONG_TEMP_MULTIPLY, 1, "temperature multiplied, T=0.7 top_k=5"},
        {WRONG_TEMP_MULTIPLY, 2, "temperature multiplied, T=1.3 top_p=0.8"},
        {WRONG_NO_RENORM, 3, "top-p without renormalising after top-k"},
        {WRONG_TOP_P_EXCLUSIVE, 2, "top-p drops the token reaching p"},
        {WRONG_MIN_P_ABSOLUTE, 4, "min-p against the total, not the max"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const chi_cfg *cfg = &chi_cfgs[cases[i].cfg];
        ref_t r;
        ref_compute(&r, chi_logits, CHI_N, NULL, 0, chi_params(cfg));
        double wrong[CHI_N];
        wrong_distribution(cases[i].rule, cfg, wrong);
        chi2_t x = wrong_rule_chi2(wrong, r.prob_final, 77 + i);
        print_message("wrong rule: %-40s X2 = %9.1f  df %2d  draws outside the support %5ld"
                      "  p = %.3g\n",
                      cases[i].name, x.stat, x.df, x.outside, x.p);
        if (x.p > CHI_P_MIN) fail_msg("%s passed the chi-square test", cases[i].name);
        ref_free(&r);
    }
}

/* The deep path (nucleus beyond rank 256) by frequency: the set of tokens
 * drawn must be exactly the kept set, and frequencies grouped by rank into
 * cells of about equal mass must pass the chi-square test. */
static void test_chi_square_deep(void **state) {
    (void)state;
    enum { N = 800, GROUPS = 40 };
    const long draws = 60000;
    uint64_t rng = 5;
    float *l = random_logits(&rng, N, 0.4);
    const struct {
        float t, top_p, min_p;
    } cfgs[] = {{1.0f, 0.6f, 0.0f}, {1.5f, 0.95f, 0.4f}, {2.5f, 1.0f, 0.5f}, {1.0f, 1.0f, 0.0f}};
    for (size_t ci = 0; ci < sizeof cfgs / sizeof *cfgs; ci++) {
        gpt2_sampler_params p = plain_params(cfgs[ci].t);
        p.top_p = cfgs[ci].top_p;
        p.min_p = cfgs[ci].min_p;
        p.seed = 99 + ci;
        gpt2_sampler *s = new_sampler(p, N);
        ref_t r;
        ref_compute(&r, l, N, NULL, 0, gpt2_sampler_get_params(s));
        assert_false(r.ambiguous);
        assert_true(r.l > 300); /* really deep */
        long *counts = calloc(N, sizeof *counts);
        for (long d = 0; d < draws; d++) counts[gpt2_sampler_sample(s, l, NULL, 0)]++;
        for (int i = 0; i < N; i++) {
            int kept = r.stage[i] == GPT2_STAGE_KEPT;
            if (kept != (counts[i] > 0))
                fail_msg("cfg %zu: id %d kept %d by the reference, drawn %ld times", ci, i, kept,
                         counts[i]);
        }
        long gc[GROUPS] = {0};
        double ge[GROUPS] = {0};
        double cum = 0.0;
        for (int i = 0; i < r.l; i++) {
            int id = r.order[i];
            int g = (int)(cum * GROUPS);
            if (g >= GROUPS) g = GROUPS - 1;
            gc[g] += counts[id];
            ge[g] += r.prob_final[id];
            cum += r.prob_final[id];
        }
        chi2_t x = chi_square(gc, ge, GROUPS, draws);
        print_message("chi2 deep: %d kept of %d, X2 = %.2f df %d p = %.3g\n", r.l, N, x.stat,
                      x.df, x.p);
        if (!(x.p > CHI_P_MIN)) fail_msg("deep cfg %zu: X2 = %g p = %g", ci, x.stat, x.p);
        free(counts);
        ref_free(&r);
        gpt2_sampler_free(s);
    }
    free(l);
}

/* ---- seeds and RNG state ---- */

/* count draws, each with the previous ones (up to 64) as history */
static void draw_sequence(gpt2_sampler *s, const float *l, int count, int32_t *out) {
    int32_t hist[64];
    size_t nh = 0;
    for (int i = 0; i < count; i++) {
        out[i] = gpt2_sampler_sample(s, l, hist, nh);
        if (nh < 64) hist[nh++] = out[i];
        else {
            memmove(hist, hist + 1, 63 * sizeof *hist);
            hist[63] = out[i];
        }
    }
}

static void test_seeds_and_rng_state(void **state) {
    (void)state;
    enum { N = 300, COUNT = 500 };
    uint64_t rng = 6;
    float *l = random_logits(&rng, N, 2.0);
    gpt2_sampler_params p = gpt2_sampler_default_params();
    p.top_k = 100;
    p.top_p = 0.99f;
    p.min_p = 0.0f;
    p.temperature = 1.5f;
    int32_t a[COUNT], b[COUNT], c[COUNT];

    /* same seed, same sequence; another seed, another */
    p.seed = 7;
    gpt2_sampler *s1 = new_sampler(p, N), *s2 = new_sampler(p, N);
    draw_sequence(s1, l, COUNT, a);
    draw_sequence(s2, l, COUNT, b);
    assert_memory_equal(a, b, sizeof a);
    p.seed = 8;
    gpt2_sampler *s3 = new_sampler(p, N);
    draw_sequence(s3, l, COUNT, c);
    int differ = 0;
    for (int i = 0; i < COUNT; i++) differ += a[i] != c[i];
    assert_true(differ > COUNT / 2);

    /* splitmix64, one draw per call: the state moves by the golden gamma */
    assert_true(gpt2_sampler_rng_state(s1) == 7 + (uint64_t)COUNT * 0x9E3779B97F4A7C15u);

    /* save, run on, restore: the continuation repeats */
    uint64_t saved = gpt2_sampler_rng_state(s1);
    draw_sequence(s1, l, COUNT, a);
    gpt2_sampler_set_rng_state(s1, saved);
    draw_sequence(s1, l, COUNT, b);
    assert_memory_equal(a, b, sizeof a);

    /* set_params with the same seed keeps the stream; a new seed restarts it */
    p.seed = 7;
    gpt2_sampler_free(s2);
    s2 = new_sampler(p, N);
    gpt2_sampler *s4 = new_sampler(p, N);
    draw_sequence(s2, l, COUNT / 2, a);
    draw_sequence(s4, l, COUNT / 2, b);
    uint64_t mid = gpt2_sampler_rng_state(s2);
    gpt2_sampler_params q = p;
    q.top_k = 90; /* a different knob, same seed */
    gpt2_sampler_set_params(s2, q);
    assert_true(gpt2_sampler_rng_state(s2) == mid);
    gpt2_sampler_set_params(s2, p);
    draw_sequence(s2, l, COUNT / 2, a);
    draw_sequence(s4, l, COUNT / 2, b);
    assert_memory_equal(a, b, (COUNT / 2) * sizeof *a);
    q = p;
    q.seed = 8;
    gpt2_sampler_set_params(s2, q);
    assert_true(gpt2_sampler_rng_state(s2) == 8);
    gpt2_sampler_free(s3);
    s3 = new_sampler(q, N);
    draw_sequence(s2, l, COUNT, a);
    draw_sequence(s3, l, COUNT, b);
    assert_memory_equal(a, b, sizeof a);

    /* one draw per call whatever survives (top_k = 1 too); none when greedy */
    q = p;
    q.top_k = 1;
    gpt2_sampler_set_params(s1, q);
    gpt2_sampler_set_rng_state(s1, 123);
    for (int i = 0; i < 10; i++) gpt2_sampler_sample(s1, l, NULL, 0);
    assert_true(gpt2_sampler_rng_state(s1) == 123 + 10 * 0x9E3779B97F4A7C15u);
    q.temperature = 0.0f;
    gpt2_sampler_set_params(s1, q);
    for (int i = 0; i < 10; i++) gpt2_sampler_sample(s1, l, NULL, 0);
    assert_true(gpt2_sampler_rng_state(s1) == 123 + 10 * 0x9E3779B97F4A7C15u);

    gpt2_sampler_free(s1);
    gpt2_sampler_free(s2);
    gpt2_sampler_free(s3);
    gpt2_sampler_free(s4);
    free(l);
}

/* ---- the report ---- */

static void test_report_properties(void **state) {
    (void)state;
    uint64_t rng = 8;
    /* a small vocabulary is listed whole: all three distributions sum to 1 */
    enum { N = 200 };
    float *l = random_logits(&rng, N, 2.0);
    gpt2_sampler_params p = gpt2_sampler_default_params();
    p.top_k = 0;
    p.top_p = 0.8f;
    p.temperature = 0.7f;
    gpt2_sampler *s = new_sampler(p, N);
    int32_t hist[3] = {5, 6, 7};
    int32_t id = gpt2_sampler_sample(s, l, hist, 3);
    gpt2_candidate c[N + 10];
    assert_int_equal(gpt2_sampler_report(s, c, N + 10), N);
    double sp = 0, st = 0, sf = 0;
    int seen_id = 0, n_kept = 0;
    for (int i = 0; i < N; i++) {
        sp += c[i].prob;
        st += c[i].prob_temp;
        sf += c[i].prob_final;
        if (i) assert_true(c[i].prob_temp <= c[i - 1].prob_temp);
        if (i) assert_true(c[i].prob <= c[i - 1].prob);
        if (c[i].removed_by == GPT2_STAGE_KEPT) {
            n_kept++;
            assert_true(c[i].prob_final > 0.0f);
            assert_int_equal(n_kept, i + 1); /* the kept set is a prefix */
        } else {
            assert_true(c[i].prob_final == 0.0f);
        }
        seen_id |= c[i].id == id;
    }
    assert_true(seen_id);
    check_close(sp, 1.0, 1e-5, 0, "sum prob", 0);
    check_close(st, 1.0, 1e-5, 0, "sum prob_temp", 0);
    check_close(sf, 1.0, 1e-5, 0, "sum prob_final", 0);
    /* max smaller than what is available */
    assert_int_equal(gpt2_sampler_report(s, c, 3), 3);
    gpt2_sampler_free(s);
    free(l);

    /* how deep the list goes */
    enum { BIG = 50257 };
    l = random_logits(&rng, BIG, 3.0);
    gpt2_candidate *big = malloc(2000 * sizeof *big);
    p = gpt2_sampler_default_params();
    s = new_sampler(p, BIG);
    gpt2_sampler_sample(s, l, NULL, 0);
    assert_int_equal(gpt2_sampler_report(s, big, 2000), 256); /* top_k 40 */
    p.top_k = 1000;
    gpt2_sampler_set_params(s, p);
    gpt2_sampler_sample(s, l, NULL, 0);
    assert_int_equal(gpt2_sampler_report(s, big, 2000), 1000);
    p.top_k = 0;
    gpt2_sampler_set_params(s, p);
    gpt2_sampler_sample(s, l, NULL, 0);
    assert_int_equal(gpt2_sampler_report(s, big, 2000), 256);
    /* params changed after the sample do not change its report */
    gpt2_candidate before[256], after[256];
    gpt2_sampler_report(s, before, 256);
    p.temperature = 0.0f;
    p.top_k = 3;
    gpt2_sampler_set_params(s, p);
    gpt2_sampler_report(s, after, 256);
    assert_memory_equal(before, after, sizeof before);
    free(big);
    gpt2_sampler_free(s);
    free(l);
}

/* ---- NaN and infinities ---- */

static void test_nonfinite_logits(void **state) {
    (void)state;
    enum { N = 8 };
    gpt2_sampler *s = new_sampler(plain_params(1.0f), N);
    gpt2_candidate c[N];

    /* NaN counts as -inf: never the argmax, never drawn, probability 0 */
    float l[N] = {0.5f, NAN, 0.1f, -INFINITY, 0.3f, NAN, 0.2f, 0.0f};
    for (int i = 0; i < 5000; i++) {
        int32_t id = gpt2_sampler_sample(s, l, NULL, 0);
        assert_true(id != 1 && id != 3 && id != 5);
    }
    assert_int_equal(gpt2_sampler_report(s, c, N), N);
    for (int i = 5; i < N; i++) { /* the three ranked last, in id order */
        assert_true(c[i].prob == 0.0f && c[i].prob_temp == 0.0f && c[i].prob_final == 0.0f);
    }
    assert_int_equal(c[5].id, 1);
    assert_int_equal(c[6].id, 3);
    assert_int_equal(c[7].id, 5);
    assert_true(isnan(c[5].logit) && c[6].logit == -INFINITY);
    gpt2_sampler_set_params(s, plain_params(0.0f));
    float nan_first[N] = {NAN, 1.0f, 2.0f, NAN, 2.5f, 0, 0, 0};
    assert_int_equal(gpt2_sampler_sample(s, nan_first, NULL, 0), 4);

    /* one +inf takes everything; two share it */
    gpt2_sampler_set_params(s, plain_params(1.0f));
    float inf1[N] = {1, 2, 3, INFINITY, 5, 6, 7, 8};
    for (int i = 0; i < 200; i++) assert_int_equal(gpt2_sampler_sample(s, inf1, NULL, 0), 3);
    float inf2[N] = {1, INFINITY, 3, 4, 5, 6, INFINITY, FLT_MAX / 2};
    int hits[N] = {0};
    for (int i = 0; i < 4000; i++) hits[gpt2_sampler_sample(s, inf2, NULL, 0)]++;
    assert_true(hits[1] + hits[6] == 4000);
    assert_true(hits[1] > 1800 && hits[6] > 1800);
    gpt2_sampler_set_params(s, plain_params(0.0f));
    assert_int_equal(gpt2_sampler_sample(s, inf2, NULL, 0), 1);

    /* a penalty below 1 cannot push +inf/FLT_MAX over the top into NaN */
    gpt2_sampler_params pb = plain_params(1.0f);
    pb.repeat_penalty = 0.5f;
    gpt2_sampler_set_params(s, pb);
    const int32_t h1[] = {1};
    for (int i = 0; i < N; i++) hits[i] = 0;
    for (int i = 0; i < 2000; i++) hits[gpt2_sampler_sample(s, inf2, h1, 1)]++;
    assert_true(hits[1] + hits[6] == 2000 && hits[1] > 800 && hits[6] > 800);
    assert_int_equal(gpt2_sampler_report(s, c, N), N);
    check_close(c[0].prob, 0.5, 1e-6, 0, "FLT_MAX prob", 0);
    check_close(c[1].prob_final, 0.5, 1e-6, 0, "FLT_MAX prob_final", 1);

    /* huge finite logits: no overflow to NaN */
    gpt2_sampler_set_params(s, plain_params(0.3f));
    float huge[N] = {-FLT_MAX, FLT_MAX, -FLT_MAX, 0, 0, 0, 0, FLT_MAX * 0.999f};
    for (int i = 0; i < 100; i++) assert_int_equal(gpt2_sampler_sample(s, huge, NULL, 0), 1);
    assert_int_equal(gpt2_sampler_report(s, c, N), N);
    assert_true(c[0].prob_final == 1.0f);

    /* no finite logit at all: token 0, an empty report, still one draw */
    float none[N];
    for (int i = 0; i < N; i++) none[i] = i % 2 ? NAN : -INFINITY;
    uint64_t st = gpt2_sampler_rng_state(s);
    assert_int_equal(gpt2_sampler_sample(s, none, NULL, 0), 0);
    assert_true(gpt2_sampler_rng_state(s) == st + 0x9E3779B97F4A7C15u);
    assert_int_equal(gpt2_sampler_report(s, c, N), 0);
    assert_int_equal(gpt2_sampler_last(s), 0);
    gpt2_sampler_set_params(s, plain_params(0.0f));
    assert_int_equal(gpt2_sampler_sample(s, none, NULL, 0), 0);
    gpt2_sampler_free(s);

    /* many -inf in a large vocabulary, top-k off: never drawn */
    enum { BIG = 3000 };
    uint64_t rng = 9;
    float *l2 = random_logits(&rng, BIG, 0.3);
    for (int i = 0; i < BIG; i += 3) l2[i] = -INFINITY;
    s = new_sampler(plain_params(1.0f), BIG);
    for (int i = 0; i < 3000; i++) assert_true(gpt2_sampler_sample(s, l2, NULL, 0) % 3 != 0);
    gpt2_sampler_free(s);
    free(l2);
}


int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_lifecycle),
        cmocka_unit_test(test_clamping),
        cmocka_unit_test(test_greedy_argmax),
        cmocka_unit_test(test_top_k1_is_greedy),
        cmocka_unit_test(test_stages_vs_brute_force),
        cmocka_unit_test(test_deep_nucleus_vs_brute_force),
        cmocka_unit_test(test_boundaries),
        cmocka_unit_test(test_repetition_penalty),
        cmocka_unit_test(test_chi_square_frequencies),
        cmocka_unit_test(test_chi_square_power),
        cmocka_unit_test(test_chi_square_deep),
        cmocka_unit_test(test_seeds_and_rng_state),
        cmocka_unit_test(test_report_properties),
        cmocka_unit_test(test_nonfinite_logits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
