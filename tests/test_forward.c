/* test_forward.c — the forward pass against the independent numpy reference
 * (tests/ref/gpt2_ref.py, float64) on small random models in F32, F16 and BF16,
 * plus KV-cache equivalence, chunked prefill, rewind, hooks, cancel and limits. */
#include <math.h>

#include "gpt2.h"
#include "test_util.h"

typedef struct {
    const char *name;
    gpt2_model *m;
    int L, H, C, n_ctx, V, T;
    int32_t *tokens;    /* (T) */
    float *logits;      /* (T, V) */
    float *attn;        /* (L, H, T, T) */
    float *resid;       /* (L, T, C) */
    int32_t *g_prompt, *g_out;
    size_t n_prompt, n_out;
    double tol;         /* the tolerances' factor: 1, or TOL_Q8 */
} fixture;

/* Absolute tolerances against the float64 reference for float32 math. */
#define TOL_LOGIT 2e-4
#define TOL_PROB 2e-5
#define TOL_ATTN 2e-5
#define TOL_RESID 2e-4
/* Q8's integer products round each matmul's input to 16 bits per block of 32
 * (gemm.h): on the 8-bit-grid models below that moves logits by up to 1.3e-3
 * and probabilities by 7e-5 (the test prints them), so its tolerances are 25
 * times wider; test_gemm bounds the kernels' error analytically. */
#define TOL_Q8 25.0

static float *read_f32(const char *path, size_t n_expected) {
    size_t len;
    float *data = read_file(path, &len);
    if (len != n_expected * sizeof(float))
        fail_msg("%s: %zu bytes, expected %zu", path, len, n_expected * sizeof(float));
    return data;
}

