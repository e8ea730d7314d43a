/* kernels.h — the numeric building blocks of the forward pass (library-private).
 *
 * Weight matrices are passed as a gpt2_matrix: a pointer to the weights
 * (in the mapped file, or packed at load, see below) plus their dtype. F16/BF16
 * are widened to float on the fly (per row for a few positions, per block of
 * rows into a scratch buffer followed by sgemm for many), so 16-bit weights
 * stay 16-bit in memory. GGUF's block formats (quant.h) stay in their blocks:
 * integer dot products for a few positions, dequantized tiles and sgemm for
 * many.
 */
#ifndef GPT2_CORE_KERNELS_H
#define GPT2_CORE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_model.h"
#include "pool.h"

typedef struct {
    const void *data;   /* row-major, rows x cols elements of dtype */
    gpt2_dtype dtype;
    int rows, cols;
    const float *scale; /* Q8 only: weight = data * scale, one scale per column
                           for kernel_matmul's (K, N) weights, per row for
                           kernel_row's and kernel_matmul_t's (wte) */
    int packed;         /* 1: tiled (kernel_pack), not row-major; for a block format:
                           its 8-row interleaved layout (quant.h, quant_x8) */
    int trans;          /* 1: data holds the transpose, cols rows of rows elements (by
                           output, as nn.Linear's (out, in)). GGUF's block formats
                           (quant.h), whose blocks run along a row, are always so in
                           kernel_matmul, never in kernel_row / kernel_matmul_t; a float
                           matrix only during a load: kernel_pack and
                           kernel_copy_transposed read it so, their copy is not; and a
                           Q8 embedding in panels (kernel_q8_head_packable) */
    int rows_order, rows_heads; /* load only: the outputs' order as stored (st_tensor.rows_order);
                                   ST_ROWS_AS_IS (0) once loaded */
} gpt2_matrix;

/* The packed layout of a (K, N) matrix: panels of 64 columns, one after
 * another, each panel (K, 64) row-major. A panel is one contiguous run, so a
 * thread computing a panel's 64 outputs over all K rows reads one sequential
 * stream and needs no partial sums from other threads. Measured here in
 * paired runs against row-major weights split over rows (eight strided
 * streams and a serial sum of partials): decode +10-16% for 16-bit weights,
 * +3-4% for F32; F32 prefill -2.6% (it gathers panels for sgemm).
 *
 * Q8 packs in pairs of rows, for integer products (gemm.h): in a panel,
 * row pair p (rows 2p and 2p + 1) is 128 bytes, byte 2c + j holding row
 * 2p + j of the panel's column c, so that 32 bytes widened to 16 bits give
 * 16 columns' (w[2p], w[2p + 1]) pairs, one pair per 32-bit lane. */
enum { KERNEL_TILE_COLS = 16, KERNEL_PANEL_COLS = 64 };

/* Whether kernel_pack can pack m: F32, F16 or BF16 with cols a multiple of 64
 * (every GPT-2 size); Q8 also needs rows a multiple of 32 (the blocks its
 * inputs are quantized in). */
int kernel_packable(const gpt2_matrix *m);

/* Element (k, n) of a packed matrix of K rows: float formats, and Q8's pairs. */
static inline size_t kernel_packed_index(int K, int k, int n) {
    return (size_t)(n / KERNEL_PANEL_COLS) * (size_t)K * KERNEL_PANEL_COLS + (size_t)k * KERNEL_PANEL_COLS +
           (size_t)(n % KERNEL_PANEL_COLS);
}
static inline size_t kernel_q8_packed_index(int K, int k, int n) {
    return (size_t)(n / KERNEL_PANEL_COLS) * (size_t)K * KERNEL_PANEL_COLS + (size_t)(k / 2) * 2 * KERNEL_PANEL_COLS +
           (size_t)(n % KERNEL_PANEL_COLS) * 2 + (size_t)(k % 2);
}

/* A Q8 embedding (V, C), scaled per row, is stored as its transpose (C, Vp)
 * in those same panels (packed and trans set), Vp = V rounded up to whole
 * panels, the padding columns zero with scale 0: the LM head then runs on
 * gemm_q8_cols like a block's matrices. Needs C a multiple of 32. */
