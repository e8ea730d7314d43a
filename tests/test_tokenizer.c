/* test_tokenizer.c — GPT-2 BPE tokenizer: exact ids against two references, round trips,
 * special tokens, the streaming UTF-8 decoder and the loader's error messages.
 *
 * Environment (make test sets both):
 *   GPT2_TOKENIZER_DIR  GPT-2's encoder.json + vocab.bpe (scripts/fetch-gpt2-tokenizer.sh)
 *   GPTSCOPE_FIXTURES   build/fixtures: models/tiny-f32/{vocab.json,merges.txt} and
 *                       tokenizer/{gpt2_py,gpt2_js,tiny_py}.tsv (make fixtures)
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpt2_tokenizer.h"

/* ---- helpers -------------------------------------------------------------------------- */

static const char *env_dir(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) fail_msg("%s is not set (run the tests with `make test`, which sets it)", name);
    return v;
}

static gpt2_tokenizer *load_or_fail(const char *dir) {
    gpt2_tokenizer *t = NULL;
    gpt2_error err;
    gpt2_status st = gpt2_tokenizer_load(dir, &t, &err);
    if (st != GPT2_OK) fail_msg("loading the tokenizer in %s: %s", dir, err.msg);
    assert_non_null(t);
    return t;
}

static gpt2_tokenizer *g_gpt2, *g_tiny; /* loaded once, freed by the group teardown */

static gpt2_tokenizer *gpt2_tok(void) {
    if (!g_gpt2) g_gpt2 = load_or_fail(env_dir("GPT2_TOKENIZER_DIR"));
    return g_gpt2;
}

static gpt2_tokenizer *tiny_tok(void) {
    if (!g_tiny) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/models/tiny-f32", env_dir("GPTSCOPE_FIXTURES"));
        g_tiny = load_or_fail(dir);
    }
    return g_tiny;
}

static int teardown_group(void **state) {
    gpt2_tokenizer_free(g_gpt2);
    gpt2_tokenizer_free(g_tiny);
    g_gpt2 = g_tiny = NULL;
    return 0;
}

static int32_t *encode(const gpt2_tokenizer *t, const char *text, size_t len, int flags, size_t *n) {
    int32_t *ids = NULL;
    gpt2_error err;
    gpt2_status st = gpt2_tokenizer_encode(t, text, len, flags, &ids, n, &err);
    if (st != GPT2_OK) fail_msg("encode of %zu bytes failed: %s", len, err.msg);
    return ids;
}

/* Concatenated token bytes (malloc'd, NUL-terminated); every id must be defined. */
static char *decode(const gpt2_tokenizer *t, const int32_t *ids, size_t n, size_t *len) {
    size_t cap = 16, k = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    for (size_t i = 0; i < n; i++) {
        size_t m;
        const char *b = gpt2_tokenizer_token_bytes(t, ids[i], &m);
        if (!b) fail_msg("id %d (position %zu) has no bytes", (int)ids[i], i);
        while (k + m + 1 > cap) assert_non_null(out = realloc(out, cap *= 2));
        memcpy(out + k, b, m);
        k += m;
    }
    out[k] = '\0';
    *len = k;
    return out;
}

static void assert_round_trip(const gpt2_tokenizer *t, const char *text, size_t len) {
    size_t n, m;
    int32_t *ids = encode(t, text, len, 0, &n);
    char *back = decode(t, ids, n, &m);
    assert_int_equal(m, len);
    assert_memory_equal(back, text, len);
    free(back);
    free(ids);
}

static void assert_ids(const gpt2_tokenizer *t, const char *text, const int32_t *want, size_t n_want) {
    size_t n;
    int32_t *ids = encode(t, text, strlen(text), 0, &n);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], want[i]);
    free(ids);
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s (run `make fixtures`)", path);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (size_t got; (got = fread(buf + n, 1, cap - 1 - n, f)) > 0;) {
        n += got;
        if (n == cap - 1) assert_non_null(buf = realloc(buf, cap *= 2));
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void write_file(const char *dir, const char *name, const char *data, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void remove_file(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    remove(path);
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Strictly valid UTF-8? (An oracle written apart from the library's decoder.) */
static int valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t c = s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (k == 0 || i + k > n) return 0;
        if (k > 1) c &= 0x7F >> k;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] >> 6) != 2) return 0;
            c = (c << 6) | (s[i + j] & 0x3F);
        }
        static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (c < min[k] || c > 0x10FFFF || (c >= 0xD800 && c < 0xE000)) return 0;
        i += k;
    }
    return 1;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) { /* xorshift64*, uniform enough for test data */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32) % n;
}

static size_t put_utf8(unsigned char *o, uint32_t c) {
    if (c < 0x80) { o[0] = (unsigned char)c; return 1; }
    if (c < 0x800) { o[0] = 0xC0 | c >> 6; o[1] = 0x80 | (c & 63); return 2; }
    if (c < 0x10000) { o[0] = 0xE0 | c >> 12; o[1] = 0x80 | (c >> 6 & 63); o[2] = 0x80 | (c & 63); return 3; }
    o[0] = 0xF0 | c >> 18; o[1] = 0x80 | (c >> 12 & 63); o[2] = 0x80 | (c >> 6 & 63); o[3] = 0x80 | (c & 63);
    return 4;
}

/* Random bytes that mix ASCII, valid multi-byte characters, truncated, overlong and surrogate
 * sequences, stray continuation bytes and "<|endoftext|>". Writes at most 16 * parts bytes. */
