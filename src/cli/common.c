/* common.c — option parsing, usage, messages and model loading shared by the subcommands. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <stdint.h>

#include "cli/cli.h"

void cli_error(const char *fmt, ...) {
    char raw[4096], shown[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* paths and values from argv and files: no raw control byte reaches the terminal */
    fprintf(stderr, "gptscope: %s\n", gpt2_text_escape(raw, strlen(raw), shown, sizeof shown));
}

const char *cli_show(const char *s) {
    static char bufs[4][1024];
    static int slot;
    return gpt2_text_escape(s, strlen(s), bufs[slot++ & 3], sizeof bufs[0]);
}

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

const char *cli_model_dir(const char *opt_m) {
    if (opt_m) return opt_m;
    const char *env = getenv("GPTSCOPE_MODEL");
    if (env && *env) return env;
    static char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    if (n > 0) {
        path[n] = '\0';
        char *slash = strrchr(path, '/');
        if (slash) {
            strcpy(slash + 1, "models/shakespeare");
            if (access(path, F_OK) == 0) return path;
        }
    }
    return "models/shakespeare";
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A model file truncated while it is being loaded (cp over it at that
 * moment) faults the copy out of its map with SIGBUS; after the load the file
 * is never read again. This says which file and leaves cleanly: only
 * async-signal-safe calls, the app's terminal restore first. */
static char g_loading[1024];
static void (*g_emergency)(void);

void cli_say(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    if (write(STDERR_FILENO, s, n) < 0) return;
}

static void on_sigbus(int sig) {
    if (g_emergency) g_emergency();
    if (g_loading[0]) {
        cli_say("gptscope: the model in ");
        cli_say(g_loading);
        cli_say(" changed while it was being loaded (a file truncated or rewritten under it); stopping\n");
    } else {
        cli_say("gptscope: bus error (SIGBUS): a mapped file changed under the process; stopping\n");
    }
    _exit(128 + sig);
}

void cli_on_fatal_signal(void (*restore)(void)) { g_emergency = restore; }

void cli_mark_loading(const char *dir) {
    static int installed;
    if (!installed) {
        struct sigaction sa = {.sa_handler = on_sigbus};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, NULL);
        installed = 1;
    }
    if (dir) gpt2_text_escape(dir, strlen(dir), g_loading, sizeof g_loading);
    else g_loading[0] = '\0';
}

gpt2_model *cli_load_model(const char *dir) {
    cli_mark_loading(dir);
    gpt2_model *m = NULL;
    gpt2_error err;
    gpt2_status st = gpt2_model_load(dir, &m, &err);
    cli_mark_loading(NULL);
    if (st != GPT2_OK) {
        cli_error("%s", err.msg);
        return NULL;
    }
    return m;
}

gpt2_model *cli_load_model_as(const char *dir, const char *quantize) {
    gpt2_model *m = cli_load_model(dir);
    gpt2_error err;
    if (m && quantize && gpt2_model_quantize(m, GPT2_DTYPE_Q8, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        gpt2_model_free(m);
        return NULL;
    }
    return m;
}

int cli_quantize_option(const char *arg, const char **quantize) {
    if (strcmp(arg, "q8") != 0) {
        cli_error("--quantize: expected q8, found '%s'", arg);
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

/* "256 MiB", "1 MiB", or bytes */
static void format_size(char *out, size_t n, size_t bytes) {
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) snprintf(out, n, "%zu MiB", bytes >> 20);
    else snprintf(out, n, "%zu bytes", bytes);
}

char *cli_read_all(FILE *f, const char *path, size_t limit, size_t *len) {
    FILE *own = NULL;
    const char *name = path ? path : "stdin";
    char lim[32];
    format_size(lim, sizeof lim, limit);
    if (path && !(f = own = fopen(path, "rb"))) {
        cli_error("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) { /* fopen opens one; only the reads fail */
        cli_error("%s: is a directory, expected a file", name);
        if (own) fclose(own);
        return NULL;
    }
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (uintmax_t)st.st_size > limit) {
        cli_error("%s: %jd bytes is more than the %s this command reads into memory (split the text)", name,
                  (intmax_t)st.st_size, lim);
        if (own) fclose(own);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1 || n > limit) break;
        char *grown = realloc(buf, cap *= 2);
        if (!grown) free(buf);
        buf = grown;
    }
    int bad = ferror(f), err = errno;
    if (own) fclose(own);
    if (buf && n > limit) {
        cli_error("%s: more than the %s this command reads into memory (split the text)", name, lim);
        free(buf);
        return NULL;
    }
    if (!buf || bad) {
        if (buf) cli_error("%s: read error: %s", name, strerror(err));
        else cli_error("%s: out of memory after %zu bytes", name, n);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

int cli_encode(const gpt2_tokenizer *tok, const char *text, size_t len, int flags, int32_t **ids, size_t *n) {
    gpt2_error err;
    if (gpt2_tokenizer_encode(tok, text, len, flags, ids, n, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return 0;
    }
    return 1;
}

void cli_print_piece(const char *b, size_t n) {
    const size_t cap = 4 * n + 1;
    char *shown = malloc(cap);
    if (!shown) return;
    putchar('"');
    for (size_t at = 0; at < n;) {
        size_t run = 0; /* '\\' and '"' are ASCII: cutting there splits no character */
        while (at + run < n && b[at + run] != '\\' && b[at + run] != '"') run++;
        fputs(gpt2_text_escape(b + at, run, shown, cap), stdout);
        if ((at += run) < n) printf("\\%c", b[at++]);
    }
    putchar('"');
    free(shown);
}

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) {
    (void)sig;
    interrupted = 1;
}

int cli_interrupted(void *unused) {
    (void)unused;
    return interrupted;
}

volatile sig_atomic_t *cli_interrupt_flag(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return &interrupted;
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
