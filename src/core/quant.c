/* quant.c — GGUF's block formats: the type table, dequantizing rows, quantizing
 * rows (Q8_0, Q4_0, Q4_K), 8-bit input vectors and the integer dot products of
 * decode. The formats are described in quant.h. */
#include "quant.h"

#include <math.h>
#include <string.h>

#include "kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define QUANT_AVX2 1
#endif

static const quant_format formats[] = {
    {GPT2_DTYPE_F32, 0, 1, 4, "F32"},       {GPT2_DTYPE_F16, 1, 1, 2, "F16"},
    {GPT2_DTYPE_BF16, 30, 1, 2, "BF16"},    {GPT2_DTYPE_Q8_0, 8, 32, 34, "Q8_0"},
    {GPT2_DTYPE_Q4_0, 2, 32, 18, "Q4_0"},   {GPT2_DTYPE_Q4_1, 3, 32, 20, "Q4_1"},
    {GPT2_DTYPE_Q5_0, 6, 32, 22, "Q5_0"},   {GPT2_DTYPE_Q5_1, 7, 32, 24, "Q5_1"},
    {GPT2_DTYPE_Q4_K, 12, 256, 144, "Q4_K"}, {GPT2_DTYPE_Q5_K, 13, 256, 176, "Q5_K"},
    {GPT2_DTYPE_Q6_K, 14, 256, 210, "Q6_K"},
};
enum { N_FORMATS = sizeof formats / sizeof formats[0] };

const quant_format *quant_format_of(gpt2_dtype dt) {
    for (int i = 0; i < N_FORMATS; i++)
        if (formats[i].dtype == dt) return &formats[i];
    return NULL;
}

const quant_format *quant_format_ggml(uint32_t ggml_type) {
    for (int i = 0; i < N_FORMATS; i++)
        if ((uint32_t)formats[i].ggml_type == ggml_type) return &formats[i];
    return NULL;
}

const char *quant_ggml_unsupported_name(uint32_t t) {
    static const char *names[] = {
        [4] = "Q4_2 (removed from GGUF)", [5] = "Q4_3 (removed from GGUF)", [9] = "Q8_1", [10] = "Q2_K",
        [11] = "Q3_K", [15] = "Q8_K", [16] = "IQ2_XXS", [17] = "IQ2_XS", [18] = "IQ3_XXS", [19] = "IQ1_S",
        [20] = "IQ4_NL", [21] = "IQ3_S", [22] = "IQ2_S", [23] = "IQ4_XS", [24] = "I8", [25] = "I16",
        [26] = "I32", [27] = "I64", [28] = "F64", [29] = "IQ1_M", [31] = "Q4_0_4_4 (removed from GGUF)",
        [32] = "Q4_0_4_8 (removed from GGUF)", [33] = "Q4_0_8_8 (removed from GGUF)", [34] = "TQ1_0",
        [35] = "TQ2_0", [39] = "MXFP4",
    };
    return t < sizeof names / sizeof names[0] ? names[t] : NULL;
}

int quant_is_block(gpt2_dtype dt) { return dt >= GPT2_DTYPE_Q8_0 && dt <= GPT2_DTYPE_Q6_K; }

size_t quant_row_bytes(gpt2_dtype dt, size_t n) {
    const quant_format *f = quant_format_of(dt);
    return n / (size_t)f->block * (size_t)f->block_bytes;
}

int quant_can_quantize(gpt2_dtype dt) {
    return dt == GPT2_DTYPE_Q8_0 || dt == GPT2_DTYPE_Q4_0 || dt == GPT2_DTYPE_Q4_K;
}

/* --- pieces of a block ------------------------------------------------------ */

static inline float f16_at(const uint8_t *p) {
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
#if defined(QUANT_AVX2)
    return _cvtsh_ss(h);
#else
    return gpt2_f16_to_f32(h);
#endif
}

