/* test_arch.c — the decoder families beyond GPT-2 (Llama, Mistral, Qwen2,
 * Qwen3, GPT-NeoX, Gemma 1/2/3) against tests/ref/decoder_ref.py, a float64 forward
 * pass written from the Hugging Face definitions: random-weight models of every option
 * (grouped-query and multi-query attention, tied and untied heads, biases,
 * q/k norms, head_dim apart from n_embd / n_head, Llama 3's rope scaling, a
 * sliding window, partial rotation, a parallel residual; Gemma's (1 + w) norms,
 * scaled embeddings, GeGLU, norms of the blocks' outputs, soft-capped scores and
 * logits, windows on a pattern of layers with their own rotary base, linear rope
 * scaling), as Hugging Face directories and as GGUF files written the
 * way llama.cpp's converter writes them (q/k rows permuted for its rotation,
 * Llama 3's factors as rope_freqs.weight, Gemma's norms as 1 + w). Fixtures:
 * make_arch_fixtures.py. */
#include <math.h>

#include "arch_fixtures.h"
#include "gpt2.h"
#include "test_util.h"

/* float32 math against float64: as test_forward's GPT-2 tolerance */
#define TOL_LOGIT 2e-4

typedef struct {
    int T, V;
    int32_t *ids;
    float *logits; /* (T, V) */
} reference;

static void ref_load(const char *name, reference *r) {
    char *meta = read_file(fixture_path("arch/ref/%s/meta.txt", name), NULL);
    assert_int_equal(sscanf(meta, "%d %d", &r->T, &r->V), 2);
    free(meta);
    char *ids = read_file(fixture_path("arch/ref/%s/ids.txt", name), NULL);
    r->ids = malloc((size_t)r->T * sizeof *r->ids);
    char *p = ids;
    for (int t = 0; t < r->T; t++) r->ids[t] = (int32_t)strtol(p, &p, 10);
    free(ids);
    size_t len;
    r->logits = read_file(fixture_path("arch/ref/%s/logits.f32", name), &len);
    assert_int_equal(len, (size_t)r->T * r->V * sizeof(float));
}

static void ref_free(reference *r) {
    free(r->ids);
    free(r->logits);
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* The model at path against the reference: every position of one batch (the
 * prefill path), then token by token (decode), within tol. */
static void check_model(const char *path, const char *name, double tol) {
    reference r;
    ref_load(name, &r);
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(path, &m, &err) != GPT2_OK) fail_msg("%s: %s", path, err.msg);
    assert_int_equal(gpt2_model_config(m)->n_vocab, r.V);
    gpt2_context *ctx;
    assert_int_equal(gpt2_context_new(m, gpt2_context_default_params(), &ctx, &err), GPT2_OK);
    capture cap = {calloc((size_t)r.T * r.V, sizeof(float)), r.V};
    gpt2_hooks hooks = {.on_logits = on_logits, .user_data = &cap};
    gpt2_context_set_hooks(ctx, &hooks);
    assert_int_equal(gpt2_context_eval(ctx, r.ids, r.T, &err), GPT2_OK);
    const double d_batch = max_diff(cap.all, r.logits, (size_t)r.T * r.V);
    gpt2_context_set_hooks(ctx, NULL);
    gpt2_context_reset(ctx);
    double d_step = 0;
    for (int t = 0; t < r.T; t++) {
        assert_int_equal(gpt2_context_eval(ctx, r.ids + t, 1, &err), GPT2_OK);
        d_step = fmax(d_step, max_diff(gpt2_context_logits(ctx), r.logits + (size_t)t * r.V, (size_t)r.V));
    }
    double scale = 0;
    for (size_t i = 0; i < (size_t)r.T * r.V; i++) scale = fmax(scale, fabs(r.logits[i]));
    print_message("  %-40s max |logit - ref|: batch %.2e, decode %.2e (logits up to %.2f)\n", path, d_batch, d_step,
                  scale);
    assert_true(d_batch < tol);
    assert_true(d_step < tol);
    assert_true(scale > 0.5); /* the reference's logits are not all near zero: the check has teeth */
    free(cap.all);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    ref_free(&r);
}

static void test_hf_directories(void **state) {
    (void)state;
    row cases[32];
    const int n = read_rows("cases.tsv", cases, 32);
    for (int i = 0; i < n; i++) {
        check_model(fixture_path("arch/models/%s", cases[i].a), cases[i].a, TOL_LOGIT);
    }
}