static inline int kernel_q8_head_packable(const gpt2_matrix *m) { return m->cols % 32 == 0; }
static inline int kernel_q8_head_cols(int V) { return (V + KERNEL_PANEL_COLS - 1) / KERNEL_PANEL_COLS * KERNEL_PANEL_COLS; }

/* dst (rows x cols elements of src's dtype) = src, row-major (or stored
 * transposed, not Q8), in the packed layout; src must be kernel_packable. */
void kernel_pack(void *dst, const gpt2_matrix *src);

/* dst (rows x cols, row-major) = src stored transposed ((cols, rows) row-major),
 * through 64 x 64 tiles so that reads and writes both stream. */
void kernel_copy_transposed(void *dst, const gpt2_matrix *src);

/* Bytes of m's data: rows x cols elements, or its rows of blocks. */
size_t kernel_matrix_bytes(const gpt2_matrix *m);

/* Scratch the 16-bit prefill path needs, in floats: KERNEL_SCRATCH_FLOATS.
 * Up to KERNEL_SMALL_T positions, matmuls stream W once for all positions
 * (decode, speculative verification): they split W into KERNEL_DECODE_CHUNKS
 * row blocks and need KERNEL_DECODE_CHUNKS x T x N floats of partial sums;
 * past it they widen blocks of W and call sgemm (prefill). */
enum { KERNEL_SCRATCH_FLOATS = 1 << 20, KERNEL_DECODE_CHUNKS = 8, KERNEL_SMALL_T = 16 };

/* Prefill splits a matmul's N outputs into at most KERNEL_PREFILL_BLOCKS
 * blocks of at least KERNEL_PREFILL_COLS columns (multiples of 64), fixed by
 * N: enough to keep a few threads busy, few enough that repacking the
 * activations for each sgemm call stays cheap. */
enum { KERNEL_PREFILL_BLOCKS = 12, KERNEL_PREFILL_COLS = 128 };

/* Bytes per element of a weight dtype (0 for a block format: see kernel_matrix_bytes). */
static inline size_t gpt2_dtype_size(gpt2_dtype dt) {
    return dt == GPT2_DTYPE_F32 ? 4 : dt == GPT2_DTYPE_Q8 ? 1 : dt <= GPT2_DTYPE_BF16 ? 2 : 0;
}

float gpt2_f16_to_f32(uint16_t h);
float gpt2_bf16_to_f32(uint16_t h);
uint16_t gpt2_f32_to_f16(float f);  /* round to nearest even */
uint16_t gpt2_f32_to_bf16(float f); /* round to nearest even */

/* dst (n) = row r of m, widened to float (Q8: times the row's scale). */
void kernel_row(float *dst, const gpt2_matrix *m, int r);

/* dst (K x N floats, row-major) = kernel_matmul's weights W (K, N) as it
 * reads them, in any layout and dtype (packed, Q8 scaled per column, a
 * block format stored by output); tmp: room for K floats (used for a matrix
 * stored by output). */
void kernel_widen(float *dst, float *tmp, const gpt2_matrix *W);

/* The floats of kernel_matmul's `partials` for T positions, K inputs and N
 * outputs: partial sums, or Q8's quantized inputs. */
size_t kernel_work_floats(int T, int K, int N);

/* out (T, N) (+)= in (T, K) @ W (K, N) [+ bias (N)]: Conv1D weights, HF layout.
 * accumulate: add to out instead of overwriting. For T <= KERNEL_SMALL_T the
 * pool's threads take blocks of rows of W, read in memory order, into
 * `partials`, summed in a fixed order afterwards: each position's result is
 * bit-identical to a T = 1 call. Past that they split the N columns into
 * blocks fixed by N (single-threaded sgemm per column block; scratch[ith],
 * KERNEL_SCRATCH_FLOATS each, widens 16-bit W). Q8 packed W: `partials`
 * (never NULL then) holds the inputs quantized (kernel_work_floats), and the integer products
 * of gemm.h give the same bits for any T, split or thread count. */
void kernel_matmul(gpt2_pool *pool, float *out, const float *in, int T, const gpt2_matrix *W, const float *bias,
                   int accumulate, float **scratch, float *partials);

