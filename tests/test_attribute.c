/* test_attribute.c — direct logit attribution (gpt2_attribute.h) against the
 * float64 reference written from its definition (tests/ref/attribute_ref.py,
 * on gpt2_ref.py's and decoder_ref.py's forward passes): every part of every
 * case, on GPT-2 models (F32, F16, 128 wide, exact GELU) and each decoder
 * family (Llama with GQA, an o_proj bias, MQA with llama3 rope scaling, BF16;
 * Qwen2's q/k/v biases, Qwen3's q/k norms, Mistral's window, GPT-NeoX
 * parallel and sequential), as Hugging Face directories and as GGUF files;
 * the sum against the model's own logit, also for 8-bit and block-format
 * weights; ablation, the reused cache, the caller's hooks, observation
 * leaving the logits' bits alone; bad input; and a known answer: the bundled
 * reverse model's mirror heads (layer 0) carry its answer.
 *
 * Tolerance. The engine runs in float32 and the reference in float64, so a
 * part differs by float32 rounding of the activations it is made from
 * (measured: under 4e-6 on logits up to 19, the largest |part| about 4).
 * Parts are compared relative to the logits' scale, max(1, max |logit| at
 * the position): TOL = 1e-4 of it, some 25 times the largest difference
 * seen, and far below any part that matters (a part of 1e-3 of the logits'
 * scale is invisible in the output). */
#include <math.h>

#include <cjson/cJSON.h>

#include "gpt2.h"
#include "test_util.h"

#define TOL 1e-4
/* 8-bit and block-format kernels quantize the activations they read (a few
 * positions at a time), which the heads' parts, made from the activations
 * themselves, do not: their sum then differs from the logit by that rounding,
 * measured up to 3e-5 of the logits' scale here (Q8, Q8_0, Q4_0, a Q4_K /
 * Q6_K mix). 1e-3 leaves room for other models and still catches a wrong
 * part (a mean taken under RMSNorm is off by 3e-2 of the scale). */
#define TOL_QUANT 1e-3

static gpt2_model *load_model(const char *path) {
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(path, &m, &err) != GPT2_OK) fail_msg("%s: %s", path, err.msg);
    return m;
}

static gpt2_context *new_ctx(const gpt2_model *m) {
    gpt2_context *ctx;
    gpt2_error err;
    if (gpt2_context_new(m, gpt2_context_default_params(), &ctx, &err) != GPT2_OK) fail_msg("%s", err.msg);
    return ctx;
}

static gpt2_attribution attribute_ok(gpt2_context *ctx, const int32_t *ids, int n, int pos, int target, int base) {
    gpt2_attribution a;
    gpt2_error err;
    gpt2_attribution_params p = {pos, target, base};
    if (gpt2_attribute(ctx, ids, n, p, &a, &err) != GPT2_OK) fail_msg("attribute: %s", err.msg);
    return a;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(o, key);
    if (!cJSON_IsNumber(v)) fail_msg("reference: no number %s", key);
    return v->valuedouble;
}

/* The largest |got - want| over a's parts against a reference case. */
static double compare(const gpt2_attribution *a, const cJSON *c) {
    double worst = 0;
#define SEE(g, w) worst = fmax(worst, fabs((g) - (w)))
    SEE(a->logit, num(c, "logit"));
    SEE(a->embed, num(c, "embed"));
    SEE(a->ln_f_bias, num(c, "ln_f_bias"));
    SEE(a->sum, num(c, "sum"));
    const cJSON *heads = cJSON_GetObjectItem(c, "heads"), *bias = cJSON_GetObjectItem(c, "attn_bias"),
                *mlp = cJSON_GetObjectItem(c, "mlp");
    assert_int_equal(cJSON_GetArraySize(heads), a->n_layer);
    for (int l = 0; l < a->n_layer; l++) {
        const cJSON *row = cJSON_GetArrayItem(heads, l);
        assert_int_equal(cJSON_GetArraySize(row), a->n_head);
        for (int h = 0; h < a->n_head; h++) SEE(a->heads[l * a->n_head + h], cJSON_GetArrayItem(row, h)->valuedouble);
        SEE(a->attn_bias[l], cJSON_GetArrayItem(bias, l)->valuedouble);
        SEE(a->mlp[l], cJSON_GetArrayItem(mlp, l)->valuedouble);
    }
#undef SEE
    /* the frozen scale is a property of x alone: relative */
    const double s = num(c, "scale");
    if (fabs(a->scale - s) > 1e-5 * s) fail_msg("scale %.9g, reference %.9g", a->scale, s);
    const char *norm = cJSON_GetObjectItem(c, "norm")->valuestring;
    assert_int_equal(a->rms_norm, strcmp(norm, "rms") == 0);
    return worst;
}

