/* cmd_bench.c — `gptscope bench`: prefill/decode speed, latency, memory, and the
 * machine's own read bandwidth measured in the same run, so that the ratio
 * decode bandwidth / machine bandwidth holds on a noisy machine. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include "cli/cli.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v (sorted in place), interpolating between neighbours. */
static double quantile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    const double at = q * (n - 1);
    const int i = (int)at;
    return i + 1 < n ? v[i] + (at - i) * (v[i + 1] - v[i]) : v[n - 1];
}

static double median(double *v, int n) { return quantile(v, n, 0.5); }

/* A figure's spread over its runs: the smallest and the largest. */
typedef struct {
    double lo, hi;
} spread;

static spread spread_of(const double *v, int n) {
    spread s = {n ? v[0] : 0, n ? v[0] : 0};
    for (int i = 1; i < n; i++) s.lo = v[i] < s.lo ? v[i] : s.lo, s.hi = v[i] > s.hi ? v[i] : s.hi;
    return s;
}

/* --- the widest vectors this build targets ------------------------------
 *
 * Intrinsics because C11 mode does not contract a * b + c into an FMA and
 * the compiler keeps an array of accumulators in memory: AVX-512, else
 * AVX2+FMA, else scalar. The probes below are written once over them. */
#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 fvec;
enum { FVEC_LANES = 16 };
#define FVEC_SET(x) _mm512_set1_ps(x)
#define FVEC_LOAD(p) _mm512_loadu_ps(p)
#define FVEC_ADD(a, b) _mm512_add_ps(a, b)
#define FVEC_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define FVEC_LANE0(v) _mm512_cvtss_f32(v)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 fvec;
enum { FVEC_LANES = 8 };
#define FVEC_SET(x) _mm256_set1_ps(x)
#define FVEC_LOAD(p) _mm256_loadu_ps(p)
#define FVEC_ADD(a, b) _mm256_add_ps(a, b)
#define FVEC_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define FVEC_LANE0(v) _mm256_cvtss_f32(v)
#else
typedef float fvec;
enum { FVEC_LANES = 1 };
#define FVEC_SET(x) (x)
#define FVEC_LOAD(p) (*(p))
#define FVEC_ADD(a, b) ((a) + (b))
#define FVEC_FMA(a, b, c) fmaf(a, b, c)
#define FVEC_LANE0(v) (v)
#endif

/* --- machine read bandwidth: threads summing disjoint slices of a buffer --- */

typedef struct {
    const float *p;
    size_t n, n_read; /* floats in the slice; floats read (the parts, whole vectors) */
    float sum;
} read_job;

/* Sums its slice as READ_STREAMS parts read side by side, one vector
 * accumulator each: several sequential streams keep more memory requests in
 * flight than one (the decode kernels read several rows at once too). On a
 * shared 2-core Zen 4 VM one stream per thread read 25 GB/s where four or
 * eight read 40; with one, decode read faster than "the machine". */
enum { READ_STREAMS = 8 };

static void *read_worker(void *arg) {
    read_job *j = arg;
    const size_t part = j->n / READ_STREAMS / FVEC_LANES * FVEC_LANES;
    fvec acc[READ_STREAMS];
    for (int s = 0; s < READ_STREAMS; s++) acc[s] = FVEC_SET(0);
    for (size_t i = 0; i < part; i += FVEC_LANES)
        for (int s = 0; s < READ_STREAMS; s++) acc[s] = FVEC_ADD(acc[s], FVEC_LOAD(j->p + s * part + i));
    for (int s = 0; s < READ_STREAMS; s++) j->sum += FVEC_LANE0(acc[s]); /* used: the loads stay */
    j->n_read = part * READ_STREAMS;
    return NULL;
}

/* One pass over n floats with n_threads readers (at most 16), GB/s. */
static double read_pass(const float *buf, size_t n, int n_threads) {
    pthread_t th[16];
    read_job jobs[16];
    if (n_threads > 16) n_threads = 16;
    double t0 = cli_now();
    for (int k = 0; k < n_threads; k++) {
        jobs[k] = (read_job){buf + n / n_threads * k, n / n_threads, 0, 0};
        pthread_create(&th[k], NULL, read_worker, &jobs[k]);
    }
    size_t n_read = 0;
    for (int k = 0; k < n_threads; k++) pthread_join(th[k], NULL), n_read += jobs[k].n_read;
    return (double)(n_read * sizeof(float)) / (cli_now() - t0) / 1e9;
}

/* --- machine peak FLOP/s: independent FMA chains on every thread ---
 *
 * Twelve vector accumulators, each a chain of fused multiply-adds, so that
 * both FMA pipes stay busy through their latency: the most single-precision
 * arithmetic this build can do. The prefill's GFLOP/s are judged against it. */
enum { FMA_CHAINS = 12, FMA_ITERS = 1 << 24 };

static void *fma_worker(void *arg) {
    float *out = arg;
    const fvec m = FVEC_SET(0.999999f), b = FVEC_SET(1e-7f);
    fvec c0 = FVEC_SET(1), c1 = FVEC_SET(2), c2 = FVEC_SET(3), c3 = FVEC_SET(4), c4 = FVEC_SET(5), c5 = FVEC_SET(6);
    fvec c6 = FVEC_SET(7), c7 = FVEC_SET(8), c8 = FVEC_SET(9), c9 = FVEC_SET(10), c10 = FVEC_SET(11), c11 = FVEC_SET(12);
    for (long i = 0; i < FMA_ITERS; i++) {
        c0 = FVEC_FMA(c0, m, b), c1 = FVEC_FMA(c1, m, b), c2 = FVEC_FMA(c2, m, b), c3 = FVEC_FMA(c3, m, b);
        c4 = FVEC_FMA(c4, m, b), c5 = FVEC_FMA(c5, m, b), c6 = FVEC_FMA(c6, m, b), c7 = FVEC_FMA(c7, m, b);
        c8 = FVEC_FMA(c8, m, b), c9 = FVEC_FMA(c9, m, b), c10 = FVEC_FMA(c10, m, b), c11 = FVEC_FMA(c11, m, b);
    }
    /* used, so that the chains are not optimised away */
    *out = FVEC_LANE0(c0) + FVEC_LANE0(c1) + FVEC_LANE0(c2) + FVEC_LANE0(c3) + FVEC_LANE0(c4) + FVEC_LANE0(c5) +
           FVEC_LANE0(c6) + FVEC_LANE0(c7) + FVEC_LANE0(c8) + FVEC_LANE0(c9) + FVEC_LANE0(c10) + FVEC_LANE0(c11);
    return NULL;
}

/* The FMA chains on n_threads threads (at most 16), GFLOP/s: the best of
 * three passes of 30-60 ms, since a pass on a shared virtual CPU reads low
 * as often as not (a lone 14 ms pass read 59-116 GFLOP/s where prefill
 * itself ran at 170-183; passes of 14 ms ranged 159-204 on an AVX2 host
 * where tests/ref/machine_limits.c read 199-200). */
static double fma_pass(int n_threads) {
    pthread_t th[16];
    float out[16];
    if (n_threads > 16) n_threads = 16;
    double best = 0;
    for (int pass = 0; pass < 3; pass++) {
        double t0 = cli_now();
        for (int k = 0; k < n_threads; k++) pthread_create(&th[k], NULL, fma_worker, &out[k]);
        for (int k = 0; k < n_threads; k++) pthread_join(th[k], NULL);
        double g = 2.0 * FMA_CHAINS * FVEC_LANES * (double)FMA_ITERS * n_threads / (cli_now() - t0) / 1e9;
        if (g > best) best = g;
    }
    return best;
}

