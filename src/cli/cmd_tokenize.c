/* cmd_tokenize.c — `gptscope tokenize`: text in, token ids out. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope tokenize [-m DIR] [--text STR] [--special] [--pieces | --json]\n"
    "  Reads UTF-8 text from stdin (or --text) and prints its token ids on one line.\n"
    "  --special   special tokens in the text become those tokens: \"<|endoftext|>\",\n"
    "              a tokenizer.json's <|eot_id|> or <|im_start|>\n"
    "  --pieces    print each token's text instead, in double quotes: \\n \\t \\r \\\\ \\\" and\n"
    "              \\xNN for control bytes and bytes that are not valid UTF-8\n"
    "  --json      {\"ids\": [...], \"tokens\": [...]}, and \"tokens_bytes\" when a token's\n"
    "              bytes are not valid UTF-8 on their own (docs/commands.md)\n";

typedef struct {
    const char *model, *text; /* text NULL: stdin */
    int special, pieces, json;
} tokenize_opts;

typedef struct {
    gpt2_tokenizer *tok;
    int32_t *ids;
    size_t n;
    int pieces; /* the text form: each token's text rather than its id */
} tokenize_result;

static int tokenize_parse(int argc, char **argv, tokenize_opts *o) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', tokenize_opts, model)},  {CLI_STR("text", 0, tokenize_opts, text)},
        {CLI_FLAG("special", 0, tokenize_opts, special)}, {CLI_FLAG("pieces", 0, tokenize_opts, pieces)},
        {CLI_FLAG("json", 0, tokenize_opts, json)},
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc == CLI_PARSED && cli_positional(usage_text, "tokenize", argc, argv, 0, "") != EXIT_OK) rc = EXIT_USAGE;
    if (rc == CLI_PARSED && o->pieces && o->json)
        rc = cli_usage_error(usage_text, "tokenize: --pieces and --json exclude each other");
    return rc;
}

static int tokenize_run(const tokenize_opts *o, tokenize_result *r) {
    size_t len;
    char *input = o->text ? strdup(o->text) : cli_read_all(stdin, NULL, CLI_TEXT_MAX, &len);
    if (!input) return EXIT_ERR;
    if (o->text) len = strlen(o->text);
    int rc = EXIT_ERR;
    gpt2_error err;
    r->pieces = o->pieces;
    const char *dir = cli_model_dir(o->model);
    if (!dir) rc = EXIT_ERR; /* it said why */
    else if (gpt2_model_load_tokenizer(dir, cli_model_params(), &r->tok, &err) != GPT2_OK) cli_error("%s", err.msg);
    else if (cli_encode(r->tok, input, len, o->special ? GPT2_ENCODE_SPECIAL : 0, &r->ids, &r->n)) rc = EXIT_OK;
    free(input);
    return rc;
}

static int tokenize_report(const tokenize_result *r, int json) {
    if (json) {
        cJSON *root = cJSON_CreateObject();
        viz_json_tokens(root, r->tok, r->ids, r->n);
        return cli_json_print(root);
    }
    for (size_t i = 0; i < r->n; i++) {
        if (i) putchar(' ');
        if (r->pieces) cli_print_token(r->tok, r->ids[i]);
        else printf("%d", r->ids[i]);
    }
    putchar('\n');
    return EXIT_OK;
}

static void tokenize_free(tokenize_result *r) {
    free(r->ids);
    gpt2_tokenizer_free(r->tok);
}

int cmd_tokenize(int argc, char **argv) {
    tokenize_opts o = {0};
    tokenize_result r = {0};
    int rc = tokenize_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if ((rc = tokenize_run(&o, &r)) == EXIT_OK) rc = tokenize_report(&r, o.json);
    tokenize_free(&r);
    return rc;
}
