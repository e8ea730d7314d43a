/* options.c — option parsing for the subcommands: the table-driven parser
 * (cli_parse_options), strict numbers, usage errors, and the sampling knobs'
 * table that the options and the chat's /set share. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int cli_usage(int help, const char *text) {
    fputs(text, help ? stdout : stderr);
    return help ? EXIT_OK : EXIT_USAGE;
}

int cli_usage_error(const char *text, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_error("%s", msg);
    return cli_usage(0, text);
}

int cli_required(const char *text, const char *cmd, ...) {
    const char *missing[8];
    int n = 0;
    va_list ap;
    va_start(ap, cmd);
    for (const char *name; (name = va_arg(ap, const char *)) != NULL;)
        if (!va_arg(ap, int) && n < 8) missing[n++] = name;
    va_end(ap);
    if (n == 0) return EXIT_OK;
    char list[512] = "";
    for (int i = 0; i < n; i++) /* "A", "A and B", "A, B and C" */
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i == 0 ? "" : i == n - 1 ? " and " : ", ",
                 missing[i]);
    return cli_usage_error(text, "%s needs %s", cmd, list);
}

int cli_positional(const char *text, const char *cmd, int argc, char *const argv[], int want, const char *name) {
    const int found = argc - optind;
    if (found == want) return EXIT_OK;
    if (found < want) return cli_usage_error(text, "%s needs %s", cmd, name);
    if (want == 0) return cli_usage_error(text, "%s: unexpected argument '%s'", cmd, argv[optind]);
    return cli_usage_error(text, "%s: unexpected argument '%s' (%s, one only)", cmd, argv[optind + want], name);
}

int cli_option_error(int c, char *const argv[], const char *text) {
    const char *word = argv[optind - 1]; /* argv[0] is the command's name */
    if (c == ':') return cli_usage_error(text, "%s: option '%s' needs a value", argv[0], word);
    if (optopt > 0 && optopt < 256 && word[0] == '-' && word[1] != '-')
        return cli_usage_error(text, "%s: unknown option '-%c'", argv[0], optopt);
    return cli_usage_error(text, "%s: unknown option '%s'", argv[0], word);
}

int cli_quantize_dtype(const char *arg, gpt2_dtype *dt) {
    static const struct { const char *name; gpt2_dtype dt; } table[] = {
        {"q8", GPT2_DTYPE_Q8},      {"q4", GPT2_DTYPE_Q4_K},    {"q8_0", GPT2_DTYPE_Q8_0},
        {"q4_0", GPT2_DTYPE_Q4_0},  {"q4_k", GPT2_DTYPE_Q4_K},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(arg, table[i].name) == 0) {
            *dt = table[i].dt;
            return 1;
        }
    return 0;
}

int cli_quantize_option(const char *arg, const char **quantize) {
    gpt2_dtype dt;
    if (!cli_quantize_dtype(arg, &dt)) {
        cli_error("--quantize: expected q8, q4, q8_0, q4_0 or q4_k, found '%s'", arg);
        return 0;
    }
    *quantize = arg;
    return 1;
}

int cli_threads_option(const char *arg, int *n_threads) {
    long n;
    if (!cli_parse_int("--threads", arg, 1, 256, &n)) return 0;
    *n_threads = (int)n;
    return 1;
}

int cli_parse_int(const char *opt, const char *text, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) {
        cli_error("%s: expected an integer in [%ld, %ld], found '%s'", opt, min, max, text);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_parse_float(const char *opt, const char *text, double min, double max, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= min && v <= max)) {
        cli_error("%s: expected a number in [%g, %g], found '%s'", opt, min, max, text);
        return 0;
    }
    *out = v;
    return 1;
}

