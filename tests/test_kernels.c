/* test_kernels.c — the packed weight layout (panels of 64 columns): where
 * kernel_pack puts each element, and kernel_matmul on a packed matrix against
 * a plain double-precision product and against the row-major matrix, for
 * decode (T = 1), small batches (T <= 16, bit-identical to T = 1 calls) and
 * prefill (sgemm); and that the sgemm calls a matmul makes do not depend on
 * the thread count. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>

#include "core/kernels.h"
#include "core/pool.h"
#include "core/quant.h"
#include "test_util.h"

static uint64_t rng = 88172645463325252ull;
static float uniform(void) { /* in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / 8388608.0f - 1.0f;
}

/* A (K, N) matrix of random values of dtype dt, row-major. */
static void *random_matrix(gpt2_dtype dt, int K, int N) {
    const size_t n = (size_t)K * N;
    void *w = malloc(n * gpt2_dtype_size(dt));
    assert_non_null(w);
    for (size_t i = 0; i < n; i++) {
        float v = uniform();
        if (dt == GPT2_DTYPE_F32) ((float *)w)[i] = v;
        else ((uint16_t *)w)[i] = dt == GPT2_DTYPE_F16 ? gpt2_f32_to_f16(v) : gpt2_f32_to_bf16(v);
    }
    return w;
}

static float element(const void *w, gpt2_dtype dt, size_t i) {
    if (dt == GPT2_DTYPE_F32) return ((const float *)w)[i];
    uint16_t h = ((const uint16_t *)w)[i];
    return dt == GPT2_DTYPE_F16 ? gpt2_f16_to_f32(h) : gpt2_bf16_to_f32(h);
}

/* out (T, N) = in (T, K) @ W (K, N) + bias, in double precision. */
static void reference(double *out, const float *in, int T, const void *w, gpt2_dtype dt, int K, int N,
                      const float *bias) {
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double s = bias[n];
            for (int k = 0; k < K; k++) s += (double)in[(size_t)t * K + k] * element(w, dt, (size_t)k * N + n);
            out[(size_t)t * N + n] = s;
        }
}

static void test_pack_layout(void **state) {
    (void)state;
    enum { K = 16, N = 128 };
    uint16_t *w = random_matrix(GPT2_DTYPE_F16, K, N), packed[K * N];
    gpt2_matrix m = {.data = w, .dtype = GPT2_DTYPE_F16, .rows = K, .cols = N};
    assert_true(kernel_packable(&m));
    kernel_pack(packed, &m);
    /* panel 0 (columns 0..63) row by row, then panel 1 */
    assert_int_equal(packed[0], w[0]);
    assert_int_equal(packed[63], w[63]);
    assert_int_equal(packed[64], w[N]);               /* (1, 0) */
    assert_int_equal(packed[K * 64], w[64]);          /* (0, 64): panel 1 */
    assert_int_equal(packed[K * 64 + 3 * 64 + 5], w[3 * N + 69]); /* (3, 69) */
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) assert_int_equal(packed[kernel_packed_index(K, k, n)], w[(size_t)k * N + n]);
    /* what cannot be packed */
    gpt2_matrix q8 = {.data = w, .dtype = GPT2_DTYPE_Q8, .rows = K, .cols = N};
    gpt2_matrix odd_rows = {.data = w, .dtype = GPT2_DTYPE_F16, .rows = 13, .cols = N};
    gpt2_matrix odd_cols = {.data = w, .dtype = GPT2_DTYPE_BF16, .rows = K, .cols = 96};
    gpt2_matrix f32 = {.data = w, .dtype = GPT2_DTYPE_F32, .rows = K, .cols = 64};
    assert_false(kernel_packable(&q8));
    assert_true(kernel_packable(&odd_rows)); /* any number of rows */
    assert_false(kernel_packable(&odd_cols));
    assert_true(kernel_packable(&f32));
    free(w);
}

/* Packed W through kernel_matmul, overwriting and accumulating, at batch
 * sizes on both sides of KERNEL_SMALL_T: close to the exact product and to
 * the row-major result, and up to 16 positions the same bits as one by one. */
