/* cmd_eval.c — `gptscope eval`: mean next-token loss of a model over a text file.
 *
 * Every token but the first is predicted once, from windows of n_positions
 * tokens (--context N: N) that advance by half a window, so each prediction
 * (after the first window) sees at least half a window of context. Reported: nats per
 * predicted token, and bits per byte = total nats / ln 2 / the bytes of the
 * predicted tokens (the file's bytes minus those of its first token).
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef struct {
    const int32_t *ids; /* the whole file */
    int begin;          /* window's first token index in ids */
    int score_from;     /* predicted positions (targets) >= this are scored */
    int end;            /* window end (exclusive) */
    double nats;
    long n_scored;
    unsigned windows;   /* evaluated so far, to pace the progress line */
} eval_state;


/* logits at window position pos predict ids[begin + pos + 1]. */
static void score(void *ud, int pos, const float *logits, int n_vocab) {
    eval_state *s = ud;
    int target = s->begin + pos + 1;
    if (target < s->score_from || target >= s->end) return;
    double max = logits[0], sum = 0;
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > max) max = logits[i];
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - max);
    s->nats += log(sum) + max - logits[s->ids[target]];
    s->n_scored++;
}

/* Scores one stream of tokens: windows of n_ctx advancing by n_ctx / 2. Adds
 * to s->nats and s->n_scored. */
static int score_stream(gpt2_context *ctx, eval_state *s, const int32_t *ids, size_t n, int quiet) {
    gpt2_error err;
    const int n_ctx = gpt2_context_n_ctx(ctx), stride = n_ctx > 1 ? n_ctx / 2 : 1;
    s->ids = ids;
    s->score_from = 1;
    for (s->begin = 0;; s->begin += stride) {
        s->end = s->begin + n_ctx < (int)n ? s->begin + n_ctx : (int)n;
        gpt2_context_reset(ctx);
        gpt2_status st = gpt2_context_eval(ctx, ids + s->begin, s->end - s->begin, &err);
        if (st != GPT2_OK) {
            if (st != GPT2_CANCELLED) cli_error("%s", err.msg);
            return st == GPT2_CANCELLED ? 130 : EXIT_ERR;
        }
        s->score_from = s->end;
        if (!quiet && (++s->windows & 63) == 0) fprintf(stderr, "\reval: %ld tokens scored", s->n_scored);
        if (s->end == (int)n) return EXIT_OK;
    }
}

/* Encodes text in pieces of about 1 MiB, so that Ctrl-C is seen within a
 * piece's time: each piece ends after a newline that a non-space character
 * follows, where the pre-tokenizer splits anyway (a newline is a pre-token
 * of its own before such a character), so the ids are the whole text's.
 * 1, 0 after a message, or 130 when interrupted. */
static int encode_pieces(const gpt2_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n) {
    enum { PIECE = 1 << 20 };
    size_t cap = 0;
    *ids = NULL, *n = 0;
    for (size_t at = 0; at < len;) {
        size_t end = at + PIECE < len ? at + PIECE : len;
        while (end < len && !(text[end - 1] == '\n' && !strchr(" \t\r\n\v\f", text[end]))) end++;
        int32_t *part;
        size_t k;
        if (!cli_encode(tok, text + at, end - at, 0, &part, &k)) return free(*ids), *ids = NULL, 0;
        if (*n + k > cap) {
            size_t nc = cap ? cap : k + 1;
            while (nc < *n + k) nc *= 2;
            int32_t *grown = realloc(*ids, nc * sizeof *grown);
            if (!grown) {
                free(part), free(*ids), *ids = NULL;
                cli_error("out of memory for %zu tokens", *n + k);
                return 0;
            }
            *ids = grown, cap = nc;
        }
        if (k) memcpy(*ids + *n, part, k * sizeof *part);
        *n += k;
        free(part);
        at = end;
        if (cli_interrupted(NULL)) return free(*ids), *ids = NULL, 130;
    }
    return 1;
}

int cli_score_text(gpt2_model *m, const char *path, const char *text, size_t len, int flags, int n_ctx,
                   int n_threads, const char *ablate, cli_score *out) {
    const int quiet = flags & CLI_SCORE_QUIET;
    int rc = EXIT_ERR;
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    gpt2_context *ctx = cli_context_new_ctx(m, n_threads, n_ctx);
    if (!ctx || !cli_context_ablate(ctx, ablate)) {
        gpt2_context_free(ctx);
        return EXIT_ERR;
    }
    eval_state s = {0};
    cli_watch_interrupt(ctx, &(gpt2_hooks){.user_data = &s, .on_logits = score});
    *out = (cli_score){.n_ctx = gpt2_context_n_ctx(ctx)};
    out->stride = out->n_ctx > 1 ? out->n_ctx / 2 : 1;
    /* a stream is one "line" spanning the whole text */
    for (size_t at = 0; at < len;) {
        const char *nl = (flags & CLI_SCORE_LINES) ? memchr(text + at, '\n', len - at) : NULL;
        size_t end = nl ? (size_t)(nl - text) : len, n = 0;
        int32_t *ids = NULL;
        if (end > at) {
            int enc = encode_pieces(tok, text + at, end - at, &ids, &n);
            if (enc == 130) {
                fprintf(stderr, "\ngptscope: eval interrupted while reading %s; no result\n", path);
                rc = 130;
            }
            if (enc != 1) goto out;
            if (n >= 2) {
                size_t first_bytes;
                gpt2_tokenizer_token_bytes(tok, ids[0], &first_bytes);
                out->bytes += (double)(end - at - first_bytes);
                out->tokens += n;
                rc = score_stream(ctx, &s, ids, n, quiet);
                free(ids);
                if (rc == 130)
                    fprintf(stderr, "\ngptscope: eval interrupted after scoring %ld of the first %zu tokens; no result\n",
                            s.n_scored, out->tokens);
                if (rc != EXIT_OK) goto out;
                rc = EXIT_ERR;
            } else
                free(ids);
        }
        at = end + 1;
    }
    if (!quiet) fprintf(stderr, "\reval: %ld tokens scored\n", s.n_scored);
    if (s.n_scored == 0) {
        cli_error("%s: no line has the 2 tokens needed to score a prediction", path);
        goto out;
    }
    out->scored = s.n_scored;
    out->nats_per_token = s.nats / (double)s.n_scored;
    out->bits_per_byte = s.nats / log(2.0) / out->bytes;
    rc = EXIT_OK;
out:
    gpt2_context_free(ctx);
    return rc;
}

