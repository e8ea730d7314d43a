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
 * scale d = max|x| / 32639, q = rint(x / d)), and each block's products are
 * summed in integers (exactly), then scaled. The added error is that of the
 * input's rounding, at most d / 2 = max|x| / 65278 per element: far below the
 * weights' own rounding even in F16 (docs/performance.md). 16 rather than 8
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
 * its range, their 6-bit codes rounded against the block's largest and then
 * moved a step either way where that lowers the squared error; the others
 * are made only by the test writer (tests/ref/gguf_write.py, which makes
 * these three byte for byte alike). */
void quant_quantize_row(gpt2_dtype dt, const float *src, void *dst, int n);
int quant_can_quantize(gpt2_dtype dt);

/* An input vector of n floats quantized to 16 bits, n a multiple of 32:
 * block b's scale d[b] = max|x| / 32639, ds[b] = d[b] * (the sum of its 32
 * q), sum[b] that sum; q (n) in [-32639, 32639], and q split into two bytes,
 * q = 256 hi + lo with hi, lo in [-128, 127] (for the 8-bit products of the
 * interleaved kernels; 32639 = 127 * 256 + 127 keeps hi in range). A block
 * whose max|x| is below 1e-30 (or not finite) gets q = 0 (and a NaN or Inf
 * scale where max|x| is one, so that its products are too). */
typedef struct {
    float *d, *ds;  /* (n / 32) */
    int32_t *sum;   /* (n / 32) */
    int32_t *sum16; /* (n / 16): each half's sum */
    int16_t *q;     /* (n) */
    int8_t *hi, *lo; /* (n) */
    int n;
} quant_x;

/* Bytes quant_x_init needs for n inputs (64-byte aligned pieces). */
size_t quant_x_bytes(int n);
/* Lays x out in buf (quant_x_bytes(n), 64-byte aligned) and quantizes src
 * (AVX2 where the machine has it; _ref: the portable loop, the same bytes). */
void quant_x_set(quant_x *x, void *buf, const float *src, int n);
void quant_x_set_ref(quant_x *x, void *buf, const float *src, int n);
/* The same d and q only (the rest left unset): all the row-pair panels of
 * kernel_q8_packed_index read, at a third of the stores. */
void quant_x_set_q16(quant_x *x, void *buf, const float *src, int n);

/* dot(row of n weights in format dt, the quantized vector x): AVX2 kernels
 * where the machine has them, else quant_dot_ref. Both sum each block's
 * products exactly in integers; they differ only in the order of the float
 * sums of the scaled blocks. */
float quant_dot(gpt2_dtype dt, const void *row, const quant_x *x);
float quant_dot_ref(gpt2_dtype dt, const void *row, const quant_x *x);

/* --- the interleaved layout ("x8") ---------------------------------------------------
 *
 * Decode reads each weight once per token, and a block's float scaling costs
 * more than its integer products; so at load, formats with an x8 layout are
 * rearranged (losslessly: the same bits, the same bytes per weight) into
 * groups of 8 output rows, the last group padded with zero rows. In a group,
 * block b of the 8 rows lies together: their 8 fp16 scales, then their codes
 * in chunks of 32 bytes. Byte 4r + j of chunk c holds row r's codes for
 * inputs 8c + j (low nibble) and 8c + 4 + j (high nibble) of the block, so a
 * 32-byte chunk gives, with one 8-bit multiply-add instruction per half, 4
 * inputs of all 8 rows, each row in its own 32-bit lane; the block's scaling
 * is then one vector operation for the 8 rows.
 *   Q4_0: per block 16 bytes of scales + 4 chunks = 144 bytes (8 x 18).
 *   Q8_0 (where the machine has VNNI: its 8-bit products of codes up to 255
 *     would saturate the 16-bit sums of plain AVX2): per block the scales +
 *     8 chunks, byte 4r + j of chunk c = row r's code for input 4c + j plus
 *     128 (as an unsigned byte) = 272 bytes (8 x 34).
 *   Q4_K: per 256 inputs the 8 d, the 8 dmin (32 bytes), the 12 scale bytes
 *     of each row transposed (byte 8j + r = row r's byte j: 96), then per
 *     sub-block of 32 Q4_0's 4 chunks = 1152 bytes (8 x 144).
 *   Q5_K: as Q4_K, each sub-block's 4 chunks followed by 32 bytes of 5th
 *     bits: bit 2c + h of byte 4r + j = that of row r's input 8c + 4h + j
 *     = 1408 bytes (8 x 176).
 *   Q6_K: per 256 inputs the 8 d (16 bytes), the 16 scales of each row
 *     transposed (byte 8i + r: 128), then per 32 inputs the low 4 bits in
 *     Q4_0's 4 chunks and the high 2 bits in two 32-byte runs: byte 4r + j of
 *     run p holds those of chunk 2p's low and high nibble's code in bits 0-1
 *     and 2-3, chunk 2p + 1's in bits 4-5 and 6-7 = 1680 bytes (8 x 210).
 */

/* Whether dt has the x8 layout, and the bytes of an N x K matrix in it. */
int quant_x8(gpt2_dtype dt);
size_t quant_x8_bytes(gpt2_dtype dt, int N, int K);
/* Bytes of one group of 8 rows of K. */
size_t quant_x8_group_bytes(gpt2_dtype dt, int K);

/* dst (quant_x8_bytes) = src (N rows of K in the plain format), interleaved. */
void quant_x8_pack(gpt2_dtype dt, const void *src, int N, int K, void *dst);

/* Row r (0..7) of a group of 8 rows of K, dequantized into dst (K); r = -1:
 * all 8 rows, dst (8, K). The same floats as quant_dequantize_row. */
void quant_x8_dequantize(gpt2_dtype dt, const void *group, int K, int r, float *dst);

/* out[r] = dot(row r of the group, x) for its 8 rows: AVX2 (+VNNI) kernels,
 * else quant_x8_dot_ref. Integer sums as exact as quant_dot's. */
void quant_x8_dot(gpt2_dtype dt, const void *group, const quant_x *x, float *out);
void quant_x8_dot_ref(gpt2_dtype dt, const void *group, const quant_x *x, float *out);

#endif
