/* test_inspect_store.c — the chat inspector's store (src/ui/inspect_store.c):
 * attention rows fed through the hooks the way the forward pass calls them,
 * the memory budget's single-layer fallback, truncation, candidate snapshots
 * and per-turn notes, each checked against values computed here from the
 * definition. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "ui/inspect_store.h"

enum { L = 3, H = 4, C = 6 };
static const size_t ALL = (size_t)L * H * C * C * sizeof(float); /* bytes for every layer */

/* The reference row of (layer, head, query q): a softmax-like distribution
 * over keys 0..q, different for every (layer, head, q). */
static void ref_row(int layer, int head, int q, float *out) {
    float s = 0;
    for (int k = 0; k <= q; k++) s += out[k] = (float)(1 + k + 7 * layer + 3 * head + q * k % 5);
    for (int k = 0; k <= q; k++) out[k] /= s;
}

/* What the forward pass does for positions p0..p1-1: ask each head of each
 * layer once, then hand over every query's row of the heads it wants. */
static void run_forward(istore *st, int p0, int p1) {
    float row[C];
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            if (!istore_hook_want(st, l, h)) continue;
            for (int p = p0; p < p1; p++) ref_row(l, h, p, row), istore_hook_put(st, l, h, p, row, p + 1);
        }
}

static void assert_row_is_ref(const istore *st, int l, int h, int q) {
    float want[C];
    const float *got = istore_row(st, l, h, q);
    assert_non_null(got);
    ref_row(l, h, q, want);
    for (int k = 0; k <= q; k++) assert_float_equal(got[k], want[k], 0);
}

static void test_new_checks_arguments(void **state) {
    (void)state;
    istore *st = (istore *)&st;
    assert_int_equal(istore_new(0, H, C, ALL, &st), ISTORE_ERR_ARG);
    assert_null(st);
    assert_int_equal(istore_new(L, H, 0, ALL, &st), ISTORE_ERR_ARG);
    assert_int_equal(istore_new(L, H, C, ALL, &st), ISTORE_OK);
    assert_int_equal(istore_n_ctx(st), C);
    istore_free(st);
    istore_free(NULL);
}

static void test_all_layers_rows_from_hooks(void **state) {
    (void)state;
    istore *st;
    assert_int_equal(istore_new(L, H, C, ALL, &st), ISTORE_OK); /* exactly the budget: all layers */
    assert_true(istore_all_layers(st));
    for (int l = 0; l < L; l++) assert_true(istore_hook_want(st, l, 0));
    run_forward(st, 0, 3); /* a prefill of 3 tokens, then 3 single steps */
    for (int p = 3; p < C; p++) run_forward(st, p, p + 1);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            for (int q = 0; q < C; q++) assert_row_is_ref(st, l, h, q);
    assert_null(istore_row(st, L, 0, 0)); /* out of range */
    assert_null(istore_row(st, 0, H, 0));
    assert_null(istore_row(st, 0, 0, C));
    assert_null(istore_row(st, 0, 0, -1));
    istore_free(st);
}

static void test_weight_and_head_mean(void **state) {
    (void)state;
    istore *st;
    assert_int_equal(istore_new(L, H, C, ALL, &st), ISTORE_OK);
    run_forward(st, 0, C);
    float r[H][C], out[C];
    const int l = 2, q = 4;
    for (int h = 0; h < H; h++) ref_row(l, h, q, r[h]);
    istore_weights(st, l, -1, q, out);
    for (int k = 0; k <= q; k++) {
        float mean = (r[0][k] + r[1][k] + r[2][k] + r[3][k]) / H;
        assert_float_equal(istore_weight(st, l, -1, q, k), mean, 1e-7);
        assert_float_equal(out[k], mean, 1e-7);
        assert_float_equal(istore_weight(st, l, 1, q, k), r[1][k], 0);
        float mx = fmaxf(fmaxf(r[0][k], r[1][k]), fmaxf(r[2][k], r[3][k]));
        assert_float_equal(istore_weight(st, l, ISTORE_MAX, q, k), mx, 0);
    }
    istore_weights(st, l, ISTORE_MAX, q, out);
    for (int k = 0; k <= q; k++) assert_float_equal(out[k], fmaxf(fmaxf(r[0][k], r[1][k]), fmaxf(r[2][k], r[3][k])), 0);
    assert_true(isnan(istore_weight(st, l, 0, q, q + 1))); /* a key after the query: causal, none */
    assert_true(isnan(istore_weight(st, l, ISTORE_MAX, q, q + 1)));
    istore_free(st);
}

