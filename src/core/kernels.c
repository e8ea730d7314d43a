/* kernels.c — matmuls over mapped weights of any supported dtype, layernorm, GELU, softmax. */
#include "kernels.h"

#include "fastmath.h"
#include "gemm.h"
#include "quant.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* AVX-512 where the build targets it, else AVX2 with FMA and F16C (8-wide),
 * else scalar C. */
#if defined(__AVX512F__)
#include <immintrin.h>
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define KERNEL_AVX2 1
#endif

/* --- dtype conversion --------------------------------------------------- */

float gpt2_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | man << 13; /* inf / nan */
    } else if (exp != 0) {
        bits = sign | (exp + 112) << 23 | man << 13;
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400));
        bits = sign | (uint32_t)(112 - e) << 23 | (man & 0x3ff) << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float gpt2_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t gpt2_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(x >> 16 | 0x40); /* quiet nan */
    x += 0x7fffu + (x >> 16 & 1);
    return (uint16_t)(x >> 16);
}

uint16_t gpt2_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = x >> 16 & 0x8000, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00);
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
    if (ax < 0x38800000u) {                                  /* subnormal or zero in f16 */
        if (ax < 0x33000000u) return (uint16_t)sign;
        uint32_t e = ax >> 23, man = (ax & 0x7fffff) | 0x800000, shift = 126 - e;
        uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ax - 0x38000000u; /* rebias exponent 127 -> 15 */
    r += 0xfffu + (r >> 13 & 1);
    return (uint16_t)(sign | r >> 13);
}

/* dst (n) = widen(src (n)); Q8 without its scale. */
static void widen(float *dst, const void *src, gpt2_dtype dt, size_t n) {
    size_t i = 0;
    if (dt == GPT2_DTYPE_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    if (dt == GPT2_DTYPE_Q8) {
        const int8_t *q = src;
#if defined(__AVX512F__)
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(dst + i, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + i)))));
#elif defined(KERNEL_AVX2)
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i)))));
#endif
        for (; i < n; i++) dst[i] = (float)q[i];
        return;
    }
    const uint16_t *s = src;
    if (dt == GPT2_DTYPE_F16) {
#if defined(__AVX512F__)
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
#elif defined(KERNEL_AVX2)
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
#endif
        for (; i < n; i++) dst[i] = gpt2_f16_to_f32(s[i]);
    } else {
#if defined(__AVX512F__)
        for (; i + 16 <= n; i += 16) {
            __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i)));
            _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
        }
#elif defined(KERNEL_AVX2)
        for (; i + 8 <= n; i += 8) {
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
            _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
#endif
        for (; i < n; i++) dst[i] = gpt2_bf16_to_f32(s[i]);
    }
}

/* dst (nn) = columns [n0, n0 + nn) of row k of W, widened; Q8 without its
 * scale. Packed: n0 and nn are multiples of the panel width. */
static void widen_segment(float *dst, const gpt2_matrix *W, int k, int n0, int nn) {
    const size_t es = gpt2_dtype_size(W->dtype);
    const char *data = W->data;
    if (!W->packed) {
        widen(dst, data + ((size_t)k * W->cols + n0) * es, W->dtype, (size_t)nn);
        return;
    }
    if (W->dtype == GPT2_DTYPE_Q8 && W->trans) { /* an embedding, stored as its transpose (kernels.h) */
        for (int i = 0; i < nn; i++) dst[i] = (float)((const int8_t *)data)[kernel_q8_packed_index(W->cols, n0 + i, k)];
        return;
    }
    if (W->dtype == GPT2_DTYPE_Q8) {
        for (int i = 0; i < nn; i++) dst[i] = (float)((const int8_t *)data)[kernel_q8_packed_index(W->rows, k, n0 + i)];
        return;
    }
    for (int i = 0; i < nn; i += KERNEL_PANEL_COLS)
        widen(dst + i, data + kernel_packed_index(W->rows, k, n0 + i) * es, W->dtype, KERNEL_PANEL_COLS);
}

/* Row r of a row-scaled matrix (wte), widened, into dst (cols). */
static void widen_row(float *dst, const gpt2_matrix *m, int r) {
    widen_segment(dst, m, r, 0, m->cols);
    if (m->dtype == GPT2_DTYPE_Q8)
        for (int i = 0; i < m->cols; i++) dst[i] *= m->scale[r];
}

int kernel_packable(const gpt2_matrix *m) {
    return (m->dtype <= GPT2_DTYPE_BF16 || (m->dtype == GPT2_DTYPE_Q8 && m->rows % 32 == 0)) &&
           m->cols % KERNEL_PANEL_COLS == 0;
}

size_t kernel_matrix_bytes(const gpt2_matrix *m) {
    if (!quant_is_block(m->dtype)) return (size_t)m->rows * m->cols * gpt2_dtype_size(m->dtype);
    const int stored_rows = m->trans ? m->cols : m->rows, row = m->trans ? m->rows : m->cols;
    if (m->packed) return quant_x8_bytes(m->dtype, stored_rows, row);
    return (size_t)stored_rows * quant_row_bytes(m->dtype, (size_t)row);
}

/* Element (k, n) of a (K, N) matrix stored transposed, (N, K) row-major, copied
 * to dst's element d: tile by tile, each tile's source rows read in order. */
static void transpose_tiles(char *dst, const gpt2_matrix *src, int packed) {
    const size_t es = gpt2_dtype_size(src->dtype);
    const int K = src->rows, N = src->cols, tile = KERNEL_PANEL_COLS;
    const char *from = src->data; /* (N, K) */
    for (int n0 = 0; n0 < N; n0 += tile)
        for (int k0 = 0; k0 < K; k0 += tile) {
            const int n1 = n0 + tile < N ? n0 + tile : N, k1 = k0 + tile < K ? k0 + tile : K;
            for (int n = n0; n < n1; n++) {
                const char *row = from + ((size_t)n * K) * es;
                for (int k = k0; k < k1; k++) {
                    size_t d = packed ? kernel_packed_index(K, k, n) : (size_t)k * N + n;
                    if (es == 4) memcpy(dst + d * 4, row + (size_t)k * 4, 4);
                    else memcpy(dst + d * 2, row + (size_t)k * 2, 2);
                }
            }
        }
}

void kernel_pack(void *dst, const gpt2_matrix *src) {
    if (src->trans) {
        transpose_tiles(dst, src, 1);
        return;
    }
    const size_t es = gpt2_dtype_size(src->dtype), run = KERNEL_PANEL_COLS * es;
    const char *from = src->data;
    if (src->dtype == GPT2_DTYPE_Q8) {
        for (int k = 0; k < src->rows; k++)
            for (int n = 0; n < src->cols; n++)
                ((char *)dst)[kernel_q8_packed_index(src->rows, k, n)] = from[(size_t)k * src->cols + n];
        return;
    }
    for (int n = 0; n < src->cols; n += KERNEL_PANEL_COLS) /* panel by panel: writes in order */
        for (int k = 0; k < src->rows; k++)
            memcpy((char *)dst + kernel_packed_index(src->rows, k, n) * es, from + ((size_t)k * src->cols + n) * es,
                   run);
}