static void test_packed_matmul(void **state) {
    (void)state;
    const int shapes[][2] = {{64, 128}, {128, 384}, {256, 64}, {37, 192}}; /* (K, N) */
    const int sizes[] = {1, 2, 3, 5, 16, 17, 40}; /* 3: the AVX2 panel kernel's groups of 3 */
    const gpt2_dtype dts[] = {GPT2_DTYPE_F32, GPT2_DTYPE_F16, GPT2_DTYPE_BF16};
    gpt2_pool *pool = pool_new(2);
    assert_non_null(pool);
    float *scratch[2] = {malloc(KERNEL_SCRATCH_FLOATS * sizeof(float)), malloc(KERNEL_SCRATCH_FLOATS * sizeof(float))};
    for (int di = 0; di < 3; di++)
        for (int s = 0; s < 4; s++) {
            const gpt2_dtype dt = dts[di];
            const int K = shapes[s][0], N = shapes[s][1], Tmax = 40;
            void *w = random_matrix(dt, K, N), *packed = malloc((size_t)K * N * gpt2_dtype_size(dt));
            gpt2_matrix rm = {.data = w, .dtype = dt, .rows = K, .cols = N};
            kernel_pack(packed, &rm);
            gpt2_matrix pm = rm;
            pm.data = packed;
            pm.packed = 1;
            float *in = malloc((size_t)Tmax * K * sizeof(float)), *bias = malloc((size_t)N * sizeof(float));
            float *a = malloc((size_t)Tmax * N * sizeof(float)), *b = malloc((size_t)Tmax * N * sizeof(float));
            float *one = malloc((size_t)Tmax * N * sizeof(float));
            float *partials = malloc((size_t)KERNEL_DECODE_CHUNKS * KERNEL_SMALL_T * N * sizeof(float));
            double *want = malloc((size_t)Tmax * N * sizeof(double));
            for (int i = 0; i < Tmax * K; i++) in[i] = uniform();
            for (int n = 0; n < N; n++) bias[n] = uniform();
            for (int si = 0; si < 7; si++) {
                const int T = sizes[si];
                reference(want, in, T, w, dt, K, N, bias);
                kernel_matmul(pool, a, in, T, &rm, bias, 0, scratch, partials);
                kernel_matmul(pool, b, in, T, &pm, bias, 0, scratch, partials);
                for (size_t i = 0; i < (size_t)T * N; i++) {
                    assert_true(fabs(b[i] - want[i]) < 1e-4 * (1 + fabs(want[i])));
                    assert_true(fabs(b[i] - a[i]) < 1e-4 * (1 + fabs(want[i])));
                }
                if (T <= KERNEL_SMALL_T) {
                    for (int t = 0; t < T; t++)
                        kernel_matmul(pool, one + (size_t)t * N, in + (size_t)t * K, 1, &pm, bias, 0, scratch, partials);
                    assert_memory_equal(one, b, (size_t)T * N * sizeof(float));
                }
                /* accumulate: out += in @ W + bias, on top of the last result */
                kernel_matmul(pool, b, in, T, &pm, bias, 1, scratch, partials);
                for (size_t i = 0; i < (size_t)T * N; i++)
                    assert_true(fabs(b[i] - 2 * want[i]) < 2e-4 * (1 + fabs(want[i])));
            }
            free(w), free(packed), free(in), free(bias), free(a), free(b), free(one), free(partials), free(want);
        }
    free(scratch[0]), free(scratch[1]);
    pool_free(pool);
}

/* Every sgemm call of the kernels comes here first (this definition takes
 * precedence over OpenBLAS's for the statically linked library), is recorded
 * while `recording`, and goes on to OpenBLAS. An sgemm kernel may round a
 * column differently depending on where it falls in the call (OpenBLAS's
 * Haswell kernels do at block edges), so results are the same for any thread
 * count only if the calls are: this checks that by construction, whatever
 * kernel the machine's OpenBLAS picks. */
typedef struct { int m, n, k, lda, ldb, ldc; const float *a, *b; float *c; } sgemm_call;
static sgemm_call calls[4096];
static int n_calls, recording;
static const float *scratch_lo, *scratch_hi; /* B inside any thread's scratch: recorded as NULL */
static pthread_mutex_t calls_lock = PTHREAD_MUTEX_INITIALIZER;