/* logits (T, V) of the model at path for ids, from one batch */
static float *batch_logits(const char *path, const int32_t *ids, int T, int V) {
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(path, &m, &err) != GPT2_OK) fail_msg("%s: %s", path, err.msg);
    gpt2_context *ctx;
    assert_int_equal(gpt2_context_new(m, gpt2_context_default_params(), &ctx, &err), GPT2_OK);
    capture cap = {calloc((size_t)T * V, sizeof(float)), V};
    gpt2_hooks hooks = {.on_logits = on_logits, .user_data = &cap};
    gpt2_context_set_hooks(ctx, &hooks);
    assert_int_equal(gpt2_context_eval(ctx, ids, T, &err), GPT2_OK);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    return cap.all;
}

/* The same models as transformers 5 saves them (tests/ref/make_arch_fixtures.py's
 * t5_config, checked once against transformers 5.17's save_pretrained: "dtype",
 * rope_parameters for rope_theta, rope_scaling, NeoX's rotary_pct and
 * rotary_emb_base, Gemma 3's rope_local_base_freq): the reference, and the
 * original's logits bit for bit (they were silently the defaults' before). */
static void test_transformers5_directories(void **state) {
    (void)state;
    row cases[32];
    const int n = read_rows("cases.tsv", cases, 32);
    for (int i = 0; i < n; i++) {
        check_model(fixture_path("arch/t5/%s", cases[i].a), cases[i].a, TOL_LOGIT);
        reference r;
        ref_load(cases[i].a, &r);
        char t5[4200];
        snprintf(t5, sizeof t5, "%s", fixture_path("arch/t5/%s", cases[i].a));
        float *a = batch_logits(t5, r.ids, r.T, r.V), *b = batch_logits(fixture_path("arch/models/%s", cases[i].a), r.ids, r.T, r.V);
        if (memcmp(a, b, (size_t)r.T * r.V * sizeof(float))) fail_msg("%s: transformers 5's directory differs", cases[i].a);
        free(a), free(b);
        ref_free(&r);
    }
}

/* GPT-NeoX without rotary_pct rotates GPTNeoXConfig's default quarter of each
 * head: the neox fixture (rotary_pct 0.25) with the key removed gives the
 * same logits bit for bit (it rotated whole heads before). */
static void test_neox_rotary_default(void **state) {
    (void)state;
    char dir[] = "/tmp/gptscope-neox-XXXXXX", to[4200], from[4200];
    assert_non_null(mkdtemp(dir));
    static const char *files[] = {"model.safetensors", "tokenizer.json", "config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        snprintf(from, sizeof from, "%s", fixture_path("arch/models/neox/%s", files[i]));
        copy_file_edited(from, to, i == 2 ? "\"rotary_pct\": 0.25," : NULL, i == 2 ? "" : NULL);
    }
    char *cfg = read_file(to, NULL);
    assert_null(strstr(cfg, "rotary_pct"));
    free(cfg);
    reference r;
    ref_load("neox", &r);
    float *a = batch_logits(dir, r.ids, r.T, r.V), *b = batch_logits(fixture_path("arch/models/neox"), r.ids, r.T, r.V);
    assert_memory_equal(a, b, (size_t)r.T * r.V * sizeof(float));
    free(a), free(b);
    ref_free(&r);
    for (int i = 0; i < 3; i++) {
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        unlink(to);
    }
    rmdir(dir);
}

/* The same models sharded as transformers shards them (model.safetensors.index.json
 * and its shards, tests/ref/make_shard_fixtures.py), against the same references. */
