/* test_gguf.c — GGUF files and GGUF's block formats against the independent
 * Python writer (tests/ref/gguf_write.py, fixtures in build/fixtures/gguf):
 * dequantized blocks bit for bit, the Q8_0/Q4_0/Q4_K quantizers byte for
 * byte, the integer dot products within the input's rounding, every fixture
 * model's logits against the reference on its dequantized weights (prefill
 * and decode) and against its source model (F32/F16/BF16 GGUF: the same
 * bits as the safetensors model), results independent of the thread count,
 * the tokenizer from GGUF metadata against vocab.json's and GPT-2's, and a
 * one-line error naming the file and the defect for every hostile file. */
#include <math.h>

#include "core/quant.h"
#include "core/kernels.h"
#include "core/safetensors.h"
#include "gpt2.h"
#include "test_util.h"

/* --- blocks ------------------------------------------------------------------ */

static const gpt2_dtype block_types[] = {GPT2_DTYPE_Q8_0, GPT2_DTYPE_Q4_0, GPT2_DTYPE_Q4_1, GPT2_DTYPE_Q5_0,
                                         GPT2_DTYPE_Q5_1, GPT2_DTYPE_Q4_K, GPT2_DTYPE_Q5_K, GPT2_DTYPE_Q6_K};
enum { N_BLOCK_TYPES = sizeof block_types / sizeof *block_types };

static void test_dequantize_bit_exact(void **state) {
    (void)state;
    for (int i = 0; i < N_BLOCK_TYPES; i++) {
        const quant_format *f = quant_format_of(block_types[i]);
        size_t nb, nf;
        unsigned char *blocks = read_file(fixture_path("gguf/blocks/%s.bin", f->name), &nb);
        float *want = read_file(fixture_path("gguf/blocks/%s.f32", f->name), &nf);
        const int n = (int)(nb / (size_t)f->block_bytes) * f->block;
        assert_int_equal(nf, (size_t)n * sizeof(float));
        float *got = malloc(nf);
        quant_dequantize_row(block_types[i], blocks, got, n);
        for (int k = 0; k < n; k++)
            if (memcmp(&got[k], &want[k], 4) != 0)
                fail_msg("%s element %d: %.9g, the Python dequantizer %.9g", f->name, k, got[k], want[k]);
        free(blocks), free(want), free(got);
    }
}

static void test_quantize_rows(void **state) {
    (void)state;
    const gpt2_dtype types[] = {GPT2_DTYPE_Q8_0, GPT2_DTYPE_Q4_0, GPT2_DTYPE_Q4_K};
    for (int i = 0; i < 3; i++) {
        const quant_format *f = quant_format_of(types[i]);
        assert_true(quant_can_quantize(types[i]));
        size_t nx, nb;
        float *x = read_file(fixture_path("gguf/quant/%s.in.f32", f->name), &nx);
        unsigned char *want = read_file(fixture_path("gguf/quant/%s.bin", f->name), &nb);
        const int rows = 8, n = (int)(nx / sizeof(float)) / rows;
        const size_t rb = quant_row_bytes(types[i], (size_t)n);
        assert_int_equal(nb, rows * rb);
        unsigned char *got = malloc(nb);
        for (int r = 0; r < rows; r++) quant_quantize_row(types[i], x + (size_t)r * n, got + r * rb, n);
        for (size_t k = 0; k < nb; k++)
            if (got[k] != want[k])
                fail_msg("%s: byte %zu (row %zu, block %zu, byte %zu of it) is 0x%02x, the Python quantizer's 0x%02x",
                         f->name, k, k / rb, k % rb / (size_t)f->block_bytes, k % (size_t)f->block_bytes, got[k], want[k]);
        free(x), free(want), free(got);
    }
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) { /* [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* The input quantizers: the vector paths' bytes are the portable loop's, for
 * ordinary values, values on the rounding ties, extremes, zeros, NaN, Inf. */
static void test_input_quantizer(void **state) {
    (void)state;
    enum { N = 32 * 40 };
    float *x = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) {
        const int blk = i / 32;
        x[i] = (float)uniform() * (blk % 5 == 1 ? 1e-30f : blk % 5 == 2 ? 1e30f : 3.0f);
        if (blk == 3) x[i] = i % 32 == 0 ? 32639.0f : (float)(i % 32) - 16.5f; /* rint's ties */
        if (blk == 4) x[i] = 0.0f;
        if (blk == 5 && i % 32 == 7) x[i] = NAN;
        if (blk == 6 && i % 32 == 9) x[i] = -INFINITY;
        if (blk == 7) x[i] = i % 2 ? 1e-45f : -1e-45f; /* subnormal */
    }
    const size_t bytes = (quant_x_bytes(N) + 63) & ~(size_t)63;
    void *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
    memset(a, 0, bytes), memset(b, 0, bytes);
    quant_x xa, xb;
    quant_x_set(&xa, a, x, N);
    quant_x_set_ref(&xb, b, x, N);
    assert_memory_equal(xa.q, xb.q, N * sizeof(int16_t));
    assert_memory_equal(xa.hi, xb.hi, N);
    assert_memory_equal(xa.lo, xb.lo, N);
    assert_memory_equal(xa.sum16, xb.sum16, N / 16 * sizeof(int32_t));
    assert_memory_equal(xa.sum, xb.sum, N / 32 * sizeof(int32_t));
    for (int k = 0; k < N / 32; k++) { /* NaN != NaN: compare the bits */
        assert_memory_equal(&xa.d[k], &xb.d[k], 4);
        assert_memory_equal(&xa.ds[k], &xb.ds[k], 4);
    }
    for (int i = 0; i < N; i++) assert_int_equal(xa.q[i], 256 * xa.hi[i] + xa.lo[i]);
    /* the pair panels' quantizer: the same q and d (all it sets) */
    memset(a, 0x5a, bytes);
    quant_x_set_q16(&xa, a, x, N);
    assert_memory_equal(xa.q, xb.q, N * sizeof(int16_t));
    assert_memory_equal(xa.d, xb.d, N / 32 * sizeof(float));
    free(x), free(a), free(b);
}

