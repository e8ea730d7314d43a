/* test_bpe_train.c — the BPE trainer (gpt2_bpe_train.h): merges worked out by hand, merges
 * identical to an independent Python trainer, round trips through gpt2_tokenizer, error
 * messages, and `gptscope train-tokenizer` end to end.
 *
 * Environment (make test sets all three):
 *   GPTSCOPE_FIXTURES   build/fixtures: bpe_train/ from tests/ref/bpe_train_ref.py
 *   GPT2_TOKENIZER_DIR  GPT-2's encoder.json + vocab.bpe (for the byte-token order)
 *   GPTSCOPE_BIN        the gptscope binary
 */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "gpt2.h"
#include "test_util.h"

/* ---- helpers ---------------------------------------------------------------------------- */

static gpt2_bpe_vocab *train_or_fail(const char *text, size_t len, int vocab_size, int64_t min_freq) {
    gpt2_bpe_train_params p = gpt2_bpe_train_default_params();
    p.vocab_size = vocab_size;
    p.min_frequency = min_freq;
    gpt2_bpe_vocab *v = NULL;
    gpt2_error err;
    gpt2_status st = gpt2_bpe_train(text, len, p, &v, &err);
    if (st != GPT2_OK) fail_msg("training on %zu bytes failed: %s", len, err.msg);
    assert_non_null(v);
    return v;
}

/* Asserts merge i is left+right (raw bytes, NUL-terminated here) with that count. */
static void assert_merge(const gpt2_bpe_vocab *v, int i, const char *left, const char *right, int64_t count) {
    gpt2_bpe_merge m;
    assert_int_equal(gpt2_bpe_vocab_merge(v, i, &m), 0);
    if (m.left_len != strlen(left) || memcmp(m.left, left, m.left_len) || m.right_len != strlen(right) ||
        memcmp(m.right, right, m.right_len))
        fail_msg("merge %d is \"%.*s\" + \"%.*s\", expected \"%s\" + \"%s\"", i, (int)m.left_len, m.left,
                 (int)m.right_len, m.right, left, right);
    assert_int_equal(m.count, count);
    assert_int_equal(m.id, 256 + i);
}

static char *make_temp_dir(void) {
    char tmpl[] = "/tmp/gptscope-bpe-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    return strdup(tmpl);
}

static void remove_tree(char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    free(dir);
}

static gpt2_tokenizer *load_tok(const char *dir) {
    gpt2_tokenizer *t = NULL;
    gpt2_error err;
    if (gpt2_tokenizer_load(dir, &t, &err) != GPT2_OK) fail_msg("loading %s: %s", dir, err.msg);
    return t;
}

static char *slurp(const char *dir, const char *name, size_t *len) {
    char path[4200];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) fail_msg("path too long");
    return read_file(path, len);
}

/* ---- hand-checked merges ------------------------------------------------------------------ */

/* "aaabdaaabac" is one piece (all letters). Pair counts, each step:
 *   a a a b d a a a b a c   aa:4 (overlapping: 0-1, 1-2, 5-6, 6-7) ab:2 bd:1 da:1 ba:1 ac:1
 *   -> merge a+a (4), left to right: [aa a b d aa a b a c]
 *      aa|a:2 a|b:2 b|d:1 d|aa:1 b|a:1 a|c:1; tie at 2: left "a" < "aa"
 *   -> merge a+b (2): [aa ab d aa ab a c]   aa|ab:2, the rest 1
 *   -> merge aa+ab (2): [aaab d aaab a c]   every pair 1: below min_frequency 2, stop.
 * With min_frequency 1 the ties at 1 go by left bytes, then right bytes:
 *   a|c ("a" < "aaab" < "d") -> [aaab d aaab ac]
 *   aaab|ac before aaab|d ("ac" < "d") -> [aaab d aaabac]
 *   aaab|d ("aaab" < "d") -> [aaabd aaabac] -> aaabd|aaabac -> one symbol: no pair left. */