void kernel_copy_transposed(void *dst, const gpt2_matrix *src) { transpose_tiles(dst, src, 0); }

void kernel_row(float *dst, const gpt2_matrix *m, int r) {
    if (quant_is_block(m->dtype) && m->packed)
        quant_x8_dequantize(m->dtype, (const char *)m->data + (size_t)(r / 8) * quant_x8_group_bytes(m->dtype, m->cols),
                            m->cols, r % 8, dst);
    else if (quant_is_block(m->dtype))
        quant_dequantize_row(m->dtype, (const char *)m->data + (size_t)r * quant_row_bytes(m->dtype, (size_t)m->cols),
                             dst, m->cols);
    else
        widen_row(dst, m, r);
}

void kernel_widen(float *dst, float *tmp, const gpt2_matrix *W) {
    const int K = W->rows, N = W->cols;
    if (W->trans) { /* stored by output: N rows of K, each dequantized whole */
        gpt2_matrix by_row = *W;
        by_row.rows = N, by_row.cols = K, by_row.trans = 0;
        for (int n = 0; n < N; n++) {
            kernel_row(tmp, &by_row, n);
            for (int k = 0; k < K; k++) dst[(size_t)k * N + n] = tmp[k];
        }
        return;
    }
    for (int k = 0; k < K; k++) {
        float *row = dst + (size_t)k * N;
        if (quant_is_block(W->dtype)) {
            kernel_row(row, W, k);
            continue;
        }
        widen_segment(row, W, k, 0, N);
        if (W->dtype == GPT2_DTYPE_Q8)
            for (int n = 0; n < N; n++) row[n] *= W->scale[n];
    }
}

/* --- weight-streaming kernels (decode, and a few positions at once) --------
 *
 * For T <= KERNEL_SMALL_T positions the kernels read each weight once and use
 * it for all T positions, so a speculative verification pass over K + 1
 * positions costs about one weight read, not K + 1. Each position's sums run
 * in exactly the order of the one-position kernel: evaluating T tokens in one
 * call gives the same floats, bit for bit, as evaluating them one at a time. */

