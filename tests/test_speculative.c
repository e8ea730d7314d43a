/* test_speculative.c — speculative sampling (gpt2_speculative.h).
 *
 *  - the pure acceptance step on hand-made distributions: x ~ p, then
 *    accept/correct, 200k seeded draws, chi-square against q at p > 1e-6;
 *    two wrong rules (always accept; correct from q instead of max(0, q - p))
 *    fail the same test;
 *  - temperature 0: token for token the target's greedy decoding, K = 1, 3,
 *    4, 8, for drafts of other sizes/dtypes and for the target as its own
 *    draft (then every draft token is accepted, r = 1);
 *  - sampling: 3000 seeded speculative runs against 3000 target-only runs
 *    (gpt2_sampler) on the tiny models: two-sample chi-square on the first
 *    token and on (first, second) bigrams. A wrong rule plugged in through
 *    params.accept (the decoder's documented test hook) fails it;
 *  - KV caches after rejections against a fresh recomputation;
 *  - errors: another tokenizer, K out of range, a full context window,
 *    cancel; and the CLI (--draft prints what plain generate prints).
 * The chi-square tests use fixed seeds, so they cannot flake. */
#include <math.h>
#include <sys/stat.h>

#include "gpt2.h"
#include "test_util.h"
#include "stats_util.h"
#include "cli_run.h"

#define P_MIN 1e-6

/* ---- helpers ---- */



/* Goodness of fit of counts[0..n) to probabilities expect[0..n). A count in a
 * cell of probability 0 gives p = 0. */
static double chi_gof(const long *counts, const double *expect, int n, long draws, double *stat) {
    double x2 = 0.0;
    int df = -1;
    for (int i = 0; i < n; i++) {
        if (expect[i] == 0.0) {
            if (counts[i]) return *stat = INFINITY, 0.0;
            continue;
        }
        double e = expect[i] * draws;
        x2 += (counts[i] - e) * (counts[i] - e) / e;
        df++;
    }
    *stat = x2;
    return df > 0 ? gamma_q(df / 2.0, x2 / 2.0) : 1.0;
}

/* Two-sample chi-square (2 x n contingency table) of a[0..n) vs b[0..n);
 * cells with a pooled count below 10 are merged into one. */
static double chi_two_sample(const long *a, const long *b, int n, double *stat, int *dfo) {
    long na = 0, nb = 0;
    for (int i = 0; i < n; i++) na += a[i], nb += b[i];
    double x2 = 0.0;
    int df = -1;
    long pa = 0, pb = 0;
    for (int i = 0; i <= n; i++) {
        long ca, cb;
        if (i < n) {
            if (a[i] + b[i] == 0) continue;
            if (a[i] + b[i] < 10) {
                pa += a[i], pb += b[i];
                continue;
            }
            ca = a[i], cb = b[i];
        } else {
            if (pa + pb == 0) break;
            ca = pa, cb = pb;
        }
        double t = (double)(ca + cb), ea = t * na / (double)(na + nb), eb = t * nb / (double)(na + nb);
        x2 += (ca - ea) * (ca - ea) / ea + (cb - eb) * (cb - eb) / eb;
        df++;
    }
    *stat = x2;
    *dfo = df;
    return df > 0 ? gamma_q(df / 2.0, x2 / 2.0) : 1.0;
}

typedef struct {
    gpt2_model *m;
    gpt2_context *ctx;
} loaded;