static inline void f16_put(uint8_t *p, float v) {
    uint16_t h = gpt2_f32_to_f16(v);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

static inline uint32_t u32_at(const uint8_t *p) { return (uint32_t)p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* The 8 sub-block scales and minimums of a Q4_K/Q5_K block's 12 bytes S. */
static void k_scales(const uint8_t *S, uint8_t *sc, uint8_t *mn) {
    for (int s = 0; s < 4; s++) {
        sc[s] = S[s] & 63;
        mn[s] = S[s + 4] & 63;
        sc[s + 4] = (uint8_t)((S[s + 8] & 15) | (S[s] >> 6) << 4);
        mn[s + 4] = (uint8_t)((S[s + 8] >> 4) | (S[s + 4] >> 6) << 4);
    }
}

/* The 32 codes q (0..31 or 0..63 before the offset) of block b's 32-weight
 * group: `sub` indexes the sub-block of 32 inside a 256-weight block. */
static void codes_q4_0(const uint8_t *qs, uint8_t *q) {
    for (int j = 0; j < 16; j++) q[j] = qs[j] & 15, q[j + 16] = qs[j] >> 4;
}
static void codes_q5(const uint8_t *qh4, const uint8_t *qs, uint8_t *q) {
    const uint32_t h = u32_at(qh4);
    for (int j = 0; j < 16; j++) {
        q[j] = (uint8_t)((qs[j] & 15) | (h >> j & 1) << 4);
        q[j + 16] = (uint8_t)((qs[j] >> 4) | (h >> (j + 16) & 1) << 4);
    }
}
/* Q4_K (qh NULL) / Q5_K sub-block s of 32 */
static void codes_k(const uint8_t *qs, const uint8_t *qh, int s, uint8_t *q) {
    const uint8_t *c = qs + 32 * (s / 2);
    const int shift = 4 * (s & 1);
    for (int l = 0; l < 32; l++) q[l] = (uint8_t)((c[l] >> shift & 15) | (qh ? (qh[l] >> s & 1) << 4 : 0));
}
/* Q6_K group g (0..7) of 32: half h = g / 4, quarter g % 4 */
static void codes_q6(const uint8_t *blk, int g, uint8_t *q) {
    const int h = g / 4, r = g % 4;
    const uint8_t *L = blk + 64 * h + 32 * (r & 1), *H = blk + 128 + 32 * h;
    const int lshift = 4 * (r >> 1), hshift = 2 * r;
    for (int l = 0; l < 32; l++) q[l] = (uint8_t)((L[l] >> lshift & 15) | (H[l] >> hshift & 3) << 4);
}

/* --- dequantizing --------------------------------------------------------- */

/* One block of the format into y (its 32 or 256 floats). */
static void dequant_block(gpt2_dtype dt, const uint8_t *b, float *y) {
    uint8_t q[32], sc[8], mn[8];
    switch (dt) {
    case GPT2_DTYPE_Q8_0: {
        const float d = f16_at(b);
        for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
        return;
    }
    case GPT2_DTYPE_Q4_0:
    case GPT2_DTYPE_Q5_0: {
        const float d = f16_at(b);
        const int off = dt == GPT2_DTYPE_Q4_0 ? 8 : 16;
        if (dt == GPT2_DTYPE_Q4_0) codes_q4_0(b + 2, q);
        else codes_q5(b + 2, b + 6, q);
        for (int j = 0; j < 32; j++) y[j] = d * (float)(q[j] - off);
        return;
    }
    case GPT2_DTYPE_Q4_1:
    case GPT2_DTYPE_Q5_1: {
        const float d = f16_at(b), m = f16_at(b + 2);
        if (dt == GPT2_DTYPE_Q4_1) codes_q4_0(b + 4, q);
        else codes_q5(b + 4, b + 8, q);
        for (int j = 0; j < 32; j++) y[j] = d * (float)q[j] + m;
        return;
    }
    case GPT2_DTYPE_Q4_K:
    case GPT2_DTYPE_Q5_K: {
        const float d = f16_at(b), dmin = f16_at(b + 2);
        const int k5 = dt == GPT2_DTYPE_Q5_K;
        k_scales(b + 4, sc, mn);
        for (int s = 0; s < 8; s++) {
            codes_k(b + (k5 ? 48 : 16), k5 ? b + 16 : NULL, s, q);
            const float ds = d * (float)sc[s], dm = dmin * (float)mn[s];
            for (int l = 0; l < 32; l++) y[32 * s + l] = ds * (float)q[l] - dm;
        }
        return;
    }
    case GPT2_DTYPE_Q6_K: {
        const float d = f16_at(b + 208);
        for (int g = 0; g < 8; g++) {
            codes_q6(b, g, q);
            for (int l = 0; l < 32; l++) {
                const float ds = d * (float)(int8_t)b[192 + 2 * g + l / 16];
                y[32 * g + l] = ds * (float)(q[l] - 32);
            }
        }
        return;
    }
    default: return;
    }
}

void quant_dequantize_row(gpt2_dtype dt, const void *src, float *dst, int n) {
    const quant_format *f = quant_format_of(dt);
    const uint8_t *b = src;
    for (int i = 0; i < n; i += f->block, b += f->block_bytes) dequant_block(dt, b, dst + i);
}

/* --- quantizing ------------------------------------------------------------- */

/* Q8_0 as ggml's reference: d = max|x| / 127, q = round half away from zero. */
static void quant_q8_0(const float *x, uint8_t *b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    f16_put(b, d);
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

/* Q4_0 as ggml's reference: d = (the value of largest magnitude) / -8,
 * q = min(15, trunc(x / d + 8.5)). */
static void quant_q4_0(const float *x, uint8_t *b) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    f16_put(b, d);
    for (int j = 0; j < 16; j++) {
        float v0 = x[j] * id + 8.5f, v1 = x[j + 16] * id + 8.5f;
        int q0 = v0 >= 15.0f ? 15 : v0 > 0.0f ? (int)v0 : 0, q1 = v1 >= 15.0f ? 15 : v1 > 0.0f ? (int)v1 : 0;
        b[2 + j] = (uint8_t)(q0 | q1 << 4);
    }
}

/* rint(v) clamped to [0, hi], NaN to 0 */
static inline int code_in(float v, int hi) {
    v = rintf(v);
    return v >= (float)hi ? hi : v > 0.0f ? (int)v : 0;
}

/* Sub-block x (32) quantized with 6-bit codes sc, mn against d, dmin: its
 * codes into q and the squared error, summed in order (as gguf_write.py). */
static float q4k_try(const float *x, float d, float dmin, int sc, int mn, uint8_t *q) {
    const float ds = d * (float)sc, dm = dmin * (float)mn;
    float err = 0.0f;
    for (int l = 0; l < 32; l++) {
        q[l] = (uint8_t)(ds > 0.0f ? code_in((x[l] + dm) / ds, 15) : 0);
        const float e = ds * (float)q[l] - dm - x[l];
        err += e * e;
    }
    return err;
}

/* Q4_K: each sub-block s of 32 spans [lo_s, hi_s] with lo_s = min(0, min x),
 * so step_s = (hi_s - lo_s) / 15 and minimum -lo_s; the block's d and dmin
 * are the largest step and minimum over 63 (as fp16), the 6-bit codes
 * rint(step_s / d) and rint(-lo_s / dmin), each moved by -1, 0 or +1 to
 * whichever of the nine pairs (the unmoved first, ties to the earlier) gives
 * the least squared error, each weight the code nearest (x + dmin mn_s) /
 * (d sc_s). (8% less error than the unmoved codes on the bundled model.) */
static void quant_q4_k(const float *x, uint8_t *b) {
    float step[8], neg[8], max_step = 0.0f, max_neg = 0.0f;
    for (int s = 0; s < 8; s++) {
        float lo = 0.0f, hi = x[32 * s];
        for (int l = 0; l < 32; l++) {
            lo = x[32 * s + l] < lo ? x[32 * s + l] : lo;
            hi = x[32 * s + l] > hi ? x[32 * s + l] : hi;
        }
        step[s] = (hi - lo) / 15.0f, neg[s] = 0.0f - lo;
        max_step = step[s] > max_step ? step[s] : max_step;
        max_neg = neg[s] > max_neg ? neg[s] : max_neg;
    }
    f16_put(b, max_step / 63.0f);
    f16_put(b + 2, max_neg / 63.0f);
    const float d = f16_at(b), dmin = f16_at(b + 2);
    static const int moves[9][2] = {{0, 0}, {-1, -1}, {-1, 0}, {-1, 1}, {0, -1}, {0, 1}, {1, -1}, {1, 0}, {1, 1}};
    uint8_t sc[8], mn[8], *S = b + 4, *qs = b + 16, q[32], best[8][32];
    for (int s = 0; s < 8; s++) {
        const int sc0 = d > 0.0f ? code_in(step[s] / d, 63) : 0, mn0 = dmin > 0.0f ? code_in(neg[s] / dmin, 63) : 0;
        float least = 0.0f;
        for (int m = 0; m < 9; m++) {
            const int c = sc0 + moves[m][0], n = mn0 + moves[m][1];
            if (c < 0 || c > 63 || n < 0 || n > 63) continue;
            const float err = q4k_try(x + 32 * s, d, dmin, c, n, q);
            if (m == 0 || err < least) {
                least = err, sc[s] = (uint8_t)c, mn[s] = (uint8_t)n;
                memcpy(best[s], q, 32);
            }
        }
    }
    for (int s = 0; s < 4; s++) {
        S[s] = (uint8_t)(sc[s] | (sc[s + 4] >> 4) << 6);
        S[s + 4] = (uint8_t)(mn[s] | (mn[s + 4] >> 4) << 6);
        S[s + 8] = (uint8_t)((sc[s + 4] & 15) | (mn[s + 4] & 15) << 4);
    }
    memset(qs, 0, 128);
    for (int s = 0; s < 8; s++)
        for (int l = 0; l < 32; l++) qs[32 * (s / 2) + l] |= (uint8_t)(best[s][l] << 4 * (s & 1));
}

void quant_quantize_row(gpt2_dtype dt, const float *src, void *dst, int n) {
    const quant_format *f = quant_format_of(dt);
    uint8_t *b = dst;
    for (int i = 0; i < n; i += f->block, b += f->block_bytes) {
        if (dt == GPT2_DTYPE_Q8_0) quant_q8_0(src + i, b);
        else if (dt == GPT2_DTYPE_Q4_0) quant_q4_0(src + i, b);
        else if (dt == GPT2_DTYPE_Q4_K) quant_q4_k(src + i, b);
    }
}

/* --- 16-bit input vectors ------------------------------------------------------ */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t quant_x_bytes(int n) {
    const size_t nb = (size_t)n / 32;
    return 3 * align64(nb * 4) + align64(2 * nb * 4) + align64((size_t)n * sizeof(int16_t)) + 2 * align64((size_t)n);
}

enum { X_MAX = 32639 }; /* 127 * 256 + 127: q = 256 hi + lo with both in [-128, 127] */
/* Blocks whose largest |x| is below this count as zero (X_MAX / max|x| would
 * overflow float; their products are below 1e-30 anyway). */
#define X_TINY 1e-30f

#if defined(QUANT_AVX2)
static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* Block b of x from v (32 floats): the scalar loop's values (rint is the
 * default rounding of vcvtps2dq), 8 at a time; the sums through vpmaddwd. */
static inline __attribute__((always_inline)) void x_block_avx2(quant_x *x, size_t b, const float *v, int full) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 f[4], a = _mm256_setzero_ps();
    int nan = 0;
    for (int i = 0; i < 4; i++) {
        f[i] = _mm256_loadu_ps(v + 8 * i);
        a = _mm256_max_ps(a, _mm256_andnot_ps(sign, f[i]));
        nan |= _mm256_movemask_ps(_mm256_cmp_ps(f[i], f[i], _CMP_UNORD_Q));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float amax = nan ? NAN : _mm_cvtss_f32(m);
    const float id = amax >= X_TINY ? (float)X_MAX / amax : 0.0f;
    __m256i w[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    if (id != 0.0f) { /* else every q is 0, as the scalar loop makes them (NaN, Inf, zeros) */
        const __m256 vid = _mm256_set1_ps(id);
        const __m256i lim = _mm256_set1_epi32(X_MAX), nlim = _mm256_set1_epi32(-X_MAX);
        __m256i q[4];
        for (int i = 0; i < 4; i++)
            q[i] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(f[i], vid)), lim), nlim);
        w[0] = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);
        w[1] = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), 0xD8);
    }
    x->d[b] = amax / (float)X_MAX;
    for (int h = 0; h < 2; h++) _mm256_storeu_si256((__m256i *)(x->q + 32 * b + 16 * h), w[h]);
    if (!full) return;
    __m256i hi[2], lo[2];
    for (int h = 0; h < 2; h++) {
        hi[h] = _mm256_srai_epi16(_mm256_add_epi16(w[h], _mm256_set1_epi16(128)), 8);
        lo[h] = _mm256_sub_epi16(w[h], _mm256_slli_epi16(hi[h], 8));
    }
    _mm256_storeu_si256((__m256i *)(x->hi + 32 * b), _mm256_permute4x64_epi64(_mm256_packs_epi16(hi[0], hi[1]), 0xD8));
    _mm256_storeu_si256((__m256i *)(x->lo + 32 * b), _mm256_permute4x64_epi64(_mm256_packs_epi16(lo[0], lo[1]), 0xD8));
    const __m256i ones = _mm256_set1_epi16(1);
    x->sum16[2 * b] = hsum_epi32(_mm256_madd_epi16(w[0], ones));
    x->sum16[2 * b + 1] = hsum_epi32(_mm256_madd_epi16(w[1], ones));
    x->sum[b] = x->sum16[2 * b] + x->sum16[2 * b + 1];
    x->ds[b] = x->d[b] * (float)x->sum[b];
}
#endif

