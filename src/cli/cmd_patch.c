/* cmd_patch.c — `gptscope patch`: activation patching. Which activation of
 * a clean prompt, put into a corrupt one's run, brings back the clean
 * answer: a grid of layer x position (the residual stream, the MLPs) or
 * layer x head (gpt2_patch.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope patch [-m DIR] --clean C --corrupt K (--answer A | --answer-id ID)\n"
    "                      (--wrong B | --wrong-id ID) [--what resid|mlp|heads] [--json]\n"
    "                      [--export FILE] [--force] [--special] [--threads N] [--ablate L.H,...]\n"
    "  Activation patching. C and K are prompts of the same number of tokens; the\n"
    "  metric is the logit difference LD = logit(A) - logit(B) of the next token after\n"
    "  the last one. K is run again with one activation taken from C's run, and each\n"
    "  cell shows (LD patched - LD of K) / (LD of C - LD of K): 1 where that\n"
    "  activation alone brings C's answer back, 0 where it does nothing.\n"
    "  --what resid   the residual stream entering each layer at each position (default)\n"
    "  --what mlp     each layer's MLP output at each position\n"
    "  --what heads   each head's output at every position: a layer x head grid\n"
    "  --answer A     the clean answer as its text, one token (' Paris', with its space)\n"
    "  --wrong B      the corrupt prompt's answer, the same way\n"
    "  --answer-id ID, --wrong-id ID   the same by id\n"
    CLI_EXPORT_USAGE
    "  --special      <|endoftext|> in the prompts is the special token\n"
    "  --threads N    worker threads (default: one per CPU; results do not depend on it)\n"
    CLI_ABLATE_USAGE;

typedef struct {
    const char *model, *clean, *corrupt, *answer, *wrong, *what, *ablate, *export_path;
    long answer_id, wrong_id;
    int answer_id_given, wrong_id_given, force, special, json, n_threads;
} patch_opts;

typedef struct {
    gpt2_model *m;
    int32_t *clean, *corrupt;
    unsigned char *mask; /* (n_layer, n_head): the ablated heads, or NULL */
    gpt2_patch_result r;
    double seconds;
} patch_run;

static int patch_parse(int argc, char **argv, patch_opts *o) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', patch_opts, model)},
        {CLI_STR("clean", 0, patch_opts, clean)},
        {CLI_STR("corrupt", 0, patch_opts, corrupt)},
        {CLI_STR("answer", 0, patch_opts, answer)},
        {CLI_LONG("answer-id", 0, patch_opts, answer_id, 0, INT32_MAX), .given = CLI_GIVEN(patch_opts, answer_id_given)},
        {CLI_STR("wrong", 0, patch_opts, wrong)},
        {CLI_LONG("wrong-id", 0, patch_opts, wrong_id, 0, INT32_MAX), .given = CLI_GIVEN(patch_opts, wrong_id_given)},
        {CLI_STR("what", 0, patch_opts, what)},
        {CLI_FLAG("json", 0, patch_opts, json)},
        CLI_EXPORT_ROW(patch_opts, export_path),
        {CLI_FLAG("special", 0, patch_opts, special)},
        {CLI_INT("threads", 0, patch_opts, n_threads, 1, 256)},
        CLI_ABLATE_ROW(patch_opts, ablate),
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc != CLI_PARSED) return rc;
    if (o->answer && o->answer_id_given)
        return cli_usage_error(usage_text, "patch: --answer and --answer-id both name the answer: give one");
    if (o->wrong && o->wrong_id_given)
        return cli_usage_error(usage_text, "patch: --wrong and --wrong-id both name the wrong token: give one");
    if (o->what && strcmp(o->what, "resid") && strcmp(o->what, "mlp") && strcmp(o->what, "heads"))
        return cli_usage_error(usage_text, "patch: --what %s: expected resid, mlp or heads", cli_show(o->what));
    if (cli_positional(usage_text, "patch", argc, argv, 0, "") != EXIT_OK ||
        cli_required(usage_text, "patch", "--clean C", !!o->clean, NULL) != EXIT_OK ||
        cli_required(usage_text, "patch", "--corrupt K", !!o->corrupt, NULL) != EXIT_OK ||
        cli_required(usage_text, "patch", "--answer A", o->answer || o->answer_id_given, NULL) != EXIT_OK ||
        cli_required(usage_text, "patch", "--wrong B", o->wrong || o->wrong_id_given, NULL) != EXIT_OK)
        return EXIT_USAGE;
    if (!cli_outputs_vacant((const char *const[]){o->export_path}, 1, o->force)) return EXIT_ERR;
    return CLI_PARSED;
}