void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                 const blasint m, const blasint n, const blasint k, const float alpha, const float *a,
                 const blasint lda, const float *b, const blasint ldb, const float beta, float *c,
                 const blasint ldc) {
    typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE,
                             const blasint, const blasint, const blasint, const float, const float *, const blasint,
                             const float *, const blasint, const float, float *, const blasint);
    static sgemm_fn real;
    pthread_mutex_lock(&calls_lock);
    if (!real) real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
    if (!real) {
        fprintf(stderr, "test_kernels: OpenBLAS's cblas_sgemm not found: %s\n", dlerror());
        abort();
    }
    if (recording && n_calls < 4096) {
        const float *bb = b >= scratch_lo && b < scratch_hi ? NULL : b;
        calls[n_calls++] = (sgemm_call){(int)m, (int)n, (int)k, (int)lda, (int)ldb, (int)ldc, a, bb, c};
    }
    pthread_mutex_unlock(&calls_lock);
    real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static int call_cmp(const void *x, const void *y) {
    const sgemm_call *p = x, *q = y;
    if (p->c != q->c) return p->c < q->c ? -1 : 1;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    if (p->b != q->b) return p->b < q->b ? -1 : 1;
    return memcmp(p, q, offsetof(sgemm_call, a));
}

/* Prefill-sized matmuls (GPT-2's widths: 768, 2304, 3072 columns; the LM head
 * over 1000 rows) with 1 to 4 threads: the same sgemm calls, whichever
 * thread makes them, and the same bits out. With OpenBLAS (GPTSCOPE_GEMM=blas)
 * for kernel_matmul, then with our own kernels (gemm.c: no sgemm calls but
 * the LM head's, the same bits). */
static void prefill_split_fixed(int own) {
    setenv("GPTSCOPE_GEMM", own ? "own" : "blas", 1);
    enum { T = 40, K = 64, MAXT = 4 };
    const int widths[] = {768, 2304, 3072};
    float *scratch_all = malloc((size_t)MAXT * KERNEL_SCRATCH_FLOATS * sizeof(float)), *scratch[MAXT];
    assert_non_null(scratch_all);
    for (int i = 0; i < MAXT; i++) scratch[i] = scratch_all + (size_t)i * KERNEL_SCRATCH_FLOATS;
    scratch_lo = scratch_all, scratch_hi = scratch_all + (size_t)MAXT * KERNEL_SCRATCH_FLOATS;
    float *in = malloc((size_t)T * 3072 * sizeof(float));
    for (int i = 0; i < T * 3072; i++) in[i] = uniform();
    static sgemm_call first[4096];
    for (int wi = 0; wi < 4; wi++)
        for (int packed = 0; packed < 2; packed++) {
            const int lm = wi == 3, N = lm ? 1000 : widths[wi]; /* LM head: W (N, K), row-major only */
            if (lm && packed) continue;
            void *w = random_matrix(GPT2_DTYPE_F32, lm ? N : K, lm ? K : N);
            gpt2_matrix m = {.data = w, .dtype = GPT2_DTYPE_F32, .rows = lm ? N : K, .cols = lm ? K : N};
            void *pw = NULL;
            if (packed) {
                pw = malloc((size_t)K * N * sizeof(float));
                kernel_pack(pw, &m);
                m.data = pw, m.packed = 1;
            }
            float *out = malloc((size_t)T * N * sizeof(float)), *out1 = malloc((size_t)T * N * sizeof(float));
            int n_first = 0;
            for (int nt = 1; nt <= MAXT; nt++) {
                gpt2_pool *pool = pool_new(nt);
                assert_non_null(pool);
                n_calls = 0, recording = 1;
                if (lm) kernel_matmul_t(pool, out, N, in, T, &m, scratch, NULL);
                else kernel_matmul(pool, out, in, T, &m, NULL, 0, scratch, NULL);
                recording = 0;
                pool_free(pool);
                const int want_calls = lm || !own;
                assert_true(want_calls ? n_calls > 0 && n_calls < 4096 : n_calls == 0);
                qsort(calls, (size_t)n_calls, sizeof *calls, call_cmp);
                if (nt == 1) {
                    assert_true(!want_calls || n_calls > 1); /* several blocks to share out */
                    memcpy(first, calls, (size_t)n_calls * sizeof *calls), n_first = n_calls;
                    memcpy(out1, out, (size_t)T * N * sizeof(float));
                    continue;
                }
                assert_int_equal(n_calls, n_first);
                for (int i = 0; i < n_calls; i++) assert_int_equal(call_cmp(&calls[i], &first[i]), 0);
                assert_memory_equal(out, out1, (size_t)T * N * sizeof(float));
            }
            free(w), free(pw), free(out), free(out1);
        }
    free(in), free(scratch_all);
    unsetenv("GPTSCOPE_GEMM");
}