static void test_hand_one_piece(void **state) {
    const char *text = "aaabdaaabac";
    gpt2_bpe_vocab *v = train_or_fail(text, strlen(text), 4096, 2);
    const gpt2_bpe_train_stats *s = gpt2_bpe_vocab_stats(v);
    assert_int_equal(s->n_merges, 3);
    assert_int_equal(gpt2_bpe_vocab_n_merges(v), 3);
    assert_int_equal(s->n_vocab, 260);
    assert_int_equal(gpt2_bpe_vocab_n_vocab(v), 260);
    assert_merge(v, 0, "a", "a", 4);
    assert_merge(v, 1, "a", "b", 2);
    assert_merge(v, 2, "aa", "ab", 2);
    assert_int_equal(s->stop, GPT2_BPE_STOP_MIN_FREQUENCY);
    assert_int_equal(s->stop_count, 1);
    assert_int_equal(s->n_tokens, 5);
    assert_int_equal(s->n_pieces, 1);
    assert_int_equal(s->n_unique_pieces, 1);
    assert_int_equal(s->n_bytes, 11);
    gpt2_bpe_merge m;
    assert_int_equal(gpt2_bpe_vocab_merge(v, 3, &m), -1);
    assert_int_equal(gpt2_bpe_vocab_merge(v, -1, &m), -1);
    gpt2_bpe_vocab_free(v);

    v = train_or_fail(text, strlen(text), 4096, 1);
    s = gpt2_bpe_vocab_stats(v);
    assert_int_equal(s->n_merges, 7);
    assert_merge(v, 0, "a", "a", 4);
    assert_merge(v, 1, "a", "b", 2);
    assert_merge(v, 2, "aa", "ab", 2);
    assert_merge(v, 3, "a", "c", 1);
    assert_merge(v, 4, "aaab", "ac", 1);
    assert_merge(v, 5, "aaab", "d", 1);
    assert_merge(v, 6, "aaabd", "aaabac", 1);
    assert_int_equal(s->stop, GPT2_BPE_STOP_NO_PAIRS);
    assert_int_equal(s->n_tokens, 1);
    size_t n;
    const char *b = gpt2_bpe_vocab_token(v, 256 + 6, &n);
    assert_int_equal(n, 11);
    assert_memory_equal(b, text, 11);
    b = gpt2_bpe_vocab_token(v, 256 + 7, &n);
    assert_int_equal(n, 13);
    assert_memory_equal(b, "<|endoftext|>", 13);
    assert_null(gpt2_bpe_vocab_token(v, 256 + 8, &n));
    assert_int_equal(n, 0);
    assert_null(gpt2_bpe_vocab_token(v, -1, &n));
    gpt2_bpe_vocab_free(v);

    v = train_or_fail(text, strlen(text), 259, 1); /* room for two merges */
    s = gpt2_bpe_vocab_stats(v);
    assert_int_equal(s->n_merges, 2);
    assert_int_equal(s->stop, GPT2_BPE_STOP_VOCAB_SIZE);
    assert_int_equal(s->n_tokens, 7); /* [aa ab d aa ab a c] */
    gpt2_bpe_vocab_free(v);
}

/* "hug hug hug pug pun bun" splits into "hug", " hug" x2, " pug", " pun", " bun" (the space
 * goes with the word that follows; shown as _ here). Counts with multiplicity:
 *   u|g:4 h|u:3 _|h:2 _|p:2 p|u:2 u|n:2 _|b:1 b|u:1          -> u+g (4)
 *   h|ug:3 _|h:2 _|p:2 u|n:2 p|ug:1 p|u:1 _|b:1 b|u:1        -> h+ug (3)
 *   _|hug:2 _|p:2 u|n:2 ...: left "_" < "u", right "hug" < "p" -> _+hug (2)
 *   _|p:2 u|n:2, rest 1: "_" < "u"                           -> _+p (2)
 *   u|n:2                                                    -> u+n (2)
 *   then every pair occurs once: stop. Tokens: hug, _hug x2, _p ug, _p un, _ b un = 10. */
