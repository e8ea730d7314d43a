/* cmd_generate.c — `gptscope generate`: stream a continuation of a prompt. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmd_generate.h"

static const char usage_text[] =
    "usage: gptscope generate [-m DIR] -p PROMPT [-n N] [--temperature T] [--top-k K]\n"
    "                         [--top-p P] [--min-p P] [--repeat-penalty R] [--repeat-last-n N]\n"
    "                         [--seed S] [--ids] [--no-stop] [--special] [--quantize q8|q4]\n"
    "                         [--threads N] [--ablate L.H,...] [-v]\n"
    "                         [--draft DIR [--draft-k K] [--stats]]\n"
    "  Streams the continuation (not the prompt) to stdout. PROMPT '-' reads stdin.\n"
    "  -n N               tokens to generate (default 128)\n"
    "  --temperature T    0 = greedy (default 0.8)\n"
    "  --top-k K          keep the K most likely tokens, 0 = off (default 40)\n"
    "  --top-p P          nucleus: smallest set with mass >= P, 1 = off (default 0.95)\n"
    "  --min-p P          drop tokens below P x the top probability, 0 = off (default 0.05)\n"
    "  --repeat-penalty R CTRL-style penalty on recent tokens (default 1 = off)\n"
    "  --repeat-last-n N  how many recent tokens the penalty sees (default 64)\n"
    "  --seed S           RNG seed (default: random; -v prints it)\n"
    "  --ids              print generated token ids instead of text\n"
    "  --no-stop          keep going after an end token (<|endoftext|>, the model's eos)\n"
    "  --special          \"<|endoftext|>\" in the prompt is the special token\n"
    "  --quantize q8|q4   run the -m model with 8- or 4-bit weights (converted at load)\n"
    "  --threads N        worker threads (default: one per CPU; the output does not depend\n"
    "                     on it; with another program busy on the cores, fewer can be faster)\n"
    "  --ablate L.H,...   zero-ablate these heads of the -m model (L.* a whole layer)\n"
    "  --draft DIR        speculative sampling: the model in DIR (same tokenizer) drafts,\n"
    "                     the -m model checks; same output distribution, fewer target passes\n"
    "  --draft-k K        draft tokens per iteration, 1..16 (default 4)\n"
    "  --stats            with --draft: print acceptance rate, tokens per target pass and the\n"
    "                     speedup over target-only decoding (which it also runs) to stderr\n";

static int generate_parse(int argc, char **argv, generate_opts *o) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', generate_opts, model)},
        {CLI_STR("prompt", 'p', generate_opts, prompt)},
        {CLI_LONG("n-tokens", 'n', generate_opts, n_new, 0, 1 << 20)},
        CLI_SAMPLING_ROWS(generate_opts, sp, seeded),
        {CLI_FLAG("ids", 0, generate_opts, ids)},
        {CLI_FLAG("no-stop", 0, generate_opts, no_stop)},
        {CLI_FLAG("special", 0, generate_opts, special)},
        {CLI_STR("draft", 0, generate_opts, draft_dir)},
        {CLI_LONG("draft-k", 0, generate_opts, draft_k, 1, GPT2_SPEC_MAX_K),
         .given = CLI_GIVEN(generate_opts, draft_k_given)},
        {CLI_FLAG("stats", 0, generate_opts, stats)},
        {CLI_FN("quantize", 0, generate_opts, quantize, const char *, cli_opt_quantize)},
        {CLI_INT("threads", 0, generate_opts, n_threads, 1, 256)},
        {CLI_FLAG("verbose", 'v', generate_opts, verbose)},
        CLI_ABLATE_ROW(generate_opts, ablate),
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc == CLI_PARSED &&
        (cli_positional(usage_text, "generate", argc, argv, 0, "") != EXIT_OK ||
         cli_required(usage_text, "generate", "-p PROMPT (or -p - to read it from stdin)", !!o->prompt, NULL) !=
             EXIT_OK))
        rc = EXIT_USAGE;
    if (rc == CLI_PARSED && !o->draft_dir && (o->stats || o->draft_k_given)) {
        cli_error("--draft-k and --stats need --draft DIR");
        rc = EXIT_USAGE;
    }
    if (rc == CLI_PARSED && !o->seeded) o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    return rc;
}

static void put(generate_out *o, size_t n) {
    fwrite(o->buf, 1, n, stdout);
    if (n) o->line_open = o->buf[n - 1] != '\n';
}

void generate_out_token(generate_out *o, int32_t id) {
    if (o->ids) {
        printf(o->n ? " %d" : "%d", id);
        o->line_open = 1;
    } else {
        size_t bl;
        const char *b = gpt2_tokenizer_token_bytes(o->tok, id, &bl);
        for (size_t at = 0; at < bl; at += 256) { /* chunks keep buf bounded */
            size_t k = bl - at < 256 ? bl - at : 256;
            put(o, gpt2_utf8_stream_push(&o->us, b + at, k, o->buf));
        }
    }
    o->n++;
}