/* quant_dot against the exact product of the dequantized row with x: the
 * difference is the input's rounding, at most d_b / 2 per element of block b,
 * so |error| <= sum_b d_b / 2 * sum_{i in b} |w_i|, plus float rounding. */
static void test_dot_products(void **state) {
    (void)state;
    for (int i = 0; i < N_BLOCK_TYPES; i++) {
        const quant_format *f = quant_format_of(block_types[i]);
        size_t nb;
        unsigned char *blocks = read_file(fixture_path("gguf/blocks/%s.bin", f->name), &nb);
        const int n = 512, rows = (int)(nb / (size_t)f->block_bytes) * f->block / n;
        const size_t rb = quant_row_bytes(block_types[i], n);
        float *w = malloc((size_t)n * sizeof(float)), *x = malloc((size_t)n * sizeof(float));
        void *buf = aligned_alloc(64, (quant_x_bytes(n) + 63) & ~(size_t)63);
        for (int kind = 0; kind < 4; kind++)
            for (int r = 0; r < rows; r++) {
                for (int k = 0; k < n; k++) /* plain, an outlier per block, tiny, all equal */
                    x[k] = kind == 0 ? (float)uniform() : kind == 1 ? (float)(k % 32 == 5 ? 40 * uniform() : uniform())
                         : kind == 2 ? (float)(1e-30 * uniform()) : 0.75f;
                quant_x xq;
                quant_x_set(&xq, buf, x, n);
                quant_dequantize_row(block_types[i], blocks + (size_t)r * rb, w, n);
                double exact = 0, bound = 0, mag = 0;
                for (int b = 0; b < n / 32; b++) {
                    double sw = 0, amax = 0;
                    for (int k = 32 * b; k < 32 * b + 32; k++) {
                        exact += (double)w[k] * x[k];
                        sw += fabs(w[k]);
                        mag += fabs((double)w[k] * x[k]);
                        amax = fmax(amax, fabs(x[k]));
                    }
                    bound += (amax < 1e-30 ? amax : xq.d[b] / 2.0) * sw; /* quant.h: a tiny block is zero */
                }
                for (int ref = 0; ref < 2; ref++) {
                    const double got = (ref ? quant_dot_ref : quant_dot)(block_types[i], blocks + (size_t)r * rb, &xq);
                    if (!(fabs(got - exact) <= bound * 1.0001 + 2e-6 * mag + 1e-30))
                        fail_msg("%s row %d input %d: dot%s %.9g, exact %.9g, allowed error %.3g", f->name, r, kind,
                                 ref ? " (reference)" : "", got, exact, bound * 1.0001 + 2e-6 * mag);
                }
            }
        free(blocks), free(w), free(x), free(buf);
    }
}

