/* cmd_attribute.c — `gptscope attribute`: direct logit attribution. Why the
 * model predicts a token at a position: its logit (or the difference to a
 * baseline token's) split into the residual stream's parts — the
 * embeddings, every head, each layer's attention bias and MLP, the final
 * norm's bias — with that norm's scale frozen (gpt2_attribute.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope attribute [-m DIR] -p PROMPT [--pos P] [--token A | --token-id ID]\n"
    "                          [--vs B | --vs-id ID] [-k K] [--json] [--export FILE] [--force]\n"
    "                          [--special] [--threads N] [--ablate L.H,...]\n"
    "  Direct logit attribution at position P (default the last; negative counts from\n"
    "  the end): the logit of the next token A (default the model's top 1) split into\n"
    "  the parts of the residual stream - the embeddings, each head, each layer's\n"
    "  attention bias and MLP, the final norm's bias - with the final norm's scale\n"
    "  frozen. The parts add up to the logit. --vs B explains A's logit minus B's.\n"
    "  --token A      the target as its text, one token (' cat', with its space)\n"
    "  --token-id ID  the target by id\n"
    "  --vs B         a baseline token's text: explain the logit difference A - B\n"
    "  --vs-id ID     the baseline by id\n"
    "  -k K           the parts listed, largest |value| first (default 12)\n"
    CLI_EXPORT_USAGE
    "  --special      <|endoftext|> in the prompt is the special token\n"
    "  --threads N    worker threads (default: one per CPU; results do not depend on it)\n"
    CLI_ABLATE_USAGE;

typedef struct {
    const char *model, *prompt, *ablate, *export_path, *token, *vs;
    long pos, k, token_id, vs_id;
    int force, pos_given, token_id_given, vs_id_given, special, json, n_threads;
} attr_opts;

typedef struct {
    gpt2_model *m;         /* kept for its tokenizer */
    int32_t *ids;          /* (T) */
    int T;
    unsigned char *mask;   /* (n_layer, n_head): the ablated heads, or NULL */
    gpt2_attribution a;
} attr_result;

static int attr_parse(int argc, char **argv, attr_opts *o) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', attr_opts, model)},
        {CLI_STR("prompt", 'p', attr_opts, prompt)},
        {CLI_LONG("pos", 0, attr_opts, pos, -(1L << 24), 1L << 24), .given = CLI_GIVEN(attr_opts, pos_given)},
        {CLI_STR("token", 0, attr_opts, token)},
        {CLI_LONG("token-id", 0, attr_opts, token_id, 0, INT32_MAX), .given = CLI_GIVEN(attr_opts, token_id_given)},
        {CLI_STR("vs", 0, attr_opts, vs)},
        {CLI_LONG("vs-id", 0, attr_opts, vs_id, 0, INT32_MAX), .given = CLI_GIVEN(attr_opts, vs_id_given)},
        {CLI_LONG(NULL, 'k', attr_opts, k, 1, 1 << 24)},
        {CLI_FLAG("json", 0, attr_opts, json)},
        CLI_EXPORT_ROW(attr_opts, export_path),
        {CLI_FLAG("special", 0, attr_opts, special)},
        {CLI_INT("threads", 0, attr_opts, n_threads, 1, 256)},
        CLI_ABLATE_ROW(attr_opts, ablate),
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc != CLI_PARSED) return rc;
    if (o->token && o->token_id_given)
        return cli_usage_error(usage_text, "attribute: --token and --token-id both name the target: give one");
    if (o->vs && o->vs_id_given)
        return cli_usage_error(usage_text, "attribute: --vs and --vs-id both name the baseline: give one");
    if (cli_positional(usage_text, "attribute", argc, argv, 0, "") != EXIT_OK ||
        cli_required(usage_text, "attribute", "-p PROMPT", !!o->prompt, NULL) != EXIT_OK)
        return EXIT_USAGE;
    if (!cli_outputs_vacant((const char *const[]){o->export_path}, 1, o->force)) return EXIT_ERR;
    return CLI_PARSED;
}

static int attr_run(const attr_opts *o, attr_result *r) {
    size_t n = 0;
    if (!(r->m = cli_load_model(cli_model_dir(o->model))) ||
        !cli_encode_prompt(r->m, o->prompt, o->special ? GPT2_ENCODE_SPECIAL : 0, &r->ids, &n))
        return EXIT_ERR;
    r->T = (int)n;
    const gpt2_config *cfg = gpt2_model_config(r->m);
    gpt2_attribution_params p = gpt2_attribution_default_params();
    if (!cli_prompt_pos(o->pos, o->pos_given, r->T, &p.pos) ||
        !cli_single_token(r->m, "--token", o->token, o->token_id_given, o->token_id, &p.target) ||
        !cli_single_token(r->m, "--vs", o->vs, o->vs_id_given, o->vs_id, &p.baseline))
        return EXIT_ERR;
    if (o->ablate && !(r->mask = cli_ablation_mask(cfg, o->ablate))) return EXIT_ERR;
    gpt2_context *ctx = cli_context_new(r->m, o->n_threads);
    if (!ctx) return EXIT_ERR;
    int rc = EXIT_ERR;
    if (cli_context_ablate(ctx, o->ablate)) {
        cli_watch_interrupt(ctx, NULL);
        gpt2_error err;
        gpt2_status st = gpt2_attribute(ctx, r->ids, r->T, p, &r->a, &err);
        if (st == GPT2_OK) rc = EXIT_OK;
        else if (st == GPT2_CANCELLED) {
            fprintf(stderr, "gptscope: interrupted while evaluating the %d-token prompt; nothing printed\n", p.pos + 1);
            rc = 130;
        } else
            cli_error("%s", err.msg);
    }
    gpt2_context_free(ctx);
    return rc;
}

