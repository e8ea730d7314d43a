/* test_gemm.c — the prefill kernels of gemm.c against the definition,
 * C[t, n] = C0[t, n] + sum_k A[t, k] W[k, n], summed in double precision, for
 * every kernel this CPU runs (AVX-512, AVX2, C), every dtype, packed and
 * row-major, over shapes that leave partial tiles (T not a multiple of 6, K
 * not one of the K block); and that the bits do not depend on how the rows,
 * columns or threads are split. */
#include <math.h>

#include "core/gemm.h"
#include "core/kernels.h"
#include "core/pool.h"
#include "test_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(void) { /* in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / 8388608.0f - 1.0f;
}

static const char *const kernel_names[] = {"avx512", "avx2", "c"};
static const gpt2_dtype dtypes[] = {GPT2_DTYPE_F32, GPT2_DTYPE_F16, GPT2_DTYPE_BF16, GPT2_DTYPE_Q8};

/* A random (K, N) weight matrix of dtype dt as gemm_cols reads it (packed
 * when asked; Q8 row-major with a scale per column), and the same weights
 * widened to double, row-major, in `wd` (K, N). */
typedef struct {
    gpt2_matrix m;
    void *data;
    float *scale;
    double *wd;
} weights;

static weights make_weights(gpt2_dtype dt, int K, int N, int packed) {
    weights w = {0};
    const size_t n = (size_t)K * N, es = gpt2_dtype_size(dt);
    void *rm = malloc(n * es);
    w.wd = malloc(n * sizeof(double));
    assert_true(rm && w.wd);
    if (dt == GPT2_DTYPE_Q8) {
        w.scale = malloc((size_t)N * sizeof(float));
        for (int c = 0; c < N; c++) w.scale[c] = (1.0f + uniform()) / 127.0f;
    }
    for (size_t i = 0; i < n; i++) {
        const float v = uniform();
        double d;
        switch (dt) {
        case GPT2_DTYPE_F32: d = ((float *)rm)[i] = v; break;
        case GPT2_DTYPE_F16: d = gpt2_f16_to_f32(((uint16_t *)rm)[i] = gpt2_f32_to_f16(v)); break;
        case GPT2_DTYPE_BF16: d = gpt2_bf16_to_f32(((uint16_t *)rm)[i] = gpt2_f32_to_bf16(v)); break;
        default: d = (double)(((int8_t *)rm)[i] = (int8_t)lrintf(v * 127.0f)) * w.scale[i % N]; break;
        }
        w.wd[i] = d;
    }
    w.m = (gpt2_matrix){.data = rm, .dtype = dt, .rows = K, .cols = N, .scale = w.scale};
    w.data = rm;
    if (packed) {
        void *p = malloc(n * es);
        assert_non_null(p);
        kernel_pack(p, &w.m);
        free(rm);
        w.data = p, w.m.data = p, w.m.packed = 1;
    }
    return w;
}

static void free_weights(weights *w) { free(w->data), free(w->scale), free(w->wd); }

/* C (T, N) = C0 + A (T, K) @ wd, in double; bound (T, N): sum |C0| + |A||W|. */
static void reference(double *C, double *bound, const float *C0, const float *A, const double *wd, int T, int K,
                      int N) {
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double s = C0[(size_t)t * N + n], b = fabs(s);
            for (int k = 0; k < K; k++) {
                const double p = (double)A[(size_t)t * K + k] * wd[(size_t)k * N + n];
                s += p, b += fabs(p);
            }
            C[(size_t)t * N + n] = s, bound[(size_t)t * N + n] = b;
        }
}

/* Every kernel, dtype and layout over odd shapes, against the definition;
 * the whole width at once and in two column blocks give the same bits, and
 * so do all T rows at once and one row at a time. */
