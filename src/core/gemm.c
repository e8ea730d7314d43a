/* gemm.c — register-tiled matrix products over the weights as stored (see gemm.h). */
#include "gemm.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define GEMM_X86 1
#include <immintrin.h>
#endif

/* A tile is MR rows of C by one 64-column panel. */
enum { P = KERNEL_PANEL_COLS, MR = 6, N_DT = 4 };

/* C (mr, 64) = C0 + A (mr, kc) @ B (kc, 64): rows of C ldc floats apart, of
 * A lda floats, of B ldb elements of B's dtype. C0 (float dtypes) by `init`:
 * C, bias (the row of 64; zeros for NULL), or C + bias, so that a matmul's
 * first K block writes its output without a pass to set it first. Q8: C +
 * scale (64, per column) * (A @ B), init unused (C holds C0). */
enum { INIT_C, INIT_BIAS, INIT_C_BIAS };
typedef void (*tile_fn)(float *C, size_t ldc, const float *A, size_t lda, const void *B, size_t ldb, int kc,
                        const float *scale, const float *bias, int init);

/* Element n of a row's C0 (see tile_fn). */
static inline float c0_of(const float *c, const float *bias, int init, int n) {
    if (init == INIT_C) return c[n];
    if (init == INIT_BIAS) return bias ? bias[n] : 0.0f;
    return c[n] + bias[n];
}

/* --- portable C ---------------------------------------------------------- */

static inline float load1(const void *b, gpt2_dtype dt, size_t i) {
    switch (dt) {
    case GPT2_DTYPE_F32: return ((const float *)b)[i];
    case GPT2_DTYPE_F16: return gpt2_f16_to_f32(((const uint16_t *)b)[i]);
    case GPT2_DTYPE_BF16: return gpt2_bf16_to_f32(((const uint16_t *)b)[i]);
    default: return (float)((const int8_t *)b)[i];
    }
}

static inline __attribute__((always_inline)) void tile_c(int mr, gpt2_dtype dt, float *C, size_t ldc, const float *A,
                                                         size_t lda, const void *B, size_t ldb, int kc,
                                                         const float *scale, const float *bias, int init) {
    for (int r = 0; r < mr; r++) {
        float acc[P], *c = C + r * ldc;
        for (int n = 0; n < P; n++) acc[n] = dt == GPT2_DTYPE_Q8 ? 0.0f : c0_of(c, bias, init, n);
        for (int k = 0; k < kc; k++) {
            const float a = A[r * lda + k];
            for (int n = 0; n < P; n++) acc[n] = fmaf(a, load1(B, dt, k * ldb + n), acc[n]); /* fused, as the vector tiles */
        }
        for (int n = 0; n < P; n++) c[n] = dt == GPT2_DTYPE_Q8 ? fmaf(scale[n], acc[n], c[n]) : acc[n];
    }
}

/* --- AVX-512: 6 x 64, 24 accumulators, the weights widened as loaded ------ */

#if GEMM_X86
#define AVX512 __attribute__((target("avx512f,fma,f16c")))
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

INLINE AVX512 __m512 load16(const void *b, gpt2_dtype dt, size_t i) {
    switch (dt) {
    case GPT2_DTYPE_F32: return _mm512_loadu_ps((const float *)b + i);
    case GPT2_DTYPE_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)b + i)));
    case GPT2_DTYPE_BF16: {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)b + i)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
    default:
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)((const int8_t *)b + i))));
    }
}

INLINE AVX512 __m512 c0_512(const float *c, const float *bias, int init) {
    if (init == INIT_C) return _mm512_loadu_ps(c);
    if (init == INIT_BIAS) return bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    return _mm512_add_ps(_mm512_loadu_ps(c), _mm512_loadu_ps(bias));
}

INLINE AVX512 void tile_512(int mr, gpt2_dtype dt, float *C, size_t ldc, const float *A, size_t lda, const void *B,
                            size_t ldb, int kc, const float *scale, const float *bias, int init) {
    __m512 acc[MR][4];
    for (int r = 0; r < mr; r++)
        for (int g = 0; g < 4; g++)
            acc[r][g] = dt == GPT2_DTYPE_Q8 ? _mm512_setzero_ps()
                                            : c0_512(C + r * ldc + 16 * g, bias ? bias + 16 * g : NULL, init);
    for (int k = 0; k < kc; k++) {
        __m512 w[4];
        for (int g = 0; g < 4; g++) w[g] = load16(B, dt, k * ldb + 16 * g);
        for (int r = 0; r < mr; r++) {
            const __m512 a = _mm512_set1_ps(A[r * lda + k]);
            for (int g = 0; g < 4; g++) acc[r][g] = _mm512_fmadd_ps(a, w[g], acc[r][g]);
        }
    }
    for (int r = 0; r < mr; r++)
        for (int g = 0; g < 4; g++) {
            float *c = C + r * ldc + 16 * g;
            if (dt == GPT2_DTYPE_Q8)
                _mm512_storeu_ps(c, _mm512_fmadd_ps(acc[r][g], _mm512_loadu_ps(scale + 16 * g), _mm512_loadu_ps(c)));
            else
                _mm512_storeu_ps(c, acc[r][g]);
        }
}