/* Every case of the reference file name.json on the model at path. */
static void check_model(const char *name, const char *path) {
    char *text = read_file(fixture_path("attribute/%s.json", name), NULL);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    assert_non_null(doc);
    const cJSON *jids = cJSON_GetObjectItem(doc, "ids");
    const int n = cJSON_GetArraySize(jids);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++) ids[i] = cJSON_GetArrayItem(jids, i)->valueint;
    gpt2_model *m = load_model(path);
    gpt2_context *ctx = new_ctx(m);
    double worst = 0, worst_sum = 0, scale = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases")) {
        const cJSON *b = cJSON_GetObjectItem(c, "baseline");
        const int pos = (int)num(c, "pos"), target = (int)num(c, "target"), base = cJSON_IsNull(b) ? -1 : b->valueint;
        const double tol = TOL * fmax(1.0, num(c, "logits_max_abs"));
        gpt2_attribution a = attribute_ok(ctx, ids, n, pos, target, base);
        assert_int_equal(a.pos, pos);
        assert_int_equal(a.target, target);
        assert_int_equal(a.baseline, base);
        const double d = compare(&a, c);
        if (d > tol) fail_msg("%s at %d: a part differs from the reference by %.3g (tolerance %.3g)", path, pos, d, tol);
        if (fabs(a.sum - a.logit) > tol) fail_msg("%s at %d: sum %.9g, logit %.9g", path, pos, a.sum, a.logit);
        worst = fmax(worst, d), worst_sum = fmax(worst_sum, fabs(a.sum - a.logit));
        scale = fmax(scale, a.logits_max_abs);
        if (base < 0 && pos == n - 1) { /* the default target: the model's top 1, the reference's */
            gpt2_attribution top = attribute_ok(ctx, ids, n, -1, -1, -1);
            const float *lg = gpt2_context_logits(ctx);
            for (int i = 0; i < gpt2_model_config(m)->n_vocab; i++) assert_true(lg[i] <= lg[top.target]);
            assert_int_equal(top.target, target);
            assert_int_equal(top.pos, n - 1);
            gpt2_attribution_free(&top);
        }
        gpt2_attribution_free(&a);
    }
    printf("  %-40s parts within %.2g of the reference, sum within %.2g of the logit (logits up to %.3g)\n",
           path + strlen(test_env("GPTSCOPE_FIXTURES")) + 1, worst, worst_sum, scale);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    free(ids);
    cJSON_Delete(doc);
}

static void test_vs_reference(void **state) {
    (void)state;
    char *tsv = read_file(fixture_path("attribute/cases.tsv"), NULL);
    int n = 0;
    for (char *line = strtok(tsv, "\n"); line; line = strtok(NULL, "\n"), n++) {
        char name[128], rel[512];
        if (sscanf(line, "%127s %511s", name, rel) != 2) fail_msg("attribute/cases.tsv: bad line '%s'", line);
        check_model(name, fixture_path("%s", rel));
    }
    free(tsv);
    assert_true(n >= 13);
    /* the same models as GGUF files (llama's q and k rows permuted, NeoX's qkv apart): the same parts */
    const char *gguf[][2] = {{"llama-gqa", "llama-gqa"},   {"llama-bias", "llama-bias"}, {"qwen2", "qwen2"},
                             {"qwen3", "qwen3"},           {"neox", "neox"},
                             {"llama-mqa-untied-rope3", "llama-mqa-untied-rope3"}};
    for (size_t i = 0; i < sizeof gguf / sizeof *gguf; i++)
        check_model(gguf[i][0], fixture_path("arch/gguf/%s.gguf", gguf[i][1]));
}

