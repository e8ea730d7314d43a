/* cmd_attention.c — `gptscope attention`: one head's attention matrix over a
 * prompt (or the mean of a layer's heads), as numbers, JSON, CSV or a picture. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope attention [-m DIR] -p PROMPT --layer L (--head H | --mean) [--json]\n"
    "                          [--export FILE] [--svg FILE] [--png FILE] [--force]\n"
    "                          [--special] [--threads N] [--ablate L.H,...]\n"
    "  One head's causal attention matrix over the prompt: row i is query token i,\n"
    "  column j key token j (0 for j > i). Layers and heads count from 0.\n"
    "  --mean          the mean of the layer's heads instead of one head\n"
    CLI_EXPORT_USAGE
    "  --svg FILE, --png FILE  the heatmap as a picture: token labels on both axes, a\n"
    "                  title, a colour scale from 0 to 1 (PNG needs gptscope built with cairo)\n"
    "  --threads N     worker threads (default: one per CPU; results do not depend on it)\n"
    CLI_ABLATE_USAGE;

typedef struct {
    const char *model, *prompt, *ablate, *export_path, *svg, *png;
    long layer, head; /* -1: not given */
    int force, mean, special, json, n_threads;
} attention_opts;

typedef struct {
    gpt2_model *m; /* kept for its tokenizer */
    int32_t *ids;  /* (T) */
    int layer, head, T, n_head; /* head -1: the mean of the layer's n_head heads */
    float *w;      /* (T, T), row i = query i */
} attention_result;

static int attention_parse(int argc, char **argv, attention_opts *o) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', attention_opts, model)},
        {CLI_STR("prompt", 'p', attention_opts, prompt)},
        {CLI_LONG("layer", 0, attention_opts, layer, 0, 1 << 20)},
        {CLI_LONG("head", 0, attention_opts, head, 0, 1 << 20)},
        {CLI_FLAG("mean", 0, attention_opts, mean)},
        {CLI_FLAG("json", 0, attention_opts, json)},
        CLI_EXPORT_ROW(attention_opts, export_path),
        {CLI_FN("svg", 0, attention_opts, svg, const char *, cli_opt_picture_file)},
        {CLI_FN("png", 0, attention_opts, png, const char *, cli_opt_picture_file)},
        {CLI_FLAG("special", 0, attention_opts, special)},
        {CLI_INT("threads", 0, attention_opts, n_threads, 1, 256)},
        CLI_ABLATE_ROW(attention_opts, ablate),
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc == CLI_PARSED && !cli_outputs_vacant((const char *const[]){o->export_path, o->svg, o->png}, 3, o->force)) return EXIT_ERR;
    if (rc == CLI_PARSED &&
        (cli_positional(usage_text, "attention", argc, argv, 0, "") != EXIT_OK ||
         cli_required(usage_text, "attention", "-p PROMPT", !!o->prompt, "--layer L", o->layer >= 0,
                      "--head H (or --mean)", o->head >= 0 || o->mean, NULL) != EXIT_OK))
        rc = EXIT_USAGE;
    if (rc == CLI_PARSED && o->mean && o->head >= 0) rc = cli_usage_error(usage_text, "attention: --head and --mean together: give one");
    return rc;
}

static int want_heads(void *ud, int layer, int head) {
    const attention_result *r = ud;
    return layer == r->layer && (r->head < 0 || head == r->head);
}

/* One head's row, or its share of the layer's mean. */
static void keep_row(void *ud, int layer, int head, int pos, const float *probs, int n_keys) {
    attention_result *r = ud;
    if (!want_heads(ud, layer, head) || pos >= r->T) return;
    float *row = r->w + (size_t)pos * r->T;
    if (r->head >= 0) memcpy(row, probs, (size_t)n_keys * sizeof(float));
    else
        for (int j = 0; j < n_keys; j++) row[j] += probs[j] / (float)r->n_head;
}

static int attention_run(const attention_opts *o, attention_result *r) {
    size_t n = 0;
    gpt2_context *ctx = NULL;
    int rc = EXIT_ERR;
    r->layer = (int)o->layer, r->head = o->mean ? -1 : (int)o->head;
    if (!(r->m = cli_load_model(cli_model_dir(o->model)))) return EXIT_ERR;
    const gpt2_config *cfg = gpt2_model_config(r->m);
    r->n_head = cfg->n_head;
    if (o->layer >= cfg->n_layer || o->head >= cfg->n_head) {
        cli_error("--layer %ld --head %ld: the model has %d layers (0..%d) of %d heads (0..%d)", o->layer, o->head,
                  cfg->n_layer, cfg->n_layer - 1, cfg->n_head, cfg->n_head - 1);
        return EXIT_ERR;
    }
    if (!cli_encode_prompt(r->m, o->prompt, o->special ? GPT2_ENCODE_SPECIAL : 0, &r->ids, &n)) return EXIT_ERR;
    r->T = (int)n;
    if (!(r->w = calloc(n * n, sizeof(float)))) {
        cli_error("out of memory for a %zu x %zu attention matrix", n, n);
        return EXIT_ERR;
    }
    gpt2_hooks hooks = {.user_data = r, .want_attention = want_heads, .on_attention = keep_row};
    if ((ctx = cli_eval_prompt(r->m, o->n_threads, o->ablate, r->ids, n, &hooks, &rc))) rc = EXIT_OK;
    gpt2_context_free(ctx);
    return rc;
}

/* The heatmap picture (viz_attention_picture: labels, title, colour bar). */
static int write_picture(const attention_result *r, const viz_attention *a, const char *path) {
    gpt2_error err;
    if (viz_attention_picture(path, a, r->n_head, &err) == GPT2_OK) return 1;
    cli_error("%s", err.msg);
    return 0;
}

static int attention_report(const attention_result *r, const attention_opts *o) {
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(r->m);
    const gpt2_config *cfg = gpt2_model_config(r->m);
    const int T = r->T;
    unsigned char *mask = o->ablate ? cli_ablation_mask(cfg, o->ablate) : NULL; /* checked by the evaluation */
    viz_attention a = {.tok = tok, .model = gpt2_model_name(r->m), .ids = r->ids, .T = T, .layer = r->layer,
                       .head = r->head, .w = r->w, .ablated = {mask, cfg->n_layer, cfg->n_head}};
    int ok = !(o->ablate && !mask) &&
             !((o->export_path && !cli_export(o->export_path, &(viz_table){VIZ_TABLE_ATTENTION, .attention = &a})) ||
               (o->svg && !write_picture(r, &a, o->svg)) || (o->png && !write_picture(r, &a, o->png)));
    if (!ok || o->json) {
        int rc = ok ? cli_json_print(viz_attention_json(&a)) : EXIT_ERR;
        free(mask);
        return rc;
    }
    free(mask);
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
    if ((rc = attention_run(&o, &r)) == EXIT_OK) rc = attention_report(&r, &o);
    attention_free(&r);
    return rc;
}
