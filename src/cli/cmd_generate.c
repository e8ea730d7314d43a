/* cmd_generate.c — `gptscope generate`: stream a continuation of a prompt. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope generate [-m DIR] -p PROMPT [-n N] [--temperature T] [--top-k K]\n"
    "                         [--top-p P] [--min-p P] [--repeat-penalty R] [--repeat-last-n N]\n"
    "                         [--seed S] [--ids] [--no-stop] [--special] [--quantize q8]\n"
    "                         [--threads N] [-v]\n"
    "                         [--draft DIR [--draft-k K] [--stats]]\n"
    "  Streams the continuation (not the prompt) to stdout. PROMPT '-' reads stdin.\n"
    "  -n N               tokens to generate (default 128)\n"
    "  --temperature T    0 = greedy (default 0.8)\n"
    "  --top-k K          keep the K most likely tokens, 0 = off (default 40)\n"
    "  --top-p P          nucleus: smallest set with mass >= P, 1 = off (default 0.95)\n"
    "  --min-p P          drop tokens below P x the top probability, 0 = off (default 0.05)\n"
    "  --repeat-penalty R CTRL-style penalty on recent tokens, (default 1 = off)\n"
    "  --repeat-last-n N  how many recent tokens the penalty sees (default 64)\n"
    "  --seed S           RNG seed (default: random; -v prints it)\n"
    "  --ids              print generated token ids instead of text\n"
    "  --no-stop          keep going after <|endoftext|> instead of stopping\n"
    "  --special          \"<|endoftext|>\" in the prompt is the special token\n"
    "  --quantize q8      run the -m model with 8-bit weights (converted at load)\n"
    "  --threads N        worker threads (default: one per CPU; the output does not depend\n"
    "                     on it; with another program busy on the cores, fewer can be faster)\n"
    "  --draft DIR        speculative sampling: the model in DIR (same tokenizer) drafts,\n"
    "                     the -m model checks; same output distribution, fewer target passes\n"
    "  --draft-k K        draft tokens per iteration, 1..16 (default 4)\n"
    "  --stats            with --draft: print acceptance rate, tokens per target pass and the\n"
    "                     speedup over target-only decoding (which it also runs) to stderr\n";

static volatile sig_atomic_t *g_stop;
int cmd_generate(int argc, char **argv) {
    enum { O_IDS = 256, O_NOSTOP, O_SPECIAL, O_DRAFT, O_DRAFT_K, O_STATS };
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"prompt", required_argument, 0, 'p'},
                                         {"n-tokens", required_argument, 0, 'n'},
                                         CLI_SAMPLING_OPTIONS,
                                         {"ids", no_argument, 0, O_IDS},
                                         {"no-stop", no_argument, 0, O_NOSTOP},
                                         {"special", no_argument, 0, O_SPECIAL},
                                         {"draft", required_argument, 0, O_DRAFT},
                                         {"draft-k", required_argument, 0, O_DRAFT_K},
                                         {"stats", no_argument, 0, O_STATS},
                                         {"quantize", required_argument, 0, CLI_OPT_QUANTIZE},
                                         {"threads", required_argument, 0, CLI_OPT_THREADS},
                                         {"verbose", no_argument, 0, 'v'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *mdir = NULL, *prompt = NULL, *draft_dir = NULL, *quantize = NULL;
    long n_new = 128, draft_k = 4;
    int show_stats = 0, draft_k_given = 0;
    int print_ids = 0, stop_at_eot = 1, flags = 0, verbose = 0, seeded = 0, n_threads = 0, c;
    gpt2_sampler_params sp = gpt2_sampler_default_params();
    while ((c = getopt_long(argc, argv, ":m:p:n:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'm': mdir = optarg; break;
        case 'p': prompt = optarg; break;
        case 'n': if (!cli_parse_int("-n", optarg, 0, 1 << 20, &n_new)) return EXIT_USAGE; break;
        case O_IDS: print_ids = 1; break;
        case O_NOSTOP: stop_at_eot = 0; break;
        case O_SPECIAL: flags |= GPT2_ENCODE_SPECIAL; break;
        case O_DRAFT: draft_dir = optarg; break;
        case O_DRAFT_K:
            if (!cli_parse_int("--draft-k", optarg, 1, GPT2_SPEC_MAX_K, &draft_k)) return EXIT_USAGE;
            draft_k_given = 1;
            break;
        case O_STATS: show_stats = 1; break;
        case CLI_OPT_QUANTIZE: if (!cli_quantize_option(optarg, &quantize)) return EXIT_USAGE; break;
        case CLI_OPT_THREADS: if (!cli_threads_option(optarg, &n_threads)) return EXIT_USAGE; break;
        case 'v': verbose = 1; break;
        case 'h': return cli_usage(1, usage_text);
        default: {
            int r = cli_sampling_option(c, optarg, &sp, &seeded);
            if (r < 0) return EXIT_USAGE;
            if (r == 0) return cli_option_error(c, argv, usage_text);
        }
        }
    }
    int rc = cli_positional(usage_text, "generate", argc, argv, 0, "");
    if (rc == EXIT_OK) rc = cli_required(usage_text, "generate", "-p PROMPT (or -p - to read it from stdin)", !!prompt, NULL);
    if (rc != EXIT_OK) return rc;
    if (!draft_dir && (show_stats || draft_k_given)) {
        cli_error("--draft-k and --stats need --draft DIR");
        return EXIT_USAGE;
    }
    if (!seeded) sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (verbose) fprintf(stderr, "seed %llu\n", (unsigned long long)sp.seed);

    size_t plen;
    char *ptext = strcmp(prompt, "-") == 0 ? cli_read_all(stdin, NULL, CLI_PROMPT_MAX, &plen) : strdup(prompt);
    if (!ptext) return EXIT_ERR;
    if (strcmp(prompt, "-") != 0) plen = strlen(ptext);

    rc = EXIT_ERR;
    gpt2_model *m = cli_load_model_as(cli_model_dir(mdir), quantize);
    gpt2_context *ctx = NULL;
    gpt2_sampler *smp = NULL;
    int32_t *ids = NULL, *hist = NULL;
    size_t n_ids = 0;
    if (!m) goto out;
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    const int32_t eot = gpt2_tokenizer_eot(tok);
    const gpt2_config *cfg = gpt2_model_config(m);
    if (!cli_encode(tok, ptext, plen, flags, &ids, &n_ids)) goto out;
    if (n_ids == 0) { /* GPT-2 conditions unconditional samples on <|endoftext|> */
        if (eot < 0) {
            cli_error("empty prompt, and the vocabulary has no <|endoftext|> to start from");
            goto out;
        }
        free(ids);
        ids = malloc(sizeof *ids);
        if (!ids) goto out;
        ids[0] = eot;
        n_ids = 1;
    }
    if ((long)n_ids + n_new > cfg->n_ctx) {
        cli_error("the prompt is %zu tokens; with -n %ld that exceeds the context window of %d tokens",
                  n_ids, n_new, cfg->n_ctx);
        goto out;
    }
    gpt2_error err;
    gpt2_context_params cp = gpt2_context_default_params();
    cp.n_threads = n_threads;
    if (gpt2_context_new(m, cp, &ctx, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        goto out;
    }
    if (draft_dir) {
        rc = cli_generate_speculative(m, ctx, draft_dir, (int)draft_k, show_stats, ids, n_ids, n_new, sp,
                                      print_ids, stop_at_eot);
        goto out;
    }
    smp = gpt2_sampler_new(sp, cfg->n_vocab);
    hist = malloc(((size_t)n_ids + (size_t)n_new) * sizeof *hist);
    if (!smp || !hist) {
        cli_error("out of memory");
        goto out;
    }
    memcpy(hist, ids, n_ids * sizeof *hist);
    size_t n_hist = n_ids;
    g_stop = cli_interrupt_flag();
    gpt2_hooks hooks = {.interrupt = cli_interrupted};
    gpt2_context_set_hooks(ctx, &hooks);
    gpt2_status st = gpt2_context_eval(ctx, ids, (int)n_ids, &err);
    if (st == GPT2_CANCELLED) {
        fprintf(stderr, "gptscope: generate interrupted while reading the %zu-token prompt; nothing generated\n",
                n_ids);
        rc = 130;
        goto out;
    }
    if (st != GPT2_OK) {
        cli_error("%s", err.msg);
        goto out;
    }
    gpt2_utf8_stream us = {0};
    char buf[3 * (256 + 4) + 16];
    long i = 0;
    for (; i < n_new && !*g_stop; i++) {
        int32_t id = gpt2_sampler_sample(smp, gpt2_context_logits(ctx), hist, n_hist);
        if (id == eot && stop_at_eot) break;
        hist[n_hist++] = id;
        if (print_ids) {
            printf(i ? " %d" : "%d", id);
        } else {
            size_t bl;
            const char *b = gpt2_tokenizer_token_bytes(tok, id, &bl);
            for (size_t o = 0; o < bl; o += 256) { /* chunks keep buf bounded */
                size_t k = bl - o < 256 ? bl - o : 256;
                fwrite(buf, 1, gpt2_utf8_stream_push(&us, b + o, k, buf), stdout);
            }
        }
        fflush(stdout);
        if (i + 1 < n_new && (st = gpt2_context_eval(ctx, &id, 1, &err)) != GPT2_OK) {
            if (st == GPT2_CANCELLED) { /* Ctrl-C: the token was printed */
                i++;
                break;
            }
            cli_error("%s", err.msg);
            goto out;
        }
    }
    if (!print_ids) fwrite(buf, 1, gpt2_utf8_stream_flush(&us, buf), stdout);
    if (print_ids || isatty(STDOUT_FILENO)) putchar('\n');
    rc = *g_stop ? 130 : EXIT_OK;
    fflush(stdout);
    if (*g_stop) fprintf(stderr, "gptscope: generate interrupted after %ld of %ld tokens\n", i, n_new);
out:
    fflush(stdout);
    free(hist);
    free(ids);
    free(ptext);
    gpt2_sampler_free(smp);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    return rc;
}