static void test_sharded_directories(void **state) {
    (void)state;
    char *tsv = read_file(fixture_path("shards/cases.tsv"), NULL);
    int seen = 0;
    char *save = NULL;
    for (char *line = strtok_r(tsv, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[64], path[256], original[128], ref[64];
        if (sscanf(line, "%63[^\t]\t%255[^\t]\t%127[^\t]\t%63[^\t]", name, path, original, ref) != 4 || !strcmp(ref, "-"))
            continue;
        check_model(fixture_path("%s", path), ref, TOL_LOGIT);
        seen++;
    }
    free(tsv);
    assert_true(seen >= 2);
}

/* GGUF files as llama.cpp writes them, each against the reference on the
 * weights its format holds (F16, Q8_0 dequantized; a mix of Q8_0 and F16 whose
 * q/k/v and gate/up cannot be joined, so run apart; Mistral's file without
 * its window, which llama.cpp's converter does not write). */
static void test_gguf_files(void **state) {
    (void)state;
    row files[32];
    const int n = read_rows("gguf.tsv", files, 32);
    int seen = 0;
    for (int i = 0; i < n; i++) {
        /* Q8_0: decode's integer products round the inputs to 8 bits (test_forward's TOL_Q8) */
        check_model(fixture_path("arch/gguf/%s", files[i].a), files[i].c,
                    TOL_LOGIT * (!strcmp(files[i].d, "Q8_0") || !strcmp(files[i].d, "MIX") ? 25 : 1));
        seen++;
    }
    assert_true(seen >= 8);
}

typedef struct {
    const char *old, *new, *says;
} config_edit;

/* Each edit of fixture model `base`'s config.json is refused with one line
 * holding `says`; nothing is loaded. The unedited copy loads. */
static void check_refusals(const char *base, const config_edit *cases, size_t n_cases) {
    char dir[] = "/tmp/gptscope-arch-XXXXXX", path[4200], from[4200];
    assert_non_null(mkdtemp(dir));
    static const char *files[] = {"model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        snprintf(from, sizeof from, "%s", fixture_path("arch/models/%s/%s", base, files[i]));
        copy_file_edited(from, path, NULL, NULL);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(from, sizeof from, "%s", fixture_path("arch/models/%s/config.json", base));
    for (size_t i = 0; i < n_cases; i++) {
        copy_file_edited(from, path, cases[i].old, cases[i].new);
        gpt2_model *m = NULL;
        gpt2_error err;
        const gpt2_status st = gpt2_model_load(dir, &m, &err);
        print_message("  %s\n", err.msg);
        assert_int_not_equal(st, GPT2_OK);
        assert_null(m);
        if (!strstr(err.msg, cases[i].says)) fail_msg("expected \"%s\" in: %s", cases[i].says, err.msg);
        assert_null(strchr(err.msg, '\n'));
    }
    copy_file_edited(from, path, NULL, NULL); /* the control: the same directory unedited loads */
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(dir, &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    gpt2_model_free(m);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

/* A config.json the engine does not run is refused with one line naming
 * the key and what it holds; nothing is loaded. */
static void test_refusals(void **state) {
    (void)state;
    static const config_edit cases[] = {
        {"\"model_type\": \"llama\"", "\"model_type\": \"mixtral\"", "model_type: expected \"gpt2\", \"llama\""},
        {"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}",
         "rope_scaling.rope_type: expected \"llama3\" or \"default\", found \"yarn\" (not supported)"},
        {"\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "hidden_act: expected \"silu\", found \"gelu\""},
        {"\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", "not a multiple of num_key_value_heads 3"},
        {"\"pretraining_tp\": 1", "\"num_local_experts\": 8", "num_local_experts: expected at most 1 (mixture-of-experts models are not supported), found 8"},
        {"\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false",
         "missing tensor 'lm_head.weight' (config.json says the head is not tied)"},
        {"\"max_position_embeddings\": 128", "\"max_position_embeddings\": 128, \"partial_rotary_factor\": 0.5",
         "partial_rotary_factor: expected 1 (partial rotation is not supported for this family), found 0.5"},
        {"\"max_position_embeddings\": 128", "\"max_position_embeddings\": 128, \"use_sliding_window\": true, "
         "\"sliding_window\": 4, \"max_window_layers\": 1",
         "max_window_layers: expected 0 or at least num_hidden_layers (a window from some layer on is not supported"},
    };
    check_refusals("llama-gqa", cases, sizeof cases / sizeof *cases);
    static const config_edit t5[] = { /* transformers 5's rope_parameters */
        {"\"rope_scaling\": null", "\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4}",
         "rope_parameters.rope_type: expected \"llama3\" or \"default\", found \"yarn\" (not supported)"},
        {"\"rope_scaling\": null", "\"rope_parameters\": {\"rope_theta\": 10000, \"partial_rotary_factor\": 0.5}",
         "rope_parameters.partial_rotary_factor: expected 1 (partial rotation is not supported for this family), found 0.5"},
        {"\"rope_scaling\": null", "\"rope_parameters\": {\"full_attention\": {\"rope_theta\": 10000}}",
         "rope_parameters: expected one object for every layer (per layer type only for Gemma 3)"},
    };
    check_refusals("llama-gqa", t5, sizeof t5 / sizeof *t5);
}

/* What of Gemma is not run: its multimodal and 3n models, EmbeddingGemma's
 * bidirectional attention, another activation, a layer pattern that is no
 * period, another rope scaling; rope_parameters that scale the sliding layers. */
static void test_gemma_refusals(void **state) {
    (void)state;
    static const char *const not_periodic =
        "\"layer_types\": [\"sliding_attention\", \"full_attention\", \"full_attention\", \"sliding_attention\", "
        "\"sliding_attention\", \"sliding_attention\", \"full_attention\"]";
    static const config_edit cases[] = {
        {"\"model_type\": \"gemma3_text\"", "\"model_type\": \"gemma3\"",
         "model_type: expected \"gemma3_text\" (Gemma 3's multimodal model, a vision tower beside the text model, is not "
         "supported; its 1B and 270M text-only models are), found \"gemma3\""},
        {"\"model_type\": \"gemma3_text\"", "\"model_type\": \"gemma3n\"",
         "model_type: expected \"gemma3_text\" (Gemma 3n's per-layer embeddings and AltUp are not supported), found \"gemma3n\""},
        {"\"use_cache\": true", "\"use_cache\": true, \"use_bidirectional_attention\": true",
         "use_bidirectional_attention: expected false (EmbeddingGemma's bidirectional attention is not supported), found true"},
        {"\"hidden_activation\": \"gelu_pytorch_tanh\"", "\"hidden_activation\": \"silu\"",
         "hidden_activation: expected \"gelu_pytorch_tanh\" (GELU's tanh form), found \"silu\""},
        {"\"sliding_window_pattern\": 6", not_periodic,
         "layer_types: expected windows in all layers but every P-th (the pattern the engine runs), found layer 2 "
         "\"full_attention\""},
        {"\"sliding_window_pattern\": 6", "\"layer_types\": [\"full_attention\"]",
         "layer_types: expected a list of num_hidden_layers strings, found 1 entries"},
        {"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}",
         "rope_scaling.rope_type: expected \"linear\", \"llama3\" or \"default\", found \"yarn\" (not supported)"},
        {"\"rope_scaling\": null", "\"rope_scaling\": null, \"rope_parameters\": {\"full_attention\": {\"rope_theta\": "
         "1e6}, \"sliding_attention\": {\"rope_type\": \"linear\", \"factor\": 2}}",
         "rope_parameters.sliding_attention.rope_type: expected \"default\" (the sliding layers' rotary is not scaled), "
         "found \"linear\""},
        {"\"rope_scaling\": null", "\"rope_scaling\": null, \"rope_parameters\": 5",
         "rope_parameters: expected an object or null, found a number"},
    };
    check_refusals("gemma3", cases, sizeof cases / sizeof *cases);
}

/* every row on_attention reports, as (L, H, T, T) */
typedef struct {
    float *rows;
    int H, T;
} att_capture;

static void on_attention(void *ud, int l, int h, int pos, const float *probs, int n) {
    att_capture *a = ud;
    assert_int_equal(n, pos + 1);
    memcpy(a->rows + (((size_t)l * a->H + h) * a->T + pos) * a->T, probs, (size_t)n * sizeof(float));
}

/* The microscope's rows are the probabilities the attention used: Gemma 2's
 * soft-capped scores and its windowed layers' zeros, every layer and head,
 * from a batch and from single steps, against decoder_ref's probabilities. */
static void test_attention_rows(void **state) {
    (void)state;
    reference r;
    ref_load("gemma2", &r);
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(fixture_path("arch/models/gemma2"), &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    const gpt2_config *c = gpt2_model_config(m);
    const int L = c->n_layer, H = c->n_head, T = r.T;
    size_t len;
    float *want = read_file(fixture_path("arch/ref/gemma2/attn.f32"), &len);
    assert_int_equal(len, (size_t)L * H * T * T * sizeof(float));
    assert_true(c->arch.attn_softcap > 0 && c->arch.sliding_window > 0 && c->arch.sliding_window < T);
    gpt2_context *ctx;
    assert_int_equal(gpt2_context_new(m, gpt2_context_default_params(), &ctx, &err), GPT2_OK);
    att_capture cap = {calloc((size_t)L * H * T * T, sizeof(float)), H, T};
    gpt2_hooks hooks = {.on_attention = on_attention, .user_data = &cap};
    gpt2_context_set_hooks(ctx, &hooks);
    for (int pass = 0; pass < 2; pass++) { /* one batch, then token by token */
        memset(cap.rows, 0, (size_t)L * H * T * T * sizeof(float));
        gpt2_context_reset(ctx);
        for (int t = 0; t < T; t += pass ? 1 : T)
            assert_int_equal(gpt2_context_eval(ctx, r.ids + t, pass ? 1 : T, &err), GPT2_OK);
        double d = 0;
        int zeros = 0;
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    const size_t at = (((size_t)l * H + h) * T + t) * T;
                    d = fmax(d, max_diff(cap.rows + at, want + at, (size_t)t + 1));
                    for (int j = 0; j <= t; j++) zeros += want[at + j] == 0.0f && cap.rows[at + j] == 0.0f;
                }
        print_message("  gemma2 attention rows (%s): max |p - ref| %.2e, %d keys outside the windows at 0\n",
                      pass ? "decode" : "batch", d, zeros);
        assert_true(d < 2e-5);
        assert_true(zeros > 0);
    }
    free(cap.rows);
    free(want);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    ref_free(&r);
}

/* What chatting needs from the files: the template (tokenizer_config.json's
 * chat_template, a GGUF's tokenizer.chat_template), eos_token's text, and the
 * ids that end a reply (config.json's eos_token_id and generation_config.json's
 * list; a GGUF's eos). */
static void test_chat_metadata(void **state) {
    (void)state;
    char *want = read_file(fixture_path("arch/chat_template.jinja"), NULL);
    static const char *paths[] = {"arch/models/qwen3", "arch/gguf/qwen3.gguf"};
    for (int i = 0; i < 2; i++) {
        gpt2_model *m;
        gpt2_error err;
        if (gpt2_model_load(fixture_path("%s", paths[i]), &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
        assert_non_null(gpt2_model_chat_template(m));
        assert_string_equal(gpt2_model_chat_template(m), want);
        assert_string_equal(gpt2_model_eos_text(m), "<|endoftext|>");
        assert_true(gpt2_model_is_end(m, 296));
        assert_int_equal(gpt2_model_is_end(m, 5), i == 0); /* generation_config.json's second end id */
        assert_false(gpt2_model_is_end(m, 6));
        gpt2_model_free(m);
    }
    free(want);
    /* GPT-2's directories carry none of it */
    gpt2_model *m;
    assert_int_equal(gpt2_model_load(fixture_path("models/tiny-f32"), &m, NULL), GPT2_OK);
    assert_null(gpt2_model_chat_template(m));
    assert_string_equal(gpt2_model_bos_text(m), "");
    gpt2_model_free(m);
}

/* A mix of types, as llama-quantize writes a *_M file: the mix fixture's
 * matrices are Q8_0 but v_proj and up_proj, F16 (make_arch_fixtures.py, MIX);
 * the bytes each type holds, from the formats' definitions (Q8_0: 34 bytes a
 * block of 32; F16: 2 a weight) and the llama-gqa case's shapes, the
 * embedding's 297 rows held as 304 (a block format's rows in groups of 8). */
static void test_dtype_mix(void **state) {
    (void)state;
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(fixture_path("arch/gguf/llama-gqa-mix.gguf"), &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    const size_t C = 64, KV = 32, F = 160, L = 2;
    const size_t q8 = 304 * C / 32 * 34 + L * (C * C + KV * C + F * C + C * C + C * F) / 32 * 34, f16 = L * (KV * C + F * C) * 2;
    size_t bytes[GPT2_N_DTYPES];
    assert_int_equal(gpt2_model_dtype_bytes(m, bytes), 2);
    assert_int_equal(bytes[GPT2_DTYPE_Q8_0], q8);
    assert_int_equal(bytes[GPT2_DTYPE_F16], f16);
    gpt2_model_free(m);
    if (gpt2_model_load(fixture_path("arch/gguf/llama-gqa-f16.gguf"), &m, &err) != GPT2_OK) fail_msg("%s", err.msg);
    assert_int_equal(gpt2_model_dtype_bytes(m, bytes), 1);
    assert_int_equal(bytes[GPT2_DTYPE_F16], gpt2_model_weight_bytes(m) - 2 * L * C * 4 - C * 4); /* less the norms */
    gpt2_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_directories),
        cmocka_unit_test(test_sharded_directories),
        cmocka_unit_test(test_gguf_files),
        cmocka_unit_test(test_transformers5_directories),
        cmocka_unit_test(test_neox_rotary_default),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_gemma_refusals),
        cmocka_unit_test(test_attention_rows),
        cmocka_unit_test(test_chat_metadata),
        cmocka_unit_test(test_dtype_mix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