/* The sampling knobs: one row each, for the options and for /set. */
typedef enum { KNOB_FLOAT, KNOB_INT, KNOB_U64 } knob_kind;
static const struct {
    int opt;                  /* its getopt code */
    const char *name, *alias[2];
    knob_kind kind;
    double lo, hi;
} knobs[] = {
    {CLI_OPT_TEMP, "temperature", {"temp", "t"}, KNOB_FLOAT, 0, 100},
    {CLI_OPT_TOPK, "top-k", {"top_k", "k"}, KNOB_INT, 0, 1 << 24},
    {CLI_OPT_TOPP, "top-p", {"top_p", "p"}, KNOB_FLOAT, 1e-9, 1},
    {CLI_OPT_MINP, "min-p", {"min_p", NULL}, KNOB_FLOAT, 0, 0.999999},
    {CLI_OPT_REP, "repeat-penalty", {"repeat", "rep"}, KNOB_FLOAT, 0.01, 100},
    {CLI_OPT_REPN, "repeat-last-n", {"repeat_last_n", NULL}, KNOB_INT, 0, 1 << 20},
    {CLI_OPT_SEED, "seed", {NULL, NULL}, KNOB_U64, 0, (double)UINT64_MAX},
};
enum { N_KNOBS = sizeof knobs / sizeof *knobs };

static int knob_by_name(const char *name) {
    for (int i = 0; name && i < N_KNOBS; i++)
        if (!strcmp(name, knobs[i].name) || (knobs[i].alias[0] && !strcmp(name, knobs[i].alias[0])) ||
            (knobs[i].alias[1] && !strcmp(name, knobs[i].alias[1])))
            return i;
    return -1;
}

/* Parses text for knob k into sp; 0 with the reason in msg. */
static int knob_apply(int k, const char *text, gpt2_sampler_params *sp, char *msg, size_t cap) {
    char *end;
    errno = 0;
    if (knobs[k].kind == KNOB_U64) {
        unsigned long long v = strtoull(text, &end, 10);
        /* digits only: strtoull takes "-1" and " 5", and clamps what overflows to the maximum */
        if (!isdigit((unsigned char)text[0]) || *end || errno == ERANGE) {
            snprintf(msg, cap, "expected an integer in [0, %llu], found '%s'", (unsigned long long)UINT64_MAX, text);
            return 0;
        }
        sp->seed = v;
        return 1;
    }
    double v = knobs[k].kind == KNOB_INT ? (double)strtol(text, &end, 10) : strtod(text, &end);
    if (errno || end == text || *end || !(v >= knobs[k].lo && v <= knobs[k].hi)) {
        if (knobs[k].kind == KNOB_INT)
            snprintf(msg, cap, "expected an integer in [%.0f, %.0f], found '%s'", knobs[k].lo, knobs[k].hi, text);
        else
            snprintf(msg, cap, "expected a number in [%g, %g], found '%s'", knobs[k].lo, knobs[k].hi, text);
        return 0;
    }
    switch (knobs[k].opt) {
    case CLI_OPT_TEMP: sp->temperature = (float)v; break;
    case CLI_OPT_TOPK: sp->top_k = (int)v; break;
    case CLI_OPT_TOPP: sp->top_p = (float)v; break;
    case CLI_OPT_MINP: sp->min_p = (float)v; break;
    case CLI_OPT_REP: sp->repeat_penalty = (float)v; break;
    case CLI_OPT_REPN: sp->repeat_last_n = (int)v; break;
    default: break;
    }
    return 1;
}

int cli_sampling_option(int c, const char *arg, gpt2_sampler_params *sp, int *seeded) {
    for (int k = 0; k < N_KNOBS; k++) {
        if (knobs[k].opt != c) continue;
        char msg[256];
        if (!knob_apply(k, arg, sp, msg, sizeof msg)) {
            cli_error("--%s: %s", knobs[k].name, msg);
            return -1;
        }
        if (c == CLI_OPT_SEED) *seeded = 1;
        return 1;
    }
    return 0;
}

int cli_sampling_set(const char *name, const char *text, gpt2_sampler_params *sp, const char **canon, char *msg,
                     size_t cap) {
    int k = knob_by_name(name);
    if (k < 0) return 0;
    *canon = knobs[k].name;
    return knob_apply(k, text, sp, msg, cap) ? 1 : -1;
}