/* out = gelu(in @ W + bias) (erf: the exact GELU, else the tanh one), no
 * accumulate: the chunk that computes a block of columns applies it while
 * they are in cache (a pass of its own after decode's split of W's rows);
 * the same bits as kernel_matmul then kernel_gelu_*. */
void kernel_matmul_gelu(gpt2_pool *pool, float *out, const float *in, int T, const gpt2_matrix *W, const float *bias,
                        int erf, float **scratch, float *partials);

/* out (T, N) = in (T, K) @ W^T for W (N, K): the LM head over wte. ldo is
 * out's row stride. Threads split the N rows of W; for T <= KERNEL_SMALL_T
 * each row is read once for all positions, bit-identical to T = 1 calls.
 *
 * Block formats (both kernels): for T <= KERNEL_SMALL_T each position's input
 * is quantized to 8 bits in blocks of 32 (quant.h) into `partials`, and each
 * output is one integer-summed dot product with a row of W as stored; past
 * that, 64 rows of W at a time are widened a K block (256) at a time into an
 * F32 panel in scratch[ith] for gemm.h's float tiles (gemm_panel; each output
 * one chain over k in order), or with GPTSCOPE_GEMM=blas dequantized rows go
 * to sgemm. Outputs are split over the threads by rows of W, in chunks fixed
 * by N: the same bits at any thread count.
 *
 * A Q8 embedding stored transposed in panels (kernel_q8_head_packable) runs
 * on gemm_q8_cols at any T, GPTSCOPE_GEMM=blas or not: its inputs quantized
 * into `partials` (kernel_work_floats), the last partial panel through
 * scratch[ith] (T x 64 floats). */
void kernel_matmul_t(gpt2_pool *pool, float *out, int ldo, const float *in, int T, const gpt2_matrix *W,
                     float **scratch, float *partials);

/* One query's causal attention in one head: att (P) = softmax(q . k_t * scale)
 * over keys t = 0..P-1, y (hs) = sum_t att[t] v_t. q, y: (hs); k, v: P rows
 * of hs floats, ld floats apart (the KV cache). softcap > 0: the scores are
 * soft-capped (kernel_softcap) before the softmax, so att holds the
 * probabilities the output used. */
void kernel_attention_row(float *y, float *att, const float *q, const float *k, const float *v, int P, int hs,
                          int ld, float scale, float softcap);

/* out (T, C) = layernorm(in (T, C)) * g + b */
void kernel_layernorm(float *out, const float *in, const float *g, const float *b, int T, int C, float eps);

/* out (T, C) = in / sqrt(mean(in^2) + eps) * g, per row (RMSNorm); out may be in. */
void kernel_rmsnorm(float *out, const float *in, const float *g, int T, int C, float eps);

/* Rotary positions on one head, rotate-half pairs (i, i + half) for i < half:
 * (a, b) -> (a cos - b sin, b cos + a sin); cs, sn: (half) for its position. */
void kernel_rope(float *x, const float *cs, const float *sn, int half);

/* out (n) = up * silu(gate), silu(g) = g * sigmoid(g): SwiGLU's product; out may be up. */
void kernel_swiglu(float *out, const float *gate, const float *up, size_t n);

/* out (n) = gelu(x): tanh approximation (GPT-2's gelu_new; the forward pass
 * and the trainer both use this one) or exact erf. out may be x. */
void kernel_gelu_tanh(float *out, const float *x, size_t n);
void kernel_gelu_erf(float *x, size_t n);

/* out (n) = up * gelu(gate), GELU's tanh form (kernel_gelu_tanh's): GeGLU's
 * product (Gemma); out may be up. */
void kernel_geglu(float *out, const float *gate, const float *up, size_t n);

/* x (n) = cap * tanh(x / cap) in place: Gemma 2's soft-capping of attention
 * scores and logits (tanhf, as PyTorch's float tanh). */
void kernel_softcap(float *x, size_t n, float cap);

/* x (n) = softmax(x) in place; returns nothing, the row sums to 1. */
void kernel_softmax(float *x, int n);

/* The largest of x[0..n), n >= 1 (finite or infinite values; not NaN). */
float kernel_max(const float *x, int n);

#endif
