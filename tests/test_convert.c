/* test_convert.c — convert writes the families beyond GPT-2 (Llama, Mistral, Qwen2, Qwen3,
 * GPT-NeoX) as Hugging Face directories of their own architecture, checked against
 * independent readers:
 *   - every arch fixture (make_arch_fixtures.py: HF directories and GGUF files of each family
 *     and option, F32, F16, BF16, Q8_0 and a Q8_0/F16 mix) converted to F32 loads back with
 *     the source's logits bit for bit (a block format's decode, which rounds its inputs to
 *     8 bits where F32 does not, within test_arch's Q8 tolerance), and so does the
 *     conversion in the stored types; converting the conversion writes the same files;
 *   - tests/ref/decoder_ref.py, a float64 forward pass that reads a directory as
 *     transformers does (config.json's keys, HF's names and layouts), run on each
 *     conversion agrees with gptscope there within test_arch's tolerance;
 *   - the real tokenizers carried by GGUF files (hf_gguf: Llama 3's, Qwen 2.5's, Qwen 3's
 *     byte-level BPE, Llama 2's SentencePiece kind) written as tokenizer.json: transformers.js
 *     (tests/ref/hf_tokenize.js) gives the ids gptscope gives from the GGUF, and those of
 *     the original tokenizer.json (hf_tok), with and without the BOS; gptscope reading the
 *     conversion gives them too;
 *   - what chatting needs survives: `gptscope template` prints the same for the source and
 *     the conversion, the end ids are kept; an HF source's tokenizer files are copied byte
 *     for byte;
 *   - what a family's Hugging Face layout cannot say (Mistral with biases) is refused.
 *   GPTSCOPE_FIXTURES, GPTSCOPE_BIN, PYTHON, HF_TOKENIZERS_DIR (transformers.js: lenml/main.js) */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>

#include "gpt2.h"
#include "arch_fixtures.h"
#include "cli_run.h"
#include "test_util.h"

/* test_arch's: float32 against float64, and a block format's 8-bit inputs */
#define TOL_LOGIT 2e-4
#define TOL_Q8 (25 * TOL_LOGIT)

static char *tmp_dir(void) {
    static char dirs[8][64];
    static int slot;
    char *d = dirs[slot++ & 7];
    snprintf(d, 64, "/tmp/gptscope-conv-XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static gpt2_model *load_ok(const char *path) {
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(path, &m, &err) != GPT2_OK) fail_msg("%s: %s", path, err.msg);
    return m;
}

/* ---- logits ---------------------------------------------------------------------- */

/* Every position's logits: of one batch (the prefill path), and token by token (decode). */
static void logits_of(gpt2_model *m, const int32_t *ids, int T, float **batch, float **decode) {
    const int V = gpt2_model_config(m)->n_vocab;
    gpt2_context *ctx;
    gpt2_error err;
    assert_int_equal(gpt2_context_new(m, gpt2_context_default_params(), &ctx, &err), GPT2_OK);
    capture cap = {malloc((size_t)T * V * sizeof(float)), V};
    gpt2_hooks hooks = {.on_logits = on_logits, .user_data = &cap};
    gpt2_context_set_hooks(ctx, &hooks);
    eval_ok(ctx, ids, T);
    gpt2_context_set_hooks(ctx, NULL);
    gpt2_context_reset(ctx);
    *batch = cap.all;
    *decode = malloc((size_t)T * V * sizeof(float));
    for (int t = 0; t < T; t++) {
        eval_ok(ctx, ids + t, 1);
        memcpy(*decode + (size_t)t * V, gpt2_context_logits(ctx), (size_t)V * sizeof(float));
    }
    gpt2_context_free(ctx);
}

static size_t n_differ(const float *a, const float *b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof *a) != 0;
    return d;
}

/* ---- files ----------------------------------------------------------------------- */

/* Every file of dir a is in b with the same bytes; config.json up to its
 * gptscope_converted_from (which names the source). Returns the count. */