/* The pieces of x in buf (quant_x_bytes(n)). */
static void x_layout(quant_x *x, void *buf, int n) {
    const size_t nb = (size_t)n / 32;
    char *p = buf;
    x->d = (float *)p, p += align64(nb * 4);
    x->ds = (float *)p, p += align64(nb * 4);
    x->sum = (int32_t *)p, p += align64(nb * 4);
    x->sum16 = (int32_t *)p, p += align64(2 * nb * 4);
    x->q = (int16_t *)p, p += align64((size_t)n * sizeof(int16_t));
    x->hi = (int8_t *)p, p += align64((size_t)n);
    x->lo = (int8_t *)p;
    x->n = n;
}

static void x_block_ref(quant_x *x, size_t b, const float *v) {
    float amax = 0.0f;
    int nan = 0;
    for (int j = 0; j < 32; j++) {
        const float a = fabsf(v[j]);
        nan |= a != a;
        amax = a > amax ? a : amax;
    }
    if (nan) amax = NAN; /* the scale, so every product of the block, is NaN; its q are 0 */
    const float id = amax >= X_TINY ? (float)X_MAX / amax : 0.0f;
    int sum[2] = {0, 0};
    for (int j = 0; j < 32; j++) {
        const float r = rintf(v[j] * id);
        const int q = r >= (float)X_MAX ? X_MAX : r <= -(float)X_MAX ? -X_MAX : r == r ? (int)r : 0;
        const int hi = (q + 128) >> 8; /* arithmetic shift: floor */
        x->q[32 * b + j] = (int16_t)q;
        x->hi[32 * b + j] = (int8_t)hi, x->lo[32 * b + j] = (int8_t)(q - 256 * hi);
        sum[j / 16] += q;
    }
    x->d[b] = amax / (float)X_MAX;
    x->sum16[2 * b] = sum[0], x->sum16[2 * b + 1] = sum[1];
    x->sum[b] = sum[0] + sum[1];
    x->ds[b] = x->d[b] * (float)x->sum[b];
}

void quant_x_set_ref(quant_x *x, void *buf, const float *src, int n) {
    x_layout(x, buf, n);
    for (size_t b = 0; b < (size_t)n / 32; b++) x_block_ref(x, b, src + 32 * b);
}

/* quant_x_set (full) or quant_x_set_q16 (q and d only) */
static inline __attribute__((always_inline)) void x_set(quant_x *x, void *buf, const float *src, int n, int full) {
#if defined(QUANT_AVX2)
    x_layout(x, buf, n);
    for (size_t b = 0; b < (size_t)n / 32; b++) x_block_avx2(x, b, src + 32 * b, full);
#else
    (void)full;
    quant_x_set_ref(x, buf, src, n);
#endif
}

void quant_x_set(quant_x *x, void *buf, const float *src, int n) { x_set(x, buf, src, n, 1); }
void quant_x_set_q16(quant_x *x, void *buf, const float *src, int n) { x_set(x, buf, src, n, 0); }

/* --- dot products: the portable reference ---------------------------------------
 *
 * Integer sums per group of 32 weights (exact), scaled in float and summed
 * in block order. (The loops are kept out of GCC's vectorizer: GCC 12.2 with
 * -march=native on an AVX512-VNNI machine turned a signed x signed 8-bit dot
 * product into vpdpbusd, which is unsigned x signed: -72451 for 3581.) */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_AUTOVEC __attribute__((optimize("no-tree-vectorize")))
#else
#define NO_AUTOVEC
#endif

/* The 32 signed codes of block b (offset applied) into q; returns the
 * block's d and sets *m to its minimum term's factor (0 without one). */
static float codes32(gpt2_dtype dt, const uint8_t *w, int *q, float *m) {
    uint8_t u[32];
    *m = 0.0f;
    switch (dt) {
    case GPT2_DTYPE_Q8_0:
        for (int j = 0; j < 32; j++) q[j] = (int8_t)w[2 + j];
        return f16_at(w);
    case GPT2_DTYPE_Q4_0: codes_q4_0(w + 2, u); break;
    case GPT2_DTYPE_Q4_1: codes_q4_0(w + 4, u); break;
    case GPT2_DTYPE_Q5_0: codes_q5(w + 2, w + 6, u); break;
    default: codes_q5(w + 4, w + 8, u); break;
    }
    const int off = dt == GPT2_DTYPE_Q4_0 ? 8 : dt == GPT2_DTYPE_Q5_0 ? 16 : 0;
    for (int j = 0; j < 32; j++) q[j] = u[j] - off;
    if (dt == GPT2_DTYPE_Q4_1 || dt == GPT2_DTYPE_Q5_1) *m = f16_at(w + 2);
    return f16_at(w);
}