static size_t random_text(unsigned char *o, int parts) {
    size_t n = 0;
    for (int p = 0; p < parts; p++) {
        uint32_t c;
        size_t k;
        switch (rnd(9)) {
        case 0: case 1: o[n++] = (unsigned char)(' ' + rnd(95)); break;
        case 2: o[n++] = " \t\n\r"[rnd(4)]; break;
        case 3: o[n++] = (unsigned char)rnd(256); break;
        case 4: /* valid character of any length */
            do c = rnd(3) == 0 ? 0x80 + rnd(0x780) : rnd(2) ? 0x800 + rnd(0xF800) : 0x10000 + rnd(0x100000);
            while (c >= 0xD800 && c < 0xE000);
            n += put_utf8(o + n, c);
            break;
        case 5: /* a valid character with its last byte cut off */
            k = put_utf8(o + n, 0x800 + rnd(0xD000));
            n += k - 1;
            break;
        case 6: o[n++] = (unsigned char)(0x80 + rnd(64)); break;
        case 7: {
            static const char *odd[] = {"\xC0\x80", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                                        "\xF8\x88\x80\x80", "<|endoftext|>", "<|endo", "\xEF\xBB\xBF"};
            const char *s = odd[rnd(8)];
            memcpy(o + n, s, strlen(s));
            n += strlen(s);
            break;
        }
        default: n += put_utf8(o + n, 0x4E2D + rnd(50)); break; /* CJK */
        }
    }
    return n;
}

/* Checks every case of a fixture file: exact ids, and decode(encode(x)) == x. */
static void check_tsv(const gpt2_tokenizer *t, const char *name, size_t min_cases) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer/%s", env_dir("GPTSCOPE_FIXTURES"), name);
    size_t len;
    char *data = read_all(path, &len);
    size_t n_cases = 0, n_bad = 0, line_no = 0;
    unsigned char *text = malloc(len / 2 + 1);
    int32_t *want = malloc((len / 2 + 1) * sizeof *want);
    assert_non_null(text);
    assert_non_null(want);
    for (char *line = data, *next; *line; line = next) {
        line_no++;
        char *nl = strchr(line, '\n');
        if (!nl) fail_msg("%s line %zu: no newline at the end of the file", path, line_no);
        *nl = '\0';
        next = nl + 1;
        if (line[0] == '#') continue;
        char *tab = strchr(line, '\t');
        if (!tab || (tab - line) % 2) fail_msg("%s line %zu: malformed", path, line_no);
        size_t n_text = (size_t)(tab - line) / 2, n_want = 0;
        for (size_t i = 0; i < n_text; i++) {
            int hi = hexval(line[2 * i]), lo = hexval(line[2 * i + 1]);
            if (hi < 0 || lo < 0) fail_msg("%s line %zu: bad hex", path, line_no);
            text[i] = (unsigned char)(hi << 4 | lo);
        }
        for (char *p = tab + 1; *p;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p) fail_msg("%s line %zu: bad id list", path, line_no);
            want[n_want++] = (int32_t)v;
            p = *end == ' ' ? end + 1 : end;
        }
        size_t n;
        int32_t *ids = encode(t, (const char *)text, n_text, 0, &n);
        size_t i = 0;
        while (i < n && i < n_want && ids[i] == want[i]) i++;
        if (i != n || i != n_want) {
            if (n_bad++ < 5)
                print_error("%s line %zu: text %.*s: %zu ids, expected %zu; first difference at "
                            "index %zu: got %d, expected %d\n", name, line_no,
                            (int)(tab - line > 160 ? 160 : tab - line), line, n, n_want, i,
                            i < n ? (int)ids[i] : -1, i < n_want ? (int)want[i] : -1);
        }
        size_t m;
        char *back = decode(t, ids, n, &m);
        if (m != n_text || memcmp(back, text, m) != 0) {
            if (n_bad++ < 5) print_error("%s line %zu: decode(encode(text)) != text\n", name, line_no);
        }
        free(back);
        free(ids);
        n_cases++;
    }
    print_message("%s: %zu cases\n", name, n_cases);
    free(text);
    free(want);
    free(data);
    assert_int_equal(n_bad, 0);
    assert_true(n_cases >= min_cases);
}

/* ---- encoding ------------------------------------------------------------------------- */

static void test_published_ids(void **state) {
    const gpt2_tokenizer *t = gpt2_tok();
    static const int32_t capes[] = {3673, 477, 10281, 5806, 1451, 274, 13};
    assert_ids(t, "Not all heroes wear capes.", capes, 7);

    size_t n;
    int32_t *ids = encode(t, "zjqfl", 5, 0, &n);
    static const char *pieces[] = {"z", "j", "q", "fl"};
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) {
        size_t m;
        const char *b = gpt2_tokenizer_token_bytes(t, ids[i], &m);
        assert_non_null(b);
        assert_int_equal(m, strlen(pieces[i]));
        assert_memory_equal(b, pieces[i], m);
    }
    free(ids);
}

