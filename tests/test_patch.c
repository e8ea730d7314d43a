/* test_patch.c — activation patching (gpt2_patch.h) against the float64
 * reference written from its definition (tests/ref/patch_ref.py, on
 * attribute_ref.py's forward passes): every cell of the resid, mlp and heads
 * grids, on GPT-2 models and Llama (GQA), Qwen3 and GPT-NeoX; the same bits
 * at any thread count; the context left holding the prompts' common prefix;
 * bad input refused with nothing evaluated; and a known answer, the path of
 * the number the bundled reverse model mirrors.
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

static int g_calls, g_stop_at;
static int stop_later(void *ud) {
    (void)ud;
    return ++g_calls >= g_stop_at;
}

/* Stopped (the cancel hook) at any point, the context is left holding the
 * prompts' common prefix, never positions a patched run computed. */
static void test_cancelled(void **state) {
    (void)state;
    gpt2_model *m = load_model(fixture_path("models/tiny-f32"));
    gpt2_context *ctx = new_ctx(m, 1);
    const int32_t clean[] = {5, 9, 44, 13, 200, 7, 81, 3}, corrupt[] = {5, 9, 44, 13, 150, 7, 81, 3};
    const gpt2_hooks hooks = {.cancel = stop_later};
    gpt2_context_set_hooks(ctx, &hooks);
    for (g_stop_at = 1; g_stop_at < 40; g_stop_at += 3) {
        g_calls = 0;
        gpt2_patch_result r;
        gpt2_error err;
        const gpt2_status st = gpt2_patch(ctx, clean, corrupt, 8, 11, 12, GPT2_PATCH_RESID, &r, &err);
        if (st == GPT2_OK) gpt2_patch_result_free(&r);
        else assert_int_equal(st, GPT2_CANCELLED);
        assert_true(gpt2_context_n_past(ctx) <= 4);
        assert_memory_equal(gpt2_context_tokens(ctx), clean, (size_t)gpt2_context_n_past(ctx) * sizeof *clean);
    }
    gpt2_context_free(ctx);
    gpt2_model_free(m);
}

/* A known answer: the bundled reverse model copies the number to mirror
 * from its position in layer 0. Patching the one number that differs finds
 * the path: the stream entering layer 0 at that number's position restores
 * the answer (score ~1), entering layer 1 it is the last position that does,
 * and of the heads layer 0's carry it, the two largest being the mirror heads
 * attribution finds (test_attribute.c), layer 1's next to nothing. */
static void test_reverse_path(void **state) {
    (void)state;
    gpt2_model *m = load_model("models/reverse");
    gpt2_context *ctx = new_ctx(m, 2);
    static const char *const pairs[][4] = {{"12 7 99 3 45 0 8 61 61 8 0", "12 7 99 3 46 0 8 61 61 8 0", " 45", " 46"},
                                           {"30 75 69 16 47 77 60 80 80 60 77", "30 75 69 16 21 77 60 80 80 60 77", " 47",
                                            " 21"}};
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    for (int i = 0; i < 2; i++) {
        int32_t *c, *k, *a, *b;
        size_t n, nk, na, nb;
        gpt2_error err;
        assert_int_equal(gpt2_tokenizer_encode(tok, pairs[i][0], strlen(pairs[i][0]), 0, &c, &n, &err), GPT2_OK);
        assert_int_equal(gpt2_tokenizer_encode(tok, pairs[i][1], strlen(pairs[i][1]), 0, &k, &nk, &err), GPT2_OK);
        assert_int_equal(gpt2_tokenizer_encode(tok, pairs[i][2], strlen(pairs[i][2]), GPT2_ENCODE_CONTINUE, &a, &na, &err), GPT2_OK);
        assert_int_equal(gpt2_tokenizer_encode(tok, pairs[i][3], strlen(pairs[i][3]), GPT2_ENCODE_CONTINUE, &b, &nb, &err), GPT2_OK);
        assert_int_equal(n, nk), assert_int_equal(na, 1), assert_int_equal(nb, 1);
        gpt2_patch_result r, h;
        if (gpt2_patch(ctx, c, k, (int)n, a[0], b[0], GPT2_PATCH_RESID, &r, &err) != GPT2_OK) fail_msg("%s", err.msg);
        if (gpt2_patch(ctx, c, k, (int)n, a[0], b[0], GPT2_PATCH_HEADS, &h, &err) != GPT2_OK) fail_msg("%s", err.msg);
        assert_true(r.ld_clean > 5 && r.ld_corrupt < -5); /* each prompt's own answer, by far */
        const int p = r.first_diff, last = (int)n - 1, H = h.cols;
        assert_true(r.scores[p] > 0.95 && r.scores[(size_t)r.cols + last] > 0.95);     /* L0 at p, L1 at the end */
        assert_true(fabs(r.scores[last]) < 0.05 && fabs(r.scores[(size_t)r.cols + p]) < 0.05); /* not the others */
        double layer1 = 0;
        int first = 0, second = -1;
        for (int j = 0; j < H; j++) layer1 += fabs(h.scores[H + j]);
        for (int j = 1; j < H; j++) {
            if (h.scores[j] > h.scores[first]) second = first, first = j;
            else if (second < 0 || h.scores[j] > h.scores[second]) second = j;
        }
        print_message("  '%s': resid L0@%d %.2f, L1@%d %.2f; heads L0.%d %.2f, L0.%d %.2f, layer 1 |sum| %.3f\n",
                      pairs[i][0], p, r.scores[p], last, r.scores[(size_t)r.cols + last], first, h.scores[first], second,
                      h.scores[second], layer1);
        assert_true(((first == 1 && second == 3) || (first == 3 && second == 1)) && layer1 < 0.05);
        gpt2_patch_result_free(&r), gpt2_patch_result_free(&h);
        free(c), free(k), free(a), free(b);
    }
    gpt2_context_free(ctx);
    gpt2_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_cancelled),
        cmocka_unit_test(test_reverse_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
