/* test_arch.c — the decoder families beyond GPT-2 (Llama, Mistral, Qwen2,
 * Qwen3, GPT-NeoX) against tests/ref/decoder_ref.py, a float64 forward pass written from
 * the Hugging Face definitions: random-weight models of every option
 * (grouped-query and multi-query attention, tied and untied heads, biases,
 * q/k norms, head_dim apart from n_embd / n_head, Llama 3's rope scaling, a
 * sliding window, partial rotation, a parallel residual), as Hugging Face directories and as GGUF files written the
 * way llama.cpp's converter writes them (q/k rows permuted for its rotation,
 * Llama 3's factors as rope_freqs.weight). Fixtures: make_arch_fixtures.py. */
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

/* A config.json the engine does not run is refused with one line naming
 * the key and what it holds; nothing is loaded. */
static void test_refusals(void **state) {
    (void)state;
    static const struct {
        const char *old, *new, *says;
    } cases[] = {
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
    };
    char dir[] = "/tmp/gptscope-arch-XXXXXX", path[4200], from[4200];
    assert_non_null(mkdtemp(dir));
    static const char *files[] = {"model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        snprintf(from, sizeof from, "%s", fixture_path("arch/models/llama-gqa/%s", files[i]));
        copy_file_edited(from, path, NULL, NULL);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(from, sizeof from, "%s", fixture_path("arch/models/llama-gqa/config.json"));
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
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
    assert_int_equal(gpt2_model_load(dir, &m, &err), GPT2_OK);
    gpt2_model_free(m);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_directories),
        cmocka_unit_test(test_gguf_files),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_chat_metadata),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