/* Floating-point operations of a prefill of T tokens from position 0 (the
 * matrix products, the attention's two products over the causal half, the
 * last position's LM head; layer norms, softmax and GELU are left out). */
static double prefill_flops(const gpt2_model *m, int T) {
    const gpt2_config *c = gpt2_model_config(m);
    const double C = c->n_embd, L = c->n_layer, F = 4.0 * C, V = c->n_vocab;
    return 2.0 * T * L * (4 * C * C + 2 * C * F) + 4.0 * C * L * T * (T + 1) / 2 + 2.0 * V * C;
}

/* The probe: a child process holding the buffer (so its gigabyte never counts
 * toward this process's peak RSS) that reads it once per request. Passes can
 * then alternate with decode blocks a few hundred milliseconds long, and each
 * block is compared with the pass just before it: on this shared host the
 * bandwidth drifts by a third within seconds. */
typedef struct {
    pid_t pid;
    int fd; /* a socket: one byte asks for a reading, a probe_read comes back */
} probe;

/* One reading: PROBE_PASSES passes back to back, the best and the second
 * best (GB/s). Interference (another tenant of the host, the first pass
 * after an idle spell) only ever slows a pass, so the best is what the
 * machine can read at that moment, provided it is no fluke: a reading is
 * steady when its two best passes agree. On a shared 2-core VM single
 * passes ranged 40-71 GB/s within a second, while the best two of four
 * agreed within a few percent in most readings. */
enum { PROBE_PASSES = 4 };
typedef struct {
    double best, second;
} probe_read;

/* A reading whose second-best pass is this far under its best is unsteady. */
#define PROBE_AGREE 0.95

static void probe_stop(probe *pr) {
    if (pr->fd >= 0) close(pr->fd); /* the child reads end-of-file and exits */
    if (pr->pid > 0) waitpid(pr->pid, NULL, 0);
    pr->pid = -1;
    pr->fd = -1;
}

/* 0 if no child could be started (the figures then read 0). */
static int probe_start(probe *pr, size_t bytes, int n_threads, int huge) {
    int sv[2];
    pr->pid = -1;
    pr->fd = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
    pid_t pid = fork();
    if (pid == 0) {
        /* Ctrl-C reaches the whole process group: the parent alone says it stopped */
        signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL);
        close(sv[0]);
        size_t n = bytes / sizeof(float);
        float *buf = huge ? aligned_alloc((size_t)2 << 20, n * sizeof(float)) : malloc(n * sizeof(float));
        if (!buf) _exit(1);
#ifdef MADV_HUGEPAGE
        if (huge) madvise(buf, n * sizeof(float), MADV_HUGEPAGE);
#endif
        for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 7);
        char req = 'p'; /* the first reply says "ready": no decode runs beside the filling */
        do {
            probe_read got = {0, 0};
            for (int i = 0; i < PROBE_PASSES; i++) {
                const double gbs = read_pass(buf, n, n_threads);
                if (gbs > got.best) got.second = got.best, got.best = gbs;
                else if (gbs > got.second) got.second = gbs;
            }
            if (write(sv[1], &got, sizeof got) != (ssize_t)sizeof got) break;
        } while (read(sv[1], &req, 1) == 1);
        _exit(0);
    }
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return 0;
    }
    pr->pid = pid;
    pr->fd = sv[0];
    probe_read ready;
    if (recv(pr->fd, &ready, sizeof ready, MSG_WAITALL) != (ssize_t)sizeof ready) {
        probe_stop(pr);
        return 0;
    }
    return 1;
}

/* One reading; {0, 0} if the child is gone (then it is stopped for good,
 * so no later reply can answer an earlier request). */
static probe_read probe_pass(probe *pr) {
    probe_read got = {0, 0};
    if (pr->fd < 0) return got;
    if (send(pr->fd, "p", 1, MSG_NOSIGNAL) != 1 || recv(pr->fd, &got, sizeof got, MSG_WAITALL) != (ssize_t)sizeof got) {
        probe_stop(pr);
        return (probe_read){0, 0};
    }
    return got;
}

/* Whether a reading answered and its passes agreed. */
static int probe_steady(probe_read r) { return r.best > 0 && r.second >= PROBE_AGREE * r.best; }

/* The best GB/s of the steady readings into gbs[] (their ratio[] beside
 * them when ratio is given), in order; returns how many. */
static int keep_steady(const probe_read *rd, double *gbs, double *ratio, int n) {
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (probe_steady(rd[i])) {
            gbs[kept] = rd[i].best;
            if (ratio) ratio[kept] = ratio[i];
            kept++;
        }
    return kept;
}

/* How many of n readings answered (steady or not). */
static int n_answered(const probe_read *rd, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) k += rd[i].best > 0;
    return k;
}

/* --- model timings ----------------------------------------------------------- */

/* Decode: this many tokens after a 32-token prompt; blocks of DECODE_BLOCK
 * (a few hundred ms on 124M), N_BLOCKS of them per paired measurement. */
enum { DECODE_TOKENS = 128, DECODE_BLOCK = 16, N_BLOCKS = DECODE_TOKENS / DECODE_BLOCK };