static void test_prefill_split_fixed(void **state) {
    (void)state;
    prefill_split_fixed(0);
    prefill_split_fixed(1);
}

/* kernel_matmul_gelu = kernel_matmul, then the GELU over the whole output,
 * bit for bit, on each path: F32 row-major (decode's row split: GELU after),
 * packed F32 and F16 (panels per chunk), packed Q8 (integer products), GGUF's
 * Q8_0, Q4_0 and Q4_K, each at decode and prefill sizes, with the tanh and
 * the erf GELU. */
static void test_matmul_gelu(void **state) {
    (void)state;
    enum { K = 64, N = 256, TMAX = 40 };
    const int sizes[] = {1, 3, 17, 40};
    gpt2_pool *pool = pool_new(2);
    float *scratch[2] = {malloc(KERNEL_SCRATCH_FLOATS * sizeof(float)), malloc(KERNEL_SCRATCH_FLOATS * sizeof(float))};
    float *partials = malloc(kernel_work_floats(TMAX, K, N) * sizeof(float) + KERNEL_DECODE_CHUNKS * 16 * N * 4);
    float *in = malloc(TMAX * K * sizeof(float)), *bias = malloc(N * sizeof(float)), *scale = malloc(N * sizeof(float));
    float *a = malloc(TMAX * N * sizeof(float)), *b = malloc(TMAX * N * sizeof(float));
    for (int i = 0; i < TMAX * K; i++) in[i] = 3 * uniform();
    for (int n = 0; n < N; n++) bias[n] = uniform(), scale[n] = 0.02f * (1 + uniform());
    int8_t *q = malloc(K * N);
    for (int i = 0; i < K * N; i++) q[i] = (int8_t)(127 * uniform());
    for (int kind = 0; kind < 4; kind++) { /* F32 row-major, F32 packed, F16 packed, Q8 packed */
        const gpt2_dtype dt = kind == 2 ? GPT2_DTYPE_F16 : kind == 3 ? GPT2_DTYPE_Q8 : GPT2_DTYPE_F32;
        void *w = kind == 3 ? q : random_matrix(dt, K, N), *packed = malloc((size_t)K * N * gpt2_dtype_size(dt));
        gpt2_matrix m = {.data = w, .dtype = dt, .rows = K, .cols = N, .scale = kind == 3 ? scale : NULL};
        if (kind > 0) {
            kernel_pack(packed, &m);
            m.data = packed, m.packed = 1;
        }
        for (int si = 0; si < 4; si++)
            for (int erf = 0; erf < 2; erf++) {
                const int T = sizes[si];
                memset(b, 0xff, TMAX * N * sizeof(float)); /* NaN: overwritten, not accumulated into */
                kernel_matmul(pool, a, in, T, &m, bias, 0, scratch, partials);
                if (erf) kernel_gelu_erf(a, (size_t)T * N);
                else kernel_gelu_tanh(a, a, (size_t)T * N);
                kernel_matmul_gelu(pool, b, in, T, &m, bias, erf, scratch, partials);
                if (memcmp(a, b, (size_t)T * N * sizeof(float)))
                    fail_msg("dtype %d (packed %d), T = %d, erf %d: differs from the matmul then the GELU", dt,
                             m.packed, T, erf);
            }
        if (kind < 3) free(w);
        free(packed);
    }
    /* GGUF's block formats: W stored as N rows of K in blocks (K = 256, Q4_K's block) */
    const gpt2_dtype blk[] = {GPT2_DTYPE_Q8_0, GPT2_DTYPE_Q4_0, GPT2_DTYPE_Q4_K};
    enum { KB = 256, NB = 128 };
    float *row = malloc(KB * sizeof(float)), *inb = malloc(TMAX * KB * sizeof(float));
    float *pb = malloc(kernel_work_floats(TMAX, KB, NB) * sizeof(float) + KERNEL_DECODE_CHUNKS * 16 * NB * 4);
    for (int i = 0; i < TMAX * KB; i++) inb[i] = 3 * uniform();
    for (int bi = 0; bi < 3; bi++) {
        const size_t rb = quant_row_bytes(blk[bi], KB);
        char *w = malloc(NB * rb);
        for (int n = 0; n < NB; n++) {
            for (int k = 0; k < KB; k++) row[k] = 0.1f * uniform();
            quant_quantize_row(blk[bi], row, w + n * rb, KB);
        }
        gpt2_matrix m = {.data = w, .dtype = blk[bi], .rows = KB, .cols = NB};
        for (int si = 0; si < 4; si++)
            for (int erf = 0; erf < 2; erf++) {
                const int T = sizes[si];
                memset(b, 0xff, TMAX * N * sizeof(float));
                kernel_matmul(pool, a, inb, T, &m, bias, 0, scratch, pb);
                if (erf) kernel_gelu_erf(a, (size_t)T * NB);
                else kernel_gelu_tanh(a, a, (size_t)T * NB);
                kernel_matmul_gelu(pool, b, inb, T, &m, bias, erf, scratch, pb);
                if (memcmp(a, b, (size_t)T * NB * sizeof(float)))
                    fail_msg("block format %d, T = %d, erf %d: differs from the matmul then the GELU", blk[bi], T, erf);
            }
        free(w);
    }
    free(row), free(inb), free(pb);
    free(scratch[0]), free(scratch[1]), free(partials), free(in), free(bias), free(scale), free(a), free(b), free(q);
    pool_free(pool);
}