static int same_files(const char *a, const char *b) {
    DIR *d = opendir(a);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char pa[4200], pb[4200];
        size_t la, lb;
        snprintf(pa, sizeof pa, "%s/%s", a, e->d_name);
        snprintf(pb, sizeof pb, "%s/%s", b, e->d_name);
        char *da = read_file(pa, &la), *db = read_file(pb, &lb);
        char *s1 = strstr(da, "gptscope_converted_from"), *s2 = strstr(db, "gptscope_converted_from");
        if (!strcmp(e->d_name, "config.json") && s1 && s2) la = (size_t)(s1 - da), lb = (size_t)(s2 - db);
        if (la != lb || memcmp(da, db, la)) fail_msg("%s and %s differ", pa, pb);
        free(da), free(db);
        n++;
    }
    closedir(d);
    return n;
}

/* config.json's model_type and architectures[0]. */
static void check_config(const char *dir, const char *model_type) {
    static const char *const archs[][2] = {{"llama", "LlamaForCausalLM"}, {"mistral", "MistralForCausalLM"},
                                           {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"},
                                           {"gpt_neox", "GPTNeoXForCausalLM"}, {"gemma", "GemmaForCausalLM"},
                                           {"gemma2", "Gemma2ForCausalLM"}, {"gemma3_text", "Gemma3ForCausalLM"}};
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = read_file(path, NULL);
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "model_type")->valuestring, model_type);
    const char *arch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "architectures"), 0)->valuestring;
    int found = 0;
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (!strcmp(archs[i][0], model_type)) found = 1, assert_string_equal(arch, archs[i][1]);
    assert_true(found);
    cJSON_Delete(j);
    free(text);
}

/* ---- the arch fixtures ------------------------------------------------------------- */

/* decoder_ref.py's logits (T, V) of dir for ids. */
static float *reference(const char *dir, const int32_t *ids, int T, int V) {
    char out[] = "/tmp/gptscope-conv-ref-XXXXXX", args[2048];
    const int fd = mkstemp(out);
    assert_true(fd >= 0);
    close(fd);
    int k = 0;
    for (int t = 0; t < T; t++) k += snprintf(args + k, sizeof args - (size_t)k, " %d", ids[t]);
    run_result r = run_script("%s tests/ref/decoder_ref.py --logits %s %s%s", test_env("PYTHON"), out, sq(dir), args);
    if (r.status) fail_msg("decoder_ref.py on %s: %s", dir, r.err);
    run_free(&r);
    size_t len;
    float *x = read_file(out, &len);
    unlink(out);
    assert_int_equal(len, (size_t)T * V * sizeof(float));
    return x;
}

/* One source: converted to F32 and in its stored types, each against the source's
 * logits; converted again; the reference on the F32 conversion. */
