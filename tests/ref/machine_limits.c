/* machine_limits.c — an independent measurement of the two limits `gptscope
 * bench` judges its figures against, to check its probes: the read bandwidth
 * and the single-precision FMA peak. Written apart from src/cli/cmd_bench.c on
 * purpose: OpenMP threads instead of pthreads, 32-bit integer sums instead of
 * float vectors, GCC's vector extensions (a * b + c contracted into FMAs by
 * -ffp-contract=fast) instead of intrinsics.
 *
 *     cc -O3 -march=native -fopenmp -ffp-contract=fast tests/ref/machine_limits.c -o machine_limits
 *     OMP_NUM_THREADS=2 ./machine_limits [PASSES]
 *
 * Prints {"read_gb_s": R, "peak_gflops": P}: the best of PASSES (default 8)
 * passes each, since interference only ever slows a pass. Read: 1 GiB on huge
 * pages, each thread summing its slice as four sequential streams (one
 * stream a thread leaves bandwidth unused on some machines). Peak: ten
 * independent chains of fused multiply-adds on the widest vectors the build
 * targets. scripts/check-bench-probe.sh runs it in turns with bench --machine. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#if defined(__AVX512F__)
#define VBYTES 64
#elif defined(__AVX__)
#define VBYTES 32
#else
#define VBYTES 16
#endif
typedef float vf __attribute__((vector_size(VBYTES)));
enum { LANES = VBYTES / 4, STREAMS = 4, CHAINS = 10 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* GB/s of one pass over buf (n words). */
static double read_pass(const uint32_t *buf, size_t n, uint64_t *sink) {
    double t0 = now();
    uint64_t total = 0;
#pragma omp parallel reduction(+ : total)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        const size_t part = n / T / STREAMS / 16 * 16;
        const uint32_t *base = buf + n / T * t;
        uint32_t s = 0;
        for (size_t i = 0; i < part; i += 16)
            for (int j = 0; j < STREAMS; j++) {
#pragma omp simd reduction(+ : s)
                for (int k = 0; k < 16; k++) s += base[j * part + i + k];
            }
        total += s;
    }
    *sink += total;
    return (double)(n / omp_get_max_threads() / STREAMS / 16 * 16) * STREAMS * omp_get_max_threads() * 4 /
           (now() - t0) / 1e9;
}

/* GFLOP/s of one pass of CHAINS FMA chains on every thread. */
static double fma_pass(float *sink) {
    const long iters = 1L << 24;
    double t0 = now();
    float total = 0;
#pragma omp parallel reduction(+ : total)
    {
        vf c[CHAINS], m, b;
        for (int k = 0; k < LANES; k++) m[k] = 0.999999f, b[k] = 1e-7f;
        for (int j = 0; j < CHAINS; j++)
            for (int k = 0; k < LANES; k++) c[j][k] = (float)(j + 1);
        for (long i = 0; i < iters; i++)
            for (int j = 0; j < CHAINS; j++) c[j] = c[j] * m + b;
        for (int j = 0; j < CHAINS; j++) total += c[j][0];
    }
    *sink += total;
    return 2.0 * CHAINS * LANES * (double)iters * omp_get_max_threads() / (now() - t0) / 1e9;
}

int main(int argc, char **argv) {
    const int passes = argc > 1 ? atoi(argv[1]) : 8;
    const size_t bytes = (size_t)1 << 30, n = bytes / 4;
    uint32_t *buf = aligned_alloc((size_t)2 << 20, bytes);
    if (!buf || passes < 1) return 1;
    madvise(buf, bytes, MADV_HUGEPAGE);
    memset(buf, 1, bytes);
    uint64_t isink = 0;
    float fsink = 0;
    double read = 0, peak = 0;
    for (int p = 0; p < passes; p++) {
        double r = read_pass(buf, n, &isink);
        read = r > read ? r : read;
    }
    for (int p = 0; p < passes; p++) {
        double f = fma_pass(&fsink);
        peak = f > peak ? f : peak;
    }
    printf("{\"read_gb_s\": %.2f, \"peak_gflops\": %.1f, \"threads\": %d, \"sink\": %g}\n", read, peak,
           omp_get_max_threads(), (double)isink + fsink);
    free(buf);
    return 0;
}