/* --- AVX2: 6 x 16, 12 accumulators, four strips per panel ----------------- */

INLINE AVX2 __m256 load8(const void *b, gpt2_dtype dt, size_t i) {
    switch (dt) {
    case GPT2_DTYPE_F32: return _mm256_loadu_ps((const float *)b + i);
    case GPT2_DTYPE_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)b + i)));
    case GPT2_DTYPE_BF16: {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)b + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    default:
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)((const int8_t *)b + i))));
    }
}

INLINE AVX2 __m256 c0_256(const float *c, const float *bias, int init) {
    if (init == INIT_C) return _mm256_loadu_ps(c);
    if (init == INIT_BIAS) return bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
    return _mm256_add_ps(_mm256_loadu_ps(c), _mm256_loadu_ps(bias));
}

INLINE AVX2 void tile_256(int mr, gpt2_dtype dt, float *C, size_t ldc, const float *A, size_t lda, const void *B,
                          size_t ldb, int kc, const float *scale, const float *bias, int init) {
    for (int s = 0; s < P; s += 16) {
        __m256 acc[MR][2];
        for (int r = 0; r < mr; r++)
            for (int g = 0; g < 2; g++)
                acc[r][g] = dt == GPT2_DTYPE_Q8 ? _mm256_setzero_ps()
                                                : c0_256(C + r * ldc + s + 8 * g, bias ? bias + s + 8 * g : NULL, init);
        for (int k = 0; k < kc; k++) {
            const __m256 w0 = load8(B, dt, k * ldb + s), w1 = load8(B, dt, k * ldb + s + 8);
            for (int r = 0; r < mr; r++) {
                const __m256 a = _mm256_broadcast_ss(A + r * lda + k);
                acc[r][0] = _mm256_fmadd_ps(a, w0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(a, w1, acc[r][1]);
            }
        }
        for (int r = 0; r < mr; r++)
            for (int g = 0; g < 2; g++) {
                float *c = C + r * ldc + s + 8 * g;
                if (dt == GPT2_DTYPE_Q8)
                    _mm256_storeu_ps(c, _mm256_fmadd_ps(acc[r][g], _mm256_loadu_ps(scale + s + 8 * g),
                                                        _mm256_loadu_ps(c)));
                else
                    _mm256_storeu_ps(c, acc[r][g]);
            }
    }
}
#endif

/* --- Q8 pair panels: integer products (gemm.h) ---------------------------- */

/* C (mr, 64) = fma(f, scale, C), f from X's rows (mr) and a panel B of K
 * rows (K / 2 pair rows of 128 bytes). */
typedef void (*q8_tile_fn)(float *C, size_t ldc, const quant_x *X, const int8_t *B, int K, const float *scale);
enum { Q8_MR = 3, PAIR = 2 * P };

/* The pair (q[k], q[k + 1]) of row X as one 32-bit lane (low half q[k]). */
static inline int32_t q_pair(const quant_x *X, int k) {
    int32_t v;
    memcpy(&v, X->q + k, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) void q8_tile_c(int mr, float *C, size_t ldc, const quant_x *X,
                                                            const int8_t *B, int K, const float *scale) {
    for (int r = 0; r < mr; r++)
        for (int n = 0; n < P; n++) {
            float f = 0.0f;
            for (int b = 0; b < K / 32; b++) {
                int32_t s = 0;
                for (int k = 32 * b; k < 32 * b + 32; k++)
                    s += (int32_t)X[r].q[k] * B[(size_t)(k / 2) * PAIR + 2 * n + k % 2];
                f = fmaf((float)s, X[r].d[b], f);
            }
            C[r * ldc + n] = fmaf(f, scale[n], C[r * ldc + n]);
        }
}

#if GEMM_X86
#define AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,fma")))

/* mr x 64: per row 4 integer and 4 float accumulators (24 + 4 weights at mr = 3). */
INLINE AVX512_VNNI void q8_tile_512(int mr, float *C, size_t ldc, const quant_x *X, const int8_t *B, int K,
                                    const float *scale) {
    __m512 f[Q8_MR][4];
    for (int r = 0; r < mr; r++)
        for (int g = 0; g < 4; g++) f[r][g] = _mm512_setzero_ps();
    for (int b = 0; b < K / 32; b++) {
        __m512i s[Q8_MR][4];
        for (int r = 0; r < mr; r++)
            for (int g = 0; g < 4; g++) s[r][g] = _mm512_setzero_si512();
        const int8_t *w = B + (size_t)b * 16 * PAIR;
        for (int p = 0; p < 16; p++, w += PAIR) {
            __m512i wv[4];
            for (int g = 0; g < 4; g++) wv[g] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(w + 32 * g)));
            for (int r = 0; r < mr; r++) {
                const __m512i x = _mm512_set1_epi32(q_pair(&X[r], 32 * b + 2 * p));
                for (int g = 0; g < 4; g++) s[r][g] = _mm512_dpwssd_epi32(s[r][g], wv[g], x);
            }
        }
        for (int r = 0; r < mr; r++) {
            const __m512 d = _mm512_set1_ps(X[r].d[b]);
            for (int g = 0; g < 4; g++) f[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][g]), d, f[r][g]);
        }
    }
    for (int r = 0; r < mr; r++)
        for (int g = 0; g < 4; g++) {
            float *c = C + r * ldc + 16 * g;
            _mm512_storeu_ps(c, _mm512_fmadd_ps(f[r][g], _mm512_loadu_ps(scale + 16 * g), _mm512_loadu_ps(c)));
        }
}