static void test_budget_falls_back_to_shown_layer(void **state) {
    (void)state;
    istore *st;
    assert_int_equal(istore_new(L, H, C, ALL - 1, &st), ISTORE_OK);
    assert_false(istore_all_layers(st));
    istore_show_layer(st, 1);
    assert_false(istore_hook_want(st, 0, 0));
    assert_true(istore_hook_want(st, 1, 3));
    assert_false(istore_hook_want(st, 2, 0));
    run_forward(st, 0, C);
    for (int h = 0; h < H; h++)
        for (int q = 0; q < C; q++) {
            assert_row_is_ref(st, 1, h, q);
            assert_null(istore_row(st, 0, h, q));
            assert_null(istore_row(st, 2, h, q));
        }
    assert_true(isnan(istore_weight(st, 0, -1, 2, 0)));
    /* another layer shown: the rows of layer 1 no longer count, and layer 2's
       appear for the positions the model computes again */
    istore_show_layer(st, 2);
    run_forward(st, 0, 2);
    for (int h = 0; h < H; h++) {
        assert_row_is_ref(st, 2, h, 0);
        assert_row_is_ref(st, 2, h, 1);
        assert_null(istore_row(st, 1, h, 0));
        assert_null(istore_row(st, 2, h, 2));
        assert_row_is_ref(st, 1, h, 2); /* not recomputed: still layer 1's */
    }
    /* a put for a layer not shown (no want asked) changes nothing */
    float row[C] = {0.9f, 0.1f};
    istore_hook_put(st, 0, 0, 1, row, 2);
    assert_row_is_ref(st, 2, 0, 1);
    istore_free(st);
}

static void test_truncate(void **state) {
    (void)state;
    istore *st;
    assert_int_equal(istore_new(L, H, C, ALL, &st), ISTORE_OK);
    run_forward(st, 0, C);
    istore_truncate(st, 2); /* /undo: positions 2.. gone */
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            assert_row_is_ref(st, l, h, 0);
            assert_row_is_ref(st, l, h, 1);
            for (int q = 2; q < C; q++) {
                const float *r = istore_row(st, l, h, q);
                for (int k = 0; k <= q; k++) assert_float_equal(r[k], 0, 0); /* as never computed */
            }
        }
    run_forward(st, 2, 3);
    assert_row_is_ref(st, 1, 1, 2);
    istore_truncate(st, 0); /* /reset */
    assert_float_equal(istore_row(st, 0, 0, 0)[0], 0, 0);
    istore_free(st);

    assert_int_equal(istore_new(L, H, C, 0, &st), ISTORE_OK); /* single layer */
    istore_show_layer(st, 0);
    run_forward(st, 0, C);
    istore_truncate(st, 3);
    assert_row_is_ref(st, 0, 3, 2);
    for (int q = 3; q < C; q++) assert_null(istore_row(st, 0, 0, q));
    istore_truncate(st, 5); /* past what is kept: nothing changes */
    assert_row_is_ref(st, 0, 3, 2);
    assert_null(istore_row(st, 0, 0, 3));
    istore_free(st);
}

/* Residuals as the forward pass hands them over: every block of each
 * position in order, the last block last; a position is readable once its
 * last block is in, and truncation forgets it. */
static void test_residuals(void **state) {
    (void)state;
    enum { E = 5 };
    istore *st;
    assert_int_equal(istore_new(L, H, C, ALL, &st), ISTORE_OK);
    assert_false(istore_hook_want_residual(st, 0)); /* not kept until asked */
    assert_null(istore_residual(st, 0, 0));
    assert_int_equal(istore_keep_residuals(st, E, (size_t)L * C * E * sizeof(float) - 1), ISTORE_ERR_NOMEM);
    assert_false(istore_hook_want_residual(st, 0));
    assert_int_equal(istore_keep_residuals(st, E, (size_t)L * C * E * sizeof(float)), ISTORE_OK);
    assert_true(istore_hook_want_residual(st, L - 1));
    assert_false(istore_hook_want_residual(st, L));
    float x[E];
    for (int p = 0; p < C; p++)
        for (int l = 0; l < L; l++) {
            for (int i = 0; i < E; i++) x[i] = (float)(100 * l + 10 * p + i);
            istore_hook_put_residual(st, l, p, x, E);
            if (l < L - 1) assert_null(istore_residual(st, 0, p)); /* half-computed: not current */
        }
    for (int p = 0; p < C; p++)
        for (int l = 0; l < L; l++) {
            const float *r = istore_residual(st, l, p);
            assert_non_null(r);
            for (int i = 0; i < E; i++) assert_float_equal(r[i], 100 * l + 10 * p + i, 0);
        }
    unsigned long v = istore_version(st);
    run_forward(st, 0, 1); /* rows change: so does the version (caches drawn from the store compare it) */
    assert_true(istore_version(st) != v);
    v = istore_version(st);
    istore_hook_put_residual(st, 0, 0, x, E);
    assert_true(istore_version(st) != v);
    v = istore_version(st);
    istore_truncate(st, C);
    assert_true(istore_version(st) != v);
    for (int l = 0; l < L; l++) { /* position 0 again, every block, as before */
        for (int i = 0; i < E; i++) x[i] = (float)(100 * l + i);
        istore_hook_put_residual(st, l, 0, x, E);
    }
    istore_hook_put_residual(st, 0, 0, x, E + 1); /* the wrong width: ignored */
    assert_float_equal(istore_residual(st, 0, 0)[E - 1], E - 1, 0);
    istore_truncate(st, 2);
    assert_non_null(istore_residual(st, 2, 1));
    for (int p = 2; p < C; p++) assert_null(istore_residual(st, 0, p));
    istore_free(st);
}