static loaded load(const char *name) {
    loaded l = {0};
    gpt2_error err;
    if (gpt2_model_load(fixture_path("models/%s", name), &l.m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    if (gpt2_context_new(l.m, gpt2_context_default_params(), &l.ctx, &err) != GPT2_OK) fail_msg("%s", err.msg);
    return l;
}

static void unload(loaded *l) {
    gpt2_context_free(l->ctx);
    gpt2_model_free(l->m);
}

static const int32_t PROMPT[] = {187, 88, 13, 121, 444};
enum { N_PROMPT = 5 };
/* the prompt greedy_reference and spec_generate use */
static const int32_t *g_prompt = PROMPT;
static int g_n_prompt = N_PROMPT;

/* Target-only greedy continuation: gpt2_context + argmax (lowest id on ties). */
static void greedy_reference(gpt2_context *ctx, int n_gen, int32_t *out) {
    gpt2_error err;
    gpt2_context_reset(ctx);
    assert_int_equal(gpt2_context_eval(ctx, g_prompt, g_n_prompt, &err), GPT2_OK);
    int nv = gpt2_model_config(gpt2_context_model(ctx))->n_vocab;
    for (int i = 0; i < n_gen; i++) {
        const float *l = gpt2_context_logits(ctx);
        int a = 0;
        for (int v = 1; v < nv; v++)
            if (l[v] > l[a]) a = v;
        out[i] = a;
        if (i + 1 < n_gen) assert_int_equal(gpt2_context_eval(ctx, &out[i], 1, &err), GPT2_OK);
    }
}

/* Runs the decoder until at least n tokens came out; returns them in out. */
static void spec_generate(gpt2_speculative *sd, int n, int32_t *out, gpt2_spec_token *kinds_out) {
    gpt2_error err;
    assert_int_equal(gpt2_speculative_start(sd, g_prompt, g_n_prompt, &err), GPT2_OK);
    int got = 0;
    while (got < n) {
        gpt2_spec_token t[GPT2_SPEC_MAX_K + 1];
        int m;
        gpt2_status st = gpt2_speculative_step(sd, t, &m, &err);
        if (st != GPT2_OK) fail_msg("step: %s", err.msg);
        assert_true(m >= 1 && m <= gpt2_speculative_get_params(sd).k + 1);
        for (int i = 0; i < m && got < n; i++) {
            if (kinds_out) kinds_out[got] = t[i];
            out[got++] = t[i].id;
        }
    }
}

/* ---- the pure acceptance step ---- */

enum { NCAT = 5, DRAWS = 200000 };
static const float P5[NCAT] = {0.40f, 0.05f, 0.25f, 0.20f, 0.10f}; /* draft */
static const float Q5[NCAT] = {0.10f, 0.30f, 0.25f, 0.05f, 0.30f}; /* target */

static int32_t rule_always_accept(const float *p, const float *q, int n, int32_t x, double ua, double ur,
                                  int *accepted) {
    (void)p, (void)q, (void)n, (void)ua, (void)ur;
    *accepted = 1;
    return x;
}

/* Right acceptance test, but the correction drawn from q instead of max(0, q - p). */
static int32_t rule_correct_from_q(const float *p, const float *q, int n, int32_t x, double ua, double ur,
                                   int *accepted) {
    if (ua * p[x] < q[x]) {
        *accepted = 1;
        return x;
    }
    *accepted = 0;
    double cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += q[i];
        if (ur < cum) return i;
    }
    return n - 1;
}

static double accept_chi(gpt2_speculative_accept_fn rule, double *stat, long *n_acc) {
    uint64_t rng = 12345;
    long counts[NCAT] = {0};
    double expect[NCAT];
    *n_acc = 0;
    for (int i = 0; i < NCAT; i++) expect[i] = Q5[i];
    for (long d = 0; d < DRAWS; d++) {
        double u = t_uniform(&rng), cum = 0.0;
        int x = NCAT - 1;
        for (int i = 0; i < NCAT; i++) {
            cum += P5[i];
            if (u < cum) {
                x = i;
                break;
            }
        }
        int acc = 0;
        int32_t y = rule(P5, Q5, NCAT, x, t_uniform(&rng), t_uniform(&rng), &acc);
        assert_true(y >= 0 && y < NCAT);
        counts[y]++;
        *n_acc += acc;
    }
    return chi_gof(counts, expect, NCAT, DRAWS, stat);
}

static void test_accept_step_chi_square(void **state) {
    (void)state;
    double x2;
    long n_acc;
    double p = accept_chi(gpt2_speculative_accept, &x2, &n_acc);
    print_message("accept rule:          X2 = %8.2f p = %.3g, accepted %.4f (expected %.4f)\n", x2, p,
                  (double)n_acc / DRAWS, 0.10 + 0.05 + 0.25 + 0.05 + 0.10);
    assert_true(p > P_MIN);
    /* acceptance rate = sum min(p, q) = 0.55 */
    assert_true(fabs((double)n_acc / DRAWS - 0.55) < 0.005);
    p = accept_chi(rule_always_accept, &x2, &n_acc);
    print_message("wrong: always accept: X2 = %8.2f p = %.3g\n", x2, p);
    assert_true(p < P_MIN);
    p = accept_chi(rule_correct_from_q, &x2, &n_acc);
    print_message("wrong: correct from q: X2 = %8.2f p = %.3g\n", x2, p);
    assert_true(p < P_MIN);

    /* one-hot (temperature 0): accept iff x is q's argmax, else q's argmax */
    float p1[4] = {0, 1, 0, 0}, q1[4] = {0, 0, 1, 0}, q2[4] = {0, 1, 0, 0};
    int acc;
    assert_int_equal(gpt2_speculative_accept(p1, q1, 4, 1, 0.0, 0.999, &acc), 2);
    assert_int_equal(acc, 0);
    assert_int_equal(gpt2_speculative_accept(p1, q2, 4, 1, 0.999999, 0.5, &acc), 1);
    assert_int_equal(acc, 1);
    assert_int_equal(gpt2_speculative_accept(p1, q1, 4, 7, 0.0, 0.0, &acc), -1);
}

/* ---- the filter is gpt2_sampler's distribution ---- */

static void test_filter_matches_sampler(void **state) {
    (void)state;
    enum { NV = 507 };
    loaded t = load("tiny-f32"), d = load("tiny-f16");
    gpt2_speculative *sd;
    gpt2_error err;
    assert_int_equal(gpt2_speculative_new(t.ctx, d.ctx, gpt2_speculative_default_params(), &sd, &err), GPT2_OK);
    static const struct { float temp; int k; float top_p, min_p, pen; } cfg[] = {
        {0.8f, 40, 0.95f, 0.05f, 1.0f}, {1.0f, 0, 0.9f, 0.0f, 1.0f}, {0.7f, 0, 1.0f, 0.1f, 1.0f},
        {1.3f, 5, 0.5f, 0.0f, 1.0f},    {1.0f, 0, 1.0f, 0.0f, 1.0f}, {0.9f, 20, 0.8f, 0.02f, 1.4f},
        {2.0f, 0, 0.3f, 0.0f, 1.2f},    {0.0f, 0, 1.0f, 0.0f, 1.3f},
    };
    uint64_t rng = 77;
    int32_t hist[40];
    for (int i = 0; i < 40; i++) hist[i] = (int32_t)(t_next(&rng) % 60);
    static float logits[NV], prob[NV];
    static gpt2_candidate cand[NV];
    for (size_t c = 0; c < sizeof cfg / sizeof *cfg; c++) {
        for (int trial = 0; trial < 20; trial++) {
            for (int i = 0; i < NV; i++) {
                double u = t_uniform(&rng), v = t_uniform(&rng);
                logits[i] = (float)(2.5 * sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
            }
            gpt2_speculative_params sp = gpt2_speculative_default_params();
            sp.sampling.temperature = cfg[c].temp;
            sp.sampling.top_k = cfg[c].k;
            sp.sampling.top_p = cfg[c].top_p;
            sp.sampling.min_p = cfg[c].min_p;
            sp.sampling.repeat_penalty = cfg[c].pen;
            assert_int_equal(gpt2_speculative_set_params(sd, sp, &err), GPT2_OK);
            assert_int_equal(gpt2_speculative_filter(sd, logits, hist, 40, prob, &err), GPT2_OK);
            gpt2_sampler *s = new_sampler(sp.sampling, NV);
            int32_t id = gpt2_sampler_sample(s, logits, hist, 40);
            assert_true(prob[id] > 0.0f);
            size_t nc = gpt2_sampler_report(s, cand, NV);
            double listed = 0.0;
            int kept_listed = 0, nonzero = 0;
            for (size_t r = 0; r < nc; r++) {
                if (memcmp(&cand[r].prob_final, &prob[cand[r].id], sizeof(float)) != 0)
                    fail_msg("config %zu: id %d: sampler %g, filter %g", c, cand[r].id, cand[r].prob_final,
                             prob[cand[r].id]);
                listed += prob[cand[r].id];
                kept_listed += cand[r].removed_by == GPT2_STAGE_KEPT;
            }
            double total = 0.0;
            for (int i = 0; i < NV; i++) total += prob[i], nonzero += prob[i] > 0.0f;
            assert_true(fabs(total - 1.0) < 1e-5);
            if (kept_listed < (int)nc) assert_int_equal(nonzero, kept_listed); /* the cut lies within the report */
            (void)listed;
            gpt2_sampler_free(s);
        }
    }
    gpt2_speculative_free(sd);
    unload(&t);
    unload(&d);
}

/* ---- temperature 0 ---- */

/* Returns 1 if some K saw both accepted and rejected drafts. */
static int greedy_case(const char *target, const char *draft) {
    int mixed = 0;
    enum { NGEN = 44 };
    loaded t = load(target), d = load(draft);
    int32_t ref[NGEN], got[NGEN];
    greedy_reference(t.ctx, NGEN, ref);
    const int ks[] = {1, 3, 4, 8};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        gpt2_speculative_params sp = gpt2_speculative_default_params();
        sp.k = ks[ki];
        sp.sampling.temperature = 0.0f;
        gpt2_speculative *sd;
        gpt2_error err;
        assert_int_equal(gpt2_speculative_new(t.ctx, d.ctx, sp, &sd, &err), GPT2_OK);
        gpt2_spec_token kinds[NGEN];
        spec_generate(sd, NGEN, got, kinds);
        for (int i = 0; i < NGEN; i++)
            if (got[i] != ref[i])
                fail_msg("%s <- %s, K = %d: token %d is %d, greedy gives %d", target, draft, ks[ki], i, got[i],
                         ref[i]);
        gpt2_speculative_stats st = gpt2_speculative_get_stats(sd);
        double r = gpt2_speculative_acceptance_rate(&st, ks[ki]);
        print_message("greedy %-18s <- %-18s K = %d: r = %.3f, %.2f tokens/pass\n", target, draft, ks[ki], r,
                      (double)st.produced / st.target_passes);
        assert_int_equal(st.produced, st.accepted + st.iterations); /* one correction or bonus each */
        assert_int_equal(st.target_passes, st.iterations);
        /* the time split: both phases measured, inside the whole */
        assert_true(st.draft_seconds > 0 && st.target_seconds > 0);
        assert_true(st.draft_seconds + st.target_seconds <= st.seconds);
        mixed |= st.accepted > 0 && st.accepted < st.drafted;
        if (strcmp(target, draft) == 0) {
            assert_true(r == 1.0);
            assert_int_equal(st.accepted, st.drafted);
            for (int i = 0; i < NGEN; i++) /* K accepted, then the bonus */
                assert_int_equal(kinds[i].kind, (i % (ks[ki] + 1)) == ks[ki] ? GPT2_SPEC_BONUS : GPT2_SPEC_ACCEPTED);
        }
        gpt2_speculative_free(sd);
    }
    unload(&t);
    unload(&d);
    return mixed;
}

static void test_greedy_equals_target(void **state) {
    (void)state;
    int mixed = 0;
    mixed |= greedy_case("tiny-f32", "tiny-prefix-lmhead"); /* rejects nearly everything */
    mixed |= greedy_case("tiny-f32", "tiny-f16");
    mixed |= greedy_case("tiny-f32", "tiny-bf16");
    mixed |= greedy_case("tiny-bf16", "tiny-f32");
    mixed |= greedy_case("tiny-prefix-lmhead", "tiny-bf16");
    /* bf16 against f32 disagrees now and then on this prompt */
    {
        loaded t = load("tiny-f32");
        int32_t *ids;
        size_t n;
        gpt2_error err;
        assert_int_equal(gpt2_tokenizer_encode(gpt2_model_tokenizer(t.m), "hello world", 11, 0, &ids, &n, &err),
                         GPT2_OK);
        g_prompt = ids;
        g_n_prompt = (int)n;
        mixed |= greedy_case("tiny-f32", "tiny-bf16");
        mixed |= greedy_case("tiny-bf16", "tiny-f32");
        g_prompt = PROMPT;
        g_n_prompt = N_PROMPT;
        free(ids);
        unload(&t);
    }
    mixed |= greedy_case("tiny-f32", "tiny-f32");
    mixed |= greedy_case("tiny-prefix-lmhead", "tiny-prefix-lmhead");
    assert_true(mixed); /* some run went through both accepts and rejections */
}

/* The other families draft for each other (make_arch_fixtures.py: one
 * tokenizer, random weights): a Llama for its own Q8_0 file, a Mistral whose
 * window (8) the 44 tokens pass, a Qwen3 (q/k norms, head_dim apart) drafted
 * by a GPT-NeoX (parallel residual, partial rotary) — greedy as the target's. */
static void test_greedy_other_families(void **state) {
    (void)state;
    loaded t = load("../arch/models/llama-gqa");
    int32_t *ids;
    size_t n;
    gpt2_error err;
    assert_int_equal(gpt2_tokenizer_encode(gpt2_model_tokenizer(t.m), "The quick brown fox", 19, 0, &ids, &n, &err),
                     GPT2_OK);
    g_prompt = ids;
    g_n_prompt = (int)n;
    int mixed = greedy_case("../arch/models/llama-gqa", "../arch/gguf/llama-gqa-q8_0.gguf");
    mixed |= greedy_case("../arch/models/mistral", "../arch/models/llama-gqa");
    mixed |= greedy_case("../arch/models/qwen3", "../arch/models/neox");
    assert_true(mixed);
    g_prompt = PROMPT;
    g_n_prompt = N_PROMPT;
    free(ids);
    unload(&t);
}

/* ---- sampling: the distribution of the first two tokens ---- */

enum { RUNS = 3000, NV_MAX = 512 };

static float dist_penalty = 1.0f;

static gpt2_sampler_params dist_params(void) {
    gpt2_sampler_params p = gpt2_sampler_default_params();
    p.repeat_penalty = dist_penalty; /* over the prompt and the tokens so far */
    p.temperature = 0.5f; /* sharpening */
    p.top_k = 3;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

/* first[id] and bigram[a * NB + b] over RUNS runs, ids mapped through a small
 * table of the ids seen. */
typedef struct {
    int32_t ids[64];
    int n;
} idmap;

static int map_id(idmap *m, int32_t id) {
    for (int i = 0; i < m->n; i++)
        if (m->ids[i] == id) return i;
    assert_true(m->n < 64);
    m->ids[m->n] = id;
    return m->n++;
}

static void target_only_counts(loaded *t, idmap *map, long *first, long *bigram) {
    gpt2_error err;
    gpt2_context_reset(t->ctx);
    assert_int_equal(gpt2_context_eval(t->ctx, PROMPT, N_PROMPT - 1, &err), GPT2_OK);
    int nv = gpt2_model_config(t->m)->n_vocab;
    for (int run = 0; run < RUNS; run++) {
        gpt2_sampler_params sp = dist_params();
        sp.seed = 1000000u + (uint64_t)run;
        gpt2_sampler *s = new_sampler(sp, nv);
        assert_non_null(s);
        assert_int_equal(gpt2_context_rewind(t->ctx, N_PROMPT - 1, &err), GPT2_OK);
        assert_int_equal(gpt2_context_eval(t->ctx, &PROMPT[N_PROMPT - 1], 1, &err), GPT2_OK);
        int32_t hist[N_PROMPT + 2];
        memcpy(hist, PROMPT, sizeof PROMPT);
        int32_t a = gpt2_sampler_sample(s, gpt2_context_logits(t->ctx), hist, N_PROMPT);
        hist[N_PROMPT] = a;
        assert_int_equal(gpt2_context_eval(t->ctx, &a, 1, &err), GPT2_OK);
        int32_t b = gpt2_sampler_sample(s, gpt2_context_logits(t->ctx), hist, N_PROMPT + 1);
        int ia = map_id(map, a), ib = map_id(map, b);
        first[ia]++;
        bigram[ia * 64 + ib]++;
        gpt2_sampler_free(s);
    }
}

static void spec_counts(loaded *t, loaded *d, gpt2_speculative_accept_fn rule, int k, idmap *map, long *first,
                        long *bigram) {
    gpt2_speculative_params sp = gpt2_speculative_default_params();
    sp.k = k;
    sp.sampling = dist_params();
    sp.accept = rule;
    gpt2_speculative *sd;
    gpt2_error err;
    assert_int_equal(gpt2_speculative_new(t->ctx, d->ctx, sp, &sd, &err), GPT2_OK);
    for (int run = 0; run < RUNS; run++) {
        sp.sampling.seed = 7000000u + (uint64_t)run;
        assert_int_equal(gpt2_speculative_set_params(sd, sp, &err), GPT2_OK);
        int32_t out[2];
        spec_generate(sd, 2, out, NULL);
        int ia = map_id(map, out[0]), ib = map_id(map, out[1]);
        first[ia]++;
        bigram[ia * 64 + ib]++;
    }
    gpt2_speculative_free(sd);
}

static double compare(const char *what, const long *a, const long *b, int n) {
    double x2;
    int df;
    double p = chi_two_sample(a, b, n, &x2, &df);
    print_message("  %-28s X2 = %8.2f df %3d p = %.3g\n", what, x2, df, p);
    return p;
}

static void test_sampling_distribution(void **state) {
    (void)state;
    /* a draft that disagrees often (other architecture) and one that mostly agrees (bf16) */
    const char *drafts[] = {"tiny-prefix-lmhead", "tiny-bf16"};
    loaded t = load("tiny-f32");
    static long f_ref[64], b_ref[64 * 64], f_sp[64], b_sp[64 * 64];
    idmap map = {{0}, 0};
    target_only_counts(&t, &map, f_ref, b_ref);
    for (size_t di = 0; di < 2; di++) {
        loaded d = load(drafts[di]);
        for (int k = 1; k <= 4; k += 3) {
            memset(f_sp, 0, sizeof f_sp);
            memset(b_sp, 0, sizeof b_sp);
            spec_counts(&t, &d, NULL, k, &map, f_sp, b_sp);
            print_message("speculative, draft %s, K = %d:\n", drafts[di], k);
            assert_true(compare("first token", f_ref, f_sp, 64) > P_MIN);
            assert_true(compare("bigram", b_ref, b_sp, 64 * 64) > P_MIN);
        }
        unload(&d);
    }
    /* with a repetition penalty (the history includes the drafts before each position) */
    dist_penalty = 3.0f;
    memset(f_ref, 0, sizeof f_ref);
    memset(b_ref, 0, sizeof b_ref);
    target_only_counts(&t, &map, f_ref, b_ref);
    {
        loaded d = load("tiny-prefix-lmhead");
        memset(f_sp, 0, sizeof f_sp);
        memset(b_sp, 0, sizeof b_sp);
        spec_counts(&t, &d, NULL, 4, &map, f_sp, b_sp);
        print_message("speculative with repeat_penalty 3, draft tiny-prefix-lmhead, K = 4:\n");
        assert_true(compare("first token", f_ref, f_sp, 64) > P_MIN);
        assert_true(compare("bigram", b_ref, b_sp, 64 * 64) > P_MIN);
        unload(&d);
    }
    dist_penalty = 1.0f;
    memset(f_ref, 0, sizeof f_ref);
    memset(b_ref, 0, sizeof b_ref);
    target_only_counts(&t, &map, f_ref, b_ref);
    /* Wrong rules through the test hook: with the disagreeing draft they
     * follow the draft (always accept) or a mixture (correct from q). */
    loaded d = load("tiny-prefix-lmhead");
    gpt2_speculative_accept_fn wrong[] = {rule_always_accept, rule_correct_from_q};
    const char *names[] = {"always accept", "correct from q"};
    for (int w = 0; w < 2; w++) {
        memset(f_sp, 0, sizeof f_sp);
        memset(b_sp, 0, sizeof b_sp);
        spec_counts(&t, &d, wrong[w], 4, &map, f_sp, b_sp);
        print_message("wrong rule (%s):\n", names[w]);
        double pf = compare("first token", f_ref, f_sp, 64), pb = compare("bigram", b_ref, b_sp, 64 * 64);
        assert_true(pf < P_MIN || pb < P_MIN);
    }
    unload(&d);
    unload(&t);
}

/* ---- KV caches through rejections ---- */

static void check_logits_fresh(const gpt2_model *m, const float *logits, const int32_t *seq, int n, const char *who) {
    gpt2_context *fresh;
    gpt2_error err;
    assert_int_equal(gpt2_context_new(m, gpt2_context_default_params(), &fresh, &err), GPT2_OK);
    assert_int_equal(gpt2_context_eval(fresh, seq, n, &err), GPT2_OK);
    const float *ref = gpt2_context_logits(fresh);
    int nv = gpt2_model_config(m)->n_vocab;
    double worst = 0.0;
    for (int v = 0; v < nv; v++) {
        double d = fabs((double)logits[v] - ref[v]);
        if (d > worst) worst = d;
    }
    print_message("  %s logits vs fresh context over %d tokens: max |diff| = %.2g\n", who, n, worst);
    assert_true(worst <= 1e-5);
    gpt2_context_free(fresh);
}

static void test_kv_consistency(void **state) {
    (void)state;
    loaded t = load("tiny-f32"), d = load("tiny-prefix-lmhead");
    gpt2_speculative_params sp = gpt2_speculative_default_params();
    sp.k = 4;
    sp.sampling.temperature = 1.0f;
    sp.sampling.top_k = 0;
    sp.sampling.top_p = 1.0f;
    sp.sampling.min_p = 0.0f;
    sp.sampling.seed = 99;
    gpt2_speculative *sd;
    gpt2_error err;
    assert_int_equal(gpt2_speculative_new(t.ctx, d.ctx, sp, &sd, &err), GPT2_OK);
    assert_int_equal(gpt2_speculative_start(sd, PROMPT, N_PROMPT, &err), GPT2_OK);
    for (int round = 0; round < 3; round++) {
        long rejections = 0;
        for (int it = 0; it < 4; it++) {
            gpt2_spec_token tk[GPT2_SPEC_MAX_K + 1];
            int m;
            assert_int_equal(gpt2_speculative_step(sd, tk, &m, &err), GPT2_OK);
            for (int i = 0; i < m; i++) rejections += tk[i].kind == GPT2_SPEC_CORRECTED;
        }
        assert_true(rejections > 0);
        int n;
        const int32_t *seq = gpt2_speculative_tokens(sd, &n);
        assert_int_equal(gpt2_speculative_sync(sd, &err), GPT2_OK);
        assert_int_equal(gpt2_context_n_past(t.ctx), n);
        assert_int_equal(gpt2_context_n_past(d.ctx), n);
        assert_memory_equal(gpt2_context_tokens(t.ctx), seq, (size_t)n * sizeof *seq);
        assert_memory_equal(gpt2_context_tokens(d.ctx), seq, (size_t)n * sizeof *seq);
        check_logits_fresh(t.m, gpt2_context_logits(t.ctx), seq, n, "target");
        check_logits_fresh(d.m, gpt2_context_logits(d.ctx), seq, n, "draft");
    }
    gpt2_speculative_stats st = gpt2_speculative_get_stats(sd);
    assert_true(st.accepted < st.drafted);
    gpt2_speculative_free(sd);
    unload(&t);
    unload(&d);
}

/* ---- errors ---- */

static void test_tokenizer_mismatch(void **state) {
    (void)state;
    char dir[] = "/tmp/gptscope-spec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[256];
    snprintf(sub, sizeof sub, "%s/other-tok", dir);
    copy_fixture_model("tiny-f32", sub, 1); /* a valid tokenizer, different at ids 0 and 1 */
    loaded t = load("tiny-f32");
    gpt2_model *m2;
    gpt2_context *c2;
    gpt2_error err;
    assert_int_equal(gpt2_model_load(sub, &m2, &err), GPT2_OK);
    assert_int_equal(gpt2_context_new(m2, gpt2_context_default_params(), &c2, &err), GPT2_OK);
    gpt2_speculative *sd = (gpt2_speculative *)1;
    assert_int_equal(gpt2_speculative_new(t.ctx, c2, gpt2_speculative_default_params(), &sd, &err),
                     GPT2_ERR_TOKENIZER);
    assert_null(sd);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "'other-tok'"));
    assert_non_null(strstr(err.msg, "'tiny-f32'"));
    assert_non_null(strstr(err.msg, "token id 0 differs"));

    /* the CLI says the same and exits 1 */
    run_result r = run(NULL, "generate -m %s --draft %s -p hi -n 4 --temperature 0", fixture_path("models/tiny-f32"), sub);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "does not share the tokenizer"));
    run_free(&r);

    gpt2_context_free(c2);
    gpt2_model_free(m2);
    unload(&t);
    remove_model_copy(sub);
    rmdir(dir);
}