static void check_source(const char *src, const char *ref_name, const char *model_type, int block) {
    size_t T;
    char *ids_text = read_file(fixture_path("arch/ref/%s/ids.txt", ref_name), NULL);
    int32_t *ids = parse_ids(ids_text, &T);
    free(ids_text);
    gpt2_model *m = load_ok(src);
    const size_t V = (size_t)gpt2_model_config(m)->n_vocab, n = T * V;
    float *xb, *xd;
    logits_of(m, ids, (int)T, &xb, &xd);
    char *f32 = tmp_dir(), *stored = tmp_dir(), *again = tmp_dir();
    gpt2_error err;
    if (gpt2_model_save(m, f32, GPT2_DTYPE_F32, &err)) fail_msg("%s: %s", src, err.msg);
    if (gpt2_model_save_stored(m, stored, &err)) fail_msg("%s: %s", src, err.msg);
    check_config(f32, model_type);
    float *cb = NULL, *cd = NULL;
    const char *dirs[2] = {f32, stored};
    int rescaled = 0; /* a Gemma's embedding scale is sqrt(C) rounded to torch_dtype: f32 from bf16 changes it */
    for (int k = 0; k < 2; k++) {
        gpt2_model *c = load_ok(dirs[k]);
        float *b, *d;
        logits_of(c, ids, (int)T, &b, &d);
        const double db = max_abs_diff(xb, b, n), dd = max_abs_diff(xd, d, n);
        const float es = gpt2_model_config(m)->arch.embed_scale, ec = gpt2_model_config(c)->arch.embed_scale;
        if (es != ec) {
            print_message("  %-46s -> %s: embedding scale %.9g -> %.9g, logits move by %.1e\n", src, dirs[k], es, ec, db);
            assert_true(fabsf(es - ec) < 0.01f * es); /* a GGUF's is unrounded: f16 or bf16 files round it */
            rescaled = 1;
        }
        if (block && k == 0) print_message("  %-46s: a block format's logits against F32's: batch %.1e, decode %.1e\n", src, db, dd);
        if (es != ec) {
        } else if (block ? !(db < TOL_Q8 && dd < TOL_Q8) : n_differ(xb, b, n) + n_differ(xd, d, n) != 0)
            fail_msg("%s -> %s: %zu of %zu batch logits differ (max %.3g), %zu decode (max %.3g)", src, dirs[k],
                     n_differ(xb, b, n), n, db, n_differ(xd, d, n), dd);
        if (k == 0) {
            if (gpt2_model_save(c, again, GPT2_DTYPE_F32, &err)) fail_msg("%s: %s", f32, err.msg);
            cb = b, cd = d;
        } else {
            free(b), free(d);
        }
        gpt2_model_free(c);
    }
    const int files = same_files(f32, again);
    /* the reference on the conversion: gptscope's logits there, and the source's reference
     * (the same weights and description, so the same float64 computation) */
    float *r = reference(f32, ids, (int)T, (int)V);
    size_t len;
    float *was = read_file(fixture_path("arch/ref/%s/logits.f32", ref_name), &len);
    assert_int_equal(len, n * sizeof(float));
    const double rb = max_abs_diff(r, cb, n), rd = max_abs_diff(r, cd, n);
    print_message("  %-46s -> %-8s %d files; decoder_ref on it: gptscope's within %.1e (batch), %.1e (decode); "
                  "the source's reference: %zu of %zu differ\n", src, model_type, files, rb, rd, n_differ(r, was, n), n);
    assert_true(rb < TOL_LOGIT);
    assert_true(rd < TOL_LOGIT);
    size_t past_ulp = 0; /* float64 sums in another order could at most move the last bit of the float32 */
    for (size_t i = 0; i < n; i++) past_ulp += fabs((double)r[i] - was[i]) > ldexp(fabs((double)was[i]), -23);
    /* Gemma's norms are written as w' = (1 + w) - 1 in float: the model gptscope runs is the
       same bits, but the file's w' is not the source's w, so a float64 pass moves further */
    if (strncmp(model_type, "gemma", 5)) assert_int_equal(past_ulp, 0);
    else if (!rescaled) assert_true(max_abs_diff(r, was, n) < TOL_LOGIT);
    free(r), free(was), free(cb), free(cd), free(xb), free(xd), free(ids);
    gpt2_model_free(m);
    rm_rf(f32), rm_rf(stored), rm_rf(again);
}

static void test_arch_fixtures(void **state) {
    (void)state;
    row cases[32], ggufs[32];
    const int nc = read_rows("cases.tsv", cases, 32), ng = read_rows("gguf.tsv", ggufs, 32);
    for (int i = 0; i < nc; i++)
        check_source(fixture_path("arch/models/%s", cases[i].a), cases[i].a, cases[i].b, 0);
    for (int i = 0; i < ng; i++) {
        const char *type = NULL;
        for (int k = 0; k < nc; k++)
            if (!strcmp(cases[k].a, ggufs[i].b)) type = cases[k].b;
        assert_non_null(type);
        /* llama.cpp writes Mistral as a llama */
        check_source(fixture_path("arch/gguf/%s", ggufs[i].a), ggufs[i].c, strcmp(type, "mistral") ? type : "llama",
                     !strcmp(ggufs[i].d, "Q8_0") || !strcmp(ggufs[i].d, "MIX"));
    }
}

/* ---- tokenizers ----------------------------------------------------------------------- */