static void test_gemm_definition(void **state) {
    (void)state;
    const int shapes[][3] = {{1, 64, 64}, {5, 37, 128}, {7, 300, 192}, {13, 513, 64}, {17, 256, 128}, {40, 1, 64}};
    int n_kernels = 0;
    for (int ki = 0; ki < 3; ki++) {
        if (!gemm_force_kernel(kernel_names[ki])) continue; /* this CPU lacks it */
        n_kernels++;
        for (int di = 0; di < 4; di++)
            for (int packed = 0; packed < 2; packed++) {
                const gpt2_dtype dt = dtypes[di];
                if (dt == GPT2_DTYPE_Q8 && packed) continue; /* Q8 stays row-major */
                for (int s = 0; s < 6; s++) {
                    const int T = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
                    weights w = make_weights(dt, K, N, packed);
                    assert_true(gemm_fits(&w.m));
                    float *A = malloc((size_t)T * K * sizeof(float)), *C0 = malloc((size_t)T * N * sizeof(float));
                    float *C = malloc((size_t)T * N * sizeof(float)), *C2 = malloc((size_t)T * N * sizeof(float));
                    double *want = malloc((size_t)T * N * sizeof(double)), *bound = malloc((size_t)T * N * sizeof(double));
                    for (int i = 0; i < T * K; i++) A[i] = uniform();
                    for (int i = 0; i < T * N; i++) C0[i] = uniform();
                    reference(want, bound, C0, A, w.wd, T, K, N);
                    memcpy(C, C0, (size_t)T * N * sizeof(float));
                    gemm_cols(C, N, A, T, &w.m, 0, N, NULL, 1);
                    for (size_t i = 0; i < (size_t)T * N; i++)
                        if (!(fabs(C[i] - want[i]) <= 1e-6 * bound[i] + 1e-30))
                            fail_msg("%s dtype %d packed %d T %d K %d N %d: C[%zu] = %.9g, want %.9g (bound %g)",
                                     kernel_names[ki], dt, packed, T, K, N, i, C[i], want[i], bound[i]);
                    /* columns split in two blocks, and rows one at a time: the same bits */
                    memcpy(C2, C0, (size_t)T * N * sizeof(float));
                    if (N > 64) {
                        gemm_cols(C2 + 64, N, A, T, &w.m, 64, N - 64, NULL, 1);
                        gemm_cols(C2, N, A, T, &w.m, 0, 64, NULL, 1);
                    } else {
                        gemm_cols(C2, N, A, T, &w.m, 0, N, NULL, 1);
                    }
                    assert_memory_equal(C2, C, (size_t)T * N * sizeof(float));
                    memcpy(C2, C0, (size_t)T * N * sizeof(float));
                    for (int t = 0; t < T; t++) gemm_cols(C2 + (size_t)t * N, N, A + (size_t)t * K, 1, &w.m, 0, N, NULL, 1);
                    assert_memory_equal(C2, C, (size_t)T * N * sizeof(float));
                    /* C0 from the bias, overwriting or accumulating: the bits of a pass setting it first */
                    float *bias = malloc((size_t)N * sizeof(float));
                    for (int n = 0; n < N; n++) bias[n] = uniform();
                    for (int mode = 0; mode < 4; mode++) {
                        const int acc = mode >= 2;
                        const float *b = mode % 2 ? bias : NULL;
                        memcpy(C2, C0, (size_t)T * N * sizeof(float));
                        gemm_cols(C2, N, A, T, &w.m, 0, N, b, acc);
                        for (int i = 0; i < T * N; i++) C[i] = acc ? (b ? C0[i] + b[i % N] : C0[i]) : b ? b[i % N] : 0.0f;
                        gemm_cols(C, N, A, T, &w.m, 0, N, NULL, 1);
                        assert_memory_equal(C2, C, (size_t)T * N * sizeof(float));
                    }
                    free(bias);
                    free(A), free(C0), free(C), free(C2), free(want), free(bound);
                    free_weights(&w);
                }
            }
    }
    assert_true(n_kernels >= 1); /* "c" runs everywhere */
    gemm_force_kernel(NULL);
}

/* Q8 packed in row pairs, integer products (gemm.h): every kernel against
 * the definition in double, within the error of rounding the inputs to 16
 * bits per block of 32 (at most d_b / 2 each; a block of magnitude below
 * 1e-30 becomes zero) plus float rounding; all kernels give the same bits,
 * and so do rows one at a time and columns in two blocks. */
