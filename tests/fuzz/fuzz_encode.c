/* fuzz_encode.c — the input is text for the real GPT-2 tokenizer (and a UTF-8 stream).
 *
 * 1. decode(encode(x)) == x for any bytes x, with and without GPT2_ENCODE_SPECIAL.
 * 2. gpt2_utf8_stream: the input's tokens pushed one at a time, and the raw input
 *    cut at fuzzer-chosen points, both give strictly valid UTF-8 and the same
 *    output as one single push, in a buffer of exactly the documented size.
 */
#include "fuzz_common.h"

static gpt2_tokenizer *g_tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    gpt2_error err;
    if (gpt2_tokenizer_load(fuzz_gpt2_tokenizer_dir(), &g_tok, &err) != GPT2_OK)
        FUZZ_DIE("GPT-2 tokenizer: %s (sh scripts/fetch-gpt2-tokenizer.sh .cache/gpt2-tokenizer)", err.msg);
    return 0;
}

/* Pushes pieces[i] of lens[i] bytes, then flushes; returns the malloc'd output. */
static char *stream_all(const char *const *pieces, const size_t *lens, size_t n, size_t *out_len) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += 3 * (lens[i] + 4);
    char *out = malloc(total + 12 + 1);
    if (!out) FUZZ_DIE("out of memory");
    gpt2_utf8_stream s = {0};
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        /* exactly the documented room, in its own allocation, so ASan sees an overrun */
        size_t room = 3 * (lens[i] + 4);
        char *buf = malloc(room);
        if (!buf) FUZZ_DIE("out of memory");
        size_t k = gpt2_utf8_stream_push(&s, pieces[i], lens[i], buf);
        FUZZ_CHECK(k <= room, "push wrote %zu of %zu", k, room);
        memcpy(out + w, buf, k);
        w += k;
        free(buf);
    }
    char *tail = malloc(12);
    size_t k = gpt2_utf8_stream_flush(&s, tail);
    FUZZ_CHECK(k <= 12, "flush wrote %zu", k);
    memcpy(out + w, tail, k);
    free(tail);
    w += k;
    *out_len = w;
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    fuzz_roundtrip(g_tok, text, size);

    /* reference: the whole input in one push */
    size_t ref_len;
    const char *whole[1] = {text};
    char *ref = stream_all(whole, &size, 1, &ref_len);
    FUZZ_CHECK(fuzz_utf8_valid((const unsigned char *)ref, ref_len), "stream output is not UTF-8");
    /* valid UTF-8 input passes through unchanged */
    if (fuzz_utf8_valid(data, size))
        FUZZ_CHECK(ref_len == size && memcmp(ref, text, size) == 0, "valid UTF-8 was altered");

    /* token by token, as generation streams it */
    int32_t *ids = NULL;
    size_t n = 0;
    gpt2_error err;
    FUZZ_CHECK(gpt2_tokenizer_encode(g_tok, text, size, 0, &ids, &n, &err) == GPT2_OK, "%s", err.msg);
    const size_t cap = (n > size ? n : size) + 1; /* tokens, or cuts: at most one per byte */
    const char **pieces = malloc(cap * sizeof *pieces);
    size_t *lens = malloc(cap * sizeof *lens);
    if (!pieces || !lens) FUZZ_DIE("out of memory");
    for (size_t i = 0; i < n; i++) pieces[i] = gpt2_tokenizer_token_bytes(g_tok, ids[i], &lens[i]);
    size_t got_len;
    char *got = stream_all(pieces, lens, n, &got_len);
    FUZZ_CHECK(got_len == ref_len && memcmp(got, ref, ref_len) == 0, "token-wise stream differs");
    free(got);

    /* cut at positions chosen by the input's own bytes (1..8 bytes per piece) */
    size_t np = 0;
    for (size_t pos = 0; pos < size; np++) {
        size_t step = 1 + data[pos] % 8;
        if (step > size - pos) step = size - pos;
        pieces[np] = text + pos;
        lens[np] = step;
        pos += step;
    }
    got = stream_all(pieces, lens, np, &got_len);
    FUZZ_CHECK(got_len == ref_len && memcmp(got, ref, ref_len) == 0, "chunked stream differs");
    free(got);
    free(pieces);
    free(lens);
    free(ids);
    free(ref);
    return 0;
}
