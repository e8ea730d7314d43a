/* fuzz_common.h — shared helpers for the libFuzzer harnesses in tests/fuzz/.
 *
 * Every harness writes the fuzz input to a real file in a private temporary
 * directory, so the library's file-based loaders (open, fstat, mmap, fread) are
 * what gets exercised. Fixture files come from $GPTSCOPE_FIXTURES (default
 * build/fixtures, made by `make fixtures`) and the GPT-2 tokenizer from
 * $GPT2_TOKENIZER_DIR (default .cache/gpt2-tokenizer).
 */
#ifndef GPTSCOPE_FUZZ_COMMON_H
#define GPTSCOPE_FUZZ_COMMON_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpt2.h"

#define FUZZ_DIE(...)                                   \
    do {                                                \
        fprintf(stderr, "fuzz setup: " __VA_ARGS__);    \
        fputc('\n', stderr);                            \
        abort();                                        \
    } while (0)

/* A harness-detected property violation: abort so libFuzzer saves the input. */
#define FUZZ_CHECK(cond, ...)                                                  \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FUZZ CHECK FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            abort();                                                           \
        }                                                                      \
    } while (0)

static inline const char *fuzz_fixtures(void) {
    const char *d = getenv("GPTSCOPE_FIXTURES");
    return d && *d ? d : "build/fixtures";
}

static inline const char *fuzz_gpt2_tokenizer_dir(void) {
    const char *d = getenv("GPT2_TOKENIZER_DIR");
    return d && *d ? d : ".cache/gpt2-tokenizer";
}

static char fuzz_tmp_made[4][256];

static void fuzz_rm_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char sub[512];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            fuzz_rm_tree(sub);
        }
        if (d) closedir(d);
    }
    remove(path);
}

static void fuzz_rm_tmpdirs(void) {
    for (int i = 0; i < 4; i++)
        if (fuzz_tmp_made[i][0]) fuzz_rm_tree(fuzz_tmp_made[i]);
}

/* A fresh private directory, on tmpfs when there is one; removed at exit. */
static inline char *fuzz_tmpdir(const char *tag) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char *path = malloc(256);
    if (!path) FUZZ_DIE("out of memory");
    snprintf(path, 256, "%s/gptscope-fuzz-%s-XXXXXX", base, tag);
    if (!mkdtemp(path)) FUZZ_DIE("mkdtemp %s failed", path);
    for (int i = 0; i < 4; i++)
        if (!fuzz_tmp_made[i][0]) {
            if (i == 0) atexit(fuzz_rm_tmpdirs);
            snprintf(fuzz_tmp_made[i], sizeof fuzz_tmp_made[i], "%s", path);
            break;
        }
    return path;
}

static inline void fuzz_write(const char *dir, const char *name, const uint8_t *data, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) FUZZ_DIE("cannot write %s", path);
    if (n && fwrite(data, 1, n, f) != n) FUZZ_DIE("short write to %s", path);
    if (fclose(f) != 0) FUZZ_DIE("cannot close %s", path);
}

static inline uint8_t *fuzz_read(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) FUZZ_DIE("cannot read %s (run `make fixtures` first?)", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)len + 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) FUZZ_DIE("cannot read %s", path);
    fclose(f);
    buf[len] = 0;
    *n = (size_t)len;
    return buf;
}

/* Copies src_dir/name to dst_dir/as (as = name when NULL). */
static inline void fuzz_copy(const char *src_dir, const char *name, const char *dst_dir, const char *as) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", src_dir, name);
    size_t n;
    uint8_t *buf = fuzz_read(path, &n);
    fuzz_write(dst_dir, as ? as : name, buf, n);
    free(buf);
}

/* The fixture model NAME (tiny-f32, ...), or the harness cannot run. */
static inline gpt2_model *fuzz_fixture_model(const char *name) {
    char src[512];
    snprintf(src, sizeof src, "%s/models/%s", fuzz_fixtures(), name);
    gpt2_model *m = NULL;
    gpt2_error err;
    if (gpt2_model_load(src, &m, &err) != GPT2_OK) FUZZ_DIE("%s (run `make fixtures`?)", err.msg);
    return m;
}

/* Two files hold the same bytes (a save of a load of a save: the same file). */
static inline void fuzz_check_same_files(const char *a, const char *b, const char *what) {
    size_t na, nb;
    uint8_t *x = fuzz_read(a, &na), *y = fuzz_read(b, &nb);
    FUZZ_CHECK(na == nb && memcmp(x, y, na) == 0, "%s", what);
    free(x);
    free(y);
}

