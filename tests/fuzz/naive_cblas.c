/* naive_cblas.c — plain C cblas_sgemm / cblas_sgemv for the fuzz builds.
 *
 * OpenBLAS is not built with AddressSanitizer, so an out-of-bounds read of a
 * weight matrix inside it would go unnoticed. The harnesses link these instead
 * (the executable's definitions win over libopenblas.so), compiled with the same
 * sanitizers as the library, so every element the forward pass reads is checked.
 * Only what src/core uses: row-major, unit increments. Slow, and that is fine
 * for the tiny fuzz models.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

static void need(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "naive_cblas: unsupported call: %s\n", what);
        abort();
    }
}

void cblas_sgemm(OPENBLAS_CONST enum CBLAS_ORDER Order, OPENBLAS_CONST enum CBLAS_TRANSPOSE TransA,
                 OPENBLAS_CONST enum CBLAS_TRANSPOSE TransB, OPENBLAS_CONST blasint M,
                 OPENBLAS_CONST blasint N, OPENBLAS_CONST blasint K, OPENBLAS_CONST float alpha,
                 OPENBLAS_CONST float *A, OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *B,
                 OPENBLAS_CONST blasint ldb, OPENBLAS_CONST float beta, float *C,
                 OPENBLAS_CONST blasint ldc) {
    need(Order == CblasRowMajor, "sgemm: column-major");
    need(M >= 0 && N >= 0 && K >= 0, "sgemm: negative dimension");
    const int ta = TransA != CblasNoTrans, tb = TransB != CblasNoTrans;
    need(lda >= (ta ? M : K) && ldb >= (tb ? K : N) && ldc >= N, "sgemm: leading dimension too small");
    for (blasint i = 0; i < M; i++)
        for (blasint j = 0; j < N; j++) {
            float s = 0.0f;
            for (blasint k = 0; k < K; k++) {
                float a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                float b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b;
            }
            float *c = &C[(size_t)i * ldc + j];
            *c = beta == 0.0f ? alpha * s : alpha * s + beta * *c;
        }
}

void cblas_sgemv(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE trans,
                 OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n, OPENBLAS_CONST float alpha,
                 OPENBLAS_CONST float *a, OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *x,
                 OPENBLAS_CONST blasint incx, OPENBLAS_CONST float beta, float *y,
                 OPENBLAS_CONST blasint incy) {
    need(order == CblasRowMajor, "sgemv: column-major");
    need(incx == 1 && incy == 1, "sgemv: non-unit increment");
    need(m >= 0 && n >= 0 && lda >= n, "sgemv: bad dimensions");
    if (trans == CblasNoTrans) {
        for (blasint i = 0; i < m; i++) {
            float s = 0.0f;
            for (blasint j = 0; j < n; j++) s += a[(size_t)i * lda + j] * x[j];
            y[i] = beta == 0.0f ? alpha * s : alpha * s + beta * y[i];
        }
    } else {
        for (blasint j = 0; j < n; j++) {
            float s = 0.0f;
            for (blasint i = 0; i < m; i++) s += a[(size_t)i * lda + j] * x[i];
            y[j] = beta == 0.0f ? alpha * s : alpha * s + beta * y[j];
        }
    }
}