NO_AUTOVEC static float dot32_ref(gpt2_dtype dt, const uint8_t *w, const quant_x *x) {
    const int bytes = quant_format_of(dt)->block_bytes;
    float sum = 0.0f;
    for (int b = 0; b < x->n / 32; b++, w += bytes) {
        int q[32], s = 0;
        float m;
        const float d = codes32(dt, w, q, &m);
        for (int j = 0; j < 32; j++) s += q[j] * x->q[32 * b + j];
        sum += d * x->d[b] * (float)s + m * x->ds[b];
    }
    return sum;
}

NO_AUTOVEC static float dot_k_ref(gpt2_dtype dt, const uint8_t *w, const quant_x *x) {
    const int bytes = quant_format_of(dt)->block_bytes, k5 = dt == GPT2_DTYPE_Q5_K;
    float sum = 0.0f;
    uint8_t q[32], sc[8], mn[8];
    for (int i = 0; i < x->n / 256; i++, w += bytes) {
        if (dt != GPT2_DTYPE_Q6_K) k_scales(w + 4, sc, mn);
        for (int g = 0; g < 8; g++) {
            const int b = 8 * i + g;
            const int16_t *xq = x->q + 32 * b;
            if (dt == GPT2_DTYPE_Q6_K) {
                codes_q6(w, g, q);
                const int8_t *s6 = (const int8_t *)w + 192 + 2 * g;
                int lo = 0, hi = 0; /* |sums| < 2^24: exact as floats */
                for (int l = 0; l < 16; l++) lo += (q[l] - 32) * xq[l], hi += (q[l + 16] - 32) * xq[l + 16];
                sum += f16_at(w + 208) * x->d[b] * ((float)s6[0] * (float)lo + (float)s6[1] * (float)hi);
                continue;
            }
            codes_k(w + (k5 ? 48 : 16), k5 ? w + 16 : NULL, g, q);
            int s = 0;
            for (int l = 0; l < 32; l++) s += q[l] * xq[l];
            sum += f16_at(w) * (float)sc[g] * x->d[b] * (float)s - f16_at(w + 2) * (float)mn[g] * x->ds[b];
        }
    }
    return sum;
}

float quant_dot_ref(gpt2_dtype dt, const void *row, const quant_x *x) {
    if (dt == GPT2_DTYPE_Q4_K || dt == GPT2_DTYPE_Q5_K || dt == GPT2_DTYPE_Q6_K) return dot_k_ref(dt, row, x);
    return dot32_ref(dt, row, x);
}

/* --- dot products: AVX2 ------------------------------------------------------------
 *
 * Codes widened to 16-bit lanes (offsets applied), multiplied by the input's
 * 16-bit q with vpmaddwd (vpdpwssd where AVX512-VNNI or AVX-VNNI has it: the
 * same exact sums), each 32 (Q6_K: 16) weights' int32 sums converted to float
 * and scaled into one float vector, summed across at the end. Kernel code:
 * long, straight-line, one block format each. */
#if defined(QUANT_AVX2)

static inline __m256i madd16(__m256i acc, __m256i a, __m256i b) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, a, b);
#elif defined(__AVXVNNI__)
    return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256i u8x16(const uint8_t *p) { return _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p)); }
static inline __m256i i8x16(const uint8_t *p) { return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)); }
static inline __m256i x16(const int16_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 16 in lane j where bit j of the 16-bit h is set */
static inline __m256i hbits16(uint32_t h) {
    const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
                                          (short)0x8000);
    const __m256i v = _mm256_and_si256(_mm256_set1_epi16((short)h), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi16(v, bit), _mm256_set1_epi16(16));
}

/* Q8_0 ... Q5_1, inlined once per format */
static inline __attribute__((always_inline)) float dot32_avx2(gpt2_dtype dt, const uint8_t *w, const quant_x *x) {
    const int bytes = dt == GPT2_DTYPE_Q8_0 ? 34 : dt == GPT2_DTYPE_Q4_0 ? 18 : dt == GPT2_DTYPE_Q4_1 ? 20
                    : dt == GPT2_DTYPE_Q5_0 ? 22 : 24;
    const int has_m = dt == GPT2_DTYPE_Q4_1 || dt == GPT2_DTYPE_Q5_1;
    const __m256i low4 = _mm256_set1_epi16(15), zero = _mm256_setzero_si256();
    __m256 acc = _mm256_setzero_ps();
    float corr = 0.0f;
    for (int b = 0; b < x->n / 32; b++, w += bytes) {
        const int16_t *xq = x->q + 32 * b;
        __m256i lo, hi;
        if (dt == GPT2_DTYPE_Q8_0) {
            lo = i8x16(w + 2), hi = i8x16(w + 18);
        } else if (dt == GPT2_DTYPE_Q4_0 || dt == GPT2_DTYPE_Q4_1) {
            const __m256i v = u8x16(w + (has_m ? 4 : 2));
            lo = _mm256_and_si256(v, low4), hi = _mm256_srli_epi16(v, 4);
        } else {
            const __m256i v = u8x16(w + (has_m ? 8 : 6));
            const uint32_t h = u32_at(w + (has_m ? 4 : 2));
            lo = _mm256_or_si256(_mm256_and_si256(v, low4), hbits16(h & 0xFFFF));
            hi = _mm256_or_si256(_mm256_srli_epi16(v, 4), hbits16(h >> 16));
        }
        if (dt == GPT2_DTYPE_Q4_0 || dt == GPT2_DTYPE_Q5_0) {
            const __m256i off = _mm256_set1_epi16(dt == GPT2_DTYPE_Q4_0 ? 8 : 16);
            lo = _mm256_sub_epi16(lo, off), hi = _mm256_sub_epi16(hi, off);
        }
        const __m256i s = madd16(madd16(zero, lo, x16(xq)), hi, x16(xq + 16));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(f16_at(w) * x->d[b]), acc);
        if (has_m) corr += f16_at(w + 2) * x->ds[b];
    }
    return hsum8(acc) + corr;
}

/* bit g of each of 16 bytes (widened to 16-bit lanes) as 16 or 0 */
static inline __m256i bit_to_16(__m256i v, int g) {
    const __m256i m = _mm256_set1_epi16(16);
    if (g >= 4) return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(g - 4)), m);
    return _mm256_and_si256(_mm256_sll_epi16(v, _mm_cvtsi32_si128(4 - g)), m);
}

static inline __attribute__((always_inline)) float dot_q45k_avx2(int k5, const uint8_t *w, const quant_x *x) {
    const __m256i low4 = _mm256_set1_epi16(15), zero = _mm256_setzero_si256();
    __m256 acc = _mm256_setzero_ps();
    float corr = 0.0f;
    uint8_t sc[8], mn[8];
    for (int i = 0; i < x->n / 256; i++, w += k5 ? 176 : 144) {
        const float d = f16_at(w), dmin = f16_at(w + 2);
        const uint8_t *qs = w + (k5 ? 48 : 16);
        k_scales(w + 4, sc, mn);
        __m256i qha = zero, qhb = zero;
        if (k5) qha = u8x16(w + 16), qhb = u8x16(w + 32);
        for (int c = 0; c < 4; c++) {
            const int b = 8 * i + 2 * c;
            const __m256i va = u8x16(qs + 32 * c), vb = u8x16(qs + 32 * c + 16);
            __m256i la = _mm256_and_si256(va, low4), lb = _mm256_and_si256(vb, low4);
            __m256i ha = _mm256_srli_epi16(va, 4), hb = _mm256_srli_epi16(vb, 4);
            if (k5) {
                la = _mm256_or_si256(la, bit_to_16(qha, 2 * c)), lb = _mm256_or_si256(lb, bit_to_16(qhb, 2 * c));
                ha = _mm256_or_si256(ha, bit_to_16(qha, 2 * c + 1)), hb = _mm256_or_si256(hb, bit_to_16(qhb, 2 * c + 1));
            }
            const int16_t *x0 = x->q + 32 * b, *x1 = x0 + 32;
            const __m256i s0 = madd16(madd16(zero, la, x16(x0)), lb, x16(x0 + 16));
            const __m256i s1 = madd16(madd16(zero, ha, x16(x1)), hb, x16(x1 + 16));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_set1_ps(d * (float)sc[2 * c] * x->d[b]), acc);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_set1_ps(d * (float)sc[2 * c + 1] * x->d[b + 1]), acc);
            corr += dmin * (float)mn[2 * c] * x->ds[b] + dmin * (float)mn[2 * c + 1] * x->ds[b + 1];
        }
    }
    return hsum8(acc) - corr;
}

