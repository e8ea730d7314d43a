/* cmd_lens.c — `gptscope lens`: the logit lens. The residual stream at one
 * position after each block, through the final layer norm and the
 * unembedding (gpt2_context_unembed): what the model would predict if it
 * stopped there, and where its final prediction forms. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope lens [-m DIR] -p PROMPT [--pos P] [-k K] [--json] [--export FILE]\n"
    "                     [--force] [--special] [--threads N] [--ablate L.H,...]\n"
    "  The logit lens at position P (default the last; negative counts from the end):\n"
    "  after each layer, the final layer norm and the unembedding applied to the\n"
    "  residual stream there; the K most likely next tokens (default 5), and the rank\n"
    "  and probability of the token the model finally predicts (the last layer's\n"
    "  top 1). The last layer is the model's real next-token distribution.\n"
    CLI_EXPORT_USAGE
    "  --threads N     worker threads (default: one per CPU; results do not depend on it)\n"
    CLI_ABLATE_USAGE;

typedef struct {
    const char *model, *prompt, *ablate, *export_path;
    long pos, k;
    int force, pos_given, special, json, n_threads;
} lens_opts;

typedef struct {
    gpt2_model *m;        /* kept for its tokenizer */
    int32_t *ids;         /* (T) */
    int T, pos, n_layer, n_head, n_embd, n_vocab, k; /* k: -k cut to the vocabulary */
    float *resid;         /* (n_layer, n_embd): the residual stream at pos after each block */
    viz_candidate *top;   /* (n_layer, k) */
    viz_lens_row *rows;   /* (n_layer) */
    unsigned char *mask;  /* (n_layer, n_head): the ablated heads, or NULL */
} lens_result;

static int lens_parse(int argc, char **argv, lens_opts *o) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', lens_opts, model)},
        {CLI_STR("prompt", 'p', lens_opts, prompt)},
        {CLI_LONG("pos", 0, lens_opts, pos, -(1L << 24), 1L << 24), .given = CLI_GIVEN(lens_opts, pos_given)},
        {CLI_LONG(NULL, 'k', lens_opts, k, 1, 1 << 24)},
        {CLI_FLAG("json", 0, lens_opts, json)},
        CLI_EXPORT_ROW(lens_opts, export_path),
        {CLI_FLAG("special", 0, lens_opts, special)},
        {CLI_INT("threads", 0, lens_opts, n_threads, 1, 256)},
        CLI_ABLATE_ROW(lens_opts, ablate),
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc == CLI_PARSED && !cli_outputs_vacant((const char *const[]){o->export_path}, 1, o->force)) return EXIT_ERR;
    if (rc == CLI_PARSED && (cli_positional(usage_text, "lens", argc, argv, 0, "") != EXIT_OK ||
                             cli_required(usage_text, "lens", "-p PROMPT", !!o->prompt, NULL) != EXIT_OK))
        rc = EXIT_USAGE;
    return rc;
}

static int want_every_layer(void *ud, int layer) { return 1; }

static void keep_resid(void *ud, int layer, int pos, const float *x, int n_embd) {
    lens_result *r = ud;
    if (pos == r->pos) memcpy(r->resid + (size_t)layer * n_embd, x, (size_t)n_embd * sizeof *x);
}

static int lens_setup(const lens_opts *o, lens_result *r) {
    size_t n = 0;
    if (!(r->m = cli_load_model(cli_model_dir(o->model))) ||
        !cli_encode_prompt(r->m, o->prompt, o->special ? GPT2_ENCODE_SPECIAL : 0, &r->ids, &n))
        return 0;
    const gpt2_config *cfg = gpt2_model_config(r->m);
    r->T = (int)n, r->n_layer = cfg->n_layer, r->n_head = cfg->n_head, r->n_embd = cfg->n_embd;
    r->n_vocab = cfg->n_vocab;
    r->k = o->k < r->n_vocab ? (int)o->k : r->n_vocab;
    if (!cli_prompt_pos(o->pos, o->pos_given, r->T, &r->pos) || (o->ablate && !(r->mask = cli_ablation_mask(cfg, o->ablate)))) return 0;
    r->resid = malloc((size_t)r->n_layer * r->n_embd * sizeof *r->resid);
    r->top = malloc((size_t)r->n_layer * r->k * sizeof *r->top);
    r->rows = calloc((size_t)r->n_layer, sizeof *r->rows);
    if (!r->resid || !r->top || !r->rows) cli_error("out of memory for the lens of %d layers", r->n_layer);
    return r->resid && r->top && r->rows;
}