static void test_gpt2_vocabulary(void **state) {
    const gpt2_tokenizer *t = gpt2_tok();
    assert_int_equal(gpt2_tokenizer_n_vocab(t), 50257);
    assert_int_equal(gpt2_tokenizer_eot(t), 50256);
    size_t m = 99;
    const char *b = gpt2_tokenizer_token_bytes(t, 50256, &m);
    assert_int_equal(m, 13);
    assert_memory_equal(b, "<|endoftext|>", 13);
    b = gpt2_tokenizer_token_bytes(t, 220, &m); /* "Ġ": the space byte */
    assert_int_equal(m, 1);
    assert_int_equal(b[0], ' ');
    m = 99;
    assert_null(gpt2_tokenizer_token_bytes(t, -1, &m));
    assert_int_equal(m, 0);
    m = 99;
    assert_null(gpt2_tokenizer_token_bytes(t, 50257, &m));
    assert_int_equal(m, 0);
    for (int32_t id = 0; id < 50257; id++) { /* bytes -> id inverts id -> bytes */
        b = gpt2_tokenizer_token_bytes(t, id, &m);
        assert_non_null(b);
        assert_int_equal(gpt2_tokenizer_token_id(t, b, m), id);
    }
    for (int c = 0; c < 256; c++) {
        char byte = (char)c;
        int32_t id = gpt2_tokenizer_token_id(t, &byte, 1);
        assert_true(id >= 0);
        b = gpt2_tokenizer_token_bytes(t, id, &m);
        assert_int_equal(m, 1);
        assert_int_equal((unsigned char)b[0], c);
    }
    assert_int_equal(gpt2_tokenizer_token_id(t, " the", 4), 262);
    assert_int_equal(gpt2_tokenizer_token_id(t, "", 0), -1);
    assert_int_equal(gpt2_tokenizer_token_id(t, "qzqzqzqzqzq", 11), -1);
}

static void test_gpt2_py_fixture(void **state) { check_tsv(gpt2_tok(), "gpt2_py.tsv", 3000); }
static void test_gpt2_js_fixture(void **state) { check_tsv(gpt2_tok(), "gpt2_js.tsv", 3000); }
static void test_tiny_py_fixture(void **state) { check_tsv(tiny_tok(), "tiny_py.tsv", 3000); }

static void test_empty_and_bad_args(void **state) {
    const gpt2_tokenizer *t = gpt2_tok();
    int32_t *ids = (int32_t *)&ids;
    size_t n = 7;
    gpt2_error err;
    assert_int_equal(gpt2_tokenizer_encode(t, "", 0, 0, &ids, &n, &err), GPT2_OK);
    assert_int_equal(n, 0);
    free(ids);
    assert_int_equal(gpt2_tokenizer_encode(t, NULL, 0, 0, &ids, &n, NULL), GPT2_OK);
    assert_int_equal(n, 0);
    free(ids);
    assert_int_equal(gpt2_tokenizer_encode(NULL, "a", 1, 0, &ids, &n, &err), GPT2_ERR_INVALID_ARG);
    assert_int_equal(err.status, GPT2_ERR_INVALID_ARG);
    assert_int_equal(gpt2_tokenizer_encode(t, NULL, 3, 0, &ids, &n, &err), GPT2_ERR_INVALID_ARG);
    assert_int_equal(gpt2_tokenizer_n_vocab(NULL), 0);
    assert_int_equal(gpt2_tokenizer_eot(NULL), -1);
    gpt2_tokenizer_free(NULL);
}

static void test_round_trip_random_bytes(void **state) {
    const gpt2_tokenizer *toks[2] = {gpt2_tok(), tiny_tok()};
    unsigned char buf[16 * 64];
    int saw_invalid = 0;
    for (int i = 0; i < 3000; i++) {
        size_t len = random_text(buf, (int)rnd(64));
        saw_invalid += !valid_utf8(buf, len);
        assert_round_trip(toks[i & 1], (const char *)buf, len);
    }
    assert_true(saw_invalid > 1000); /* the generator does make invalid UTF-8 */
    for (int i = 0; i < 256; i++) { /* every single byte, alone and after a word */
        char s[8] = {'w', 'o', 'r', 'd', (char)i, 'x', 0};
        assert_round_trip(toks[0], s + 4, 1);
        assert_round_trip(toks[0], s, 6);
    }
}

/* A run of invalid bytes is a piece of its own: the regex never reaches across it. */
static void test_invalid_utf8_pieces(void **state) {
    const gpt2_tokenizer *t = gpt2_tok();
    static const char *parts[][3] = {
        {"hello", "\xff\xfe", "world"},
        {"abc ", "\x80", " def"},
        {"caf", "\xc3", "s"},            /* truncated é */
        {"x", "\xed\xa0\x80", "y"},      /* a UTF-16 surrogate */
        {"12", "\xc0\xb1", "34"},        /* overlong "1" */
        {"\xe4\xb8\xad", "\xf0\x9f\x98", "\xe4\xb8\xad"}, /* 中, 3/4 of 😀, 中 */
    };
    for (size_t c = 0; c < sizeof parts / sizeof parts[0]; c++) {
        char whole[64];
        size_t n_whole, n_part, k = 0;
        snprintf(whole, sizeof whole, "%s%s%s", parts[c][0], parts[c][1], parts[c][2]);
        int32_t *ids = encode(t, whole, strlen(whole), 0, &n_whole);
        for (int p = 0; p < 3; p++) {
            int32_t *sub = encode(t, parts[c][p], strlen(parts[c][p]), 0, &n_part);
            assert_true(k + n_part <= n_whole);
            assert_memory_equal(ids + k, sub, n_part * sizeof *sub);
            k += n_part;
            free(sub);
        }
        assert_int_equal(k, n_whole);
        free(ids);
        assert_round_trip(t, whole, strlen(whole));
    }
}