/* |sum - logit| for every position of ids, target the top 1 and a baseline. */
static double sum_error(gpt2_model *m, const int32_t *ids, int n, double *scale) {
    gpt2_context *ctx = new_ctx(m);
    double worst = 0;
    for (int pos = 0; pos < n; pos++) {
        /* odd positions: the token there against the first, a difference (where they differ) */
        const int odd = pos % 2 && ids[pos] != ids[0];
        gpt2_attribution a = attribute_ok(ctx, ids, n, pos, odd ? ids[pos] : -1, odd ? ids[0] : -1);
        worst = fmax(worst, fabs(a.sum - a.logit) / fmax(1.0, a.logits_max_abs));
        *scale = fmax(*scale, a.logits_max_abs);
        gpt2_attribution_free(&a);
    }
    gpt2_context_free(ctx);
    return worst;
}

static int32_t *fixture_ids(const char *rel, int *n) {
    char *text = read_file(fixture_path("%s", rel), NULL);
    size_t k;
    int32_t *ids = parse_ids(text, &k);
    free(text);
    *n = (int)k;
    return ids;
}

/* 8-bit and block-format weights: the parts still add up to the logit, to
 * the rounding of the activations those kernels quantize. */
static void test_quantized(void **state) {
    (void)state;
    int n;
    int32_t *ids = fixture_ids("ref/tiny-f32/tokens.txt", &n);
    const gpt2_dtype to[] = {GPT2_DTYPE_Q8, GPT2_DTYPE_Q8_0, GPT2_DTYPE_Q4_0};
    const char *names[] = {"q8", "q8_0", "q4_0"};
    for (size_t i = 0; i < sizeof to / sizeof *to; i++) {
        gpt2_model *m = load_model(fixture_path("models/tiny-f32"));
        gpt2_error err;
        if (gpt2_model_quantize(m, to[i], &err) != GPT2_OK) fail_msg("%s", err.msg);
        double scale = 0, e = sum_error(m, ids, n, &scale);
        printf("  tiny-f32 as %-5s |sum - logit| up to %.2g of the logits' scale (%.3g)\n", names[i], e, scale);
        assert_true(e < TOL_QUANT);
        gpt2_model_free(m);
    }
    free(ids);
    ids = fixture_ids("arch/ref/llama-gqa/ids.txt", &n);
    const char *files[] = {"llama-gqa-q8_0.gguf", "llama-gqa-mix.gguf", "llama-gqa-f16.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        gpt2_model *m = load_model(fixture_path("arch/gguf/%s", files[i]));
        double scale = 0, e = sum_error(m, ids, n, &scale);
        printf("  %-22s |sum - logit| up to %.2g of the logits' scale (%.3g)\n", files[i], e, scale);
        assert_true(e < (strstr(files[i], "f16") ? TOL : TOL_QUANT));
        gpt2_model_free(m);
    }
    free(ids);
}