static int want_every_head(void *ud, int l, int h) {
    (void)ud, (void)l, (void)h;
    return 1;
}
static void sink_attention(void *ud, int l, int h, int pos, const float *p, int n) {
    (void)l, (void)h, (void)pos;
    float *sink = ud; /* read the row, as an observer would */
    *sink += p[n - 1];
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Seconds to prefill n tokens into a fresh cache. */
static double time_prefill(gpt2_context *ctx, const int32_t *ids, int n) {
    gpt2_context_reset(ctx);
    double t0 = cli_now();
    gpt2_context_eval(ctx, ids, n, NULL);
    return cli_now() - t0;
}

/* A fresh cache holding the first n_prompt ids. */
static void restart(gpt2_context *ctx, const int32_t *ids, int n_prompt) {
    gpt2_context_reset(ctx);
    gpt2_context_eval(ctx, ids, n_prompt, NULL);
}

/* Rewinds to n_prompt when `count` more tokens would take the cache past
 * n_prompt + span: long measurements cycle over the positions that a plain
 * decode of span tokens covers (and fit any model bench accepts). */
static void make_room(gpt2_context *ctx, int n_prompt, int span, int count) {
    if (gpt2_context_n_past(ctx) + count > n_prompt + span) gpt2_context_rewind(ctx, n_prompt, NULL);
}

/* `count` greedy tokens; right after a rewind, the first is the prompt's next
 * id. The callers keep positions inside the window bench requires, so a
 * failed eval is a bug here, not a figure: it stops the bench. */
static void decode_tokens(gpt2_context *ctx, const int32_t *ids, int n_prompt, int V, int count) {
    for (int i = 0; i < count; i++) {
        const float *logits = gpt2_context_logits(ctx);
        int32_t id = logits ? argmax(logits, V) : ids[n_prompt];
        gpt2_error err;
        if (gpt2_context_eval(ctx, &id, 1, &err) != GPT2_OK) {
            cli_error("bench: decode at position %d: %s", gpt2_context_n_past(ctx), err.msg);
            abort();
        }
    }
}

/* Tokens/s decoding n tokens greedily after a prompt of n_prompt. */
static double time_decode(gpt2_context *ctx, const int32_t *ids, int n_prompt, int n, int V) {
    restart(ctx, ids, n_prompt);
    double t0 = cli_now();
    decode_tokens(ctx, ids, n_prompt, V, n);
    return n / (cli_now() - t0);
}

/* Bytes a decode step reads for the token at position pos: the weights it
 * reads (gpt2_model_token_bytes) and, in every layer, the float keys and
 * values of positions 0 .. pos (its own included). */
static double step_bytes(const gpt2_model *m, double pos) {
    const gpt2_config *c = gpt2_model_config(m);
    return (double)gpt2_model_token_bytes(m) + 2.0 * c->n_layer * (pos + 1) * c->n_embd * sizeof(float);
}

/* The decode's bandwidth against the machine's: n_blocks blocks of
 * DECODE_BLOCK tokens at positions n_prompt .. n_prompt + span, each timed
 * between two probe readings, after one untimed token (which refills the
 * caches and wakes the pool after the reading). Per block, the better of
 * its two readings goes to rd[] (the machine could read that fast around
 * the block) and the bytes its tokens read (step_bytes) per second, over
 * that reading's best, to ratio[]; the block's tokens per second to tok_s[]
 * unless it is NULL. */
static void decode_against_probe(gpt2_context *ctx, const int32_t *ids, int n_prompt, int span, int V,
                                 int n_blocks, probe *pr, probe_read *rd, double *ratio, double *tok_s) {
    const gpt2_model *m = gpt2_context_model(ctx);
    restart(ctx, ids, n_prompt);
    probe_read before = probe_pass(pr);
    for (int b = 0; b < n_blocks; b++) {
        make_room(ctx, n_prompt, span, 1 + DECODE_BLOCK);
        decode_tokens(ctx, ids, n_prompt, V, 1);
        double bytes = 0;
        for (int i = 0, p0 = gpt2_context_n_past(ctx); i < DECODE_BLOCK; i++) bytes += step_bytes(m, p0 + i);
        double t0 = cli_now();
        decode_tokens(ctx, ids, n_prompt, V, DECODE_BLOCK);
        double dt = cli_now() - t0;
        const probe_read after = probe_pass(pr);
        rd[b] = after.best > before.best ? after : before;
        before = after;
        ratio[b] = rd[b].best > 0 ? bytes / dt / 1e9 / rd[b].best : 0.0;
        if (tok_s) tok_s[b] = DECODE_BLOCK / dt;
    }
}

/* 2 * n_blocks blocks of DECODE_BLOCK tokens at positions n_prompt ..
 * n_prompt + span, with and without `hooks` in turns (the hooked one first
 * if hooked_first), so both halves see the same machine; tokens/s of each. */
static void time_decode_hooked(gpt2_context *ctx, const int32_t *ids, int n_prompt, int span, int V, int n_blocks,
                               const gpt2_hooks *hooks, int hooked_first, double *plain_tok_s,
                               double *hooked_tok_s) {
    double secs[2] = {0, 0};
    restart(ctx, ids, n_prompt);
    for (int b = 0; b < 2 * n_blocks; b++) {
        const int with = (b + hooked_first) % 2;
        gpt2_context_set_hooks(ctx, with ? hooks : NULL);
        make_room(ctx, n_prompt, span, DECODE_BLOCK);
        double t0 = cli_now();
        decode_tokens(ctx, ids, n_prompt, V, DECODE_BLOCK);
        secs[with] += cli_now() - t0;
    }
    gpt2_context_set_hooks(ctx, NULL);
    *plain_tok_s = n_blocks * DECODE_BLOCK / secs[0];
    *hooked_tok_s = n_blocks * DECODE_BLOCK / secs[1];
}

/* Seconds for one eval of T positions on top of n_past cached ones (rewound
 * and repeated; median of reps): the cost of a speculative verification pass. */
static double time_pass(gpt2_context *ctx, const int32_t *ids, int n_past, int T, int reps) {
    double t[100];
    if (reps > 100) reps = 100;
    restart(ctx, ids, n_past);
    for (int r = 0; r < reps; r++) {
        gpt2_context_rewind(ctx, n_past, NULL);
        double t0 = cli_now();
        gpt2_context_eval(ctx, ids + n_past, T, NULL);
        t[r] = cli_now() - t0;
    }
    return median(t, reps);
}

static const char usage_text[] =
    "usage: gptscope bench [-m MODEL [--quantize Q]] [--dtype f32|f16|bf16|q8|q4|q8_0|q4_0|q4_k] [--reps N]\n"
    "                      [--threads N] [--shape S] [--positions]\n"
    "                      [--gemm own|blas] [--json]\n"
    "       gptscope bench --machine [--reps N] [--threads N] [--json]\n"
    "  Without -m: a GPT-2-124M-shaped model with random weights, built in memory\n"
    "  (q8 ... q4_k: drawn in F32, then quantized as --quantize does).\n"
    "  Reports prefill tok/s (128, 512; after a warm-up, 5 x N runs of 128 and N of\n"
    "  512: the median and the range), decode tok/s (128 after 32), time to first\n"
    "  token for 500, decode with every attention head hooked, peak RSS, and the\n"
    "  decode's read bandwidth (the weights and the KV cache each token reads)\n"
    "  against this machine's (blocks of 16 tokens, each against the better of\n"
    "  the probe's readings around it: median and quartiles; none when the\n"
    "  machine is too unsteady to judge), and the cost of one eval of T = 2..16\n"
    "  positions (a speculative verification pass) in single-token evals. Models\n"
    "  with fewer than 513 positions skip the 512-token figures. N: --reps, 3.\n"
    "  --machine    only the machine's limits: read bandwidth and FMA peak, N\n"
    "               readings each\n"
    "  --shape S    the random model's shape: gpt2 (the default, 124M), gpt2-medium,\n"
    "               gpt2-large, gpt2-xl; smollm2-135m, qwen2.5-0.5b, llama-3.2-1b,\n"
    "               gemma3-270m, gemma3-1b (their architectures: RMSNorm, rotary,\n"
    "               grouped-query attention, SwiGLU or GeGLU, Gemma's windows);\n"
    "               its load time is the time to make it\n"
    "  --positions  also the cost curve: decode tok/s at positions 32, 128, 256,\n"
    "               512 and 1000 against its floor (the weights and the KV cache\n"
    "               read once per token at the machine's bandwidth), and prefill\n"
    "               of 128, 256, 512 and 1024 tokens in GFLOP/s against the peak\n"
    "               (each only where the model has the positions).\n"
    "  --gemm K     prefill's matrix products: own (the default, gptscope's kernels)\n"
    "               or blas (OpenBLAS sgemm); sets GPTSCOPE_GEMM for this run\n";

typedef struct {
    const char *model, *quantize; /* model NULL: the random 124M-shaped one */
    gpt2_dtype dtype;             /* of the random model */
    long reps;
    int json, n_threads, positions, machine;
    const void *shape; /* --shape: a bench_shape; NULL: gpt2 (124M) */
    const char *gemm;  /* --gemm own|blas: sets GPTSCOPE_GEMM for the run; NULL: as set */
} bench_opts;

/* --positions: where the cost curve is measured */
enum { N_CURVE = 5, N_PREFILL_CURVE = 4, CURVE_IDS = 1024 };
static const int curve_pos[N_CURVE] = {32, 128, 256, 512, 1000};
static const int curve_prefill[N_PREFILL_CURVE] = {128, 256, 512, 1024};

typedef struct {
    int n_decode, n_prefill;     /* points measured (the model's positions allowing) */
    int pos[N_CURVE];
    double tok_s[N_CURVE], floor_tok_s[N_CURVE], floor_ratio[N_CURVE];
    int tokens[N_PREFILL_CURVE];
    double prefill_tok_s[N_PREFILL_CURVE], prefill_gflops[N_PREFILL_CURVE], prefill_peak[N_PREFILL_CURVE];
} bench_curve;

/* Runs of prefill 128 per rep. */
enum { PREFILL_128_RUNS = 5 };

/* The verification passes timed: T positions after 32. */
enum { N_PASS = 5 };
static const int pass_t[N_PASS] = {1, 2, 4, 8, 16};

/* bench's figures (medians over the reps). For --json, those not measured
 * are null: load_s for the random model, the 512-token figures for a model
 * with fewer positions, the bandwidth figures when the probe never answered. */
typedef struct {
    gpt2_model *m;
    int loaded;      /* from -m DIR: load_s measured */
    int threads, reps, long_ok;
    int n_blocks, n_answered, n_steady; /* decode blocks: in all, the probe answered, its passes agreed */
    int n_ok;        /* the blocks the ratio is the median of: n_steady, or 0 when unsteady */
    int unsteady;    /* fewer than half the readings steady: no bandwidth figures */
    int n_4k;        /* 4 KiB readings that answered and agreed */
    double load_s, prefill_128, prefill_512, decode, decode_hooked, hooked_ratio, ttft_500_ms, rss_mb;
    double sample_us; /* one gpt2_sampler_sample with the default knobs on the model's logits */
    double peak_gflops, prefill_128_gflops;  /* the FMA probe's median; prefill 128's rate */
    double prefill_512_gflops, prefill_peak_ratio; /* 0: not measured (no 512 positions) */
    size_t weight_bytes;
    double kv_bytes; /* the keys and values a decoded token reads, on average over the decode's positions */
    double decode_gbs, machine_gbs, machine_4k_gbs, ratio, ratio_q1, ratio_q3, pass_ms[N_PASS];
    spread prefill_128_range, prefill_512_range, decode_range, peak_range, machine_range;
    const char *shape;   /* the random model's shape name; NULL for -m DIR */
    int curve_on;        /* --positions */
    int machine_only;    /* --machine: no model, the machine's figures alone */
    bench_curve curve;
} bench_result;

/* The raw measurements, one per rep (a block each for bw and ratio). */
typedef struct {
    double p128[PREFILL_128_RUNS * 100], p512[100], dec[100], ttft[100], hooked[100], hook_ratio[100], samp[100];
    double peak[100], peak_ratio[100]; /* the FMA probe just before each 512-token prefill, and prefill / it */
    probe_read rd[100 * N_BLOCKS];
    double bw[100 * N_BLOCKS], ratio[100 * N_BLOCKS];
} bench_samples;

/* --dtype: the random model's */
/* --shape: the random model's size: GPT-2's published shapes, and the small
 * open models' (their config.json: layers, heads, width, vocabulary, and the
 * description; a tied head each) */
typedef struct {
    const char *name;
    int n_layer, n_head, n_embd, n_vocab;
    gpt2_arch arch;
} bench_shape;
#define LLAMA_ARCH(fam, kv, ff, theta) \
    {.family = fam, .rms_norm = 1, .swiglu = 1, .n_kv_head = kv, .n_ff = ff, .rope_dim = 64, .rope_theta = theta}
/* Gemma 3 (text): one KV head of 256, GeGLU, (1 + w) norms, four a layer, a window of
 * 512 on 5 layers of 6 rotating by 10000, the others by 1e6 */
#define GEMMA3_ARCH(ff)                                                                                       \
    {.family = "gemma3_text", .rms_norm = 1, .swiglu = 1, .geglu = 1, .n_kv_head = 1, .head_dim = 256,    \
     .n_ff = ff, .rope_dim = 256, .rope_theta = 1e6f, .rope_theta_local = 1e4f, .qk_norm = 1,                 \
     .sliding_window = 512, .window_period = 6, .norm_plus_one = 1, .post_norms = 1, .attn_scale = 0.0625f}
static const bench_shape shapes[] = {
    {"gpt2", 12, 12, 768, 50257, {.family = "gpt2"}},
    {"gpt2-medium", 24, 16, 1024, 50257, {.family = "gpt2"}},
    {"gpt2-large", 36, 20, 1280, 50257, {.family = "gpt2"}},
    {"gpt2-xl", 48, 25, 1600, 50257, {.family = "gpt2"}},
    {"smollm2-135m", 30, 9, 576, 49152, LLAMA_ARCH("llama", 3, 1536, 100000)},
    {"qwen2.5-0.5b", 24, 14, 896, 151936, LLAMA_ARCH("qwen2", 2, 4864, 1000000)},
    {"llama-3.2-1b", 16, 32, 2048, 128256, LLAMA_ARCH("llama", 8, 8192, 500000)},
    {"gemma3-270m", 18, 4, 640, 262144, GEMMA3_ARCH(2048)},
    {"gemma3-1b", 26, 4, 1152, 262144, GEMMA3_ARCH(6912)},
};
#undef LLAMA_ARCH
#undef GEMMA3_ARCH

static int shape_option(const cli_opt *o, const char *arg, void *value) {
    (void)o;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        if (!strcmp(arg, shapes[i].name)) {
            *(const bench_shape **)value = &shapes[i];
            return 1;
        }
    cli_error("--shape: expected gpt2, gpt2-medium, gpt2-large, gpt2-xl, smollm2-135m, qwen2.5-0.5b, llama-3.2-1b, "
              "gemma3-270m or gemma3-1b, found '%s'", arg);
    return 0;
}

static int dtype_option(const cli_opt *o, const char *arg, void *value) {
    gpt2_dtype *dtype = value;
    if (!strcmp(arg, "f32")) *dtype = GPT2_DTYPE_F32;
    else if (!strcmp(arg, "f16")) *dtype = GPT2_DTYPE_F16;
    else if (!strcmp(arg, "bf16")) *dtype = GPT2_DTYPE_BF16;
    else if (!cli_quantize_dtype(arg, dtype)) {
        cli_error("--dtype: expected f32, f16, bf16, q8, q4, q8_0, q4_0 or q4_k, found '%s'", arg);
        return 0;
    }
    return 1;
}

static int gemm_option(const cli_opt *o, const char *arg, void *value) {
    (void)o;
    if (strcmp(arg, "own") && strcmp(arg, "blas")) {
        cli_error("--gemm: expected own or blas, found '%s'", arg);
        return 0;
    }
    *(const char **)value = arg;
    return 1;
}

/* The prefill matmuls' kernels: the engine reads GPTSCOPE_GEMM (blas: OpenBLAS). */
static const char *gemm_name(void) {
    const char *s = getenv("GPTSCOPE_GEMM");
    return s && !strcmp(s, "blas") ? "blas" : "own";
}

static int bench_parse(int argc, char **argv, bench_opts *o) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', bench_opts, model)},
        {CLI_FN("dtype", 0, bench_opts, dtype, gpt2_dtype, dtype_option)},
        {CLI_LONG("reps", 0, bench_opts, reps, 1, 100)},
        {CLI_INT("threads", 0, bench_opts, n_threads, 1, 256)},
        {CLI_FLAG("json", 0, bench_opts, json)},
        {CLI_FLAG("positions", 0, bench_opts, positions)},
        {CLI_FLAG("machine", 0, bench_opts, machine)},
        {CLI_FN("shape", 0, bench_opts, shape, const void *, shape_option)},
        {CLI_FN("quantize", 0, bench_opts, quantize, const char *, cli_opt_quantize)},
        {CLI_FN("gemm", 0, bench_opts, gemm, const char *, gemm_option)},
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc == CLI_PARSED && cli_positional(usage_text, "bench", argc, argv, 0, "") != EXIT_OK) rc = EXIT_USAGE;
    if (rc == CLI_PARSED && o->shape && o->model) {
        cli_error("--shape makes a random model: it does not go with -m DIR");
        rc = EXIT_USAGE;
    }
    if (rc == CLI_PARSED && o->machine && (o->model || o->shape || o->positions || o->quantize)) {
        cli_error("--machine measures the machine alone: it does not go with -m, --shape, --positions or --quantize");
        rc = EXIT_USAGE;
    }
    if (rc == CLI_PARSED && o->quantize && !o->model) {
        cli_error("--quantize needs -m DIR; the random model takes --dtype");
        rc = EXIT_USAGE;
    }
    return rc;
}