void generate_out_flush(generate_out *o) {
    if (!o->ids) put(o, gpt2_utf8_stream_flush(&o->us, o->buf));
}

void generate_out_end(generate_out *o) {
    generate_out_flush(o);
    if (o->ids || isatty(STDOUT_FILENO)) putchar('\n'), o->line_open = 0;
    cli_stdout_flush();
}

/* The prompt's ids, checked against the window; 0 after printing why not. */
static int prompt_ids(const generate_opts *o, const gpt2_model *m, const char *text, size_t len, int32_t **ids,
                      size_t *n) {
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    const int32_t eot = gpt2_tokenizer_eot(tok);
    if (!cli_encode(tok, text, len, (o->special ? GPT2_ENCODE_SPECIAL : 0) | GPT2_ENCODE_BOS, ids, n)) return 0;
    if (*n == 0) { /* GPT-2 conditions unconditional samples on <|endoftext|> */
        if (eot < 0) {
            cli_error("empty prompt, and the vocabulary has no <|endoftext|> to start from");
            return 0;
        }
        free(*ids);
        if (!(*ids = malloc(sizeof **ids))) return 0;
        (*ids)[0] = eot;
        *n = 1;
    }
    const int n_ctx = gpt2_model_config(m)->n_ctx;
    if ((long)*n + o->n_new > n_ctx) {
        cli_error("the prompt is %zu tokens; with -n %ld that exceeds the context window of %d tokens", *n, o->n_new,
                  n_ctx);
        return 0;
    }
    return 1;
}

/* The prompt (hist[0, n_hist)), then up to n_new sampled tokens, one eval
 * each, written as they come; hist has room for them. */
static int sample_stream(const generate_opts *o, gpt2_context *ctx, gpt2_sampler *smp, int32_t *hist, size_t n_hist,
                         generate_result *r) {
    volatile sig_atomic_t *stop = cli_watch_interrupt(ctx, NULL);
    generate_out out = {.tok = gpt2_model_tokenizer(r->m), .ids = o->ids};
    const int32_t eot = gpt2_tokenizer_eot(out.tok);
    gpt2_error err;
    gpt2_status st = gpt2_context_eval(ctx, hist, (int)n_hist, &err);
    if (st == GPT2_CANCELLED) r->end = GENERATE_CANCELLED_PROMPT;
    else if (st != GPT2_OK) cli_error("%s", err.msg);
    if (st != GPT2_OK) return st == GPT2_CANCELLED ? EXIT_OK : EXIT_ERR;
    for (long i = 0; i < o->n_new && !*stop; i++) {
        int32_t id = gpt2_sampler_sample(smp, gpt2_context_logits(ctx), hist, n_hist);
        if ((id == eot || gpt2_model_is_end(r->m, id)) && !o->no_stop) break;
        hist[n_hist++] = id;
        generate_out_token(&out, id);
        if (cli_stdout_flush() != 0) return EXIT_ERR; /* nowhere to write: main says why */
        if (i + 1 < o->n_new && (st = gpt2_context_eval(ctx, &id, 1, &err)) != GPT2_OK) {
            if (st == GPT2_CANCELLED) break; /* Ctrl-C: the token was written */
            cli_error("%s", err.msg);
            return EXIT_ERR;
        }
    }
    generate_out_end(&out);
    r->produced = out.n;
    r->line_open = out.line_open;
    r->end = *stop ? GENERATE_INTERRUPTED : GENERATE_DONE;
    return EXIT_OK;
}

/* Plain sampling (gpt2_sampler), without --draft. */
static int generate_plain(const generate_opts *o, gpt2_context *ctx, const int32_t *ids, size_t n_ids,
                          generate_result *r) {
    gpt2_sampler *smp = NULL;
    gpt2_error err;
    gpt2_status st = gpt2_sampler_new(o->sp, gpt2_model_config(r->m)->n_vocab, &smp, &err);
    int32_t *hist = malloc(((size_t)n_ids + (size_t)o->n_new) * sizeof *hist);
    int rc = EXIT_ERR;
    if (st != GPT2_OK)
        cli_error("%s", err.msg);
    else if (!hist)
        cli_error("out of memory");
    else {
        memcpy(hist, ids, n_ids * sizeof *hist);
        rc = sample_stream(o, ctx, smp, hist, n_ids, r);
    }
    free(hist);
    gpt2_sampler_free(smp);
    return rc;
}

