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

/* Runs `$GPTSCOPE_BIN args` through sh, stdin from stdin_text (or /dev/null). */
static inline run_result run(const char *stdin_text, const char *fmt, ...) {
    char args[8192], cmd[12288];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    char in_path[] = "/tmp/gptscope-cli-in-XXXXXX", out_path[] = "/tmp/gptscope-cli-out-XXXXXX",
         err_path[] = "/tmp/gptscope-cli-err-XXXXXX";
    int fds[3] = {mkstemp(in_path), mkstemp(out_path), mkstemp(err_path)};
    for (int i = 0; i < 3; i++) assert_true(fds[i] >= 0);
    if (stdin_text) assert_int_equal(write(fds[0], stdin_text, strlen(stdin_text)), (ssize_t)strlen(stdin_text));
    for (int i = 0; i < 3; i++) close(fds[i]);
    snprintf(cmd, sizeof cmd, "ASAN_OPTIONS=exitcode=99 UBSAN_OPTIONS=exitcode=98 %s %s <%s >%s 2>%s",
             test_env("GPTSCOPE_BIN"), args, in_path, out_path, err_path);
    int ws = system(cmd);
    run_result r = {.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws)};
    r.out = read_file(out_path, NULL);
    r.err = read_file(err_path, NULL);
    unlink(in_path), unlink(out_path), unlink(err_path);
    if (strstr(r.err, "Sanitizer") || strstr(r.err, "runtime error"))
        fail_msg("sanitizer report from `gptscope %s`:\n%s", args, r.err);
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

static inline char *trim(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ')) s[--n] = '\0';
    return s;
}

#endif