static gpt2_candidate cand(int32_t id, float prob) {
    return (gpt2_candidate){.id = id, .prob = prob, .prob_temp = prob, .removed_by = GPT2_STAGE_KEPT};
}

static void test_snapshots(void **state) {
    (void)state;
    istore *st;
    assert_int_equal(istore_new(1, 1, 4, ALL, &st), ISTORE_OK);
    assert_false(istore_last(st)->valid);
    gpt2_sampler_params sp = gpt2_sampler_default_params();
    sp.temperature = 0.5f;
    gpt2_candidate c[ISTORE_SNAP_K + 2];
    for (int i = 0; i < ISTORE_SNAP_K + 2; i++) c[i] = cand(100 + i, 0.5f / (float)(i + 1));
    istore_set_last(st, 101, 0.25f, sp, c, ISTORE_SNAP_K + 2);
    const istore_snap *s = istore_last(st);
    assert_true(s->valid);
    assert_int_equal(s->chosen, 101);
    assert_float_equal(s->chosen_prob, 0.25f, 0);
    assert_int_equal(s->n, ISTORE_SNAP_K); /* at most K kept */
    assert_int_equal(s->c[ISTORE_SNAP_K - 1].id, 100 + ISTORE_SNAP_K - 1);
    assert_float_equal(s->params.temperature, 0.5f, 0);
    istore_clear_last(st);
    assert_false(istore_last(st)->valid);

    gpt2_token_candidates tc = {.n = 3, .params = sp};
    tc.c[0] = cand(7, 0.6f), tc.c[1] = cand(9, 0.3f), tc.c[2] = cand(4, 0.1f);
    istore_snap out;
    assert_true(istore_snap_from(9, &tc, &out));
    assert_int_equal(out.n, 3);
    assert_float_equal(out.chosen_prob, 0.3f, 0); /* its own entry's probability */
    assert_int_equal(out.c[2].id, 4);
    assert_true(istore_snap_from(5, &tc, &out));
    assert_float_equal(out.chosen_prob, 0, 0); /* not among them */
    tc.n = 0;
    assert_false(istore_snap_from(9, &tc, &out));
    istore_free(st);
}

static void test_notes_follow_turns(void **state) {
    (void)state;
    istore *st;
    int n;
    assert_int_equal(istore_new(1, 1, 4, ALL, &st), ISTORE_OK);
    assert_int_equal(istore_note_push(st, 0, 0.5f, GPT2_TOKEN_SAMPLED), ISTORE_ERR_ARG); /* no turns yet */
    istore_notes_sync(st, 2);                                                           /* you, the reply */
    for (int i = 0; i < 100; i++) /* past the first allocation */
        assert_int_equal(istore_note_push(st, 1, (float)i / 100, i % 3 ? GPT2_TOKEN_ACCEPTED : GPT2_TOKEN_CORRECTED),
                         ISTORE_OK);
    const istore_note *v = istore_notes(st, 1, &n);
    assert_int_equal(n, 100);
    for (int i = 0; i < 100; i++) {
        assert_float_equal(v[i].p, (float)i / 100, 0);
        assert_int_equal(v[i].origin, i % 3 ? GPT2_TOKEN_ACCEPTED : GPT2_TOKEN_CORRECTED);
    }
    assert_null(istore_notes(st, 0, &n));
    assert_int_equal(n, 0);
    istore_notes_sync(st, 40); /* many turns: grows */
    assert_int_equal(istore_note_push(st, 39, 0.9f, GPT2_TOKEN_SAMPLED), ISTORE_OK);
    istore_notes(st, 1, &n);
    assert_int_equal(n, 100);
    istore_notes_sync(st, 1); /* /undo took turns away: their notes go */
    assert_null(istore_notes(st, 1, &n));
    assert_int_equal(istore_note_push(st, 1, 0.9f, GPT2_TOKEN_SAMPLED), ISTORE_ERR_ARG);
    istore_notes_sync(st, 40);
    istore_notes(st, 39, &n);
    assert_int_equal(n, 0); /* a new turn 39 starts empty */
    istore_note_push(st, 3, 0.1f, GPT2_TOKEN_SAMPLED);
    istore_note_push(st, 4, 0.1f, GPT2_TOKEN_SAMPLED);
    istore_notes_clear(st, 3); /* /regen of turn 3 */
    assert_null(istore_notes(st, 3, &n));
    istore_notes(st, 4, &n);
    assert_int_equal(n, 1);
    istore_notes_clear(st, -1); /* /load */
    assert_null(istore_notes(st, 4, &n));
    istore_free(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_checks_arguments),      cmocka_unit_test(test_all_layers_rows_from_hooks),
        cmocka_unit_test(test_weight_and_head_mean),      cmocka_unit_test(test_budget_falls_back_to_shown_layer),
        cmocka_unit_test(test_truncate),                  cmocka_unit_test(test_snapshots),
        cmocka_unit_test(test_notes_follow_turns),        cmocka_unit_test(test_residuals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