/* The high 2 bits of a Q6_K quarter r (0..3) in bits 4-5: ((H >> 2r) & 3) << 4. */
static inline __m256i q6_high(__m256i H, int r) {
    const __m256i m = _mm256_set1_epi16(48);
    switch (r) {
    case 0: return _mm256_and_si256(_mm256_slli_epi16(H, 4), m);
    case 1: return _mm256_and_si256(_mm256_slli_epi16(H, 2), m);
    case 2: return _mm256_and_si256(H, m);
    default: return _mm256_and_si256(_mm256_srli_epi16(H, 2), m);
    }
}

static float dot_q6k_avx2(const uint8_t *w, const quant_x *x) {
    const __m256i low4 = _mm256_set1_epi16(15), off = _mm256_set1_epi16(32), zero = _mm256_setzero_si256();
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < x->n / 256; i++, w += 210) {
        const float d = f16_at(w + 208);
        const int8_t *sc = (const int8_t *)w + 192;
        for (int h = 0; h < 2; h++) {
            const uint8_t *L = w + 64 * h, *Hp = w + 128 + 32 * h;
            const __m256i l16[4] = {u8x16(L), u8x16(L + 16), u8x16(L + 32), u8x16(L + 48)};
            const __m256i H[2] = {u8x16(Hp), u8x16(Hp + 16)};
            for (int r = 0; r < 4; r++) {
                const int g = 4 * h + r, b = 8 * i + g;
                const int16_t *xq = x->q + 32 * b;
                const float dx = d * x->d[b];
                for (int half = 0; half < 2; half++) { /* l = 0..15, 16..31: one 16-weight scale each */
                    const __m256i L16 = l16[2 * (r & 1) + half];
                    __m256i q = r < 2 ? _mm256_and_si256(L16, low4) : _mm256_srli_epi16(L16, 4);
                    q = _mm256_sub_epi16(_mm256_or_si256(q, q6_high(H[half], r)), off);
                    const __m256i s = madd16(zero, q, x16(xq + 16 * half));
                    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dx * (float)sc[2 * g + half]), acc);
                }
            }
        }
    }
    return hsum8(acc);
}

float quant_dot(gpt2_dtype dt, const void *row, const quant_x *x) {
    switch (dt) {
    case GPT2_DTYPE_Q8_0: return dot32_avx2(GPT2_DTYPE_Q8_0, row, x);
    case GPT2_DTYPE_Q4_0: return dot32_avx2(GPT2_DTYPE_Q4_0, row, x);
    case GPT2_DTYPE_Q4_1: return dot32_avx2(GPT2_DTYPE_Q4_1, row, x);
    case GPT2_DTYPE_Q5_0: return dot32_avx2(GPT2_DTYPE_Q5_0, row, x);
    case GPT2_DTYPE_Q5_1: return dot32_avx2(GPT2_DTYPE_Q5_1, row, x);
    case GPT2_DTYPE_Q4_K: return dot_q45k_avx2(0, row, x);
    case GPT2_DTYPE_Q5_K: return dot_q45k_avx2(1, row, x);
    case GPT2_DTYPE_Q6_K: return dot_q6k_avx2(row, x);
    default: return quant_dot_ref(dt, row, x);
    }
}

#else
float quant_dot(gpt2_dtype dt, const void *row, const quant_x *x) { return quant_dot_ref(dt, row, x); }
#endif


/* --- the interleaved layout (x8) ------------------------------------------------------
 *
 * Layouts in quant.h. Accessors first (pack, dequantize and the reference
 * read a group through them), then the AVX2 kernels. */

#if defined(QUANT_AVX2) && ((defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__))
#define QUANT_VNNI 1
#endif

int quant_x8(gpt2_dtype dt) {
#if defined(QUANT_VNNI)
    if (dt == GPT2_DTYPE_Q8_0) return 1;
#endif
    return dt == GPT2_DTYPE_Q4_0 || dt == GPT2_DTYPE_Q4_K || dt == GPT2_DTYPE_Q5_K || dt == GPT2_DTYPE_Q6_K;
}

/* A K-quant group super-block's sub-block s (32 inputs): its chunks. */
static inline const uint8_t *x8_sub(gpt2_dtype dt, const uint8_t *g, int s) {
    return dt == GPT2_DTYPE_Q4_K ? g + 128 + 128 * s : dt == GPT2_DTYPE_Q5_K ? g + 128 + 160 * s : g + 144 + 192 * s;
}

size_t quant_x8_group_bytes(gpt2_dtype dt, int K) { return 8 * quant_row_bytes(dt, (size_t)K); }

size_t quant_x8_bytes(gpt2_dtype dt, int N, int K) { return (size_t)((N + 7) / 8) * quant_x8_group_bytes(dt, K); }

/* In 4 chunks of 32 bytes (Q4_0's, Q4_K's sub-blocks, Q6_K's low bits): the
 * byte of row r's input k (0..31), and the nibble's shift. */
static inline int nib_at(int r, int k) { return 32 * (k / 8) + 4 * r + k % 4; }
static inline int nib_shift(int k) { return k % 8 < 4 ? 0 : 4; }
static inline int nib(const uint8_t *chunks, int r, int k) { return chunks[nib_at(r, k)] >> nib_shift(k) & 15; }
/* Q5_K: the 5th bit of row r's input k, in the 32 bytes after the chunks */
static inline int q5_hb_at(int r, int k) { return 128 + 4 * r + k % 4; }
static inline int q5_hb_bit(int k) { return 2 * (k / 8) + k % 8 / 4; }
/* Q6_K: the high 2 bits of row r's input k in the two runs after the chunks */
static inline int q6_hb_at(int r, int k) { return 128 + 32 * (k / 16) + 4 * r + k % 4; }
static inline int q6_hb_shift(int k) { return 2 * (2 * (k / 8 % 2) + k % 8 / 4); }

/* Row r's value of input k (0..31) of group block / sub-block `blk`, less its
 * offset (Q4_0: q - 8, Q8_0: the signed code, Q4_K: q, Q6_K: q - 32). */
static inline int x8_code(gpt2_dtype dt, const uint8_t *blk, int r, int k) {
    switch (dt) {
    case GPT2_DTYPE_Q4_0: return nib(blk + 16, r, k) - 8;
    case GPT2_DTYPE_Q8_0: return blk[16 + 32 * (k / 4) + 4 * r + k % 4] - 128;
    case GPT2_DTYPE_Q4_K: return nib(blk, r, k);
    case GPT2_DTYPE_Q5_K: return nib(blk, r, k) | (blk[q5_hb_at(r, k)] >> q5_hb_bit(k) & 1) << 4;
    default: return (nib(blk, r, k) | (blk[q6_hb_at(r, k)] >> q6_hb_shift(k) & 3) << 4) - 32;
    }
}

