/* cmd_train_tokenizer.c — `gptscope train-tokenizer`: learns a byte-level BPE vocabulary
 * from a text file and writes it as vocab.json + merges.txt (gpt2_bpe_train.h). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

static const char usage_text[] =
    "usage: gptscope train-tokenizer --vocab-size N [--min-frequency F]\n"
    "                                [--train-fraction X] [--force] -o DIR FILE\n"
    "  Learns GPT-2-style byte-level BPE from FILE (- for stdin) and writes\n"
    "  DIR/vocab.json and DIR/merges.txt (DIR is created if missing).\n"
    "  --vocab-size N       tokens in all: 256 bytes + merges + <|endoftext|> (>= 257)\n"
    "  --min-frequency F    stop early once the best pair occurs fewer than F times\n"
    "                       (default 2)\n"
    "  --train-fraction X   learn only from the first X of FILE's bytes, cut at a\n"
    "                       character boundary (0 < X <= 1, default 1)\n"
    "  -o, --output DIR     where to write the vocabulary\n"
    "  --force              replace DIR's vocab.json and merges.txt (else refused)\n";

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

typedef struct {
    const char *out_dir, *path; /* path "-": stdin */
    long vocab_size, min_freq;  /* vocab_size 0: not given */
    double fraction;            /* of the bytes learned from */
    int force;
} train_tokenizer_opts;

typedef struct {
    gpt2_bpe_vocab *v;
    const char *path, *out_dir;
    int from_stdin;
    size_t n_train, len; /* bytes learned from, of the input's */
    double seconds;
    long vocab_size, min_freq; /* what was asked */
} train_tokenizer_result;

/* --train-fraction: (0, 1] */
static int fraction_option(const cli_opt *o, const char *arg, void *value) {
    double *fraction = value;
    if (!cli_parse_float("--train-fraction", arg, 0, 1, fraction)) return 0;
    if (*fraction <= 0) {
        cli_error("--train-fraction: expected a number in (0, 1], found '%s'", arg);
        return 0;
    }
    return 1;
}

static int train_tokenizer_parse(int argc, char **argv, train_tokenizer_opts *o) {
    static const cli_opt rows[] = {
        {CLI_LONG("vocab-size", 0, train_tokenizer_opts, vocab_size, GPT2_BPE_MIN_VOCAB, GPT2_BPE_MAX_VOCAB)},
        {CLI_LONG("min-frequency", 0, train_tokenizer_opts, min_freq, 1, 1L << 30)},
        {CLI_FN("train-fraction", 0, train_tokenizer_opts, fraction, double, fraction_option)},
        {CLI_STR("output", 'o', train_tokenizer_opts, out_dir)},
        {CLI_FLAG("force", 0, train_tokenizer_opts, force)},
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc == CLI_PARSED &&
        (cli_positional(usage_text, "train-tokenizer", argc, argv, 1, "a FILE to learn from (- for stdin)") !=
             EXIT_OK ||
         cli_required(usage_text, "train-tokenizer", "--vocab-size N", o->vocab_size != 0, "-o DIR", !!o->out_dir,
                      NULL) != EXIT_OK))
        rc = EXIT_USAGE;
    if (rc == CLI_PARSED) o->path = argv[optind];
    return rc;
}

static volatile sig_atomic_t *g_stop;

static int stop_requested(void *ud, int done, int wanted) {
    (void)ud, (void)done, (void)wanted;
    return *g_stop;
}

static int train_tokenizer_run(const train_tokenizer_opts *o, train_tokenizer_result *r) {
    *r = (train_tokenizer_result){.path = o->path, .out_dir = o->out_dir, .from_stdin = strcmp(o->path, "-") == 0,
                                  .vocab_size = o->vocab_size, .min_freq = o->min_freq};
    static const char *const files[] = {"vocab.json", "merges.txt", NULL};
    if (!cli_outdir_vacant(o->out_dir, files, o->force,
                           "--force replaces it (a model there would no longer match its tokenizer); or give another -o"))
        return EXIT_ERR;
    char *text = cli_read_all(stdin, r->from_stdin ? NULL : o->path, CLI_TEXT_MAX, &r->len);
    if (!text) return EXIT_ERR;
    r->n_train = utf8_cut((const unsigned char *)text, r->len, (size_t)((double)r->len * o->fraction));
    if (r->n_train == 0) {
        cli_error("%s: no text to learn from (%zu bytes%s)", r->from_stdin ? "stdin" : o->path, r->len,
                  r->len ? ", and --train-fraction leaves none" : "");
        free(text);
        return EXIT_ERR;
    }
    gpt2_bpe_train_params p = gpt2_bpe_train_default_params();
    p.vocab_size = (int)o->vocab_size;
    p.min_frequency = o->min_freq;
    g_stop = cli_interrupt_flag();
    p.progress = stop_requested;
    gpt2_error err;
    double t0 = cli_now();
    gpt2_status st = gpt2_bpe_train(text, r->n_train, p, &r->v, &err);
    r->seconds = cli_now() - t0;
    free(text);
    if (st == GPT2_CANCELLED) cli_error("interrupted; nothing written");
    else if (st != GPT2_OK || gpt2_bpe_vocab_save(r->v, o->out_dir, &err) != GPT2_OK) cli_error("%s", err.msg);
    else return EXIT_OK;
    return EXIT_ERR;
}

static int train_tokenizer_report(const train_tokenizer_result *r) {
    const gpt2_bpe_train_stats *s = gpt2_bpe_vocab_stats(r->v);
    const char *from = r->from_stdin ? "stdin" : cli_show(r->path);
    printf("learned %d merges in %.2f s: %d tokens (256 bytes + %d merges + <|endoftext|>)\n", s->n_merges,
           r->seconds, s->n_vocab, s->n_merges);
    if (r->n_train < r->len)
        printf("from the first %zu of %zu bytes of %s (%.1f%%)\n", r->n_train, r->len, from,
               100.0 * (double)r->n_train / (double)r->len);
    else
        printf("from all %zu bytes of %s\n", r->len, from);
    printf("%zu pieces, %zu distinct; the training text is %lld tokens, %.3f bytes per token\n", s->n_pieces,
           s->n_unique_pieces, (long long)s->n_tokens, (double)s->n_bytes / (double)s->n_tokens);
    printf("wrote %s/vocab.json and %s/merges.txt\n", cli_show(r->out_dir), cli_show(r->out_dir));
    if (s->stop == GPT2_BPE_STOP_MIN_FREQUENCY)
        cli_error("note: %d tokens, fewer than the %ld asked: the most frequent pair left occurs "
                  "%lld time%s, below --min-frequency %ld",
                  s->n_vocab, r->vocab_size, (long long)s->stop_count, s->stop_count == 1 ? "" : "s", r->min_freq);
    else if (s->stop == GPT2_BPE_STOP_NO_PAIRS)
        cli_error("note: %d tokens, fewer than the %ld asked: no pair is left to merge (every "
                  "piece of the text is one token)",
                  s->n_vocab, r->vocab_size);
    return EXIT_OK;
}

int cmd_train_tokenizer(int argc, char **argv) {
    train_tokenizer_opts o = {.min_freq = (long)gpt2_bpe_train_default_params().min_frequency, .fraction = 1.0};
    train_tokenizer_result r = {0};
    int rc = train_tokenizer_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if ((rc = train_tokenizer_run(&o, &r)) == EXIT_OK) rc = train_tokenizer_report(&r);
    gpt2_bpe_vocab_free(r.v);
    return rc;
}