static int setup(void **state, const char *name) {
    fixture *f = calloc(1, sizeof *f);
    f->name = name;
    f->tol = 1.0;
    char *meta = read_file(fixture_path("ref/%s/meta.txt", name), NULL);
    if (sscanf(meta, "%d %d %d %d %d %d", &f->L, &f->H, &f->C, &f->n_ctx, &f->V, &f->T) != 6)
        fail_msg("bad meta.txt for %s", name);
    free(meta);
    gpt2_error err;
    if (gpt2_model_load(fixture_path("models/%s", name), &f->m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    const gpt2_config *c = gpt2_model_config(f->m);
    assert_int_equal(c->n_layer, f->L);
    assert_int_equal(c->n_head, f->H);
    assert_int_equal(c->n_embd, f->C);
    assert_int_equal(c->n_ctx, f->n_ctx);
    assert_int_equal(c->n_vocab, f->V);
    char *tok = read_file(fixture_path("ref/%s/tokens.txt", name), NULL);
    size_t n;
    f->tokens = parse_ids(tok, &n);
    free(tok);
    assert_int_equal(n, (size_t)f->T);
    f->logits = read_f32(fixture_path("ref/%s/logits.f32", name), (size_t)f->T * f->V);
    f->attn = read_f32(fixture_path("ref/%s/attn.f32", name), (size_t)f->L * f->H * f->T * f->T);
    f->resid = read_f32(fixture_path("ref/%s/resid.f32", name), (size_t)f->L * f->T * f->C);
    char *g = read_file(fixture_path("ref/%s/greedy.txt", name), NULL);
    char *nl = strchr(g, '\n');
    assert_non_null(nl);
    *nl = '\0';
    f->g_prompt = parse_ids(g, &f->n_prompt);
    f->g_out = parse_ids(nl + 1, &f->n_out);
    free(g);
    assert_int_equal(f->n_out, 50);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    gpt2_model_free(f->m);
    free(f->tokens), free(f->logits), free(f->attn), free(f->resid), free(f->g_prompt), free(f->g_out);
    free(f);
    return 0;
}

static int setup_f32(void **s) { return setup(s, "tiny-f32"); }
static int setup_f16(void **s) { return setup(s, "tiny-f16"); }
static int setup_bf16(void **s) { return setup(s, "tiny-bf16"); }
static int setup_prefix(void **s) { return setup(s, "tiny-prefix-lmhead"); }
static int setup_head64(void **s) { return setup(s, "tiny-head64"); }

/* A model loaded, then quantized to 8 bits at load as --quantize q8 does. */
static int setup_quantized(void **state, const char *name) {
    setup(state, name);
    fixture *f = *state;
    gpt2_error err;
    if (gpt2_model_quantize(f->m, GPT2_DTYPE_Q8, &err) != GPT2_OK) fail_msg("%s", err.msg);
    assert_int_equal(gpt2_model_dtype(f->m), GPT2_DTYPE_Q8);
    f->tol = TOL_Q8;
    return 0;
}
/* Weights on the 8-bit grid: Q8 must match the F32 reference up to its inputs' rounding. */
static int setup_q8grid(void **s) { return setup_quantized(s, "tiny-q8grid"); }
static int setup_prefix_q8grid(void **s) { return setup_quantized(s, "tiny-prefix-q8grid"); }

static gpt2_context *new_ctx(const fixture *f, int n_batch, int n_ctx) {
    gpt2_context_params p = gpt2_context_default_params();
    p.n_batch = n_batch;
    p.n_ctx = n_ctx;
    gpt2_context *ctx;
    gpt2_error err;
    if (gpt2_context_new(f->m, p, &ctx, &err) != GPT2_OK) fail_msg("%s", err.msg);
    return ctx;
}


static void softmax64(const float *x, double *p, int n) {
    double mx = x[0], s = 0;
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) s += (p[i] = exp((double)x[i] - mx));
    for (int i = 0; i < n; i++) p[i] /= s;
}

static double max_prob_diff(const float *a, const float *b, int n) {
    double *pa = malloc((size_t)n * sizeof *pa), *pb = malloc((size_t)n * sizeof *pb), m = 0;
    softmax64(a, pa, n);
    softmax64(b, pb, n);
    for (int i = 0; i < n; i++) m = fmax(m, fabs(pa[i] - pb[i]));
    free(pa), free(pb);
    return m;
}

/* --- capture of everything the hooks report ---------------------------------- */

typedef struct {
    const fixture *f;
    float *logits, *attn, *resid;
    int n_logit_calls, n_attn_calls, n_resid_calls;
    int only_layer, only_head; /* -1 = all */
    int cancel_after;          /* cancel once n_done >= this (0 = never) */
} capture;

static int cap_want_att(void *ud, int l, int h) {
    capture *c = ud;
    return (c->only_layer < 0 || l == c->only_layer) && (c->only_head < 0 || h == c->only_head);
}
static void cap_att(void *ud, int l, int h, int pos, const float *p, int n_keys) {
    capture *c = ud;
    const fixture *f = c->f;
    assert_int_equal(n_keys, pos + 1);
    assert_true(c->only_layer < 0 || l == c->only_layer);
    assert_true(c->only_head < 0 || h == c->only_head);
    memcpy(c->attn + (((size_t)l * f->H + h) * f->T + pos) * f->T, p, (size_t)n_keys * sizeof(float));
    c->n_attn_calls++;
}
static int cap_want_resid(void *ud, int l) {
    capture *c = ud;
    return c->only_layer < 0 || l == c->only_layer;
}
static void cap_resid(void *ud, int l, int pos, const float *x, int n) {
    capture *c = ud;
    assert_int_equal(n, c->f->C);
    memcpy(c->resid + ((size_t)l * c->f->T + pos) * c->f->C, x, (size_t)n * sizeof(float));
    c->n_resid_calls++;
}
static void cap_logits(void *ud, int pos, const float *x, int n) {
    capture *c = ud;
    assert_int_equal(n, c->f->V);
    memcpy(c->logits + (size_t)pos * n, x, (size_t)n * sizeof(float));
    c->n_logit_calls++;
}
static int cap_cancel(void *ud, int done, int total) {
    capture *c = ud;
    assert_true(done < total);
    return c->cancel_after && done >= c->cancel_after;
}

static capture *capture_new(const fixture *f) {
    capture *c = calloc(1, sizeof *c);
    c->f = f;
    c->logits = calloc((size_t)f->T * f->V, sizeof(float));
    c->attn = calloc((size_t)f->L * f->H * f->T * f->T, sizeof(float));
    c->resid = calloc((size_t)f->L * f->T * f->C, sizeof(float));
    c->only_layer = c->only_head = -1;
    return c;
}
static void capture_free(capture *c) {
    free(c->logits), free(c->attn), free(c->resid), free(c);
}
static gpt2_hooks capture_hooks(capture *c) {
    return (gpt2_hooks){.user_data = c, .want_attention = cap_want_att, .on_attention = cap_att,
                        .want_residual = cap_want_resid, .on_residual = cap_resid, .on_logits = cap_logits,
                        .progress = cap_cancel};
}

/* --- tests ------------------------------------------------------------------ */

/* One batch through the model; every hook's output against the reference. */
static void test_matches_reference(void **state) {
    const fixture *f = *state;
    const int batches[] = {1, 5, f->T};
    for (int b = 0; b < 3; b++) {
        const int n_batch = batches[b];
        capture *c = capture_new(f);
        gpt2_context *ctx = new_ctx(f, n_batch, 0);
        gpt2_hooks h = capture_hooks(c);
        gpt2_context_set_hooks(ctx, &h);
        eval_ok(ctx, f->tokens, f->T);
        assert_int_equal(c->n_logit_calls, f->T);
        assert_int_equal(c->n_attn_calls, f->L * f->H * f->T);
        assert_int_equal(c->n_resid_calls, f->L * f->T);
        double dl = max_abs_diff(c->logits, f->logits, (size_t)f->T * f->V);
        double da = max_abs_diff(c->attn, f->attn, (size_t)f->L * f->H * f->T * f->T);
        double dr = max_abs_diff(c->resid, f->resid, (size_t)f->L * f->T * f->C);
        double dp = 0;
        for (int t = 0; t < f->T; t++)
            dp = fmax(dp, max_prob_diff(c->logits + (size_t)t * f->V, f->logits + (size_t)t * f->V, f->V));
        print_message("%s n_batch %2d: max|dlogit| %.3g  max|dprob| %.3g  max|dattn| %.3g  max|dresid| %.3g\n",
                      f->name, n_batch, dl, dp, da, dr);
        assert_true(dl < TOL_LOGIT * f->tol);
        assert_true(dp < TOL_PROB * f->tol);
        assert_true(da < TOL_ATTN * f->tol);
        assert_true(dr < TOL_RESID * 10 * f->tol);
        /* the context's own last-position logits equal the hook's */
        assert_true(max_abs_diff(gpt2_context_logits(ctx), c->logits + (size_t)(f->T - 1) * f->V, f->V) == 0);
        gpt2_context_free(ctx);
        capture_free(c);
    }
}

/* Token-by-token decode equals the reference at every position (and so equals
 * a full recomputation), and so does any split into prefill chunks. */
static void test_incremental_and_chunked(void **state) {
    const fixture *f = *state;
    gpt2_context *ctx = new_ctx(f, 128, 0);
    assert_null(gpt2_context_logits(ctx));
    double worst = 0;
    for (int t = 0; t < f->T; t++) {
        eval_ok(ctx, &f->tokens[t], 1);
        assert_int_equal(gpt2_context_n_past(ctx), t + 1);
        worst = fmax(worst, max_abs_diff(gpt2_context_logits(ctx), f->logits + (size_t)t * f->V, f->V));
    }
    assert_memory_equal(gpt2_context_tokens(ctx), f->tokens, (size_t)f->T * sizeof(int32_t));
    print_message("%s incremental decode: max|dlogit| %.3g\n", f->name, worst);
    assert_true(worst < TOL_LOGIT * f->tol);
    gpt2_context_free(ctx);
    /* uneven splits: 7 + 1 + 3 + rest, with batch sizes 2 and 128 */
    const int cuts[] = {7, 1, 3};
    for (int nb = 2; nb <= 128; nb *= 64) {
        ctx = new_ctx(f, nb, 0);
        int at = 0;
        for (int i = 0; i < 3; i++) {
            eval_ok(ctx, f->tokens + at, cuts[i]);
            at += cuts[i];
            assert_true(max_abs_diff(gpt2_context_logits(ctx), f->logits + (size_t)(at - 1) * f->V, f->V) < TOL_LOGIT * f->tol);
        }
        eval_ok(ctx, f->tokens + at, f->T - at);
        assert_true(max_abs_diff(gpt2_context_logits(ctx), f->logits + (size_t)(f->T - 1) * f->V, f->V) < TOL_LOGIT * f->tol);
        gpt2_context_free(ctx);
    }
}

/* Rewinding forgets positions: re-evaluating after a rewind, even after
 * different tokens were written there, gives the reference again. */
static void test_rewind_and_reset(void **state) {
    const fixture *f = *state;
    gpt2_context *ctx = new_ctx(f, 128, 0);
    gpt2_error err;
    eval_ok(ctx, f->tokens, f->T);
    assert_int_equal(gpt2_context_rewind(ctx, f->T + 1, &err), GPT2_ERR_INVALID_ARG);
    assert_int_equal(gpt2_context_rewind(ctx, -1, &err), GPT2_ERR_INVALID_ARG);
    assert_int_equal(gpt2_context_rewind(ctx, 10, &err), GPT2_OK);
    assert_int_equal(gpt2_context_n_past(ctx), 10);
    assert_null(gpt2_context_logits(ctx));
    int32_t other[8];
    for (int i = 0; i < 8; i++) other[i] = (f->tokens[10 + i] + 17) % (f->V - 1);
    eval_ok(ctx, other, 8); /* overwrite cache rows 10..17 */
    assert_int_equal(gpt2_context_rewind(ctx, 10, &err), GPT2_OK);
    eval_ok(ctx, f->tokens + 10, f->T - 10);
    assert_true(max_abs_diff(gpt2_context_logits(ctx), f->logits + (size_t)(f->T - 1) * f->V, f->V) < TOL_LOGIT * f->tol);
    gpt2_context_reset(ctx);
    assert_int_equal(gpt2_context_n_past(ctx), 0);
    eval_ok(ctx, f->tokens, 5);
    assert_true(max_abs_diff(gpt2_context_logits(ctx), f->logits + 4 * (size_t)f->V, f->V) < TOL_LOGIT * f->tol);
    gpt2_context_free(ctx);
}

/* Greedy decoding for 50 tokens reproduces the reference's argmax chain. */
static void test_greedy_50(void **state) {
    const fixture *f = *state;
    gpt2_context *ctx = new_ctx(f, 128, 0);
    gpt2_sampler_params sp = gpt2_sampler_default_params();
    sp.temperature = 0;
    sp.repeat_penalty = 1;
    gpt2_sampler *s = new_sampler(sp, f->V);
    eval_ok(ctx, f->g_prompt, (int)f->n_prompt);
    for (size_t i = 0; i < f->n_out; i++) {
        int32_t id = gpt2_sampler_sample(s, gpt2_context_logits(ctx), NULL, 0);
        if (id != f->g_out[i]) fail_msg("%s: greedy token %zu is %d, reference %d", f->name, i, id, f->g_out[i]);
        eval_ok(ctx, &id, 1);
    }
    gpt2_sampler_free(s);
    gpt2_context_free(ctx);
}

/* Observers get only what they ask for. */
static void test_hooks_filter(void **state) {
    const fixture *f = *state;
    capture *c = capture_new(f);
    c->only_layer = f->L - 1;
    c->only_head = f->H - 1;
    gpt2_context *ctx = new_ctx(f, 4, 0);
    gpt2_hooks h = capture_hooks(c);
    h.on_logits = NULL;
    gpt2_context_set_hooks(ctx, &h);
    eval_ok(ctx, f->tokens, f->T);
    assert_int_equal(c->n_attn_calls, f->T);
    assert_int_equal(c->n_resid_calls, f->T);
    assert_int_equal(c->n_logit_calls, 0);
    size_t off = ((size_t)(f->L - 1) * f->H + (f->H - 1)) * f->T * f->T;
    assert_true(max_abs_diff(c->attn + off, f->attn + off, (size_t)f->T * f->T) < TOL_ATTN * f->tol);
    gpt2_context_set_hooks(ctx, NULL); /* removed: no more calls */
    eval_ok(ctx, f->tokens, 4);
    assert_int_equal(c->n_attn_calls, f->T);
    gpt2_context_free(ctx);
    capture_free(c);
}

/* Observers stacked on one context: the caller's (all hooks) and a pushed
 * one (one head, the logits, a cancel) each get what they asked for against
 * the reference; the pushed one's cancel stops the eval; after a pop only
 * the caller's remain; the stack has a limit, and pop never removes the
 * caller's set. */
static void test_hook_stack(void **state) {
    const fixture *f = *state;
    capture *all = capture_new(f), *one = capture_new(f);
    one->only_layer = f->L - 1;
    one->only_head = 0;
    gpt2_context *ctx = new_ctx(f, 4, 0);
    gpt2_hooks ha = capture_hooks(all), ho = capture_hooks(one);
    ho.want_residual = NULL, ho.on_residual = NULL;
    gpt2_context_set_hooks(ctx, &ha);
    gpt2_error err;
    assert_int_equal(gpt2_context_push_hooks(ctx, &ho, &err), GPT2_OK);
    eval_ok(ctx, f->tokens, f->T);
    assert_int_equal(all->n_attn_calls, f->L * f->H * f->T);
    assert_int_equal(one->n_attn_calls, f->T);
    assert_int_equal(all->n_logit_calls, f->T);
    assert_int_equal(one->n_logit_calls, f->T);
    assert_int_equal(one->n_resid_calls, 0);
    assert_true(max_abs_diff(all->attn, f->attn, (size_t)f->L * f->H * f->T * f->T) < TOL_ATTN * f->tol);
    size_t off = (size_t)(f->L - 1) * f->H * f->T * f->T;
    assert_true(max_abs_diff(one->attn + off, f->attn + off, (size_t)f->T * f->T) < TOL_ATTN * f->tol);
    assert_true(max_abs_diff(one->logits, f->logits, (size_t)f->T * f->V) < TOL_LOGIT * f->tol);
    /* the pushed observer's cancel stops the eval between batches */
    gpt2_context_reset(ctx);
    one->cancel_after = 8;
    assert_int_equal(gpt2_context_eval(ctx, f->tokens, f->T, &err), GPT2_CANCELLED);
    assert_int_equal(gpt2_context_n_past(ctx), 8);
    /* popped: only the caller's set gets calls */
    gpt2_context_pop_hooks(ctx);
    const int before = one->n_logit_calls;
    eval_ok(ctx, f->tokens + 8, 4);
    assert_int_equal(one->n_logit_calls, before);
    gpt2_context_pop_hooks(ctx); /* nothing pushed: the caller's set stays */
    eval_ok(ctx, f->tokens + 12, 1);
    assert_int_equal(all->n_logit_calls, f->T + 8 + 4 + 1);
    for (int i = 1; i < GPT2_HOOKS_MAX; i++) assert_int_equal(gpt2_context_push_hooks(ctx, &ho, &err), GPT2_OK);
    assert_int_equal(gpt2_context_push_hooks(ctx, &ho, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "push_hooks"));
    gpt2_context_free(ctx);
    capture_free(all);
    capture_free(one);
}

/* A cancel stops between batches; what was evaluated stays valid and can be continued. */
static void test_cancel(void **state) {
    const fixture *f = *state;
    capture *c = capture_new(f);
    c->cancel_after = 8;
    gpt2_context *ctx = new_ctx(f, 4, 0);
    gpt2_hooks h = {.user_data = c, .progress = cap_cancel};
    gpt2_context_set_hooks(ctx, &h);
    gpt2_error err;
    assert_int_equal(gpt2_context_eval(ctx, f->tokens, f->T, &err), GPT2_CANCELLED);
    assert_int_equal(gpt2_context_n_past(ctx), 8);
    assert_true(max_abs_diff(gpt2_context_logits(ctx), f->logits + 7 * (size_t)f->V, f->V) < TOL_LOGIT * f->tol);
    c->cancel_after = 0;
    eval_ok(ctx, f->tokens + 8, f->T - 8);
    assert_true(max_abs_diff(gpt2_context_logits(ctx), f->logits + (size_t)(f->T - 1) * f->V, f->V) < TOL_LOGIT * f->tol);
    gpt2_context_free(ctx);
    capture_free(c);
}

/* The window is n_positions: overflowing it is an error that changes nothing. */
static void test_context_limit(void **state) {
    const fixture *f = *state;
    gpt2_context *ctx = new_ctx(f, 16, 0);
    assert_int_equal(gpt2_context_n_ctx(ctx), f->n_ctx);
    int32_t *ids = malloc((size_t)(f->n_ctx + 1) * sizeof *ids);
    for (int i = 0; i <= f->n_ctx; i++) ids[i] = f->tokens[i % f->T];
    gpt2_error err;
    eval_ok(ctx, ids, f->n_ctx - 4);
    assert_int_equal(gpt2_context_eval(ctx, ids, 5, &err), GPT2_ERR_CONTEXT_FULL);
    assert_non_null(strstr(err.msg, "context"));
    assert_int_equal(gpt2_context_n_past(ctx), f->n_ctx - 4);
    eval_ok(ctx, ids, 4);
    assert_int_equal(gpt2_context_n_past(ctx), f->n_ctx);
    assert_int_equal(gpt2_context_eval(ctx, ids, 1, &err), GPT2_ERR_CONTEXT_FULL);
    /* bad ids are rejected before anything runs */
    gpt2_context_reset(ctx);
    int32_t bad[2] = {1, f->V};
    assert_int_equal(gpt2_context_eval(ctx, bad, 2, &err), GPT2_ERR_INVALID_ARG);
    bad[1] = -3;
    assert_int_equal(gpt2_context_eval(ctx, bad, 2, &err), GPT2_ERR_INVALID_ARG);
    assert_int_equal(gpt2_context_n_past(ctx), 0);
    /* a smaller window than the model's, and invalid params */
    gpt2_context_params p = gpt2_context_default_params();
    p.n_ctx = f->n_ctx + 1;
    gpt2_context *c2;
    assert_int_equal(gpt2_context_new(f->m, p, &c2, &err), GPT2_ERR_INVALID_ARG);
    p.n_ctx = 0;
    p.n_batch = 0;
    assert_int_equal(gpt2_context_new(f->m, p, &c2, &err), GPT2_ERR_INVALID_ARG);
    gpt2_context_free(ctx);
    ctx = new_ctx(f, 16, 10);
    assert_int_equal(gpt2_context_eval(ctx, ids, 11, &err), GPT2_ERR_CONTEXT_FULL);
    gpt2_context_free(ctx);
    free(ids);
}

/* A random in-memory model runs in every dtype, and 16-bit decode agrees with
 * 16-bit prefill (two different kernels over the same weights). */
static void test_random_model(void **state) {
    (void)state;
    gpt2_config c = {.n_layer = 2, .n_head = 4, .n_embd = 64, .n_ctx = 32, .n_vocab = 300, .ln_eps = 1e-5f};
    for (int dt = GPT2_DTYPE_F32; dt <= GPT2_DTYPE_BF16; dt++) {
        gpt2_model *m;
        gpt2_error err;
        assert_int_equal(gpt2_model_new_random(c, (gpt2_dtype)dt, 7, &m, &err), GPT2_OK);
        assert_null(gpt2_model_tokenizer(m));
        assert_int_equal(gpt2_model_dtype(m), dt);
        int32_t ids[20];
        for (int i = 0; i < 20; i++) ids[i] = (i * 37) % 300;
        gpt2_context *a, *b;
        gpt2_context_params p = gpt2_context_default_params();
        assert_int_equal(gpt2_context_new(m, p, &a, &err), GPT2_OK);
        assert_int_equal(gpt2_context_new(m, p, &b, &err), GPT2_OK);
        assert_int_equal(gpt2_context_eval(a, ids, 20, &err), GPT2_OK);
        for (int i = 0; i < 20; i++) assert_int_equal(gpt2_context_eval(b, ids + i, 1, &err), GPT2_OK);
        double d = max_abs_diff(gpt2_context_logits(a), gpt2_context_logits(b), 300);
        assert_true(d < 1e-4);
        for (int i = 0; i < 300; i++) assert_true(isfinite(gpt2_context_logits(a)[i]));
        gpt2_context_free(a);
        gpt2_context_free(b);
        gpt2_model_free(m);
    }
    gpt2_model *m;
    c.n_head = 5;
    assert_int_equal(gpt2_model_new_random(c, GPT2_DTYPE_F32, 1, &m, NULL), GPT2_ERR_INVALID_ARG);
}

/* Every position's logits, from on_logits, into rows (n_ctx, V). */
static void keep_logits(void *ud, int pos, const float *logits, int n_vocab) {
    memcpy((float *)ud + (size_t)pos * n_vocab, logits, (size_t)n_vocab * sizeof(float));
}

/* A long prefill after a prefix (its attention in causal blocks of 64
 * positions, the last one partial) gives every position the logits of
 * token-by-token decode, whose attention is another code path
 * (kernel_attention_row). */
static void test_long_prefill_matches_decode(void **state) {
    (void)state;
    gpt2_config c = {.n_layer = 2, .n_head = 4, .n_embd = 64, .n_ctx = 256, .n_vocab = 300, .ln_eps = 1e-5f};
    gpt2_model *m;
    gpt2_error err;
    assert_int_equal(gpt2_model_new_random(c, GPT2_DTYPE_F32, 9, &m, &err), GPT2_OK);
    enum { N = 230, PREFIX = 30, V = 300 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (i * 53 + 11) % V;
    float *pre = calloc((size_t)N * V, sizeof(float)), *dec = calloc((size_t)N * V, sizeof(float));
    gpt2_context *a, *b;
    gpt2_context_params p = gpt2_context_default_params();
    assert_int_equal(gpt2_context_new(m, p, &a, &err), GPT2_OK);
    assert_int_equal(gpt2_context_new(m, p, &b, &err), GPT2_OK);
    gpt2_hooks ha = {.user_data = pre, .on_logits = keep_logits}, hb = {.user_data = dec, .on_logits = keep_logits};
    gpt2_context_set_hooks(a, &ha), gpt2_context_set_hooks(b, &hb);
    assert_int_equal(gpt2_context_eval(a, ids, PREFIX, &err), GPT2_OK);
    assert_int_equal(gpt2_context_eval(a, ids + PREFIX, N - PREFIX, &err), GPT2_OK);
    for (int i = 0; i < N; i++) assert_int_equal(gpt2_context_eval(b, ids + i, 1, &err), GPT2_OK);
    const double worst = max_abs_diff(pre, dec, (size_t)N * V);
    print_message("prefill of %d after %d against decode, every position: max|dlogit| %.3g\n", N - PREFIX, PREFIX,
                  worst);
    assert_true(worst < 1e-4);
    gpt2_context_free(a), gpt2_context_free(b);
    gpt2_model_free(m);
    free(pre), free(dec);
}

/* Ordinary weights quantized: the drift from the F32 reference stays within
 * what 8-bit steps allow, and the quantized model's weight bytes are about a
 * quarter of F32's. */
static void test_q8_drift(void **state) {
    const fixture *f = *state;
    gpt2_model *q;
    gpt2_error err;
    assert_int_equal(gpt2_model_load(fixture_path("models/%s", f->name), &q, &err), GPT2_OK);
    const size_t f32_bytes = gpt2_model_weight_bytes(q);
    assert_int_equal(gpt2_model_quantize(q, GPT2_DTYPE_Q8, &err), GPT2_OK);
    assert_int_equal(gpt2_model_quantize(q, GPT2_DTYPE_Q8, &err), GPT2_OK); /* already: no-op */
    assert_int_equal(gpt2_model_quantize(q, GPT2_DTYPE_F16, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "to q8, q8_0, q4_0 or q4_k, not f16"));
    const size_t q8_bytes = gpt2_model_weight_bytes(q);
    print_message("%s: weights %zu bytes F32, %zu bytes Q8\n", f->name, f32_bytes, q8_bytes);
    assert_true(q8_bytes < f32_bytes / 3);
    gpt2_context *ctx;
    assert_int_equal(gpt2_context_new(q, gpt2_context_default_params(), &ctx, &err), GPT2_OK);
    capture *c = capture_new(f);
    gpt2_hooks h = capture_hooks(c);
    gpt2_context_set_hooks(ctx, &h);
    eval_ok(ctx, f->tokens, f->T);
    const size_t n = (size_t)f->T * f->V;
    double dl = max_abs_diff(c->logits, f->logits, n), dp = 0, mean = 0, var = 0;
    for (int t = 0; t < f->T; t++)
        dp = fmax(dp, max_prob_diff(c->logits + (size_t)t * f->V, f->logits + (size_t)t * f->V, f->V));
    for (size_t i = 0; i < n; i++) mean += fabs((double)c->logits[i] - f->logits[i]) / (double)n;
    double avg = 0;
    for (size_t i = 0; i < n; i++) avg += f->logits[i] / (double)n;
    for (size_t i = 0; i < n; i++) var += (f->logits[i] - avg) * (f->logits[i] - avg) / (double)n;
    print_message("%s as Q8: max|dlogit| %.3g  mean|dlogit| %.3g (logit std %.3g)  max|dprob| %.3g\n", f->name,
                  dl, mean, sqrt(var), dp);
    assert_true(dl > TOL_LOGIT); /* really quantized: not the F32 path */
    /* These tiny models are tuned for lively attention (scores with std ~2),
     * which amplifies weight noise far more than trained models do (the
     * bundled shakespeare model's held-out loss moves by 1e-5 nats). */
    assert_true(mean < 0.02 * sqrt(var));
    assert_true(dl < 0.15 * sqrt(var) && dp < 0.05);
    capture_free(c);
    gpt2_context_free(ctx);
    gpt2_model_free(q);
}

typedef struct {
    float *rows; /* (T, V) */
    int p0, V, calls;
} row_capture;

static void capture_row(void *ud, int pos, const float *x, int n) {
    row_capture *c = ud;
    assert_int_equal(n, c->V);
    memcpy(c->rows + (size_t)(pos - c->p0) * n, x, (size_t)n * sizeof(float));
    c->calls++;
}

/* A few positions in one eval (a speculative verification pass) give the same
 * logits, bit for bit, as evaluating them one at a time, in every dtype; both
 * with 64-wide heads and N a multiple of 16 (the vector paths) and with odd
 * shapes (34-wide heads, 68 rows: the scalar tails); Q8 included. Past KERNEL_SMALL_T (16)
 * positions the sgemm path takes over and agrees within rounding. */
static void test_small_batch_bit_identical(void **state) {
    (void)state;
    const gpt2_config shapes[] = {
        {.n_layer = 2, .n_head = 2, .n_embd = 128, .n_ctx = 64, .n_vocab = 300, .ln_eps = 1e-5f},
        {.n_layer = 2, .n_head = 2, .n_embd = 68, .n_ctx = 64, .n_vocab = 301, .ln_eps = 1e-5f},
    };
    const int sizes[] = {2, 3, 5, 8, 16, 17};
    for (int sh = 0; sh < 2; sh++)
        for (int dt = GPT2_DTYPE_F32; dt <= GPT2_DTYPE_Q8; dt++) {
            gpt2_model *m;
            gpt2_error err;
            assert_int_equal(gpt2_model_new_random(shapes[sh], (gpt2_dtype)dt, 11, &m, &err), GPT2_OK);
            const int V = shapes[sh].n_vocab, P0 = 10;
            int32_t ids[P0 + 17];
            for (int i = 0; i < P0 + 17; i++) ids[i] = (i * 53 + 7) % V;
            gpt2_context *one, *batch;
            assert_int_equal(gpt2_context_new(m, gpt2_context_default_params(), &one, &err), GPT2_OK);
            assert_int_equal(gpt2_context_new(m, gpt2_context_default_params(), &batch, &err), GPT2_OK);
            float *want = malloc(17 * (size_t)V * sizeof(float)), *got = malloc(17 * (size_t)V * sizeof(float));
            for (int si = 0; si < 6; si++) {
                const int T = sizes[si];
                gpt2_context_reset(one);
                gpt2_context_reset(batch);
                eval_ok(one, ids, P0);
                eval_ok(batch, ids, P0);
                for (int t = 0; t < T; t++) {
                    eval_ok(one, ids + P0 + t, 1);
                    memcpy(want + (size_t)t * V, gpt2_context_logits(one), (size_t)V * sizeof(float));
                }
                row_capture rc = {got, P0, V, 0};
                gpt2_hooks h = {.user_data = &rc, .on_logits = capture_row};
                gpt2_context_set_hooks(batch, &h);
                eval_ok(batch, ids + P0, T);
                gpt2_context_set_hooks(batch, NULL);
                assert_int_equal(rc.calls, T);
                if (T <= 16) {
                    assert_memory_equal(want, got, (size_t)T * V * sizeof(float));
                } else {
                    assert_true(max_abs_diff(want, got, (size_t)T * V) < 1e-4);
                }
            }
            free(want), free(got);
            gpt2_context_free(one);
            gpt2_context_free(batch);
            gpt2_model_free(m);
        }
}

/* The thread count changes who computes what, never the result: logits are
 * bit-identical for 1, 2 and 3 threads, in prefill and in decode. */
static void test_threads_identical(void **state) {
    const fixture *f = *state;
    float *first = malloc(2 * (size_t)f->V * sizeof(float));
    for (int nt = 1; nt <= 3; nt++) {
        gpt2_context_params p = gpt2_context_default_params();
        p.n_threads = nt;
        gpt2_context *ctx;
        assert_int_equal(gpt2_context_new(f->m, p, &ctx, NULL), GPT2_OK);
        assert_int_equal(gpt2_context_n_threads(ctx), nt);
        eval_ok(ctx, f->tokens, f->T - 1);
        const float *prefill = gpt2_context_logits(ctx);
        if (nt == 1) memcpy(first, prefill, (size_t)f->V * sizeof(float));
        else assert_memory_equal(first, prefill, (size_t)f->V * sizeof(float));
        eval_ok(ctx, f->tokens + f->T - 1, 1);
        const float *decode = gpt2_context_logits(ctx);
        if (nt == 1) memcpy(first + f->V, decode, (size_t)f->V * sizeof(float));
        else assert_memory_equal(first + f->V, decode, (size_t)f->V * sizeof(float));
        gpt2_context_free(ctx);
    }
    free(first);
}

/* interrupt: asked before every layer; says stop on its `at`-th call. */
typedef struct {
    int calls, at;
} interrupter;

static int interrupt_at(void *ud) {
    interrupter *it = ud;
    return ++it->calls == it->at;
}

/* A stop request in the middle of a batch abandons that batch alone: the
 * earlier batch stays, with its logits, and going on gives the reference. */
static void test_interrupt(void **state) {
    const fixture *f = *state;
    gpt2_context *ctx = new_ctx(f, 8, 0);
    interrupter it = {.at = f->L + 2}; /* the second layer of the second batch */
    gpt2_hooks h = {.user_data = &it, .cancel = interrupt_at};
    gpt2_context_set_hooks(ctx, &h);
    gpt2_error err;
    assert_int_equal(gpt2_context_eval(ctx, f->tokens, f->T, &err), GPT2_CANCELLED);
    assert_non_null(strstr(err.msg, "interrupted"));
    assert_int_equal(it.calls, f->L + 2);
    assert_int_equal(gpt2_context_n_past(ctx), 8);
    assert_true(max_abs_diff(gpt2_context_logits(ctx), f->logits + 7 * (size_t)f->V, f->V) < TOL_LOGIT * f->tol);
    it.at = 0; /* never again */
    eval_ok(ctx, f->tokens + 8, f->T - 8);
    assert_true(max_abs_diff(gpt2_context_logits(ctx), f->logits + (size_t)(f->T - 1) * f->V, f->V) < TOL_LOGIT * f->tol);
    /* a one-batch prompt is stopped too: the only stop point inside it is a layer */
    gpt2_context_reset(ctx);
    it = (interrupter){.at = 1};
    gpt2_context_set_hooks(ctx, &h);
    assert_int_equal(gpt2_context_eval(ctx, f->tokens, 4, &err), GPT2_CANCELLED);
    assert_int_equal(gpt2_context_n_past(ctx), 0);
    assert_null(gpt2_context_logits(ctx));
    gpt2_context_free(ctx);
}

/* Weights that are not finite: a bias is refused at load, naming the tensor;
 * a NaN inside a matrix (not scanned at load) is caught in the first logits,
 * naming the model, and the batch is not added. Fixtures: nonfinite/. */
static void test_nonfinite_weights(void **state) {
    (void)state;
    gpt2_model *m = NULL;
    gpt2_error err;
    assert_int_equal(gpt2_model_load(fixture_path("nonfinite/inf-bias"), &m, &err), GPT2_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "h.0.attn.c_attn.bias"));
    assert_non_null(strstr(err.msg, "inf"));
    assert_non_null(strstr(err.msg, "element 7"));
    assert_int_equal(gpt2_model_load(fixture_path("nonfinite/nan-matrix"), &m, &err), GPT2_OK);
    gpt2_context *ctx;
    assert_int_equal(gpt2_context_new(m, gpt2_context_default_params(), &ctx, &err), GPT2_OK);
    const int32_t ids[3] = {1, 2, 3};
    assert_int_equal(gpt2_context_eval(ctx, ids, 3, &err), GPT2_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "nan-matrix"));
    assert_non_null(strstr(err.msg, "NaN or Inf"));
    assert_int_equal(gpt2_context_n_past(ctx), 0);
    assert_null(gpt2_context_logits(ctx));
    gpt2_context_free(ctx);
    gpt2_model_free(m);
}