static gpt2_patch_what what_of(const char *s) {
    return !s || !strcmp(s, "resid") ? GPT2_PATCH_RESID : !strcmp(s, "mlp") ? GPT2_PATCH_MLP : GPT2_PATCH_HEADS;
}

/* Both prompts' ids, of one length; 0 after saying why not. */
static int encode_both(const gpt2_model *m, const patch_opts *o, patch_run *p, size_t *n) {
    const int flags = o->special ? GPT2_ENCODE_SPECIAL : 0;
    size_t nk = 0;
    if (!cli_encode_prompt(m, o->clean, flags, &p->clean, n) || !cli_encode_prompt(m, o->corrupt, flags, &p->corrupt, &nk))
        return 0;
    if (*n != nk) {
        cli_error("patch: the clean prompt is %zu tokens and the corrupt one %zu: patching pairs their positions, "
                  "so they must be as long (`gptscope tokenize` shows the pieces)", *n, nk);
        return 0;
    }
    return 1;
}

static int patch_exec(const patch_opts *o, patch_run *p) {
    size_t n = 0;
    int32_t answer, wrong;
    if (!(p->m = cli_load_model(cli_model_dir(o->model))) || !encode_both(p->m, o, p, &n) ||
        !cli_single_token(p->m, "--answer", o->answer, o->answer_id_given, o->answer_id, &answer) ||
        !cli_single_token(p->m, "--wrong", o->wrong, o->wrong_id_given, o->wrong_id, &wrong))
        return EXIT_ERR;
    if (o->ablate && !(p->mask = cli_ablation_mask(gpt2_model_config(p->m), o->ablate))) return EXIT_ERR;
    gpt2_context *ctx = cli_context_new(p->m, o->n_threads);
    if (!ctx) return EXIT_ERR;
    int rc = EXIT_ERR;
    if (cli_context_ablate(ctx, o->ablate)) {
        cli_watch_interrupt(ctx, NULL);
        gpt2_error err;
        const double t0 = cli_now();
        gpt2_status st = gpt2_patch(ctx, p->clean, p->corrupt, (int)n, answer, wrong, what_of(o->what), &p->r, &err);
        p->seconds = cli_now() - t0;
        if (st == GPT2_OK) rc = EXIT_OK;
        else if (st == GPT2_CANCELLED) {
            fprintf(stderr, "gptscope: interrupted while patching; nothing printed\n");
            rc = 130;
        } else
            cli_error("%s", err.msg);
    }
    gpt2_context_free(ctx);
    return rc;
}

/* Terminal columns of UTF-8 text s (utf8proc's widths). */
static int columns(const char *s) {
    int cols = 0;
    utf8proc_int32_t c;
    for (utf8proc_ssize_t k; *s && (k = utf8proc_iterate((const utf8proc_uint8_t *)s, -1, &c)) > 0; s += k)
        cols += utf8proc_charwidth(c);
    return cols;
}

/* A token's text as a label of w columns (viz_token_label's marks; wide
 * characters counted twice). */