#if defined(__AVX512F__)
static inline __m512 load16(const void *w, gpt2_dtype dt, size_t i) {
    if (dt == GPT2_DTYPE_F32) return _mm512_loadu_ps((const float *)w + i);
    if (dt == GPT2_DTYPE_Q8)
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)((const int8_t *)w + i))));
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i));
    if (dt == GPT2_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#elif defined(KERNEL_AVX2)
static inline __m256 load8(const void *w, gpt2_dtype dt, size_t i) {
    if (dt == GPT2_DTYPE_F32) return _mm256_loadu_ps((const float *)w + i);
    if (dt == GPT2_DTYPE_Q8)
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)((const int8_t *)w + i))));
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (dt == GPT2_DTYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* the sum of v's 8 lanes: halves, then pairs, then the last two */
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
#endif

static inline float load1(const void *w, gpt2_dtype dt, size_t i) {
    if (dt == GPT2_DTYPE_F32) return ((const float *)w)[i];
    if (dt == GPT2_DTYPE_Q8) return (float)((const int8_t *)w)[i];
    uint16_t h = ((const uint16_t *)w)[i];
    return dt == GPT2_DTYPE_F16 ? gpt2_f16_to_f32(h) : gpt2_bf16_to_f32(h);
}

/* y (T, N) += x (T, K)[:, k0:k1] @ W[k0:k1, :] for W (K, N), rows of x and y
 * K and N apart: a contiguous block of W read in memory order, eight rows per
 * pass, each 16-column tile widened once and applied to all T positions.
 * Inlined with a constant T = 1 for decode, so that case stays lean. */
static inline __attribute__((always_inline)) void gemv_kn_body(float *y, const float *x, int T, const gpt2_matrix *W,
                                                               int k0, int k1) {
    enum { R = 8 };
    const int N = W->cols;
    const size_t ld = (size_t)N, K = (size_t)W->rows;
    const gpt2_dtype dt = W->dtype;
    int k = k0;
    for (; k + R <= k1; k += R) {
        const size_t base = (size_t)k * ld;
        int n = 0;
#if defined(__AVX512F__)
        /* Prefetch the next block of rows while this one streams: eight
         * strided streams are more than the hardware prefetcher runs ahead on
         * (measured: +25% decode for 16-bit weights, +10% for F32). */
        const size_t es = gpt2_dtype_size(dt), row_bytes = ld * es;
        const char *next = (const char *)W->data + (base + R * ld) * es;
        const int prefetch = k + 2 * R <= k1;
        for (; n + 16 <= N; n += 16) {
            __m512 w[R];
            for (int r = 0; r < R; r++) w[r] = load16(W->data, dt, base + r * ld + n);
            for (int t = 0; t < T; t++) {
                const float *xt = x + t * K + k;
                float *yt = y + t * ld + n;
                __m512 acc = _mm512_loadu_ps(yt);
                for (int r = 0; r < R; r++) acc = _mm512_fmadd_ps(_mm512_set1_ps(xt[r]), w[r], acc);
                _mm512_storeu_ps(yt, acc);
            }
            if (prefetch && ((n * es) & 63) == 0) /* once per cache line */
                for (int r = 0; r < R; r++) _mm_prefetch(next + r * row_bytes + n * es, _MM_HINT_T1);
        }
#elif defined(KERNEL_AVX2) /* the same, 8 columns a tile */
        const size_t es = gpt2_dtype_size(dt), row_bytes = ld * es;
        const char *next = (const char *)W->data + (base + R * ld) * es;
        const int prefetch = k + 2 * R <= k1;
        for (; n + 8 <= N; n += 8) {
            __m256 w[R];
            for (int r = 0; r < R; r++) w[r] = load8(W->data, dt, base + r * ld + n);
            for (int t = 0; t < T; t++) {
                const float *xt = x + t * K + k;
                float *yt = y + t * ld + n;
                __m256 acc = _mm256_loadu_ps(yt);
                for (int r = 0; r < R; r++) acc = _mm256_fmadd_ps(_mm256_set1_ps(xt[r]), w[r], acc);
                _mm256_storeu_ps(yt, acc);
            }
            if (prefetch && ((n * es) & 63) == 0)
                for (int r = 0; r < R; r++) _mm_prefetch(next + r * row_bytes + n * es, _MM_HINT_T1);
        }
#endif
        for (; n < N; n++)
            for (int t = 0; t < T; t++) {
                float acc = y[t * ld + n];
                for (int r = 0; r < R; r++) acc += x[t * K + k + r] * load1(W->data, dt, base + r * ld + n);
                y[t * ld + n] = acc;
            }
    }
    for (; k < k1; k++)
        for (int t = 0; t < T; t++)
            for (int n = 0; n < N; n++) y[t * ld + n] += x[t * K + k] * load1(W->data, dt, (size_t)k * ld + n);
}

/* y (NT, 64) = x (NT, K) @ W[:, panel's 64 columns] for a packed W (K, N),
 * y's rows 64 apart: the panel is read row after row, in memory order, into
 * 4 x NT accumulators that stay in registers. Each sum is one chain over
 * k = 0 .. K-1 whatever NT, so any T gives the same bits as T = 1. */
static inline __attribute__((always_inline)) void gemv_panel_rows(float *y, const float *x, int NT,
                                                                  const gpt2_matrix *W, int panel) {
    enum { P = KERNEL_PANEL_COLS, G = KERNEL_TILE_COLS, NG = P / G, MAX_NT = 4 };
    const int K = W->rows;
    const gpt2_dtype dt = W->dtype;
    const size_t p0 = (size_t)panel * K * P;
#if defined(__AVX512F__)
    __m512 acc[MAX_NT][NG];
    for (int t = 0; t < NT; t++)
        for (int g = 0; g < NG; g++) acc[t][g] = _mm512_setzero_ps();
    for (int k = 0; k < K; k++) {
        const size_t row = p0 + (size_t)k * P;
        __m512 w[NG];
        for (int g = 0; g < NG; g++) w[g] = load16(W->data, dt, row + g * G);
        for (int t = 0; t < NT; t++) {
            const __m512 xv = _mm512_set1_ps(x[(size_t)t * K + k]);
            for (int g = 0; g < NG; g++) acc[t][g] = _mm512_fmadd_ps(xv, w[g], acc[t][g]);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int g = 0; g < NG; g++) _mm512_storeu_ps(y + t * P + g * G, acc[t][g]);
#elif defined(KERNEL_AVX2)
    /* 8-column groups, NB of them at a time, so that NT x NB accumulators and
     * NB weights fit AVX2's 16 registers; in blocks of KB rows, so that the
     * other groups find a block's rows in L1 rather than read them again
     * from memory. The sums wait in y between blocks: each is still one chain
     * over k = 0 .. K-1. */
    enum { KB = 64 };
    const int NB = NT == 1 ? 8 : NT == 2 ? 4 : 2;
    (void)NG;
    for (int k0 = 0; k0 < K; k0 += KB) {
        const int k1 = k0 + KB < K ? k0 + KB : K;
        for (int c0 = 0; c0 < P; c0 += 8 * NB) {
            __m256 acc[MAX_NT][8];
            for (int t = 0; t < NT; t++)
                for (int g = 0; g < NB; g++)
                    acc[t][g] = k0 ? _mm256_loadu_ps(y + t * P + c0 + g * 8) : _mm256_setzero_ps();
            for (int k = k0; k < k1; k++) {
                const size_t row = p0 + (size_t)k * P + c0;
                __m256 w[8];
                for (int g = 0; g < NB; g++) w[g] = load8(W->data, dt, row + g * 8);
                for (int t = 0; t < NT; t++) {
                    const __m256 xv = _mm256_set1_ps(x[(size_t)t * K + k]);
                    for (int g = 0; g < NB; g++) acc[t][g] = _mm256_fmadd_ps(xv, w[g], acc[t][g]);
                }
            }
            for (int t = 0; t < NT; t++)
                for (int g = 0; g < NB; g++) _mm256_storeu_ps(y + t * P + c0 + g * 8, acc[t][g]);
        }
    }
#else
    for (int t = 0; t < NT; t++)
        for (int c = 0; c < P; c++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc += x[(size_t)t * K + k] * load1(W->data, dt, p0 + (size_t)k * P + c);
            y[t * P + c] = acc;
        }
#endif
}

/* gemv_panel_rows for any T: groups of up to four positions, the panel read
 * once per group (from cache after the first). */
static void gemv_panel(float *y, const float *x, int T, const gpt2_matrix *W, int panel) {
    enum { P = KERNEL_PANEL_COLS };
    const size_t K = (size_t)W->rows;
    int t = 0;
    for (; t + 4 <= T; t += 4) gemv_panel_rows(y + t * P, x + t * K, 4, W, panel);
    switch (T - t) {
    case 3: gemv_panel_rows(y + t * P, x + t * K, 3, W, panel); break;
    case 2: gemv_panel_rows(y + t * P, x + t * K, 2, W, panel); break;
    case 1: gemv_panel_rows(y + t * P, x + t * K, 1, W, panel); break;
    }
}

static void gemv_kn(float *y, const float *x, int T, const gpt2_matrix *W, int k0, int k1) {
    if (T == 1) gemv_kn_body(y, x, 1, W, k0, k1);
    else gemv_kn_body(y, x, T, W, k0, k1);
}

/* y[t, n] = dot(W[n, :], x[t, :]) for n in [n0, n1), W (N, K), y's rows ldy
 * apart: one row of W at a time, so that W is read strictly in memory order
 * (the row stays in L1 for the other positions); four accumulators per dot. */
static void gemv_nk(float *y, int ldy, const float *x, int T, const gpt2_matrix *W, int n0, int n1) {
    const size_t K = (size_t)W->cols;
    const gpt2_dtype dt = W->dtype;
    for (int n = n0; n < n1; n++) {
        const size_t r = (size_t)n * K;
        for (int t = 0; t < T; t++) {
            const float *xt = x + t * K;
            size_t k = 0;
            float s = 0.0f;
#if defined(__AVX512F__)
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (; k + 64 <= K; k += 64) {
                a0 = _mm512_fmadd_ps(load16(W->data, dt, r + k), _mm512_loadu_ps(xt + k), a0);
                a1 = _mm512_fmadd_ps(load16(W->data, dt, r + k + 16), _mm512_loadu_ps(xt + k + 16), a1);
                a2 = _mm512_fmadd_ps(load16(W->data, dt, r + k + 32), _mm512_loadu_ps(xt + k + 32), a2);
                a3 = _mm512_fmadd_ps(load16(W->data, dt, r + k + 48), _mm512_loadu_ps(xt + k + 48), a3);
            }
            for (; k + 16 <= K; k += 16)
                a0 = _mm512_fmadd_ps(load16(W->data, dt, r + k), _mm512_loadu_ps(xt + k), a0);
            s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
#elif defined(KERNEL_AVX2)
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (; k + 32 <= K; k += 32) {
                a0 = _mm256_fmadd_ps(load8(W->data, dt, r + k), _mm256_loadu_ps(xt + k), a0);
                a1 = _mm256_fmadd_ps(load8(W->data, dt, r + k + 8), _mm256_loadu_ps(xt + k + 8), a1);
                a2 = _mm256_fmadd_ps(load8(W->data, dt, r + k + 16), _mm256_loadu_ps(xt + k + 16), a2);
                a3 = _mm256_fmadd_ps(load8(W->data, dt, r + k + 24), _mm256_loadu_ps(xt + k + 24), a3);
            }
            for (; k + 8 <= K; k += 8) a0 = _mm256_fmadd_ps(load8(W->data, dt, r + k), _mm256_loadu_ps(xt + k), a0);
            s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
#endif
            for (; k < K; k++) s += load1(W->data, dt, r + k) * xt[k];
            y[(size_t)t * ldy + n] = dt == GPT2_DTYPE_Q8 ? s * W->scale[n] : s;
        }
    }
}

/* --- matmuls, split over the pool ----------------------------------------- */

typedef struct {
    float *out;
    int ldo;
    const float *in;
    int T;
    const gpt2_matrix *W;
    const float *bias;
    int accumulate;
    float **scratch; /* one KERNEL_SCRATCH_FLOATS buffer per thread (16-bit weights) */
    float *partials; /* (KERNEL_DECODE_CHUNKS, T, N) for weight-streaming matmuls */
    const quant_x *xq; /* (T) the inputs quantized, for Q8 packed W */
    int n_out;         /* Q8 LM head: the outputs kept (V) of W's padded columns */
    int gelu;          /* GELU_* on the outputs, by the chunk that made them */
} matmul_job;

enum { GELU_NONE, GELU_TANH, GELU_ERF };

/* x[t, n0:n0+nn] = gelu(...) for t < T, rows ld apart: elementwise, so a
 * chunk's columns come out as a whole-row pass makes them. */
static void gelu_block(float *x, int ld, int T, int n0, int nn, int kind) {
    for (int t = 0; t < T; t++) {
        float *r = x + (size_t)t * ld + n0;
        if (kind == GELU_ERF) kernel_gelu_erf(r, (size_t)nn);
        else kernel_gelu_tanh(r, r, (size_t)nn);
    }
}

/* T <= KERNEL_SMALL_T positions: chunk c sums its block of rows of W into
 * partials[c] (T, N). */
static void matvec_part(void *arg, int chunk, int n_chunks, int ith) {
    const matmul_job *j = arg;
    int k0, k1;
    (void)ith;
    pool_share(j->W->rows, 8, chunk, n_chunks, &k0, &k1);
    const size_t size = (size_t)j->T * j->W->cols;
    float *part = j->partials + (size_t)chunk * size;
    memset(part, 0, size * sizeof(float));
    gemv_kn(part, j->in, j->T, j->W, k0, k1);
}

/* T <= KERNEL_SMALL_T positions, packed W: chunk c computes panel c's 64
 * columns over all rows and writes them out, so no thread waits for another's
 * partial sums, and the result does not depend on the thread count. */
static void matvec_panel(void *arg, int chunk, int n_chunks, int ith) {
    enum { P = KERNEL_PANEL_COLS };
    const matmul_job *j = arg;
    const int N = j->W->cols, n0 = chunk * P;
    float sum[KERNEL_SMALL_T * P];
    (void)n_chunks, (void)ith;
    gemv_panel(sum, j->in, j->T, j->W, chunk);
    for (int t = 0; t < j->T; t++) {
        float *o = j->out + (size_t)t * N + n0;
        for (int n = 0; n < P; n++) {
            float v = j->accumulate ? o[n] : 0.0f;
            if (j->bias) v += j->bias[n0 + n];
            o[n] = v + sum[t * P + n];
        }
    }
    if (j->gelu) gelu_block(j->out, N, j->T, n0, P, j->gelu);
}

/* Chunks: weight streaming splits columns finely (cheap to claim, balances a
 * preempted thread); prefill uses few wide blocks since each sgemm call
 * repacks `in`. Either way the count depends on the shape alone, never on the
 * thread count: an sgemm kernel may sum the columns at a block's edge in
 * another order than those inside it (OpenBLAS's Haswell kernels do), so a
 * split by threads would make the result depend on --threads. Whatever thread
 * runs a chunk makes the same call on the same data. */
static int n_chunks_for(int T, int n_items, int fine) {
    const int prefill = T > KERNEL_SMALL_T, width = prefill ? KERNEL_PREFILL_COLS : fine;
    int n = (n_items + width - 1) / width, most = (n_items + 63) / 64;
    if (prefill && n > KERNEL_PREFILL_BLOCKS) n = KERNEL_PREFILL_BLOCKS;
    return n < 1 ? 1 : n > most ? most : n;
}

/* out[:, n0:n1] (+)= in @ W[:, n0:n1] + bias[n0:n1] */
static void matmul_cols(const matmul_job *j, int n0, int n1, int ith) {
    const gpt2_matrix *W = j->W;
    const int K = W->rows, N = W->cols, T = j->T, nn = n1 - n0;
    if (!j->xq && gemm_fits(W) && gemm_own()) { /* sets C0 itself, saving a pass over out */
        gemm_cols(j->out + n0, N, j->in, T, W, n0, nn, j->bias, j->accumulate);
        return;
    }
    for (int t = 0; t < T; t++) {
        float *o = j->out + (size_t)t * N;
        if (!j->accumulate)
            for (int n = n0; n < n1; n++) o[n] = j->bias ? j->bias[n] : 0.0f;
        else if (j->bias)
            for (int n = n0; n < n1; n++) o[n] += j->bias[n];
    }
    if (j->xq) {
        gemm_q8_cols(j->out + n0, N, j->xq, T, W, n0, nn);
    } else if (W->dtype == GPT2_DTYPE_F32 && !W->packed) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, nn, K, 1.0f, j->in, K,
                    (const float *)W->data + n0, N, 1.0f, j->out + n0, N);
    } else { /* widen (packed F32: gather) blocks of rows of our columns (Q8: times the column's
              * scale), then sgemm: one call per block, where sgemm per 64-column panel
              * would repack `in` for each (measured: 4.5% slower prefill) */
        /* The K block depends on the shape only, so that the summation order
         * (and so the result, bit for bit) is the same for any thread count. */
        float *buf = j->scratch[ith];
        int kb = KERNEL_SCRATCH_FLOATS / N < 128 ? KERNEL_SCRATCH_FLOATS / N : 128;
        if (kb < 1) kb = 1;
        for (int k0 = 0; k0 < K; k0 += kb) {
            int nk = K - k0 < kb ? K - k0 : kb;
            for (int k = 0; k < nk; k++) {
                float *row = buf + (size_t)k * nn;
                widen_segment(row, W, k0 + k, n0, nn);
                if (W->dtype == GPT2_DTYPE_Q8)
                    for (int n = 0; n < nn; n++) row[n] *= W->scale[n0 + n];
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, nn, nk, 1.0f, j->in + k0, K, buf, nn, 1.0f,
                        j->out + n0, N);
        }
    }
}

