/* test_patch.c — activation patching (gpt2_patch.h) against the float64
 * reference written from its definition (tests/ref/patch_ref.py, on
 * attribute_ref.py's forward passes): every cell of the resid, mlp and heads
 * grids, on GPT-2 models and Llama (GQA), Qwen3 and GPT-NeoX; the same bits
 * at any thread count; the context left holding the prompts' common prefix;
 * bad input refused with nothing evaluated.
 *
 * Tolerance. The engine runs in float32 and the reference in float64; an LD
 * is a difference of two logits of a pass over 16 tokens, so it differs by
 * float32 rounding: TOL_LD = 2e-4 of max(1, |LD clean|, |LD corrupt|), some
 * 20 times the largest difference seen. A score divides by LD_C - LD_K (at
 * least 0.1 in the fixtures): its tolerance is the LDs' over that. */
#include <math.h>

#include <cjson/cJSON.h>

#include "gpt2.h"
#include "test_util.h"

#define TOL_LD 2e-4

static gpt2_model *load_model(const char *path) {
    gpt2_model *m;
    gpt2_error err;
    if (gpt2_model_load(path, &m, &err) != GPT2_OK) fail_msg("%s: %s", path, err.msg);
    return m;
}

static gpt2_context *new_ctx(const gpt2_model *m, int n_threads) {
    gpt2_context *ctx;
    gpt2_error err;
    gpt2_context_params p = gpt2_context_default_params();
    p.n_threads = n_threads;
    if (gpt2_context_new(m, p, &ctx, &err) != GPT2_OK) fail_msg("%s", err.msg);
    return ctx;
}

static int32_t *ids_of(const cJSON *arr, int *n) {
    *n = cJSON_GetArraySize(arr);
    int32_t *ids = malloc((size_t)*n * sizeof *ids);
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next) ids[i++] = (int32_t)e->valuedouble;
    return ids;
}

static const gpt2_patch_what kinds[] = {GPT2_PATCH_RESID, GPT2_PATCH_MLP, GPT2_PATCH_HEADS};

/* One reference case: every grid, cell by cell. */
static void check_case(const char *name, const char *model_rel, const char *json_rel) {
    char *text = read_file(fixture_path("patch/%s", json_rel), NULL);
    cJSON *doc = cJSON_Parse(text);
    assert_non_null(doc);
    int T, Tk;
    int32_t *clean = ids_of(cJSON_GetObjectItem(doc, "clean"), &T), *corrupt = ids_of(cJSON_GetObjectItem(doc, "corrupt"), &Tk);
    assert_int_equal(T, Tk);
    const int32_t a = (int32_t)cJSON_GetObjectItem(doc, "answer")->valuedouble,
                  b = (int32_t)cJSON_GetObjectItem(doc, "wrong")->valuedouble;
    const double ld_c = cJSON_GetObjectItem(doc, "ld_clean")->valuedouble,
                 ld_k = cJSON_GetObjectItem(doc, "ld_corrupt")->valuedouble;
    const double tol = TOL_LD * fmax(1, fmax(fabs(ld_c), fabs(ld_k))), tol_score = tol / fabs(ld_c - ld_k) * 2;
    gpt2_model *m = load_model(fixture_path("%s", model_rel));
    gpt2_context *ctx = new_ctx(m, 2);
    double worst = 0, worst_score = 0;
    for (int k = 0; k < 3; k++) {
        gpt2_patch_result r;
        gpt2_error err;
        if (gpt2_patch(ctx, clean, corrupt, T, a, b, kinds[k], &r, &err) != GPT2_OK) fail_msg("%s: %s", name, err.msg);
        const cJSON *g = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "grids"), gpt2_patch_what_name(kinds[k]));
        const cJSON *ld_rows = cJSON_GetObjectItem(g, "ld"), *sc_rows = cJSON_GetObjectItem(g, "scores");
        assert_int_equal(r.rows, cJSON_GetArraySize(ld_rows));
        assert_true(fabs(r.ld_clean - ld_c) < tol && fabs(r.ld_corrupt - ld_k) < tol);
        int l = 0;
        for (const cJSON *lr = ld_rows->child, *sr = sc_rows->child; lr; lr = lr->next, sr = sr->next, l++) {
            assert_int_equal(r.cols, cJSON_GetArraySize(lr));
            int c = 0;
            for (const cJSON *v = lr->child, *s = sr->child; v; v = v->next, s = s->next, c++) {
                const double d = fabs(r.ld[(size_t)l * r.cols + c] - v->valuedouble),
                             ds = fabs(r.scores[(size_t)l * r.cols + c] - s->valuedouble);
                if (d > tol || ds > tol_score)
                    fail_msg("%s %s: cell (%d, %d): LD %.7g, reference %.7g; score %.6g, reference %.6g", name,
                             gpt2_patch_what_name(kinds[k]), l, c, r.ld[(size_t)l * r.cols + c], v->valuedouble,
                             r.scores[(size_t)l * r.cols + c], s->valuedouble);
                worst = fmax(worst, d), worst_score = fmax(worst_score, ds);
            }
        }
        /* the runs made: a cell before the prompts part is not run */
        const int run_cols = kinds[k] == GPT2_PATCH_HEADS ? r.cols : r.cols - r.first_diff;
        assert_int_equal(r.n_runs, r.rows * run_cols);
        assert_int_equal(gpt2_context_n_past(ctx), r.first_diff); /* left holding the common prefix */
        assert_memory_equal(gpt2_context_tokens(ctx), clean, (size_t)r.first_diff * sizeof *clean);
        gpt2_patch_result_free(&r);
    }
    print_message("  %-12s LDs within %.1e of float64 (clean %.3f, corrupt %.3f), scores within %.1e\n", name, worst,
                  ld_c, ld_k, worst_score);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    free(clean), free(corrupt);
    cJSON_Delete(doc);
    free(text);
}