/* An ablated head's part is 0; the others still add up to the (ablated) logit. */
static void test_ablation(void **state) {
    (void)state;
    int n;
    int32_t *ids = fixture_ids("ref/tiny-f32/tokens.txt", &n);
    gpt2_model *m = load_model(fixture_path("models/tiny-f32"));
    gpt2_context *ctx = new_ctx(m);
    const gpt2_config *c = gpt2_model_config(m);
    unsigned char *mask = calloc((size_t)c->n_layer * c->n_head, 1);
    mask[1] = 1;                                              /* 0.1 */
    for (int h = 0; h < c->n_head; h++) mask[c->n_head + h] = 1; /* 1.* */
    gpt2_error err;
    gpt2_attribution plain = attribute_ok(ctx, ids, n, -1, -1, -1);
    assert_int_equal(gpt2_context_set_ablation(ctx, mask, &err), GPT2_OK);
    gpt2_attribution a = attribute_ok(ctx, ids, n, -1, plain.target, -1);
    for (int i = 0; i < c->n_layer * c->n_head; i++)
        if (mask[i]) assert_true(a.heads[i] == 0.0);
        else assert_true(a.heads[0] != 0.0);
    assert_true(fabs(a.sum - a.logit) < TOL * fmax(1, a.logits_max_abs));
    assert_true(fabs(a.logit - plain.logit) > 1e-3); /* the ablation changed the logit */
    gpt2_attribution_free(&a), gpt2_attribution_free(&plain);
    free(mask);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    free(ids);
}

typedef struct {
    int residual, logits, attention;
} counts;
static void count_resid(void *ud, int l, int pos, const float *x, int n) { ((counts *)ud)->residual++; }
static void count_attn(void *ud, int l, int h, int pos, const float *p, int n) { ((counts *)ud)->attention++; }
static void count_logits(void *ud, int pos, const float *x, int n) { ((counts *)ud)->logits++; }

/* The cache is reused up to the first difference, the context ends holding
 * tokens[0..pos], the caller's hooks see the evaluation and stay set, and
 * the result does not depend on what the cache held. */
static void test_cache_and_hooks(void **state) {
    (void)state;
    int n;
    int32_t *ids = fixture_ids("ref/tiny-f32/tokens.txt", &n);
    gpt2_model *m = load_model(fixture_path("models/tiny-f32"));
    gpt2_context *fresh = new_ctx(m), *ctx = new_ctx(m);
    counts k = {0};
    gpt2_hooks h = {.user_data = &k, .on_residual = count_resid, .on_attention = count_attn, .on_logits = count_logits};
    gpt2_context_set_hooks(ctx, &h);
    eval_ok(ctx, ids, n); /* the whole text in the cache */
    const int pos = n / 2, L = gpt2_model_config(m)->n_layer, H = gpt2_model_config(m)->n_head;
    k = (counts){0};
    gpt2_attribution a = attribute_ok(ctx, ids, n, pos, -1, -1);
    assert_int_equal(gpt2_context_n_past(ctx), pos + 1);
    assert_int_equal(gpt2_context_hooks_depth(ctx), 1);
    /* only position pos was evaluated again, and the caller's hooks saw it */
    assert_int_equal(k.residual, L);
    assert_int_equal(k.attention, L * H);
    assert_int_equal(k.logits, 1);
    gpt2_attribution b = attribute_ok(fresh, ids, n, pos, -1, -1);
    assert_int_equal(a.target, b.target);
    const double tol = TOL * fmax(1, a.logits_max_abs);
    assert_true(fabs(a.logit - b.logit) < tol && fabs(a.sum - b.sum) < tol && fabs(a.embed - b.embed) < tol);
    for (int i = 0; i < L * H; i++) assert_true(fabs(a.heads[i] - b.heads[i]) < tol);
    for (int l = 0; l < L; l++) assert_true(fabs(a.mlp[l] - b.mlp[l]) < tol);
    /* a different token before pos: evaluated again from there */
    int32_t *other = malloc((size_t)n * sizeof *other);
    memcpy(other, ids, (size_t)n * sizeof *other);
    other[2] = (other[2] + 1) % gpt2_model_config(m)->n_vocab;
    k = (counts){0};
    gpt2_attribution_free(&a);
    a = attribute_ok(ctx, other, n, pos, -1, -1);
    assert_int_equal(k.residual, L * (pos + 1 - 2));
    assert_memory_equal(gpt2_context_tokens(ctx), other, (size_t)(pos + 1) * sizeof *other);
    gpt2_attribution_free(&a), gpt2_attribution_free(&b);
    free(other);
    gpt2_context_free(ctx), gpt2_context_free(fresh);
    gpt2_model_free(m);
    free(ids);
}