static void test_hand_pieces(void **state) {
    const char *text = "hug hug hug pug pun bun";
    gpt2_bpe_vocab *v = train_or_fail(text, strlen(text), 300, 2);
    const gpt2_bpe_train_stats *s = gpt2_bpe_vocab_stats(v);
    assert_int_equal(s->n_pieces, 6);
    assert_int_equal(s->n_unique_pieces, 5);
    assert_int_equal(s->n_merges, 5);
    assert_merge(v, 0, "u", "g", 4);
    assert_merge(v, 1, "h", "ug", 3);
    assert_merge(v, 2, " ", "hug", 2);
    assert_merge(v, 3, " ", "p", 2);
    assert_merge(v, 4, "u", "n", 2);
    assert_int_equal(s->stop, GPT2_BPE_STOP_MIN_FREQUENCY);
    assert_int_equal(s->stop_count, 1);
    assert_int_equal(s->n_tokens, 10);
    gpt2_bpe_vocab_free(v);

    /* Pieces never merge across each other: "ab" in "a b" is split by the space rule. */
    v = train_or_fail("a b a b a b", 11, 300, 1);
    s = gpt2_bpe_vocab_stats(v);
    assert_int_equal(s->n_merges, 2); /* " "+"b" (3), then " "+"a"... */
    for (int i = 0; i < s->n_merges; i++) {
        gpt2_bpe_merge m;
        gpt2_bpe_vocab_merge(v, i, &m);
        assert_true(m.left_len == 1 && m.left[0] == ' '); /* never "a"+" " or "b"+" " */
    }
    assert_int_equal(s->stop, GPT2_BPE_STOP_NO_PAIRS);
    gpt2_bpe_vocab_free(v);
}

/* ---- against the Python reference --------------------------------------------------------- */

static long stat_value(const char *stats, const char *key, char *word, size_t word_size) {
    char pat[64];
    snprintf(pat, sizeof pat, "%s ", key);
    for (const char *line = stats; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, pat, strlen(pat)) == 0) {
            const char *val = line + strlen(pat);
            if (word) {
                size_t n = strcspn(val, "\n");
                snprintf(word, word_size, "%.*s", (int)n, val);
            }
            return strtol(val, NULL, 10);
        }
    fail_msg("stats.txt has no %s", key);
    return 0;
}