static void test_encode_special(void **state) {
    const gpt2_tokenizer *t = gpt2_tok();
    const int32_t eot = gpt2_tokenizer_eot(t);
    size_t n, na, nb;
    const char *text = "Hello world <|endoftext|>Bye  ";
    int32_t *ids = encode(t, text, strlen(text), GPT2_ENCODE_SPECIAL, &n);
    int32_t *a = encode(t, "Hello world ", 12, 0, &na);
    int32_t *b = encode(t, "Bye  ", 5, 0, &nb);
    assert_int_equal(n, na + 1 + nb);
    assert_memory_equal(ids, a, na * sizeof *a);
    assert_int_equal(ids[na], eot);
    assert_memory_equal(ids + na + 1, b, nb * sizeof *b);
    free(ids);
    free(a);
    free(b);

    ids = encode(t, text, strlen(text), 0, &n); /* without the flag: plain text */
    for (size_t i = 0; i < n; i++) assert_int_not_equal(ids[i], eot);
    free(ids);
    assert_round_trip(t, text, strlen(text));

    static const struct { const char *text; int n_eot; size_t n_ids; } cases[] = {
        {"<|endoftext|>", 1, 1},
        {"<|endoftext|><|endoftext|>", 2, 2},
        {"<<|endoftext|>>", 1, 3},
        {"<|endoftext|", 0, 0},
        {"<|endoftext|<|endoftext|>", 1, 0},
        {"a<|endoftext|>", 1, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ids = encode(t, cases[c].text, strlen(cases[c].text), GPT2_ENCODE_SPECIAL, &n);
        int k = 0;
        for (size_t i = 0; i < n; i++) k += ids[i] == eot;
        assert_int_equal(k, cases[c].n_eot);
        if (cases[c].n_ids) assert_int_equal(n, cases[c].n_ids);
        size_t m;
        char *back = decode(t, ids, n, &m);
        assert_int_equal(m, strlen(cases[c].text));
        assert_memory_equal(back, cases[c].text, m);
        free(back);
        free(ids);
    }
}

/* One piece of a megabyte: BPE must not be quadratic, nor the regex run out of stack. */
static void test_long_pieces(void **state) {
    const gpt2_tokenizer *t = gpt2_tok();
    size_t len = 1 << 20;
    char *s = malloc(len);
    assert_non_null(s);
    static const char fill[] = {'a', ' ', '7', '!', '\n'};
    for (size_t f = 0; f < sizeof fill; f++) {
        memset(s, fill[f], len);
        assert_round_trip(t, s, len);
    }
    for (size_t i = 0; i < len; i++) s[i] = (char)('a' + rnd(26));
    assert_round_trip(t, s, len);
    free(s);
}

/* ---- streaming UTF-8 ------------------------------------------------------------------ */

static void test_utf8_stream_tokens(void **state) {
    const gpt2_tokenizer *t = gpt2_tok();
    const char *text = "Hi \xF0\x9F\x91\x8B\xF0\x9F\x8F\xBD there \xF0\x9F\x87\xAF\xF0\x9F\x87\xB5 "
                       "\xE4\xB8\xAD\xE6\x96\x87 caf\xC3\xA9 \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9";
    size_t len = strlen(text), n, w = 0;
    int32_t *ids = encode(t, text, len, 0, &n);
    gpt2_utf8_stream s = {0};
    char *out = malloc(3 * (len + 4 * n) + 16);
    assert_non_null(out);
    int split = 0;
    for (size_t i = 0; i < n; i++) {
        size_t m;
        const char *b = gpt2_tokenizer_token_bytes(t, ids[i], &m);
        split += !valid_utf8((const unsigned char *)b, m);
        w += gpt2_utf8_stream_push(&s, b, m, out + w);
        assert_true(valid_utf8((const unsigned char *)out, w)); /* never a partial character */
        assert_memory_equal(out, text, w);                        /* never a U+FFFD */
    }
    assert_true(split >= 2); /* the emoji really are split across tokens */
    assert_int_equal(w, len);
    assert_int_equal(gpt2_utf8_stream_flush(&s, out + w), 0);
    free(out);
    free(ids);
}

static void test_utf8_stream_invalid(void **state) {
#define FFFD "\xEF\xBF\xBD"
    static const struct { const char *in, *out; } cases[] = {
        {"plain ascii", "plain ascii"},
        {"\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80", "\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80"},
        {"\xFF", FFFD},
        {"a\x80" "b", "a" FFFD "b"},
        {"\xC0\xAF", FFFD FFFD},                          /* overlong '/' */
        {"\xE0\x80\xAF", FFFD FFFD FFFD},                 /* overlong, 3 bytes */
        {"\xED\xA0\x80", FFFD FFFD FFFD},                 /* surrogate U+D800 */
        {"\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD},        /* U+110000 */
        {"\xF5\x80", FFFD FFFD},
        {"\xE2\x82" "A", FFFD FFFD "A"},                  /* cut short, then ASCII */
        {"\xE2\x82\xE2\x82\xAC", FFFD FFFD "\xE2\x82\xAC"}, /* cut short by a new start */
        {"\xF0\x9F\x98" "\xF0\x9F\x98\x80", FFFD FFFD FFFD "\xF0\x9F\x98\x80"},
        {"\xF4\x8F\xBF\xBF", "\xF4\x8F\xBF\xBF"},         /* U+10FFFF is fine */
        {"\xED\x9F\xBF", "\xED\x9F\xBF"},                 /* U+D7FF is fine */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *in = cases[c].in;
        size_t n = strlen(in);
        char out[128];
        for (int bytewise = 0; bytewise < 2; bytewise++) {
            gpt2_utf8_stream s = {0};
            size_t w = 0;
            if (bytewise)
                for (size_t i = 0; i < n; i++) w += gpt2_utf8_stream_push(&s, in + i, 1, out + w);
            else
                w = gpt2_utf8_stream_push(&s, in, n, out);
            w += gpt2_utf8_stream_flush(&s, out + w);
            if (w != strlen(cases[c].out) || memcmp(out, cases[c].out, w) != 0)
                fail_msg("case %zu (%s): wrong output", c, bytewise ? "byte by byte" : "one push");
            assert_int_equal(s.n_pending, 0);
        }
    }

    /* An incomplete tail is held back, then completed or flushed. */
    gpt2_utf8_stream s = {0};
    char out[64];
    assert_int_equal(gpt2_utf8_stream_push(&s, "ok\xF0\x9F", 4, out), 2);
    assert_int_equal(gpt2_utf8_stream_push(&s, "\x98", 1, out), 0);
    assert_int_equal(gpt2_utf8_stream_push(&s, "\x80", 1, out), 4);
    assert_memory_equal(out, "\xF0\x9F\x98\x80", 4);
    assert_int_equal(gpt2_utf8_stream_push(&s, "\xE4\xB8", 2, out), 0);
    assert_int_equal(gpt2_utf8_stream_flush(&s, out), 6);
    assert_memory_equal(out, FFFD FFFD, 6);
    assert_int_equal(gpt2_utf8_stream_flush(&s, out), 0);
    assert_int_equal(gpt2_utf8_stream_push(&s, NULL, 0, out), 0);
#undef FFFD
}

/* Random bytes in random chunks: the output is always valid UTF-8, independent of how the
 * input was cut, valid input passes unchanged, and the size bound in the header holds. */
static void test_utf8_stream_random(void **state) {
    unsigned char in[16 * 48];
    char whole[3 * (sizeof in + 4)], parts[3 * (sizeof in + 4)];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = random_text(in, (int)rnd(48)), w1, w2 = 0;
        gpt2_utf8_stream s = {0};
        w1 = gpt2_utf8_stream_push(&s, (const char *)in, n, whole);
        assert_true(w1 <= 3 * (n + 4));
        w1 += gpt2_utf8_stream_flush(&s, whole + w1);
        for (size_t i = 0; i < n;) {
            size_t k = 1 + rnd(5);
            if (k > n - i) k = n - i;
            size_t w = gpt2_utf8_stream_push(&s, (const char *)in + i, k, parts + w2);
            assert_true(w <= 3 * (k + 4));
            w2 += w;
            i += k;
        }
        w2 += gpt2_utf8_stream_flush(&s, parts + w2);
        assert_true(valid_utf8((const unsigned char *)whole, w1));
        assert_int_equal(w1, w2);
        assert_memory_equal(whole, parts, w1);
        if (valid_utf8(in, n)) {
            assert_int_equal(w1, n);
            assert_memory_equal(whole, in, n);
        }
    }
}

/* ---- loading -------------------------------------------------------------------------- */

/* A small valid tokenizer: the 256 byte tokens (ids 0..255, keys \u-escaped), then
 * "he" 256, "hel" 257, "hello" 300 (ids 258..299 left undefined) and, optionally,
 * "<|endoftext|>" 301. */
static size_t small_vocab(char *out, size_t cap, int with_eot, int skip_byte) {
    size_t n = 0;
    n += (size_t)snprintf(out + n, cap - n, "{");
    int spare = 0x100;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        int c = printable ? b : spare++;
        if (b != skip_byte) n += (size_t)snprintf(out + n, cap - n, "\"\\u%04x\": %d, ", c, b);
    }
    n += (size_t)snprintf(out + n, cap - n, "\"he\": 256, \"hel\": 257, \"hello\": 300%s}",
                          with_eot ? ", \"<|endoftext|>\": 301" : "");
    return n;
}

