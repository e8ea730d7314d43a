/* cmd_attention.c — `gptscope attention`: one head's attention matrix over a prompt. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope attention [-m DIR] -p PROMPT --layer L --head H [--json] [--special] [--threads N]\n"
    "                          [--ablate L.H,...]\n"
    "  One head's causal attention matrix over the prompt: row i is query token i,\n"
    "  column j key token j (0 for j > i). Layers and heads count from 0.\n"
    "  --threads N   worker threads (default: one per CPU; results do not depend on it)\n"
    CLI_ABLATE_USAGE;

typedef struct {
    const char *model, *prompt, *ablate;
    long layer, head; /* -1: not given */
    int special, json, n_threads;
} attention_opts;

typedef struct {
    gpt2_model *m; /* kept for its tokenizer */
    int32_t *ids;  /* (T) */
    int layer, head, T;
    float *w;      /* (T, T), row i = query i */
} attention_result;

static int attention_parse(int argc, char **argv, attention_opts *o) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', attention_opts, model)},
        {CLI_STR("prompt", 'p', attention_opts, prompt)},
        {CLI_LONG("layer", 0, attention_opts, layer, 0, 1 << 20)},
        {CLI_LONG("head", 0, attention_opts, head, 0, 1 << 20)},
        {CLI_FLAG("json", 0, attention_opts, json)},
        {CLI_FLAG("special", 0, attention_opts, special)},
        {CLI_INT("threads", 0, attention_opts, n_threads, 1, 256)},
        CLI_ABLATE_ROW(attention_opts, ablate),
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc == CLI_PARSED &&
        (cli_positional(usage_text, "attention", argc, argv, 0, "") != EXIT_OK ||
         cli_required(usage_text, "attention", "-p PROMPT", !!o->prompt, "--layer L", o->layer >= 0, "--head H",
                      o->head >= 0, NULL) != EXIT_OK))
        rc = EXIT_USAGE;
    return rc;
}

static int want_one_head(void *ud, int layer, int head) {
    const attention_result *r = ud;
    return layer == r->layer && head == r->head;
}

static void keep_row(void *ud, int layer, int head, int pos, const float *probs, int n_keys) {
    attention_result *r = ud;
    if (layer == r->layer && head == r->head && pos < r->T)
        memcpy(r->w + (size_t)pos * r->T, probs, (size_t)n_keys * sizeof(float));
}

static int attention_run(const attention_opts *o, attention_result *r) {
    size_t n = 0;
    gpt2_context *ctx = NULL;
    int rc = EXIT_ERR;
    r->layer = (int)o->layer, r->head = (int)o->head;
    if (!(r->m = cli_load_model(cli_model_dir(o->model)))) return EXIT_ERR;
    const gpt2_config *cfg = gpt2_model_config(r->m);
    if (o->layer >= cfg->n_layer || o->head >= cfg->n_head) {
        cli_error("--layer %ld --head %ld: the model has layers 0..%d and heads 0..%d", o->layer, o->head,
                  cfg->n_layer - 1, cfg->n_head - 1);
        return EXIT_ERR;
    }
    if (!cli_encode_prompt(r->m, o->prompt, o->special ? GPT2_ENCODE_SPECIAL : 0, &r->ids, &n)) return EXIT_ERR;
    r->T = (int)n;
    if (!(r->w = calloc(n * n, sizeof(float)))) {
        cli_error("out of memory for a %zu x %zu attention matrix", n, n);
        return EXIT_ERR;
    }
    gpt2_hooks hooks = {.user_data = r, .want_attention = want_one_head, .on_attention = keep_row};
    if ((ctx = cli_eval_prompt(r->m, o->n_threads, o->ablate, r->ids, n, &hooks, &rc))) rc = EXIT_OK;
    gpt2_context_free(ctx);
    return rc;
}

static int attention_report(const attention_result *r, int json) {
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(r->m);
    const int T = r->T;
    if (json) {
        cJSON *root = cJSON_CreateObject();
        viz_json_tokens(root, tok, r->ids, (size_t)T);
        viz_json_matrix(root, "weights", r->w, T, T);
        return cli_json_print(root);
    }
    for (int i = 0; i < T; i++) {
        printf("%4d ", i);
        cli_print_token(tok, r->ids[i]);
        putchar('\t');
        for (int j = 0; j <= i; j++) printf(j ? " %.4f" : "%.4f", r->w[(size_t)i * T + j]);
        putchar('\n');
    }
    return EXIT_OK;
}

static void attention_free(attention_result *r) {
    free(r->w);
    free(r->ids);
    gpt2_model_free(r->m);
}

int cmd_attention(int argc, char **argv) {
    attention_opts o = {.layer = -1, .head = -1};
    attention_result r = {0};
    int rc = attention_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if ((rc = attention_run(&o, &r)) == EXIT_OK) rc = attention_report(&r, o.json);
    attention_free(&r);
    return rc;
}
