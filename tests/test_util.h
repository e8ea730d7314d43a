/* test_util.h — small helpers shared by the cmocka test programs (fixture paths, files). */
#ifndef GPTSCOPE_TEST_UTIL_H
#define GPTSCOPE_TEST_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The value of an environment variable the test needs; fails the test if unset. */
static inline const char *test_env(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) fail_msg("environment variable %s is not set (run the tests with `make test`)", name);
    return v;
}

/* path = $GPTSCOPE_FIXTURES/rel (static buffer rotated over 4 slots). */
static inline const char *fixture_path(const char *fmt, ...) {
    static char bufs[4][4096];
    static int slot;
    char *out = bufs[slot++ & 3];
    char rel[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    snprintf(out, 4096, "%s/%s", test_env("GPTSCOPE_FIXTURES"), rel);
    return out;
}

/* Reads a whole file; fails the test if it cannot. Caller frees. */
static inline void *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    if (len) *len = (size_t)n;
    return buf;
}

/* Copies file `from` to `to`, replacing the first occurrence of edit_old
 * (which must be there) by edit_new; edit_old NULL copies it unchanged. */
static inline void copy_file_edited(const char *from, const char *to, const char *edit_old, const char *edit_new) {
    size_t len;
    char *buf = read_file(from, &len);
    FILE *f = fopen(to, "wb");
    assert_non_null(f);
    char *hit = edit_old ? strstr(buf, edit_old) : NULL;
    if (edit_old) assert_non_null(hit);
    if (hit) {
        fwrite(buf, 1, (size_t)(hit - buf), f);
        fputs(edit_new, f);
        fputs(hit + strlen(edit_old), f);
    } else {
        fwrite(buf, 1, len, f);
    }
    fclose(f);
    free(buf);
}

static const char *const model_files[4] = {"config.json", "model.safetensors", "merges.txt", "vocab.json"};

/* Makes directory dir (new, or empty) a copy of fixture model `name`; with swap_ids, the ids
 * of "!" and "\"" in vocab.json swapped: a valid tokenizer, different at ids 0
 * and 1. */
static inline void copy_fixture_model(const char *name, const char *dir, int swap_ids) {
    char from[4200], to[4200];
    if (mkdir(dir, 0755) != 0) assert_int_equal(errno, EEXIST);
    for (int i = 0; i < 4; i++) {
        snprintf(from, sizeof from, "%s", fixture_path("models/%s/%s", name, model_files[i]));
        snprintf(to, sizeof to, "%s/%s", dir, model_files[i]);
        const int edit = swap_ids && i == 3;
        copy_file_edited(from, to, edit ? "{\"!\": 0, \"\\\"\": 1," : NULL, "{\"!\": 1, \"\\\"\": 0,");
    }
}

/* Removes a directory copy_fixture_model made. */
static inline void remove_model_copy(const char *dir) {
    char path[4200];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, model_files[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* Parses whitespace-separated integers from a string into a malloc'd array. */
static inline int32_t *parse_ids(const char *s, size_t *n) {
    size_t cap = 16, k = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    char *end;
    for (;;) {
        long v = strtol(s, &end, 10);
        if (end == s) break;
        if (k == cap) ids = realloc(ids, (cap *= 2) * sizeof *ids);
        ids[k++] = (int32_t)v;
        s = end;
    }
    *n = k;
    return ids;
}

#ifdef GPT2_CONTEXT_H
/* An eval that must succeed. */
static inline void eval_ok(gpt2_context *ctx, const int32_t *ids, int n) {
    gpt2_error err;
    if (gpt2_context_eval(ctx, ids, n, &err) != GPT2_OK) fail_msg("eval: %s", err.msg);
}
#endif

/* The largest |a[i] - b[i]|; NaN anywhere makes it NaN, which fails every "<" check. */
static inline double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        if (d != d) return d; /* NaN: the caller's "<" check fails */
        d = d < 0 ? -d : d;
        if (d > m) m = d;
    }
    return m;
}

#ifdef GPT2_SAMPLER_H
/* A sampler that must be created (the tests' shorthand for gpt2_sampler_new). */
static inline gpt2_sampler *new_sampler(gpt2_sampler_params p, int n_vocab) {
    gpt2_sampler *s;
    gpt2_error err;
    if (gpt2_sampler_new(p, n_vocab, &s, &err) != GPT2_OK) fail_msg("sampler_new: %s", err.msg);
    return s;
}
#endif

#endif
