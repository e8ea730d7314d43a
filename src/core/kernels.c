/* kernels.c — matmuls over mapped weights of any supported dtype, layernorm, GELU, softmax. */
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
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

/* dst (n) = widen(src (n)) */
static void widen(float *dst, const void *src, gpt2_dtype dt, size_t n) {
    size_t i = 0;
    if (dt == GPT2_DTYPE_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    const uint16_t *s = src;
    if (dt == GPT2_DTYPE_F16) {
#if defined(__AVX512F__)
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
#endif
        for (; i < n; i++) dst[i] = gpt2_f16_to_f32(s[i]);
    } else {
#if defined(__AVX512F__)
        for (; i + 16 <= n; i += 16) {
            __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i)));
            _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
        }
#endif
        for (; i < n; i++) dst[i] = gpt2_bf16_to_f32(s[i]);
    }
}

static size_t dtype_bytes(gpt2_dtype dt) { return dt == GPT2_DTYPE_F32 ? 4 : 2; }

void kernel_row(float *dst, const gpt2_matrix *m, int r) {
    widen(dst, (const char *)m->data + (size_t)r * m->cols * dtype_bytes(m->dtype), m->dtype,
          (size_t)m->cols);
}

/* --- 16-bit matrix-vector kernels --------------------------------------- */

/* y (N) += sum_k x[k] * W[k, :] for W (K, N) 16-bit: streams W row by row. */
static void gemv_kn_16(float *y, const float *x, const gpt2_matrix *W) {
    const int K = W->rows, N = W->cols;
    const uint16_t *w = W->data;
    for (int k = 0; k < K; k++) {
        const uint16_t *row = w + (size_t)k * N;
        const float xk = x[k];
        int n = 0;
#if defined(__AVX512F__)
        const __m512 vx = _mm512_set1_ps(xk);
        if (W->dtype == GPT2_DTYPE_F16) {
            for (; n + 16 <= N; n += 16) {
                __m512 wv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + n)));
                _mm512_storeu_ps(y + n, _mm512_fmadd_ps(vx, wv, _mm512_loadu_ps(y + n)));
            }
        } else {
            for (; n + 16 <= N; n += 16) {
                __m512i wi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(row + n)));
                __m512 wv = _mm512_castsi512_ps(_mm512_slli_epi32(wi, 16));
                _mm512_storeu_ps(y + n, _mm512_fmadd_ps(vx, wv, _mm512_loadu_ps(y + n)));
            }
        }
#endif
        if (W->dtype == GPT2_DTYPE_F16)
            for (; n < N; n++) y[n] += xk * gpt2_f16_to_f32(row[n]);
        else
            for (; n < N; n++) y[n] += xk * gpt2_bf16_to_f32(row[n]);
    }
}

/* y[n] = dot(W[n, :], x) for W (N, K) 16-bit. */
static void gemv_nk_16(float *y, const float *x, const gpt2_matrix *W) {
    const int N = W->rows, K = W->cols;
    const uint16_t *w = W->data;
    for (int n = 0; n < N; n++) {
        const uint16_t *row = w + (size_t)n * K;
        float acc = 0.0f;
        int k = 0;
#if defined(__AVX512F__)
        __m512 va = _mm512_setzero_ps();
        if (W->dtype == GPT2_DTYPE_F16) {
            for (; k + 16 <= K; k += 16)
                va = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + k))),
                                     _mm512_loadu_ps(x + k), va);
        } else {
            for (; k + 16 <= K; k += 16) {
                __m512i wi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(row + k)));
                va = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(wi, 16)),
                                     _mm512_loadu_ps(x + k), va);
            }
        }
        acc = _mm512_reduce_add_ps(va);
#endif
        if (W->dtype == GPT2_DTYPE_F16)
            for (; k < K; k++) acc += gpt2_f16_to_f32(row[k]) * x[k];
        else
            for (; k < K; k++) acc += gpt2_bf16_to_f32(row[k]) * x[k];
        y[n] = acc;
    }
}

/* --- matmuls -------------------------------------------------------------- */

void kernel_matmul(float *out, const float *in, int T, const gpt2_matrix *W, const float *bias,
                   int accumulate, float *scratch) {
    const int K = W->rows, N = W->cols;
    if (!accumulate) {
        for (int t = 0; t < T; t++) {
            if (bias)
                memcpy(out + (size_t)t * N, bias, (size_t)N * sizeof(float));
            else
                memset(out + (size_t)t * N, 0, (size_t)N * sizeof(float));
        }
    } else if (bias) {
        for (int t = 0; t < T; t++)
            for (int n = 0; n < N; n++) out[(size_t)t * N + n] += bias[n];
    }
    if (W->dtype == GPT2_DTYPE_F32) {
        if (T == 1) /* sgemm with M=1 is much slower than sgemv in OpenBLAS 0.3.21 */
            cblas_sgemv(CblasRowMajor, CblasTrans, K, N, 1.0f, W->data, N, in, 1, 1.0f, out, 1);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, N, K, 1.0f, in, K, W->data, N,
                        1.0f, out, N);
        return;
    }
    if (T == 1) {
        gemv_kn_16(out, in, W);
        return;
    }
    /* Widen a block of rows of W, then out += in[:, k0:k0+kb] @ block. */
    int kb = KERNEL_SCRATCH_FLOATS / N;
    if (kb < 1) kb = 1;
    for (int k0 = 0; k0 < K; k0 += kb) {
        int nk = K - k0 < kb ? K - k0 : kb;
        widen(scratch, (const uint16_t *)W->data + (size_t)k0 * N, W->dtype, (size_t)nk * N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, N, nk, 1.0f, in + k0, K, scratch, N,
                    1.0f, out, N);
    }
}

void kernel_matmul_t(float *out, int ldo, const float *in, int T, const gpt2_matrix *W, float *scratch) {
    const int N = W->rows, K = W->cols;
    if (W->dtype == GPT2_DTYPE_F32) {
        if (T == 1)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, W->data, K, in, 1, 0.0f, out, 1);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, N, K, 1.0f, in, K, W->data, K, 0.0f,
                        out, ldo);
        return;
    }
    if (T == 1) {
        gemv_nk_16(out, in, W);
        return;
    }
    int nb = KERNEL_SCRATCH_FLOATS / K;
    if (nb < 1) nb = 1;
    for (int n0 = 0; n0 < N; n0 += nb) {
        int nn = N - n0 < nb ? N - n0 : nb;
        widen(scratch, (const uint16_t *)W->data + (size_t)n0 * K, W->dtype, (size_t)nn * K);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, nn, K, 1.0f, in, K, scratch, K, 0.0f,
                    out + n0, ldo);
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

void kernel_gelu_tanh(float *x, size_t n) {
    const float s = 0.7978845608028654f; /* sqrt(2/pi) */
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(s * (v + 0.044715f * v * v * v)));
    }
}

void kernel_gelu_erf(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f));
}

void kernel_softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > max) max = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}
