/* kernels.h — the numeric building blocks of the forward pass (library-private).
 *
 * Weight matrices are passed as a gpt2_matrix: a pointer into the mapped file
 * plus its dtype. F32 goes straight to OpenBLAS; F16/BF16 are widened to float
 * on the fly (per row for one position, per block of rows into a scratch
 * buffer followed by sgemm for many positions), so 16-bit weights stay 16-bit
 * in memory.
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
    int packed;         /* 1: tiled (kernel_pack), not row-major */
} gpt2_matrix;

/* The packed layout of a (K, N) matrix: tiles of 8 rows x 16 columns, each
 * tile's rows one after another, tiles in row-major order of (k / 8, n / 16).
 * Decode reads a block of 8 rows 16 columns at a time; packed, that is one
 * sequential stream instead of eight strided ones, which the hardware
 * prefetcher follows better. Measured here, 16-bit weights of a 124M model's
 * layers streamed with 2 threads at 97% of the machine's read bandwidth
 * packed, 88% row-major (one thread: 90% against 70%). F32 stays row-major,
 * as OpenBLAS reads it in place for prefill; Q8 gained nothing measurable. */
enum { KERNEL_TILE_ROWS = 8, KERNEL_TILE_COLS = 16 };

/* Whether kernel_pack can pack m: F16 or BF16, rows and cols multiples of the
 * tile. */
int kernel_packable(const gpt2_matrix *m);

/* Element (k, n) of a packed (K, N) matrix. */
static inline size_t kernel_packed_index(int N, int k, int n) {
    return ((size_t)(k / KERNEL_TILE_ROWS) * (size_t)(N / KERNEL_TILE_COLS) + (size_t)(n / KERNEL_TILE_COLS)) *
               (KERNEL_TILE_ROWS * KERNEL_TILE_COLS) +
           (size_t)(k % KERNEL_TILE_ROWS) * KERNEL_TILE_COLS + (size_t)(n % KERNEL_TILE_COLS);
}

/* dst (rows x cols elements of src's dtype) = src, row-major, in the packed
 * layout; src must be kernel_packable. */
void kernel_pack(void *dst, const gpt2_matrix *src);

/* Scratch the 16-bit prefill path needs, in floats: KERNEL_SCRATCH_FLOATS.
 * Up to KERNEL_SMALL_T positions, matmuls stream W once for all positions
 * (decode, speculative verification): they split W into KERNEL_DECODE_CHUNKS
 * row blocks and need KERNEL_DECODE_CHUNKS x T x N floats of partial sums;
 * past it they widen blocks of W and call sgemm (prefill). */
enum { KERNEL_SCRATCH_FLOATS = 1 << 20, KERNEL_DECODE_CHUNKS = 8, KERNEL_SMALL_T = 16 };

/* Bytes per element of a weight dtype. */
static inline size_t gpt2_dtype_size(gpt2_dtype dt) { return dt == GPT2_DTYPE_F32 ? 4 : dt == GPT2_DTYPE_Q8 ? 1 : 2; }

float gpt2_f16_to_f32(uint16_t h);
float gpt2_bf16_to_f32(uint16_t h);
uint16_t gpt2_f32_to_f16(float f);  /* round to nearest even */
uint16_t gpt2_f32_to_bf16(float f); /* round to nearest even */

/* dst (n) = row r of m, widened to float (Q8: times the row's scale). */
void kernel_row(float *dst, const gpt2_matrix *m, int r);

/* out (T, N) (+)= in (T, K) @ W (K, N) [+ bias (N)]: Conv1D weights, HF layout.
 * accumulate: add to out instead of overwriting. For T <= KERNEL_SMALL_T the
 * pool's threads take blocks of rows of W, read in memory order, into
 * `partials`, summed in a fixed order afterwards: each position's result is
 * bit-identical to a T = 1 call. Past that they split the N columns
 * (single-threaded sgemm per column block; scratch[ith], KERNEL_SCRATCH_FLOATS
 * each, widens 16-bit W). */
void kernel_matmul(gpt2_pool *pool, float *out, const float *in, int T, const gpt2_matrix *W, const float *bias,
                   int accumulate, float **scratch, float *partials);

/* out (T, N) = in (T, K) @ W^T for W (N, K): the LM head over wte. ldo is
 * out's row stride. Threads split the N rows of W; for T <= KERNEL_SMALL_T
 * each row is read once for all positions, bit-identical to T = 1 calls. */
void kernel_matmul_t(gpt2_pool *pool, float *out, int ldo, const float *in, int T, const gpt2_matrix *W,
                     float **scratch);

/* One query's causal attention in one head: att (P) = softmax(q . k_t * scale)
 * over keys t = 0..P-1, y (hs) = sum_t att[t] v_t. q, y: (hs); k, v: P rows
 * of hs floats, ld floats apart (the KV cache). */
void kernel_attention_row(float *y, float *att, const float *q, const float *k, const float *v, int P, int hs,
                          int ld, float scale);

/* out (T, C) = layernorm(in (T, C)) * g + b */
void kernel_layernorm(float *out, const float *in, const float *g, const float *b, int T, int C, float eps);

/* x (n) = gelu(x): tanh approximation (GPT-2's gelu_new) or exact erf. */
void kernel_gelu_tanh(float *x, size_t n);
void kernel_gelu_erf(float *x, size_t n);

/* x (n) = softmax(x) in place; returns nothing, the row sums to 1. */
void kernel_softmax(float *x, int n);

#endif
