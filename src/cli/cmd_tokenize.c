/* cmd_tokenize.c — `gptscope tokenize`: text in, token ids out. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope tokenize [-m DIR] [--text STR] [--special] [--pieces | --json]\n"
    "  Reads UTF-8 text from stdin (or --text) and prints its token ids on one line.\n"
    "  --special   treat \"<|endoftext|>\" in the text as the special token\n"
    "  --pieces    print each token's text instead, in double quotes: \\n \\t \\r \\\\ \\\" and\n"
    "              \\xNN for control bytes and bytes that are not valid UTF-8\n"
    "  --json      {\"ids\": [...], \"tokens\": [...]}, and \"tokens_bytes\" when a token's\n"
    "              bytes are not valid UTF-8 on their own (README: JSON output)\n";

int cmd_tokenize(int argc, char **argv) {
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"text", required_argument, 0, 't'},
                                         {"special", no_argument, 0, 's'},
                                         {"pieces", no_argument, 0, 'P'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *mdir = NULL, *text = NULL;
    int flags = 0, pieces = 0, json = 0, c;
    while ((c = getopt_long(argc, argv, ":m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': mdir = optarg; break;
        case 't': text = optarg; break;
        case 's': flags |= GPT2_ENCODE_SPECIAL; break;
        case 'P': pieces = 1; break;
        case 'j': json = 1; break;
        case 'h': return cli_usage(1, usage_text);
        default: return cli_option_error(c, argv, usage_text);
        }
    }
    int rc = cli_positional(usage_text, "tokenize", argc, argv, 0, "");
    if (rc != EXIT_OK) return rc;
    if (pieces && json) return cli_usage_error(usage_text, "tokenize: --pieces and --json exclude each other");
    size_t len;
    char *input = text ? strdup(text) : cli_read_all(stdin, NULL, CLI_TEXT_MAX, &len);
    if (!input) return EXIT_ERR;
    if (text) len = strlen(text);
    gpt2_error err;
    gpt2_tokenizer *tok = NULL;
    if (gpt2_tokenizer_load(cli_model_dir(mdir), &tok, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        free(input);
        return EXIT_ERR;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    rc = EXIT_ERR;
    const int encoded = cli_encode(tok, input, len, flags, &ids, &n);
    if (encoded && json) {
        cJSON *root = cJSON_CreateObject();
        cli_json_tokens(root, tok, ids, n);
        rc = cli_json_print(root);
    } else if (encoded) {
        for (size_t i = 0; i < n; i++) {
            if (i) putchar(' ');
            if (pieces) {
                size_t bl;
                const char *b = gpt2_tokenizer_token_bytes(tok, ids[i], &bl);
                cli_print_piece(b, bl);
            } else {
                printf("%d", ids[i]);
            }
        }
        putchar('\n');
        rc = EXIT_OK;
    }
    free(ids);
    free(input);
    gpt2_tokenizer_free(tok);
    return rc;
}