/* Prefill over GGUF's block formats (T > 16: widened a K block at a time into
 * panels for the float tiles) against float64 sums of the dequantized
 * weights, in both layouts (rows; x8 groups where the format has them), at
 * shapes with a last panel of 11 outputs (and a last x8 group of 3 rows) and
 * a K that ends in a partial K block; bit for bit the same at 1, 2 and 3
 * threads; the OpenBLAS path (GPTSCOPE_GEMM=blas) against the same sums. */
static void test_block_prefill(void **state) {
    (void)state;
    const gpt2_dtype dts[] = {GPT2_DTYPE_Q8_0, GPT2_DTYPE_Q4_0, GPT2_DTYPE_Q5_0, GPT2_DTYPE_Q4_K, GPT2_DTYPE_Q5_K,
                              GPT2_DTYPE_Q6_K};
    enum { N = 203, T = 45, KMAX = 512 };
    float *scratch[3], *in = malloc((size_t)T * KMAX * sizeof(float)), *row = malloc(KMAX * sizeof(float));
    float *w_f = malloc((size_t)N * KMAX * sizeof(float)), *out = malloc((size_t)T * N * sizeof(float)),
          *out1 = malloc((size_t)T * N * sizeof(float));
    for (int i = 0; i < 3; i++) scratch[i] = malloc(KERNEL_SCRATCH_FLOATS * sizeof(float));
    for (int i = 0; i < T * KMAX; i++) in[i] = 2 * uniform();
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        const gpt2_dtype dt = dts[di];
        const int K = quant_format_of(dt)->block == 256 ? 512 : 320; /* 320 = 256 + a K block of 64 */
        const size_t rb = quant_row_bytes(dt, (size_t)K);
        unsigned char *w = malloc((size_t)N * rb);
        for (int n = 0; n < N; n++) { /* random blocks, kept where every weight is finite and modest */
            unsigned char *r = w + (size_t)n * rb;
            for (int tries = 0;; tries++) {
                assert_true(tries < 1000);
                for (size_t b = 0; b < rb; b++) r[b] = (unsigned char)(uniform() * 128 + 128);
                quant_dequantize_row(dt, r, row, K);
                int ok = 1;
                for (int k = 0; k < K; k++) ok &= isfinite(row[k]) && fabsf(row[k]) < 1e4f;
                if (ok) break;
            }
            memcpy(w_f + (size_t)n * K, row, (size_t)K * sizeof(float));
        }
        double worst = 0;
        for (int layout = 0; layout < 3; layout++) { /* rows, x8, rows through OpenBLAS */
            const int x8 = layout == 1;
            if (x8 && !quant_x8(dt)) continue;
            void *data = w;
            if (x8) {
                data = malloc(quant_x8_bytes(dt, N, K));
                quant_x8_pack(dt, w, N, K, data);
            }
            if (layout == 2) setenv("GPTSCOPE_GEMM", "blas", 1);
            gpt2_matrix m = {.data = data, .dtype = dt, .rows = K, .cols = N, .packed = x8};
            for (int nt = 1; nt <= 3; nt++) {
                gpt2_pool *pool = pool_new(nt);
                memset(out, 0xff, (size_t)T * N * sizeof(float)); /* NaN: overwritten, not accumulated into */
                kernel_matmul(pool, out, in, T, &m, NULL, 0, scratch, NULL);
                pool_free(pool);
                if (nt == 1) memcpy(out1, out, (size_t)T * N * sizeof(float));
                else if (layout < 2 && memcmp(out, out1, (size_t)T * N * sizeof(float)))
                    fail_msg("format %d, x8 %d: %d threads differ from 1", dt, x8, nt);
            }
            unsetenv("GPTSCOPE_GEMM");
            for (int t = 0; t < T; t++)
                for (int n = 0; n < N; n++) {
                    double s = 0, mag = 0;
                    for (int k = 0; k < K; k++) {
                        const double p = (double)in[(size_t)t * K + k] * w_f[(size_t)n * K + k];
                        s += p, mag += fabs(p);
                    }
                    const double err = fabs(out1[(size_t)t * N + n] - s) / (mag + 1e-30);
                    if (err > worst) worst = err;
                    if (err > 4e-6)
                        fail_msg("format %d, layout %d: out[%d][%d] = %.9g, float64 %.9g (error %.2g of the sum of "
                                 "|products| %.4g)", dt, layout, t, n, out1[(size_t)t * N + n], s, err, mag);
                }
            if (x8) free(data);
        }
        print_message("  format %d (K %d): prefill within %.1e of float64 (relative to the sum of |products|)\n", dt, K,
                      worst);
        free(w);
    }
    for (int i = 0; i < 3; i++) free(scratch[i]);
    free(in), free(row), free(w_f), free(out), free(out1);
}

