/* test_cli_json.c — every command's --json output read by an independent
 * parser, Python's json module held strict (UTF-8, no NaN or Infinity;
 * tests/ref/json_check.py), with hostile file and model directory names,
 * tokens whose bytes are not valid UTF-8 on their own, and a model that
 * computes NaN. The values are checked against facts from outside gptscope:
 * the reference tokenizer's ids (tests/ref/bpe_ref.py, its fixtures), the
 * input's own bytes, the numpy reference's loss, probabilities that sum to 1,
 * attention rows that sum to 1. (bench --json: tests/test_cli.c.) */
#include <cjson/cJSON.h>
#include <math.h>

#include "test_util.h"
#include "cli_run.h"

/* A model directory named with quotes, a backslash and a newline. */
static const char *hostile_model(void) {
    static char dir[256];
    if (!dir[0]) {
        char base[] = "/tmp/gptscope-json-XXXXXX";
        assert_non_null(mkdtemp(base));
        snprintf(dir, sizeof dir, "%s/m\"o'd\\el\n", base);
        copy_fixture_model("tiny-f32", dir, 0);
    }
    return dir;
}

static void remove_hostile_model(void) {
    const char *dir = hostile_model();
    remove_model_copy(dir);
    char base[256];
    snprintf(base, sizeof base, "%s", dir);
    *strrchr(base, '/') = '\0';
    rmdir(base);
}

/* The reference tokenizer's rows (tokenizer/gpt2_py.tsv: hex text, ids) that
 * test what JSON makes hard: the first (plain), the first with a NUL, the
 * first with a 4-byte character (split into tokens that are not UTF-8 on their
 * own), the first with ESC. */
static void test_tokenize_json(void **state) {
    (void)state;
    char *tsv = read_file(fixture_path("tokenizer/gpt2_py.tsv"), NULL);
    const char *dir = test_env("GPT2_TOKENIZER_DIR");
    int have[4] = {0}, n_checked = 0;
    for (char *line = strtok(tsv, "\n"); line; line = strtok(NULL, "\n")) {
        char *tab = strchr(line, '\t');
        if (line[0] == '#' || !tab) continue;
        *tab = '\0';
        char text[4096];
        size_t n = 0;
        for (const char *h = line; h[0] && h[1] && n < sizeof text; h += 2) sscanf(h, "%2hhx", (unsigned char *)&text[n++]);
        int kind = n_checked == 0 ? 0 : memchr(text, 0, n) ? 1 : memchr(text, 0x1b, n) ? 3 : -1;
        for (size_t i = 0; kind < 0 && i < n; i++)
            if ((unsigned char)text[i] >= 0xF0) kind = 2;
        if (kind < 0 || have[kind]) continue;
        have[kind] = 1, n_checked++;
        run_result r = run_in(text, n, "tokenize -m %s --json", dir);
        assert_int_equal(r.status, 0);
        char lets[16384];
        snprintf(lets, sizeof lets, "%s %s", hex_let("text", text, n), hex_let("ids", tab + 1, strlen(tab + 1)));
        py_check(line, r.out, lets, "j['ids'] == [int(x) for x in arg['ids'].split()]",
                 "len(j['tokens']) == len(j['ids'])",
                 /* the token texts give back the input's bytes exactly */
                 "b''.join(token_bytes(j, i) for i in range(len(j['ids']))) == arg['text']",
                 /* tokens_bytes: only when needed, then one entry per token, null where the text is exact */
                 "('tokens_bytes' in j) == (not all(exact_text(token_bytes(j, i)) for i in range(len(j['ids']))))",
                 "all((b is None) == exact_text(token_bytes(j, i)) for i, b in enumerate(j.get('tokens_bytes', [])))",
                 "all('\\ufffd' in j['tokens'][i] for i, b in enumerate(j.get('tokens_bytes', [])) if b)", NULL);
        run_free(&r);
    }
    free(tsv);
    assert_int_equal(n_checked, 4);
    /* input that is not UTF-8 at all: each byte comes back */
    static const char bad[] = "caf\xe9 \xff\xfe \xc3( \xed\xa0\x80";
    run_result r = run_in(bad, sizeof bad - 1, "tokenize -m %s --json", dir);
    assert_int_equal(r.status, 0);
    py_check("tokenize --json of invalid UTF-8", r.out, hex_let("text", bad, sizeof bad - 1),
             "b''.join(token_bytes(j, i) for i in range(len(j['ids']))) == arg['text']", "'tokens_bytes' in j", NULL);
    run_free(&r);
}

/* topk --json over the whole vocabulary, from a model directory with a hostile
 * name: each id once, by probability, the probabilities a softmax of the
 * logits that sums to 1, each token's bytes those of the reference vocabulary. */