static int32_t *encode(const gpt2_tokenizer *t, const char *s, int flags, size_t *n) {
    int32_t *ids;
    gpt2_error err;
    if (gpt2_tokenizer_encode(t, s, strlen(s), flags, &ids, n, &err) != GPT2_OK) fail_msg("%s", err.msg);
    return ids;
}

/* ids (n) against a JSON list of ids. */
static int same_ids(const int32_t *ids, size_t n, const cJSON *want) {
    if ((int)n != cJSON_GetArraySize(want)) return 0;
    const cJSON *w = want->child;
    for (size_t i = 0; i < n; i++, w = w->next)
        if (ids[i] != (int32_t)w->valuedouble) return 0;
    return 1;
}

/* transformers.js (lib) on the tokenizer in dir over the texts of texts_path against
 * gptscope's ids from src (the GGUF) and conv (the conversion), and the original's
 * (orig_path, hf_tok's; its ids with the BOS only unless bos_differs); the texts' count. */
static int compare_texts(const char *name, const char *lib, const char *dir, const gpt2_tokenizer *src,
                         const gpt2_tokenizer *conv, const char *texts_path, const char *orig_path, int bos_differs,
                         int *n_bos) {
    char js_path[] = "/tmp/gptscope-conv-js-XXXXXX";
    const int fd = mkstemp(js_path);
    assert_true(fd >= 0);
    close(fd);
    run_result r = run_script("node tests/ref/hf_tokenize.js %s %s %s %s", sq(lib), sq(dir), texts_path, js_path);
    if (r.status) fail_msg("hf_tokenize.js on %s: %s%s", dir, r.out, r.err);
    run_free(&r);
    char *texts_json = read_file(texts_path, NULL), *js_json = read_file(js_path, NULL);
    unlink(js_path);
    char *orig_json = orig_path ? read_file(orig_path, NULL) : NULL;
    cJSON *texts = cJSON_Parse(texts_json), *js = cJSON_Parse(js_json), *orig = orig_json ? cJSON_Parse(orig_json) : NULL;
    assert_non_null(texts), assert_non_null(js);
    const cJSON *ji = cJSON_GetObjectItem(js, "ids")->child, *jb = cJSON_GetObjectItem(js, "with_special")->child;
    const cJSON *oi = orig ? cJSON_GetObjectItem(orig, "ids")->child : NULL,
                *ob = orig ? cJSON_GetObjectItem(orig, "with_special")->child : NULL;
    int n = 0;
    for (const cJSON *tx = texts->child; tx; tx = tx->next, ji = ji->next, jb = jb->next, n++) {
        const char *s = tx->valuestring;
        size_t k, kb, ck, ckb;
        int32_t *ids = encode(src, s, GPT2_ENCODE_SPECIAL, &k), *bids = encode(src, s, GPT2_ENCODE_SPECIAL | GPT2_ENCODE_BOS, &kb);
        int32_t *c = encode(conv, s, GPT2_ENCODE_SPECIAL, &ck), *cbos = encode(conv, s, GPT2_ENCODE_SPECIAL | GPT2_ENCODE_BOS, &ckb);
        if (!same_ids(ids, k, ji)) fail_msg("%s: text %d \"%s\": transformers.js's ids on the conversion differ from the GGUF's", name, n, s);
        if (!same_ids(bids, kb, jb)) fail_msg("%s: text %d: transformers.js's ids with the BOS differ", name, n);
        if (ck != k || (k && memcmp(c, ids, k * sizeof *ids)) || ckb != kb || (kb && memcmp(cbos, bids, kb * sizeof *ids)))
            fail_msg("%s: text %d: gptscope's ids on the conversion differ from the GGUF's", name, n);
        if (oi && !same_ids(ids, k, oi)) fail_msg("%s: text %d: the original tokenizer's ids differ", name, n);
        if (ob && !bos_differs && !same_ids(bids, kb, ob)) fail_msg("%s: text %d: the original's ids with BOS differ", name, n);
        *n_bos += kb > k;
        if (oi) oi = oi->next, ob = ob->next;
        free(ids), free(bids), free(c), free(cbos);
    }
    cJSON_Delete(texts), cJSON_Delete(js), cJSON_Delete(orig);
    free(texts_json), free(js_json), free(orig_json);
    return n;
}