/* The interleaved layout (quant.h, x8): each row dequantized from it gives
 * the plain row's floats bit for bit (and a whole group, all eight rows), the
 * padding rows of a last partial group are zero, and its 8-row dot products
 * (kernel and reference) stay within the input's rounding of the exact ones. */
static void test_x8_layout(void **state) {
    (void)state;
    for (int i = 0; i < N_BLOCK_TYPES; i++) {
        const gpt2_dtype dt = block_types[i];
        if (!quant_x8(dt)) continue;
        const quant_format *f = quant_format_of(dt);
        unsigned char *blocks = read_file(fixture_path("gguf/blocks/%s.bin", f->name), NULL);
        const int K = 256, rows_avail = 64 * f->block / K;
        for (int N = rows_avail - 1; N <= rows_avail; N++) {
            const size_t rb = quant_row_bytes(dt, K);
            unsigned char *x8 = malloc(quant_x8_bytes(dt, N, K));
            quant_x8_pack(dt, blocks, N, K, x8);
            float *want = malloc(K * sizeof(float)), *got = malloc(8 * K * sizeof(float)), *x = malloc(K * sizeof(float));
            void *buf = aligned_alloc(64, (quant_x_bytes(K) + 63) & ~(size_t)63);
            for (int k = 0; k < K; k++) x[k] = (float)uniform() * (k % 32 == 3 ? 30.0f : 1.0f);
            quant_x xq;
            quant_x_set(&xq, buf, x, K);
            for (int g = 0; g < (N + 7) / 8; g++) {
                const unsigned char *grp = x8 + (size_t)g * quant_x8_group_bytes(dt, K);
                float all[8 * 256], o8[8], r8[8];
                quant_x8_dequantize(dt, grp, K, -1, all);
                quant_x8_dot(dt, grp, &xq, o8);
                quant_x8_dot_ref(dt, grp, &xq, r8);
                for (int r = 0; r < 8; r++) {
                    const int n = 8 * g + r;
                    quant_x8_dequantize(dt, grp, K, r, got);
                    if (n < N) quant_dequantize_row(dt, blocks + (size_t)n * rb, want, K);
                    else memset(want, 0, K * sizeof(float));
                    for (int k = 0; k < K && n >= N; k++) /* 0 * (q - 8) may be -0 */
                        assert_true(got[k] == 0.0f && all[(size_t)r * K + k] == 0.0f);
                    if (n >= N) continue;
                    assert_memory_equal(got, want, K * sizeof(float));
                    assert_memory_equal(all + (size_t)r * K, want, K * sizeof(float));
                    double exact = 0, bound = 0, mag = 0;
                    for (int k = 0; k < K; k++) {
                        exact += (double)want[k] * x[k];
                        mag += fabs((double)want[k] * x[k]);
                        bound += xq.d[k / 32] / 2.0 * fabs(want[k]);
                    }
                    const double tol = bound * 1.0001 + 2e-6 * mag + 1e-30;
                    if (!(fabs(o8[r] - exact) <= tol && fabs(r8[r] - exact) <= tol))
                        fail_msg("%s x8 row %d: dot %.9g (reference %.9g), exact %.9g, allowed %.3g", f->name, n, o8[r],
                                 r8[r], exact, tol);
                }
            }
            free(x8), free(want), free(got), free(x), free(buf);
        }
        free(blocks);
    }
}

/* --- models ------------------------------------------------------------------------ */

typedef struct {
    char name[64], source[64], type[16];
    int version;
    double err;                 /* max |logit(deq) - logit(src)| the Python reference found */
} model_case;

static int read_cases(model_case *cases, int max) {
    char *text = read_file(fixture_path("gguf/cases.tsv"), NULL), *save = NULL;
    int n = 0;
    for (char *line = strtok_r(text, "\n", &save); line && n < max; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') continue;
        model_case *c = &cases[n];
        if (sscanf(line, "%63s %63s %15s %d %lf", c->name, c->source, c->type, &c->version, &c->err) == 5) n++;
    }
    free(text);
    return n;
}

