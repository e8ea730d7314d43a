/* test_kernels.c — the packed weight layout: kernel_matmul gives the same
 * floats, bit for bit, on a packed matrix as on the row-major one, for decode
 * (T = 1), small batches (T <= 16) and prefill (sgemm), and both agree with a
 * plain double-precision product. */
#include <math.h>

#include "core/kernels.h"
#include "core/pool.h"
#include "test_util.h"

static uint64_t rng = 88172645463325252ull;
static float uniform(void) { /* in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / 8388608.0f - 1.0f;
}

/* A (K, N) 16-bit matrix of random values, row-major. */
static uint16_t *random_16bit(gpt2_dtype dt, int K, int N) {
    uint16_t *w = malloc((size_t)K * N * sizeof *w);
    assert_non_null(w);
    for (size_t i = 0; i < (size_t)K * N; i++)
        w[i] = dt == GPT2_DTYPE_F16 ? gpt2_f32_to_f16(uniform()) : gpt2_f32_to_bf16(uniform());
    return w;
}

static float widen1(gpt2_dtype dt, uint16_t h) { return dt == GPT2_DTYPE_F16 ? gpt2_f16_to_f32(h) : gpt2_bf16_to_f32(h); }

/* out (T, N) = in (T, K) @ W (K, N) + bias, in double precision. */
static void reference(double *out, const float *in, int T, const uint16_t *w, gpt2_dtype dt, int K, int N,
                      const float *bias) {
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double s = bias[n];
            for (int k = 0; k < K; k++) s += (double)in[(size_t)t * K + k] * widen1(dt, w[(size_t)k * N + n]);
            out[(size_t)t * N + n] = s;
        }
}

static void test_pack_layout(void **state) {
    (void)state;
    const int K = 16, N = 32;
    uint16_t *w = random_16bit(GPT2_DTYPE_F16, K, N), packed[16 * 32];
    gpt2_matrix m = {.data = w, .dtype = GPT2_DTYPE_F16, .rows = K, .cols = N};
    assert_true(kernel_packable(&m));
    kernel_pack(packed, &m);
    /* tile (k/8, n/16) holds rows k%8 of 16 columns each, tiles row-major */
    assert_int_equal(packed[0], w[0]);
    assert_int_equal(packed[16], w[N]);           /* (1, 0): second row of the first tile */
    assert_int_equal(packed[128], w[16]);         /* (0, 16): the second tile */
    assert_int_equal(packed[256 + 16 + 3], w[(size_t)9 * N + 3]); /* (9, 3): tile (1, 0), row 1 */
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) assert_int_equal(packed[kernel_packed_index(N, k, n)], w[(size_t)k * N + n]);
    /* what cannot be packed */
    gpt2_matrix f32 = {.data = w, .dtype = GPT2_DTYPE_F32, .rows = K, .cols = N};
    gpt2_matrix odd_rows = {.data = w, .dtype = GPT2_DTYPE_F16, .rows = 12, .cols = N};
    gpt2_matrix odd_cols = {.data = w, .dtype = GPT2_DTYPE_BF16, .rows = K, .cols = 24};
    assert_false(kernel_packable(&f32));
    assert_false(kernel_packable(&odd_rows));
    assert_false(kernel_packable(&odd_cols));
    free(w);
}

/* Packed and row-major W through kernel_matmul, overwriting and
 * accumulating, at batch sizes on both sides of KERNEL_SMALL_T. */
static void test_packed_matmul_identical(void **state) {
    (void)state;
    const int shapes[][2] = {{64, 48}, {128, 384}, {256, 64}}; /* (K, N) */
    const int sizes[] = {1, 2, 5, 16, 17, 40};
    gpt2_pool *pool = pool_new(2);
    assert_non_null(pool);
    float *scratch[2] = {malloc(KERNEL_SCRATCH_FLOATS * sizeof(float)), malloc(KERNEL_SCRATCH_FLOATS * sizeof(float))};
    for (int dti = 0; dti < 2; dti++) {
        const gpt2_dtype dt = dti ? GPT2_DTYPE_BF16 : GPT2_DTYPE_F16;
        for (int s = 0; s < 3; s++) {
            const int K = shapes[s][0], N = shapes[s][1], Tmax = 40;
            uint16_t *w = random_16bit(dt, K, N), *packed = malloc((size_t)K * N * sizeof *packed);
            gpt2_matrix rm = {.data = w, .dtype = dt, .rows = K, .cols = N};
            kernel_pack(packed, &rm);
            gpt2_matrix pm = rm;
            pm.data = packed;
            pm.packed = 1;
            float *in = malloc((size_t)Tmax * K * sizeof(float)), *bias = malloc((size_t)N * sizeof(float));
            float *a = malloc((size_t)Tmax * N * sizeof(float)), *b = malloc((size_t)Tmax * N * sizeof(float));
            float *partials = malloc((size_t)KERNEL_DECODE_CHUNKS * KERNEL_SMALL_T * N * sizeof(float));
            double *want = malloc((size_t)Tmax * N * sizeof(double));
            for (int i = 0; i < Tmax * K; i++) in[i] = uniform();
            for (int n = 0; n < N; n++) bias[n] = uniform();
            for (int si = 0; si < 6; si++) {
                const int T = sizes[si];
                kernel_matmul(pool, a, in, T, &rm, bias, 0, scratch, partials);
                kernel_matmul(pool, b, in, T, &pm, bias, 0, scratch, partials);
                assert_memory_equal(a, b, (size_t)T * N * sizeof(float));
                reference(want, in, T, w, dt, K, N, bias);
                for (size_t i = 0; i < (size_t)T * N; i++) assert_true(fabs(a[i] - want[i]) < 1e-4 * (1 + fabs(want[i])));
                /* accumulate: out += in @ W + bias, on top of the last result */
                kernel_matmul(pool, a, in, T, &rm, bias, 1, scratch, partials);
                kernel_matmul(pool, b, in, T, &pm, bias, 1, scratch, partials);
                assert_memory_equal(a, b, (size_t)T * N * sizeof(float));
                for (size_t i = 0; i < (size_t)T * N; i++)
                    assert_true(fabs(a[i] - 2 * want[i]) < 2e-4 * (1 + fabs(want[i])));
            }
            free(w), free(packed), free(in), free(bias), free(a), free(b), free(partials), free(want);
        }
    }
    free(scratch[0]), free(scratch[1]);
    pool_free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_layout),
        cmocka_unit_test(test_packed_matmul_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
