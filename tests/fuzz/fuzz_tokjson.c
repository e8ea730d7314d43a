/* fuzz_tokjson.c — the input is a tokenizer.json (gpt2_tokenizer_load_json).
 *
 * It must fail with a one-line error naming the file, or give a tokenizer for
 * which decode(encode(x)) == x on a few fixed strings and on the input taken as
 * text, with and without special tokens (for an NFC tokenizer: the decoded
 * text encodes and decodes to itself), every byte has its token, and every id
 * maps back to itself.
 */
#include "fuzz_common.h"

static char *g_dir, g_path[600];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    g_dir = fuzz_tmpdir("tokjson");
    snprintf(g_path, sizeof g_path, "%s/tokenizer.json", g_dir);
    return 0;
}

static const char *const SAMPLES[] = {
    "", "a", "Hello world", "the quick brown fox's 123 jumps!!\n\n  ok", "<s>x</s><|endoftext|>",
    "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", "\xFF\xFE\x80 bad \xC3", "IT'S 1234567 \r\n\r\n  \t",
};

/* A normalizing tokenizer's ids decode to the normalized text, which encodes to the same
 * ids again (NFC is idempotent). */
static void normalized_roundtrip(const gpt2_tokenizer *tok, const char *text, size_t len) {
    for (int flags = 0; flags <= GPT2_ENCODE_SPECIAL; flags += GPT2_ENCODE_SPECIAL) {
        int32_t *ids = NULL, *again = NULL;
        size_t n = 0, m = 0, dlen = 0, dlen2 = 0;
        gpt2_error err;
        FUZZ_CHECK(gpt2_tokenizer_encode(tok, text, len, flags, &ids, &n, &err) == GPT2_OK, "encode: %s", err.msg);
        char *dec = fuzz_decode(tok, ids, n, &dlen);
        FUZZ_CHECK(gpt2_tokenizer_encode(tok, dec, dlen, flags, &again, &m, &err) == GPT2_OK, "encode: %s", err.msg);
        char *dec2 = fuzz_decode(tok, again, m, &dlen2);
        FUZZ_CHECK(dlen == dlen2 && memcmp(dec, dec2, dlen) == 0, "normalized text is not stable (flags %d)", flags);
        free(dec), free(dec2), free(ids), free(again);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(g_dir, "tokenizer.json", data, size);
    gpt2_tokenizer *tok = NULL;
    gpt2_error err;
    gpt2_status st = gpt2_tokenizer_load_json(g_path, &tok, &err);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "%s\n", st ? err.msg : "loaded");
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(tok == NULL, "failed load left a tokenizer");
        FUZZ_CHECK(strstr(err.msg, "tokenizer.json") != NULL || st == GPT2_ERR_NOMEM, "error does not name the file: %s",
                   err.msg);
        return 0;
    }
    fuzz_check_vocab(tok);
    void (*roundtrip)(const gpt2_tokenizer *, const char *, size_t) =
        gpt2_tokenizer_normalizer(tok) ? normalized_roundtrip : fuzz_roundtrip;
    for (size_t i = 0; i < sizeof SAMPLES / sizeof *SAMPLES; i++) roundtrip(tok, SAMPLES[i], strlen(SAMPLES[i]));
    roundtrip(tok, (const char *)data, size);
    gpt2_tokenizer_free(tok);
    return 0;
}