static const char SMALL_MERGES[] = "#version: 0.2\nh e\nhe l\nl o\nhel lo\n";

static void test_load_small(void **state) {
    char dir[] = "/tmp/gpt2tokXXXXXX";
    assert_non_null(mkdtemp(dir));
    char vocab[8192];
    size_t n = small_vocab(vocab, sizeof vocab, 0, -1);
    /* add "lo" (id 280), the result of the merge "l o" */
    memcpy(vocab + n - 1, ", \"lo\": 280}", 13);
    n += 11;
    write_file(dir, "vocab.json", vocab, n);
    write_file(dir, "merges.txt", SMALL_MERGES, strlen(SMALL_MERGES));

    gpt2_tokenizer *t = load_or_fail(dir);
    assert_int_equal(gpt2_tokenizer_n_vocab(t), 301);
    assert_int_equal(gpt2_tokenizer_eot(t), -1);
    size_t m = 99;
    assert_null(gpt2_tokenizer_token_bytes(t, 258, &m)); /* a gap */
    assert_int_equal(m, 0);
    size_t k;
    int32_t *ids = encode(t, "hello hel", 9, 0, &k);
    assert_int_equal(k, 3);
    assert_int_equal(ids[0], 300);
    assert_int_equal(ids[1], ' '); /* byte ids equal the byte values here */
    assert_int_equal(ids[2], 257);
    free(ids);
    /* the eot flag is harmless without an eot token */
    ids = encode(t, "<|endoftext|>", 13, GPT2_ENCODE_SPECIAL, &k);
    size_t back_len;
    char *back = decode(t, ids, k, &back_len);
    assert_int_equal(back_len, 13);
    assert_memory_equal(back, "<|endoftext|>", 13);
    free(back);
    free(ids);
    gpt2_tokenizer_free(t);

    /* OpenAI's names, no #version line, CRLF and trailing blank lines */
    remove_file(dir, "vocab.json");
    remove_file(dir, "merges.txt");
    n = small_vocab(vocab, sizeof vocab, 1, -1);
    memcpy(vocab + n - 1, ", \"lo\": 280}", 13);
    n += 11;
    write_file(dir, "encoder.json", vocab, n);
    static const char crlf[] = "h e\r\nhe l\r\nl o\r\nhel lo\r\n\r\n\n";
    write_file(dir, "vocab.bpe", crlf, strlen(crlf));
    t = load_or_fail(dir);
    assert_int_equal(gpt2_tokenizer_eot(t), 301);
    ids = encode(t, "hello<|endoftext|>", 18, GPT2_ENCODE_SPECIAL, &k);
    assert_int_equal(k, 2);
    assert_int_equal(ids[0], 300);
    assert_int_equal(ids[1], 301);
    free(ids);
    gpt2_tokenizer_free(t);
    remove_file(dir, "encoder.json");
    remove_file(dir, "vocab.bpe");

    /* Odd merge tables, where encoder.py's rules show: a merge listed twice keeps its later
     * rank (dict(zip(merges, ranks))), and each round merges every occurrence of the best pair
     * before it looks at pairs the round created, even ones of lower rank. */
    n = small_vocab(vocab, sizeof vocab, 0, -1);
    memcpy(vocab + n - 1, ", \"ab\": 270, \"bc\": 271, \"aba\": 272}", 36);
    n += 34;
    write_file(dir, "vocab.json", vocab, n);
    static const char odd[] = "a b\nb c\nab a\na b\n"; /* ranks: (b,c) 1, (ab,a) 2, (a,b) 3 */
    write_file(dir, "merges.txt", odd, strlen(odd));
    t = load_or_fail(dir);
    static const int32_t abc[] = {'a', 271}, abab[] = {270, 270}, ababa[] = {270, 272};
    assert_ids(t, "abc", abc, 2);     /* (b,c) outranks the repeated (a,b) */
    assert_ids(t, "abab", abab, 2);   /* not "aba" + "b": (ab,a) waits for the round to end */
    assert_ids(t, "ababa", ababa, 2);
    gpt2_tokenizer_free(t);
    remove_file(dir, "vocab.json");
    remove_file(dir, "merges.txt");
    assert_int_equal(rmdir(dir), 0);
}

