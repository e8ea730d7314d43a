/* test_microscope.c — what the microscope computes, against the numpy
 * reference (tests/ref/gpt2_ref.py, float64) and against patterns whose
 * answer follows from the definitions: zero-ablation of heads, the logit
 * lens, and the per-head scores of include/gpt2_inspect.h. */
#include <math.h>

#include "gpt2.h"
#include "test_util.h"

#define TOL_LOGIT 2e-4
#define TOL_SCORE 2e-4

typedef struct {
    const char *name;
    gpt2_model *m;
    int L, H, C, V, T;
    int32_t *tokens;
} fix;

static float *read_f32(const char *path, size_t n) {
    size_t len;
    float *d = read_file(path, &len);
    if (len != n * sizeof(float)) fail_msg("%s: %zu bytes, expected %zu", path, len, n * sizeof(float));
    return d;
}

static fix load(const char *name) {
    fix f = {.name = name};
    char *meta = read_file(fixture_path("ref/%s/meta.txt", name), NULL);
    int n_ctx;
    if (sscanf(meta, "%d %d %d %d %d %d", &f.L, &f.H, &f.C, &n_ctx, &f.V, &f.T) != 6) fail_msg("bad meta.txt");
    free(meta);
    gpt2_error err;
    if (gpt2_model_load(fixture_path("models/%s", name), &f.m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    char *tok = read_file(fixture_path("ref/%s/tokens.txt", name), NULL);
    size_t n;
    f.tokens = parse_ids(tok, &n);
    free(tok);
    assert_int_equal(n, (size_t)f.T);
    return f;
}

static void unload(fix *f) {
    gpt2_model_free(f->m);
    free(f->tokens);
}

static gpt2_context *ctx_new(const fix *f) {
    gpt2_context *ctx;
    gpt2_error err;
    if (gpt2_context_new(f->m, gpt2_context_default_params(), &ctx, &err) != GPT2_OK) fail_msg("%s", err.msg);
    return ctx;
}


/* --- capture: every position's logits, residuals and attention rows --- */

typedef struct {
    const fix *f;
    int T;
    float *logits; /* (T, V) */
    float *resid;  /* (L, T, C) */
    float *attn;   /* (L, H, T, T) */
} cap;

static void on_logits(void *ud, int pos, const float *x, int n) {
    cap *c = ud;
    memcpy(c->logits + (size_t)pos * n, x, (size_t)n * sizeof *x);
}
static void on_resid(void *ud, int l, int pos, const float *x, int n) {
    cap *c = ud;
    memcpy(c->resid + ((size_t)l * c->T + pos) * n, x, (size_t)n * sizeof *x);
}
static void on_att(void *ud, int l, int h, int pos, const float *p, int n_keys) {
    cap *c = ud;
    memcpy(c->attn + (((size_t)l * c->f->H + h) * c->T + pos) * c->T, p, (size_t)n_keys * sizeof *p);
}

/* Runs ids[0..T) through a fresh context (with `ablate`, NULL for none) and captures everything. */
static cap run(const fix *f, const int32_t *ids, int T, const unsigned char *ablate) {
    cap c = {f, T, calloc((size_t)T * f->V, sizeof(float)), calloc((size_t)f->L * T * f->C, sizeof(float)),
             calloc((size_t)f->L * f->H * T * T, sizeof(float))};
    gpt2_context *ctx = ctx_new(f);
    gpt2_error err;
    assert_int_equal(gpt2_context_set_ablation(ctx, ablate, &err), GPT2_OK);
    gpt2_hooks h = {.user_data = &c, .on_logits = on_logits, .on_residual = on_resid, .on_attention = on_att};
    gpt2_context_set_hooks(ctx, &h);
    eval_ok(ctx, ids, T);
    gpt2_context_free(ctx);
    return c;
}

static void cap_free(cap *c) { free(c->logits), free(c->resid), free(c->attn); }

/* ablate.txt: "L.H L.H ..." into an (L, H) mask */
static unsigned char *read_ablate(const fix *f, int *count) {
    unsigned char *mask = calloc((size_t)f->L * f->H, 1);
    char *txt = read_file(fixture_path("ref/%s/ablate.txt", f->name), NULL);
    int l, h, used, off = 0;
    *count = 0;
    while (sscanf(txt + off, " %d.%d%n", &l, &h, &used) == 2) {
        mask[l * f->H + h] = 1, (*count)++;
        off += used;
    }
    free(txt);
    assert_true(*count > 0);
    return mask;
}

/* --- ablation --- */

static void test_ablation_vs_reference(void **state) {
    (void)state;
    const char *names[] = {"tiny-f32", "tiny-f16", "tiny-head64"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        fix f = load(names[i]);
        int n_ab;
        unsigned char *mask = read_ablate(&f, &n_ab);
        float *want = read_f32(fixture_path("ref/%s/logits_ablated.f32", f.name), (size_t)f.T * f.V);
        float *plain = read_f32(fixture_path("ref/%s/logits.f32", f.name), (size_t)f.T * f.V);
        cap c = run(&f, f.tokens, f.T, mask);
        double d = max_abs_diff(c.logits, want, (size_t)f.T * f.V);
        double moved = max_abs_diff(plain, want, (size_t)f.T * f.V); /* what the ablation changes */
        print_message("%s: %d heads ablated: max|dlogit| %.3g vs the reference (the ablation moves logits by %.3g)\n",
                      f.name, n_ab, d, moved);
        assert_true(moved > 100 * TOL_LOGIT); /* the test can tell an ablation from none */
        assert_true(d < TOL_LOGIT);
        cap_free(&c);
        free(want), free(plain), free(mask);
        unload(&f);
    }
}

/* A change of the set resets the cache; the same set again keeps it; lifting
 * it gives the unablated logits bit for bit. */
static void test_ablation_cache(void **state) {
    (void)state;
    fix f = load("tiny-f32");
    int n_ab;
    unsigned char *mask = read_ablate(&f, &n_ab), none[64] = {0};
    gpt2_error err;
    gpt2_context *ctx = ctx_new(&f), *ref = ctx_new(&f);
    eval_ok(ref, f.tokens, f.T);
    eval_ok(ctx, f.tokens, f.T);
    assert_int_equal(gpt2_context_set_ablation(ctx, none, &err), GPT2_OK); /* none -> none: kept */
    assert_int_equal(gpt2_context_n_past(ctx), f.T);
    assert_int_equal(gpt2_context_set_ablation(ctx, mask, &err), GPT2_OK);
    assert_int_equal(gpt2_context_n_past(ctx), 0);
    assert_null(gpt2_context_logits(ctx));
    for (int l = 0; l < f.L; l++)
        for (int h = 0; h < f.H; h++) assert_int_equal(gpt2_context_ablated(ctx, l, h), mask[l * f.H + h]);
    eval_ok(ctx, f.tokens, f.T);
    assert_true(max_abs_diff(gpt2_context_logits(ctx), gpt2_context_logits(ref), f.V) > 100 * TOL_LOGIT);
    assert_int_equal(gpt2_context_set_ablation(ctx, mask, &err), GPT2_OK); /* the same set: kept */
    assert_int_equal(gpt2_context_n_past(ctx), f.T);
    assert_int_equal(gpt2_context_set_ablation(ctx, NULL, &err), GPT2_OK);
    assert_int_equal(gpt2_context_n_past(ctx), 0);
    eval_ok(ctx, f.tokens, f.T);
    assert_memory_equal(gpt2_context_logits(ctx), gpt2_context_logits(ref), (size_t)f.V * sizeof(float));
    gpt2_context_free(ctx), gpt2_context_free(ref);
    free(mask);
    unload(&f);
}

/* --- the logit lens --- */

static void test_lens_vs_reference(void **state) {
    (void)state;
    const char *names[] = {"tiny-f32", "tiny-bf16", "tiny-prefix-lmhead"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        fix f = load(names[i]);
        float *want = read_f32(fixture_path("ref/%s/lens.f32", f.name), (size_t)f.L * f.T * f.V);
        cap c = run(&f, f.tokens, f.T, NULL);
        gpt2_context *ctx = ctx_new(&f);
        eval_ok(ctx, f.tokens, f.T);
        float *got = malloc((size_t)f.L * f.T * f.V * sizeof(float));
        gpt2_error err;
        for (int l = 0; l < f.L; l++)
            for (int t = 0; t < f.T; t++)
                assert_int_equal(gpt2_context_unembed(ctx, c.resid + ((size_t)l * f.T + t) * f.C,
                                                      got + ((size_t)l * f.T + t) * f.V, &err),
                                 GPT2_OK);
        double d = max_abs_diff(got, want, (size_t)f.L * f.T * f.V);
        print_message("%s: lens over %d layers x %d positions: max|dlogit| %.3g\n", f.name, f.L, f.T, d);
        assert_true(d < TOL_LOGIT * 5);
        /* the last block's lens at the last position is the model's own output */
        assert_memory_equal(got + ((size_t)(f.L - 1) * f.T + f.T - 1) * f.V, gpt2_context_logits(ctx),
                            (size_t)f.V * sizeof(float));
        free(got), free(want);
        cap_free(&c);
        gpt2_context_free(ctx);
        unload(&f);
    }
}

/* --- head scores --- */

/* heads.txt lines: layer head prev first self entropy induction n_induction */
static void check_scores(const fix *f, const char *file, const int32_t *ids, int T) {
    cap c = run(f, ids, T, NULL);
    char *txt = read_file(fixture_path("ref/%s/%s", f->name, file), NULL);
    char *p = txt;
    double worst = 0;
    for (int k = 0; k < f->L * f->H; k++) {
        int l, h, n_ind, used;
        double w[5];
        if (sscanf(p, "%d %d %lf %lf %lf %lf %lf %d%n", &l, &h, &w[0], &w[1], &w[2], &w[3], &w[4], &n_ind, &used) != 8)
            fail_msg("%s: line %d unreadable", file, k + 1);
        p += used;
        gpt2_head_scores s;
        gpt2_head_scores_compute(c.attn + ((size_t)l * f->H + h) * T * T, (size_t)T, ids, T, &s);
        const double got[5] = {s.prev_token, s.first_token, s.self, s.entropy, s.induction};
        assert_int_equal(s.n_induction, n_ind);
        for (int j = 0; j < 5; j++) {
            if (isnan(w[j])) {
                assert_true(isnan(got[j]));
                continue;
            }
            worst = fmax(worst, fabs(got[j] - w[j]));
            if (!(fabs(got[j] - w[j]) < TOL_SCORE)) fail_msg("%s %d.%d score %d: %.9g, want %.9g", file, l, h, j, got[j], w[j]);
        }
    }
    print_message("%s %s: %d heads, max|dscore| %.3g\n", f->name, file, f->L * f->H, worst);
    free(txt);
    cap_free(&c);
}

static void test_head_scores_vs_reference(void **state) {
    (void)state;
    const char *names[] = {"tiny-f32", "tiny-head64"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        fix f = load(names[i]);
        check_scores(&f, "heads.txt", f.tokens, f.T);
        char *tok = read_file(fixture_path("ref/%s/tokens_rep.txt", f.name), NULL);
        size_t n;
        int32_t *rep = parse_ids(tok, &n);
        free(tok);
        check_scores(&f, "heads_rep.txt", rep, (int)n);
        free(rep);
        unload(&f);
    }
}

/* Patterns whose scores follow from the definitions. */
static void test_head_scores_analytic(void **state) {
    (void)state;
    enum { T = 6 };
    float A[T * T];
    const int32_t ids[T] = {5, 6, 7, 5, 6, 7};
    gpt2_head_scores s;
    /* a previous-token head: row q puts all its weight on q-1 */
    memset(A, 0, sizeof A);
    A[0] = 1;
    for (int q = 1; q < T; q++) A[q * T + q - 1] = 1;
    gpt2_head_scores_compute(A, T, ids, T, &s);
    assert_true(s.prev_token == 1 && s.self == 0 && s.entropy == 0);
    assert_true(fabs(s.first_token - 1.0 / (T - 1)) < 1e-12); /* only q = 1's previous token is token 0 */
    assert_int_equal(s.n_induction, 3);                       /* q = 3, 4, 5 repeat tokens 0, 1, 2 */
    assert_true(s.induction == 0); /* q attends to q-1, never to the token after the earlier occurrence (q-2) */
    /* uniform rows: entropy ln(q + 1), first token 1 / (q + 1) */
    double ent = 0, first = 0;
    for (int q = 0; q < T; q++)
        for (int k = 0; k <= q; k++) A[q * T + k] = 1.0f / (float)(q + 1);
    for (int q = 1; q < T; q++) ent += log(q + 1.0), first += 1.0 / (q + 1);
    gpt2_head_scores_compute(A, T, ids, T, &s);
    assert_true(fabs(s.entropy - ent / (T - 1)) < 1e-6);
    assert_true(fabs(s.first_token - first / (T - 1)) < 1e-7);
    /* an induction head: q attends to the token after the earlier occurrence */
    memset(A, 0, sizeof A);
    for (int q = 0; q < T; q++) A[q * T + (q >= 3 ? q - 2 : q)] = 1;
    gpt2_head_scores_compute(A, T, ids, T, &s);
    assert_true(s.induction == 1 && s.n_induction == 3);
    /* a sequence without repeats has no induction score; one token has no scores */
    const int32_t distinct[T] = {1, 2, 3, 4, 5, 6};
    gpt2_head_scores_compute(A, T, distinct, T, &s);
    assert_true(isnan(s.induction) && s.n_induction == 0);
    gpt2_head_scores_compute(A, T, ids, 1, &s);
    assert_true(isnan(s.prev_token) && isnan(s.first_token) && isnan(s.self) && isnan(s.entropy));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ablation_vs_reference), cmocka_unit_test(test_ablation_cache),
        cmocka_unit_test(test_lens_vs_reference),     cmocka_unit_test(test_head_scores_vs_reference),
        cmocka_unit_test(test_head_scores_analytic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