/* A GGUF of hf_gguf (a real tokenizer in a small random model) converted by the command:
 * transformers.js on the tokenizer.json it writes, gptscope on it and on the GGUF, and the
 * original tokenizer.json's ids (hf_tok/ORIGINAL.json; with bos_differs, the GGUF adds a BOS
 * the original does not); SentencePiece's also on texts with special tokens between sections. */
static void check_tokenizer(const char *name, const char *original, int bos_differs) {
    const char *gguf = fixture_path("hf_gguf/%s.gguf", name);
    char *dir = tmp_dir(), out[4200], lib[4200], cwd[4096];
    snprintf(out, sizeof out, "%s/out", dir);
    run_result r = run(NULL, "convert %s %s", sq(gguf), sq(out));
    if (r.status) fail_msg("convert %s: %s", gguf, r.err);
    assert_non_null(strstr(r.out, "tokenizer.json, tokenizer_config.json, generation_config.json"));
    run_free(&r);
    assert_non_null(getcwd(cwd, sizeof cwd));
    const char *hf = test_env("HF_TOKENIZERS_DIR");
    snprintf(lib, sizeof lib, "%s%s%s/lenml/main.js", hf[0] == '/' ? "" : cwd, hf[0] == '/' ? "" : "/", hf);
    gpt2_tokenizer *src, *conv;
    gpt2_error err;
    if (gpt2_model_load_tokenizer(gguf, gpt2_model_default_params(), &src, &err)) fail_msg("%s", err.msg);
    if (gpt2_model_load_tokenizer(out, gpt2_model_default_params(), &conv, &err)) fail_msg("%s", err.msg);
    const int spm = !strcmp(gpt2_tokenizer_kind(src), "SentencePiece BPE");
    int n_bos = 0, n = compare_texts(name, lib, out, src, conv, "tests/ref/multiscript.json",
                                     original ? fixture_path("hf_tok/%s.json", original) : NULL, bos_differs, &n_bos);
    assert_true(n >= 38);
    if (spm)
        n += compare_texts(name, lib, out, src, conv, "tests/ref/spm_special.json",
                           original ? fixture_path("hf_tok/%s-special.json", original) : NULL, bos_differs, &n_bos);
    print_message("  %-16s %d texts: transformers.js on the written tokenizer.json = gptscope on the GGUF%s%s "
                  "(%d with a BOS)\n", name, n, original ? " = the original " : "", original ? original : "", n_bos);
    assert_int_equal(gpt2_tokenizer_bos(conv), gpt2_tokenizer_bos(src));
    assert_string_equal(gpt2_tokenizer_kind(conv), gpt2_tokenizer_kind(src));
    assert_int_equal(gpt2_tokenizer_space_prefix(conv), gpt2_tokenizer_space_prefix(src));
    gpt2_tokenizer_free(src), gpt2_tokenizer_free(conv);
    rm_rf(dir);
}

static void test_tokenizers(void **state) {
    (void)state;
    check_tokenizer("llama3", "llama3", 1); /* llama-bpe without add_bos_token: llama.cpp adds one */
    check_tokenizer("llama3-bos", "llama3", 1); /* add_bos_token: the original's file adds none */
    check_tokenizer("qwen2_5", "qwen2_5", 0);
    check_tokenizer("qwen3", "qwen3", 0);
    check_tokenizer("llama2", "llama2", 0);
    check_tokenizer("llama2-ties", "llama2", 0);
    check_tokenizer("llama2-noprefix", NULL, 0); /* add_space_prefix false: Replace, no Prepend */
}

/* ---- what chatting needs ---------------------------------------------------------------- */

