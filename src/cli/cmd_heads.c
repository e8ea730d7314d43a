/* cmd_heads.c — `gptscope heads`: every attention head's scores over a prompt
 * (gpt2_inspect.h defines them), as a table sortable by a score, or JSON. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope heads [-m DIR] -p PROMPT [--sort KEY] [--json] [--export FILE]\n"
    "                      [--force] [--special] [--threads N] [--ablate L.H,...]\n"
    "  Every head's scores over the prompt, each a mean over the queries q = 1..T-1:\n"
    "  prev_token A[q,q-1], first_token A[q,0], self A[q,q], entropy -sum A ln A (nats),\n"
    "  induction A[q,j+1] where j < q-1 is the latest earlier occurrence of token q\n"
    "  (undefined, '-' or null, when no token repeats). Layers and heads count from 0.\n"
    "  --sort KEY      layer (default), prev_token, first_token, self, entropy or induction\n"
    "                  (highest first; undefined last)\n"
    CLI_EXPORT_USAGE
    "  --threads N     worker threads (default: one per CPU; results do not depend on it)\n"
    CLI_ABLATE_USAGE;

static const char *const sort_keys[] = {"layer", "prev_token", "first_token", "self", "entropy", "induction"};
enum { N_SORT_KEYS = sizeof sort_keys / sizeof *sort_keys };

typedef struct {
    const char *model, *prompt, *ablate, *export_path;
    int force, sort, special, json, n_threads;
} heads_opts;

typedef struct {
    gpt2_model *m; /* kept for its tokenizer */
    int32_t *ids;  /* (T) */
    int T, n_layer, n_head;
    float *att;    /* (n_layer, n_head, T, T) */
    viz_head_row *rows; /* (n_layer * n_head), in the order asked for */
} heads_result;

static int opt_sort(const cli_opt *o, const char *arg, void *value) {
    (void)o;
    for (int i = 0; i < N_SORT_KEYS; i++)
        if (!strcmp(arg, sort_keys[i])) return *(int *)value = i, 1;
    cli_error("--sort: expected layer, prev_token, first_token, self, entropy or induction, found '%s'", arg);
    return 0;
}

static int heads_parse(int argc, char **argv, heads_opts *o) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', heads_opts, model)},
        {CLI_STR("prompt", 'p', heads_opts, prompt)},
        {CLI_FN("sort", 0, heads_opts, sort, int, opt_sort)},
        {CLI_FLAG("json", 0, heads_opts, json)},
        CLI_EXPORT_ROW(heads_opts, export_path),
        {CLI_FLAG("special", 0, heads_opts, special)},
        {CLI_INT("threads", 0, heads_opts, n_threads, 1, 256)},
        CLI_ABLATE_ROW(heads_opts, ablate),
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc == CLI_PARSED && !cli_outputs_vacant((const char *const[]){o->export_path}, 1, o->force)) return EXIT_ERR;
    if (rc == CLI_PARSED && (cli_positional(usage_text, "heads", argc, argv, 0, "") != EXIT_OK ||
                             cli_required(usage_text, "heads", "-p PROMPT", !!o->prompt, NULL) != EXIT_OK))
        rc = EXIT_USAGE;
    return rc;
}

static int want_all(void *ud, int layer, int head) { return 1; }

static void keep_row(void *ud, int layer, int head, int pos, const float *probs, int n_keys) {
    heads_result *r = ud;
    const size_t T = (size_t)r->T;
    float *A = r->att + ((size_t)layer * r->n_head + head) * T * T;
    memcpy(A + (size_t)pos * T, probs, (size_t)n_keys * sizeof(float));
}

static double score_of(const viz_head_row *r, int key) {
    const double v[] = {0, r->s.prev_token, r->s.first_token, r->s.self, r->s.entropy, r->s.induction};
    return v[key];
}

/* highest score first, undefined last, then layer and head: > 0 when x goes after y */
static int after(const viz_head_row *x, const viz_head_row *y, int key) {
    const double u = score_of(x, key), v = score_of(y, key);
    if (isnan(u) != isnan(v)) return isnan(u) - isnan(v);
    if (u != v && !isnan(u)) return u < v ? 1 : -1;
    return x->layer != y->layer ? x->layer - y->layer : x->head - y->head;
}