static void test_k_range(void **state) {
    (void)state;
    loaded t = load("tiny-f32"), d = load("tiny-f16");
    gpt2_speculative_params sp = gpt2_speculative_default_params();
    gpt2_speculative *sd;
    gpt2_error err;
    int bad[] = {0, -1, GPT2_SPEC_MAX_K + 1};
    for (int i = 0; i < 3; i++) {
        sp.k = bad[i];
        assert_int_equal(gpt2_speculative_new(t.ctx, d.ctx, sp, &sd, &err), GPT2_ERR_INVALID_ARG);
        assert_non_null(strstr(err.msg, "outside [1, 16]"));
    }
    sp.k = GPT2_SPEC_MAX_K;
    assert_int_equal(gpt2_speculative_new(t.ctx, d.ctx, sp, &sd, &err), GPT2_OK);
    sp.k = 17;
    assert_int_equal(gpt2_speculative_set_params(sd, sp, &err), GPT2_ERR_INVALID_ARG);
    assert_int_equal(gpt2_speculative_get_params(sd).k, GPT2_SPEC_MAX_K);
    gpt2_speculative_free(sd);
    assert_int_equal(gpt2_speculative_new(t.ctx, t.ctx, gpt2_speculative_default_params(), &sd, &err),
                     GPT2_ERR_INVALID_ARG); /* one context cannot be both */
    assert_null(sd);
    run_result r = run(NULL, "generate -m %s --draft %s -p hi --draft-k 17", fixture_path("models/tiny-f32"),
                       fixture_path("models/tiny-f16"));
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--draft-k"));
    run_free(&r);
    r = run(NULL, "generate -m %s -p hi --stats", fixture_path("models/tiny-f32"));
    assert_int_equal(r.status, 2);
    run_free(&r);
    unload(&t);
    unload(&d);
}