/* ---- BPE-dropout ----------------------------------------------------------------------- */

static int32_t *encode_drop(const gpt2_tokenizer *t, const char *text, size_t len, double p, uint64_t seed,
                            size_t *n) {
    int32_t *ids = NULL;
    gpt2_error err;
    if (gpt2_tokenizer_encode_dropout(t, text, len, 0, p, seed, &ids, n, &err) != GPT2_OK)
        fail_msg("encode with dropout %g of %zu bytes failed: %s", p, len, err.msg);
    return ids;
}

/* p = 0 is the usual encoding, p = 1 one token per byte, any p decodes to the text; the same
 * seed gives the same ids, and the segmentations do vary. */
static void test_dropout_bounds(void **state) {
    const gpt2_tokenizer *toks[2] = {gpt2_tok(), tiny_tok()};
    unsigned char buf[16 * 64];
    int differed = 0;
    for (int i = 0; i < 2000; i++) {
        const gpt2_tokenizer *t = toks[i & 1];
        size_t len = random_text(buf, 1 + (int)rnd(64)), n0, n1, n, m, n2;
        const char *text = (const char *)buf;
        int32_t *want = encode(t, text, len, 0, &n0);
        int32_t *ids = encode_drop(t, text, len, 0, (uint64_t)i, &n);
        assert_int_equal(n, n0);
        assert_memory_equal(ids, want, n * sizeof *ids);
        free(ids);
        ids = encode_drop(t, text, len, 1, (uint64_t)i, &n1);
        assert_int_equal(n1, len);
        for (size_t k = 0; k < len; k++) assert_int_equal(ids[k], gpt2_tokenizer_token_id(t, text + k, 1));
        free(ids);
        double p = 0.05 + 0.4 * (double)rnd(1000) / 1000;
        ids = encode_drop(t, text, len, p, (uint64_t)i, &n);
        char *back = decode(t, ids, n, &m);
        assert_int_equal(m, len);
        assert_memory_equal(back, text, len);
        assert_true(n <= len); /* not n >= n0: skipping (a,b) can let (a,bc) make one token of two */
        int32_t *again = encode_drop(t, text, len, p, (uint64_t)i, &n2);
        assert_int_equal(n2, n);
        assert_memory_equal(again, ids, n * sizeof *ids);
        differed += n != n0 || memcmp(ids, want, n * sizeof *ids) != 0;
        free(again);
        free(back);
        free(ids);
        free(want);
    }
    assert_true(differed > 500);
    /* seeds that differ by multiples of splitmix's step (as the trainer's copy seeds did) must
     * not give one stream shifted: the second halves of 16 segmentations all differ */
    static char text[40000];
    size_t tl = 0;
    while (tl + 16 < sizeof text) tl += random_text((unsigned char *)text + tl, 1);
    int32_t *seg[16];
    size_t nseg[16];
    for (int s = 0; s < 2; s++) {
        for (int k = 0; k < 16; k++)
            seg[k] = encode_drop(gpt2_tok(), text, tl, 0.1,
                                 (s ? 1337u : 0u) ^ (0x9E3779B97F4A7C15u * (uint64_t)(k + 1)), &nseg[k]);
        for (int k = 0; k < 16; k++)
            for (int m = 0; m < k; m++)
                if (nseg[k] == nseg[m] && memcmp(seg[k] + nseg[k] / 2, seg[m] + nseg[m] / 2,
                                                 (nseg[k] - nseg[k] / 2) * sizeof(int32_t)) == 0)
                    fail_msg("seed base %d: segmentations %d and %d end the same", s ? 1337 : 0, m, k);
        for (int k = 0; k < 16; k++) free(seg[k]);
    }
    size_t n;
    int32_t *ids = (int32_t *)1;
    gpt2_error err;
    assert_int_equal(gpt2_tokenizer_encode_dropout(gpt2_tok(), "ab", 2, 0, 1.5, 0, &ids, &n, &err),
                     GPT2_ERR_INVALID_ARG);
    assert_null(ids);
    assert_non_null(strstr(err.msg, "1.5"));
}

