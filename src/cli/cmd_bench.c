/* cmd_bench.c — `gptscope bench`: prefill/decode speed, latency, memory, and the
 * machine's own read bandwidth measured in the same run, so that the ratio
 * decode bandwidth / machine bandwidth holds on a noisy machine. */
#include <getopt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include "cli/cli.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* --- machine read bandwidth: threads summing disjoint halves of a buffer --- */

typedef struct {
    const float *p;
    size_t n;
    float sum;
} read_job;

/* Sums its slice with 64 independent lanes (four vector registers' worth),
 * so the loop is bound by memory, not by the latency of one add chain. */
static void *read_worker(void *arg) {
    read_job *j = arg;
    float acc[64] = {0};
    for (size_t i = 0; i + 64 <= j->n; i += 64)
        for (int k = 0; k < 64; k++) acc[k] += j->p[i + k];
    for (int k = 0; k < 64; k++) j->sum += acc[k];
    return NULL;
}

/* Best of `reps` passes over `bytes` of memory with n_threads readers, GB/s,
 * on 2 MiB pages (huge) or on whatever malloc gives (4 KiB pages here). */
static double measure_read_bandwidth(size_t bytes, int n_threads, int reps, int huge) {
    size_t n = bytes / sizeof(float);
    float *buf = huge ? aligned_alloc((size_t)2 << 20, n * sizeof(float)) : malloc(n * sizeof(float));
    if (!buf) return 0;
#ifdef MADV_HUGEPAGE
    if (huge) madvise(buf, n * sizeof(float), MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 7);
    double best = 0;
    pthread_t th[16];
    read_job jobs[16];
    if (n_threads > 16) n_threads = 16;
    for (int r = 0; r < reps; r++) {
        double t0 = cli_now();
        for (int k = 0; k < n_threads; k++) {
            jobs[k] = (read_job){buf + n / n_threads * k, n / n_threads, 0};
            pthread_create(&th[k], NULL, read_worker, &jobs[k]);
        }
        for (int k = 0; k < n_threads; k++) pthread_join(th[k], NULL);
        double gbs = (double)bytes / (cli_now() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    free(buf);
    return best;
}

/* The probe in a child process, so its 1 GiB buffer never counts toward this
 * process's peak RSS. Returns 0 if the child could not report. */
static double measure_in_child(size_t bytes, int n_threads, int reps, int huge) {
    int fd[2];
    if (pipe(fd) != 0) return 0;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        double gbs = measure_read_bandwidth(bytes, n_threads, reps, huge);
        ssize_t w = write(fd[1], &gbs, sizeof gbs);
        _exit(w == (ssize_t)sizeof gbs ? 0 : 1);
    }
    close(fd[1]);
    double gbs = 0;
    if (pid < 0 || read(fd[0], &gbs, sizeof gbs) != (ssize_t)sizeof gbs) gbs = 0;
    close(fd[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    return gbs;
}

/* --- model timings ----------------------------------------------------------- */

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

/* Tokens/s decoding n tokens greedily after a prompt of n_prompt. */
static double time_decode(gpt2_context *ctx, const int32_t *ids, int n_prompt, int n, int V) {
    gpt2_context_reset(ctx);
    gpt2_context_eval(ctx, ids, n_prompt, NULL);
    double t0 = cli_now();
    for (int i = 0; i < n; i++) {
        int32_t id = argmax(gpt2_context_logits(ctx), V);
        gpt2_context_eval(ctx, &id, 1, NULL);
    }
    return n / (cli_now() - t0);
}

/* Decodes 2n tokens after a prompt of n_prompt in blocks of 16, with and
 * without `hooks` in turns (starting with the hooked block if hooked_first),
 * so both halves see the same machine; tokens/s of each half. */
static void time_decode_hooked(gpt2_context *ctx, const int32_t *ids, int n_prompt, int n, int V,
                               const gpt2_hooks *hooks, int hooked_first, double *plain_tok_s,
                               double *hooked_tok_s) {
    enum { BLOCK = 16 };
    double secs[2] = {0, 0};
    int count[2] = {0, 0};
    gpt2_context_reset(ctx);
    gpt2_context_eval(ctx, ids, n_prompt, NULL);
    for (int b = 0; b < 2 * ((n + BLOCK - 1) / BLOCK); b++) {
        const int with = (b + hooked_first) % 2;
        gpt2_context_set_hooks(ctx, with ? hooks : NULL);
        double t0 = cli_now();
        for (int i = 0; i < BLOCK; i++) {
            int32_t id = argmax(gpt2_context_logits(ctx), V);
            gpt2_context_eval(ctx, &id, 1, NULL);
        }
        secs[with] += cli_now() - t0;
        count[with] += BLOCK;
    }
    gpt2_context_set_hooks(ctx, NULL);
    *plain_tok_s = count[0] / secs[0];
    *hooked_tok_s = count[1] / secs[1];
}

/* Seconds for one eval of T positions on top of n_past cached ones (rewound
 * and repeated; median of reps): the cost of a speculative verification pass. */
static double time_pass(gpt2_context *ctx, const int32_t *ids, int n_past, int T, int reps) {
    double t[100];
    if (reps > 100) reps = 100;
    gpt2_context_reset(ctx);
    gpt2_context_eval(ctx, ids, n_past, NULL);
    for (int r = 0; r < reps; r++) {
        gpt2_context_rewind(ctx, n_past, NULL);
        double t0 = cli_now();
        gpt2_context_eval(ctx, ids + n_past, T, NULL);
        t[r] = cli_now() - t0;
    }
    return median(t, reps);
}

static int usage(void) {
    fputs("usage: gptscope bench [-m DIR [--quantize q8]] [--dtype f32|f16|bf16|q8] [--reps N] [--threads N]\n"
          "                      [--json]\n"
          "  Without -m: a GPT-2-124M-shaped model with random weights, built in memory\n"
          "  (q8: drawn in F32, then quantized to 8 bits as --quantize q8 does).\n"
          "  Reports prefill tok/s (128, 512), decode tok/s (128 after 32), time to first\n"
          "  token for 500, decode with every attention head hooked, peak RSS, and the\n"
          "  decode's implied weight bandwidth next to this machine's measured bandwidth,\n"
          "  and the cost of one eval of T = 2..16 positions (a speculative verification\n"
          "  pass) in single-token evals. Models with fewer than 513 positions skip the\n"
          "  512-token figures.\n",
          stderr);
    return EXIT_USAGE;
}

int cmd_bench(int argc, char **argv) {
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"dtype", required_argument, 0, 'd'},
                                         {"reps", required_argument, 0, 'r'},
                                         {"threads", required_argument, 0, 't'},
                                         {"json", no_argument, 0, 'j'},
                                         {"quantize", required_argument, 0, CLI_OPT_QUANTIZE},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *mdir = NULL, *quantize = NULL;
    gpt2_dtype dtype = GPT2_DTYPE_F32;
    long reps = 3, n_threads = 0;
    int json = 0, c;
    while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': mdir = optarg; break;
        case 'd':
            if (!strcmp(optarg, "f32")) dtype = GPT2_DTYPE_F32;
            else if (!strcmp(optarg, "f16")) dtype = GPT2_DTYPE_F16;
            else if (!strcmp(optarg, "bf16")) dtype = GPT2_DTYPE_BF16;
            else if (!strcmp(optarg, "q8")) dtype = GPT2_DTYPE_Q8;
            else {
                cli_error("--dtype: expected f32, f16, bf16 or q8, found '%s'", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'r': if (!cli_parse_int("--reps", optarg, 1, 100, &reps)) return EXIT_USAGE; break;
        case 't': if (!cli_parse_int("--threads", optarg, 1, 256, &n_threads)) return EXIT_USAGE; break;
        case 'j': json = 1; break;
        case CLI_OPT_QUANTIZE: if (!cli_quantize_option(optarg, &quantize)) return EXIT_USAGE; break;
        default: return usage();
        }
    }
    if (optind != argc) return usage();
    if (quantize && !mdir) {
        cli_error("--quantize needs -m DIR; the random model takes --dtype q8");
        return EXIT_USAGE;
    }
    gpt2_model *m = NULL;
    gpt2_error err;
    double load_s = -1;
    if (mdir) {
        double t0 = cli_now();
        m = cli_load_model_as(mdir, quantize);
        load_s = cli_now() - t0;
        if (!m) return EXIT_ERR;
    } else {
        gpt2_config cfg = {.n_layer = 12, .n_head = 12, .n_embd = 768, .n_ctx = 1024, .n_vocab = 50257,
                           .ln_eps = 1e-5f};
        if (gpt2_model_new_random(cfg, dtype, 1234, &m, &err) != GPT2_OK) {
            cli_error("%s", err.msg);
            return EXIT_ERR;
        }
    }
    const gpt2_config *cfg = gpt2_model_config(m);
    gpt2_context *ctx = NULL;
    gpt2_context_params cp = gpt2_context_default_params();
    cp.n_threads = (int)n_threads;
    if (cfg->n_ctx < 160 || gpt2_context_new(m, cp, &ctx, &err) != GPT2_OK) {
        if (cfg->n_ctx < 160) cli_error("bench needs a model with at least 160 positions; %s has %d", gpt2_model_name(m), cfg->n_ctx);
        else cli_error("%s", err.msg);
        gpt2_model_free(m);
        return EXIT_ERR;
    }
    int32_t ids[512];
    uint64_t s = 42;
    for (int i = 0; i < 512; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % (uint64_t)cfg->n_vocab);
    }
    const int R = (int)reps, V = cfg->n_vocab, threads = gpt2_context_n_threads(ctx);
    const int long_ok = cfg->n_ctx >= 513, n_dec = 128;
    /* The machine's bandwidth is measured right before each decode run, and
     * the ratio taken per run: on a shared host the bandwidth itself comes
     * and goes (31-57 GB/s seen here), so only neighbouring measurements
     * make a ratio that holds. */
    double machine_4k_gbs = measure_in_child((size_t)1 << 30, threads, 5, 0);
    double bw[100], ratio[100];
    const size_t wbytes = gpt2_model_weight_bytes(m);

    double p128[100], p512[100] = {0}, dec[100], ttft[100] = {0}, hooked[100], hook_ratio[100];
    time_prefill(ctx, ids, 32); /* warm-up: page in weights, spin up threads */
    for (int r = 0; r < R; r++) {
        p128[r] = 128 / time_prefill(ctx, ids, 128);
        if (long_ok) {
            p512[r] = 512 / time_prefill(ctx, ids, 512);
            gpt2_context_reset(ctx);
            double t0 = cli_now();
            gpt2_context_eval(ctx, ids, 500, NULL);
            argmax(gpt2_context_logits(ctx), V);
            ttft[r] = (cli_now() - t0) * 1e3;
        }
    }
    /* Decode after each bandwidth probe and a short untimed decode (the
     * probe's freed gigabyte disturbs the memory system for a moment). The
     * hooks' cost: plain and hooked blocks of 16 tokens in turns within one
     * decode, so that both see the same machine (separate runs here differ
     * by more than the cost). */
    float sink = 0;
    gpt2_hooks hooks = {.user_data = &sink, .want_attention = want_every_head, .on_attention = sink_attention};
    for (int r = 0; r < R; r++) {
        bw[r] = measure_in_child((size_t)1 << 30, threads, 3, 1);
        time_decode(ctx, ids, 32, 32, V);
        dec[r] = time_decode(ctx, ids, 32, n_dec, V);
        ratio[r] = bw[r] > 0 ? (double)wbytes * dec[r] / 1e9 / bw[r] : 0.0;
        double plain_tok_s;
        time_decode_hooked(ctx, ids, 32, n_dec, V, &hooks, r % 2, &plain_tok_s, &hooked[r]);
        hook_ratio[r] = hooked[r] / plain_tok_s;
    }
    /* verification passes: T positions after 32, as speculative decoding runs them */
    enum { N_PASS = 5 };
    static const int pass_t[N_PASS] = {1, 2, 4, 8, 16};
    double pass_ms[N_PASS];
    for (int i = 0; i < N_PASS; i++) pass_ms[i] = time_pass(ctx, ids, 32, pass_t[i], 10 * R) * 1e3;
    const double mp128 = median(p128, R), mp512 = median(p512, R), mdec = median(dec, R),
                 mttft = median(ttft, R), mhooked = median(hooked, R), mhook_ratio = median(hook_ratio, R);
    const double decode_gbs = (double)wbytes * mdec / 1e9, machine_gbs = median(bw, R),
                 mratio = median(ratio, R);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double rss_mb = (double)ru.ru_maxrss / 1024.0;
    if (json) {
        char p512s[32] = "null", ttfts[32] = "null"; /* not measured below 513 positions */
        if (long_ok) {
            snprintf(p512s, sizeof p512s, "%.1f", mp512);
            snprintf(ttfts, sizeof ttfts, "%.1f", mttft);
        }
        printf("{\"model\": \"%s\", \"dtype\": \"%s\", \"threads\": %d, \"reps\": %d, \"load_s\": %.4f, "
               "\"prefill_128_tok_s\": %.1f, \"prefill_512_tok_s\": %s, \"decode_tok_s\": %.2f, "
               "\"decode_hooked_tok_s\": %.2f, \"decode_hooked_ratio\": %.3f, \"ttft_500_ms\": %s, \"peak_rss_mb\": %.1f, "
               "\"weight_bytes_per_token\": %zu, \"decode_read_gb_s\": %.2f, \"machine_read_gb_s\": %.2f, "
               "\"machine_read_4k_gb_s\": %.2f, \"decode_bandwidth_ratio\": %.3f, "
               "\"pass_ms\": {\"1\": %.3f, \"2\": %.3f, \"4\": %.3f, \"8\": %.3f, \"16\": %.3f}}\n",
               mdir ? gpt2_model_name(m) : "random-124M", gpt2_dtype_name(gpt2_model_dtype(m)), threads, R,
               load_s, mp128, p512s, mdec, mhooked, mhook_ratio, ttfts, rss_mb, wbytes, decode_gbs, machine_gbs,
               machine_4k_gbs, mratio, pass_ms[0], pass_ms[1], pass_ms[2], pass_ms[3],
               pass_ms[4]);
    } else {
        printf("model        %s (%s, %d layers, %d embd, %d ctx), %d threads, median of %d\n",
               mdir ? gpt2_model_name(m) : "random GPT-2 124M shape", gpt2_dtype_name(gpt2_model_dtype(m)),
               cfg->n_layer, cfg->n_embd, cfg->n_ctx, threads, R);
        if (load_s >= 0) printf("load         %.3f s\n", load_s);
        printf("prefill 128  %.1f tok/s\n", mp128);
        if (long_ok) printf("prefill 512  %.1f tok/s\n", mp512);
        printf("decode       %.2f tok/s (%d tokens after 32)\n", mdec, n_dec);
        printf("decode+hooks %.2f tok/s (every layer and head observed: %+.1f%% against plain blocks in turn)\n",
               mhooked, 100.0 * (mhook_ratio - 1));
        if (long_ok) printf("ttft 500     %.1f ms\n", mttft);
        printf("peak RSS     %.1f MB\n", rss_mb);
        printf("weights      %.1f MB read per decoded token -> %.2f GB/s\n", (double)wbytes / 1e6, decode_gbs);
        printf("machine      %.2f GB/s read bandwidth (%d threads, huge pages; %.2f GB/s on 4 KiB pages)\n",
               machine_gbs, threads, machine_4k_gbs);
        printf("ratio        decode reads weights at %.0f%% of the machine's bandwidth (median of the runs'\n"
               "             ratios, each against the bandwidth measured just before it)\n",
               100.0 * mratio);
        printf("pass         one eval of T positions after 32, in single-token evals:");
        for (int i = 1; i < N_PASS; i++) printf(" T=%d %.2f", pass_t[i], pass_ms[i] / pass_ms[0]);
        printf(" (T=1: %.3f ms)\n", pass_ms[0]);
    }
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    return EXIT_OK;
}