static const char usage_text[] =
    "usage: gptscope eval [-m DIR] [--heldout F] [--examples] [--json] [-q] [--quantize q8|q4]\n"
    "                     [--context N] [--threads N] [--ablate L.H,...] FILE\n"
    "  Mean loss of the model on FILE: nats per token and bits per byte.\n"
    "  --heldout F   score only the last fraction F of FILE, cut where `gptscope train\n"
    "                --val-fraction F` cuts its validation split\n"
    "  --examples    score each line on its own\n"
    "  --context N   windows of N tokens (default: the model's positions), advancing\n"
    "                by N/2: how the model does with less context\n"
    "  -q            no progress line on stderr\n"
    "  --threads N   worker threads (default: one per CPU; results do not depend on it)\n"
    CLI_ABLATE_USAGE;

typedef struct {
    const char *model, *quantize, *path, *ablate;
    double heldout; /* the last fraction of the file scored */
    int lines, json, quiet, n_threads, n_ctx;
} eval_opts;

typedef struct {
    const char *path;
    size_t from;     /* the first byte scored */
    cli_score score;
} eval_result;

static int eval_parse(int argc, char **argv, eval_opts *o) {
    static const cli_opt rows[] = {
        {CLI_STR("model", 'm', eval_opts, model)},
        {CLI_DOUBLE("heldout", 0, eval_opts, heldout, 1e-9, 1.0)},
        {CLI_FLAG("examples", 0, eval_opts, lines)},
        {CLI_FLAG("json", 0, eval_opts, json)},
        {CLI_FN("quantize", 0, eval_opts, quantize, const char *, cli_opt_quantize)},
        {CLI_INT("threads", 0, eval_opts, n_threads, 1, 256)},
        {CLI_INT("context", 0, eval_opts, n_ctx, 2, 1 << 20)},
        {CLI_FLAG("quiet", 'q', eval_opts, quiet)},
        CLI_ABLATE_ROW(eval_opts, ablate),
    };
    int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), o, usage_text);
    if (rc == CLI_PARSED && cli_positional(usage_text, "eval", argc, argv, 1, "a FILE to score") != EXIT_OK)
        rc = EXIT_USAGE;
    if (rc == CLI_PARSED) o->path = argv[optind];
    return rc;
}

static int eval_run(const eval_opts *o, eval_result *r) {
    size_t len = 0;
    char *text = cli_read_all(NULL, o->path, CLI_TEXT_MAX, &len);
    gpt2_model *m = text ? cli_load_model_as(cli_model_dir(o->model), o->quantize) : NULL;
    int rc = EXIT_ERR;
    r->path = o->path;
    if (m && o->n_ctx > gpt2_model_config(m)->n_ctx) {
        cli_error("--context %d: the model has %d positions", o->n_ctx, gpt2_model_config(m)->n_ctx);
    } else if (m) {
        size_t from = o->heldout < 1.0 ? gpt2_text_split(text, len, 1.0 - o->heldout) : 0;
        if (o->lines) /* as train --examples: the split moves back to a line start */
            while (from > 0 && from < len && text[from - 1] != '\n') from--;
        r->from = from;
        rc = cli_score_text(m, o->path, text + from, len - from,
                            (o->quiet ? CLI_SCORE_QUIET : 0) | (o->lines ? CLI_SCORE_LINES : 0), o->n_ctx,
                            o->n_threads, o->ablate, &r->score);
    }
    free(text);
    gpt2_model_free(m);
    return rc;
}

static int eval_report(const eval_result *r, int json) {
    const cli_score *s = &r->score;
    if (!json) {
        printf("%s: %.4f nats/token, %.4f bits/byte (%ld tokens scored, %.0f bytes from byte %zu, context %d, "
               "stride %d)\n",
               cli_show(r->path), s->nats_per_token, s->bits_per_byte, s->scored, s->bytes, r->from, s->n_ctx,
               s->stride);
        return EXIT_OK;
    }
    cJSON *root = cJSON_CreateObject();
    viz_json_text(root, "file", r->path, strlen(r->path));
    viz_json_number(root, "from_byte", (double)r->from);
    viz_json_number(root, "tokens", (double)s->tokens);
    viz_json_number(root, "scored", (double)s->scored);
    viz_json_number(root, "bytes", s->bytes);
    viz_json_number(root, "nats_per_token", s->nats_per_token);
    viz_json_number(root, "bits_per_byte", s->bits_per_byte);
    viz_json_number(root, "context", s->n_ctx);
    viz_json_number(root, "stride", s->stride);
    return cli_json_print(root);
}

int cmd_eval(int argc, char **argv) {
    eval_opts o = {.heldout = 1.0};
    eval_result r = {0};
    int rc = eval_parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if ((rc = eval_run(&o, &r)) == EXIT_OK) rc = eval_report(&r, o.json);
    return rc;
}