static void put_label(const gpt2_tokenizer *tok, int32_t id, int w) {
    size_t n = 0;
    const char *b = gpt2_tokenizer_token_bytes(tok, id, &n);
    char label[96];
    int max = w;
    do viz_token_label(b ? b : "", b ? n : 0, max--, label, sizeof label);
    while (columns(label) > w && max > 1);
    printf("%s", label);
    for (int pad = w - columns(label); pad > 0; pad--) putchar(' ');
}

/* A score in 6 columns: signed, but a value that rounds to 0 as " 0.00". */
static void put_score(double v) {
    if (fabs(v) < 0.005) printf("  0.00");
    else printf(" %+5.2f", v);
}

/* A column's heading over put_score's 6 columns: "    L3", "   h11". */
static void put_axis(char c, int i) {
    char s[16];
    snprintf(s, sizeof s, "%c%d", c, i);
    printf("%6s", s);
}

/* The grid as text: rows the layers for heads, else the positions (their
 * tokens, clean / corrupt where they differ) with a column per layer. */
static void print_grid(const patch_run *p) {
    const gpt2_patch_result *r = &p->r;
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(p->m);
    if (r->what == GPT2_PATCH_HEADS) {
        printf("layer");
        for (int h = 0; h < r->cols; h++) put_axis('h', h);
        putchar('\n');
        for (int l = 0; l < r->rows; l++) {
            printf("%5d", l);
            for (int h = 0; h < r->cols; h++) put_score(r->scores[(size_t)l * r->cols + h]);
            putchar('\n');
        }
        return;
    }
    printf("pos  %-21s", "token (clean/corrupt)");
    for (int l = 0; l < r->rows; l++) put_axis('L', l);
    putchar('\n');
    for (int t = 0; t < r->cols; t++) {
        printf("%-4d ", t);
        if (p->clean[t] == p->corrupt[t]) put_label(tok, p->clean[t], 21);
        else put_label(tok, p->clean[t], 10), putchar('/'), put_label(tok, p->corrupt[t], 10);
        for (int l = 0; l < r->rows; l++) put_score(r->scores[(size_t)l * r->cols + t]);
        putchar('\n');
    }
}

static void print_text(const patch_run *p) {
    const gpt2_patch_result *r = &p->r;
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(p->m);
    static const char *what[] = {"the residual stream entering each layer", "each layer's MLP output",
                                 "each head's output (all positions)"};
    printf("%s: activation patching of %s\n", cli_show(gpt2_model_name(p->m)), what[r->what]);
    printf("LD = logit(");
    cli_print_token(tok, r->answer);
    printf(") - logit(");
    cli_print_token(tok, r->wrong);
    printf(") after the last token\n");
    printf("LD clean %.4f, corrupt %.4f; cell = (patched - corrupt) / (clean - corrupt)\n", r->ld_clean, r->ld_corrupt);
    print_grid(p);
    printf("%d runs, %ld positions, %.2f s; the prompts part at position %d (cells before: 0)\n", r->n_runs,
           r->n_positions, p->seconds, r->first_diff);
}

static int patch_report(const patch_run *p, const patch_opts *o) {
    const gpt2_config *cfg = gpt2_model_config(p->m);
    viz_patch v = {.tok = gpt2_model_tokenizer(p->m), .model = gpt2_model_name(p->m), .clean = p->clean,
                   .corrupt = p->corrupt, .r = &p->r, .ablated = {p->mask, cfg->n_layer, cfg->n_head}};
    if (o->export_path && !cli_export(o->export_path, &(viz_table){VIZ_TABLE_PATCH, .patch = &v})) return EXIT_ERR;
    if (o->json) return cli_json_print(viz_patch_json(&v));
    print_text(p);
    return EXIT_OK;
}

int cmd_patch(int argc, char **argv) {
    patch_opts o = {0};
    patch_run p = {0};
    int rc = patch_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if ((rc = patch_exec(&o, &p)) == EXIT_OK) rc = patch_report(&p, &o);
    gpt2_patch_result_free(&p.r);
    free(p.mask);
    free(p.clean);
    free(p.corrupt);
    gpt2_model_free(p.m);
    return rc;
}
