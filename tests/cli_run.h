/* cli_run.h — running the gptscope binary from cmocka tests: captured
 * stdout/stderr and exit status, sanitizer reports turned into failures. */
#ifndef GPTSCOPE_CLI_RUN_H
#define GPTSCOPE_CLI_RUN_H

#include <sys/wait.h>

#include "test_util.h"

typedef struct {
    int status; /* exit status, or 128 + signal */
    char *out, *err;
} run_result;

static inline void run_free(run_result *r) {
    free(r->out);
    free(r->err);
}

/* Runs `$GPTSCOPE_BIN args` through sh (`args` alone with bin 0), stdin
 * from the in_len bytes at in. */
static inline run_result vrun_sh(int bin, const char *in, size_t in_len, const char *fmt, va_list ap) {
    char args[8192], cmd[12288];
    vsnprintf(args, sizeof args, fmt, ap);
    char in_path[] = "/tmp/gptscope-cli-in-XXXXXX", out_path[] = "/tmp/gptscope-cli-out-XXXXXX",
         err_path[] = "/tmp/gptscope-cli-err-XXXXXX";
    int fds[3] = {mkstemp(in_path), mkstemp(out_path), mkstemp(err_path)};
    for (int i = 0; i < 3; i++) assert_true(fds[i] >= 0);
    if (in && in_len) assert_int_equal(write(fds[0], in, in_len), (ssize_t)in_len);
    for (int i = 0; i < 3; i++) close(fds[i]);
    snprintf(cmd, sizeof cmd, "ASAN_OPTIONS=exitcode=99 UBSAN_OPTIONS=exitcode=98 %s %s <%s >%s 2>%s",
             bin ? test_env("GPTSCOPE_BIN") : "", args, in_path, out_path, err_path);
    int ws = system(cmd);
    run_result r = {.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws)};
    r.out = read_file(out_path, NULL);
    r.err = read_file(err_path, NULL);
    unlink(in_path), unlink(out_path), unlink(err_path);
    if (strstr(r.err, "Sanitizer") || strstr(r.err, "runtime error"))
        fail_msg("sanitizer report from `gptscope %s`:\n%s", args, r.err);
    return r;
}

static inline run_result vrun_in(const char *in, size_t in_len, const char *fmt, va_list ap) {
    return vrun_sh(1, in, in_len, fmt, ap);
}

/* Runs a shell command line (a script of the repository's), stdin /dev/null. */
static inline run_result run_script(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    run_result r = vrun_sh(0, NULL, 0, fmt, ap);
    va_end(ap);
    return r;
}

/* Runs `$GPTSCOPE_BIN args` through sh, stdin from stdin_text (or /dev/null). */
static inline run_result run(const char *stdin_text, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    run_result r = vrun_in(stdin_text, stdin_text ? strlen(stdin_text) : 0, fmt, ap);
    va_end(ap);
    return r;
}

/* The same with stdin from in_len bytes (NULs allowed). */
static inline run_result run_in(const char *in, size_t in_len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    run_result r = vrun_in(in, in_len, fmt, ap);
    va_end(ap);
    return r;
}

/* s quoted for sh: '...' with each ' written as '\'' (static buffers, 4 slots). */
static inline const char *sq(const char *s) {
    static char bufs[4][4096];
    static int slot;
    char *out = bufs[slot++ & 3], *o = out;
    *o++ = '\'';
    for (; *s && o < out + 4096 - 8; s++) {
        if (*s == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *s;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

/* Removes dir and everything in it. */
static inline void rm_rf(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", sq(dir));
    assert_int_equal(system(cmd), 0);
}

/* "NAME=HEX" for json_check.py's arg[NAME]: n bytes of s (static buffers, 4 slots). */
static inline const char *hex_let(const char *name, const char *s, size_t n) {
    static char bufs[4][8192];
    static int slot;
    char *out = bufs[slot++ & 3];
    int o = snprintf(out, 64, "%s=", name);
    for (size_t i = 0; i < n && (size_t)o + 3 < sizeof bufs[0]; i++) o += sprintf(out + o, "%02x", (unsigned char)s[i]);
    return out;
}

/* Checks JSON output with an independent parser, Python's json module
 * (tests/ref/json_check.py): json_text must be strict JSON (UTF-8, no NaN or
 * Infinity) and each Python expression, up to the NULL, must be true of it,
 * with j the document and arg[NAME] the bytes named in lets ("NAME=HEX ...",
 * see hex_let). what names the output in failure messages. */
static inline void py_check(const char *what, const char *json_text, const char *lets, ...) {
    char json_path[] = "/tmp/gptscope-json-XXXXXX", out_path[] = "/tmp/gptscope-json-out-XXXXXX";
    int fd = mkstemp(json_path), fo = mkstemp(out_path);
    assert_true(fd >= 0 && fo >= 0);
    assert_int_equal(write(fd, json_text, strlen(json_text)), (ssize_t)strlen(json_text));
    close(fd), close(fo);
    static char cmd[65536];
    int o = snprintf(cmd, sizeof cmd, "%s tests/ref/json_check.py %s %s --", test_env("PYTHON"), json_path, lets);
    va_list ap;
    va_start(ap, lets);
    for (const char *e; (e = va_arg(ap, const char *)) != NULL;)
        o += snprintf(cmd + o, sizeof cmd - (size_t)o, " %s", sq(e));
    va_end(ap);
    assert_true((size_t)o < sizeof cmd - 64);
    snprintf(cmd + o, sizeof cmd - (size_t)o, " >%s 2>&1", out_path);
    int ws = system(cmd);
    char *out = read_file(out_path, NULL);
    unlink(json_path), unlink(out_path);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) fail_msg("%s:\n%s", what, out);
    free(out);
}

static inline char *trim(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ')) s[--n] = '\0';
    return s;
}

#endif