/* Up to the last position of the window, then a clear error; the whole
 * sequence is still target greedy (K shrinks near the end, never the output). */
static void test_context_full(void **state) {
    (void)state;
    loaded t = load("tiny-f32"), d = load("tiny-f16");
    const int n_ctx = gpt2_context_n_ctx(t.ctx);
    gpt2_speculative_params sp = gpt2_speculative_default_params();
    sp.k = 8;
    sp.sampling.temperature = 0.0f;
    gpt2_speculative *sd;
    gpt2_error err;
    assert_int_equal(gpt2_speculative_new(t.ctx, d.ctx, sp, &sd, &err), GPT2_OK);
    assert_int_equal(gpt2_speculative_start(sd, PROMPT, N_PROMPT, &err), GPT2_OK);
    gpt2_status st;
    gpt2_spec_token tk[GPT2_SPEC_MAX_K + 1];
    int m, n = N_PROMPT;
    while ((st = gpt2_speculative_step(sd, tk, &m, &err)) == GPT2_OK) {
        n += m;
        assert_true(n <= n_ctx);
    }
    assert_int_equal(st, GPT2_ERR_CONTEXT_FULL);
    assert_int_equal(m, 0);
    assert_non_null(strstr(err.msg, "fills the context window of 64"));
    int n_seq;
    const int32_t *seq = gpt2_speculative_tokens(sd, &n_seq);
    assert_int_equal(n_seq, n_ctx);
    assert_int_equal(n, n_ctx);
    int32_t ref[64];
    greedy_reference(t.ctx, n_ctx - N_PROMPT, ref);
    assert_memory_equal(seq + N_PROMPT, ref, (size_t)(n_ctx - N_PROMPT) * sizeof *ref);
    /* a prompt that fills the window */
    int32_t longp[64];
    for (int i = 0; i < 64; i++) longp[i] = i;
    assert_int_equal(gpt2_speculative_start(sd, longp, 64, &err), GPT2_ERR_CONTEXT_FULL);
    assert_non_null(strstr(err.msg, "no room"));
    gpt2_speculative_free(sd);
    unload(&t);
    unload(&d);
}