static void test_against_reference(void **state) {
    (void)state;
    char *tsv = read_file(fixture_path("patch/cases.tsv"), NULL), *save = NULL;
    int seen = 0;
    for (char *line = strtok_r(tsv, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[64], model[256], json[128];
        assert_int_equal(sscanf(line, "%63[^\t]\t%255[^\t]\t%127s", name, model, json), 3);
        check_case(name, model, json);
        seen++;
    }
    free(tsv);
    assert_true(seen >= 4);
}

/* A grid at 1 and 3 threads: the same bits. */
static void test_threads(void **state) {
    (void)state;
    gpt2_model *m = load_model(fixture_path("models/tiny-f32"));
    const int32_t clean[] = {5, 9, 44, 13, 200, 7, 81, 3}, corrupt[] = {5, 9, 44, 13, 150, 7, 81, 3};
    gpt2_patch_result r[2];
    for (int i = 0; i < 2; i++) {
        gpt2_context *ctx = new_ctx(m, i ? 3 : 1);
        gpt2_error err;
        if (gpt2_patch(ctx, clean, corrupt, 8, 11, 12, GPT2_PATCH_RESID, &r[i], &err) != GPT2_OK) fail_msg("%s", err.msg);
        gpt2_context_free(ctx);
    }
    assert_memory_equal(r[0].ld, r[1].ld, (size_t)r[0].rows * r[0].cols * sizeof *r[0].ld);
    assert_int_equal(r[0].first_diff, 4);
    for (int l = 0; l < r[0].rows; l++)
        for (int c = 0; c < 4; c++) assert_true(r[0].scores[(size_t)l * r[0].cols + c] == 0); /* before the parting */
    gpt2_patch_result_free(&r[0]), gpt2_patch_result_free(&r[1]);
    gpt2_model_free(m);
}

/* Bad input: one line naming the value; nothing evaluated (the cache as it was). */
static void test_refusals(void **state) {
    (void)state;
    gpt2_model *m = load_model(fixture_path("models/tiny-f32"));
    gpt2_context *ctx = new_ctx(m, 1);
    const int32_t a[] = {5, 9, 44}, b[] = {5, 9, 45}, bad[] = {5, 9, 999999};
    gpt2_error err;
    assert_int_equal(gpt2_context_eval(ctx, a, 2, &err), GPT2_OK);
    static const struct {
        int which, n, answer, wrong;
        gpt2_patch_what what;
        const char *says;
    } cases[] = {
        {0, 3, 1, 2, GPT2_PATCH_RESID, "the clean and corrupt prompts are the same 3 tokens"},
        {1, 0, 1, 2, GPT2_PATCH_RESID, "patch: 0 tokens; the context holds 1 to"},
        {1, 3, 1, 1, GPT2_PATCH_RESID, "the answer and the wrong token are the same (1)"},
        {1, 3, -1, 2, GPT2_PATCH_RESID, "the answer token -1 is outside the vocabulary"},
        {2, 3, 1, 2, GPT2_PATCH_RESID, "token 2 of the corrupt prompt is 999999, outside the vocabulary"},
        {1, 3, 1, 2, (gpt2_patch_what)7, "unknown activation kind 7"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gpt2_patch_result r;
        const int32_t *k = cases[i].which == 0 ? a : cases[i].which == 1 ? b : bad;
        assert_int_equal(gpt2_patch(ctx, a, k, cases[i].n, cases[i].answer, cases[i].wrong, cases[i].what, &r, &err),
                         GPT2_ERR_INVALID_ARG);
        if (!strstr(err.msg, cases[i].says)) fail_msg("expected \"%s\" in: %s", cases[i].says, err.msg);
        assert_null(r.scores);
        assert_int_equal(gpt2_context_n_past(ctx), 2);
    }
    gpt2_context_free(ctx);
    gpt2_model_free(m);
    /* an MLP whose output is normed before it joins the stream (Gemma 2) */
    m = load_model(fixture_path("arch/models/gemma2"));
    ctx = new_ctx(m, 1);
    gpt2_patch_result r;
    assert_int_equal(gpt2_patch(ctx, a, b, 3, 1, 2, GPT2_PATCH_MLP, &r, &err), GPT2_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "mlp is not patched in gemma2"));
    assert_int_equal(gpt2_patch(ctx, a, b, 3, 1, 2, GPT2_PATCH_HEADS, &r, &err), GPT2_OK); /* heads are */
    gpt2_patch_result_free(&r);
    gpt2_context_free(ctx);
    gpt2_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
