/* quant.h — GGUF's block-quantized weight formats, read as stored (library-private).
 *
 * A block format stores a row of n weights as n / B blocks of B weights (B = 32,
 * or 256 for the K-quants), each block a few scales and packed small integers.
 * The layouts are GGUF's (ggml's docs/gguf.md and block definitions), all
 * little-endian, fp16 scales ("d", "m", "dmin"):
 *
 *   Q8_0  32: d, int8 q[32]                          x = d q
 *   Q4_0  32: d, qs[16]                              x = d (q - 8)
 *             q[j] = qs[j] & 15, q[j + 16] = qs[j] >> 4 (j < 16)
 *   Q4_1  32: d, m, qs[16]                           x = d q + m
 *   Q5_0  32: d, qh[4], qs[16]                       x = d (q - 16)
 *             q[j] |= bit j of the little-endian u32 qh, shifted to bit 4
 *   Q5_1  32: d, m, qh[4], qs[16]                    x = d q + m
 *   Q4_K 256: d, dmin, scales[12], qs[128]           x = (d sc[s]) q - (dmin mn[s])
 *             8 sub-blocks s of 32; sc, mn 6 bits, packed as below; chunk c
 *             (64 weights) takes qs[32c .. 32c+31]: sub-block 2c the low
 *             nibbles, 2c+1 the high ones
 *   Q5_K 256: d, dmin, scales[12], qh[32], qs[128]   as Q4_K, q |= (bit s of qh[l]) << 4
 *   Q6_K 256: ql[128], qh[64], int8 sc[16], d        x = (d sc[i / 16]) (q - 32)
 *             for half h (128 weights) and l < 32, with L = ql + 64h, H = qh + 32h:
 *             q[h128 + l]      = (L[l] & 15)      | (H[l] & 3) << 4
 *             q[h128 + l + 32] = (L[l + 32] & 15) | (H[l] >> 2 & 3) << 4
 *             q[h128 + l + 64] = (L[l] >> 4)      | (H[l] >> 4 & 3) << 4
 *             q[h128 + l + 96] = (L[l + 32] >> 4) | (H[l] >> 6) << 4
 *
 * K-quant scales (12 bytes S, sub-block s < 8): for s < 4, sc = S[s] & 63 and
 * mn = S[s + 4] & 63; for s >= 4, sc = (S[s + 4] & 15) | (S[s - 4] >> 6) << 4
 * and mn = (S[s + 4] >> 4) | (S[s] >> 6) << 4.
 *
 * Dequantizing computes exactly the float32 expression on the right above, in
 * that order (no fused multiply-add), so it agrees bit for bit with any correct
 * float32 implementation of the same formulas (tests/ref/gguf_write.py).
 *
 * Matrix-vector products (decode) do not widen weights to float: the input
 * vector is quantized once per product to 16 bits in blocks of 32 (quant_x:
 * scale d = max|x| / 32767, q = rint(x / d)), and each block's products are
 * summed in integers (exactly), then scaled. The added error is that of the
 * input's rounding, at most d / 2 = max|x| / 65534 per element: far below the
 * weights' own rounding even in F16 (README, *Performance*). 16 rather than 8
 * bits (llama.cpp's choice) costs about nothing here: a block's float scaling
 * is most of the work either way, and 8 bits moved the test models' decode
 * logits by up to 0.5 where 16 bits move them by 1e-3.
 */
#ifndef GPT2_CORE_QUANT_H
#define GPT2_CORE_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_model.h"

/* A weight format: block elements and bytes (float formats: 1 and the
 * element size), GGUF's type id, its name as GGUF tools print it. */
typedef struct {
    gpt2_dtype dtype;
    int ggml_type;
    int block, block_bytes;
    const char *name; /* "Q4_K", "F16" */
} quant_format;

/* The format of a dtype (Q8, the row-scaled 8 bits of gpt2_model_quantize, has
 * none: NULL), or of a GGUF type id (NULL: not one this engine runs). */
const quant_format *quant_format_of(gpt2_dtype dt);
const quant_format *quant_format_ggml(uint32_t ggml_type);

/* GGUF's name of a type id this engine does not run ("Q2_K", "IQ4_XS"...),
 * or NULL for an id GGUF does not define. */
const char *quant_ggml_unsupported_name(uint32_t ggml_type);

/* Whether dt is one of GGUF's block formats (Q8_0 ... Q6_K). */
int quant_is_block(gpt2_dtype dt);

/* Bytes of a row of n weights (n a multiple of the block) in a block format. */
size_t quant_row_bytes(gpt2_dtype dt, size_t n);

/* dst (n) = the n weights of one row, n a multiple of the block. */
void quant_dequantize_row(gpt2_dtype dt, const void *src, float *dst, int n);

/* dst = src (n floats) in format dt, n a multiple of the block: Q8_0 and
 * Q4_0 as ggml's reference quantizers do (absmax; Q4_0's scale is the
 * signed extreme over -8), Q4_K with each sub-block's scale and minimum from
 * its range and the 6-bit codes rounded against the block's largest; the
 * others are made only by the test writer (tests/ref/gguf_write.py). */
void quant_quantize_row(gpt2_dtype dt, const float *src, void *dst, int n);
int quant_can_quantize(gpt2_dtype dt);

/* An input vector of n floats quantized to 16 bits, n a multiple of 32:
 * block b's scale d[b], ds[b] = d[b] * (the sum of its 32 q), and q (n). */
typedef struct {
    float *d, *ds;  /* (n / 32) */
    int16_t *q;     /* (n) */
    int n;
} quant_x;

/* Bytes quant_x_init needs for n inputs (64-byte aligned pieces). */
size_t quant_x_bytes(int n);
/* Lays x out in buf (quant_x_bytes(n), 64-byte aligned) and quantizes src. */
void quant_x_set(quant_x *x, void *buf, const float *src, int n);

/* dot(row of n weights in format dt, the quantized vector x): AVX2 kernels
 * where the machine has them, else quant_dot_ref. Both sum each block's
 * products exactly in integers; they differ only in the order of the float
 * sums of the scaled blocks. */
float quant_dot(gpt2_dtype dt, const void *row, const quant_x *x);
float quant_dot_ref(gpt2_dtype dt, const void *row, const quant_x *x);

#endif