/* out[:, n0:n1] (+)= in @ W[:, n0:n1] + bias[n0:n1], then its GELU if asked */
static void matmul_part(void *arg, int chunk, int n_chunks, int ith) {
    const matmul_job *j = arg;
    const int N = j->W->cols, T = j->T;
    int n0, n1;
    pool_share(N, 64, chunk, n_chunks, &n0, &n1);
    if (n0 >= n1) return;
    matmul_cols(j, n0, n1, ith);
    if (j->gelu) gelu_block(j->out, N, T, n0, n1 - n0, j->gelu);
}

/* --- block formats: rows of W by output ---------------------------------------- */

typedef struct {
    float *out;
    int ldo;
    const float *in;    /* (T, K) */
    int T, N, K;
    gpt2_dtype dt;
    const char *w;      /* (N rows of K weights in blocks), or groups of 8 rows (x8) */
    size_t row_bytes;
    int x8;             /* the interleaved layout (quant.h): group_bytes apart */
    size_t group_bytes;
    const float *bias;
    int accumulate;
    float **scratch;
    const quant_x *xq; /* (T) for T <= KERNEL_SMALL_T */
    int gelu;          /* GELU_* on the outputs, by the chunk that made them */
} qmatmul_job;

/* Prefill over a block format: W's rows [p, p + 64) widened a block of K at a
 * time into an F32 panel (kc, 64) for gemm_panel's tiles; a K block (a
 * multiple of every format's block) is whole blocks in both layouts. */
