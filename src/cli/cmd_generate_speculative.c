/* cmd_generate_speculative.c — `gptscope generate --draft DIR`: speculative sampling,
 * and with --stats its acceptance rate and speed against target-only decoding. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmd_generate.h"

/* Target-only decoding of n tokens after the prompt with gpt2_sampler (eot
 * ignored, so the count matches): the baseline of --stats. *t_eval gets the
 * mean seconds of one single-token target eval. Returns seconds, or -1. */
static double time_target_only(gpt2_context *ctx, const int32_t *ids, size_t n_ids, long n,
                               gpt2_sampler_params sp, double *t_eval) {
    const gpt2_config *cfg = gpt2_model_config(gpt2_context_model(ctx));
    gpt2_sampler *smp = NULL;
    gpt2_error err;
    gpt2_status st = gpt2_sampler_new(sp, cfg->n_vocab, &smp, &err);
    int32_t *hist = malloc((n_ids + (size_t)n + 1) * sizeof *hist);
    double t = -1.0, t_ev = 0.0;
    if (st != GPT2_OK || !hist) goto out;
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

/* What a speculative run holds besides the target (ctx) and result. */
typedef struct {
    gpt2_context *dctx;
    gpt2_speculative *sd;
    volatile sig_atomic_t *stop;
} spec_state;

/* The draft model (r->dm) and its context, the decoder over both, Ctrl-C watched. */
static int spec_open(const generate_opts *o, gpt2_context *ctx, size_t n_ids, generate_result *r, spec_state *s) {
    if (!(r->dm = cli_load_model(o->draft_dir))) return EXIT_ERR;
    /* The draft runs on the calling thread alone: a small model gains little
     * from threads, and a second pool's spinning workers would compete with
     * the target's for the cores. */
    if (!(s->dctx = cli_context_new(r->dm, 1))) return EXIT_ERR;
    if ((long)n_ids + o->n_new > gpt2_context_n_ctx(s->dctx)) {
        cli_error("the prompt is %zu tokens; with -n %ld that exceeds the draft model's context window of %d tokens",
                  n_ids, o->n_new, gpt2_context_n_ctx(s->dctx));
        return EXIT_ERR;
    }
    gpt2_speculative_params spp = gpt2_speculative_default_params();
    spp.k = (int)o->draft_k;
    spp.sampling = o->sp;
    spp.cancel = cli_interrupted;
    /* the decoder forwards the context's hooks: this one stops a long prompt mid-batch */
    s->stop = cli_watch_interrupt(ctx, NULL);
    gpt2_error err;
    if (gpt2_speculative_new(ctx, s->dctx, spp, &s->sd, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return EXIT_ERR;
    }
    return EXIT_OK;
}

/* Writes tokens until n_new, <|endoftext|> (unless --no-stop), an error or
 * Ctrl-C inside a step (GPT2_CANCELLED). */
static gpt2_status spec_stream(const generate_opts *o, spec_state *s, const int32_t *ids, size_t n_ids,
                               generate_out *out, gpt2_error *err) {
    const int32_t eot = gpt2_tokenizer_eot(out->tok);
    gpt2_status st;
    if (o->n_new == 0) return GPT2_OK;
    if ((st = gpt2_speculative_start(s->sd, ids, (int)n_ids, err)) != GPT2_OK) return st;
    for (int done = 0; !done;) {
        gpt2_spec_token toks[GPT2_SPEC_MAX_K + 1];
        int n_out;
        if ((st = gpt2_speculative_step(s->sd, toks, &n_out, err)) != GPT2_OK) return st;
        for (int i = 0; i < n_out && !done; i++) {
            if (toks[i].id == eot && !o->no_stop) {
                done = 1;
            } else {
                generate_out_token(out, toks[i].id);
                done = out->n >= o->n_new;
            }
        }
        cli_stdout_flush();
    }
    return GPT2_OK;
}

/* --stats: the same tokens again target-only, the draft's and a verification
 * pass's cost, and the speedups they predict (r->stats). */
static int spec_measure(const generate_opts *o, gpt2_context *ctx, spec_state *s, const int32_t *ids, size_t n_ids,
                        generate_result *r) {
    generate_spec_stats *x = &r->stats;
    const int k = (int)o->draft_k;
    x->s = gpt2_speculative_get_stats(s->sd);
    x->k = k;
    int n_seq;
    const int32_t *seq = gpt2_speculative_tokens(s->sd, &n_seq);
    int32_t *seq_copy = malloc((size_t)n_seq * sizeof *seq_copy);
    if (!seq_copy) {
        cli_error("out of memory");
        return EXIT_ERR;
    }
    memcpy(seq_copy, seq, (size_t)n_seq * sizeof *seq);
    x->t_base = time_target_only(ctx, ids, n_ids, r->produced, o->sp, &x->t_target_tok);
    x->t_draft_tok = time_decode(s->dctx, seq_copy, (int)n_ids, n_seq);
    x->t_pass = time_pass(ctx, seq_copy, (int)n_ids, n_seq, k + 1);
    free(seq_copy);
    x->r = gpt2_speculative_acceptance_rate(&x->s, k);
    x->theory = x->t_draft_tok > 0.0 || x->t_target_tok > 0.0
                    ? x->r * (k + 1) * x->t_target_tok / (k * x->t_draft_tok + x->t_target_tok)
                    : 0.0;
    /* the same with what a pass over K + 1 positions really costs */
    x->with_pass = x->t_pass > 0.0 ? x->r * (k + 1) * x->t_target_tok / (k * x->t_draft_tok + x->t_pass) : 0.0;
    r->has_stats = 1;
    return EXIT_OK;
}

int generate_speculative(const generate_opts *o, gpt2_context *ctx, const int32_t *ids, size_t n_ids,
                         generate_result *r) {
    spec_state s = {0};
    int rc = spec_open(o, ctx, n_ids, r, &s);
    if (rc == EXIT_OK) {
        generate_out out = {.tok = gpt2_model_tokenizer(r->m), .ids = o->ids};
        gpt2_error err;
        double t0 = cli_now();
        gpt2_status st = spec_stream(o, &s, ids, n_ids, &out, &err);
        r->stats.t_spec = cli_now() - t0;
        r->produced = out.n;
        if (st == GPT2_OK) {
            generate_out_end(&out);
            if (o->stats && out.n > 0) rc = spec_measure(o, ctx, &s, ids, n_ids, r);
            r->end = *s.stop ? GENERATE_INTERRUPTED : GENERATE_DONE;
        } else {
            generate_out_flush(&out);
            cli_stdout_flush();
            r->end = GENERATE_CANCELLED_STEP;
            if (st != GPT2_CANCELLED) {
                cli_error("%s", err.msg);
                rc = EXIT_ERR;
            }
        }
        r->line_open = out.line_open;
    }
    gpt2_speculative_free(s.sd);
    gpt2_context_free(s.dctx);
    return rc;
}