/* mr x 16, four strips per panel: vpmaddwd's pair sums added up. */
INLINE AVX2 void q8_tile_256(int mr, float *C, size_t ldc, const quant_x *X, const int8_t *B, int K,
                             const float *scale) {
    for (int s0 = 0; s0 < P; s0 += 16) {
        __m256 f[Q8_MR][2];
        for (int r = 0; r < mr; r++) f[r][0] = f[r][1] = _mm256_setzero_ps();
        for (int b = 0; b < K / 32; b++) {
            __m256i s[Q8_MR][2];
            for (int r = 0; r < mr; r++) s[r][0] = s[r][1] = _mm256_setzero_si256();
            const int8_t *w = B + (size_t)b * 16 * PAIR + 2 * s0;
            for (int p = 0; p < 16; p++, w += PAIR) {
                const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w));
                const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 16)));
                for (int r = 0; r < mr; r++) {
                    const __m256i x = _mm256_set1_epi32(q_pair(&X[r], 32 * b + 2 * p));
                    s[r][0] = _mm256_add_epi32(s[r][0], _mm256_madd_epi16(w0, x));
                    s[r][1] = _mm256_add_epi32(s[r][1], _mm256_madd_epi16(w1, x));
                }
            }
            for (int r = 0; r < mr; r++) {
                const __m256 d = _mm256_set1_ps(X[r].d[b]);
                for (int g = 0; g < 2; g++) f[r][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][g]), d, f[r][g]);
            }
        }
        for (int r = 0; r < mr; r++)
            for (int g = 0; g < 2; g++) {
                float *c = C + r * ldc + s0 + 8 * g;
                _mm256_storeu_ps(c, _mm256_fmadd_ps(f[r][g], _mm256_loadu_ps(scale + s0 + 8 * g), _mm256_loadu_ps(c)));
            }
    }
}
#endif

#define Q8_ARGS float *C, size_t ldc, const quant_x *X, const int8_t *B, int K, const float *scale
#define Q8_PASS C, ldc, X, B, K, scale
#define Q8_ROWS(isa, attr, body)                                                                                    \
    static attr void isa##_q8p_1(Q8_ARGS) { body(1, Q8_PASS); }                                                    \
    static attr void isa##_q8p_2(Q8_ARGS) { body(2, Q8_PASS); }                                                    \
    static attr void isa##_q8p_3(Q8_ARGS) { body(3, Q8_PASS); }                                                    \
    static const q8_tile_fn isa##_q8p[Q8_MR + 1] = {NULL, isa##_q8p_1, isa##_q8p_2, isa##_q8p_3};