/* Ctrl-C: a half-measured figure means nothing, so bench stops at once,
 * saying what it was measuring (the probe child sees its socket close and
 * exits). Only async-signal-safe calls here. */
static const char *volatile g_phase = "nothing yet";

static void on_interrupt(int sig) {
    cli_say("\ngptscope: bench interrupted while measuring ");
    cli_say(g_phase);
    cli_say("; no figures printed\n");
    _exit(128 + sig);
}

/* The probes' threads: --threads, else one per online CPU (as decode). */
static int probe_threads(int n_threads) {
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return n_threads ? n_threads : online > 0 ? (int)online : 1;
}

/* The machine's read bandwidth on 4 KiB pages (five readings of a probe
 * that is then stopped: the median of the steady ones), and the huge-page
 * probe *pr started for the decode blocks to pair with. Returns whether *pr
 * started. */
static int probe_machine(int n_threads, probe *pr, bench_result *r) {
    const int threads = probe_threads(n_threads);
    probe_read rd[5] = {{0, 0}};
    double bw_4k[5];
    if (probe_start(pr, (size_t)1 << 30, threads, 0))
        for (int i = 0; i < 5; i++) rd[i] = probe_pass(pr);
    probe_stop(pr);
    r->n_4k = keep_steady(rd, bw_4k, NULL, 5);
    r->machine_4k_gbs = r->n_4k ? median(bw_4k, r->n_4k) : 0.0;
    const int started = probe_start(pr, (size_t)1 << 30, threads, 1);
    if (!started)
        cli_error("bench: could not start the bandwidth probe (1 GiB in a child process); "
                  "the bandwidth figures are left out");
    return started;
}