static void test_chat_survives(void **state) {
    (void)state;
    static const char *const sources[] = {"arch/models/qwen3", "arch/gguf/qwen3.gguf", "arch/gguf/llama-gqa.gguf",
                                          "hf_gguf/llama3-bos.gguf", "hf_gguf/llama2.gguf"};
    for (size_t i = 0; i < sizeof sources / sizeof *sources; i++) {
        const char *src = fixture_path("%s", sources[i]);
        char *dir = tmp_dir(), out[4200];
        snprintf(out, sizeof out, "%s/out", dir);
        run_result r = run(NULL, "convert %s %s --dtype f32", sq(src), sq(out));
        if (r.status) fail_msg("convert %s: %s", src, r.err);
        run_free(&r);
        static const char *const how[] = {"--json", "--ids"};
        for (int k = 0; k < 2; k++) {
            run_result a = run(NULL, "template -m %s %s", sq(src), how[k]), b = run(NULL, "template -m %s %s", sq(out), how[k]);
            assert_int_equal(a.status, 0);
            assert_int_equal(b.status, 0);
            assert_string_equal(a.out, b.out);
            run_free(&a), run_free(&b);
        }
        gpt2_model *m = load_ok(src), *c = load_ok(out);
        const char *t1 = gpt2_model_chat_template(m), *t2 = gpt2_model_chat_template(c);
        assert_true((t1 == NULL) == (t2 == NULL));
        if (t1) assert_string_equal(t1, t2);
        assert_string_equal(gpt2_model_bos_text(m), gpt2_model_bos_text(c));
        assert_string_equal(gpt2_model_eos_text(m), gpt2_model_eos_text(c));
        /* every end id kept; the only one added: the tokenizer's <|endoftext|>, always an end to gptscope */
        const int V = gpt2_model_config(m)->n_vocab, eot = gpt2_tokenizer_eot(gpt2_model_tokenizer(c));
        int ends = 0;
        for (int32_t id = 0; id < V; id++) {
            if (gpt2_model_is_end(m, id)) assert_true(gpt2_model_is_end(c, id)), ends++;
            else if (gpt2_model_is_end(c, id)) assert_int_equal(id, eot);
        }
        print_message("  %-24s template, bos/eos texts and %d end ids kept\n", sources[i], ends);
        assert_true(ends > 0);
        gpt2_model_free(m), gpt2_model_free(c);
        rm_rf(dir);
    }
    /* an HF source's files as they are */
    char *dir = tmp_dir();
    gpt2_model *m = load_ok(fixture_path("arch/models/qwen3"));
    gpt2_error err;
    assert_int_equal(gpt2_model_save(m, dir, GPT2_DTYPE_F16, &err), GPT2_OK);
    gpt2_model_free(m);
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};
    for (int i = 0; i < 3; i++) {
        char p[4200];
        size_t la, lb;
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        char *a = read_file(fixture_path("arch/models/qwen3/%s", files[i]), &la), *b = read_file(p, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(a, b, la);
        free(a), free(b);
    }
    rm_rf(dir);
}

/* ---- refusals ------------------------------------------------------------------------------ */

/* Llama's biases under Mistral's name: Hugging Face's Mistral has none, so the model
 * cannot be written as one; nothing is left behind. */
static void test_refusals(void **state) {
    (void)state;
    char *dir = tmp_dir(), path[4200], out[4200];
    static const char *const files[] = {"model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        copy_file_edited(fixture_path("arch/models/llama-bias/%s", files[i]), path, NULL, NULL);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    copy_file_edited(fixture_path("arch/models/llama-bias/config.json"), path, "\"model_type\": \"llama\"",
                     "\"model_type\": \"mistral\"");
    gpt2_model *m = load_ok(dir);
    snprintf(out, sizeof out, "%s/out", dir);
    gpt2_error err;
    assert_int_equal(gpt2_model_save(m, out, GPT2_DTYPE_F32, &err), GPT2_ERR_INVALID_ARG);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "has biases, which Hugging Face's mistral does not"));
    gpt2_model_free(m);
    rm_rf(out);
    run_result r = run(NULL, "convert %s %s", sq(dir), sq(out));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "Hugging Face's mistral does not"));
    run_free(&r);
    struct stat st;
    assert_int_not_equal(stat(out, &st), 0);
    rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arch_fixtures),
        cmocka_unit_test(test_tokenizers),
        cmocka_unit_test(test_chat_survives),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