/* Observing the parts leaves every logit's bits as they were. */
static void on_embed(void *ud, int pos, const float *x, int n) { ((counts *)ud)->residual++; }
static void on_values(void *ud, int l, int pos, const float *z, int nh, int hd) { ((counts *)ud)->attention++; }
static void on_mlp(void *ud, int l, int pos, const float *y, int n) { ((counts *)ud)->logits++; }
static int odd_layers(void *ud, int l) { return l % 2; }

static void test_observation_exact(void **state) {
    (void)state;
    const char *models[] = {"models/tiny-f32", "arch/models/neox", "arch/models/qwen3"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        int n;
        int32_t *ids = fixture_ids(i ? "arch/ref/neox/ids.txt" : "ref/tiny-f32/tokens.txt", &n);
        gpt2_model *m = load_model(fixture_path("%s", models[i]));
        const int V = gpt2_model_config(m)->n_vocab, L = gpt2_model_config(m)->n_layer;
        for (int split = 1; split <= n; split += n - 1) { /* prefill in one batch, then decode */
            gpt2_context *plain = new_ctx(m), *seen = new_ctx(m);
            counts k = {0};
            gpt2_hooks h = {.user_data = &k, .on_embed = on_embed, .on_head_values = on_values,
                            .on_mlp_out = on_mlp, .want_mlp_out = odd_layers};
            gpt2_context_set_hooks(seen, &h);
            for (int at = 0; at < n; at += split) {
                const int t = at + split < n ? split : n - at;
                eval_ok(plain, ids + at, t), eval_ok(seen, ids + at, t);
                assert_memory_equal(gpt2_context_logits(plain), gpt2_context_logits(seen), (size_t)V * sizeof(float));
            }
            assert_int_equal(k.residual, n);
            assert_int_equal(k.attention, n * L);
            assert_int_equal(k.logits, n * (L / 2));
            gpt2_context_free(plain), gpt2_context_free(seen);
        }
        gpt2_model_free(m);
        free(ids);
    }
}

static void expect_fail(gpt2_context *ctx, const int32_t *ids, int n, gpt2_attribution_params p, gpt2_status want,
                        const char *msg) {
    gpt2_attribution a;
    memset(&a, 0x55, sizeof a);
    gpt2_error err;
    const int before = gpt2_context_n_past(ctx);
    assert_int_equal(gpt2_attribute(ctx, ids, n, p, &a, &err), want);
    if (!strstr(err.msg, msg)) fail_msg("message '%s' lacks '%s'", err.msg, msg);
    assert_null(a.heads);
    assert_int_equal(gpt2_context_n_past(ctx), before); /* nothing evaluated */
}

