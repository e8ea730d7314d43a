/* common.c — what the subcommands share beyond options (options.c): messages,
 * model loading, bounded input, the prompt's one forward pass, Ctrl-C and
 * SIGBUS handling. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

static int g_out_of_memory; /* an error said "out of memory" */

int cli_out_of_memory(void) { return g_out_of_memory; }

void cli_error(const char *fmt, ...) {
    char raw[4096], shown[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    if (strstr(raw, "out of memory") || strstr(raw, strerror(ENOMEM))) g_out_of_memory = 1; /* how such messages say it */
    /* paths and values from argv and files: no raw control byte reaches the terminal */
    fprintf(stderr, "gptscope: %s\n", gpt2_text_escape(raw, strlen(raw), shown, sizeof shown));
}

const char *cli_show(const char *s) {
    static char bufs[4][1024];
    static int slot;
    return gpt2_text_escape(s, strlen(s), bufs[slot++ & 3], sizeof bufs[0]);
}

#ifndef GPTSCOPE_DATADIR
#define GPTSCOPE_DATADIR "/usr/local/share/gptscope"
#endif

int cli_data_path(const char *rel, char *out, size_t cap) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = n > 0 ? (exe[n] = '\0', strrchr(exe, '/')) : NULL;
    if (slash) *slash = '\0';
    /* beside a build that was not installed (or one level up: build-san/);
     * the directory make install compiled in; a tree installed and moved
     * elsewhere (bin/../share); the working directory */
    const char *fmt[] = {"%s/%s", "%s/../%s", "%s/%s", "%s/../share/gptscope/%s", "%s%s"};
    const char *base[] = {slash ? exe : NULL, slash ? exe : NULL, GPTSCOPE_DATADIR, slash ? exe : NULL, ""};
    for (int i = 0; i < 5; i++)
        if (base[i] && snprintf(out, cap, fmt[i], base[i], rel) < (int)cap && access(out, F_OK) == 0) return 1;
    return 0;
}

