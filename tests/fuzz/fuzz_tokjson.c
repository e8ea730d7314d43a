/* fuzz_tokjson.c — the input is a tokenizer.json (gpt2_tokenizer_load_json).
 *
 * It must fail with a one-line error naming the file, or give a tokenizer for
 * which decode(encode(x)) == x on a few fixed strings and on the input taken as
 * text, with and without special tokens (for an NFC tokenizer: the decoded
 * text encodes and decodes to itself), every byte has its token, and every id
 * maps back to itself. A SentencePiece-style one (byte_fallback): every byte
 * has a token, every id's bytes name a token with those bytes and its piece
 * names it; the ids of x decode to x but for spaces (each section's prefix;
 * U+2581, which decodes as one), and gpt2_tokenizer_decode gives their bytes
 * less the one leading space of the space prefix.
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

static void spm_check_vocab(const gpt2_tokenizer *tok) {
    const int nv = gpt2_tokenizer_n_vocab(tok);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        size_t l;
        const char *s = gpt2_tokenizer_token_bytes(tok, gpt2_tokenizer_token_id(tok, &c, 1), &l);
        FUZZ_CHECK(s && l == 1 && (unsigned char)s[0] == b, "byte %d has no token", b);
    }
    for (int32_t id = 0; id < nv; id++) {
        size_t l, m, pl;
        const char *s = gpt2_tokenizer_token_bytes(tok, id, &l), *p = gpt2_tokenizer_token_piece(tok, id, &pl);
        if (!s) continue;
        FUZZ_CHECK(l > 0 && p && pl > 0 && gpt2_tokenizer_piece_id(tok, p, pl) == id, "id %d's piece does not name it", id);
        const int32_t again = gpt2_tokenizer_token_id(tok, s, l);
        const char *t = gpt2_tokenizer_token_bytes(tok, again, &m);
        FUZZ_CHECK(t && m == l && memcmp(s, t, l) == 0, "id %d's bytes name no token with those bytes", id);
    }
}

/* s less its spaces and U+2581s, into out (n bytes suffice). */
static size_t squeeze(const char *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 2 < n && !memcmp(s + i, "\xE2\x96\x81", 3)) i += 2;
        else if (s[i] != ' ') out[k++] = s[i];
    }
    return k;
}

static void spm_roundtrip(const gpt2_tokenizer *tok, const char *text, size_t len) {
    for (int flags = 0; flags <= GPT2_ENCODE_SPECIAL; flags += GPT2_ENCODE_SPECIAL) {
        int32_t *ids = NULL;
        size_t n = 0, dlen = 0, tlen = 0;
        gpt2_error err;
        FUZZ_CHECK(gpt2_tokenizer_encode(tok, text, len, flags, &ids, &n, &err) == GPT2_OK, "encode: %s", err.msg);
        FUZZ_CHECK(n <= 6 * len + 3, "%zu ids for %zu bytes", n, len); /* a space: "▁" or its 3 bytes; a prefix */
        char *raw = fuzz_decode(tok, ids, n, &dlen), *dec = NULL;
        FUZZ_CHECK(gpt2_tokenizer_decode(tok, ids, n, &dec, &tlen, &err) == GPT2_OK, "decode: %s", err.msg);
        const size_t skip = gpt2_tokenizer_space_prefix(tok) && dlen > 0 && raw[0] == ' ';
        FUZZ_CHECK(tlen == dlen - skip && memcmp(dec, raw + skip, tlen) == 0 && dec[tlen] == '\0',
                   "gpt2_tokenizer_decode differs from the ids' bytes");
        char *a = malloc(len + 1), *b = malloc(dlen + 1);
        if (!a || !b) FUZZ_DIE("out of memory");
        const size_t na = squeeze(text, len, a), nb = squeeze(raw, dlen, b);
        FUZZ_CHECK(na == nb && memcmp(a, b, na) == 0, "decode(encode(x)) != x but for spaces (flags %d)", flags);
        free(a), free(b), free(raw), free(dec), free(ids);
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
    const int spm = !strcmp(gpt2_tokenizer_kind(tok), "SentencePiece BPE");
    if (spm) spm_check_vocab(tok);
    else fuzz_check_vocab(tok);
    void (*roundtrip)(const gpt2_tokenizer *, const char *, size_t) =
        spm ? spm_roundtrip : gpt2_tokenizer_normalizer(tok) ? normalized_roundtrip : fuzz_roundtrip;
    for (size_t i = 0; i < sizeof SAMPLES / sizeof *SAMPLES; i++) roundtrip(tok, SAMPLES[i], strlen(SAMPLES[i]));
    roundtrip(tok, (const char *)data, size);
    gpt2_tokenizer_free(tok);
    return 0;
}