/* Row r's K-quant scale bytes out of a group super-block (Q4_K: 12 at 32..). */
static void x8_k_scales(const uint8_t *sb, int r, uint8_t *sc, uint8_t *mn) {
    uint8_t S[12];
    for (int j = 0; j < 12; j++) S[j] = sb[32 + 8 * j + r];
    k_scales(S, sc, mn);
}

/* One plain row's block (or super-block) into row r of a group's. */
static void x8_pack_block(gpt2_dtype dt, const uint8_t *pb, int r, uint8_t *blk) {
    uint8_t q[32];
    if (dt == GPT2_DTYPE_Q4_0 || dt == GPT2_DTYPE_Q8_0) {
        blk[2 * r] = pb[0], blk[2 * r + 1] = pb[1];
        if (dt == GPT2_DTYPE_Q8_0) {
            for (int k = 0; k < 32; k++) blk[16 + 32 * (k / 4) + 4 * r + k % 4] = pb[2 + k] ^ 0x80;
            return;
        }
        codes_q4_0(pb + 2, q);
        for (int k = 0; k < 32; k++) blk[16 + nib_at(r, k)] |= (uint8_t)(q[k] << nib_shift(k));
    } else if (dt == GPT2_DTYPE_Q4_K || dt == GPT2_DTYPE_Q5_K) {
        const int k5 = dt == GPT2_DTYPE_Q5_K;
        blk[2 * r] = pb[0], blk[2 * r + 1] = pb[1], blk[16 + 2 * r] = pb[2], blk[17 + 2 * r] = pb[3];
        for (int j = 0; j < 12; j++) blk[32 + 8 * j + r] = pb[4 + j];
        for (int s = 0; s < 8; s++) {
            uint8_t *sb = (uint8_t *)x8_sub(dt, blk, s);
            codes_k(pb + (k5 ? 48 : 16), k5 ? pb + 16 : NULL, s, q);
            for (int k = 0; k < 32; k++) {
                sb[nib_at(r, k)] |= (uint8_t)((q[k] & 15) << nib_shift(k));
                if (k5) sb[q5_hb_at(r, k)] |= (uint8_t)((q[k] >> 4) << q5_hb_bit(k));
            }
        }
    } else { /* Q6_K */
        blk[2 * r] = pb[208], blk[2 * r + 1] = pb[209];
        for (int i = 0; i < 16; i++) blk[16 + 8 * i + r] = pb[192 + i];
        for (int g = 0; g < 8; g++) {
            uint8_t *base = blk + 144 + 192 * g;
            codes_q6(pb, g, q);
            for (int k = 0; k < 32; k++) {
                base[nib_at(r, k)] |= (uint8_t)((q[k] & 15) << nib_shift(k));
                base[q6_hb_at(r, k)] |= (uint8_t)((q[k] >> 4) << q6_hb_shift(k));
            }
        }
    }
}

/* Bytes and inputs of a (super-)block in a group: 8 plain ones side by side. */
static int x8_unit(gpt2_dtype dt) { return quant_format_of(dt)->block; }

void quant_x8_pack(gpt2_dtype dt, const void *src, int N, int K, void *dst) {
    const size_t rb = quant_row_bytes(dt, (size_t)K), gb = quant_x8_group_bytes(dt, K);
    const int unit = x8_unit(dt), ub = quant_format_of(dt)->block_bytes;
    memset(dst, 0, quant_x8_bytes(dt, N, K));
    for (int n = 0; n < N; n++) {
        const uint8_t *row = (const uint8_t *)src + (size_t)n * rb;
        uint8_t *g = (uint8_t *)dst + (size_t)(n / 8) * gb;
        for (int b = 0; b < K / unit; b++) x8_pack_block(dt, row + (size_t)b * ub, n % 8, g + (size_t)b * 8 * ub);
    }
}

/* Row r of a group, dequantized: the plain formulas (dequant_block). */
static void x8_dequantize_row(gpt2_dtype dt, const uint8_t *g, int K, int r, float *y) {
    const int unit = x8_unit(dt), ub = 8 * quant_format_of(dt)->block_bytes;
    uint8_t sc[8], mn[8];
    for (int b = 0; b < K / unit; b++, g += ub, y += unit) {
        if (dt == GPT2_DTYPE_Q4_0 || dt == GPT2_DTYPE_Q8_0) {
            const float d = f16_at(g + 2 * r);
            for (int k = 0; k < 32; k++)
                y[k] = dt == GPT2_DTYPE_Q4_0 ? d * (float)x8_code(dt, g, r, k) : (float)x8_code(dt, g, r, k) * d;
        } else if (dt == GPT2_DTYPE_Q4_K || dt == GPT2_DTYPE_Q5_K) {
            const float d = f16_at(g + 2 * r), dmin = f16_at(g + 16 + 2 * r);
            x8_k_scales(g, r, sc, mn);
            for (int s = 0; s < 8; s++) {
                const float ds = d * (float)sc[s], dm = dmin * (float)mn[s];
                for (int k = 0; k < 32; k++) y[32 * s + k] = ds * (float)x8_code(dt, x8_sub(dt, g, s), r, k) - dm;
            }
        } else {
            const float d = f16_at(g + 2 * r);
            for (int s = 0; s < 8; s++)
                for (int k = 0; k < 32; k++) {
                    const float ds = d * (float)(int8_t)g[16 + 8 * (2 * s + k / 16) + r];
                    y[32 * s + k] = ds * (float)x8_code(dt, g + 144 + 192 * s, r, k);
                }
        }
    }
}

#if defined(QUANT_AVX2)
static void x8_dequantize_avx2(gpt2_dtype dt, const uint8_t *g, int K, float *dst);
#endif

void quant_x8_dequantize(gpt2_dtype dt, const void *group, int K, int r, float *dst) {
#if defined(QUANT_AVX2)
    if (r < 0) {
        x8_dequantize_avx2(dt, group, K, dst);
        return;
    }
#endif
    if (r >= 0) x8_dequantize_row(dt, group, K, r, dst);
    else
        for (int row = 0; row < 8; row++) x8_dequantize_row(dt, group, K, row, dst + (size_t)row * K);
}

/* The plain reference's sums (dot32_ref, dot_k_ref), row by row. */
NO_AUTOVEC void quant_x8_dot_ref(gpt2_dtype dt, const void *group, const quant_x *x, float *out) {
    const int unit = x8_unit(dt), ub = 8 * quant_format_of(dt)->block_bytes;
    uint8_t sc[8], mn[8];
    for (int r = 0; r < 8; r++) {
        const uint8_t *g = group;
        float sum = 0.0f;
        for (int u = 0; u < x->n / unit; u++, g += ub) {
            if (unit == 32) {
                int s = 0;
                for (int k = 0; k < 32; k++) s += x8_code(dt, g, r, k) * x->q[32 * u + k];
                sum += f16_at(g + 2 * r) * x->d[u] * (float)s;
                continue;
            }
            if (dt != GPT2_DTYPE_Q6_K) x8_k_scales(g, r, sc, mn);
            for (int s = 0; s < 8; s++) {
                const int b = 8 * u + s;
                const int16_t *xq = x->q + 32 * b;
                if (dt != GPT2_DTYPE_Q6_K) {
                    int is = 0;
                    for (int k = 0; k < 32; k++) is += x8_code(dt, x8_sub(dt, g, s), r, k) * xq[k];
                    sum += f16_at(g + 2 * r) * (float)sc[s] * x->d[b] * (float)is -
                           f16_at(g + 16 + 2 * r) * (float)mn[s] * x->ds[b];
                    continue;
                }
                int lo = 0, hi = 0;
                for (int k = 0; k < 16; k++) {
                    lo += x8_code(dt, g + 144 + 192 * s, r, k) * xq[k];
                    hi += x8_code(dt, g + 144 + 192 * s, r, k + 16) * xq[k + 16];
                }
                sum += f16_at(g + 2 * r) * x->d[b] *
                       ((float)(int8_t)g[16 + 8 * (2 * s) + r] * (float)lo + (float)(int8_t)g[16 + 8 * (2 * s + 1) + r] * (float)hi);
            }
        }
        out[r] = sum;
    }
}