int cli_sampling_range(const char *name, double *lo, double *hi) {
    int k = knob_by_name(name);
    if (k < 0) return 0;
    *lo = knobs[k].lo, *hi = knobs[k].hi;
    return 1;
}

/* --- the table-driven parser ------------------------------------------------ */

enum { MAX_ROWS = 48, CODE_BASE = 0x2000 }; /* codes of rows without a letter: above any char */

int cli_opt_quantize(const cli_opt *o, const char *arg, void *value) {
    (void)o;
    return cli_quantize_option(arg, value);
}

int cli_opt_sampling(const cli_opt *o, const char *arg, void *value) {
    int seeded; /* the seed's row says it was given through its .given */
    return cli_sampling_option(o->code, arg, value, &seeded) > 0;
}

/* Checks arg for row o and stores it in opts; 0 on a bad value (message printed). */
static int store(const cli_opt *o, const char *arg, void *opts) {
    char *at = (char *)opts + o->at, shown[64];
    if (o->letter) snprintf(shown, sizeof shown, "-%c", o->letter); /* messages name the option as typed most */
    else snprintf(shown, sizeof shown, "--%s", o->name);
    long l = 0;
    double d = 0;
    const int is_int = o->kind == CLI_ARG_INT || o->kind == CLI_ARG_LONG || o->kind == CLI_ARG_U64;
    const int is_real = o->kind == CLI_ARG_FLOAT || o->kind == CLI_ARG_DOUBLE;
    if (is_int && !cli_parse_int(shown, arg, (long)o->lo, (long)o->hi, &l)) return 0;
    if (is_real && !cli_parse_float(shown, arg, o->lo, o->hi, &d)) return 0;
    switch (o->kind) {
    case CLI_ARG_FLAG: *(int *)at = 1; break;
    case CLI_ARG_STR: *(const char **)at = arg; break;
    case CLI_ARG_INT: *(int *)at = (int)l; break;
    case CLI_ARG_LONG: *(long *)at = l; break;
    case CLI_ARG_U64: *(uint64_t *)at = (uint64_t)l; break;
    case CLI_ARG_FLOAT: *(float *)at = (float)d; break;
    case CLI_ARG_DOUBLE: *(double *)at = d; break;
    case CLI_ARG_FN:
        if (!o->fn(o, arg, at)) return 0;
        break;
    }
    if (o->given) *(int *)((char *)opts + o->given - 1) = 1;
    return 1;
}

int cli_parse_options(int argc, char **argv, const cli_opt *rows, int n_rows, void *opts, const char *usage) {
    struct option longs[MAX_ROWS + 2];
    char shorts[3 * MAX_ROWS + 8] = ":h"; /* ':' first: a missing value returns ':' (cli_option_error) */
    int n_long = 0;
    if (n_rows > MAX_ROWS) abort(); /* a table this long is a bug, caught by any run of the command */
    for (int i = 0; i < n_rows; i++) {
        const int code = rows[i].letter ? rows[i].letter : CODE_BASE + i, arg = rows[i].kind != CLI_ARG_FLAG;
        if (rows[i].name) longs[n_long++] = (struct option){rows[i].name, arg ? required_argument : no_argument, 0, code};
        if (rows[i].letter) {
            size_t n = strlen(shorts);
            shorts[n++] = (char)rows[i].letter;
            if (arg) shorts[n++] = ':';
            shorts[n] = '\0';
        }
    }
    longs[n_long++] = (struct option){"help", no_argument, 0, 'h'};
    longs[n_long] = (struct option){0, 0, 0, 0};
    for (int c; (c = getopt_long(argc, argv, shorts, longs, NULL)) != -1;) {
        if (c == 'h') return cli_usage(1, usage);
        const cli_opt *o = NULL;
        for (int i = 0; i < n_rows && !o; i++)
            if (c == (rows[i].letter ? rows[i].letter : CODE_BASE + i)) o = &rows[i];
        if (!o) return cli_option_error(c, argv, usage);
        if (!store(o, optarg, opts)) return EXIT_USAGE;
    }
    return CLI_PARSED;
}
