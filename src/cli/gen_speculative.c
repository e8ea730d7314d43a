/* gen_speculative.c — `gptscope generate --draft DIR`: speculative sampling,
 * and with --stats its acceptance rate and speed against target-only decoding. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

static volatile sig_atomic_t *g_stop;
/* Target-only decoding of n tokens after the prompt with gpt2_sampler (eot
 * ignored, so the count matches): the baseline of --stats. *t_eval gets the
 * mean seconds of one single-token target eval. Returns seconds, or -1. */
static double time_target_only(gpt2_context *ctx, const int32_t *ids, size_t n_ids, long n,
                               gpt2_sampler_params sp, double *t_eval) {
    const gpt2_config *cfg = gpt2_model_config(gpt2_context_model(ctx));
    gpt2_sampler *smp = gpt2_sampler_new(sp, cfg->n_vocab);
    int32_t *hist = malloc((n_ids + (size_t)n + 1) * sizeof *hist);
    double t = -1.0, t_ev = 0.0;
    gpt2_error err;
    if (!smp || !hist) goto out;
    memcpy(hist, ids, n_ids * sizeof *hist);
    size_t n_hist = n_ids;
    gpt2_context_reset(ctx);
    double t0 = cli_now();
    if (gpt2_context_eval(ctx, ids, (int)n_ids, &err) != GPT2_OK) goto out;
    for (long i = 0; i < n; i++) {
        int32_t id = gpt2_sampler_sample(smp, gpt2_context_logits(ctx), hist, n_hist);
        hist[n_hist++] = id;
        if (i + 1 < n) {
            double te = cli_now();
            if (gpt2_context_eval(ctx, &id, 1, &err) != GPT2_OK) goto out;
            t_ev += cli_now() - te;
        }
    }
    t = cli_now() - t0;
    *t_eval = n > 1 ? t_ev / (double)(n - 1) : 0.0;
out:
    free(hist);
    gpt2_sampler_free(smp);
    return t;
}

/* Mean seconds of one single-token eval of ctx over seq[n_prompt - 1 ..): the prompt
 * prefilled untimed, then each token timed. */
static double time_decode(gpt2_context *ctx, const int32_t *seq, int n_prompt, int n_seq) {
    gpt2_error err;
    gpt2_context_reset(ctx);
    if (gpt2_context_eval(ctx, seq, n_prompt - 1, &err) != GPT2_OK) return -1.0;
    double t = 0.0;
    int cnt = 0;
    for (int i = n_prompt - 1; i < n_seq - 1; i++) {
        double t0 = cli_now();
        if (gpt2_context_eval(ctx, seq + i, 1, &err) != GPT2_OK) return -1.0;
        t += cli_now() - t0;
        cnt++;
    }
    return cnt ? t / cnt : 0.0;
}

/* Mean seconds of one eval of n positions (a verification pass) on top of
 * seq[0..n_prompt - 1), over a few repetitions. */
static double time_pass(gpt2_context *ctx, const int32_t *seq, int n_prompt, int n_seq, int n) {
    gpt2_error err;
    if (n_prompt - 1 + n > n_seq || n_prompt - 1 + n > gpt2_context_n_ctx(ctx)) return -1.0;
    gpt2_context_reset(ctx);
    if (gpt2_context_eval(ctx, seq, n_prompt - 1, &err) != GPT2_OK) return -1.0;
    enum { REPS = 20 };
    double t0 = cli_now();
    for (int r = 0; r < REPS; r++) {
        if (gpt2_context_rewind(ctx, n_prompt - 1, &err) != GPT2_OK ||
            gpt2_context_eval(ctx, seq + n_prompt - 1, n, &err) != GPT2_OK)
            return -1.0;
    }
    return (cli_now() - t0) / REPS;
}