/* -m DIR loaded (and timed), or the random 124M-shaped model; r->m. */
static int bench_model(const bench_opts *o, bench_result *r) {
    gpt2_error err;
    r->loaded = o->model != NULL;
    r->load_s = -1;
    if (o->model) {
        double t0 = cli_now();
        r->m = cli_load_model_as(o->model, o->quantize);
        r->load_s = cli_now() - t0;
        return r->m ? EXIT_OK : EXIT_ERR;
    }
    const bench_shape *sh = o->shape ? o->shape : &shapes[0];
    gpt2_config cfg = {.n_layer = sh->n_layer, .n_head = sh->n_head, .n_embd = sh->n_embd, .n_ctx = 1024,
                       .n_vocab = sh->n_vocab, .ln_eps = 1e-5f, .arch = sh->arch};
    double t0 = cli_now();
    if (gpt2_model_new_random(cfg, o->dtype, 1234, &r->m, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return EXIT_ERR;
    }
    r->load_s = cli_now() - t0; /* making it: the random model's "load" */
    r->shape = o->shape ? sh->name : NULL;
    return EXIT_OK;
}

/* Prefill of 128 and 512 tokens, and the time to the first token after 500.
 * As llama-bench does: a warm-up of each length first (it also touches every
 * page of the KV cache and the scratch buffers those lengths use), then
 * PREFILL_128_RUNS * R runs of 128 back to back (a fraction of a second on
 * 124M; one run is too short to judge); then R of 512, each right after an FMA reading
 * on as many threads (paired: its share of the peak). */
static void measure_prefill(gpt2_context *ctx, const int32_t *ids, int V, int R, int long_ok, bench_samples *x) {
    if (long_ok) time_prefill(ctx, ids, 512);
    time_prefill(ctx, ids, 128);
    for (int r = 0; r < PREFILL_128_RUNS * R; r++) x->p128[r] = 128 / time_prefill(ctx, ids, 128);
    const double flops512 = prefill_flops(gpt2_context_model(ctx), 512);
    for (int r = 0; r < R; r++) {
        x->peak[r] = fma_pass(gpt2_context_n_threads(ctx));
        if (long_ok) {
            x->p512[r] = 512 / time_prefill(ctx, ids, 512);
            x->peak_ratio[r] = flops512 * x->p512[r] / 512 / 1e9 / x->peak[r];
            gpt2_context_reset(ctx);
            double t0 = cli_now();
            gpt2_context_eval(ctx, ids, 500, NULL);
            argmax(gpt2_context_logits(ctx), V);
            x->ttft[r] = (cli_now() - t0) * 1e3;
        }
    }
}

/* Decode tok/s: 128 tokens straight, as a user sees them. The bandwidth
 * ratio: blocks each after a probe pass (see probe). The hooks' cost:
 * plain and hooked blocks in turns within one decode, so that both see
 * the same machine (separate runs here differ by more than the cost). */
static void measure_decode(gpt2_context *ctx, const int32_t *ids, int V, int R, probe *pr, bench_samples *x) {
    float sink = 0;
    gpt2_hooks hooks = {.user_data = &sink, .want_attention = want_every_head, .on_attention = sink_attention};
    const int n_dec = DECODE_TOKENS;
    for (int r = 0; r < R; r++) {
        time_decode(ctx, ids, 32, 32, V);
        x->dec[r] = time_decode(ctx, ids, 32, n_dec, V);
        decode_against_probe(ctx, ids, 32, n_dec, V, N_BLOCKS, pr, x->rd + r * N_BLOCKS, x->ratio + r * N_BLOCKS,
                             NULL);
        double plain_tok_s;
        time_decode_hooked(ctx, ids, 32, n_dec, V, N_BLOCKS, &hooks, r % 2, &plain_tok_s, &x->hooked[r]);
        x->hook_ratio[r] = x->hooked[r] / plain_tok_s;
    }
}

/* What choosing a token costs beside the forward pass: gpt2_sampler_sample
 * with the default knobs (penalty over 64 tokens, temperature, top-k 40,
 * top-p, min-p) on the logits the decode left, in microseconds per call. */
static void measure_sampling(gpt2_context *ctx, const int32_t *ids, int V, int R, bench_samples *x) {
    gpt2_sampler *s = NULL;
    if (gpt2_sampler_new(gpt2_sampler_default_params(), V, &s, NULL) != GPT2_OK) return;
    const float *logits = gpt2_context_logits(ctx);
    for (int r = 0; r < R; r++) {
        double t0 = cli_now();
        for (int i = 0; i < 200; i++) (void)gpt2_sampler_sample(s, logits, ids, 64);
        x->samp[r] = (cli_now() - t0) / 200 * 1e6;
    }
    gpt2_sampler_free(s);
}

/* The machine's read bandwidth from nb readings (x->rd; with the decode
 * blocks' ratios beside them in x->ratio unless --machine): the median and
 * range of the steady ones, or none when under half were steady. Readings
 * that never came (the probe child died) are left out, and said so. */
static void summarize_bandwidth(bench_samples *x, int nb, int probe_started, bench_result *r) {
    r->n_blocks = nb;
    r->n_answered = n_answered(x->rd, nb);
    int n_ok = r->n_ok = r->n_steady = keep_steady(x->rd, x->bw, x->ratio, nb);
    if (r->n_answered < nb && probe_started)
        cli_error("bench: the bandwidth probe answered %d of %d readings", r->n_answered, nb);
    if (r->n_answered && 2 * n_ok < r->n_answered) {
        r->unsteady = 1;
        cli_error("bench: the machine's read bandwidth was unsteady: in %d of %d readings the best two of %d passes "
                  "disagreed by more than %.0f%%, so no bandwidth figure is given (run bench again on a quieter "
                  "machine)", r->n_answered - n_ok, r->n_answered, PROBE_PASSES, 100 * (1 - PROBE_AGREE));
        n_ok = r->n_ok = 0;
    }
    r->machine_range = spread_of(x->bw, n_ok);
    r->machine_gbs = n_ok ? median(x->bw, n_ok) : 0.0;
    r->ratio_q1 = n_ok ? quantile(x->ratio, n_ok, 0.25) : 0.0;
    r->ratio = n_ok ? median(x->ratio, n_ok) : 0.0;
    r->ratio_q3 = n_ok ? quantile(x->ratio, n_ok, 0.75) : 0.0;
}

/* The medians and quartiles of the samples into r. */
static void summarize(bench_samples *x, int R, int probe_started, bench_result *r) {
    const int R128 = PREFILL_128_RUNS * R;
    r->prefill_128_range = spread_of(x->p128, R128), r->prefill_512_range = spread_of(x->p512, R);
    r->decode_range = spread_of(x->dec, R), r->peak_range = spread_of(x->peak, R);
    r->prefill_128 = median(x->p128, R128), r->prefill_512 = median(x->p512, R), r->decode = median(x->dec, R);
    r->ttft_500_ms = median(x->ttft, R), r->decode_hooked = median(x->hooked, R);
    r->hooked_ratio = median(x->hook_ratio, R);
    r->sample_us = median(x->samp, R);
    r->peak_gflops = median(x->peak, R);
    r->prefill_128_gflops = prefill_flops(r->m, 128) * r->prefill_128 / 128 / 1e9;
    if (r->long_ok) {
        r->prefill_512_gflops = prefill_flops(r->m, 512) * r->prefill_512 / 512 / 1e9;
        r->prefill_peak_ratio = median(x->peak_ratio, R);
    }
    summarize_bandwidth(x, R * N_BLOCKS, probe_started, r);
    r->decode_gbs = ((double)r->weight_bytes + r->kv_bytes) * r->decode / 1e9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r->rss_mb = (double)ru.ru_maxrss / 1024.0;
}

/* The cost curve (--positions), the probe running: at each position a block
 * of decode per rep right after a probe pass (its floor: step_bytes at the
 * pass's bandwidth), and prefills of growing length after an FMA pass. */
static void measure_curve(gpt2_context *ctx, const int32_t *ids, int V, int R, probe *pr, bench_curve *cv) {
    const gpt2_model *m = gpt2_context_model(ctx);
    const int n_ctx = gpt2_context_n_ctx(ctx);
    double gbs[200], ratio[200], tps[200], peak[100], pk[100];
    probe_read rd[200];
    const int nb = R < 2 ? 3 : 2 * R; /* blocks per position: one is too noisy to judge */
    cv->n_decode = cv->n_prefill = 0;
    for (int i = 0; i < N_CURVE && curve_pos[i] + 2 + DECODE_BLOCK <= n_ctx; i++) {
        const int p = curve_pos[i];
        /* the timed tokens sit at p + 1 .. p + DECODE_BLOCK (one untimed token first) */
        const double bytes = step_bytes(m, p + 1 + (DECODE_BLOCK - 1) / 2.0);
        decode_against_probe(ctx, ids, p, DECODE_BLOCK + 1, V, nb, pr, rd, ratio, tps);
        const int k = cv->n_decode++;
        cv->pos[k] = p;
        cv->tok_s[k] = median(tps, nb);
        const int n_ok = keep_steady(rd, gbs, ratio, nb);
        cv->floor_ratio[k] = 2 * n_ok >= nb ? median(ratio, n_ok) : 0; /* too few steady readings: none */
        cv->floor_tok_s[k] = 2 * n_ok >= nb ? median(gbs, n_ok) * 1e9 / bytes : 0;
    }
    for (int i = 0; i < N_PREFILL_CURVE && curve_prefill[i] <= n_ctx && curve_prefill[i] <= CURVE_IDS; i++) {
        const int T = curve_prefill[i];
        for (int r = 0; r < R; r++) {
            peak[r] = fma_pass(gpt2_context_n_threads(ctx));
            tps[r] = T / time_prefill(ctx, ids, T);
            pk[r] = prefill_flops(m, T) * tps[r] / T / 1e9 / peak[r];
        }
        const int k = cv->n_prefill++;
        cv->tokens[k] = T;
        cv->prefill_tok_s[k] = median(tps, R);
        cv->prefill_gflops[k] = prefill_flops(m, T) * cv->prefill_tok_s[k] / T / 1e9;
        cv->prefill_peak[k] = median(pk, R);
    }
}

/* The measurements on a loaded model, probe *pr running. */
static int measure(const bench_opts *o, probe *pr, int probe_started, bench_result *r) {
    const gpt2_config *cfg = gpt2_model_config(r->m);
    gpt2_context *ctx = NULL;
    if (cfg->n_ctx < 160) {
        cli_error("bench needs a model with at least 160 positions; %s has %d", gpt2_model_name(r->m), cfg->n_ctx);
        return EXIT_ERR;
    }
    if (!(ctx = cli_context_new(r->m, o->n_threads))) return EXIT_ERR;
    int32_t ids[CURVE_IDS];
    uint64_t s = 42;
    for (int i = 0; i < CURVE_IDS; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % (uint64_t)cfg->n_vocab);
    }
    const int R = (int)o->reps, V = cfg->n_vocab;
    r->reps = R, r->threads = gpt2_context_n_threads(ctx), r->long_ok = cfg->n_ctx >= 513;
    r->weight_bytes = gpt2_model_token_bytes(r->m);
    /* the decode's tokens sit at positions 32 .. 32 + DECODE_TOKENS - 1 */
    r->kv_bytes = step_bytes(r->m, 32 + (DECODE_TOKENS - 1) / 2.0) - (double)r->weight_bytes;
    static bench_samples x; /* 18 KB of samples: off the stack */
    memset(&x, 0, sizeof x);
    g_phase = "prefill and time to first token";
    measure_prefill(ctx, ids, V, R, r->long_ok, &x);
    g_phase = "decode, its bandwidth and the hooks' cost";
    measure_decode(ctx, ids, V, R, pr, &x);
    measure_sampling(ctx, ids, V, R, &x);
    if (o->positions) {
        g_phase = "the cost curve (--positions)";
        measure_curve(ctx, ids, V, R, pr, &r->curve);
        r->curve_on = 1;
    }
    probe_stop(pr);
    /* verification passes: T positions after 32, as speculative decoding runs them */
    g_phase = "passes over a few positions";
    for (int i = 0; i < N_PASS; i++) r->pass_ms[i] = time_pass(ctx, ids, 32, pass_t[i], 10 * R) * 1e3;
    g_phase = "nothing (printing)";
    summarize(&x, R, probe_started, r);
    gpt2_context_free(ctx);
    return EXIT_OK;
}