static void test_topk_json(void **state) {
    (void)state;
    const char *mdir = hostile_model();
    run_result r = run(NULL, "topk -m %s -p %s -k 100000 --json", sq(mdir), sq("the cat sat"));
    assert_int_equal(r.status, 0);
    char lets[1024];
    snprintf(lets, sizeof lets, "%s", hex_let("model", mdir, strlen(mdir)));
    py_check("topk --json", r.out, lets, "sorted(e['id'] for e in j) == list(range(load_json(arg['model'] + b'/config.json')['vocab_size']))",
             "all(j[i]['prob'] >= j[i + 1]['prob'] for i in range(len(j) - 1))",
             "abs(sum(e['prob'] for e in j) - 1) < 1e-6",
             "max(abs(e['prob'] - math.exp(e['logit'] - logsumexp([x['logit'] for x in j]))) for e in j) < 1e-6",
             "all(text_bytes(e, 'token') == ref_tokenizer(arg['model']).decode([e['id']]) for e in j)", NULL);
    run_free(&r);
    r = run(NULL, "topk -m %s -p %s -k 5 --json", sq(mdir), sq("the cat sat"));
    py_check("topk -k 5 --json", r.out, "", "len(j) == 5", "0 < sum(e['prob'] for e in j) <= 1", NULL);
    run_free(&r);
}

/* attention --json: the prompt's reference ids and bytes (also for a character
 * split across tokens), causal rows that sum to 1. */
static void test_attention_json(void **state) {
    (void)state;
    const char *mdir = hostile_model();
    char *prompt = read_file(fixture_path("cli/tiny-f32/prompt.txt"), NULL);
    char *ids = read_file(fixture_path("cli/tiny-f32/prompt_ids.txt"), NULL);
    run_result r = run(NULL, "attention -m %s -p %s --layer 1 --head 2 --json", sq(mdir), sq(prompt));
    assert_int_equal(r.status, 0);
    char lets[16384];
    snprintf(lets, sizeof lets, "%s %s", hex_let("prompt", prompt, strlen(prompt)), hex_let("ids", ids, strlen(ids)));
    py_check("attention --json", r.out, lets, "j['ids'] == [int(x) for x in arg['ids'].split()]",
             "b''.join(token_bytes(j, i) for i in range(len(j['ids']))) == arg['prompt']",
             "len(j['weights']) == len(j['ids']) and all(len(row) == len(j['ids']) for row in j['weights'])",
             "all(abs(sum(row) - 1) < 1e-5 for row in j['weights'])",
             "all(w == 0 for i, row in enumerate(j['weights']) for w in row[i + 1:])",
             "all(0 <= w <= 1 for row in j['weights'] for w in row)", "'weights_nonfinite' not in j", NULL);
    run_free(&r);
    /* a character split over tokens that are not UTF-8 on their own; ids from the reference tokenizer */
    static const char split[] = "the \xf0\x9f\x98\x80 cat";
    r = run(NULL, "attention -m %s -p %s --layer 0 --head 1 --json", sq(mdir), sq(split));
    assert_int_equal(r.status, 0);
    snprintf(lets, sizeof lets, "%s %s", hex_let("prompt", split, strlen(split)), hex_let("model", mdir, strlen(mdir)));
    py_check("attention --json, split character", r.out, lets,
             "j['ids'] == ref_tokenizer(arg['model']).encode(arg['prompt'].decode())",
             "b''.join(token_bytes(j, i) for i in range(len(j['ids']))) == arg['prompt']", "'tokens_bytes' in j",
             "all(abs(sum(row) - 1) < 1e-5 for row in j['weights'])", NULL);
    run_free(&r);
    free(prompt), free(ids);
}

/* attribute --json from a model directory with a hostile name, a prompt
 * with a character split over tokens: the model's name and the prompt's
 * bytes come back exactly, the parts add up to the logit, one per head. */
static void test_attribute_json(void **state) {
    (void)state;
    const char *mdir = hostile_model();
    static const char split[] = "the \xf0\x9f\x98\x80 cat";
    run_result r = run(NULL, "attribute -m %s -p %s --vs ' the' --json", sq(mdir), sq(split));
    assert_int_equal(r.status, 0);
    char lets[16384];
    snprintf(lets, sizeof lets, "%s %s", hex_let("prompt", split, strlen(split)), hex_let("model", mdir, strlen(mdir)));
    py_check("attribute --json", r.out, lets, "text_bytes(j, 'model') == arg['model'].rstrip(b'/').split(b'/')[-1]",
             "j['ids'] == ref_tokenizer(arg['model']).encode(arg['prompt'].decode())",
             "b''.join(token_bytes(j, i) for i in range(len(j['ids']))) == arg['prompt']",
             "j['pos'] == len(j['ids']) - 1 and j['baseline']['token'] == ' the' and j['target']['id'] >= 0",
             "len(j['heads']) == 2 and all(len(row) == 4 for row in j['heads'])",
             "len(j['attn_bias']) == len(j['mlp']) == 2 and j['norm'] == 'layer' and j['ablated'] == []",
             "abs(j['sum'] - j['logit']) < 1e-4 * max(1, abs(j['logit']))",
             "abs(j['embed'] + sum(map(sum, j['heads'])) + sum(j['attn_bias']) + sum(j['mlp']) + j['ln_f_bias'] - j['sum']) < 1e-9",
             NULL);
    run_free(&r);
}

