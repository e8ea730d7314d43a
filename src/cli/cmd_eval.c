/* cmd_eval.c — `gptscope eval`: mean next-token loss of a model over a text file.
 *
 * Every token but the first is predicted once, from windows of n_positions
 * tokens that advance by half a window, so each prediction (after the first
 * window) sees at least n_positions/2 tokens of context. Reported: nats per
 * predicted token, and bits per byte = total nats / ln 2 / the bytes of the
 * predicted tokens (the file's bytes minus those of its first token).
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef struct {
    const int32_t *ids; /* the whole file */
    int begin;          /* window's first token index in ids */
    int score_from;     /* predicted positions (targets) >= this are scored */
    int end;            /* window end (exclusive) */
    double nats;
    long n_scored;
} eval_state;

static volatile sig_atomic_t *g_stop;

/* logits at window position pos predict ids[begin + pos + 1]. */
static void score(void *ud, int pos, const float *logits, int n_vocab) {
    eval_state *s = ud;
    int target = s->begin + pos + 1;
    if (target < s->score_from || target >= s->end) return;
    double max = logits[0], sum = 0;
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > max) max = logits[i];
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - max);
    s->nats += log(sum) + max - logits[s->ids[target]];
    s->n_scored++;
}

static int stop_requested(void *ud, int done, int total) {
    (void)ud, (void)done, (void)total;
    return *g_stop;
}

static int usage(void) {
    fputs("usage: gptscope eval [-m DIR] [--json] [-q] FILE\n"
          "  Mean loss of the model on FILE: nats per token and bits per byte.\n",
          stderr);
    return EXIT_USAGE;
}

int cmd_eval(int argc, char **argv) {
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"json", no_argument, 0, 'j'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *mdir = NULL;
    int json = 0, quiet = 0, c;
    while ((c = getopt_long(argc, argv, "m:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'm': mdir = optarg; break;
        case 'j': json = 1; break;
        case 'q': quiet = 1; break;
        default: return usage();
        }
    }
    if (optind + 1 != argc) return usage();
    const char *path = argv[optind];
    int rc = EXIT_ERR;
    size_t len = 0, n = 0;
    int32_t *ids = NULL;
    gpt2_context *ctx = NULL;
    char *text = cli_read_all(NULL, path, &len);
    gpt2_model *m = text ? cli_load_model(cli_model_dir(mdir)) : NULL;
    if (!m) goto out;
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    if (!cli_encode(tok, text, len, 0, &ids, &n)) goto out;
    if (n < 2) {
        cli_error("%s: %zu token(s); at least 2 are needed to score a prediction", path, n);
        goto out;
    }
    size_t first_bytes;
    gpt2_tokenizer_token_bytes(tok, ids[0], &first_bytes);
    gpt2_error err;
    if (gpt2_context_new(m, gpt2_context_default_params(), &ctx, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        goto out;
    }
    const int n_ctx = gpt2_context_n_ctx(ctx), stride = n_ctx > 1 ? n_ctx / 2 : 1;
    eval_state s = {.ids = ids, .score_from = 1};
    g_stop = cli_interrupt_flag();
    gpt2_hooks hooks = {.user_data = &s, .on_logits = score, .cancel = stop_requested};
    gpt2_context_set_hooks(ctx, &hooks);
    for (s.begin = 0;; s.begin += stride) {
        s.end = s.begin + n_ctx < (int)n ? s.begin + n_ctx : (int)n;
        gpt2_context_reset(ctx);
        gpt2_status st = gpt2_context_eval(ctx, ids + s.begin, s.end - s.begin, &err);
        if (st != GPT2_OK) {
            if (st != GPT2_CANCELLED) cli_error("%s", err.msg);
            rc = st == GPT2_CANCELLED ? 130 : EXIT_ERR;
            goto out;
        }
        s.score_from = s.end;
        if (!quiet) fprintf(stderr, "\reval: %ld / %zu tokens", s.n_scored, n - 1);
        if (s.end == (int)n) break;
    }
    if (!quiet) fputc('\n', stderr);
    const double bytes = (double)(len - first_bytes);
    const double nats = s.nats / (double)s.n_scored, bpb = s.nats / log(2.0) / bytes;
    if (json)
        printf("{\"file\": \"%s\", \"tokens\": %zu, \"scored\": %ld, \"bytes\": %.0f, \"nats_per_token\": %.6f, "
               "\"bits_per_byte\": %.6f}\n",
               path, n, s.n_scored, bytes, nats, bpb);
    else
        printf("%s: %.4f nats/token, %.4f bits/byte (%ld tokens scored, %.0f bytes, context %d, stride %d)\n",
               path, nats, bpb, s.n_scored, bytes, n_ctx, stride);
    rc = EXIT_OK;
out:
    free(ids);
    free(text);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    return rc;
}