Q8_ROWS(c, , q8_tile_c)
#if GEMM_X86
Q8_ROWS(avx512, AVX512_VNNI, q8_tile_512)
Q8_ROWS(avx2, AVX2, q8_tile_256)
#endif

/* --- one function per (ISA, dtype, rows): constants folded, registers named --- */

#define TILE_ARGS                                                                                                   \
    float *C, size_t ldc, const float *A, size_t lda, const void *B, size_t ldb, int kc, const float *scale,       \
        const float *bias, int init
#define TILE_PASS C, ldc, A, lda, B, ldb, kc, scale, bias, init
#define TILE_ROWS(isa, attr, body, dt, tag)                                                                         \
    static attr void isa##_##tag##_1(TILE_ARGS) { body(1, dt, TILE_PASS); }                                        \
    static attr void isa##_##tag##_2(TILE_ARGS) { body(2, dt, TILE_PASS); }                                        \
    static attr void isa##_##tag##_3(TILE_ARGS) { body(3, dt, TILE_PASS); }                                        \
    static attr void isa##_##tag##_4(TILE_ARGS) { body(4, dt, TILE_PASS); }                                        \
    static attr void isa##_##tag##_5(TILE_ARGS) { body(5, dt, TILE_PASS); }                                        \
    static attr void isa##_##tag##_6(TILE_ARGS) { body(6, dt, TILE_PASS); }
#define TILE_ISA(isa, attr, body)                                                                                   \
    TILE_ROWS(isa, attr, body, GPT2_DTYPE_F32, f32)                                                                 \
    TILE_ROWS(isa, attr, body, GPT2_DTYPE_F16, f16)                                                                 \
    TILE_ROWS(isa, attr, body, GPT2_DTYPE_BF16, bf16)                                                               \
    TILE_ROWS(isa, attr, body, GPT2_DTYPE_Q8, q8)
#define ROWS_OF(isa, tag) {NULL, isa##_##tag##_1, isa##_##tag##_2, isa##_##tag##_3, isa##_##tag##_4, isa##_##tag##_5, isa##_##tag##_6}
/* indexed [dtype][rows]: F32, F16, BF16, Q8 (gpt2_dtype's order) */
#define TABLE_OF(isa) {ROWS_OF(isa, f32), ROWS_OF(isa, f16), ROWS_OF(isa, bf16), ROWS_OF(isa, q8)}

TILE_ISA(c, , tile_c)
static const tile_fn tiles_c[N_DT][MR + 1] = TABLE_OF(c);
#if GEMM_X86
TILE_ISA(avx512, AVX512, tile_512)
TILE_ISA(avx2, AVX2, tile_256)
static const tile_fn tiles_avx512[N_DT][MR + 1] = TABLE_OF(avx512);
static const tile_fn tiles_avx2[N_DT][MR + 1] = TABLE_OF(avx2);
#endif

typedef struct {
    const char *name;
    const tile_fn (*tiles)[MR + 1];
    const q8_tile_fn *q8;
} gemm_kernel;

static const gemm_kernel k_c = {"c", tiles_c, c_q8p};
#if GEMM_X86
/* AVX-512 without VNNI (Skylake-SP) takes q8's integer products from AVX2. */
static const gemm_kernel k_512 = {"avx512", tiles_avx512, avx512_q8p}, k_512_no_vnni = {"avx512", tiles_avx512, avx2_q8p},
                         k_256 = {"avx2", tiles_avx2, avx2_q8p};
#endif
static const gemm_kernel *_Atomic forced; /* gemm_force_kernel's, for tests */

#if GEMM_X86
static const gemm_kernel *avx512_kernel(void) {
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx2")) return NULL;
    return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni") ? &k_512 : &k_512_no_vnni;
}
#endif

/* The widest kernel this CPU runs (cpuid, and the OS saving its registers). */
static const gemm_kernel *kernel(void) {
    const gemm_kernel *f = forced;
    if (f) return f;
#if GEMM_X86
    if (avx512_kernel()) return avx512_kernel();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &k_256;
#endif
    return &k_c;
}

const char *gemm_kernel_name(void) { return kernel()->name; }

int gemm_force_kernel(const char *name) {
    const gemm_kernel *k = NULL;
    if (!name) k = NULL;
    else if (strcmp(name, "c") == 0) k = &k_c;
#if GEMM_X86
    else if (strcmp(name, "avx512") == 0 && avx512_kernel()) k = avx512_kernel();
    else if (strcmp(name, "avx2") == 0 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) k = &k_256;
#endif
    else return 0;
    forced = k;
    return 1;
}