/* One listed part: its name and value. */
typedef struct {
    char name[32];
    double v;
} attr_part;

static int by_size(const void *x, const void *y) {
    const double a = fabs(((const attr_part *)x)->v), b = fabs(((const attr_part *)y)->v);
    return a < b ? 1 : a > b ? -1 : 0;
}

enum { BAR_HALF = 24 };

/* A signed bar: BAR_HALF cells each side of an axis, v's share of max. */
static void print_bar(double v, double max) {
    const int n = max > 0 ? (int)lround(fabs(v) / max * BAR_HALF) : 0;
    for (int i = 0; i < BAR_HALF; i++) fputs(v < 0 && i >= BAR_HALF - n ? "█" : " ", stdout);
    putchar('|');
    for (int i = 0; v > 0 && i < n; i++) fputs("█", stdout);
}

static void print_text(const attr_result *r, long k) {
    const gpt2_attribution *a = &r->a;
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(r->m);
    const int L = a->n_layer, H = a->n_head;
    printf("%s: why ", cli_show(gpt2_model_name(r->m)));
    cli_print_token(tok, a->target);
    if (a->baseline >= 0) printf(" rather than "), cli_print_token(tok, a->baseline);
    printf(" after ");
    cli_print_token(tok, r->ids[a->pos]);
    printf(" (position %d of %d)\n", a->pos, r->T);
    printf("%s %.4f; the parts add up to %.4f (difference %.2g)\n", a->baseline >= 0 ? "logit difference" : "logit",
           a->logit, a->sum, a->sum - a->logit);
    printf("final %s's scale frozen at %.4f\n", a->rms_norm ? "RMSNorm" : "LayerNorm", a->scale);
    attr_part *parts = malloc(((size_t)L * (H + 2) + 2) * sizeof *parts);
    if (!parts) return;
    double heads = 0, bias = 0, mlp = 0;
    int n = 0;
    parts[n++] = (attr_part){"embed", a->embed};
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < H; h++) {
            parts[n] = (attr_part){.v = a->heads[(size_t)l * H + h]};
            snprintf(parts[n].name, sizeof parts[n].name, "L%d H%d", l, h);
            heads += parts[n++].v;
        }
        if (a->attn_bias[l] != 0) {
            parts[n] = (attr_part){.v = a->attn_bias[l]};
            snprintf(parts[n].name, sizeof parts[n].name, "L%d attn bias", l);
            bias += parts[n++].v;
        }
        parts[n] = (attr_part){.v = a->mlp[l]};
        snprintf(parts[n].name, sizeof parts[n].name, "L%d MLP", l);
        mlp += parts[n++].v;
    }
    if (!a->rms_norm) parts[n++] = (attr_part){"ln_f bias", a->ln_f_bias};
    printf("by kind: embed %+.4f, heads %+.4f, MLPs %+.4f,\n         attention biases %+.4f", a->embed, heads, mlp,
           bias);
    if (!a->rms_norm) printf(", ln_f bias %+.4f", a->ln_f_bias);
    putchar('\n');
    qsort(parts, (size_t)n, sizeof *parts, by_size);
    const int shown = k < n ? (int)k : n;
    printf("the %d largest of %d parts:\n", shown, n);
    for (int i = 0; i < shown; i++) {
        printf("  %-13s %+10.4f  ", parts[i].name, parts[i].v);
        print_bar(parts[i].v, fabs(parts[0].v));
        putchar('\n');
    }
    free(parts);
}

static int attr_report(const attr_result *r, const attr_opts *o) {
    const gpt2_config *cfg = gpt2_model_config(r->m);
    viz_attribution v = {.tok = gpt2_model_tokenizer(r->m), .model = gpt2_model_name(r->m), .ids = r->ids,
                         .T = r->T, .a = &r->a, .ablated = {r->mask, cfg->n_layer, cfg->n_head}};
    if (o->export_path && !cli_export(o->export_path, &(viz_table){VIZ_TABLE_ATTRIBUTION, .attribution = &v}))
        return EXIT_ERR;
    if (o->json) return cli_json_print(viz_attribution_json(&v));
    print_text(r, o->k);
    return EXIT_OK;
}

int cmd_attribute(int argc, char **argv) {
    attr_opts o = {.k = 12};
    attr_result r = {0};
    int rc = attr_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if ((rc = attr_run(&o, &r)) == EXIT_OK) rc = attr_report(&r, &o);
    gpt2_attribution_free(&r.a);
    free(r.mask);
    free(r.ids);
    gpt2_model_free(r.m);
    return rc;
}