const char *cli_model_dir(const char *opt_m) {
    if (opt_m) return opt_m;
    const char *env = getenv("GPTSCOPE_MODEL");
    if (env && *env) return env;
    static char path[PATH_MAX + 64];
    if (cli_data_path("models/shakespeare", path, sizeof path)) return path;
    cli_error("no model given, and the bundled models/shakespeare is not beside gptscope, in %s or here: "
              "give one with -m PATH or $GPTSCOPE_MODEL (make install puts the bundled models there)",
              GPTSCOPE_DATADIR);
    return NULL;
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

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* theirs report the crash */
/* A crash (SIGSEGV, SIGFPE, SIGILL, SIGABRT) while the chat holds the
 * terminal: the terminal back and the last words (where the conversation is
 * kept), then the signal's own end, core dump included. */
static void on_crash(int sig) {
    if (g_emergency) g_emergency();
    cli_say("gptscope: crashed (a bug: please report it with the --log)\n");
    signal(sig, SIG_DFL);
    raise(sig);
}
#endif

void cli_on_fatal_signal(void (*restore)(void)) {
    g_emergency = restore;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* theirs report the crash */
    static const int sigs[] = {SIGSEGV, SIGFPE, SIGILL, SIGABRT};
    struct sigaction sa = {.sa_handler = on_crash};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaction(sigs[i], &sa, NULL);
#endif
}

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

gpt2_model_params cli_model_params(void) {
    static char tok[PATH_MAX + 32];
    static int found = -1;
    if (found < 0) found = cli_data_path("tokenizers/gpt2", tok, sizeof tok);
    gpt2_model_params p = gpt2_model_default_params();
    p.gpt2_tokenizer_dir = found ? tok : NULL;
    return p;
}

/* "loading NAME: 40%" on a terminal's stderr once a load has taken 0.4 s
 * (a large model from a cold disk), erased when it ends. */
typedef struct {
    const char *name;
    double t0;
    int shown;
} load_meter;

static int show_load(void *ud, int done, int total) {
    load_meter *lm = ud;
    if (cli_now() - lm->t0 < 0.4) return 0;
    fprintf(stderr, "\rloading %s: %d%%\033[K", lm->name, (int)(100.0 * done / total));
    lm->shown = 1;
    return 0;
}

gpt2_model *cli_load_model(const char *dir) {
    if (!dir) return NULL; /* cli_model_dir said why */
    cli_mark_loading(dir);
    gpt2_model *m = NULL;
    gpt2_error err;
    gpt2_model_params p = cli_model_params();
    char shown[1024];
    load_meter lm = {gpt2_text_escape(dir, strlen(dir), shown, sizeof shown), cli_now(), 0};
    if (isatty(STDERR_FILENO)) p.progress = show_load, p.user_data = &lm;
    gpt2_status st = gpt2_model_load_with(dir, p, &m, &err);
    if (lm.shown) fprintf(stderr, "\r\033[K");
    cli_mark_loading(NULL);
    if (st != GPT2_OK) {
        cli_error("%s", err.msg);
        return NULL;
    }
    return m;
}

gpt2_model *cli_load_model_as(const char *dir, const char *quantize) {
    gpt2_model *m = cli_load_model(dir);
    gpt2_error err = {.msg = "--quantize: unknown format"};
    gpt2_dtype dt = GPT2_DTYPE_Q8;
    if (m && quantize && (!cli_quantize_dtype(quantize, &dt) || gpt2_model_quantize(m, dt, &err) != GPT2_OK)) {
        cli_error("%s", err.msg);
        gpt2_model_free(m);
        return NULL;
    }
    return m;
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
    /* O_NONBLOCK: a FIFO nobody writes to must not block the open (where
     * Ctrl-C is not seen); it is cleared again, so a pipe's reads wait for
     * its writer, and one with no writer reads as empty at once. */
    int fd = path ? open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC) : -1;
    if (path && (fd < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || !(f = own = fdopen(fd, "rb")))) {
        cli_error("%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
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
    if (buf && !bad && n == 0 && path && S_ISFIFO(st.st_mode)) { /* st: the fstat above */
        cli_error("%s: a FIFO that no program writes to (nothing to read)", name);
        free(buf);
        return NULL;
    }
    if (!buf || bad) {
        if (buf && err == EINTR) cli_error("%s: interrupted while reading", name);
        else if (buf) cli_error("%s: read error: %s", name, strerror(err));
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

static int g_out_errno; /* the first failed write to stdout's errno (0: none) */

int cli_stdout_flush(void) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    if (!g_out_errno) g_out_errno = errno ? errno : EIO;
    return -1;
}

int cli_stdout_errno(void) { return g_out_errno; }

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
    sigaction(SIGHUP, &sa, NULL); /* a closed terminal or ssh: stop as cleanly as Ctrl-C */
    return &interrupted;
}

gpt2_context *cli_context_new(const gpt2_model *m, int n_threads) { return cli_context_new_ctx(m, n_threads, 0); }

gpt2_context *cli_context_new_ctx(const gpt2_model *m, int n_threads, int n_ctx) {
    gpt2_context *ctx = NULL;
    gpt2_error err;
    gpt2_context_params cp = gpt2_context_default_params();
    cp.n_threads = n_threads;
    cp.n_ctx = n_ctx;
    if (gpt2_context_new(m, cp, &ctx, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return NULL;
    }
    return ctx;
}

volatile sig_atomic_t *cli_watch_interrupt(gpt2_context *ctx, const gpt2_hooks *hooks) {
    volatile sig_atomic_t *flag = cli_interrupt_flag();
    gpt2_hooks h = hooks ? *hooks : (gpt2_hooks){0};
    h.cancel = cli_interrupted;
    gpt2_context_set_hooks(ctx, &h); /* the context keeps a copy */
    return flag;
}

int cli_encode_prompt(const gpt2_model *m, const char *prompt, int flags, int32_t **ids, size_t *n) {
    if (!cli_encode(gpt2_model_tokenizer(m), prompt, strlen(prompt), flags | GPT2_ENCODE_BOS, ids, n)) return 0;
    if (*n == 0) {
        cli_error("the prompt is empty: at least one token is needed");
        return 0;
    }
    return 1;
}

gpt2_context *cli_eval_prompt(const gpt2_model *m, int n_threads, const char *ablate, const int32_t *ids, size_t n,
                              const gpt2_hooks *hooks, int *rc) {
    *rc = EXIT_ERR;
    gpt2_context *ctx = cli_context_new(m, n_threads);
    if (ctx && !cli_context_ablate(ctx, ablate)) gpt2_context_free(ctx), ctx = NULL;
    if (!ctx) return NULL;
    cli_watch_interrupt(ctx, hooks);
    gpt2_error err;
    gpt2_status st = gpt2_context_eval(ctx, ids, (int)n, &err);
    if (st == GPT2_OK) return ctx;
    if (st == GPT2_CANCELLED) {
        fprintf(stderr, "gptscope: interrupted while evaluating the %zu-token prompt; nothing printed\n", n);
        *rc = 130;
    } else
        cli_error("%s", err.msg);
    gpt2_context_free(ctx);
    return NULL;
}

int cli_prompt_pos(long pos, int given, int T, int *out) {
    const long p = !given ? T - 1 : pos < 0 ? T + pos : pos;
    if (p < 0 || p >= T) {
        cli_error("--pos %ld: the prompt has %d tokens: positions 0..%d, or -%d..-1 counting from the end", pos, T,
                  T - 1, T);
        return 0;
    }
    *out = (int)p;
    return 1;
}

void cli_print_token(const gpt2_tokenizer *tok, int32_t id) {
    size_t bl = 0;
    const char *b = gpt2_tokenizer_token_bytes(tok, id, &bl);
    cli_print_piece(b ? b : "", b ? bl : 0);
}

int cli_json_print(cJSON *root) {
    char *text = root && !viz_json_failed() ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        cli_error("out of memory building the JSON output");
        return EXIT_ERR;
    }
    puts(text);
    cJSON_free(text);
    return EXIT_OK;
}

int cli_opt_table_file(const cli_opt *o, const char *arg, void *value) {
    const viz_format f = viz_format_of(arg);
    if (f != VIZ_FORMAT_JSON && f != VIZ_FORMAT_CSV) {
        cli_error("--%s %s: a table is written as .json or .csv (the name's ending says which)", o->name, arg);
        return 0;
    }
    *(const char **)value = arg;
    return 1;
}

int cli_opt_picture_file(const cli_opt *o, const char *arg, void *value) {
    const viz_format want = strcmp(o->name, "png") == 0 ? VIZ_FORMAT_PNG : VIZ_FORMAT_SVG;
    if (viz_format_of(arg) != want) {
        cli_error("--%s %s: the file's name must end in .%s", o->name, arg, o->name);
        return 0;
    }
    if (want == VIZ_FORMAT_PNG && !viz_png_available()) {
        cli_error("--png is unavailable: this gptscope was built without cairo (apt-get install libcairo2-dev, then "
                  "rebuild); --svg works without it");
        return 0;
    }
    *(const char **)value = arg;
    return 1;
}

int cli_export(const char *path, const viz_table *t) {
    gpt2_error err;
    if (viz_export(path, t, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return 0;
    }
    return 1;
}

/* A token named by its text (opt "--token") or id: *id, or -1 when neither
 * was given; 0 after saying why it names no one token of the model. */
int cli_single_token(const gpt2_model *m, const char *opt, const char *text, int id_given, long id, int32_t *out) {
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    const int V = gpt2_model_config(m)->n_vocab;
    *out = -1;
    if (id_given) {
        if (id >= V) {
            cli_error("%s-id %ld: outside the vocabulary of model %s (ids 0..%d)", opt, id, gpt2_model_name(m), V - 1);
            return 0;
        }
        *out = (int32_t)id;
        return 1;
    }
    if (!text) return 1;
    int32_t *ids = NULL;
    size_t n = 0;
    /* the text as it reads inside a text: no BOS, no SentencePiece prefix */
    if (!cli_encode(tok, text, strlen(text), GPT2_ENCODE_SPECIAL | GPT2_ENCODE_CONTINUE, &ids, &n)) return 0;
    if (n == 1) *out = ids[0];
    else if (n == 0)
        cli_error("%s '': the text is empty: give one token's text (' cat', with its leading space)", opt);
    else {
        char shown[512];
        gpt2_text_escape(text, strlen(text), shown, sizeof shown);
        fprintf(stderr, "gptscope: %s '%s' is %zu tokens (", opt, shown, n);
        for (size_t i = 0; i < n && i < 8; i++) {
            size_t bl = 0;
            const char *b = gpt2_tokenizer_token_bytes(tok, ids[i], &bl);
            gpt2_text_escape(b ? b : "", b ? bl : 0, shown, sizeof shown);
            fprintf(stderr, "%s\"%s\"", i ? " " : "", shown);
        }
        fprintf(stderr, "%s), not one: give a single token's text, or --%s-id\n", n > 8 ? " ..." : "",
                opt + 2);
    }
    free(ids);
    return n == 1;
}