static void test_gemm_q8_pairs(void **state) {
    (void)state;
    const int shapes[][3] = {{1, 32, 64}, {2, 64, 128}, {4, 96, 64}, {7, 768, 192}, {13, 256, 128}, {40, 32, 64}};
    for (int s = 0; s < 6; s++) {
        const int T = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        weights w = make_weights(GPT2_DTYPE_Q8, K, N, 1);
        assert_true(w.m.packed);
        float *A = malloc((size_t)T * K * sizeof(float)), *C0 = malloc((size_t)T * N * sizeof(float));
        float *C = malloc((size_t)T * N * sizeof(float)), *first = malloc((size_t)T * N * sizeof(float));
        double *want = malloc((size_t)T * N * sizeof(double)), *mag = malloc((size_t)T * N * sizeof(double));
        quant_x *X = malloc((size_t)T * sizeof *X);
        char *buf = malloc((size_t)T * quant_x_bytes(K));
        assert_true(A && C0 && C && first && want && mag && X && buf);
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++) { /* blocks: plain, an outlier, zero, tiny */
                const int kind = (t + k / 32) % 4;
                float v = uniform() * 3.0f;
                if (kind == 1 && k % 32 == 5) v = 250.0f;
                if (kind == 2) v = 0.0f;
                if (kind == 3 && K > 32) v *= 1e-32f;
                A[(size_t)t * K + k] = v;
            }
        for (int i = 0; i < T * N; i++) C0[i] = uniform();
        reference(want, mag, C0, A, w.wd, T, K, N);
        for (int t = 0; t < T; t++) quant_x_set(&X[t], buf + (size_t)t * quant_x_bytes(K), A + (size_t)t * K, K);
        int n_kernels = 0;
        for (int ki = 0; ki < 3; ki++) {
            if (!gemm_force_kernel(kernel_names[ki])) continue;
            memcpy(C, C0, (size_t)T * N * sizeof(float));
            gemm_q8_cols(C, N, X, T, &w.m, 0, N);
            for (int t = 0; t < T; t++)
                for (int n = 0; n < N; n++) {
                    double bound = 0.0;
                    for (int k = 0; k < K; k++) {
                        const float *blk = A + (size_t)t * K + k / 32 * 32;
                        float amax = 0.0f;
                        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(blk[j]));
                        const double e = amax < 1e-30f ? amax : X[t].d[k / 32] / 2.0;
                        bound += e * fabs(w.wd[(size_t)k * N + n]);
                    }
                    const size_t i = (size_t)t * N + n;
                    if (!(fabs(C[i] - want[i]) <= bound * 1.0001 + 2e-6 * mag[i] + 1e-30))
                        fail_msg("%s T %d K %d N %d: C[%d, %d] = %.9g, want %.9g (input rounding bound %g)",
                                 kernel_names[ki], T, K, N, t, n, C[i], want[i], bound);
                }
            if (n_kernels++ == 0) memcpy(first, C, (size_t)T * N * sizeof(float));
            else assert_memory_equal(C, first, (size_t)T * N * sizeof(float));
            memcpy(C, C0, (size_t)T * N * sizeof(float));
            if (N > 64) gemm_q8_cols(C + 64, N, X, T, &w.m, 64, N - 64), gemm_q8_cols(C, N, X, T, &w.m, 0, 64);
            else gemm_q8_cols(C, N, X, T, &w.m, 0, N);
            assert_memory_equal(C, first, (size_t)T * N * sizeof(float));
            memcpy(C, C0, (size_t)T * N * sizeof(float));
            for (int t = 0; t < T; t++) gemm_q8_cols(C + (size_t)t * N, N, X + t, 1, &w.m, 0, N);
            assert_memory_equal(C, first, (size_t)T * N * sizeof(float));
        }
        assert_true(n_kernels >= 1);
        free(A), free(C0), free(C), free(first), free(want), free(mag), free(X), free(buf);
        free_weights(&w);
    }
    gemm_force_kernel(NULL);
}

/* kernel_matmul at prefill sizes, through our kernels, with 1 to 4 threads:
 * the same bits whatever the thread count, for every dtype. */