/* --machine: the machine's limits alone, no model: reps readings of the
 * read probe (already started) and of the FMA peak, on as many threads. */
static void measure_machine(const bench_opts *o, probe *pr, int probe_started, bench_result *r) {
    static bench_samples x; /* off the stack */
    memset(&x, 0, sizeof x);
    const int R = r->reps = (int)o->reps;
    r->machine_only = 1;
    r->threads = probe_threads(o->n_threads);
    for (int i = 0; i < R; i++) x.rd[i] = probe_pass(pr);
    probe_stop(pr);
    g_phase = "the machine's peak";
    for (int i = 0; i < R; i++) x.peak[i] = fma_pass(r->threads);
    r->peak_range = spread_of(x.peak, R);
    r->peak_gflops = median(x.peak, R);
    summarize_bandwidth(&x, R, probe_started, r);
}

static int bench_run(const bench_opts *o, bench_result *r) {
    /* The probe children fork before the model and the context exist: they
     * share none of those pages (after a fork, the parent's first write to
     * each shared huge page is a copy-on-write fault that splits it), and no
     * pool thread is running. They read with as many threads as decode. */
    struct sigaction sa = {.sa_handler = on_interrupt};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL), sigaction(SIGTERM, &sa, NULL);
    g_phase = "the machine's read bandwidth";
    probe pr;
    const int probe_started = probe_machine(o->n_threads, &pr, r);
    if (o->machine) {
        measure_machine(o, &pr, probe_started, r);
        return EXIT_OK;
    }
    g_phase = o->model ? "the model's load" : "nothing yet (making the random model)";
    int rc = bench_model(o, r);
    if (rc == EXIT_OK) rc = measure(o, &pr, probe_started, r);
    probe_stop(&pr);
    return rc;
}

