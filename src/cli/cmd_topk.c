/* cmd_topk.c — `gptscope topk`: the next-token distribution after a prompt. */
#include <math.h>
#include <stdlib.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope topk [-m DIR] -p PROMPT [-k K] [--json] [--special] [--quantize q8|q4] [--threads N]\n"
    "                     [--export FILE [--force]] [--ablate L.H,...]\n"
    "  The next-token distribution after PROMPT (temperature 1, no filtering):\n"
    "  the K most likely tokens (default 10) with logit and probability.\n"
    "  --export FILE  also write the top-k history to FILE (.json or .csv): after each\n"
    "                 token of the prompt, the K most likely next tokens and the rank and\n"
    "                 probability of the token that actually follows\n"
    "  --force        replace an export that exists (else it is refused, before any work)\n"
    "  --threads N   worker threads (default: one per CPU; results do not depend on it)\n"
    CLI_ABLATE_USAGE;

typedef struct {
    const char *model, *quantize, *prompt, *ablate, *export_path;
    long k;
    int force, special, json, n_threads;
} topk_opts;

typedef struct {
    gpt2_model *m;     /* kept for its tokenizer */
    viz_candidate *top; /* (n), most probable first */
    long n;
    /* --export: the history over the prompt's T positions */
    const int32_t *ids;
    int T, k, oom;
    viz_candidate *h_top;    /* (T, k) */
    viz_history_row *h_rows; /* (T) */
} topk_result;

static int topk_parse(int argc, char **argv, topk_opts *o) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', topk_opts, model)},
        {CLI_STR("prompt", 'p', topk_opts, prompt)},
        {CLI_LONG(NULL, 'k', topk_opts, k, 1, 1 << 24)},
        {CLI_FLAG("json", 0, topk_opts, json)},
        {CLI_FLAG("special", 0, topk_opts, special)},
        {CLI_FN("quantize", 0, topk_opts, quantize, const char *, cli_opt_quantize)},
        {CLI_INT("threads", 0, topk_opts, n_threads, 1, 256)},
        CLI_ABLATE_ROW(topk_opts, ablate),
        CLI_EXPORT_ROW(topk_opts, export_path),
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc == CLI_PARSED && !cli_outputs_vacant((const char *const[]){o->export_path}, 1, o->force)) return EXIT_ERR;
    if (rc == CLI_PARSED && (cli_positional(usage_text, "topk", argc, argv, 0, "") != EXIT_OK ||
                             cli_required(usage_text, "topk", "-p PROMPT", !!o->prompt, NULL) != EXIT_OK))
        rc = EXIT_USAGE;
    return rc;
}

/* logits (V) ranked: the first k with their probabilities. */
static int rank(const float *logits, int V, long k, topk_result *r) {
    if (!(r->top = malloc((size_t)(k > V ? V : k) * sizeof *r->top)) || (r->n = viz_top_candidates(logits, V, k, r->top)) < 0) {
        cli_error("out of memory ranking %d logits", V);
        return EXIT_ERR;
    }
    return EXIT_OK;
}

/* on_logits: position pos's candidates and those of the token that follows it */
static void keep_history(void *ud, int pos, const float *logits, int n_vocab) {
    topk_result *r = ud;
    viz_history_row *row = &r->h_rows[pos];
    *row = (viz_history_row){.pos = pos, .top = r->h_top + (size_t)pos * r->k, .next = {.id = -1}};
    row->k = (int)viz_top_candidates(logits, n_vocab, r->k, r->h_top + (size_t)pos * r->k);
    if (row->k < 0) r->oom = 1, row->k = 0;
    if (pos + 1 < r->T) row->next = viz_candidate_of(logits, n_vocab, r->ids[pos + 1]);
}

/* --export: the history's room, and the hook that fills it */
static int history_hooks(const topk_opts *o, topk_result *r, const int32_t *ids, size_t n, gpt2_hooks *hooks) {
    const int V = gpt2_model_config(r->m)->n_vocab;
    r->ids = ids, r->T = (int)n, r->k = o->k < V ? (int)o->k : V;
    r->h_top = malloc(n * (size_t)r->k * sizeof *r->h_top);
    r->h_rows = calloc(n, sizeof *r->h_rows);
    *hooks = (gpt2_hooks){.user_data = r, .on_logits = keep_history};
    if (!r->h_top || !r->h_rows) cli_error("out of memory for the top-%d history of %zu tokens", r->k, n);
    return r->h_top && r->h_rows;
}

static int topk_run(const topk_opts *o, topk_result *r) {
    int32_t *ids = NULL;
    size_t n = 0;
    gpt2_context *ctx = NULL;
    int rc = EXIT_ERR;
    gpt2_hooks hooks = {0};
    r->m = cli_load_model_as(cli_model_dir(o->model), o->quantize);
    if (r->m && cli_encode_prompt(r->m, o->prompt, o->special ? GPT2_ENCODE_SPECIAL : 0, &ids, &n) &&
        (!o->export_path || history_hooks(o, r, ids, n, &hooks)) &&
        (ctx = cli_eval_prompt(r->m, o->n_threads, o->ablate, ids, n, &hooks, &rc)))
        rc = rank(gpt2_context_logits(ctx), gpt2_model_config(r->m)->n_vocab, o->k, r);
    if (rc == EXIT_OK && o->export_path) {
        const gpt2_config *cfg = gpt2_model_config(r->m);
        unsigned char *mask = o->ablate ? cli_ablation_mask(cfg, o->ablate) : NULL; /* checked by the evaluation */
        viz_history h = {.tok = gpt2_model_tokenizer(r->m), .ids = ids, .T = (int)n, .rows = r->h_rows,
                         .ablated = {mask, cfg->n_layer, cfg->n_head}};
        if (r->oom) cli_error("out of memory ranking the history's candidates");
        if (r->oom || (o->ablate && !mask) || !cli_export(o->export_path, &(viz_table){VIZ_TABLE_HISTORY, .history = &h}))
            rc = EXIT_ERR;
        free(mask);
    }
    free(ids);
    gpt2_context_free(ctx);
    return rc;
}

static int topk_report(const topk_result *r, int json) {
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(r->m);
    cJSON *root = json ? cJSON_CreateArray() : NULL;
    if (!json) printf("%6s  %9s  %8s  %s\n", "id", "logit", "prob", "token");
    for (long i = 0; i < r->n; i++) {
        const viz_candidate *t = &r->top[i];
        if (json) {
            cJSON *e = viz_json_new_object(root);
            viz_json_number(e, "id", t->id);
            viz_json_token(e, "token", tok, t->id);
            viz_json_number(e, "logit", t->logit);
            viz_json_number(e, "prob", t->prob);
        } else {
            printf("%6d  %9.4f  %8.5f  ", t->id, t->logit, t->prob);
            cli_print_token(tok, t->id);
            putchar('\n');
        }
    }
    return json ? cli_json_print(root) : EXIT_OK;
}

static void topk_free(topk_result *r) {
    free(r->h_rows);
    free(r->h_top);
    free(r->top);
    gpt2_model_free(r->m);
}

int cmd_topk(int argc, char **argv) {
    topk_opts o = {.k = 10};
    topk_result r = {0};
    int rc = topk_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if ((rc = topk_run(&o, &r)) == EXIT_OK) rc = topk_report(&r, o.json);
    topk_free(&r);
    return rc;
}