static int cancel_after;
static int count_cancel(void *ud) {
    (void)ud;
    return cancel_after-- <= 0;
}

static void test_cancel(void **state) {
    (void)state;
    loaded t = load("tiny-f32"), d = load("tiny-f16");
    gpt2_speculative_params sp = gpt2_speculative_default_params();
    sp.cancel = count_cancel;
    cancel_after = 100;
    gpt2_speculative *sd;
    gpt2_error err;
    assert_int_equal(gpt2_speculative_new(t.ctx, d.ctx, sp, &sd, &err), GPT2_OK);
    assert_int_equal(gpt2_speculative_start(sd, PROMPT, N_PROMPT, &err), GPT2_OK);
    cancel_after = 2;
    gpt2_spec_token tk[GPT2_SPEC_MAX_K + 1];
    int m, n0, n1;
    assert_int_equal(gpt2_speculative_step(sd, tk, &m, &err), GPT2_OK);
    assert_int_equal(gpt2_speculative_step(sd, tk, &m, &err), GPT2_OK);
    gpt2_speculative_tokens(sd, &n0);
    assert_int_equal(gpt2_speculative_step(sd, tk, &m, &err), GPT2_CANCELLED);
    assert_int_equal(m, 0);
    gpt2_speculative_tokens(sd, &n1);
    assert_int_equal(n0, n1);
    assert_int_equal(gpt2_speculative_get_stats(sd).iterations, 2);
    gpt2_speculative_free(sd);
    unload(&t);
    unload(&d);
}