enum { PREFILL_KC = 256 };

/* dst (8 rows, 64 apart) = the transpose of src (8 rows, lds apart). */
static void transpose8(const float *src, int lds, float *dst) {
#if defined(__AVX512F__) || defined(KERNEL_AVX2)
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + (size_t)i * lds);
    for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(dst + i * KERNEL_PANEL_COLS, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * KERNEL_PANEL_COLS, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
#else
    for (int k = 0; k < 8; k++)
        for (int n = 0; n < 8; n++) dst[k * KERNEL_PANEL_COLS + n] = src[(size_t)n * lds + k];
#endif
}

/* panel (kk, 64) = rows [p, p + np) of W, inputs [k0, k0 + kk), transposed;
 * rows past np are zeros (x8: its padding rows). rows: (64, kk) scratch. */
static void widen_block(const qmatmul_job *j, int p, int np, int k0, int kk, float *rows, float *panel) {
    const size_t skip = quant_row_bytes(j->dt, (size_t)k0);
    int r = 0;
    if (j->x8)
        for (; r < np; r += 8)
            quant_x8_dequantize(j->dt, j->w + (size_t)((p + r) / 8) * j->group_bytes + 8 * skip, kk, -1,
                                rows + (size_t)r * kk);
    else
        for (; r < np; r++)
            quant_dequantize_row(j->dt, j->w + (size_t)(p + r) * j->row_bytes + skip, rows + (size_t)r * kk, kk);
    memset(rows + (size_t)r * kk, 0, (size_t)(KERNEL_PANEL_COLS - r) * kk * sizeof(float));
    for (r = 0; r < KERNEL_PANEL_COLS; r += 8)
        for (int k = 0; k < kk; k += 8) transpose8(rows + (size_t)r * kk + k, kk, panel + k * KERNEL_PANEL_COLS + r);
}

/* out[:, n0:n1] += in @ W[n0:n1]^T, 64 outputs at a time; the K blocks in
 * order, so each output is one chain over k whatever the threads. A last
 * panel of fewer than 64 outputs goes through `tail` (T, 64). */
static void qmatmul_panels(const qmatmul_job *j, int n0, int n1, float *scratch) {
    float *panel = scratch, *rows = panel + PREFILL_KC * KERNEL_PANEL_COLS,
          *tail = rows + PREFILL_KC * KERNEL_PANEL_COLS;
    const int T = j->T, K = j->K;
    for (int p = n0; p < n1; p += KERNEL_PANEL_COLS) {
        const int np = n1 - p < KERNEL_PANEL_COLS ? n1 - p : KERNEL_PANEL_COLS;
        float *C = j->out + p;
        int ldc = j->ldo;
        if (np < KERNEL_PANEL_COLS) { /* columns past np: zero rows of W, computed and dropped */
            memset(tail, 0, (size_t)T * KERNEL_PANEL_COLS * sizeof(float));
            for (int t = 0; t < T; t++) memcpy(tail + (size_t)t * KERNEL_PANEL_COLS, C + (size_t)t * ldc, np * sizeof(float));
            C = tail, ldc = KERNEL_PANEL_COLS;
        }
        for (int k0 = 0; k0 < K; k0 += PREFILL_KC) {
            const int kk = K - k0 < PREFILL_KC ? K - k0 : PREFILL_KC;
            widen_block(j, p, np, k0, kk, rows, panel);
            gemm_panel(C, ldc, j->in + k0, K, T, panel, kk);
        }
        if (C == tail)
            for (int t = 0; t < T; t++)
                memcpy(j->out + p + (size_t)t * j->ldo, tail + (size_t)t * KERNEL_PANEL_COLS, np * sizeof(float));
    }
}

/* out[t, n] = (accumulate ? out[t, n] : 0) + bias[n] + dot for rows [n0, n1) */
static void qmatmul_cols(const qmatmul_job *j, int n0, int n1, int ith) {
    for (int t = 0; t < j->T; t++) {
        float *o = j->out + (size_t)t * j->ldo;
        for (int n = n0; n < n1; n++) {
            if (!j->accumulate) o[n] = 0.0f;
            if (j->bias) o[n] += j->bias[n];
        }
    }
    if (n0 >= n1) return;
    if (j->T <= KERNEL_SMALL_T && j->x8) { /* n0 is a multiple of 8 */
        float o8[8];
        for (int n = n0; n < n1; n += 8)
            for (int t = 0; t < j->T; t++) {
                quant_x8_dot(j->dt, j->w + (size_t)(n / 8) * j->group_bytes, &j->xq[t], o8);
                for (int i = 0; i < 8 && n + i < n1; i++) j->out[(size_t)t * j->ldo + n + i] += o8[i];
            }
        return;
    }
    if (j->T <= KERNEL_SMALL_T) {
        for (int n = n0; n < n1; n++)
            for (int t = 0; t < j->T; t++)
                j->out[(size_t)t * j->ldo + n] += quant_dot(j->dt, j->w + (size_t)n * j->row_bytes, &j->xq[t]);
        return;
    }
    if (gemm_own() && (size_t)j->T * KERNEL_PANEL_COLS + 2 * PREFILL_KC * KERNEL_PANEL_COLS <= KERNEL_SCRATCH_FLOATS) {
        qmatmul_panels(j, n0, n1, j->scratch[ith]);
        return;
    }
    /* GPTSCOPE_GEMM=blas: dequantize a block of rows (a number fixed by K;
     * x8: whole groups, the last one's padding rows past nr unused), then sgemm */
    float *buf = j->scratch[ith];
    const int nb = (KERNEL_SCRATCH_FLOATS / j->K) & ~7;
    for (int r0 = n0; r0 < n1; r0 += nb) {
        const int nr = n1 - r0 < nb ? n1 - r0 : nb;
        for (int r = 0; r < nr; r += j->x8 ? 8 : 1)
            if (j->x8)
                quant_x8_dequantize(j->dt, j->w + (size_t)((r0 + r) / 8) * j->group_bytes, j->K, -1,
                                    buf + (size_t)r * j->K);
            else
                quant_dequantize_row(j->dt, j->w + (size_t)(r0 + r) * j->row_bytes, buf + (size_t)r * j->K, j->K);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->T, nr, j->K, 1.0f, j->in, j->K, buf, j->K, 1.0f,
                    j->out + r0, j->ldo);
    }
}

