/* gemm.h — the project's own register-tiled matrix products over the weights
 * as stored: prefill's, the trainer's forward and input gradients, and q8's
 * at any number of positions (library-private).
 *
 * gemm_cols computes a block of 64-column panels of C (T, N) += A (T, K) @ W,
 * reading W in its own layout and dtype: packed panels (kernels.h) or
 * row-major, F32, F16 and BF16 widened in registers as they are loaded, Q8
 * widened likewise and scaled per column. Each element of C is one chain of
 * fused multiply-adds over k = 0 .. K-1 in order, starting from C0 (gemm_cols)
 * (Q8: a chain from zero, then C + scale * sum), whatever the tile, the K
 * block or the columns a thread takes: the result does not depend on the
 * thread count.
 *
 * The kernel is picked once, at run time: AVX-512 (6 x 64 tiles; q8's integer
 * products from VNNI, or AVX2's where the CPU lacks it), AVX2 (6 x 16) or
 * portable C. GPTSCOPE_GEMM=blas in the environment makes prefill use
 * OpenBLAS (widening 16-bit and Q8 weights into a scratch buffer first)
 * instead, for comparison; `gptscope bench --gemm blas|own` sets it.
 *
 *     if (gemm_fits(W) && gemm_own())
 *         gemm_cols(out + n0, N, in, T, W, n0, n1 - n0, bias, accumulate);
 */
#ifndef GPT2_CORE_GEMM_H
#define GPT2_CORE_GEMM_H

#include "kernels.h"
#include "quant.h"

/* Whether gemm_cols can take W: F32, F16, BF16 (packed or row-major) or Q8
 * row-major (packed Q8 is gemm_q8_cols'), not stored transposed, with cols
 * a multiple of 64. */
int gemm_fits(const gpt2_matrix *W);

/* 1 unless GPTSCOPE_GEMM=blas is set. */
int gemm_own(void);

/* "avx512", "avx2" or "c": the kernel gemm_cols runs on this CPU. */
const char *gemm_kernel_name(void);

/* Tests: run `name`'s kernel ("avx512", "avx2", "c") from now on, or the
 * CPU's own again for NULL; 0 (nothing changed) if this CPU lacks it. */
int gemm_force_kernel(const char *name);

/* C[:, 0:nn] (T rows, ldc apart) = (accumulate ? C : 0) + bias[n0:n0 + nn]
 * + A (T, K) @ W[:, n0:n0 + nn], K = W->rows; bias may be NULL; n0 and nn
 * multiples of 64. C0 is added first, then the products in order, as if C
 * had been set to C0 in a pass of its own (which it saves). */
void gemm_cols(float *C, int ldc, const float *A, int T, const gpt2_matrix *W, int n0, int nn, const float *bias,
               int accumulate);

/* C (T, 64) += A (T, kk; rows lda apart) @ B (kk, 64), B an F32 panel: the
 * float tiles of gemm_cols, each element of C one chain of fused
 * multiply-adds in k's order. For weights gemm_cols cannot read in place
 * (block formats), widened a block of K at a time by the caller. */
void gemm_panel(float *C, int ldc, const float *A, int lda, int T, const float *B, int kk);

/* Q8 packed in row pairs (kernels.h) is multiplied in integers, decode and
 * prefill alike: the inputs come quantized to 16 bits in blocks of 32
 * (quant_x), and for each output
 *     f = 0;  f = fma((float)I_b, d_b, f) for each block b in order;  C = fma(f, scale, C)
 * where I_b, the block's 32 products of 16-bit inputs and 8-bit codes, is
 * summed exactly in 32-bit integers (vpdpwssd where the CPU has AVX-512 VNNI,
 * vpmaddwd on AVX2, plain C elsewhere). Every kernel makes those same float
 * operations, so the result does not depend on the kernel, the tile, the
 * positions computed together or the thread count.
 *
 * C[:, 0:nn] (T rows, ldc apart) += X (T quantized rows of K) @ W[:, n0:n0 + nn],
 * W Q8 and packed, K = W->rows; n0 and nn multiples of 64. */
void gemm_q8_cols(float *C, int ldc, const quant_x *X, int T, const gpt2_matrix *W, int n0, int nn);

#endif