/* ---- the caller's hooks survive and are forwarded ---- */

typedef struct {
    int logits, attention, residual, cancels;
    int last_pos;
    int cancel_now;
} hook_count;

static void hc_logits(void *ud, int pos, const float *z, int n) {
    hook_count *h = ud;
    h->logits++;
    h->last_pos = pos;
    (void)z, (void)n;
}
static int hc_want_attention(void *ud, int l, int hd) { return l == 0 && hd == 0; }
static void hc_attention(void *ud, int l, int hd, int p, const float *probs, int n) {
    ((hook_count *)ud)->attention++;
    assert_int_equal(n, p + 1);
    (void)l, (void)hd, (void)probs;
}
static int hc_want_residual(void *ud, int l) { return l == 1; }
static void hc_residual(void *ud, int l, int p, const float *x, int n) { ((hook_count *)ud)->residual++; }
static int hc_cancel(void *ud, int done, int total) {
    hook_count *h = ud;
    h->cancels++;
    return h->cancel_now;
}

/* The decoder's observer is gone after its call (only the caller's set is
 * stacked), and the caller's hooks still see an eval made on the context
 * directly: one logits call per position, nothing more. */
static void assert_hooks_are(gpt2_context *ctx, hook_count *h) {
    assert_int_equal(gpt2_context_hooks_depth(ctx), 1);
    const int n = gpt2_context_n_past(ctx), before = h->logits;
    const int32_t tok = 1;
    gpt2_error err;
    if (n >= gpt2_context_n_ctx(ctx)) return;
    assert_int_equal(gpt2_context_eval(ctx, &tok, 1, &err), GPT2_OK);
    assert_int_equal(h->logits, before + 1);
    h->logits = before; /* the caller's counts as they were */
    gpt2_context_rewind(ctx, n, NULL);
}