static void test_reference_fixtures(void **state) {
    size_t len, n_cases = 0;
    char *sample = read_file(fixture_path("bpe_train/sample.txt"), &len);
    char *cases = read_file(fixture_path("bpe_train/cases.txt"), NULL);
    for (char *name = strtok(cases, "\n"); name; name = strtok(NULL, "\n"), n_cases++) {
        char *stats = read_file(fixture_path("bpe_train/%s/stats.txt", name), NULL);
        char stop[32];
        int vocab_size = (int)stat_value(stats, "vocab_size", NULL, 0);
        gpt2_bpe_vocab *v = train_or_fail(sample, len, vocab_size, stat_value(stats, "min_frequency", NULL, 0));
        const gpt2_bpe_train_stats *s = gpt2_bpe_vocab_stats(v);
        assert_int_equal(s->n_merges, stat_value(stats, "n_merges", NULL, 0));
        assert_int_equal(s->n_tokens, stat_value(stats, "n_tokens", NULL, 0));
        assert_int_equal(s->n_pieces, stat_value(stats, "n_pieces", NULL, 0));
        assert_int_equal(s->n_unique_pieces, stat_value(stats, "n_unique_pieces", NULL, 0));
        assert_int_equal(s->stop_count, stat_value(stats, "stop_count", NULL, 0));
        stat_value(stats, "stop", stop, sizeof stop);
        const char *want_stop = s->stop == GPT2_BPE_STOP_VOCAB_SIZE      ? "vocab_size"
                                : s->stop == GPT2_BPE_STOP_MIN_FREQUENCY ? "min_frequency"
                                                                         : "no_pairs";
        assert_string_equal(stop, want_stop);

        /* merge counts, line by line */
        char *counts = read_file(fixture_path("bpe_train/%s/counts.txt", name), NULL);
        char *c = counts;
        for (int i = 0; i < s->n_merges; i++) {
            gpt2_bpe_merge m;
            assert_int_equal(gpt2_bpe_vocab_merge(v, i, &m), 0);
            char *end;
            long want = strtol(c, &end, 10);
            assert_true(end != c);
            if (m.count != want) fail_msg("%s: merge %d has count %lld, the reference %ld", name, i, (long long)m.count, want);
            c = end;
        }

        /* the saved files, byte for byte */
        char *dir = make_temp_dir();
        gpt2_error err;
        assert_int_equal(gpt2_bpe_vocab_save(v, dir, &err), GPT2_OK);
        const char *files[] = {"merges.txt", "vocab.json"};
        for (int f = 0; f < 2; f++) {
            size_t n_got, n_want;
            char *got = slurp(dir, files[f], &n_got);
            char *want = read_file(fixture_path("bpe_train/%s/%s", name, files[f]), &n_want);
            if (n_got != n_want || memcmp(got, want, n_got) != 0) {
                size_t k = 0;
                while (k < n_got && k < n_want && got[k] == want[k]) k++;
                size_t line = 1;
                for (size_t j = 0; j < k; j++) line += want[j] == '\n';
                fail_msg("%s: %s differs from the reference at byte %zu (line %zu): got \"%.40s\", "
                         "expected \"%.40s\"", name, files[f], k, line, got + k, want + k);
            }
            free(got);
            free(want);
        }
        remove_tree(dir);
        free(counts);
        free(stats);
        gpt2_bpe_vocab_free(v);
    }
    assert_true(n_cases >= 3);
    free(cases);
    free(sample);
}

/* ---- round trips through the tokenizer ------------------------------------------------------ */