int cli_generate_speculative(gpt2_model *m, gpt2_context *ctx, const char *draft_dir, int k,
                             int show_stats, const int32_t *ids, size_t n_ids, long n_new,
                             gpt2_sampler_params sp, int print_ids, int stop_at_eot) {
    int rc = EXIT_ERR;
    gpt2_model *dm = cli_load_model(draft_dir);
    gpt2_context *dctx = NULL;
    gpt2_speculative *sd = NULL;
    gpt2_error err;
    if (!dm) return EXIT_ERR;
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    const int32_t eot = gpt2_tokenizer_eot(tok);
    /* The draft runs on the calling thread alone: a small model gains little
     * from threads, and a second pool's spinning workers would compete with
     * the target's for the cores. */
    gpt2_context_params dcp = gpt2_context_default_params();
    dcp.n_threads = 1;
    if (gpt2_context_new(dm, dcp, &dctx, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        goto out;
    }
    if ((long)n_ids + n_new > gpt2_context_n_ctx(dctx)) {
        cli_error("the prompt is %zu tokens; with -n %ld that exceeds the draft model's context window of %d tokens",
                  n_ids, n_new, gpt2_context_n_ctx(dctx));
        goto out;
    }
    g_stop = cli_interrupt_flag();
    gpt2_speculative_params spp = gpt2_speculative_default_params();
    spp.k = k;
    spp.sampling = sp;
    spp.cancel = cli_interrupted;
    /* the decoder forwards the context's hooks: this one stops a long prompt mid-batch */
    gpt2_context_set_hooks(ctx, &(gpt2_hooks){.interrupt = cli_interrupted});
    if (gpt2_speculative_new(ctx, dctx, spp, &sd, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        goto out;
    }
    double t0 = cli_now();
    gpt2_status st = GPT2_OK;
    long produced = 0;
    gpt2_utf8_stream us = {0};
    char buf[3 * (256 + 4) + 16];
    if (n_new > 0 && (st = gpt2_speculative_start(sd, ids, (int)n_ids, &err)) != GPT2_OK) goto fail;
    int done = n_new == 0;
    while (!done) {
        gpt2_spec_token toks[GPT2_SPEC_MAX_K + 1];
        int n_out;
        if ((st = gpt2_speculative_step(sd, toks, &n_out, &err)) != GPT2_OK) goto fail;
        for (int i = 0; i < n_out && !done; i++) {
            int32_t id = toks[i].id;
            if (id == eot && stop_at_eot) {
                done = 1;
                break;
            }
            if (print_ids) {
                printf(produced ? " %d" : "%d", id);
            } else {
                size_t bl;
                const char *b = gpt2_tokenizer_token_bytes(tok, id, &bl);
                for (size_t o = 0; o < bl; o += 256) {
                    size_t c = bl - o < 256 ? bl - o : 256;
                    fwrite(buf, 1, gpt2_utf8_stream_push(&us, b + o, c, buf), stdout);
                }
            }
            if (++produced >= n_new) done = 1;
        }
        fflush(stdout);
    }
    double t_spec = cli_now() - t0;
    if (!print_ids) fwrite(buf, 1, gpt2_utf8_stream_flush(&us, buf), stdout);
    if (print_ids || isatty(STDOUT_FILENO)) putchar('\n');
    fflush(stdout);
    if (show_stats && produced > 0) {
        gpt2_speculative_stats s = gpt2_speculative_get_stats(sd);
        int n_seq;
        const int32_t *seq = gpt2_speculative_tokens(sd, &n_seq);
        int32_t *seq_copy = malloc((size_t)n_seq * sizeof *seq_copy);
        if (!seq_copy) {
            cli_error("out of memory");
            goto out;
        }
        memcpy(seq_copy, seq, (size_t)n_seq * sizeof *seq);
        double t_target_tok = 0.0;
        double t_base = time_target_only(ctx, ids, n_ids, produced, sp, &t_target_tok);
        double t_draft_tok = time_decode(dctx, seq_copy, (int)n_ids, n_seq);
        double t_pass = time_pass(ctx, seq_copy, (int)n_ids, n_seq, k + 1);
        free(seq_copy);
        double r = gpt2_speculative_acceptance_rate(&s, k);
        double theory = t_draft_tok > 0.0 || t_target_tok > 0.0
                            ? r * (k + 1) * t_target_tok / (k * t_draft_tok + t_target_tok)
                            : 0.0;
        /* the same with what a pass over K + 1 positions really costs */
        double with_pass = t_pass > 0.0 ? r * (k + 1) * t_target_tok / (k * t_draft_tok + t_pass) : 0.0;
        fprintf(stderr,
                "speculative: target %s, draft %s, K = %d\n"
                "  iterations %ld, drafted %ld, accepted %ld (mean %.2f per iteration), produced %ld\n"
                "  r = %.3f (tokens per iteration / (K + 1)), tokens per target pass %.2f\n"
                "  t_target %.3f ms/token, t_draft %.3f ms/token (single-token forward); "
                "one target pass over K + 1 positions %.3f ms (%.2f t_target)\n"
                "  speculative %ld tokens in %.3f s (%.1f tok/s); target-only %ld tokens in %.3f s (%.1f tok/s)\n"
                "  speedup measured %.2fx, theoretical r(K+1)t_target/(K t_draft + t_target) = %.2fx,\n"
                "  or %.2fx with the measured pass in place of t_target\n"
                "  per iteration %.3f ms: drafting %.3f, target pass %.3f, accept/filter/rewind %.3f\n",
                gpt2_model_name(m), gpt2_model_name(dm), k, s.iterations, s.drafted, s.accepted,
                s.iterations ? (double)s.accepted / s.iterations : 0.0, s.produced, r,
                s.target_passes ? (double)s.produced / s.target_passes : 0.0, t_target_tok * 1e3,
                t_draft_tok * 1e3, t_pass * 1e3, t_target_tok > 0 ? t_pass / t_target_tok : 0.0, produced, t_spec, produced / t_spec, produced, t_base,
                t_base > 0 ? produced / t_base : 0.0, t_base > 0 ? t_base / t_spec : 0.0, theory, with_pass,
                s.iterations ? s.seconds / s.iterations * 1e3 : 0.0,
                s.iterations ? s.draft_seconds / s.iterations * 1e3 : 0.0,
                s.iterations ? s.target_seconds / s.iterations * 1e3 : 0.0,
                s.iterations ? (s.seconds - s.draft_seconds - s.target_seconds) / s.iterations * 1e3 : 0.0);
    }
    rc = *g_stop ? 130 : EXIT_OK;
    if (*g_stop) fprintf(stderr, "gptscope: generate interrupted after %ld of %ld tokens\n", produced, n_new);
    goto out;
fail:
    if (!print_ids) fwrite(buf, 1, gpt2_utf8_stream_flush(&us, buf), stdout);
    fflush(stdout);
    if (st == GPT2_CANCELLED) {
        rc = 130;
        fprintf(stderr, "\ngptscope: generate interrupted after %ld of %ld tokens%s\n", produced, n_new,
                produced ? "" : " (while reading the prompt)");
    } else
        cli_error("%s", err.msg);
out:
    gpt2_speculative_free(sd);
    gpt2_context_free(dctx);
    gpt2_model_free(dm);
    return rc;
}