/* The law of the segmentations, worked out by hand from the definition (each merge skipped
 * with probability p each time it is next; a skipped one competes again after the next merge;
 * done when all left were skipped): "abcd" with merges (a,b) then (c,d) gives
 *   ab cd    (1-p)^2 + p (1-p)^2   (ab first; or ab skipped, cd merged, ab taken on its retry)
 *   ab c d   (1-p) p
 *   a b cd   p (1-p) p            (ab skipped, cd merged, ab skipped again)
 *   a b c d  p^2                  (both skipped: nothing left)
 * and "abab" with the one merge (a,b), where a step draws both occurrences:
 *   ab ab    (1-p)^2 (1 + 2p)      (both kept; or one, then the other on the next step)
 *   ab a b   (1-p) p^2             (the first kept, the second dropped twice)
 *   a b ab   (1-p) p^2
 *   a b a b  p^2
 * 40,000 draws each: each frequency within 5 standard deviations of its probability. */
/* Draws text's segmentation 40,000 times; outcome k (segs[k], 0-terminated
 * ids) must come up with frequency want[k] within 5 standard deviations. */
static void check_law(const gpt2_tokenizer *t, const char *text, double p, const int32_t segs[4][5],
                      const double want[4]) {
    const int N = 40000;
    int count[4] = {0};
    for (int i = 0; i < N; i++) {
        size_t n;
        int32_t *ids = encode_drop(t, text, strlen(text), p, (uint64_t)i * 7919, &n);
        int k = 0;
        while (k < 4 && !(segs[k][n] == 0 && memcmp(ids, segs[k], n * sizeof *ids) == 0)) k++;
        if (k == 4) fail_msg("%s, draw %d: %zu ids, not one of the four segmentations", text, i, n);
        count[k]++;
        free(ids);
    }
    for (int k = 0; k < 4; k++) {
        double f = (double)count[k] / N, sd = sqrt(want[k] * (1 - want[k]) / N);
        if (fabs(f - want[k]) > 5 * sd)
            fail_msg("%s, segmentation %d: frequency %.4f, expected %.4f", text, k, f, want[k]);
    }
}

static void test_dropout_law(void **state) {
    char dir[] = "/tmp/gpt2dropXXXXXX";
    assert_non_null(mkdtemp(dir));
    char vocab[8192];
    size_t len = small_vocab(vocab, sizeof vocab, 0, -1);
    memcpy(vocab + len - 1, ", \"ab\": 270, \"cd\": 271}", 24);
    len += 22;
    write_file(dir, "vocab.json", vocab, len);
    static const char merges[] = "a b\nc d\n";
    write_file(dir, "merges.txt", merges, strlen(merges));
    gpt2_tokenizer *t = load_or_fail(dir);
    const double p = 0.3, q = 1 - p;
    static const int32_t abcd[4][5] = {{270, 271}, {270, 'c', 'd'}, {'a', 'b', 271}, {'a', 'b', 'c', 'd'}},
                         abab[4][5] = {{270, 270}, {270, 'a', 'b'}, {'a', 'b', 270}, {'a', 'b', 'a', 'b'}};
    check_law(t, "abcd", p, abcd, (const double[4]){q * q + p * q * q, q * p, p * q * p, p * p});
    check_law(t, "abab", p, abab, (const double[4]){q * q * (1 + 2 * p), q * p * p, q * p * p, p * p});
    gpt2_tokenizer_free(t);
    remove_file(dir, "vocab.json");
    remove_file(dir, "merges.txt");
    assert_int_equal(rmdir(dir), 0);
}