static void test_gemm_threads(void **state) {
    (void)state;
    enum { T = 45, K = 224, N = 3072, MAXT = 4 };
    setenv("GPTSCOPE_GEMM", "own", 1);
    float *in = malloc((size_t)T * K * sizeof(float)), *bias = malloc((size_t)N * sizeof(float));
    float *out = malloc((size_t)T * N * sizeof(float)), *first = malloc((size_t)T * N * sizeof(float));
    float *scratch_all = malloc((size_t)MAXT * KERNEL_SCRATCH_FLOATS * sizeof(float)), *scratch[MAXT];
    float *partials = malloc(kernel_work_floats(T, K, N) * sizeof(float));
    assert_true(in && bias && out && first && scratch_all && partials);
    for (int i = 0; i < MAXT; i++) scratch[i] = scratch_all + (size_t)i * KERNEL_SCRATCH_FLOATS;
    for (int i = 0; i < T * K; i++) in[i] = uniform();
    for (int n = 0; n < N; n++) bias[n] = uniform();
    for (int di = 0; di < 5; di++) { /* the four dtypes, then Q8 packed in row pairs */
        const gpt2_dtype dt = dtypes[di < 4 ? di : 3];
        weights w = make_weights(dt, K, N, dt != GPT2_DTYPE_Q8 || di == 4);
        for (int nt = 1; nt <= MAXT; nt++) {
            gpt2_pool *pool = pool_new(nt);
            assert_non_null(pool);
            for (int acc = 0; acc < 2; acc++) { /* overwrite, then accumulate onto it */
                kernel_matmul(pool, out, in, T, &w.m, bias, acc, scratch, partials);
            }
            pool_free(pool);
            if (nt == 1) memcpy(first, out, (size_t)T * N * sizeof(float));
            else assert_memory_equal(out, first, (size_t)T * N * sizeof(float));
        }
        if (di == 4) { /* Q8's integer products: decode-sized calls give prefill's bits */
            gpt2_pool *pool = pool_new(2);
            for (int t = 0; t < T; t += 5) {
                const int n = T - t < 5 ? T - t : 5;
                kernel_matmul(pool, out + (size_t)t * N, in + (size_t)t * K, n, &w.m, bias, 0, scratch, partials);
                kernel_matmul(pool, out + (size_t)t * N, in + (size_t)t * K, n, &w.m, bias, 1, scratch, partials);
            }
            pool_free(pool);
            assert_memory_equal(out, first, (size_t)T * N * sizeof(float));
        }
        free_weights(&w);
    }
    free(in), free(bias), free(out), free(first), free(scratch_all), free(partials);
    unsetenv("GPTSCOPE_GEMM");
}

/* GPTSCOPE_GEMM=blas: Q8 packed in row pairs is widened for sgemm to the
 * floats of the same matrix row-major, so both give the same bits. */
static void test_q8_pairs_blas(void **state) {
    (void)state;
    enum { T = 45, K = 224, N = 384 };
    setenv("GPTSCOPE_GEMM", "blas", 1);
    float *scratch = malloc((size_t)KERNEL_SCRATCH_FLOATS * sizeof(float)), *in = malloc((size_t)T * K * sizeof(float));
    float *a = malloc((size_t)T * N * sizeof(float)), *b = malloc((size_t)T * N * sizeof(float));
    assert_true(scratch && in && a && b);
    for (int i = 0; i < T * K; i++) in[i] = uniform();
    const uint64_t seed = rng;
    weights rm = make_weights(GPT2_DTYPE_Q8, K, N, 0);
    rng = seed;
    weights pk = make_weights(GPT2_DTYPE_Q8, K, N, 1);
    assert_true(pk.m.packed && !rm.m.packed);
    gpt2_pool *pool = pool_new(1);
    kernel_matmul(pool, a, in, T, &rm.m, NULL, 0, &scratch, NULL);
    kernel_matmul(pool, b, in, T, &pk.m, NULL, 0, &scratch, NULL);
    assert_memory_equal(a, b, (size_t)T * N * sizeof(float));
    pool_free(pool);
    free_weights(&rm), free_weights(&pk);
    free(scratch), free(in), free(a), free(b);
    unsetenv("GPTSCOPE_GEMM");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_definition),
        cmocka_unit_test(test_gemm_q8_pairs),
        cmocka_unit_test(test_gemm_threads),
        cmocka_unit_test(test_q8_pairs_blas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