static int generate_run(const generate_opts *o, generate_result *r) {
    if (o->verbose) fprintf(stderr, "seed %llu\n", (unsigned long long)o->sp.seed);
    r->n_new = o->n_new;
    const int from_stdin = strcmp(o->prompt, "-") == 0;
    size_t plen;
    char *text = from_stdin ? cli_read_all(stdin, NULL, CLI_PROMPT_MAX, &plen) : strdup(o->prompt);
    if (!text) return EXIT_ERR;
    if (!from_stdin) plen = strlen(text);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    gpt2_context *ctx = NULL;
    int rc = EXIT_ERR;
    if ((r->m = cli_load_model_as(cli_model_dir(o->model), o->quantize)) && o->verbose)
        fprintf(stderr, "model %s: %s\n", cli_show(gpt2_model_name(r->m)), cli_show(gpt2_model_source(r->m)));
    if (r->m && prompt_ids(o, r->m, text, plen, &ids, &n_ids) && (ctx = cli_context_new(r->m, o->n_threads)) &&
        cli_context_ablate(ctx, o->ablate)) {
        r->n_prompt = n_ids;
        rc = o->draft_dir ? generate_speculative(o, ctx, ids, n_ids, r) : generate_plain(o, ctx, ids, n_ids, r);
    }
    cli_stdout_flush();
    free(ids);
    free(text);
    gpt2_context_free(ctx);
    return rc;
}

static void print_spec_stats(const generate_result *res) {
    const generate_spec_stats *x = &res->stats;
    const gpt2_speculative_stats *s = &x->s;
    const long produced = res->produced;
    const double t_target_tok = x->t_target_tok, t_draft_tok = x->t_draft_tok, t_pass = x->t_pass;
    const double t_spec = x->t_spec, t_base = x->t_base;
    fprintf(stderr,
            "speculative: target %s, draft %s, K = %d\n"
            "  iterations %ld, drafted %ld, accepted %ld (mean %.2f per iteration), produced %ld (%ld kept)\n"
            "  r = %.3f (tokens per iteration / (K + 1)), tokens per target pass %.2f\n"
            "  t_target %.3f ms/token, t_draft %.3f ms/token (single-token forward); "
            "one target pass over K + 1 positions %.3f ms (%.2f t_target)\n"
            "  speculative %ld tokens in %.3f s (%.1f tok/s); target-only %ld tokens in %.3f s (%.1f tok/s)\n"
            "  speedup measured %.2fx, theoretical r(K+1)t_target/(K t_draft + t_target) = %.2fx,\n"
            "  or %.2fx with the measured pass in place of t_target\n"
            "  per iteration %.3f ms: drafting %.3f, target pass %.3f, accept/filter/rewind %.3f\n",
            gpt2_model_name(res->m), gpt2_model_name(res->dm), x->k, s->iterations, s->drafted, s->accepted,
            s->iterations ? (double)s->accepted / s->iterations : 0.0, s->produced, produced, x->r,
            s->target_passes ? (double)s->produced / s->target_passes : 0.0, t_target_tok * 1e3, t_draft_tok * 1e3,
            t_pass * 1e3, t_target_tok > 0 ? t_pass / t_target_tok : 0.0, produced, t_spec, produced / t_spec,
            produced, t_base, t_base > 0 ? produced / t_base : 0.0, t_base > 0 ? t_base / t_spec : 0.0, x->theory,
            x->with_pass, s->iterations ? s->seconds / s->iterations * 1e3 : 0.0,
            s->iterations ? s->draft_seconds / s->iterations * 1e3 : 0.0,
            s->iterations ? s->target_seconds / s->iterations * 1e3 : 0.0,
            s->iterations ? (s->seconds - s->draft_seconds - s->target_seconds) / s->iterations * 1e3 : 0.0);
}

/* The streamed text is out already: --stats, then how it ended. */
static int generate_report(const generate_result *r) {
    /* the text is exact (no newline added off a terminal); a report on stderr
       that may share its screen or pipe starts a line of its own */
    if (r->line_open && (r->has_stats || r->end != GENERATE_DONE)) fputc('\n', stderr);
    if (r->has_stats) print_spec_stats(r);
    switch (r->end) {
    case GENERATE_DONE: return EXIT_OK;
    case GENERATE_INTERRUPTED:
        fprintf(stderr, "gptscope: generate interrupted after %ld of %ld tokens\n", r->produced, r->n_new);
        break;
    case GENERATE_CANCELLED_PROMPT:
        fprintf(stderr, "gptscope: generate interrupted while reading the %zu-token prompt; nothing generated\n",
                r->n_prompt);
        break;
    case GENERATE_CANCELLED_STEP:
        fprintf(stderr, "gptscope: generate interrupted after %ld of %ld tokens%s\n", r->produced, r->n_new,
                r->produced ? "" : " (while reading the prompt)");
        break;
    }
    return 130;
}

int cmd_generate(int argc, char **argv) {
    generate_opts o = {.n_new = 128, .draft_k = 4, .sp = gpt2_sampler_default_params()};
    generate_result r = {0};
    int rc = generate_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if ((rc = generate_run(&o, &r)) == EXIT_OK) rc = generate_report(&r);
    gpt2_model_free(r.dm);
    gpt2_model_free(r.m);
    return rc;
}