/* The error must be one line that says something. */
static inline void fuzz_check_error(gpt2_status st, const gpt2_error *err) {
    FUZZ_CHECK(st != GPT2_OK, "not an error");
    FUZZ_CHECK(err->status == st, "err.status %d != returned %d", err->status, st);
    FUZZ_CHECK(err->msg[0] != '\0', "empty error message for status %d", st);
    for (const char *p = err->msg; *p; p++) /* one line, and no terminal control bytes */
        FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7F, "control byte 0x%02X in error message: %s",
                   (unsigned char)*p, err->msg);
}

/* Strict UTF-8 (RFC 3629) validity. Returns 1 if valid. */
static inline int fuzz_utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned b = s[i];
        if (b < 0x80) { i++; continue; }
        int len;
        unsigned lo = 0x80, hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF) len = 2;
        else if (b >= 0xE0 && b <= 0xEF) { len = 3; if (b == 0xE0) lo = 0xA0; if (b == 0xED) hi = 0x9F; }
        else if (b >= 0xF0 && b <= 0xF4) { len = 4; if (b == 0xF0) lo = 0x90; if (b == 0xF4) hi = 0x8F; }
        else return 0;
        if (i + (size_t)len > n) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (int k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += (size_t)len;
    }
    return 1;
}

/* decode(ids) into a malloc'd buffer; every id must be a defined token. */
static inline char *fuzz_decode(const gpt2_tokenizer *tok, const int32_t *ids, size_t n_ids, size_t *len) {
    size_t total = 0;
    for (size_t i = 0; i < n_ids; i++) {
        size_t l = 0;
        const char *b = gpt2_tokenizer_token_bytes(tok, ids[i], &l);
        FUZZ_CHECK(b != NULL && l > 0, "encode produced id %d that has no bytes", ids[i]);
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < gpt2_tokenizer_n_vocab(tok), "id %d out of range", ids[i]);
        total += l;
    }
    char *out = malloc(total + 1);
    if (!out) FUZZ_DIE("out of memory");
    size_t w = 0;
    for (size_t i = 0; i < n_ids; i++) {
        size_t l = 0;
        const char *b = gpt2_tokenizer_token_bytes(tok, ids[i], &l);
        memcpy(out + w, b, l);
        w += l;
    }
    *len = w;
    return out;
}

/* Encodes text (with and without GPT2_ENCODE_SPECIAL) and checks the round trip. */
/* A loaded byte-level tokenizer's vocabulary: every byte's single-byte token, and every
 * id's bytes mapping back to that id. */
static inline void fuzz_check_vocab(const gpt2_tokenizer *tok) {
    const int nv = gpt2_tokenizer_n_vocab(tok);
    FUZZ_CHECK(nv >= 256, "n_vocab %d but all 256 bytes are required", nv);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        size_t l;
        const char *s = gpt2_tokenizer_token_bytes(tok, gpt2_tokenizer_token_id(tok, &c, 1), &l);
        FUZZ_CHECK(s && l == 1 && (unsigned char)s[0] == b, "byte %d has no token", b);
    }
    for (int32_t id = -1; id <= nv; id++) {
        size_t l;
        const char *s = gpt2_tokenizer_token_bytes(tok, id, &l);
        if (!s) continue;
        FUZZ_CHECK(l > 0 && gpt2_tokenizer_token_id(tok, s, l) == id, "id %d does not map back", id);
    }
}

static inline void fuzz_roundtrip(const gpt2_tokenizer *tok, const char *text, size_t len) {
    for (int flags = 0; flags <= GPT2_ENCODE_SPECIAL; flags += GPT2_ENCODE_SPECIAL) {
        int32_t *ids = NULL;
        size_t n = 0;
        gpt2_error err;
        gpt2_status st = gpt2_tokenizer_encode(tok, text, len, flags, &ids, &n, &err);
        FUZZ_CHECK(st == GPT2_OK, "encode of %zu bytes failed: %s", len, err.msg);
        FUZZ_CHECK(n <= len, "%zu ids for %zu bytes", n, len);
        size_t dlen = 0;
        char *dec = fuzz_decode(tok, ids, n, &dlen);
        FUZZ_CHECK(dlen == len && memcmp(dec, text, len) == 0,
                   "decode(encode(x)) != x (flags %d, %zu bytes in, %zu out)", flags, len, dlen);
        free(dec);
        free(ids);
    }
}

#endif