/* eval --json on files named with a quote and a backslash, and with bytes
 * that are not UTF-8 and control bytes: the name comes back exactly, the
 * figures are the numpy reference's. */
static void test_eval_json_names(void **state) {
    (void)state;
    const char *mdir = hostile_model();
    static const char *names[] = {"q\"uote\\x.txt", "caf\xe9\x1b[31m\n.txt"};
    char *text = read_file(fixture_path("cli/tiny-f32/eval.txt"), NULL);
    char dir[] = "/tmp/gptscope-json-eval-XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
        run_result r = run(NULL, "eval -q --json -m %s %s", sq(mdir), sq(path));
        assert_int_equal(r.status, 0);
        const char *ref = fixture_path("cli/tiny-f32/eval.json");
        char lets[4096];
        snprintf(lets, sizeof lets, "%s %s", hex_let("path", path, strlen(path)), hex_let("ref", ref, strlen(ref)));
        py_check(names[i], r.out, lets, "text_bytes(j, 'file') == arg['path']",
                 "('file_bytes' in j) == (not exact_text(arg['path']))",
                 "all(j[k] == load_json(arg['ref'])[k] for k in ('tokens', 'scored', 'bytes'))",
                 "abs(j['nats_per_token'] - load_json(arg['ref'])['nats_per_token']) < 1e-4",
                 "abs(j['bits_per_byte'] - load_json(arg['ref'])['bits_per_byte']) < 1e-4", "j['from_byte'] == 0",
                 NULL);
        run_free(&r);
        unlink(path);
    }
    rmdir(dir);
    free(text);
}

/* A copy of tiny-f32 whose h.1.ln_1.bias is NaN: layer 0 stays finite, layer
 * 1's attention and every logit are NaN. */
static void make_nan_model(const char *dir) {
    copy_fixture_model("tiny-f32", dir, 0);
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    size_t len;
    unsigned char *st = read_file(path, &len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | st[i];
    cJSON *h = cJSON_ParseWithLength((const char *)st + 8, hlen);
    cJSON *offs = cJSON_GetObjectItem(cJSON_GetObjectItem(h, "h.1.ln_1.bias"), "data_offsets");
    assert_non_null(offs);
    const size_t begin = (size_t)offs->child->valuedouble, end = (size_t)offs->child->next->valuedouble;
    const float nan = NAN;
    for (size_t at = 8 + hlen + begin; at < 8 + hlen + end; at += 4) memcpy(st + at, &nan, 4);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(st, 1, len, f);
    fclose(f);
    cJSON_Delete(h);
    free(st);
}

/* Weights holding NaN give no JSON full of nulls: the model is refused at
 * load, with the tensor named, by every command (its JSON output never holds
 * NaN, which JSON has no literal for). */
static void test_nonfinite(void **state) {
    (void)state;
    char dir[] = "/tmp/gptscope-json-nan-XXXXXX";
    assert_non_null(mkdtemp(dir));
    make_nan_model(dir);
    const char *cmds[] = {"topk -m %s -p 'the cat' -k 5 --json",
                          "attention -m %s -p 'the cat sat on' --layer 1 --head 0 --json", "eval -q --json -m %s %s",
                          "attribute -m %s -p 'the cat' --json"};
    for (int i = 0; i < 4; i++) {
        run_result r = run(NULL, cmds[i], dir, fixture_path("cli/tiny-f32/eval.txt"));
        assert_int_equal(r.status, 1);
        assert_string_equal(r.out, "");
        assert_non_null(strstr(r.err, "h.1.ln_1.bias"));
        assert_non_null(strstr(r.err, "must be finite"));
        run_free(&r);
    }
    remove_model_copy(dir);
}

static int teardown(void **state) {
    (void)state;
    remove_hostile_model();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenize_json),   cmocka_unit_test(test_topk_json),
        cmocka_unit_test(test_attention_json),  cmocka_unit_test(test_eval_json_names),
        cmocka_unit_test(test_nonfinite),       cmocka_unit_test(test_attribute_json),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