/* kernel_softmax against float64's, at lengths around its 16 lanes, with the
 * maximum in every lane and in the tail, scores spread over 200 (a wrong
 * maximum would overflow exp) and masked -inf entries. */
static void test_softmax(void **state) {
    (void)state;
    static const int lens[] = {1, 2, 15, 16, 17, 31, 33, 64, 100, 513, 1000};
    float x[1000];
    double p[1000], worst = 0;
    uint64_t seed = 42;
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        const int n = lens[li];
        for (int at = 0; at < n; at += (n > 40 ? 7 : 1)) { /* where the maximum sits */
            for (int i = 0; i < n; i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                x[i] = (float)((double)(seed >> 40) / (1 << 24) * 200.0 - 150.0);
                if (i % 11 == 3 && i != at) x[i] = -INFINITY;
            }
            x[at] = 60.0f;
            double max = -INFINITY, sum = 0;
            for (int i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
            for (int i = 0; i < n; i++) sum += (p[i] = exp((double)x[i] - max));
            float d[1000]; /* x - max, whose float rounding (|x - max| 2^-24) exp turns into relative error */
            for (int i = 0; i < n; i++) d[i] = isinf(x[i]) ? 0 : fabsf(x[i] - (float)max);
            kernel_softmax(x, n);
            double total = 0;
            for (int i = 0; i < n; i++) {
                total += x[i];
                const double want = p[i] / sum, err = fabs(x[i] - want);
                if (!(err <= (2e-6 + d[i] * 1.2e-7) * want + 1e-30)) fail_msg("n %d, max at %d: p[%d] = %.9g, want %.9g", n, at, i, x[i], want);
                worst = fmax(worst, err / (want + 1e-30) / (1 + d[i]));
            }
            assert_true(fabs(total - 1.0) < 1e-5);
        }
    }
    print_message("softmax: worst relative error %.2e per unit of |x - max| + 1\n", worst);
}

int main(void) {
    /* as gpt2_context_new does; this call also keeps OpenBLAS linked for RTLD_NEXT */
    openblas_set_num_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_layout),
        cmocka_unit_test(test_packed_matmul),
        cmocka_unit_test(test_prefill_split_fixed),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_matmul_gelu),
        cmocka_unit_test(test_block_prefill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