/* --- x8 kernels: AVX2 --------------------------------------------------------------- */
#if defined(QUANT_AVX2)

/* acc + the sums of 4 products of unsigned bytes u and signed bytes s per lane */
static inline __m256i dp_u8s8(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else /* |u s + u' s'| <= 2 * 63 * 128: no 16-bit saturation for codes of up to 6 bits */
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

static inline __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

static inline __m256i load32(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 256 hi + lo products of 32 inputs with 4 chunks of nibble codes (high
 * bits or'ed in by the caller through hb: NULL for none) */
typedef struct { __m256i h, l; } acc2;

static inline acc2 chunks4(acc2 a, const uint8_t *chunks, const __m256i *hb_lo, const __m256i *hb_hi,
                           const int8_t *xh, const int8_t *xl, int c0, int c1) {
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int c = c0; c < c1; c++) {
        const __m256i v = load32(chunks + 32 * c);
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if (hb_lo) lo = _mm256_or_si256(lo, hb_lo[c]), hi = _mm256_or_si256(hi, hb_hi[c]);
        a.h = dp_u8s8(dp_u8s8(a.h, lo, bcast4(xh + 8 * c)), hi, bcast4(xh + 8 * c + 4));
        a.l = dp_u8s8(dp_u8s8(a.l, lo, bcast4(xl + 8 * c)), hi, bcast4(xl + 8 * c + 4));
    }
    return a;
}

static inline __m256i combine(acc2 a, int32_t offset_sum) {
    return _mm256_sub_epi32(_mm256_add_epi32(_mm256_slli_epi32(a.h, 8), a.l), _mm256_set1_epi32(offset_sum));
}

static inline __m256 halves8(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* Q4_0 and Q8_0, 8 rows: per block one vector scaling for the 8 rows. */
static void x8_dot32_avx2(gpt2_dtype dt, const uint8_t *g, const quant_x *x, float *out) {
    const int q8 = dt == GPT2_DTYPE_Q8_0;
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < x->n / 32; b++, g += q8 ? 272 : 144) {
        const int8_t *xh = x->hi + 32 * b, *xl = x->lo + 32 * b;
        acc2 a = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        if (q8)
            for (int c = 0; c < 8; c++) {
                const __m256i v = load32(g + 16 + 32 * c);
                a.h = dp_u8s8(a.h, v, bcast4(xh + 4 * c)), a.l = dp_u8s8(a.l, v, bcast4(xl + 4 * c));
            }
        else
            a = chunks4(a, g + 16, NULL, NULL, xh, xl, 0, 4);
        const __m256i s = combine(a, (q8 ? 128 : 8) * x->sum[b]);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(halves8(g), _mm256_set1_ps(x->d[b])), acc);
    }
    _mm256_storeu_ps(out, acc);
}

/* Q5_K's 5th bits of chunk c's low and high nibbles' codes (quant.h) as 16 */
static inline void q5_bits(__m256i H, __m256i *lo, __m256i *hi) {
    const __m256i m10 = _mm256_set1_epi8(0x10);
    lo[0] = _mm256_and_si256(_mm256_slli_epi16(H, 4), m10), hi[0] = _mm256_and_si256(_mm256_slli_epi16(H, 3), m10);
    lo[1] = _mm256_and_si256(_mm256_slli_epi16(H, 2), m10), hi[1] = _mm256_and_si256(_mm256_slli_epi16(H, 1), m10);
    lo[2] = _mm256_and_si256(H, m10), hi[2] = _mm256_and_si256(_mm256_srli_epi16(H, 1), m10);
    lo[3] = _mm256_and_si256(_mm256_srli_epi16(H, 2), m10), hi[3] = _mm256_and_si256(_mm256_srli_epi16(H, 3), m10);
}

/* Q4_K and Q5_K, 8 rows: the 6-bit scales of the 8 rows unpacked together,
 * 32 bytes at a time (their transposed bytes); per sub-block one vector
 * scaling. */
static void x8_dot_q45k_avx2(int k5, const uint8_t *g, const quant_x *x, float *out) {
    const __m256i m6 = _mm256_set1_epi8(63), m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps(), macc = _mm256_setzero_ps();
    uint8_t sc[8][8], mn[8][8];
    const gpt2_dtype dt = k5 ? GPT2_DTYPE_Q5_K : GPT2_DTYPE_Q4_K;
    for (int u = 0; u < x->n / 256; u++, g += k5 ? 1408 : 1152) {
        const __m256i A = load32(g + 32), B = load32(g + 64), C = load32(g + 96);
        _mm256_storeu_si256((__m256i *)sc[0], _mm256_and_si256(A, m6));
        _mm256_storeu_si256((__m256i *)mn[0], _mm256_and_si256(B, m6));
        _mm256_storeu_si256((__m256i *)sc[4], _mm256_or_si256(_mm256_and_si256(C, m4),
                                                              _mm256_and_si256(_mm256_srli_epi16(A, 2), m30)));
        _mm256_storeu_si256((__m256i *)mn[4], _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(C, 4), m4),
                                                              _mm256_and_si256(_mm256_srli_epi16(B, 2), m30)));
        const __m256 d = halves8(g), dmin = halves8(g + 16);
        for (int s = 0; s < 8; s++) {
            const int b = 8 * u + s;
            acc2 a = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            const uint8_t *sb = x8_sub(dt, g, s);
            __m256i hl[4], hh[4];
            if (k5) q5_bits(load32(sb + 128), hl, hh);
            a = chunks4(a, sb, k5 ? hl : NULL, k5 ? hh : NULL, x->hi + 32 * b, x->lo + 32 * b, 0, 4);
            const __m256 scv = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sc[s])));
            const __m256 mnv = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mn[s])));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(combine(a, 0)), _mm256_mul_ps(_mm256_mul_ps(d, scv), _mm256_set1_ps(x->d[b])), acc);
            macc = _mm256_fmadd_ps(_mm256_mul_ps(dmin, mnv), _mm256_set1_ps(x->ds[b]), macc);
        }
    }
    _mm256_storeu_ps(out, _mm256_sub_ps(acc, macc));
}

/* Q6_K, 8 rows: the high 2 bits moved to bits 4-5 (quant.h: runs of 32
 * bytes, two chunks each), one vector scaling per 16 inputs. */