static void qmatmul_part(void *arg, int chunk, int n_chunks, int ith) {
    const qmatmul_job *j = arg;
    int n0, n1;
    pool_share(j->N, 64, chunk, n_chunks, &n0, &n1);
    qmatmul_cols(j, n0, n1, ith);
    if (j->gelu && n0 < n1) gelu_block(j->out, j->ldo, j->T, n0, n1 - n0, j->gelu);
}

/* out (T, N) (+)= in (T, K) @ W^T + bias for W's N rows of K, in a block format. */
static void qmatmul(gpt2_pool *pool, float *out, int ldo, const float *in, int T, const gpt2_matrix *W, int N, int K,
                    const float *bias, int accumulate, float **scratch, float *partials, int fine, int gelu) {
    quant_x xq[KERNEL_SMALL_T];
    qmatmul_job j = {out, ldo, in, T, N, K, W->dtype, W->data, quant_row_bytes(W->dtype, (size_t)K), W->packed,
                     quant_x8_group_bytes(W->dtype, K), bias, accumulate, scratch, xq, gelu};
    if (T <= KERNEL_SMALL_T) {
        char *buf = (char *)partials;
        const size_t step = quant_x_bytes(K);
        for (int t = 0; t < T; t++) quant_x_set(&xq[t], buf + (size_t)t * step, in + (size_t)t * K, K);
    }
    pool_run(pool, qmatmul_part, &j, n_chunks_for(T, N, fine));
}

/* --- Q8 packed in row pairs: integer products (gemm.h) ------------------------ */

typedef struct {
    quant_x *X;       /* (T) */
    char *buf;        /* T x quant_x_bytes(K) */
    const float *in;  /* (T, K) */
    int T, K;
} q8_input_job;

static void q8_input_rows(void *arg, int chunk, int n_chunks, int ith) {
    const q8_input_job *j = arg;
    int t0, t1;
    (void)ith;
    pool_share(j->T, 1, chunk, n_chunks, &t0, &t1);
    const size_t step = quant_x_bytes(j->K);
    for (int t = t0; t < t1; t++) quant_x_set_q16(&j->X[t], j->buf + (size_t)t * step, j->in + (size_t)t * j->K, j->K);
}

static size_t q8_input_bytes(int T, int K) {
    return (((size_t)T * sizeof(quant_x) + 63) & ~(size_t)63) + (size_t)T * quant_x_bytes(K);
}

size_t kernel_work_floats(int T, int K, int N) {
    const size_t small = (size_t)KERNEL_DECODE_CHUNKS * (T < KERNEL_SMALL_T ? T : KERNEL_SMALL_T) * N;
    const size_t q8 = (q8_input_bytes(T, K) + 63) / sizeof(float) + 16; /* + aligning it to 64 bytes */
    return small > q8 ? small : q8;
}

/* The Q8 LM head's columns [n0, n1) of the padded (C, Vp) view: whole panels
 * below V straight into out, the panel holding V through scratch. */
static void q8_head_part(void *arg, int chunk, int n_chunks, int ith) {
    const matmul_job *j = arg;
    const int V = j->n_out, T = j->T;
    int n0, n1;
    pool_share(j->W->cols, KERNEL_PANEL_COLS, chunk, n_chunks, &n0, &n1);
    const int whole = (n1 < V ? n1 : V / KERNEL_PANEL_COLS * KERNEL_PANEL_COLS) - n0;
    if (whole > 0) {
        for (int t = 0; t < T; t++) memset(j->out + (size_t)t * j->ldo + n0, 0, (size_t)whole * sizeof(float));
        gemm_q8_cols(j->out + n0, j->ldo, j->xq, T, j->W, n0, whole);
    }
    for (int p = n0 + (whole > 0 ? whole : 0); p < n1 && p < V; p += KERNEL_PANEL_COLS) {
        float *tmp = j->scratch[ith]; /* (T, 64) */
        memset(tmp, 0, (size_t)T * KERNEL_PANEL_COLS * sizeof(float));
        gemm_q8_cols(tmp, KERNEL_PANEL_COLS, j->xq, T, j->W, p, KERNEL_PANEL_COLS);
        for (int t = 0; t < T; t++)
            memcpy(j->out + (size_t)t * j->ldo + p, tmp + (size_t)t * KERNEL_PANEL_COLS, (size_t)(V - p) * sizeof(float));
    }
}

/* Quantizes in into the work area (64-byte aligned), then the panels, split
 * by N alone: whatever the thread count, the same bits. */
static void q8_matmul(gpt2_pool *pool, matmul_job *j, float *work) {
    const int T = j->T, K = j->W->rows;
    quant_x *X = (quant_x *)(((uintptr_t)work + 63) & ~(uintptr_t)63);
    q8_input_job qj = {X, (char *)X + (((size_t)T * sizeof(quant_x) + 63) & ~(size_t)63), j->in, T, K};
    if (T == 1) q8_input_rows(&qj, 0, 1, 0);
    else pool_run(pool, q8_input_rows, &qj, T < 16 ? T : 16);
    j->xq = X;
    pool_run(pool, j->n_out ? q8_head_part : matmul_part, j, n_chunks_for(T, j->W->cols, 64));
}

/* kernel_matmul's paths; returns whether the chunks applied the GELU asked
 * for (every path that splits the outputs), else (decode's split of W's
 * rows) it is left to a pass after. */