/* Each layer's logits at pos, ranked; the final prediction found in each. */
static int lens_read(gpt2_context *ctx, lens_result *r) {
    const int k = r->k;
    float *logits = malloc((size_t)r->n_layer * r->n_vocab * sizeof *logits); /* (n_layer, n_vocab) */
    gpt2_error err;
    int ok = logits != NULL;
    for (int l = 0; ok && l < r->n_layer; l++) {
        float *lg = logits + (size_t)l * r->n_vocab;
        viz_lens_row *row = &r->rows[l];
        ok = gpt2_context_unembed(ctx, r->resid + (size_t)l * r->n_embd, lg, &err) == GPT2_OK;
        if (!ok) cli_error("%s", err.msg);
        *row = (viz_lens_row){.layer = l, .top = r->top + (size_t)l * k};
        ok = ok && (row->k = (int)viz_top_candidates(lg, r->n_vocab, k, r->top + (size_t)l * k)) >= 0;
    }
    const int32_t predicted = ok ? r->rows[r->n_layer - 1].top[0].id : 0;
    for (int l = 0; ok && l < r->n_layer; l++)
        r->rows[l].predicted = viz_candidate_of(logits + (size_t)l * r->n_vocab, r->n_vocab, predicted);
    if (!logits) cli_error("out of memory for %d x %d logits", r->n_layer, r->n_vocab);
    free(logits);
    return ok;
}

static int lens_run(const lens_opts *o, lens_result *r) {
    int rc = EXIT_ERR;
    if (!lens_setup(o, r)) return EXIT_ERR;
    gpt2_hooks hooks = {.user_data = r, .want_residual = want_every_layer, .on_residual = keep_resid};
    /* positions after pos change nothing at pos: only 0..pos are evaluated */
    gpt2_context *ctx = cli_eval_prompt(r->m, o->n_threads, o->ablate, r->ids, (size_t)r->pos + 1, &hooks, &rc);
    if (!ctx) return rc;
    rc = lens_read(ctx, r) ? EXIT_OK : EXIT_ERR;
    gpt2_context_free(ctx);
    return rc;
}

static void print_text(const lens_result *r, const viz_lens *l) {
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(r->m);
    const viz_candidate *fin = &r->rows[r->n_layer - 1].predicted;
    printf("%s: logit lens at position %d of %d, after ", cli_show(gpt2_model_name(r->m)), r->pos, r->T);
    cli_print_token(tok, r->ids[r->pos]);
    printf("; the model predicts ");
    cli_print_token(tok, fin->id);
    printf(" (p %.4f)\n", fin->prob);
    printf("layer  rank  p(pred)  top %d\n", l->rows[0].k);
    for (int i = 0; i < r->n_layer; i++) {
        const viz_lens_row *row = &r->rows[i];
        printf("%5d %5ld  %7.4f ", row->layer, row->predicted.rank, row->predicted.prob);
        for (int j = 0; j < row->k; j++) {
            putchar(' ');
            cli_print_token(tok, row->top[j].id);
            printf(" %.3f", row->top[j].prob);
        }
        putchar('\n');
    }
}

static int lens_report(const lens_result *r, const lens_opts *o) {
    viz_lens l = {.tok = gpt2_model_tokenizer(r->m), .ids = r->ids, .T = r->T, .pos = r->pos,
                  .n_layer = r->n_layer, .rows = r->rows, .ablated = r->mask, .n_head = r->n_head};
    if (o->export_path && !cli_export(o->export_path, &(viz_table){VIZ_TABLE_LENS, .lens = &l})) return EXIT_ERR;
    if (o->json) return cli_json_print(viz_lens_json(&l));
    print_text(r, &l);
    return EXIT_OK;
}

static void lens_free(lens_result *r) {
    free(r->mask);
    free(r->rows);
    free(r->top);
    free(r->resid);
    free(r->ids);
    gpt2_model_free(r->m);
}

int cmd_lens(int argc, char **argv) {
    lens_opts o = {.k = 5};
    lens_result r = {0};
    int rc = lens_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if ((rc = lens_run(&o, &r)) == EXIT_OK) rc = lens_report(&r, &o);
    lens_free(&r);
    return rc;
}