static void test_caller_hooks_kept(void **state) {
    (void)state;
    loaded t = load("tiny-f32"), d = load("tiny-f16");
    gpt2_error err;
    /* batches of 2: the hooks' cancel is asked between the batches of a pass */
    gpt2_context_params cp = gpt2_context_default_params();
    cp.n_batch = 2;
    gpt2_context_free(t.ctx);
    if (gpt2_context_new(t.m, cp, &t.ctx, &err) != GPT2_OK) fail_msg("%s", err.msg);
    hook_count ht = {0}, hd = {0};
    gpt2_hooks hooks = {.want_attention = hc_want_attention, .on_attention = hc_attention,
                        .want_residual = hc_want_residual, .on_residual = hc_residual,
                        .on_logits = hc_logits, .progress = hc_cancel};
    hooks.user_data = &ht;
    gpt2_context_set_hooks(t.ctx, &hooks);
    hooks.user_data = &hd;
    gpt2_context_set_hooks(d.ctx, &hooks);
    gpt2_speculative_params sp = gpt2_speculative_default_params();
    sp.k = 3;
    sp.sampling.temperature = 0.0f;
    gpt2_speculative *sd;
    assert_int_equal(gpt2_speculative_new(t.ctx, d.ctx, sp, &sd, &err), GPT2_OK);
    assert_int_equal(gpt2_speculative_start(sd, PROMPT, N_PROMPT, &err), GPT2_OK);
    /* the prefill of all but the last prompt token went through the caller's hooks */
    assert_int_equal(ht.logits, N_PROMPT - 1);
    assert_int_equal(ht.attention, N_PROMPT - 1);
    assert_int_equal(ht.residual, N_PROMPT - 1);
    assert_true(ht.cancels > 0);
    assert_hooks_are(t.ctx, &ht);
    assert_hooks_are(d.ctx, &hd);
    gpt2_spec_token tk[GPT2_SPEC_MAX_K + 1];
    int m;
    for (int it = 0; it < 3; it++) {
        int n;
        gpt2_speculative_tokens(sd, &n);
        hook_count before = ht;
        assert_int_equal(gpt2_speculative_step(sd, tk, &m, &err), GPT2_OK);
        /* the verification pass: K + 1 positions, the last one n - 1 + K */
        assert_int_equal(ht.logits - before.logits, sp.k + 1);
        assert_int_equal(ht.attention - before.attention, sp.k + 1);
        assert_int_equal(ht.residual - before.residual, sp.k + 1);
        assert_int_equal(ht.last_pos, n - 1 + sp.k);
        assert_hooks_are(t.ctx, &ht);
        assert_hooks_are(d.ctx, &hd);
        /* the target's captured logits of each emitted token */
        for (int i = 0; i < m; i++) assert_non_null(gpt2_speculative_target_logits(sd, i));
        assert_null(gpt2_speculative_target_logits(sd, m));
    }
    assert_true(hd.logits > 0); /* the draft's evals ran under its own hooks */
    /* the caller's cancel stops a step, and its hooks are still in place */
    int n0, n1;
    gpt2_speculative_tokens(sd, &n0);
    ht.cancel_now = 1;
    assert_int_equal(gpt2_speculative_step(sd, tk, &m, &err), GPT2_CANCELLED);
    gpt2_speculative_tokens(sd, &n1);
    assert_int_equal(n0, n1);
    assert_hooks_are(t.ctx, &ht);
    ht.cancel_now = 0;
    assert_int_equal(gpt2_speculative_step(sd, tk, &m, &err), GPT2_OK);
    assert_hooks_are(t.ctx, &ht);
    /* the RNG state can be read and put back */
    uint64_t r = gpt2_speculative_rng_state(sd);
    gpt2_speculative_set_rng_state(sd, r + 1);
    assert_true(gpt2_speculative_rng_state(sd) == r + 1);
    gpt2_speculative_free(sd);
    unload(&t);
    unload(&d);
}

