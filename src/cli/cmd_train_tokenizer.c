/* cmd_train_tokenizer.c — `gptscope train-tokenizer`: learns a byte-level BPE vocabulary
 * from a text file and writes it as vocab.json + merges.txt (gpt2_bpe_train.h). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope train-tokenizer --vocab-size N [--min-frequency F]\n"
    "                                [--train-fraction X] -o DIR FILE\n"
    "  Learns GPT-2-style byte-level BPE from FILE (- for stdin) and writes\n"
    "  DIR/vocab.json and DIR/merges.txt (DIR is created if missing).\n"
    "  --vocab-size N       tokens in all: 256 bytes + merges + <|endoftext|> (>= 257)\n"
    "  --min-frequency F    stop early once the best pair occurs fewer than F times\n"
    "                       (default 2)\n"
    "  --train-fraction X   learn only from the first X of FILE's bytes, cut at a\n"
    "                       character boundary (0 < X <= 1, default 1)\n"
    "  -o, --output DIR     where to write the vocabulary\n";

/* The largest cut <= n that does not split a UTF-8 character of s[0, len). */
static size_t utf8_cut(const unsigned char *s, size_t len, size_t n) {
    if (n >= len) return len;
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char b = s[n - back];
        if ((b & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
        if (need <= back || n - back + need > len) return n;
        for (size_t k = 1; k < need; k++)
            if ((s[n - back + k] & 0xC0) != 0x80) return n; /* not a character: cut anywhere */
        return n - back;
    }
    return n;
}

static volatile sig_atomic_t *g_stop;

static int stop_requested(void *ud, int done, int wanted) {
    (void)ud, (void)done, (void)wanted;
    return *g_stop;
}

int cmd_train_tokenizer(int argc, char **argv) {
    static const struct option opts[] = {{"vocab-size", required_argument, 0, 'V'},
                                         {"min-frequency", required_argument, 0, 'F'},
                                         {"train-fraction", required_argument, 0, 'f'},
                                         {"output", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    gpt2_bpe_train_params p = gpt2_bpe_train_default_params();
    const char *out_dir = NULL;
    long vocab_size = 0, min_freq = (long)p.min_frequency;
    double fraction = 1.0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'V':
            if (!cli_parse_int("--vocab-size", optarg, GPT2_BPE_MIN_VOCAB, GPT2_BPE_MAX_VOCAB, &vocab_size))
                return EXIT_USAGE;
            break;
        case 'F':
            if (!cli_parse_int("--min-frequency", optarg, 1, 1L << 30, &min_freq)) return EXIT_USAGE;
            break;
        case 'f':
            if (!cli_parse_float("--train-fraction", optarg, 0, 1, &fraction)) return EXIT_USAGE;
            if (fraction <= 0) {
                cli_error("--train-fraction: expected a number in (0, 1], found '%s'", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'o': out_dir = optarg; break;
        case 'h': return cli_usage(1, usage_text);
        default: return cli_option_error(c, argv, usage_text);
        }
    }
    int rc = cli_positional(usage_text, "train-tokenizer", argc, argv, 1, "a FILE to learn from (- for stdin)");
    if (rc == EXIT_OK)
        rc = cli_required(usage_text, "train-tokenizer", "--vocab-size N", vocab_size != 0, "-o DIR", !!out_dir, NULL);
    if (rc != EXIT_OK) return rc;
    const char *path = argv[optind];
    int from_stdin = strcmp(path, "-") == 0;
    size_t len;
    char *text = cli_read_all(stdin, from_stdin ? NULL : path, CLI_TEXT_MAX, &len);
    if (!text) return EXIT_ERR;
    size_t n_train = utf8_cut((const unsigned char *)text, len, (size_t)((double)len * fraction));
    if (n_train == 0) {
        cli_error("%s: no text to learn from (%zu bytes%s)", from_stdin ? "stdin" : path, len,
                  len ? ", and --train-fraction leaves none" : "");
        free(text);
        return EXIT_ERR;
    }

    p.vocab_size = (int)vocab_size;
    p.min_frequency = min_freq;
    g_stop = cli_interrupt_flag();
    p.progress = stop_requested;
    gpt2_bpe_vocab *v = NULL;
    gpt2_error err;
    double t0 = cli_now();
    gpt2_status st = gpt2_bpe_train(text, n_train, p, &v, &err);
    double secs = cli_now() - t0;
    free(text);
    if (st == GPT2_CANCELLED) {
        cli_error("interrupted; nothing written");
        return EXIT_ERR;
    }
    if (st != GPT2_OK) {
        cli_error("%s", err.msg);
        return EXIT_ERR;
    }
    if (gpt2_bpe_vocab_save(v, out_dir, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        gpt2_bpe_vocab_free(v);
        return EXIT_ERR;
    }

    const gpt2_bpe_train_stats *s = gpt2_bpe_vocab_stats(v);
    printf("learned %d merges in %.2f s: %d tokens (256 bytes + %d merges + <|endoftext|>)\n",
           s->n_merges, secs, s->n_vocab, s->n_merges);
    if (n_train < len)
        printf("from the first %zu of %zu bytes of %s (%.1f%%)\n", n_train, len,
               from_stdin ? "stdin" : cli_show(path), 100.0 * (double)n_train / (double)len);
    else
        printf("from all %zu bytes of %s\n", len, from_stdin ? "stdin" : cli_show(path));
    printf("%zu pieces, %zu distinct; the training text is %lld tokens, %.3f bytes per token\n",
           s->n_pieces, s->n_unique_pieces, (long long)s->n_tokens,
           (double)s->n_bytes / (double)s->n_tokens);
    printf("wrote %s/vocab.json and %s/merges.txt\n", cli_show(out_dir), cli_show(out_dir));
    if (s->stop == GPT2_BPE_STOP_MIN_FREQUENCY)
        cli_error("note: %d tokens, fewer than the %ld asked: the most frequent pair left occurs "
                  "%lld time%s, below --min-frequency %ld",
                  s->n_vocab, vocab_size, (long long)s->stop_count, s->stop_count == 1 ? "" : "s",
                  min_freq);
    else if (s->stop == GPT2_BPE_STOP_NO_PAIRS)
        cli_error("note: %d tokens, fewer than the %ld asked: no pair is left to merge (every "
                  "piece of the text is one token)", s->n_vocab, vocab_size);
    gpt2_bpe_vocab_free(v);
    return EXIT_OK;
}