static void test_bad_input(void **state) {
    (void)state;
    gpt2_model *m = load_model(fixture_path("models/tiny-f32"));
    gpt2_context *ctx = new_ctx(m);
    int32_t ids[4] = {1, 2, 3, 4};
    eval_ok(ctx, ids, 4);
    gpt2_attribution_params d = gpt2_attribution_default_params();
    assert_int_equal(d.pos, -1), assert_int_equal(d.target, -1), assert_int_equal(d.baseline, -1);
    expect_fail(ctx, ids, 0, d, GPT2_ERR_INVALID_ARG, "no tokens: at least one is needed");
    expect_fail(ctx, NULL, 4, d, GPT2_ERR_INVALID_ARG, "no tokens");
    expect_fail(ctx, ids, 4, (gpt2_attribution_params){4, -1, -1}, GPT2_ERR_INVALID_ARG,
                "position 4 is outside the 4 tokens (0..3)");
    expect_fail(ctx, ids, 4, (gpt2_attribution_params){-2, -1, -1}, GPT2_ERR_INVALID_ARG,
                "position -2 is outside the 4 tokens (0..3)");
    expect_fail(ctx, ids, 4, (gpt2_attribution_params){-1, 507, -1}, GPT2_ERR_INVALID_ARG,
                "target token 507 is outside the vocabulary of model tiny-f32 (0..506)");
    expect_fail(ctx, ids, 4, (gpt2_attribution_params){-1, 3, -5}, GPT2_ERR_INVALID_ARG,
                "baseline token -5 is outside the vocabulary");
    expect_fail(ctx, ids, 4, (gpt2_attribution_params){-1, 9, 9}, GPT2_ERR_INVALID_ARG,
                "the target and the baseline are the same token (9)");
    int32_t bad[3] = {1, 9999, 2};
    expect_fail(ctx, bad, 3, d, GPT2_ERR_INVALID_ARG,
                "token 9999 (at index 1) is outside the vocabulary of model tiny-f32 (0..506)");
    int32_t *many = calloc(100, sizeof *many); /* tiny-f32 holds 64 positions */
    expect_fail(ctx, many, 100, d, GPT2_ERR_CONTEXT_FULL, "position 99 is past the context of 64 positions");
    free(many);
    gpt2_error err;
    gpt2_attribution a;
    assert_int_equal(gpt2_attribute(NULL, ids, 4, d, &a, &err), GPT2_ERR_INVALID_ARG);
    assert_int_equal(gpt2_attribute(ctx, ids, 4, d, NULL, &err), GPT2_ERR_INVALID_ARG);
    gpt2_attribution_free(NULL);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
}

/* The bundled reverse model writes a list backwards; layer 0's heads look
 * from each reply token to the prompt token to copy (docs/microscope.md). By
 * attribution they are the ones that write the answer: at every reply
 * position the two largest head parts are layer 0's, and layer 0's heads
 * together give at least 40% of the logit. */
static void test_reverse_mirror_heads(void **state) {
    (void)state;
    gpt2_model *m = load_model("models/reverse");
    gpt2_context *ctx = new_ctx(m);
    const char *texts[] = {"12 7 99 3 45 0 8 61 61 8 0 45 3 99 7 12", "30 75 69 16 47 77 60 80 80 60 77 47 16 69 75 30",
                           "85 99 8 20 97 75 5 38 38 5 75 97 20 8 99 85"};
    const int H = gpt2_model_config(m)->n_head;
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        int32_t *ids;
        size_t n;
        gpt2_error err;
        assert_int_equal(gpt2_tokenizer_encode(gpt2_model_tokenizer(m), texts[t], strlen(texts[t]), 0, &ids, &n, &err),
                         GPT2_OK);
        assert_int_equal(n, 16);
        for (int pos = 8; pos < 15; pos++) {
            gpt2_attribution a = attribute_ok(ctx, ids, (int)n, pos, -1, -1);
            assert_int_equal(a.target, ids[pos + 1]); /* the model writes the reversed list */
            int first = -1, second = -1;
            for (int i = 0; i < a.n_layer * H; i++) {
                if (first < 0 || fabs(a.heads[i]) > fabs(a.heads[first])) second = first, first = i;
                else if (second < 0 || fabs(a.heads[i]) > fabs(a.heads[second])) second = i;
            }
            double layer0 = 0;
            for (int h = 0; h < H; h++) layer0 += a.heads[h];
            if (first / H != 0 || second / H != 0 || layer0 < 0.4 * a.logit)
                fail_msg("'%s' at %d: largest heads %d.%d and %d.%d, layer 0's share %.2f", texts[t], pos, first / H,
                         first % H, second / H, second % H, layer0 / a.logit);
            gpt2_attribution_free(&a);
        }
        free(ids);
    }
    gpt2_context_free(ctx);
    gpt2_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vs_reference),      cmocka_unit_test(test_quantized),
        cmocka_unit_test(test_ablation),          cmocka_unit_test(test_cache_and_hooks),
        cmocka_unit_test(test_observation_exact), cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_reverse_mirror_heads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