/* Trains on text, saves, loads with gpt2_tokenizer_load and checks the contract. */
static void check_round_trip(const char *text, size_t len, int vocab_size, int64_t min_freq) {
    gpt2_bpe_vocab *v = train_or_fail(text, len, vocab_size, min_freq);
    const gpt2_bpe_train_stats *s = gpt2_bpe_vocab_stats(v);
    char *dir = make_temp_dir();
    gpt2_error err;
    if (gpt2_bpe_vocab_save(v, dir, &err) != GPT2_OK) fail_msg("save: %s", err.msg);
    gpt2_tokenizer *t = load_tok(dir);
    assert_int_equal(gpt2_tokenizer_n_vocab(t), s->n_vocab);
    assert_int_equal(gpt2_tokenizer_eot(t), s->n_vocab - 1);
    assert_int_equal(s->n_vocab, 257 + s->n_merges);
    /* every token, merges included, has the id training gave it */
    for (int32_t id = 0; id < s->n_vocab; id++) {
        size_t n1, n2;
        const char *a = gpt2_bpe_vocab_token(v, id, &n1);
        const char *b = gpt2_tokenizer_token_bytes(t, id, &n2);
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(n1, n2);
        assert_memory_equal(a, b, n1);
    }
    for (int i = 0; i < s->n_merges; i++) {
        gpt2_bpe_merge m;
        assert_int_equal(gpt2_bpe_vocab_merge(v, i, &m), 0);
        char *cat = malloc(m.left_len + m.right_len + 1);
        memcpy(cat, m.left, m.left_len);
        memcpy(cat + m.left_len, m.right, m.right_len);
        assert_int_equal(gpt2_tokenizer_token_id(t, cat, m.left_len + m.right_len), 256 + i);
        assert_int_equal(gpt2_tokenizer_token_id(t, m.left, m.left_len), m.left_id);
        assert_int_equal(gpt2_tokenizer_token_id(t, m.right, m.right_len), m.right_id);
        assert_true(m.left_id < 256 + i && m.right_id < 256 + i);
        free(cat);
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (gpt2_tokenizer_encode(t, text, len, 0, &ids, &n_ids, &err) != GPT2_OK) fail_msg("encode: %s", err.msg);
    /* encoding by rank reproduces what training ended with */
    assert_int_equal(n_ids, s->n_tokens);
    if (s->n_merges > 0) assert_true(n_ids < len);
    char *back = malloc(len + 1);
    size_t k = 0;
    for (size_t i = 0; i < n_ids; i++) {
        size_t n;
        const char *b = gpt2_tokenizer_token_bytes(t, ids[i], &n);
        assert_non_null(b);
        assert_true(k + n <= len);
        memcpy(back + k, b, n);
        k += n;
    }
    assert_int_equal(k, len);
    assert_memory_equal(back, text, len);
    free(back);
    free(ids);
    gpt2_tokenizer_free(t);
    remove_tree(dir);
    gpt2_bpe_vocab_free(v);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static void test_round_trip(void **state) {
    size_t len;
    char *sample = read_file(fixture_path("bpe_train/sample.txt"), &len);
    check_round_trip(sample, len, 1000, 1);
    check_round_trip(sample, len, 400, 2);
    check_round_trip(sample, len, 257, 2); /* no merges: just the bytes and <|endoftext|> */
    free(sample);

    /* bytes that are never UTF-8, NUL, lone continuation bytes, and "<|endoftext|>" as text */
    static const char odd[] = "\xff\xfe\xff\xfe\x80\x80\x80 \xc3\xc3 x\x00y\x00y <|endoftext|> "
                              "<|endoftext|>\xff\xfe\xff\xfe \xed\xa0\x80\xed\xa0\x80";
    check_round_trip(odd, sizeof odd - 1, 300, 1);

    /* random mixtures, words from a small alphabet so that merges go deep */
    static const char *parts[] = {"a", "b", "ab", " ", "  ", "\n", "é", "中", "😀", "1", "23", ".", "'s",
                                  "\xff", "\x80", "\t", "'", "Ω", "\xe2\x82", "ba", "aaa"};
    char *buf = malloc(1 << 16);
    for (int round = 0; round < 30; round++) {
        size_t n = 0, want = 20 + rnd(3000);
        while (n < want) {
            const char *p = parts[rnd(sizeof parts / sizeof *parts)];
            memcpy(buf + n, p, strlen(p));
            n += strlen(p);
        }
        check_round_trip(buf, n, 257 + (int)rnd(400), 1 + rnd(3));
    }

    /* one long piece: 40000 letters, no spaces */
    for (size_t i = 0; i < 40000; i++) buf[i] = "abcab"[rnd(5)];
    check_round_trip(buf, 40000, 2000, 2);
    free(buf);
}

/* Ids 0..255 are the bytes in the order of GPT-2's own encoder.json. */
static void test_byte_order_matches_gpt2(void **state) {
    gpt2_tokenizer *gpt2 = load_tok(test_env("GPT2_TOKENIZER_DIR"));
    gpt2_bpe_vocab *v = train_or_fail("hello hello", 11, 300, 2);
    for (int32_t id = 0; id < 256; id++) {
        size_t n1, n2;
        const char *a = gpt2_bpe_vocab_token(v, id, &n1);
        const char *b = gpt2_tokenizer_token_bytes(gpt2, id, &n2);
        assert_int_equal(n1, 1);
        assert_int_equal(n2, 1);
        if (a[0] != b[0]) fail_msg("id %d is byte 0x%02x here, 0x%02x in GPT-2", (int)id, (unsigned char)a[0], (unsigned char)b[0]);
    }
    gpt2_bpe_vocab_free(v);
    gpt2_tokenizer_free(gpt2);
}

/* ---- saving ---------------------------------------------------------------------------------- */

static void test_save(void **state) {
    const char *text = "the cat sat on the mat, \"quoted\" \\back\\slash\\ the end";
    gpt2_bpe_vocab *v = train_or_fail(text, strlen(text), 300, 1);
    char *dir = make_temp_dir();
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/a/b/c", dir); /* missing parents are made */
    gpt2_error err;
    assert_int_equal(gpt2_bpe_vocab_save(v, sub, &err), GPT2_OK);
    assert_int_equal(gpt2_bpe_vocab_save(v, sub, &err), GPT2_OK); /* overwrites */
    size_t n;
    char *merges = slurp(sub, "merges.txt", &n);
    assert_true(strncmp(merges, "#version: 0.2\n", 14) == 0);
    assert_non_null(strstr(merges, "\nĠ \"\n"));   /* ' ' + '"', in GPT-2's alphabet */
    assert_non_null(strstr(merges, "\nĠ \\\n"));   /* ' ' + '\\' */
    free(merges);
    char *vocab = slurp(sub, "vocab.json", &n);
    assert_true(strncmp(vocab, "{\"!\":0,\"\\\"\":1,\"#\":2,", 20) == 0);
    assert_non_null(strstr(vocab, "\"\\\\\":59,"));   /* backslash, escaped */
    assert_non_null(strstr(vocab, "\"Ā\":188,"));     /* byte 0x00 */
    assert_non_null(strstr(vocab, "\"<|endoftext|>\":"));
    free(vocab);
    /* no temporary files left behind, files readable by others */
    DIR *d = opendir(sub);
    assert_non_null(d);
    int n_files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        n_files++;
        if (strcmp(e->d_name, "vocab.json") && strcmp(e->d_name, "merges.txt")) fail_msg("left behind: %s", e->d_name);
        char path[4400];
        struct stat sb;
        if (snprintf(path, sizeof path, "%s/%s", sub, e->d_name) >= (int)sizeof path) fail_msg("path too long");
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal(sb.st_mode & 0777, 0644);
    }
    closedir(d);
    assert_int_equal(n_files, 2);
    gpt2_tokenizer_free(load_tok(sub));
    remove_tree(dir);
    gpt2_bpe_vocab_free(v);
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void expect_train_error(const char *text, size_t len, int vocab_size, int64_t min_freq,
                               gpt2_status want, const char *keyword) {
    gpt2_bpe_train_params p = gpt2_bpe_train_default_params();
    p.vocab_size = vocab_size;
    p.min_frequency = min_freq;
    gpt2_bpe_vocab *v = (gpt2_bpe_vocab *)&p; /* must come back NULL */
    gpt2_error err;
    gpt2_status st = gpt2_bpe_train(text, len, p, &v, &err);
    if (st != want) fail_msg("expected %s, got %s: %s", gpt2_status_name(want), gpt2_status_name(st), err.msg);
    assert_int_equal(err.status, want);
    assert_null(v);
    if (!strstr(err.msg, keyword)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, keyword);
}

static int cancel_after_3(void *ud, int done, int wanted) {
    int *calls = ud;
    ++*calls;
    assert_true(wanted == 4096 - 257);
    return done >= 3;
}

static void test_errors(void **state) {
    const char *t = "hello world";
    expect_train_error(t, 11, 256, 2, GPT2_ERR_INVALID_ARG, "vocab_size 256 is out of range: expected 257");
    expect_train_error(t, 11, 0, 2, GPT2_ERR_INVALID_ARG, "vocab_size 0");
    expect_train_error(t, 11, -5, 2, GPT2_ERR_INVALID_ARG, "vocab_size -5");
    expect_train_error(t, 11, GPT2_BPE_MAX_VOCAB + 1, 2, GPT2_ERR_INVALID_ARG, "to 16777216");
    expect_train_error(t, 11, 300, 0, GPT2_ERR_INVALID_ARG, "min_frequency 0: expected at least 1");
    expect_train_error(t, 0, 300, 2, GPT2_ERR_INVALID_ARG, "no training text (0 bytes)");
    expect_train_error(NULL, 0, 300, 2, GPT2_ERR_INVALID_ARG, "no training text");
    expect_train_error(NULL, 5, 300, 2, GPT2_ERR_INVALID_ARG, "NULL argument");
    gpt2_bpe_train_params p = gpt2_bpe_train_default_params();
    assert_int_equal(p.vocab_size, 4096);
    assert_int_equal(p.min_frequency, 2);
    assert_int_equal(gpt2_bpe_train(t, 11, p, NULL, NULL), GPT2_ERR_INVALID_ARG);

    /* the callback stops training */
    int calls = 0;
    p.progress = cancel_after_3;
    p.user_data = &calls;
    p.min_frequency = 1;
    gpt2_bpe_vocab *v = NULL;
    gpt2_error err;
    assert_int_equal(gpt2_bpe_train("abcdefgh abcdefgh", 17, p, &v, &err), GPT2_CANCELLED);
    assert_null(v);
    assert_int_equal(calls, 3);
    assert_non_null(strstr(err.msg, "cancelled after 3"));

    /* saving where no directory can be */
    v = train_or_fail(t, 11, 300, 1);
    char *dir = make_temp_dir();
    char file[4200], path[4300];
    snprintf(file, sizeof file, "%s/plain-file", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(gpt2_bpe_vocab_save(v, file, &err), GPT2_ERR_IO);
    snprintf(path, sizeof path, "%s: not a directory", file);
    assert_string_equal(err.msg, path);
    snprintf(path, sizeof path, "%s/sub", file);
    assert_int_equal(gpt2_bpe_vocab_save(v, path, &err), GPT2_ERR_IO);
    assert_int_equal(err.status, GPT2_ERR_IO);
    snprintf(path, sizeof path, "%s/sub: cannot create directory: Not a directory", file);
    assert_string_equal(err.msg, path);
    if (geteuid() != 0) { /* root writes anywhere */
        snprintf(path, sizeof path, "%s/ro", dir);
        assert_int_equal(mkdir(path, 0555), 0);
        assert_int_equal(gpt2_bpe_vocab_save(v, path, &err), GPT2_ERR_IO);
        if (!strstr(err.msg, "/ro/merges.txt: cannot create a file in directory ") ||
            !strstr(err.msg, "/ro: Permission denied"))
            fail_msg("unexpected message: %s", err.msg);
    }
    assert_int_equal(gpt2_bpe_vocab_save(v, "", &err), GPT2_ERR_INVALID_ARG);
    assert_int_equal(gpt2_bpe_vocab_save(NULL, dir, &err), GPT2_ERR_INVALID_ARG);
    remove_tree(dir);
    gpt2_bpe_vocab_free(v);
    gpt2_bpe_vocab_free(NULL);
    assert_null(gpt2_bpe_vocab_stats(NULL));
    assert_int_equal(gpt2_bpe_vocab_n_merges(NULL), 0);
}

/* ---- the command ----------------------------------------------------------------------------- */

typedef struct {
    int status;
    char *out, *err;
} run_result;

/* Runs `$GPTSCOPE_BIN args` with stdin from /dev/null. */
static run_result run(const char *fmt, ...) {
    char args[4096], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    char out_path[] = "/tmp/gptscope-bpe-out-XXXXXX", err_path[] = "/tmp/gptscope-bpe-err-XXXXXX";
    int fo = mkstemp(out_path), fe = mkstemp(err_path);
    assert_true(fo >= 0 && fe >= 0);
    close(fo), close(fe);
    snprintf(cmd, sizeof cmd, "%s %s </dev/null >%s 2>%s", test_env("GPTSCOPE_BIN"), args, out_path, err_path);
    int ws = system(cmd);
    run_result r = {.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws)};
    r.out = read_file(out_path, NULL);
    r.err = read_file(err_path, NULL);
    unlink(out_path), unlink(err_path);
    if (strstr(r.err, "Sanitizer") || strstr(r.err, "runtime error"))
        fail_msg("sanitizer report from `gptscope %s`:\n%s", args, r.err);
    return r;
}

static void run_free(run_result *r) {
    free(r->out);
    free(r->err);
}

static void test_cli(void **state) {
    char *dir = make_temp_dir();
    char file[4200], out[4200];
    snprintf(file, sizeof file, "%s/text.txt", dir);
    snprintf(out, sizeof out, "%s/tok", dir);
    /* First half: "alpha beta" lines. Second half: "zulu" lines, plus "é" straddling the
     * middle so that --train-fraction 0.5 would cut inside it. */
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    for (int i = 0; i < 50; i++) fputs("alpha beta\n", f); /* 550 bytes */
    for (int i = 0; i < 50; i++) fputc('x', f);
    fputs("é", f);                                          /* bytes 600..601 */
    for (int i = 0; i < 120; i++) fputs("zulu ", f);           /* 600 bytes */
    fputs("\n", f);                                         /* total 1203; half 601 */
    fclose(f);

    run_result r = run("train-tokenizer --vocab-size 400 --train-fraction 0.5 -o %s %s", out, file);
    if (r.status != 0) fail_msg("exit %d: %s", r.status, r.err);
    assert_non_null(strstr(r.out, "from the first 600 of 1203 bytes")); /* é not cut in two */
    assert_non_null(strstr(r.out, "bytes per token"));
    assert_non_null(strstr(r.err, "note:")); /* ran out of pairs before 400 */
    gpt2_tokenizer *t = load_tok(out);
    assert_true(gpt2_tokenizer_token_id(t, " beta", 5) >= 256);
    assert_int_equal(gpt2_tokenizer_token_id(t, "lu", 2), -1); /* never saw the second half */
    assert_int_equal(gpt2_tokenizer_eot(t), gpt2_tokenizer_n_vocab(t) - 1);
    gpt2_tokenizer_free(t);
    run_free(&r);

    r = run("train-tokenizer --vocab-size 270 --min-frequency 1 -o %s %s", out, file);
    assert_int_equal(r.status, 1); /* the first run's files are not replaced unasked */
    assert_non_null(strstr(r.err, "vocab.json exists: --force replaces it"));
    run_free(&r);
    r = run("train-tokenizer --vocab-size 270 --min-frequency 1 --force -o %s %s", out, file);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "learned 13 merges"));
    assert_non_null(strstr(r.out, "from all 1203 bytes"));
    assert_string_equal(r.err, "");
    t = load_tok(out);
    assert_true(gpt2_tokenizer_token_id(t, " zulu", 5) >= 256);
    gpt2_tokenizer_free(t);
    run_free(&r);

    /* usage errors: exit 2 */
    const char *bad[] = {"train-tokenizer -o %s %s", "train-tokenizer --vocab-size 256 -o %s %s",
                         "train-tokenizer --vocab-size 300 --train-fraction 0 -o %s %s",
                         "train-tokenizer --vocab-size 300 --train-fraction 1.5 -o %s %s",
                         "train-tokenizer --vocab-size 300 --min-frequency 0 -o %s %s",
                         "train-tokenizer --vocab-size 300 %s%s"};
    const char *why[] = {"train-tokenizer needs --vocab-size N", "--vocab-size: expected an integer in [257",
                         "--train-fraction: expected a number in (0, 1]", "--train-fraction",
                         "--min-frequency", "train-tokenizer needs -o DIR"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = run(bad[i], i == 5 ? "" : out, file);
        if (r.status != 2 || !strstr(r.err, why[i]))
            fail_msg("`%s`: exit %d, stderr: %s", bad[i], r.status, r.err);
        run_free(&r);
    }
    /* errors: exit 1, one line naming the file */
    r = run("train-tokenizer --vocab-size 300 --force -o %s %s/missing.txt", out, dir);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "missing.txt: cannot open"));
    run_free(&r);
    r = run("train-tokenizer --vocab-size 300 -o %s/sub %s", file, file);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "sub: cannot create directory"));
    run_free(&r);
    r = run("train-tokenizer --vocab-size 300 --force -o %s -", out); /* empty stdin */
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "stdin: no text to learn from (0 bytes)"));
    run_free(&r);
    remove_tree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_one_piece),
        cmocka_unit_test(test_hand_pieces),
        cmocka_unit_test(test_reference_fixtures),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_byte_order_matches_gpt2),
        cmocka_unit_test(test_save),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