/* One defect per case; the message must name the file and say what is wrong. */
static void test_load_errors(void **state) {
    char good_vocab[8192], vocab[8192];
    size_t good_n = small_vocab(good_vocab, sizeof good_vocab, 1, -1);
    memcpy(good_vocab + good_n - 1, ", \"lo\": 280}", 13);
    good_n += 11;
    size_t no_a = small_vocab(vocab, sizeof vocab, 1, 'A');
    char *missing_a = strdup(vocab);
    assert_non_null(missing_a);

    static const char *const V = "\x01"; /* stands for the good vocab.json */
    static const struct {
        const char *vocab, *merges; /* NULL: file absent */
        gpt2_status status;
        const char *file, *keyword;
    } cases[] = {
        {NULL, NULL, GPT2_ERR_IO, "vocab.json", "vocab.json"},
        {NULL, "h e\n", GPT2_ERR_IO, "vocab.json", "vocab.json"},
        {"", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "empty"},
        {"{\"a\": 1, \"b\": }", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "JSON"},
        {"[1, 2, 3]", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "JSON object"},
        {"{\"a\": \"x\"}", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "integer"},
        {"{\"a\": 1.5}", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "integer"},
        {"{\"a\": -1}", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "integer"},
        {"{\"a\": true}", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "integer"},
        {"{\"a\": 1e30}", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "integer"},
        {"\x02", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "byte"},          /* no "A" */
        {"{\"a\": 3, \"b\": 3}", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "id 3"},
        {"{\"a\": 3, \"a\": 4}", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "twice"},
        {"{\"a\\u4e2d\": 3}", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "U+4E2D"},
        {"{\"\": 3}", "h e\n", GPT2_ERR_TOKENIZER, "vocab.json", "empty"},
        {V, NULL, GPT2_ERR_IO, "merges.txt", "merges.txt"},
        {V, "", GPT2_ERR_TOKENIZER, "merges.txt", "empty"},
        {V, "#version: 0.2\nh e\nqz xy\n", GPT2_ERR_TOKENIZER, "merges.txt", "not in the vocabulary"},
        {V, "#version: 0.2\nh e\nh qz\n", GPT2_ERR_TOKENIZER, "merges.txt", "line 3"},
        {V, "h e\nx y\n", GPT2_ERR_TOKENIZER, "merges.txt", "not in the vocabulary"}, /* no "xy" */
        {V, "h e\nx y\n", GPT2_ERR_TOKENIZER, "merges.txt", "line 2"},
        {V, "#version: 0.2\nh e\nhel\nl o\n", GPT2_ERR_TOKENIZER, "merges.txt", "line 3"},
        {V, "h e\nhe l x\n", GPT2_ERR_TOKENIZER, "merges.txt", "line 2"},
        {V, "h e\n#version: 0.2\n", GPT2_ERR_TOKENIZER, "merges.txt", "line 2"},
    };
    char dir[] = "/tmp/gpt2tokXXXXXX";
    assert_non_null(mkdtemp(dir));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *v = cases[c].vocab;
        if (v == V) write_file(dir, "vocab.json", good_vocab, good_n);
        else if (v && v[0] == '\x02') write_file(dir, "vocab.json", missing_a, no_a);
        else if (v) write_file(dir, "vocab.json", v, strlen(v));
        if (cases[c].merges) write_file(dir, "merges.txt", cases[c].merges, strlen(cases[c].merges));

        gpt2_tokenizer *t = (gpt2_tokenizer *)&t;
        gpt2_error err;
        gpt2_status st = gpt2_tokenizer_load(dir, &t, &err);
        if (st != cases[c].status || err.status != st || !strstr(err.msg, cases[c].file) ||
            !strstr(err.msg, cases[c].keyword) || strchr(err.msg, '\n'))
            fail_msg("case %zu: status %d, message \"%s\"; expected status %d naming %s with "
                     "\"%s\"", c, (int)st, st == GPT2_OK ? "" : err.msg, (int)cases[c].status,
                     cases[c].file, cases[c].keyword);
        assert_null(t);
        remove_file(dir, "vocab.json");
        remove_file(dir, "merges.txt");
    }

    /* encoder.json without vocab.bpe names the missing file */
    write_file(dir, "encoder.json", good_vocab, good_n);
    gpt2_tokenizer *t;
    gpt2_error err;
    assert_int_equal(gpt2_tokenizer_load(dir, &t, &err), GPT2_ERR_IO);
    assert_non_null(strstr(err.msg, "vocab.bpe"));
    remove_file(dir, "encoder.json");

    /* explicit paths, and a NULL error pointer */
    assert_int_equal(gpt2_tokenizer_load_files("/nonexistent/v.json", "/nonexistent/m.txt", &t, NULL),
                     GPT2_ERR_IO);
    assert_int_equal(gpt2_tokenizer_load_files(NULL, NULL, &t, &err), GPT2_ERR_INVALID_ARG);
    free(missing_a);
    assert_int_equal(rmdir(dir), 0);
}

/* The tiny fixture's files load; its ids 0..255 are the bytes in GPT-2's order. */
static void test_tiny_vocabulary(void **state) {
    const gpt2_tokenizer *t = tiny_tok(), *g = gpt2_tok();
    assert_true(gpt2_tokenizer_n_vocab(t) > 256);
    assert_int_equal(gpt2_tokenizer_eot(t), gpt2_tokenizer_n_vocab(t) - 1);
    for (int32_t id = 0; id < 256; id++) {
        size_t m1, m2;
        const char *a = gpt2_tokenizer_token_bytes(t, id, &m1), *b = gpt2_tokenizer_token_bytes(g, id, &m2);
        assert_int_equal(m1, 1);
        assert_int_equal(m2, 1);
        assert_int_equal(a[0], b[0]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_ids),
        cmocka_unit_test(test_gpt2_vocabulary),
        cmocka_unit_test(test_gpt2_py_fixture),
        cmocka_unit_test(test_gpt2_js_fixture),
        cmocka_unit_test(test_tiny_py_fixture),
        cmocka_unit_test(test_tiny_vocabulary),
        cmocka_unit_test(test_empty_and_bad_args),
        cmocka_unit_test(test_round_trip_random_bytes),
        cmocka_unit_test(test_invalid_utf8_pieces),
        cmocka_unit_test(test_encode_special),
        cmocka_unit_test(test_long_pieces),
        cmocka_unit_test(test_utf8_stream_tokens),
        cmocka_unit_test(test_utf8_stream_invalid),
        cmocka_unit_test(test_utf8_stream_random),
        cmocka_unit_test(test_load_small),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_dropout_bounds),
        cmocka_unit_test(test_dropout_law),
    };
    return cmocka_run_group_tests_name("tokenizer", tests, NULL, teardown_group);
}