typedef struct {
    float *logits; /* (T, V) */
    int V;
} capture;

static void on_logits(void *ud, int pos, const float *x, int n) {
    capture *c = ud;
    assert_int_equal(n, c->V);
    memcpy(c->logits + (size_t)pos * n, x, (size_t)n * sizeof(float));
}

/* Logits at every position: one batch (prefill, sgemm) or one token at a
 * time (decode, the integer dot products). */
static float *run(const gpt2_model *m, const int32_t *ids, int T, int batch, int threads) {
    const int V = gpt2_model_config(m)->n_vocab;
    gpt2_context_params p = gpt2_context_default_params();
    p.n_threads = threads;
    gpt2_context *ctx;
    gpt2_error err;
    if (gpt2_context_new(m, p, &ctx, &err) != GPT2_OK) fail_msg("%s", err.msg);
    capture c = {calloc((size_t)T * V, sizeof(float)), V};
    gpt2_hooks h = {.user_data = &c, .on_logits = on_logits};
    gpt2_context_set_hooks(ctx, &h);
    for (int t = 0; t < T; t += batch)
        if (gpt2_context_eval(ctx, ids + t, T - t < batch ? T - t : batch, &err) != GPT2_OK) fail_msg("%s", err.msg);
    gpt2_context_free(ctx);
    return c.logits;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

static gpt2_model *load(const char *path) {
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(path, &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    return m;
}

static int32_t *fixture_tokens(int *T) {
    char *text = read_file(fixture_path("gguf/tokens.txt"), NULL), *p = text;
    int32_t *ids = malloc(64 * sizeof *ids);
    int n = 0, len;
    while (n < 64 && sscanf(p, "%d%n", &ids[n], &len) == 1) p += len, n++;
    free(text);
    *T = n;
    return ids;
}

/* Decode rounds its input to 16 bits per block of 32 (quant.h): its logits
 * move from the float reference by up to 1.4e-3 on these models (|logits|
 * up to 11; the test prints each), so 5e-3. Prefill is float32 sgemm on the
 * dequantized rows, as exact as an F32 model. */
#define TOL_DECODE_Q 5e-3
#define TOL_PREFILL 3e-4

static void check_model(const model_case *c, const int32_t *ids, int T) {
    gpt2_model *m = load(fixture_path("gguf/%s.gguf", c->name));
    const int V = gpt2_model_config(m)->n_vocab, quantized = c->type[0] == 'Q';
    size_t n;
    float *deq = read_file(fixture_path("gguf/ref/%s/logits_deq.f32", c->name), &n);
    float *src = read_file(fixture_path("gguf/ref/%s/logits_src.f32", c->name), NULL);
    assert_int_equal(n, (size_t)T * V * sizeof(float));
    float *pre = run(m, ids, T, T, 2), *dec = run(m, ids, T, 1, 2);
    const double e_pre = max_diff(pre, deq, (size_t)T * V), e_dec = max_diff(dec, deq, (size_t)T * V);
    const double e_src = max_diff(dec, src, (size_t)T * V);
    print_message("%-24s prefill %.2e, decode %.2e off the dequantized reference; decode %.3g off the source "
                  "(reference %.3g)\n", c->name, e_pre, e_dec, e_src, c->err);
    if (!(e_pre < TOL_PREFILL)) fail_msg("%s: prefill logits %.3g off the reference", c->name, e_pre);
    if (!(e_dec < (quantized ? TOL_DECODE_Q : TOL_PREFILL)))
        fail_msg("%s: decode logits %.3g off the reference", c->name, e_dec);
    if (!(e_src < c->err + (quantized ? TOL_DECODE_Q : TOL_PREFILL)))
        fail_msg("%s: decode logits %.3g off the source model's", c->name, e_src);
    /* the bytes a decoded token reads, as the writer counts them from what it wrote */
    char *tb = read_file(fixture_path("gguf/ref/%s/token_bytes.txt", c->name), NULL);
    if (gpt2_model_token_bytes(m) != strtoull(tb, NULL, 10))
        fail_msg("%s: %zu bytes read per token, the reference counts %s", c->name, gpt2_model_token_bytes(m), tb);
    free(tb);
    gpt2_model *st = !quantized && strstr(c->source, "k256") == NULL ? load(fixture_path("models/%s", c->source)) : NULL;
    if (st && gpt2_model_dtype(st) == gpt2_model_dtype(m)) { /* the same bits as the safetensors model it came from */
        float *a = run(st, ids, T, T, 2), *b = run(st, ids, T, 1, 2);
        assert_memory_equal(a, pre, (size_t)T * V * sizeof(float));
        assert_memory_equal(b, dec, (size_t)T * V * sizeof(float));
        free(a), free(b);
    }
    gpt2_model_free(st);
    free(pre), free(dec), free(deq), free(src);
    gpt2_model_free(m);
}

static void test_models(void **state) {
    (void)state;
    model_case cases[64];
    int T, n = read_cases(cases, 64);
    assert_true(n >= 16);
    int32_t *ids = fixture_tokens(&T);
    for (int i = 0; i < n; i++) check_model(&cases[i], ids, T);
    free(ids);
}

/* The config and tensors as the metadata says; a mixed file's matrices keep their own formats. */
static void test_model_shape(void **state) {
    (void)state;
    gpt2_model *m = load(fixture_path("gguf/tiny-k256.q4_k_m.gguf"));
    const gpt2_config *c = gpt2_model_config(m);
    assert_int_equal(c->n_layer, 2);
    assert_int_equal(c->n_embd, 256);
    assert_int_equal(c->n_head, 4);
    assert_int_equal(c->n_ctx, 64);
    assert_int_equal(c->n_vocab, 507);
    assert_string_equal(gpt2_model_name(m), "tiny-k256.q4_k_m.gguf");
    assert_int_equal(gpt2_model_dtype(m), GPT2_DTYPE_Q6_K); /* the embedding's */
    gpt2_model_free(m);
    m = load(fixture_path("gguf/tiny-prefix-lmhead.q8_0.gguf"));
    assert_true(fabsf(gpt2_model_config(m)->ln_eps - 1e-3f) < 1e-9f);
    gpt2_model_free(m);
}

/* Any thread count, the same bits; up to 16 positions at once, the same bits as one by one. */
static void test_threads_identical(void **state) {
    (void)state;
    const char *names[] = {"tiny-k256.q4_k_m", "tiny-f32.q5_1", "tiny-f32.q4_0"};
    int T;
    int32_t *ids = fixture_tokens(&T);
    for (int i = 0; i < 3; i++) {
        gpt2_model *m = load(fixture_path("gguf/%s.gguf", names[i]));
        const size_t n = (size_t)T * gpt2_model_config(m)->n_vocab * sizeof(float);
        float *pre1 = run(m, ids, T, T, 1), *dec1 = run(m, ids, T, 1, 1), *batch = run(m, ids, T, 8, 1);
        assert_memory_equal(dec1, batch, n);
        for (int nt = 2; nt <= 3; nt++) {
            float *pre = run(m, ids, T, T, nt), *dec = run(m, ids, T, 1, nt);
            assert_memory_equal(pre1, pre, n);
            assert_memory_equal(dec1, dec, n);
            free(pre), free(dec);
        }
        free(pre1), free(dec1), free(batch);
        gpt2_model_free(m);
    }
    free(ids);
}

/* gpt2_model_quantize to a block format gives, bit for bit, the weights the
 * Python quantizer wrote into a GGUF file (the same algorithm, written twice),
 * so the same logits; a model already quantized is refused. */
static void test_quantize_model(void **state) {
    (void)state;
    const struct { const char *src, *gguf; gpt2_dtype to; } cases[] = {
        {"models/tiny-f32", "gguf/tiny-f32.q4_0.gguf", GPT2_DTYPE_Q4_0},
        {"models/tiny-f32", "gguf/tiny-f32.q8_0.gguf", GPT2_DTYPE_Q8_0},
        {"gguf/models/tiny-k256", "gguf/tiny-k256.q4_k.gguf", GPT2_DTYPE_Q4_K},
    };
    int T;
    int32_t *ids = fixture_tokens(&T);
    for (int i = 0; i < 3; i++) {
        gpt2_model *a = load(fixture_path("%s", cases[i].src)), *b = load(fixture_path("%s", cases[i].gguf));
        gpt2_error err;
        assert_int_equal(gpt2_model_quantize(a, cases[i].to, &err), GPT2_OK);
        assert_int_equal(gpt2_model_dtype(a), cases[i].to);
        assert_int_equal(gpt2_model_quantize(a, cases[i].to, &err), GPT2_OK); /* already: nothing to do */
        assert_true(gpt2_model_weight_bytes(a) <= gpt2_model_weight_bytes(b) + 64 * 12);
        const size_t n = (size_t)T * gpt2_model_config(a)->n_vocab * sizeof(float);
        for (int batch = 1; batch <= T; batch += T - 1) {
            float *x = run(a, ids, T, batch, 2), *y = run(b, ids, T, batch, 2);
            assert_memory_equal(x, y, n);
            free(x), free(y);
        }
        assert_int_equal(gpt2_model_quantize(b, GPT2_DTYPE_Q4_K, &err), GPT2_ERR_INVALID_ARG);
        assert_non_null(strstr(err.msg, "already quantized"));
        gpt2_model_free(a), gpt2_model_free(b);
    }
    free(ids);
}

/* --- tokenizer ----------------------------------------------------------------------- */

static int hexval(int c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

/* Every line "hex(text)<TAB>ids" of a tokenizer fixture, encoded by tok. */
static void check_tsv(const gpt2_tokenizer *tok, const char *name) {
    char *text = read_file(fixture_path("tokenizer/%s", name), NULL), *save = NULL;
    int n_cases = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *tab = strchr(line, '\t');
        if (line[0] == '#' || !tab) continue;
        size_t len = (size_t)(tab - line) / 2, n_ids, n_want = 0;
        char *s = malloc(len + 1);
        for (size_t i = 0; i < len; i++) s[i] = (char)(hexval(line[2 * i]) << 4 | hexval(line[2 * i + 1]));
        int32_t *ids, want[4096];
        for (char *p = tab + 1, *end; n_want < 4096 && (want[n_want] = (int32_t)strtol(p, &end, 10), end != p); p = end)
            n_want++;
        gpt2_error err;
        if (gpt2_tokenizer_encode(tok, s, len, 0, &ids, &n_ids, &err) != GPT2_OK) fail_msg("%s", err.msg);
        if (n_ids != n_want || (n_ids && memcmp(ids, want, n_ids * sizeof *ids) != 0))
            fail_msg("%s line %d: %zu ids, expected %zu", name, n_cases + 1, n_ids, n_want);
        free(ids), free(s);
        n_cases++;
    }
    assert_true(n_cases >= 3000);
    free(text);
}

static void test_tokenizer(void **state) {
    (void)state;
    gpt2_model *m = load(fixture_path("gguf/tiny-f32.q8_0.gguf"));
    check_tsv(gpt2_model_tokenizer(m), "tiny_py.tsv");
    assert_int_equal(gpt2_tokenizer_eot(gpt2_model_tokenizer(m)), 506);
    gpt2_model_free(m);
    m = load(fixture_path("gguf/gpt2tok.gguf"));
    assert_int_equal(gpt2_tokenizer_n_vocab(gpt2_model_tokenizer(m)), 50257);
    assert_int_equal(gpt2_tokenizer_eot(gpt2_model_tokenizer(m)), 50256);
    check_tsv(gpt2_model_tokenizer(m), "gpt2_py.tsv");
    gpt2_model_free(m);
}

/* --- hostile files -------------------------------------------------------------------- */

static void test_hostile(void **state) {
    (void)state;
    char *text = read_file(fixture_path("gguf/bad/cases.tsv"), NULL), *save = NULL;
    int n = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
        char *tab = strchr(line, '\t');
        assert_non_null(tab);
        *tab = '\0';
        const char *path = fixture_path("gguf/bad/%s.gguf", line), *keyword = tab + 1;
        gpt2_model *m = NULL;
        gpt2_error err;
        gpt2_status st = gpt2_model_load(path, &m, &err);
        if (st == GPT2_OK) fail_msg("%s: loaded", line);
        assert_null(m);
        if (!strstr(err.msg, path) || !strstr(err.msg, keyword) || strchr(err.msg, '\n'))
            fail_msg("%s: message \"%s\" should name the file and say '%s' on one line", line, err.msg, keyword);
    }
    assert_true(n >= 50);
    free(text);
}

/* convert of every fixture model (dequantized to F32 where quantized): each
 * tensor the file holds, bit for bit as the Python dequantizer decodes it, and
 * the converted directory loads to logits within the 16-bit input rounding. */
static void test_convert_dequantized(void **state) {
    (void)state;
    static model_case cases[32];
    const int n = read_cases(cases, 32);
    for (int i = 0; i < n; i++) {
        gpt2_model *m = load(fixture_path("gguf/%s.gguf", cases[i].name));
        char dir[64];
        snprintf(dir, sizeof dir, "/tmp/gptscope-gguf-XXXXXX");
        assert_non_null(mkdtemp(dir));
        gpt2_error err;
        const gpt2_dtype dt = gpt2_model_dtype(m) <= GPT2_DTYPE_BF16 ? gpt2_model_dtype(m) : GPT2_DTYPE_F32;
        if (gpt2_model_save(m, dir, dt, &err)) fail_msg("%s: %s", cases[i].name, err.msg);
        char path[256];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        st_file want, got;
        if (st_open(fixture_path("gguf/ref/%s/decoded.safetensors", cases[i].name), &want, &err) ||
            st_open(path, &got, &err))
            fail_msg("%s", err.msg);
        int compared = 0;
        for (int k = 0; k < want.n_tensors; k++) {
            const st_tensor *w = &want.tensors[k], *g = st_find(&got, w->name);
            if (!g) fail_msg("%s: %s missing from the conversion", cases[i].name, w->name);
            assert_int_equal(w->n_dims, g->n_dims);
            for (int d = 0; d < w->n_dims; d++) assert_int_equal(w->shape[d], g->shape[d]);
            const size_t n_el = w->n_bytes / 4;
            const float *wv = w->data;
            for (size_t e = 0; e < n_el; e++) { /* the converted file is in dt: compare after its rounding */
                float want_e = wv[e], got_e;
                if (!strcmp(g->dtype, "F32")) memcpy(&got_e, (const char *)g->data + 4 * e, 4);
                else {
                    uint16_t h;
                    memcpy(&h, (const char *)g->data + 2 * e, 2);
                    got_e = dt == GPT2_DTYPE_F16 ? gpt2_f16_to_f32(h) : gpt2_bf16_to_f32(h);
                    want_e = dt == GPT2_DTYPE_F16 ? gpt2_f16_to_f32(gpt2_f32_to_f16(want_e))
                                                  : gpt2_bf16_to_f32(gpt2_f32_to_bf16(want_e));
                }
                if (memcmp(&want_e, &got_e, 4))
                    fail_msg("%s: %s element %zu: %.9g, the Python dequantizer %.9g", cases[i].name, w->name, e, got_e,
                             want_e);
            }
            compared++;
        }
        print_message("%-24s -> %s (%s): %d tensors as the Python dequantizer decodes them\n", cases[i].name, dir,
                      gpt2_dtype_name(dt), compared);
        st_close(&want), st_close(&got);
        gpt2_model_free(m);
        static const char *const files[] = {"config.json", "model.safetensors", "vocab.json", "merges.txt"};
        for (int f = 0; f < 4; f++) snprintf(path, sizeof path, "%s/%s", dir, files[f]), unlink(path);
        rmdir(dir);
    }
}

/* A file in no format gptscope reads says so, and lists the formats. */
static void test_not_gguf(void **state) {
    (void)state;
    gpt2_model *m;
    gpt2_error err;
    const char *path = fixture_path("models/tiny-f32/config.json");
    assert_int_equal(gpt2_model_load(path, &m, &err), GPT2_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "not a model file gptscope knows"));
    assert_non_null(strstr(err.msg, "GGUF"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dequantize_bit_exact), cmocka_unit_test(test_convert_dequantized), cmocka_unit_test(test_quantize_rows),
        cmocka_unit_test(test_input_quantizer),
        cmocka_unit_test(test_dot_products),        cmocka_unit_test(test_x8_layout),
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_model_shape),          cmocka_unit_test(test_threads_identical),
        cmocka_unit_test(test_quantize_model),
        cmocka_unit_test(test_tokenizer),            cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_not_gguf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