static int matmul(gpt2_pool *pool, float *out, const float *in, int T, const gpt2_matrix *W, const float *bias,
                  int accumulate, float **scratch, float *partials, int gelu) {
    if (quant_is_block(W->dtype)) {
        qmatmul(pool, out, W->cols, in, T, W, W->cols, W->rows, bias, accumulate, scratch, partials, 64, gelu);
        return 1;
    }
    matmul_job j = {.out = out, .ldo = W->cols, .in = in, .T = T, .W = W, .bias = bias, .accumulate = accumulate,
                    .scratch = scratch, .partials = partials, .gelu = gelu};
    if (W->dtype == GPT2_DTYPE_Q8 && W->packed && (T <= KERNEL_SMALL_T || gemm_own())) {
        q8_matmul(pool, &j, partials);
        return 1;
    }
    if (T > KERNEL_SMALL_T) {
        pool_run(pool, matmul_part, &j, n_chunks_for(T, W->cols, 128));
        return 1;
    }
    if (W->packed) {
        pool_run(pool, matvec_panel, &j, W->cols / KERNEL_PANEL_COLS);
        return 1;
    }
    /* A fixed number of row blocks, summed in a fixed order: the same result
     * for any thread count. */
    const int n_chunks = W->rows >= 8 * KERNEL_DECODE_CHUNKS ? KERNEL_DECODE_CHUNKS : 1, N = W->cols;
    pool_run(pool, matvec_part, &j, n_chunks);
    for (int t = 0; t < T; t++) {
        float *o = out + (size_t)t * N;
        if (!accumulate)
            for (int n = 0; n < N; n++) o[n] = 0.0f;
        if (bias)
            for (int n = 0; n < N; n++) o[n] += bias[n];
        if (W->dtype == GPT2_DTYPE_Q8) { /* sum the chunks, then scale each column */
            float *sum = partials + (size_t)t * N;
            for (int c = 1; c < n_chunks; c++) {
                const float *part = partials + ((size_t)c * T + t) * N;
                for (int n = 0; n < N; n++) sum[n] += part[n];
            }
            for (int n = 0; n < N; n++) o[n] += W->scale[n] * sum[n];
            continue;
        }
        for (int c = 0; c < n_chunks; c++) {
            const float *part = partials + ((size_t)c * T + t) * N;
            for (int n = 0; n < N; n++) o[n] += part[n];
        }
    }
    return 0;
}

void kernel_matmul(gpt2_pool *pool, float *out, const float *in, int T, const gpt2_matrix *W, const float *bias,
                   int accumulate, float **scratch, float *partials) {
    matmul(pool, out, in, T, W, bias, accumulate, scratch, partials, GELU_NONE);
}

typedef struct {
    float *x;
    int T, N, kind;
} gelu_job;

static void gelu_rows(void *arg, int chunk, int n_chunks, int ith) {
    const gelu_job *j = arg;
    int t0, t1;
    (void)ith;
    pool_share(j->T, 1, chunk, n_chunks, &t0, &t1);
    gelu_block(j->x + (size_t)t0 * j->N, j->N, t1 - t0, 0, j->N, j->kind);
}

void kernel_matmul_gelu(gpt2_pool *pool, float *out, const float *in, int T, const gpt2_matrix *W, const float *bias,
                        int erf, float **scratch, float *partials) {
    const int kind = erf ? GELU_ERF : GELU_TANH;
    if (matmul(pool, out, in, T, W, bias, 0, scratch, partials, kind)) return;
    gelu_job j = {out, T, W->cols, kind};
    if (T == 1) gelu_rows(&j, 0, 1, 0); /* a pool round trip would cost more than the work */
    else pool_run(pool, gelu_rows, &j, T < 16 ? T : 16);
}

/* out[:, n0:n1] = in @ W[n0:n1, :]^T */
static void matmul_t_part(void *arg, int chunk, int n_chunks, int ith) {
    const matmul_job *j = arg;
    const gpt2_matrix *W = j->W;
    const int N = W->rows, K = W->cols, T = j->T;
    int n0, n1;
    pool_share(N, 64, chunk, n_chunks, &n0, &n1);
    if (n0 >= n1) return;
    if (T <= KERNEL_SMALL_T) {
        gemv_nk(j->out, j->ldo, j->in, T, W, n0, n1);
    } else if (W->dtype == GPT2_DTYPE_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, n1 - n0, K, 1.0f, j->in, K,
                    (const float *)W->data + (size_t)n0 * K, K, 0.0f, j->out + n0, j->ldo);
    } else {
        float *buf = j->scratch[ith];
        int nb = KERNEL_SCRATCH_FLOATS / K;
        for (int r0 = n0; r0 < n1; r0 += nb) {
            int nr = n1 - r0 < nb ? n1 - r0 : nb;
            for (int r = 0; r < nr; r++) widen_row(buf + (size_t)r * K, W, r0 + r);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, nr, K, 1.0f, j->in, K, buf, K, 0.0f,
                        j->out + r0, j->ldo);
        }
    }
}

void kernel_matmul_t(gpt2_pool *pool, float *out, int ldo, const float *in, int T, const gpt2_matrix *W,
                     float **scratch, float *partials) {
    if (quant_is_block(W->dtype)) {
        qmatmul(pool, out, ldo, in, T, W, W->rows, W->cols, NULL, 0, scratch, partials, 1024, GELU_NONE);
        return;
    }
    if (W->dtype == GPT2_DTYPE_Q8 && W->trans) { /* an embedding in panels: its transpose's integer products */
        const gpt2_matrix view = {.data = W->data, .dtype = GPT2_DTYPE_Q8, .rows = W->cols,
                                  .cols = kernel_q8_head_cols(W->rows), .scale = W->scale, .packed = 1};
        matmul_job j = {.out = out, .ldo = ldo, .in = in, .T = T, .W = &view, .scratch = scratch, .n_out = W->rows};
        q8_matmul(pool, &j, partials);
        return;
    }
    matmul_job j = {.out = out, .ldo = ldo, .in = in, .T = T, .W = W, .scratch = scratch};
    pool_run(pool, matmul_t_part, &j, n_chunks_for(T, W->rows, 1024));
}

/* --- attention ------------------------------------------------------------ */

void kernel_attention_row(float *y, float *att, const float *q, const float *k, const float *v, int P, int hs,
                          int ld, float scale, float softcap) {
#if defined(__AVX512F__)
    if (hs % 16 == 0 && hs <= 128) { /* GPT-2's heads are 64 wide */
        const int nv = hs / 16;
        __m512 qv[8], yv[8];
        for (int i = 0; i < nv; i++) qv[i] = _mm512_loadu_ps(q + 16 * i);
        for (int t = 0; t < P; t++) {
            const float *kt = k + (size_t)t * ld;
            __m512 acc = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kt));
            for (int i = 1; i < nv; i++) acc = _mm512_fmadd_ps(qv[i], _mm512_loadu_ps(kt + 16 * i), acc);
            att[t] = _mm512_reduce_add_ps(acc) * scale;
        }
        if (softcap > 0.0f) kernel_softcap(att, (size_t)P, softcap);
        kernel_softmax(att, P);
        for (int i = 0; i < nv; i++) yv[i] = _mm512_setzero_ps();
        for (int t = 0; t < P; t++) {
            const float *vt = v + (size_t)t * ld;
            const __m512 a = _mm512_set1_ps(att[t]);
            for (int i = 0; i < nv; i++) yv[i] = _mm512_fmadd_ps(a, _mm512_loadu_ps(vt + 16 * i), yv[i]);
        }
        for (int i = 0; i < nv; i++) _mm512_storeu_ps(y + 16 * i, yv[i]);
        return;
    }
