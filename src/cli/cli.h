/* cli.h — shared pieces of the gptscope subcommands (application layer).
 *
 * Each subcommand is `int cmd_NAME(int argc, char **argv)` with argv[0] the
 * subcommand's name; it returns the process exit status: 0 success, 1 error
 * (a message was printed to stderr), 2 usage error (usage was printed).
 * Only main.c calls exit().
 */
#ifndef GPTSCOPE_CLI_H
#define GPTSCOPE_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "gpt2.h"
#include "viz/export.h"
#include "viz/json.h"
#include "viz/picture.h"

enum { EXIT_OK = 0, EXIT_ERR = 1, EXIT_USAGE = 2 };

int cmd_tokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_topk(int argc, char **argv);
int cmd_attention(int argc, char **argv);
int cmd_heads(int argc, char **argv);
int cmd_lens(int argc, char **argv);
int cmd_attribute(int argc, char **argv);
int cmd_patch(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_train_tokenizer(int argc, char **argv);
/* The full-screen chat (cmd_chat.c, then src/ui); built only when ncursesw and readline
 * are found (GPTSCOPE_HAVE_CHAT). */
int cmd_chat(int argc, char **argv);
int cmd_inspect(int argc, char **argv); /* the chat in prompt mode (cmd_inspect.c) */
struct chat_host_s;
/* What the app needs from the command line (cmd_chat.c): a chat_host. */
const struct chat_host_s *cli_chat_host(void);

/* The mean loss of a model on a text, as `gptscope eval` defines it: every
 * token but the first predicted once, from windows of n_ctx tokens (0: the
 * model's positions) advancing by n_ctx / 2; bits per byte over the bytes of
 * the predicted tokens. With CLI_SCORE_LINES each line is its own text (its
 * first token unscored). */
enum { CLI_SCORE_QUIET = 1, CLI_SCORE_LINES = 2 };
typedef struct {
    size_t tokens;
    long scored;
    double bytes, nats_per_token, bits_per_byte;
    int n_ctx, stride;
} cli_score;
int cli_score_text(gpt2_model *m, const char *path, const char *text, size_t len, int flags, int n_ctx,
                   int n_threads, const char *ablate, cli_score *out);

/* --- Options as data (options.c) -------------------------------------------
 *
 * A command lists its options as rows: each names the option, the field of
 * the command's options struct its value goes to, and how to check the value.
 * cli_parse_options runs getopt_long over the rows and stores each value; a
 * bad value, an unknown option or a missing value prints the usage error and
 * ends parsing. -h and --help (the usage on stdout) come with every table.
 *
 *     typedef struct { const char *prompt; long k; int json; } topk_opts;
 *     static const cli_opt rows[] = {
 *         {CLI_STR("prompt", 'p', topk_opts, prompt)},
 *         {CLI_LONG(NULL, 'k', topk_opts, k, 1, 1 << 24)},
 *         {CLI_FLAG("json", 0, topk_opts, json)},
 *     };
 *     topk_opts o = {.k = 10};
 *     int rc = cli_parse_options(argc, argv, rows, CLI_ROWS(rows), &o, usage_text);
 *     if (rc != CLI_PARSED) return rc;   // EXIT_OK after --help, else EXIT_USAGE
 *
 * Messages name an option by its letter when it has one ("-k: expected an
 * integer in [1, 16777216], found '0'"), else by its long name. */
typedef enum {
    CLI_ARG_FLAG,   /* no value: the int field is set to 1 */
    CLI_ARG_STR,    /* const char *: the argument as given */
    CLI_ARG_INT,    /* int: an integer in [lo, hi] */
    CLI_ARG_LONG,   /* long: an integer in [lo, hi] */
    CLI_ARG_U64,    /* uint64_t: an integer in [lo, hi] (hi at most LONG_MAX) */
    CLI_ARG_FLOAT,  /* float: a number in [lo, hi] */
    CLI_ARG_DOUBLE, /* double: a number in [lo, hi] */
    CLI_ARG_FN,     /* fn checks the argument and stores it */
} cli_arg_kind;

typedef struct cli_opt cli_opt;
struct cli_opt {
    const char *name; /* the long option without "--"; NULL: a letter only */
    int letter;       /* the short option ('m' for -m); 0: none */
    cli_arg_kind kind;
    size_t at;        /* offsetof the field in the options struct */
    double lo, hi;    /* a number's range, both ends included */
    size_t given;     /* CLI_GIVEN: an int field set to 1 when the option is given; 0: none */
    int code;         /* for fn: which value (a sampling knob's CLI_OPT_ code) */
    /* 1 stored, 0 a bad value (message printed); value points at the field */
    int (*fn)(const cli_opt *o, const char *arg, void *value);
};

/* The field's offset, with a compile-time check that it has the type the
 * kind stores (a mismatch warns: comparison of distinct pointer types). */
#define CLI_AT(T, field, type) (offsetof(T, field) + 0 * sizeof((type *)0 == &((T *)0)->field))
#define CLI_GIVEN(T, field) (1 + CLI_AT(T, field, int))
#define CLI_ROWS(rows) ((int)(sizeof rows / sizeof *rows))
/* Rows, each inside braces: {CLI_INT("layers", 0, train_opts, p.n_layer, 1, 256)}; more fields
 * may follow: {CLI_INT(...), .given = CLI_GIVEN(train_opts, steps_given)}. */
#define CLI_FLAG(nm, l, T, f) .name = nm, .letter = l, .kind = CLI_ARG_FLAG, .at = CLI_AT(T, f, int)
#define CLI_STR(nm, l, T, f) .name = nm, .letter = l, .kind = CLI_ARG_STR, .at = CLI_AT(T, f, const char *)
#define CLI_INT(nm, l, T, f, min, max) \
    .name = nm, .letter = l, .kind = CLI_ARG_INT, .at = CLI_AT(T, f, int), .lo = min, .hi = max
#define CLI_LONG(nm, l, T, f, min, max) \
    .name = nm, .letter = l, .kind = CLI_ARG_LONG, .at = CLI_AT(T, f, long), .lo = min, .hi = max
#define CLI_U64(nm, l, T, f, min, max) \
    .name = nm, .letter = l, .kind = CLI_ARG_U64, .at = CLI_AT(T, f, uint64_t), .lo = min, .hi = max
#define CLI_FLOAT(nm, l, T, f, min, max) \
    .name = nm, .letter = l, .kind = CLI_ARG_FLOAT, .at = CLI_AT(T, f, float), .lo = min, .hi = max
#define CLI_DOUBLE(nm, l, T, f, min, max) \
    .name = nm, .letter = l, .kind = CLI_ARG_DOUBLE, .at = CLI_AT(T, f, double), .lo = min, .hi = max
#define CLI_FN(nm, l, T, f, type, check) \
    .name = nm, .letter = l, .kind = CLI_ARG_FN, .at = CLI_AT(T, f, type), .fn = check

/* Returned by cli_parse_options when the command goes on (not an exit status). */
enum { CLI_PARSED = -1 };
/* Parses argv[1..] (argv[0] is the command's name) into opts; afterwards
 * argv[optind..] are the positional arguments. CLI_PARSED, or the status to
 * exit with: EXIT_OK after --help, EXIT_USAGE after a usage error. */
int cli_parse_options(int argc, char **argv, const cli_opt *rows, int n_rows, void *opts, const char *usage);

/* fn checks for common rows: --quantize (a const char * field, see cli_quantize_option),
 * and a sampling knob (a gpt2_sampler_params field; .code = CLI_OPT_TEMP...). */
int cli_opt_quantize(const cli_opt *o, const char *arg, void *value);
int cli_opt_sampling(const cli_opt *o, const char *arg, void *value);

/* /ablate's and --ablate's grammar, "L.H[,L.H...]" with L.* a whole layer,
 * into mask (n_layer, n_head) (the chat's host lends it to the app); 0 with
 * the reason in msg. */
int cli_ablation_parse(const char *spec, int n_layer, int n_head, unsigned char *mask, char *msg, size_t cap);

/* --ablate L.H[,L.H...] (L.* a whole layer; ablate.c): the heads zero-ablated
 * (gpt2_context_set_ablation). The row checks the form and keeps the text in
 * a const char * field; the ranges are checked against the model once it is
 * loaded, by cli_ablation_mask (a layer or head out of range names the
 * model's shape). */
int cli_opt_ablate(const cli_opt *o, const char *arg, void *value);
#define CLI_ABLATE_ROW(T, f) {CLI_FN("ablate", 0, T, f, const char *, cli_opt_ablate)}
#define CLI_ABLATE_USAGE                                                                    \
    "  --ablate L.H[,L.H...]  zero-ablate these heads (L.* a whole layer; numbers from 0)\n"
/* spec's heads as an (n_layer, n_head) mask (malloc'd); NULL after printing why. */
unsigned char *cli_ablation_mask(const gpt2_config *cfg, const char *spec);
/* Sets ctx's ablation to spec's heads (spec NULL: nothing to do): 1, or 0
 * after printing why. */
int cli_context_ablate(gpt2_context *ctx, const char *spec);

/* --export FILE (a table: .json or .csv) and --svg/--png FILE (a picture):
 * the rows check the name's ending (and, for --png, that gptscope was built
 * with cairo); cli_export writes a table through viz_export, printing why
 * not: 1 written, 0 not (the file is then as it was). */
int cli_opt_table_file(const cli_opt *o, const char *arg, void *value);
int cli_opt_picture_file(const cli_opt *o, const char *arg, void *value);
#define CLI_EXPORT_ROW(T, f) {CLI_FN("export", 0, T, f, const char *, cli_opt_table_file)}, {CLI_FLAG("force", 0, T, force)}
#define CLI_EXPORT_USAGE                                                                  \
    "  --export FILE  also write the table to FILE: .json or .csv (docs/commands.md)\n"     \
    "  --force        replace an export that exists (else it is refused, before any work)\n"
int cli_export(const char *path, const viz_table *t);
/* The n files a command will write (NULL entries skipped): 1 when none exists
 * or force is set, else 0 after naming the first and --force. */
int cli_outputs_vacant(const char *const *paths, int n, int force);

/* The sampling knobs' rows, for a gpt2_sampler_params field sp of T; --seed
 * sets the int field seeded. */
#define CLI_SAMPLING_ROWS(T, sp, seeded)                                                          \
    {CLI_FN("temperature", 0, T, sp, gpt2_sampler_params, cli_opt_sampling), .code = CLI_OPT_TEMP}, \
        {CLI_FN("top-k", 0, T, sp, gpt2_sampler_params, cli_opt_sampling), .code = CLI_OPT_TOPK},   \
        {CLI_FN("top-p", 0, T, sp, gpt2_sampler_params, cli_opt_sampling), .code = CLI_OPT_TOPP},   \
        {CLI_FN("min-p", 0, T, sp, gpt2_sampler_params, cli_opt_sampling), .code = CLI_OPT_MINP},   \
        {CLI_FN("repeat-penalty", 0, T, sp, gpt2_sampler_params, cli_opt_sampling), .code = CLI_OPT_REP}, \
        {CLI_FN("repeat-last-n", 0, T, sp, gpt2_sampler_params, cli_opt_sampling), .code = CLI_OPT_REPN}, \
        {CLI_FN("seed", 0, T, sp, gpt2_sampler_params, cli_opt_sampling), .code = CLI_OPT_SEED,       \
         .given = CLI_GIVEN(T, seeded)}

/* The sampling options `generate` and `chat` share: their getopt_long codes,
 * table entries (needs <getopt.h>) and parsing into a gpt2_sampler_params. */
enum { CLI_OPT_TEMP = 0x1000, CLI_OPT_TOPK, CLI_OPT_TOPP, CLI_OPT_MINP, CLI_OPT_REP, CLI_OPT_REPN, CLI_OPT_SEED };
#define CLI_SAMPLING_OPTIONS                                                                          \
    {"temperature", required_argument, 0, CLI_OPT_TEMP}, {"top-k", required_argument, 0, CLI_OPT_TOPK}, \
        {"top-p", required_argument, 0, CLI_OPT_TOPP}, {"min-p", required_argument, 0, CLI_OPT_MINP},   \
        {"repeat-penalty", required_argument, 0, CLI_OPT_REP},                                          \
        {"repeat-last-n", required_argument, 0, CLI_OPT_REPN}, {"seed", required_argument, 0, CLI_OPT_SEED}

/* Applies option c with its argument to sp: 1 applied, 0 not a sampling
 * option, -1 a bad value (message printed). --seed also sets *seeded. */
int cli_sampling_option(int c, const char *arg, gpt2_sampler_params *sp, int *seeded);

/* The same knobs by name, for the chat's /set: "temperature" (or "temp",
 * "t"), "top-k" ("top_k", "k"), "top-p" ("top_p", "p"), "min-p" ("min_p"),
 * "repeat-penalty" ("repeat", "rep"), "repeat-last-n", "seed". One table
 * holds their ranges, so /set refuses exactly what the options refuse.
 * Returns 1 applied (*canon = the knob's name), 0 not a knob, -1 a bad value
 * with "expected ... in [lo, hi], found 'text'" in msg. */
int cli_sampling_set(const char *name, const char *text, gpt2_sampler_params *sp, const char **canon, char *msg,
                     size_t cap);

/* A knob's range, for steppers (the sampling panel's arrows): 0 if no such knob. */
int cli_sampling_range(const char *name, double *lo, double *hi);

/* Seconds on the monotonic clock, for timings. */
double cli_now(void);

/* Prints "gptscope: " + message to stderr. */
void cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* s in gpt2_text_escape's form (control bytes and invalid UTF-8 as \xNN),
 * for paths and names echoed on stdout; one of 4 static buffers in turn, cut
 * with "..." past 1 KiB. cli_error escapes its whole message itself. */
const char *cli_show(const char *s);

/* A command's usage text: for --help on stdout, returning EXIT_OK; else on
 * stderr, returning EXIT_USAGE. */
int cli_usage(int help, const char *text);

/* A usage error: one line "gptscope: MESSAGE" saying what is missing or
 * wrong, then the usage text, on stderr. Returns EXIT_USAGE. */
int cli_usage_error(const char *text, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Required options, as pairs (const char *name, int given) ending with NULL:
 * EXIT_OK when all were given, else the usage error "CMD needs --head H" (or
 * "-p PROMPT and --head H") and EXIT_USAGE. */
int cli_required(const char *text, const char *cmd, ...);

/* After option parsing: EXIT_OK when exactly `want` (0 or 1) positional
 * arguments, named `name` ("FILE"), follow; else the usage error saying which
 * is missing or unexpected, and EXIT_USAGE. */
int cli_positional(const char *text, const char *cmd, int argc, char *const argv[], int want, const char *name);

/* The usage error for what getopt_long returned on a bad option: '?' (an
 * unknown option) or ':' (a missing value; the optstring starts with ':').
 * main() sets opterr to 0, so getopt prints nothing itself. */
int cli_option_error(int c, char *const argv[], const char *text);

/* The model: -m if given, else $GPTSCOPE_MODEL, else the bundled
 * models/shakespeare (cli_data_path); NULL after saying how to give one.
 * cli_load_model(NULL) returns NULL. */
const char *cli_model_dir(const char *opt_m);

/* rel ("themes", "models/shakespeare") in gptscope's data: beside the
 * executable or one level up (a build not installed: ./gptscope,
 * build-san/gptscope), in the data directory make install compiled in
 * (GPTSCOPE_DATADIR), in bin/../share/gptscope (an installed tree moved, or
 * staged with DESTDIR), or in the working directory. 1 with the path in
 * out; 0 when none. */
int cli_data_path(const char *rel, char *out, size_t cap);

/* How the app loads models: the default params with GPT-2's tokenizer from
 * gptscope's data (tokenizers/gpt2, cli_data_path) for files that imply it
 * and carry none. */
gpt2_model_params cli_model_params(void);

/* Loads a model, printing the loader's message on failure; on a terminal, a
 * load that takes a while shows its progress on stderr. A SIGBUS during
 * the load (the file truncated under it) ends the process with a line naming
 * the directory, exit 135, after the function cli_on_fatal_signal registered
 * (the chat's terminal restore, async-signal-safe) has run. */
gpt2_model *cli_load_model(const char *dir);
void cli_on_fatal_signal(void (*restore)(void));
/* Writes s to stderr with write(2) alone: safe in a signal handler. */
void cli_say(const char *s);
/* Around a gpt2_model_load made elsewhere (the chat's /draft): dir while it
 * runs, NULL after. */
void cli_mark_loading(const char *dir);

/* The same, then quantized when quantize is non-NULL (the value of a
 * --quantize option, checked by cli_quantize_option). */
gpt2_model *cli_load_model_as(const char *dir, const char *quantize);

/* --quantize ARG: q8 (8 bits per output), q4 (GGUF's Q4_K, 4.5 bits per
 * weight; Q4_0 for matrices whose inputs are not a multiple of 256), q8_0,
 * q4_0, q4_k; sets *quantize to arg. 0 (message printed) else. */
enum { CLI_OPT_QUANTIZE = 0x1100, CLI_OPT_THREADS };
int cli_quantize_option(const char *arg, const char **quantize);
/* The dtype a --quantize (or bench --dtype) name stands for: 1 and *dt, or 0. */
int cli_quantize_dtype(const char *arg, gpt2_dtype *dt);

/* --threads N: worker threads of the model's context, 1..256 (0, the
 * default, is one per CPU). 0 (message printed) on a bad value. */
int cli_threads_option(const char *arg, int *n_threads);

/* Strict number parsing for option values: prints a usage-style message and
 * returns 0 when text is not a number in [min, max]. */
int cli_parse_int(const char *opt, const char *text, long min, long max, long *out);
int cli_parse_float(const char *opt, const char *text, double min, double max, double *out);

/* Reads all of a stream (or a file when path is given) into a malloc'd,
 * NUL-terminated buffer of at most `limit` bytes: a longer input (a huge file,
 * /dev/zero) is refused as soon as it passes the limit, before it can fill
 * memory. Returns NULL after printing an error. The usual limits: */
enum { CLI_TEXT_MAX = 256 << 20, CLI_PROMPT_MAX = 1 << 20 };
char *cli_read_all(FILE *f, const char *path, size_t limit, size_t *len);

/* Encodes text; on failure prints the tokenizer's message. Returns 0 on error. */
int cli_encode(const gpt2_tokenizer *tok, const char *text, size_t len, int flags, int32_t **ids, size_t *n);

/* JSON output: viz/json.h (viz_json_text, viz_json_number, viz_json_tokens, ...). */

/* Prints root on one line to stdout and frees it: EXIT_OK, or EXIT_ERR (a
 * message printed) when building it ran out of memory. */
int cli_json_print(cJSON *root);

/* A token's (or any) bytes in double quotes on stdout, for people: valid
 * UTF-8 as is, \n \t \r \\ \" and \xNN for other control bytes and bytes that
 * are not valid UTF-8 (gpt2_text_escape's form, quotes and backslashes added). */
void cli_print_piece(const char *b, size_t n);

/* Pushes stdout out: 0, or -1 when a write failed (a full disk, /dev/full, a
 * closed stdout); the first failure's errno is kept for cli_stdout_errno,
 * which main's exit reports (status 1). */
int cli_stdout_flush(void);
int cli_stdout_errno(void);
/* Whether an error said "out of memory" (the wording every such message uses). */
int cli_out_of_memory(void);

/* Installs a SIGINT/SIGTERM/SIGHUP handler that only sets a flag; returns the flag. */
volatile sig_atomic_t *cli_interrupt_flag(void);
/* Whether that flag is set, as a cancel hook (gpt2_hooks.cancel,
 * gpt2_trainer_set_cancel, gpt2_speculative_params.cancel): Ctrl-C seen
 * within one layer's work. */
int cli_interrupted(void *unused);

/* outdir.c: an output directory written whole or not at all. begin checks
 * the target (missing, or a directory: empty, or holding files and force
 * given, else an error naming one of them and what --force would replace)
 * and makes the scratch directory beside it (d->scratch: write there), which
 * Ctrl-C, SIGTERM or a hangup removes before the process ends. commit moves
 * the files in (the scratch directory becomes a missing or empty target; into
 * one holding files each file is renamed over its namesake, others kept);
 * abandon removes them. 1, or 0 after printing why (commit: nothing moved). */
typedef struct {
    char target[4096], scratch[4096];
    int exists, replace;
} cli_outdir;
int cli_outdir_begin(cli_outdir *d, const char *target, int force, const char *what);
int cli_outdir_commit(cli_outdir *d);
void cli_outdir_abandon(cli_outdir *d);
/* Files a command writes into dir (NULL: names are paths) one by one (names, NULL-ended): 1 when none
 * exists or force is set, else 0 after an error naming the first that does
 * and `how` (what to give instead: "--force replaces it, --resume ..."). */
int cli_outdir_vacant(const char *dir, const char *const *names, int force, const char *how);


/* A context for m with n_threads workers (0: one per CPU); NULL after
 * printing the engine's message. */
gpt2_context *cli_context_new(const gpt2_model *m, int n_threads);
/* The same with a KV cache of n_ctx positions (0: the model's). */
gpt2_context *cli_context_new_ctx(const gpt2_model *m, int n_threads, int n_ctx);

/* Ctrl-C for ctx's forward passes: installs the flag's handler and sets
 * ctx's hooks to *hooks (none when NULL) with .cancel = cli_interrupted,
 * so an eval stops within one layer's work. Returns the flag. */
volatile sig_atomic_t *cli_watch_interrupt(gpt2_context *ctx, const gpt2_hooks *hooks);

/* The prompt's ids, at least one token, after the tokenizer's BOS where it adds one
 * (Llama 3); 0 after printing why not. */
int cli_encode_prompt(const gpt2_model *m, const char *prompt, int flags, int32_t **ids, size_t *n);

/* The prompt's ids through a fresh context with the heads of ablate (an
 * --ablate value, or NULL) zeroed, hooks (may be NULL) and Ctrl-C watched:
 * the context, or NULL after an error (*rc EXIT_ERR) or Ctrl-C (*rc 130,
 * "interrupted while evaluating the N-token prompt"). */
gpt2_context *cli_eval_prompt(const gpt2_model *m, int n_threads, const char *ablate, const int32_t *ids, size_t n,
                              const gpt2_hooks *hooks, int *rc);

/* --pos P against a prompt of T tokens: 0..T-1, or -T..-1 from the end; not
 * given (given 0), the last. 1 with the position in *out, else 0 after the
 * message naming the range. */
int cli_prompt_pos(long pos, int given, int T, int *out);

/* Token id's bytes as cli_print_piece shows them (an unknown id as ""). */
void cli_print_token(const gpt2_tokenizer *tok, int32_t id);

/* A token named by its text (opt "--token": one token of m, as it reads
 * inside a text) or, where id_given, by id: *out, or -1 when neither was
 * given; 0 after saying why it names no one token (the text's pieces). */
int cli_single_token(const gpt2_model *m, const char *opt, const char *text, int id_given, long id, int32_t *out);

#endif
