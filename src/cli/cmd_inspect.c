/* cmd_inspect.c — `gptscope topk` and `gptscope attention`: numbers from inside one forward pass. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef struct {
    const char *mdir, *prompt;
    int flags, json, n_threads;
} inspect_args;

/* Encodes the prompt (at least one token); prints the error and returns 0 on failure. */
static int encode_prompt(const gpt2_model *m, const inspect_args *a, int32_t **ids, size_t *n) {
    if (!cli_encode(gpt2_model_tokenizer(m), a->prompt, strlen(a->prompt), a->flags, ids, n)) return 0;
    if (*n == 0) {
        cli_error("the prompt is empty: at least one token is needed");
        return 0;
    }
    return 1;
}

/* Runs the prompt through a new context with the given hooks; NULL on error. */
/* Runs the prompt through a new context with the given hooks; NULL on error
 * (*rc 1) or Ctrl-C (*rc 130, within one layer's work: the prompt is one batch). */
static gpt2_context *eval_prompt(const gpt2_model *m, const inspect_args *a, const int32_t *ids, size_t n,
                                 const gpt2_hooks *hooks, int *rc) {
    gpt2_context *ctx = NULL;
    gpt2_error err;
    gpt2_context_params cp = gpt2_context_default_params();
    cp.n_threads = a->n_threads;
    *rc = EXIT_ERR;
    if (gpt2_context_new(m, cp, &ctx, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return NULL;
    }
    gpt2_hooks h = hooks ? *hooks : (gpt2_hooks){0};
    cli_interrupt_flag(); /* Ctrl-C sets the flag cli_interrupted reads */
    h.interrupt = cli_interrupted;
    gpt2_context_set_hooks(ctx, &h);
    gpt2_status st = gpt2_context_eval(ctx, ids, (int)n, &err);
    if (st != GPT2_OK) {
        if (st == GPT2_CANCELLED) {
            fprintf(stderr, "gptscope: interrupted while evaluating the %zu-token prompt; nothing printed\n", n);
            *rc = 130;
        } else
            cli_error("%s", err.msg);
        gpt2_context_free(ctx);
        return NULL;
    }
    return ctx;
}

static void print_token(const gpt2_tokenizer *tok, int32_t id) {
    size_t bl = 0;
    const char *b = gpt2_tokenizer_token_bytes(tok, id, &bl);
    cli_print_piece(b ? b : "", b ? bl : 0);
}

/* --- topk ----------------------------------------------------------------- */

typedef struct {
    int32_t id;
    float logit;
} scored;

/* Highest logit first, NaN last (so that the order stays total), ties by id. */
static int by_logit_desc(const void *a, const void *b) {
    const scored *x = a, *y = b;
    const int xn = isnan(x->logit), yn = isnan(y->logit);
    if (xn != yn) return xn - yn;
    if (!xn && x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

/* The first k of the sorted candidates; softmax with the given max and sum. */
static int topk_report(const scored *all, long k, double max, double sum, const gpt2_tokenizer *tok, int json) {
    cJSON *root = json ? cJSON_CreateArray() : NULL;
    for (long i = 0; i < k; i++) {
        const double p = exp((double)all[i].logit - max) / sum;
        if (json) {
            cJSON *e = cli_json_new_object(root);
            cli_json_number(e, "id", all[i].id);
            cli_json_token(e, "token", tok, all[i].id);
            cli_json_number(e, "logit", all[i].logit);
            cli_json_number(e, "prob", p);
        } else {
            printf("%6d  %9.4f  %8.5f  ", all[i].id, all[i].logit, p);
            print_token(tok, all[i].id);
            putchar('\n');
        }
    }
    return json ? cli_json_print(root) : EXIT_OK;
}

static const char topk_usage[] =
    "usage: gptscope topk [-m DIR] -p PROMPT [-k K] [--json] [--special] [--quantize q8] [--threads N]\n"
    "  The next-token distribution after PROMPT (temperature 1, no filtering):\n"
    "  the K most likely tokens (default 10) with logit and probability.\n"
    "  --threads N   worker threads (default: one per CPU; results do not depend on it)\n";

int cmd_topk(int argc, char **argv) {
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"prompt", required_argument, 0, 'p'},
                                         {"json", no_argument, 0, 'j'},
                                         {"special", no_argument, 0, 's'},
                                         {"quantize", required_argument, 0, CLI_OPT_QUANTIZE},
                                         {"threads", required_argument, 0, CLI_OPT_THREADS},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    inspect_args a = {0};
    const char *quantize = NULL;
    long k = 10;
    int c;
    while ((c = getopt_long(argc, argv, ":m:p:k:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': a.mdir = optarg; break;
        case 'p': a.prompt = optarg; break;
        case 'k': if (!cli_parse_int("-k", optarg, 1, 1 << 24, &k)) return EXIT_USAGE; break;
        case 'j': a.json = 1; break;
        case 's': a.flags |= GPT2_ENCODE_SPECIAL; break;
        case CLI_OPT_QUANTIZE: if (!cli_quantize_option(optarg, &quantize)) return EXIT_USAGE; break;
        case CLI_OPT_THREADS: if (!cli_threads_option(optarg, &a.n_threads)) return EXIT_USAGE; break;
        case 'h': return cli_usage(1, topk_usage);
        default: return cli_option_error(c, argv, topk_usage);
        }
    }
    int rc = cli_positional(topk_usage, "topk", argc, argv, 0, "");
    if (rc == EXIT_OK) rc = cli_required(topk_usage, "topk", "-p PROMPT", !!a.prompt, NULL);
    if (rc != EXIT_OK) return rc;
    int32_t *ids = NULL;
    size_t n = 0;
    scored *all = NULL;
    gpt2_context *ctx = NULL;
    rc = EXIT_ERR;
    gpt2_model *m = cli_load_model_as(cli_model_dir(a.mdir), quantize);
    if (!m || !encode_prompt(m, &a, &ids, &n) || !(ctx = eval_prompt(m, &a, ids, n, NULL, &rc))) goto out;
    const int V = gpt2_model_config(m)->n_vocab;
    const float *logits = gpt2_context_logits(ctx);
    all = malloc((size_t)V * sizeof *all);
    if (!all) goto out;
    double max = logits[0], sum = 0;
    for (int i = 0; i < V; i++) {
        all[i] = (scored){i, logits[i]};
        if (logits[i] > max) max = logits[i];
    }
    for (int i = 0; i < V; i++) sum += exp((double)logits[i] - max);
    qsort(all, (size_t)V, sizeof *all, by_logit_desc);
    if (k > V) k = V;
    rc = topk_report(all, k, max, sum, gpt2_model_tokenizer(m), a.json);
out:
    free(all);
    free(ids);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    return rc;
}

/* --- attention ------------------------------------------------------------ */

typedef struct {
    int layer, head, T;
    float *w; /* (T, T) */
} att_capture;

static int want_one_head(void *ud, int layer, int head) {
    const att_capture *cap = ud;
    return layer == cap->layer && head == cap->head;
}

static void keep_row(void *ud, int layer, int head, int pos, const float *probs, int n_keys) {
    att_capture *cap = ud;
    if (layer == cap->layer && head == cap->head && pos < cap->T)
        memcpy(cap->w + (size_t)pos * cap->T, probs, (size_t)n_keys * sizeof(float));
}

static int attention_report(const att_capture *cap, const int32_t *ids, const gpt2_tokenizer *tok, int json) {
    const int T = cap->T;
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cli_json_tokens(root, tok, ids, (size_t)T);
        cli_json_matrix(root, "weights", cap->w, T, T);
        return cli_json_print(root);
    }
    for (int i = 0; i < T; i++) {
        printf("%4d ", i);
        print_token(tok, ids[i]);
        putchar('\t');
        for (int j = 0; j <= i; j++) printf(j ? " %.4f" : "%.4f", cap->w[(size_t)i * T + j]);
        putchar('\n');
    }
    return EXIT_OK;
}

static const char attention_usage[] =
    "usage: gptscope attention [-m DIR] -p PROMPT --layer L --head H [--json] [--special] [--threads N]\n"
    "  One head's causal attention matrix over the prompt: row i is query token i,\n"
    "  column j key token j (0 for j > i). Layers and heads count from 0.\n"
    "  --threads N   worker threads (default: one per CPU; results do not depend on it)\n";

int cmd_attention(int argc, char **argv) {
    enum { O_LAYER = 256, O_HEAD };
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"prompt", required_argument, 0, 'p'},
                                         {"layer", required_argument, 0, O_LAYER},
                                         {"head", required_argument, 0, O_HEAD},
                                         {"json", no_argument, 0, 'j'},
                                         {"special", no_argument, 0, 's'},
                                         {"threads", required_argument, 0, CLI_OPT_THREADS},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    inspect_args a = {0};
    long layer = -1, head = -1;
    int c;
    while ((c = getopt_long(argc, argv, ":m:p:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': a.mdir = optarg; break;
        case 'p': a.prompt = optarg; break;
        case O_LAYER: if (!cli_parse_int("--layer", optarg, 0, 1 << 20, &layer)) return EXIT_USAGE; break;
        case O_HEAD: if (!cli_parse_int("--head", optarg, 0, 1 << 20, &head)) return EXIT_USAGE; break;
        case 'j': a.json = 1; break;
        case 's': a.flags |= GPT2_ENCODE_SPECIAL; break;
        case CLI_OPT_THREADS: if (!cli_threads_option(optarg, &a.n_threads)) return EXIT_USAGE; break;
        case 'h': return cli_usage(1, attention_usage);
        default: return cli_option_error(c, argv, attention_usage);
        }
    }
    int rc = cli_positional(attention_usage, "attention", argc, argv, 0, "");
    if (rc == EXIT_OK)
        rc = cli_required(attention_usage, "attention", "-p PROMPT", !!a.prompt, "--layer L", layer >= 0, "--head H",
                          head >= 0, NULL);
    if (rc != EXIT_OK) return rc;
    rc = EXIT_ERR;
    int32_t *ids = NULL;
    size_t n = 0;
    gpt2_context *ctx = NULL;
    att_capture cap = {.layer = (int)layer, .head = (int)head};
    gpt2_hooks hooks = {.user_data = &cap, .want_attention = want_one_head, .on_attention = keep_row};
    gpt2_model *m = cli_load_model(cli_model_dir(a.mdir));
    if (!m) goto out;
    const gpt2_config *cfg = gpt2_model_config(m);
    if (layer >= cfg->n_layer || head >= cfg->n_head) {
        cli_error("--layer %ld --head %ld: the model has layers 0..%d and heads 0..%d", layer, head,
                  cfg->n_layer - 1, cfg->n_head - 1);
        goto out;
    }
    if (!encode_prompt(m, &a, &ids, &n)) goto out;
    cap.T = (int)n;
    if (!(cap.w = calloc(n * n, sizeof(float)))) {
        cli_error("out of memory for a %zu x %zu attention matrix", n, n);
        goto out;
    }
    if (!(ctx = eval_prompt(m, &a, ids, n, &hooks, &rc))) goto out;
    rc = attention_report(&cap, ids, gpt2_model_tokenizer(m), a.json);
out:
    free(cap.w);
    free(ids);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    return rc;
}