/* v rounded to `decimals` places (the figures' precision); null when not measured. */
static void figure(cJSON *obj, const char *key, int measured, double v, int decimals) {
    if (!measured) {
        viz_json_null(obj, key);
        return;
    }
    const double scale = pow(10, decimals);
    viz_json_number(obj, key, round(v * scale) / scale);
}

/* [lo, hi] of a figure's runs, rounded as the figure; null when not measured. */
static void figure_range(cJSON *obj, const char *key, int measured, spread sp, int decimals) {
    if (!measured) {
        viz_json_null(obj, key);
        return;
    }
    const double scale = pow(10, decimals);
    cJSON *a = cJSON_CreateArray();
    viz_json_append(a, cJSON_CreateNumber(round(sp.lo * scale) / scale));
    viz_json_append(a, cJSON_CreateNumber(round(sp.hi * scale) / scale));
    viz_json_add(obj, key, a);
}

/* "positions": {"decode": [{"pos", "tok_s", "floor_tok_s", "floor_ratio"}, ...],
 *               "prefill": [{"tokens", "tok_s", "gflops", "peak_ratio"}, ...]} */
static cJSON *curve_json(const bench_curve *cv) {
    cJSON *o = cJSON_CreateObject(), *dec = cJSON_CreateArray(), *pre = cJSON_CreateArray();
    for (int i = 0; i < cv->n_decode; i++) {
        cJSON *e = viz_json_new_object(dec);
        viz_json_number(e, "pos", cv->pos[i]);
        figure(e, "tok_s", 1, cv->tok_s[i], 2);
        figure(e, "floor_tok_s", cv->floor_tok_s[i] > 0, cv->floor_tok_s[i], 2);
        figure(e, "floor_ratio", cv->floor_tok_s[i] > 0, cv->floor_ratio[i], 3);
    }
    for (int i = 0; i < cv->n_prefill; i++) {
        cJSON *e = viz_json_new_object(pre);
        viz_json_number(e, "tokens", cv->tokens[i]);
        figure(e, "tok_s", 1, cv->prefill_tok_s[i], 1);
        figure(e, "gflops", 1, cv->prefill_gflops[i], 1);
        figure(e, "peak_ratio", 1, cv->prefill_peak[i], 3);
    }
    viz_json_add(o, "decode", dec);
    viz_json_add(o, "prefill", pre);
    return o;
}

static void curve_text(const bench_curve *cv) {
    printf("cost curve   decode at a position, against its floor (the weights and the KV cache read once\n"
           "             per token at the probe's bandwidth); prefill of T tokens, against the peak\n");
    for (int i = 0; i < cv->n_decode; i++)
        if (cv->floor_tok_s[i] > 0)
            printf("  decode @%-5d %9.1f tok/s  floor %9.1f tok/s  %3.0f%%\n", cv->pos[i], cv->tok_s[i],
                   cv->floor_tok_s[i], 100.0 * cv->floor_ratio[i]);
        else
            printf("  decode @%-5d %9.1f tok/s  floor not measured (the machine's read bandwidth was unsteady)\n",
                   cv->pos[i], cv->tok_s[i]);
    for (int i = 0; i < cv->n_prefill; i++)
        printf("  prefill %-5d %9.1f tok/s  %9.1f GFLOP/s  %3.0f%% of peak\n", cv->tokens[i], cv->prefill_tok_s[i],
               cv->prefill_gflops[i], 100.0 * cv->prefill_peak[i]);
}

/* The machine's figures (both modes). */
static void machine_json(cJSON *root, const bench_result *f) {
    const int probe_ok = f->n_ok > 0;
    const char *why = f->unsteady ? "unsteady" : f->n_blocks && !f->n_answered ? "no probe" : NULL;
    figure(root, "machine_peak_gflops", 1, f->peak_gflops, 1);
    figure_range(root, "machine_peak_gflops_range", 1, f->peak_range, 1);
    figure(root, "machine_read_gb_s", probe_ok, f->machine_gbs, 2);
    figure_range(root, "machine_read_gb_s_range", probe_ok, f->machine_range, 2);
    figure(root, "machine_read_4k_gb_s", f->n_4k > 0, f->machine_4k_gbs, 2);
    if (why) viz_json_text(root, "machine_read_note", why, strlen(why));
    else viz_json_null(root, "machine_read_note");
}

/* --machine --json: {"threads", "reps", "machine_peak_gflops", ..., "machine_read_note"} */
static int machine_only_json(const bench_result *f) {
    cJSON *root = cJSON_CreateObject();
    viz_json_number(root, "threads", f->threads);
    viz_json_number(root, "reps", f->reps);
    machine_json(root, f);
    return cli_json_print(root);
}

/* The model's dtypes by share of the matrices' bytes, largest first: "f16",
 * or for a mix "q5_0 62% + q6_k 25% + q8_0 13%". */
static void dtype_text(const gpt2_model *m, char *buf, size_t cap) {
    size_t bytes[GPT2_N_DTYPES], total = 0;
    if (gpt2_model_dtype_bytes(m, bytes) <= 1) {
        snprintf(buf, cap, "%s", gpt2_dtype_name(gpt2_model_dtype(m)));
        return;
    }
    for (int d = 0; d < GPT2_N_DTYPES; d++) total += bytes[d];
    size_t k = 0;
    buf[0] = '\0';
    for (;;) {
        int best = -1;
        for (int d = 0; d < GPT2_N_DTYPES; d++)
            if (bytes[d] && (best < 0 || bytes[d] > bytes[best])) best = d;
        if (best < 0 || k >= cap) break;
        k += (size_t)snprintf(buf + k, cap - k, "%s%s %.0f%%", k ? " + " : "", gpt2_dtype_name((gpt2_dtype)best),
                              100.0 * (double)bytes[best] / (double)total);
        bytes[best] = 0;
    }
}