/* insertion sort (a few hundred heads at most; qsort has no key argument) */
static void sort_rows(viz_head_row *rows, int n, int key) {
    for (int i = 1; i < n; i++) {
        viz_head_row x = rows[i];
        int j = i;
        for (; j > 0 && after(&rows[j - 1], &x, key) > 0; j--) rows[j] = rows[j - 1];
        rows[j] = x;
    }
}

/* The matrices (n_layer x n_head x T x T floats) up front: NULL after saying how much was asked. */
static float *alloc_patterns(const gpt2_config *cfg, size_t T) {
    const size_t cells = (size_t)cfg->n_layer * cfg->n_head * T * T;
    float *att = calloc(cells, sizeof(float));
    if (!att)
        cli_error("out of memory for %d x %d attention patterns of %zu x %zu (%.1f MiB): shorten the prompt",
                  cfg->n_layer, cfg->n_head, T, T, (double)cells * sizeof(float) / (1 << 20));
    return att;
}

static int heads_run(const heads_opts *o, heads_result *r) {
    size_t n = 0;
    int rc = EXIT_ERR;
    if (!(r->m = cli_load_model(cli_model_dir(o->model))) ||
        !cli_encode_prompt(r->m, o->prompt, o->special ? GPT2_ENCODE_SPECIAL : 0, &r->ids, &n))
        return EXIT_ERR;
    const gpt2_config *cfg = gpt2_model_config(r->m);
    r->T = (int)n, r->n_layer = cfg->n_layer, r->n_head = cfg->n_head;
    if (!(r->att = alloc_patterns(cfg, n)) || !(r->rows = calloc((size_t)r->n_layer * r->n_head, sizeof *r->rows)))
        return EXIT_ERR;
    gpt2_hooks hooks = {.user_data = r, .want_attention = want_all, .on_attention = keep_row};
    gpt2_context *ctx = cli_eval_prompt(r->m, o->n_threads, o->ablate, r->ids, n, &hooks, &rc);
    if (!ctx) return rc;
    for (int l = 0; l < r->n_layer; l++)
        for (int h = 0; h < r->n_head; h++) {
            viz_head_row *row = &r->rows[l * r->n_head + h];
            *row = (viz_head_row){.layer = l, .head = h, .ablated = gpt2_context_ablated(ctx, l, h)};
            gpt2_head_scores_compute(r->att + ((size_t)l * r->n_head + h) * n * n, n, r->ids, r->T, &row->s);
        }
    gpt2_context_free(ctx);
    sort_rows(r->rows, r->n_layer * r->n_head, o->sort);
    return EXIT_OK;
}

static void print_score(double v) {
    if (isnan(v)) printf(" %11s", "-");
    else printf(" %11.4f", v);
}

static int heads_report(const heads_result *r, const heads_opts *o) {
    viz_heads h = {.tok = gpt2_model_tokenizer(r->m), .rows = r->rows, .n = r->n_layer * r->n_head};
    if (o->export_path && !cli_export(o->export_path, &(viz_table){VIZ_TABLE_HEADS, .heads = &h})) return EXIT_ERR;
    if (o->json) return cli_json_print(viz_heads_json(&h));
    printf("%s: %d layers x %d heads over %d token%s; sorted by %s\n", cli_show(gpt2_model_name(r->m)), r->n_layer,
           r->n_head, r->T, r->T == 1 ? "" : "s", sort_keys[o->sort]);
    printf("scores: means over the queries 1..%d; induction over the ind_q queries whose token came before\n",
           r->T - 1);
    printf("layer head  prev_token first_token        self     entropy   induction  ind_q\n");
    for (int i = 0; i < h.n; i++) {
        const viz_head_row *row = &r->rows[i];
        printf("%5d %4d", row->layer, row->head);
        print_score(row->s.prev_token), print_score(row->s.first_token), print_score(row->s.self);
        print_score(row->s.entropy), print_score(row->s.induction);
        printf("  %5d%s\n", row->s.n_induction, row->ablated ? "  ablated" : "");
    }
    return EXIT_OK;
}

static void heads_free(heads_result *r) {
    free(r->rows);
    free(r->att);
    free(r->ids);
    gpt2_model_free(r->m);
}

int cmd_heads(int argc, char **argv) {
    heads_opts o = {0};
    heads_result r = {0};
    int rc = heads_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if ((rc = heads_run(&o, &r)) == EXIT_OK) rc = heads_report(&r, &o);
    heads_free(&r);
    return rc;
}