int gemm_own(void) {
    const char *s = getenv("GPTSCOPE_GEMM");
    return !(s && strcmp(s, "blas") == 0);
}

int gemm_fits(const gpt2_matrix *W) {
    return (W->dtype <= GPT2_DTYPE_BF16 || W->dtype == GPT2_DTYPE_Q8) && !W->trans && W->cols % P == 0 &&
           (W->dtype != GPT2_DTYPE_Q8 || !W->packed);
}

/* K block: a tile's A rows (6 x 256 floats, 6 KB) stay in L1 while it walks
 * the chunk's panels, whose 256 rows (F32: 64 KB a panel) come from L2.
 * Measured single-threaded on the four GPT-2 shapes at T = 512: KC 64: 64,
 * 128: 76, 256: 83, 512: 82 GFLOP/s; panels outer instead of tiles outer:
 * 1-3% slower. Q8 takes all of K at once: its chains start from zero and
 * are scaled once at the end. */
enum { KC = 256 };

/* C (T, nn) = (accumulate ? C : 0) + bias for Q8, whose tiles add to C. */
static void set_c0(float *C, int ldc, int T, const float *bias, int nn, int accumulate) {
    for (int t = 0; t < T; t++) {
        float *c = C + (size_t)t * ldc;
        if (!accumulate)
            for (int n = 0; n < nn; n++) c[n] = bias ? bias[n] : 0.0f;
        else if (bias)
            for (int n = 0; n < nn; n++) c[n] += bias[n];
    }
}

void gemm_cols(float *C, int ldc, const float *A, int T, const gpt2_matrix *W, int n0, int nn, const float *bias,
               int accumulate) {
    const tile_fn(*tiles)[MR + 1] = kernel()->tiles;
    const gpt2_dtype dt = W->dtype;
    const int K = W->rows;
    const size_t es = gpt2_dtype_size(dt);
    const int kc = dt == GPT2_DTYPE_Q8 ? K : KC;
    if (dt == GPT2_DTYPE_Q8) set_c0(C, ldc, T, bias ? bias + n0 : NULL, nn, accumulate);
    for (int k0 = 0; k0 < K; k0 += kc) {
        /* the first K block starts from C0 (tile_fn); C + 0 is C, so no bias and
         * accumulate is INIT_C; the same floats as setting C0 in a pass first */
        const int init = k0 > 0 ? INIT_C : !accumulate ? INIT_BIAS : bias ? INIT_C_BIAS : INIT_C;
        const int kk = K - k0 < kc ? K - k0 : kc;
        for (int t = 0; t < T; t += MR) {
            const int mr = T - t < MR ? T - t : MR;
            for (int n = 0; n < nn; n += P) {
                const char *B; /* (kk, 64) of W from (k0, n0 + n) */
                size_t ldb;
                if (W->packed) B = (const char *)W->data + kernel_packed_index(K, k0, n0 + n) * es, ldb = P;
                else B = (const char *)W->data + ((size_t)k0 * W->cols + n0 + n) * es, ldb = (size_t)W->cols;
                tiles[dt][mr](C + (size_t)t * ldc + n, (size_t)ldc, A + (size_t)t * K + k0, (size_t)K, B, ldb, kk,
                              dt == GPT2_DTYPE_Q8 ? W->scale + n0 + n : NULL, bias ? bias + n0 + n : NULL, init);
            }
        }
    }
}

void gemm_panel(float *C, int ldc, const float *A, int lda, int T, const float *B, int kk) {
    const tile_fn *tiles = kernel()->tiles[GPT2_DTYPE_F32];
    for (int t = 0; t < T; t += MR) {
        const int mr = T - t < MR ? T - t : MR;
        tiles[mr](C + (size_t)t * ldc, (size_t)ldc, A + (size_t)t * lda, (size_t)lda, B, P, kk, NULL, NULL, INIT_C);
    }
}

void gemm_q8_cols(float *C, int ldc, const quant_x *X, int T, const gpt2_matrix *W, int n0, int nn) {
    const q8_tile_fn *tiles = kernel()->q8;
    const int K = W->rows;
    for (int t = 0; t < T; t += Q8_MR) {
        const int mr = T - t < Q8_MR ? T - t : Q8_MR;
        for (int n = 0; n < nn; n += P)
            tiles[mr](C + (size_t)t * ldc + n, (size_t)ldc, X + t,
                      (const int8_t *)W->data + kernel_q8_packed_index(K, 0, n0 + n), K, W->scale + n0 + n);
    }
}