static int bench_json(const bench_result *f) {
    cJSON *root = cJSON_CreateObject(), *pass = cJSON_CreateObject();
    char random_name[64];
    snprintf(random_name, sizeof random_name, "random-%s", f->shape ? f->shape : "gpt2");
    const char *model = f->loaded ? gpt2_model_name(f->m) : f->shape && strcmp(f->shape, "gpt2") ? random_name : "random-124M",
               *dtype = gpt2_dtype_name(gpt2_model_dtype(f->m));
    const int probe_ok = f->n_ok > 0;
    viz_json_text(root, "model", model, strlen(model));
    viz_json_text(root, "dtype", dtype, strlen(dtype));
    size_t bytes[GPT2_N_DTYPES], total = 0;
    if (gpt2_model_dtype_bytes(f->m, bytes) > 1) { /* a mix: each dtype's share of the matrices' bytes */
        cJSON *mix = cJSON_AddObjectToObject(root, "dtypes");
        for (int d = 0; d < GPT2_N_DTYPES; d++) total += bytes[d];
        for (int d = 0; d < GPT2_N_DTYPES; d++)
            if (bytes[d]) viz_json_number(mix, gpt2_dtype_name((gpt2_dtype)d), (double)bytes[d] / (double)total);
    }
    viz_json_number(root, "threads", f->threads);
    viz_json_text(root, "gemm", gemm_name(), strlen(gemm_name()));
    viz_json_number(root, "reps", f->reps);
    figure(root, "load_s", f->loaded || f->shape, f->load_s, 4); /* the random model: the time to make it */
    figure(root, "prefill_128_tok_s", 1, f->prefill_128, 1);
    figure_range(root, "prefill_128_tok_s_range", 1, f->prefill_128_range, 1);
    figure(root, "prefill_512_tok_s", f->long_ok, f->prefill_512, 1);
    figure_range(root, "prefill_512_tok_s_range", f->long_ok, f->prefill_512_range, 1);
    figure(root, "decode_tok_s", 1, f->decode, 2);
    figure_range(root, "decode_tok_s_range", 1, f->decode_range, 2);
    figure(root, "decode_hooked_tok_s", 1, f->decode_hooked, 2);
    figure(root, "decode_hooked_ratio", 1, f->hooked_ratio, 3);
    figure(root, "ttft_500_ms", f->long_ok, f->ttft_500_ms, 1);
    figure(root, "sample_us", 1, f->sample_us, 2);
    machine_json(root, f);
    figure(root, "prefill_128_gflops", 1, f->prefill_128_gflops, 1);
    figure(root, "prefill_512_gflops", f->long_ok, f->prefill_512_gflops, 1);
    figure(root, "prefill_peak_ratio", f->long_ok, f->prefill_peak_ratio, 3);
    figure(root, "peak_rss_mb", 1, f->rss_mb, 1);
    viz_json_number(root, "weight_bytes_per_token", (double)f->weight_bytes);
    viz_json_number(root, "kv_bytes_per_token", f->kv_bytes);
    figure(root, "decode_read_gb_s", 1, f->decode_gbs, 2);
    figure(root, "decode_bandwidth_ratio", probe_ok, f->ratio, 3);
    figure(root, "decode_bandwidth_ratio_q1", probe_ok, f->ratio_q1, 3);
    figure(root, "decode_bandwidth_ratio_q3", probe_ok, f->ratio_q3, 3);
    static const char *const t[N_PASS] = {"1", "2", "4", "8", "16"};
    for (int i = 0; i < N_PASS; i++) figure(pass, t[i], 1, f->pass_ms[i], 3);
    viz_json_add(root, "pass_ms", pass);
    if (f->curve_on) viz_json_add(root, "positions", curve_json(&f->curve));
    return cli_json_print(root);
}

/* The machine's read bandwidth line (both modes). */
static void machine_text(const bench_result *r) {
    if (r->n_ok)
        printf("machine      %.2f GB/s read bandwidth (readings %.2f-%.2f, each the best of %d passes over 1 GiB;\n"
               "             %d threads, huge pages; %.2f GB/s on 4 KiB pages)\n",
               r->machine_gbs, r->machine_range.lo, r->machine_range.hi, PROBE_PASSES, r->threads,
               r->machine_4k_gbs);
    else if (r->unsteady)
        printf("machine      not measured: too unsteady (the best two passes of %d of %d readings disagreed by over "
               "%.0f%%)\n",
               r->n_answered - r->n_steady, r->n_answered, 100 * (1 - PROBE_AGREE));
    else
        printf("machine      not measured (the probe did not answer)\n");
}

static int bench_report(const bench_result *r, int json) {
    if (r->machine_only) {
        if (json) return machine_only_json(r);
        printf("peak         %.1f GFLOP/s (readings %.1f-%.1f, median of %d): fused multiply-adds on %d threads "
               "(%d-wide vectors)\n", r->peak_gflops, r->peak_range.lo, r->peak_range.hi, r->reps, r->threads,
               FVEC_LANES);
        machine_text(r);
        return EXIT_OK;
    }
    if (json) return bench_json(r);
    const gpt2_config *cfg = gpt2_model_config(r->m);
    char dt[160];
    dtype_text(r->m, dt, sizeof dt);
    printf("model        %s (%s, %d layers, %d embd, %d ctx), %d threads, median of %d\n",
           r->loaded ? cli_show(gpt2_model_name(r->m)) : r->shape ? r->shape : "random GPT-2 124M shape", dt,
           cfg->n_layer, cfg->n_embd, cfg->n_ctx, r->threads, r->reps);
    printf("gemm         %s (prefill's matrix products; --gemm own|blas)\n", gemm_name());
    if (r->load_s >= 0) printf("load         %.3f s\n", r->load_s);
    printf("prefill 128  %.1f tok/s = %.1f GFLOP/s (runs %.1f-%.1f, after a warm-up)\n", r->prefill_128,
           r->prefill_128_gflops, r->prefill_128_range.lo, r->prefill_128_range.hi);
    printf("peak         %.1f GFLOP/s (runs %.1f-%.1f): fused multiply-adds on %d threads (%d-wide vectors)\n",
           r->peak_gflops, r->peak_range.lo, r->peak_range.hi, r->threads, FVEC_LANES);
    if (r->long_ok)
        printf("prefill 512  %.1f tok/s = %.1f GFLOP/s (runs %.1f-%.1f), %.0f%% of the peak (each run against\n"
               "             a peak reading just before it)\n",
               r->prefill_512, r->prefill_512_gflops, r->prefill_512_range.lo, r->prefill_512_range.hi,
               100.0 * r->prefill_peak_ratio);
    if (r->long_ok && gpt2_model_dtype(r->m) == GPT2_DTYPE_Q8)
        printf("             (q8 multiplies in integers, 16-bit inputs by 8-bit weights: twice the products\n"
               "             per instruction of a float multiply-add, so it can pass the float peak)\n");
    printf("decode       %.2f tok/s (%d tokens after 32; runs %.2f-%.2f)\n", r->decode, DECODE_TOKENS,
           r->decode_range.lo, r->decode_range.hi);
    printf("decode+hooks %.2f tok/s (every layer and head observed: %+.1f%% against plain blocks in turn)\n",
           r->decode_hooked, 100.0 * (r->hooked_ratio - 1));
    if (r->long_ok) printf("ttft 500     %.1f ms\n", r->ttft_500_ms);
    printf("sampling     %.1f us per token (default knobs, on the model's logits; decode above takes the argmax)\n",
           r->sample_us);
    printf("peak RSS     %.1f MB\n", r->rss_mb);
    printf("reads        %.1f MB per decoded token (weights %.1f, KV cache %.1f at its mean position) -> %.2f GB/s\n",
           ((double)r->weight_bytes + r->kv_bytes) / 1e6, (double)r->weight_bytes / 1e6, r->kv_bytes / 1e6,
           r->decode_gbs);
    machine_text(r);
    if (r->n_ok)
        printf("ratio        decode reads at %.0f%% of the machine's bandwidth (median of %d blocks of %d tokens,\n"
               "             each against the better of the readings around it; quartiles %.0f-%.0f%%)\n",
               100.0 * r->ratio, r->n_ok, DECODE_BLOCK, 100.0 * r->ratio_q1, 100.0 * r->ratio_q3);
    printf("pass         one eval of T positions after 32, in single-token evals:");
    for (int i = 1; i < N_PASS; i++) printf(" T=%d %.2f", pass_t[i], r->pass_ms[i] / r->pass_ms[0]);
    printf(" (T=1: %.3f ms)\n", r->pass_ms[0]);
    if (r->curve_on) curve_text(&r->curve);
    return EXIT_OK;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {.dtype = GPT2_DTYPE_F32, .reps = 3};
    bench_result r = {0};
    int rc = bench_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if (o.gemm) setenv("GPTSCOPE_GEMM", o.gemm, 1); /* before any thread starts */
    if ((rc = bench_run(&o, &r)) == EXIT_OK) rc = bench_report(&r, o.json);
    gpt2_model_free(r.m);
    return rc;
}
