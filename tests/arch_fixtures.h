/* arch_fixtures.h — the arch fixtures' tables and a logits capture, shared by
 * test_arch.c and test_convert.c (make_arch_fixtures.py writes the tables). */
#ifndef GPTSCOPE_ARCH_FIXTURES_H
#define GPTSCOPE_ARCH_FIXTURES_H

#include "gpt2.h"
#include "test_util.h"

/* A row of arch/cases.tsv (case, model_type, its GGUF file or "-", that
 * file's reference) or of arch/gguf.tsv (file, case, reference, type). */
typedef struct {
    char a[64], b[64], c[96], d[64];
} row;

static inline int read_rows(const char *file, row *out, int cap) {
    size_t len;
    char *text = read_file(fixture_path("arch/%s", file), &len);
    int n = 0;
    for (char *line = strtok(text, "\n"); line && n < cap; line = strtok(NULL, "\n"))
        if (line[0] != '#' && sscanf(line, "%63s %63s %95s %63s", out[n].a, out[n].b, out[n].c, out[n].d) == 4) n++;
    free(text);
    assert_true(n > 0);
    return n;
}

/* every position's logits of one batch (gpt2_hooks.on_logits) */
typedef struct {
    float *all;
    int V;
} capture;

static inline void on_logits(void *ud, int pos, const float *logits, int n) {
    capture *c = ud;
    assert_int_equal(n, c->V);
    memcpy(c->all + (size_t)pos * n, logits, (size_t)n * sizeof(float));
}

#endif