/* ---- the CLI ---- */

static void test_cli_greedy_identical(void **state) {
    (void)state;
    char target[4096], draft[4096]; /* fixture_path's buffers rotate */
    snprintf(target, sizeof target, "%s", fixture_path("models/tiny-f32"));
    snprintf(draft, sizeof draft, "%s", fixture_path("models/tiny-f16"));
    const char *prompts[] = {"hello world", "the cat"};
    for (int i = 0; i < 2; i++) {
        run_result a = run(NULL, "generate -m %s -p %s -n 40 --temperature 0", target, sq(prompts[i]));
        assert_int_equal(a.status, 0);
        for (int k = 1; k <= 8; k *= 2) {
            run_result b = run(NULL, "generate -m %s --draft %s --draft-k %d -p %s -n 40 --temperature 0", target,
                               draft, k, sq(prompts[i]));
            assert_int_equal(b.status, 0);
            assert_string_equal(a.out, b.out);
            run_free(&b);
        }
        run_free(&a);
        a = run(NULL, "generate -m %s -p %s -n 40 --temperature 0 --ids", target, sq(prompts[i]));
        run_result b = run(NULL, "generate -m %s --draft %s -p %s -n 40 --temperature 0 --ids --stats", target,
                           fixture_path("models/tiny-prefix-lmhead"), sq(prompts[i]));
        assert_int_equal(b.status, 0);
        assert_string_equal(a.out, b.out);
        assert_non_null(strstr(b.err, "r = "));
        assert_non_null(strstr(b.err, "tokens per target pass"));
        assert_non_null(strstr(b.err, "speedup measured"));
        run_free(&a);
        run_free(&b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_step_chi_square),
        cmocka_unit_test(test_filter_matches_sampler),
        cmocka_unit_test(test_greedy_equals_target),
        cmocka_unit_test(test_greedy_other_families),
        cmocka_unit_test(test_sampling_distribution),
        cmocka_unit_test(test_kv_consistency),
        cmocka_unit_test(test_tokenizer_mismatch),
        cmocka_unit_test(test_k_range),
        cmocka_unit_test(test_context_full),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_caller_hooks_kept),
        cmocka_unit_test(test_cli_greedy_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
