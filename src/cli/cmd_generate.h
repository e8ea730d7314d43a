/* cmd_generate.h — what `gptscope generate`'s two paths share: the options,
 * the result, and the streamed output (cmd_generate.c: plain sampling;
 * cmd_generate_speculative.c: --draft). Private to src/cli. */
#ifndef GPTSCOPE_CMD_GENERATE_H
#define GPTSCOPE_CMD_GENERATE_H

#include "cli/cli.h"

typedef struct {
    const char *model, *quantize, *prompt, *draft_dir, *ablate; /* prompt "-": stdin */
    long n_new, draft_k;
    gpt2_sampler_params sp; /* its seed drawn by parse unless --seed */
    int seeded, draft_k_given, stats, ids, no_stop, special, verbose, n_threads;
} generate_opts;

/* How the stream ended, for the report's last line (exit 130 unless done). */
typedef enum {
    GENERATE_DONE,
    GENERATE_INTERRUPTED,      /* Ctrl-C between tokens, or during the last eval */
    GENERATE_CANCELLED_PROMPT, /* Ctrl-C while the prompt was evaluated: nothing generated */
    GENERATE_CANCELLED_STEP,   /* --draft: Ctrl-C inside a speculative step */
} generate_end;

/* --stats: the speculative run against target-only decoding. */
typedef struct {
    gpt2_speculative_stats s;
    int k;
    double r;                              /* acceptance rate */
    double t_target_tok, t_draft_tok;      /* seconds per single-token eval */
    double t_pass;                         /* seconds of one target pass over K + 1 positions */
    double t_spec, t_base;                 /* seconds: speculative, target-only */
    double theory, with_pass;              /* the speedups the formula predicts */
} generate_spec_stats;

typedef struct {
    gpt2_model *m, *dm; /* the target; the draft (--draft) */
    long produced, n_new;
    size_t n_prompt;
    generate_end end;
    int has_stats;
    int line_open; /* stdout's last line has no newline: stderr's report starts on a new one */
    generate_spec_stats stats;
} generate_result;

/* The continuation as it is written to stdout: ids separated by spaces, or
 * text with a partial UTF-8 character held back until it completes. */
typedef struct {
    const gpt2_tokenizer *tok;
    int ids;
    long n; /* tokens written */
    int line_open; /* the last byte written is not a newline (nothing written: 0) */
    gpt2_utf8_stream us;
    char buf[3 * (256 + 4) + 16];
} generate_out;

void generate_out_token(generate_out *o, int32_t id);
/* The bytes held back (text only). */
void generate_out_flush(generate_out *o);
/* A stream's end: the bytes held back, then a newline after ids or on a terminal. */
void generate_out_end(generate_out *o);

/* The --draft path, after the prompt is encoded and checked against ctx's
 * window: speculative sampling with the draft model o->draft_dir (r->dm). */
int generate_speculative(const generate_opts *o, gpt2_context *ctx, const int32_t *ids, size_t n_ids,
                         generate_result *r);

#endif
