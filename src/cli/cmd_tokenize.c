/* cmd_tokenize.c — `gptscope tokenize`: text in, token ids out. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static int usage(void) {
    fputs("usage: gptscope tokenize [-m DIR] [--text STR] [--special] [--pieces]\n"
          "  Reads UTF-8 text from stdin (or --text) and prints its token ids on one line.\n"
          "  --special   treat \"<|endoftext|>\" in the text as the special token\n"
          "  --pieces    print each token's text (JSON strings) instead of ids\n",
          stderr);
    return EXIT_USAGE;
}

int cmd_tokenize(int argc, char **argv) {
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"text", required_argument, 0, 't'},
                                         {"special", no_argument, 0, 's'},
                                         {"pieces", no_argument, 0, 'P'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *mdir = NULL, *text = NULL;
    int flags = 0, pieces = 0, c;
    while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': mdir = optarg; break;
        case 't': text = optarg; break;
        case 's': flags |= GPT2_ENCODE_SPECIAL; break;
        case 'P': pieces = 1; break;
        default: return usage();
        }
    }
    if (optind != argc) return usage();
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
    int rc = EXIT_ERR;
    if (cli_encode(tok, input, len, flags, &ids, &n)) {
        for (size_t i = 0; i < n; i++) {
            if (i) putchar(' ');
            if (pieces) {
                size_t bl;
                const char *b = gpt2_tokenizer_token_bytes(tok, ids[i], &bl);
                cli_json_string(stdout, b, bl);
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
