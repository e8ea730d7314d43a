/* fuzz_tokfile.c — the input is vocab.json (FUZZ_VOCAB) or merges.txt (FUZZ_MERGES).
 *
 * Built twice by the Makefile: fuzz_vocab and fuzz_merges. The other tokenizer
 * file is the tiny-f32 fixture's. gpt2_tokenizer_load must fail with a one-line
 * error naming the file, or give a tokenizer for which decode(encode(x)) == x on
 * a few fixed strings and on the input itself taken as text.
 */
#include "fuzz_common.h"

#if defined(FUZZ_VOCAB)
#define FUZZED "vocab.json"
#define OTHER "merges.txt"
#elif defined(FUZZ_MERGES)
#define FUZZED "merges.txt"
#define OTHER "vocab.json"
#else
#error "define FUZZ_VOCAB or FUZZ_MERGES"
#endif

static char *g_dir;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char src[512];
    snprintf(src, sizeof src, "%s/models/tiny-f32", fuzz_fixtures());
    g_dir = fuzz_tmpdir("tok");
    fuzz_copy(src, OTHER, g_dir, NULL);
    return 0;
}

static const char *const SAMPLES[] = {
    "", "a", "Hello world", "the quick brown fox's 123 jumps!!\n\n  ok",
    "<|endoftext|>x<|endoftext|>", "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", "\xFF\xFE\x80 bad \xC3",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", " \t\r\n\x0B\x0C\x00 x",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(g_dir, FUZZED, data, size);
    gpt2_tokenizer *tok = NULL;
    gpt2_error err;
    gpt2_status st = gpt2_tokenizer_load(g_dir, &tok, &err);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "%s\n", st ? err.msg : "loaded");
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(tok == NULL, "failed load left a tokenizer");
        /* a vocabulary that lacks a merge's parts is reported against merges.txt */
        FUZZ_CHECK(strstr(err.msg, FUZZED) != NULL || (strstr(err.msg, OTHER) && strcmp(FUZZED, "vocab.json") == 0),
                   "error does not name " FUZZED ": %s", err.msg);
        return 0;
    }
    fuzz_check_vocab(tok);
    for (size_t i = 0; i < sizeof SAMPLES / sizeof *SAMPLES; i++)
        fuzz_roundtrip(tok, SAMPLES[i], i == 8 ? 9 : strlen(SAMPLES[i]));
    fuzz_roundtrip(tok, (const char *)data, size);
    gpt2_tokenizer_free(tok);
    return 0;
}