static void x8_dot_q6k_avx2(const uint8_t *g, const quant_x *x, float *out) {
    const __m256i m30 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int u = 0; u < x->n / 256; u++, g += 1680) {
        const __m256 d = halves8(g);
        for (int s = 0; s < 8; s++) {
            const int b = 8 * u + s;
            const uint8_t *base = g + 144 + 192 * s;
            __m256i hl[4], hh[4];
            for (int p = 0; p < 2; p++) {
                const __m256i H = load32(base + 128 + 32 * p);
                hl[2 * p] = _mm256_and_si256(_mm256_slli_epi16(H, 4), m30);
                hh[2 * p] = _mm256_and_si256(_mm256_slli_epi16(H, 2), m30);
                hl[2 * p + 1] = _mm256_and_si256(H, m30);
                hh[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(H, 2), m30);
            }
            const int8_t *xh = x->hi + 32 * b, *xl = x->lo + 32 * b;
            acc2 a = {_mm256_setzero_si256(), _mm256_setzero_si256()}, c = a;
            a = chunks4(a, base, hl, hh, xh, xl, 0, 2); /* inputs 0..15: one scale */
            c = chunks4(c, base, hl, hh, xh, xl, 2, 4); /* 16..31: the next */
            const __m256 ddx = _mm256_mul_ps(d, _mm256_set1_ps(x->d[b]));
            const __m256 s0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(g + 16 + 16 * s))));
            const __m256 s1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(g + 24 + 16 * s))));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(combine(a, 32 * x->sum16[2 * b])), _mm256_mul_ps(ddx, s0), acc);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(combine(c, 32 * x->sum16[2 * b + 1])), _mm256_mul_ps(ddx, s1), acc);
        }
    }
    _mm256_storeu_ps(out, acc);
}

/* v (8 floats, one per row) as 4 vectors [v_2p x 4, v_2p+1 x 4] */
static inline void row_pairs(__m256 v, __m256 *pairs) {
    for (int p = 0; p < 4; p++)
        pairs[p] = _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1, 2 * p + 1,
                                                                 2 * p + 1, 2 * p + 1));
}

/* 32 codes in chunk order (byte 4r + j: row r, input col + j) into the 8 rows
 * of dst (rows K apart): y = mul * (q - offset) [- sub], two rows at a time,
 * the plain formulas' operations in their order. */
static inline void x8_emit(const uint8_t *codes, const __m256 *mul, const __m256 *sub, int offset, float *dst, int K,
                           int col) {
    const __m256i off = _mm256_set1_epi32(offset);
    for (int p = 0; p < 4; p++) {
        const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(codes + 8 * p))), off);
        __m256 y = _mm256_mul_ps(mul[p], _mm256_cvtepi32_ps(q));
        if (sub) y = _mm256_sub_ps(y, sub[p]);
        float *o = dst + (size_t)(2 * p) * K + col;
        _mm_storeu_ps(o, _mm256_castps256_ps128(y));
        _mm_storeu_ps(o + K, _mm256_extractf128_ps(y, 1));
    }
}

/* A group's 8 rows, dequantized (prefill), for the four x8 formats. */
static void x8_dequantize_avx2(gpt2_dtype dt, const uint8_t *g, int K, float *dst) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    uint8_t codes[2][32];
    __m256 mul[4] = {0}, sub[4] = {0};
    const int unit = x8_unit(dt), ub = 8 * quant_format_of(dt)->block_bytes;
    for (int u = 0; u < K / unit; u++, g += ub) {
        float *o = dst + (size_t)u * unit;
        if (dt == GPT2_DTYPE_Q8_0) {
            row_pairs(halves8(g), mul);
            for (int c = 0; c < 8; c++) x8_emit(g + 16 + 32 * c, mul, NULL, 128, o, K, 4 * c);
            continue;
        }
        if (dt == GPT2_DTYPE_Q4_0) row_pairs(halves8(g), mul);
        uint8_t sc[8][8], mn[8][8];
        if (dt == GPT2_DTYPE_Q4_K || dt == GPT2_DTYPE_Q5_K)
            for (int r = 0; r < 8; r++) {
                uint8_t a[8], m[8];
                x8_k_scales(g, r, a, m);
                for (int s = 0; s < 8; s++) sc[s][r] = a[s], mn[s][r] = m[s];
            }
        for (int s = 0; s < (unit == 32 ? 1 : 8); s++) {
            const uint8_t *chunks = dt == GPT2_DTYPE_Q4_0 ? g + 16 : x8_sub(dt, g, s);
            __m256i b5l[4], b5h[4];
            if (dt == GPT2_DTYPE_Q5_K) q5_bits(load32(chunks + 128), b5l, b5h);
            if (dt == GPT2_DTYPE_Q4_K || dt == GPT2_DTYPE_Q5_K) {
                const __m256 scv = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sc[s])));
                const __m256 mnv = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mn[s])));
                row_pairs(_mm256_mul_ps(halves8(g), scv), mul);
                row_pairs(_mm256_mul_ps(halves8(g + 16), mnv), sub);
            }
            for (int c = 0; c < 4; c++) {
                const __m256i v = load32(chunks + 32 * c);
                __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                if (dt == GPT2_DTYPE_Q6_K) { /* quant.h: the high bits' runs, two chunks each */
                    const __m256i H = load32(chunks + 128 + 32 * (c / 2));
                    lo = _mm256_or_si256(lo, _mm256_and_si256(c % 2 ? H : _mm256_slli_epi16(H, 4), m30));
                    hi = _mm256_or_si256(hi, _mm256_and_si256(c % 2 ? _mm256_srli_epi16(H, 2) : _mm256_slli_epi16(H, 2), m30));
                    if (c % 2 == 0) { /* inputs 0..15 of the group: scale 2s; 16..31: 2s + 1 */
                        const __m256 scv = _mm256_cvtepi32_ps(
                            _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(g + 16 + 8 * (2 * s + c / 2)))));
                        row_pairs(_mm256_mul_ps(halves8(g), scv), mul);
                    }
                }
                if (dt == GPT2_DTYPE_Q5_K) lo = _mm256_or_si256(lo, b5l[c]), hi = _mm256_or_si256(hi, b5h[c]);
                _mm256_storeu_si256((__m256i *)codes[0], lo);
                _mm256_storeu_si256((__m256i *)codes[1], hi);
                const int off = dt == GPT2_DTYPE_Q4_0 ? 8 : dt == GPT2_DTYPE_Q6_K ? 32 : 0;
                const __m256 *sb = dt == GPT2_DTYPE_Q4_K || dt == GPT2_DTYPE_Q5_K ? sub : NULL;
                x8_emit(codes[0], mul, sb, off, o, K, 32 * s + 8 * c);
                x8_emit(codes[1], mul, sb, off, o, K, 32 * s + 8 * c + 4);
            }
        }
    }
}

void quant_x8_dot(gpt2_dtype dt, const void *group, const quant_x *x, float *out) {
    switch (dt) {
    case GPT2_DTYPE_Q4_0: x8_dot32_avx2(GPT2_DTYPE_Q4_0, group, x, out); return;
#if defined(QUANT_VNNI)
    case GPT2_DTYPE_Q8_0: x8_dot32_avx2(GPT2_DTYPE_Q8_0, group, x, out); return;
#endif
    case GPT2_DTYPE_Q4_K: x8_dot_q45k_avx2(0, group, x, out); return;
    case GPT2_DTYPE_Q5_K: x8_dot_q45k_avx2(1, group, x, out); return;
    case GPT2_DTYPE_Q6_K: x8_dot_q6k_avx2(group, x, out); return;
    default: quant_x8_dot_ref(dt, group, x, out); return;
    }
}
#else
void quant_x8_dot(gpt2_dtype dt, const void *group, const quant_x *x, float *out) { quant_x8_dot_ref(dt, group, x, out); }
#endif