#define MODEL_TESTS(setup_fn)                                                       \
    cmocka_unit_test_setup_teardown(test_matches_reference, setup_fn, teardown),    \
    cmocka_unit_test_setup_teardown(test_incremental_and_chunked, setup_fn, teardown), \
    cmocka_unit_test_setup_teardown(test_rewind_and_reset, setup_fn, teardown),     \
    cmocka_unit_test_setup_teardown(test_greedy_50, setup_fn, teardown),           \
    cmocka_unit_test_setup_teardown(test_threads_identical, setup_fn, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        MODEL_TESTS(setup_f32),
        MODEL_TESTS(setup_f16),
        MODEL_TESTS(setup_bf16),
        MODEL_TESTS(setup_prefix),
        MODEL_TESTS(setup_q8grid),
        MODEL_TESTS(setup_prefix_q8grid),
        MODEL_TESTS(setup_head64),
        cmocka_unit_test_setup_teardown(test_q8_drift, setup_f32, teardown),
        cmocka_unit_test_setup_teardown(test_q8_drift, setup_prefix, teardown),
        cmocka_unit_test_setup_teardown(test_hooks_filter, setup_f32, teardown),
        cmocka_unit_test_setup_teardown(test_hook_stack, setup_f32, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup_f16, teardown),
        cmocka_unit_test_setup_teardown(test_interrupt, setup_f32, teardown),
        cmocka_unit_test_setup_teardown(test_interrupt, setup_head64, teardown),
        cmocka_unit_test(test_nonfinite_weights),
        cmocka_unit_test_setup_teardown(test_context_limit, setup_f32, teardown),
        cmocka_unit_test(test_random_model),
        cmocka_unit_test(test_long_prefill_matches_decode),
        cmocka_unit_test(test_small_batch_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