#elif defined(KERNEL_AVX2)
    if (hs % 8 == 0 && hs <= 128) {
        const int nv = hs / 8;
        __m256 qv[16], yv[16];
        for (int i = 0; i < nv; i++) qv[i] = _mm256_loadu_ps(q + 8 * i);
        for (int t = 0; t < P; t++) {
            const float *kt = k + (size_t)t * ld;
            __m256 acc = _mm256_mul_ps(qv[0], _mm256_loadu_ps(kt));
            for (int i = 1; i < nv; i++) acc = _mm256_fmadd_ps(qv[i], _mm256_loadu_ps(kt + 8 * i), acc);
            att[t] = hsum8(acc) * scale;
        }
        if (softcap > 0.0f) kernel_softcap(att, (size_t)P, softcap);
        kernel_softmax(att, P);
        for (int i = 0; i < nv; i++) yv[i] = _mm256_setzero_ps();
        for (int t = 0; t < P; t++) {
            const float *vt = v + (size_t)t * ld;
            const __m256 a = _mm256_set1_ps(att[t]);
            for (int i = 0; i < nv; i++) yv[i] = _mm256_fmadd_ps(a, _mm256_loadu_ps(vt + 8 * i), yv[i]);
        }
        for (int i = 0; i < nv; i++) _mm256_storeu_ps(y + 8 * i, yv[i]);
        return;
    }
#endif
    for (int t = 0; t < P; t++) {
        const float *kt = k + (size_t)t * ld;
        float s = 0.0f;
        for (int i = 0; i < hs; i++) s += q[i] * kt[i];
        att[t] = s * scale;
    }
    if (softcap > 0.0f) kernel_softcap(att, (size_t)P, softcap);
    kernel_softmax(att, P);
    for (int i = 0; i < hs; i++) y[i] = 0.0f;
    for (int t = 0; t < P; t++) {
        const float *vt = v + (size_t)t * ld, a = att[t];
        for (int i = 0; i < hs; i++) y[i] += a * vt[i];
    }
}

/* --- elementwise ---------------------------------------------------------- */

void kernel_layernorm(float *out, const float *in, const float *g, const float *b, int T, int C, float eps) {
    for (int t = 0; t < T; t++) {
        const float *x = in + (size_t)t * C;
        float *y = out + (size_t)t * C;
        float mean = 0.0f, var = 0.0f;
        for (int i = 0; i < C; i++) mean += x[i];
        mean /= (float)C;
        for (int i = 0; i < C; i++) {
            float d = x[i] - mean;
            var += d * d;
        }
        var /= (float)C;
        const float rstd = 1.0f / sqrtf(var + eps);
        for (int i = 0; i < C; i++) y[i] = (x[i] - mean) * rstd * g[i] + b[i];
    }
}

void kernel_rmsnorm(float *out, const float *in, const float *g, int T, int C, float eps) {
    for (int t = 0; t < T; t++) {
        const float *x = in + (size_t)t * C;
        float *y = out + (size_t)t * C;
        double ss = 0.0; /* in double: C squares summed, then one rounding */
        for (int i = 0; i < C; i++) ss += (double)x[i] * x[i];
        const float r = (float)(1.0 / sqrt(ss / C + eps));
        for (int i = 0; i < C; i++) y[i] = x[i] * r * g[i];
    }
}

void kernel_rope(float *x, const float *cs, const float *sn, int half) {
    for (int i = 0; i < half; i++) {
        const float a = x[i], b = x[i + half];
        x[i] = a * cs[i] - b * sn[i];
        x[i + half] = b * cs[i] + a * sn[i];
    }
}

void kernel_swiglu(float *out, const float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float g = gate[i], e = fast_exp_nonpos(-fabsf(g)); /* e^-|g|: no overflow either side */
        const float sig = (g >= 0.0f ? 1.0f : e) / (1.0f + e);
        out[i] = up[i] * (g * sig);
    }
}

/* GELU's tanh form of one value: GPT-2's gelu_new, PyTorch's gelu(approximate="tanh") */
static inline float gelu_tanh1(float v) {
    const float s = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * v * (1.0f + fast_tanh(s * (v + 0.044715f * v * v * v)));
}

void kernel_gelu_tanh(float *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = gelu_tanh1(x[i]);
}

void kernel_geglu(float *out, const float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = gelu_tanh1(gate[i]) * up[i];
}

void kernel_softcap(float *x, size_t n, float cap) {
    const float inv = 1.0f / cap;
    for (size_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] * inv);
}

void kernel_gelu_erf(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f));
}

/* The max and the sum run in 16 interleaved lanes (element i in lane i % 16,
 * the lanes then combined in order, the tail last), held in one vector of
 * GCC's vector extension: written as an array of 16, GCC 12 keeps each lane
 * in a scalar register; the exps vectorise once they are a pass of their own. */
typedef float lanes16 __attribute__((vector_size(64)));
typedef int32_t lanes16_mask __attribute__((vector_size(64)));

float kernel_max(const float *x, int n) {
    lanes16 lane = (lanes16){0} + x[0]; /* x[0] in every lane */
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        lanes16 v; /* loaded in place: a function returning a vector warns of its ABI without AVX-512 */
        memcpy(&v, x + i, sizeof v);
        const lanes16_mask gt = v > lane;
        lane = (lanes16)(((lanes16_mask)v & gt) | ((lanes16_mask)lane & ~gt));
    }
    float max = x[0];
    for (int l = 0; l < 16; l++) max = lane[l] > max ? lane[l] : max;
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    return max;
}

void kernel_softmax(float *x, int n) {
    const float max = kernel_max(x, n);
    int i;
    for (i = 0; i < n; i++) x[i] = fast_exp_nonpos(x[i] - max);
    lanes16 lane = {0};
    for (i = 0; i + 16 <= n; i += 16) {
        lanes16 v;
        memcpy(&v, x + i, sizeof v);
        lane += v;
    }
    float sum = 0.0f;
    for (int l = 0; l < 16; l++) sum += lane[l];
    for (; i < n; i++) sum += x[i];
    const float inv = 1.0f / sum;
    for (i = 0; i < n; i++) x[i] *= inv;
}
