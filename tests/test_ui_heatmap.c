/* test_ui_heatmap.c — heatmap windowing, level mapping and top entries (src/ui/heatmap.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "ui/heatmap.h"

static void test_window_fits(void **state) {
    (void)state;
    ui_heat_view v;
    ui_heat_window(5, 10, 20, 0, -1, &v); /* everything fits */
    assert_int_equal(v.row0, 0);
    assert_int_equal(v.n_rows, 5);
    assert_int_equal(v.col0, 0);
    assert_int_equal(v.n_cols, 5);
    assert_int_equal(v.cursor, 4);
    ui_heat_window(0, 10, 20, 0, -1, &v);
    assert_int_equal(v.n_rows, 0);
    assert_int_equal(v.cursor, -1);
    ui_heat_window(5, 0, 0, 0, -1, &v); /* a pane with no room */
    assert_int_equal(v.n_rows, 0);
    assert_int_equal(v.n_cols, 0);
}

static void test_window_follows_newest(void **state) {
    (void)state;
    ui_heat_view v;
    ui_heat_window(100, 10, 30, 0, -1, &v);
    assert_int_equal(v.row0, 90); /* the last 10 queries */
    assert_int_equal(v.n_rows, 10);
    assert_int_equal(v.col0, 70); /* keys ending at the newest query */
    assert_int_equal(v.n_cols, 30);
    assert_int_equal(v.cursor, 99);
    assert_int_equal(v.scroll, 0);
}

static void test_window_scroll_and_cursor(void **state) {
    (void)state;
    ui_heat_view v;
    ui_heat_window(100, 10, 30, 25, 95, &v); /* the cursor pulls the window back down */
    assert_int_equal(v.row0, 86);
    assert_int_equal(v.cursor, 95);
    ui_heat_window(100, 10, 30, 1000, 0, &v); /* clamped to the top */
    assert_int_equal(v.row0, 0);
    assert_int_equal(v.scroll, 90);
    assert_int_equal(v.col0, 0);
    assert_int_equal(v.n_cols, 10); /* causal: the first 10 queries see 10 keys */
    ui_heat_window(100, 10, 5, 0, 20, &v); /* an old cursor: its row and its own key visible */
    assert_true(v.row0 <= 20 && 20 < v.row0 + v.n_rows);
    assert_true(v.col0 <= 20 && 20 < v.col0 + v.n_cols);
    ui_heat_window(100, 10, 30, 0, 500, &v); /* out of range: clamped to the newest */
    assert_int_equal(v.cursor, 99);
}

/* Which keys the heatmap shows for a query window: the diagonal unless a
 * window further back holds twice its attention. */
static void test_key_window(void **state) {
    (void)state;
    float m[100];
    for (int k = 0; k < 100; k++) m[k] = 0.01f; /* spread alike: the diagonal */
    assert_int_equal(ui_heat_key_window(m, 100, 20), 80);
    m[10] = 0.5f; /* far back, 0.5 + 19 * 0.01 = 0.69 against 0.2 on the diagonal */
    assert_int_equal(ui_heat_key_window(m, 100, 20), 0); /* the earliest window that holds it */
    m[10] = 0.25f; /* 0.44 against 0.2: just over twice */
    assert_int_equal(ui_heat_key_window(m, 100, 20), 0);
    m[10] = 0.2f;  /* 0.39: under twice 0.2 */
    assert_int_equal(ui_heat_key_window(m, 100, 20), 80);
    m[95] = 1.0f;  /* the diagonal holds the most */
    m[10] = 0.5f;
    assert_int_equal(ui_heat_key_window(m, 100, 20), 80);
    assert_int_equal(ui_heat_key_window(m, 10, 20), 0); /* all fit */
    for (int k = 0; k < 100; k++) m[k] = k == 50 ? 1.0f : 0; /* one key, nothing on the diagonal */
    assert_int_equal(ui_heat_key_window(m, 100, 20), 31);
    m[50] = NAN; /* unknown weights count as none */
    assert_int_equal(ui_heat_key_window(m, 100, 20), 80);
}

static void test_levels(void **state) {
    (void)state;
    assert_int_equal(ui_heat_level(0, 5), 0);
    assert_int_equal(ui_heat_level(NAN, 5), 0);
    assert_int_equal(ui_heat_level(1e-6f, 5), 1); /* tiny but non-zero stays visible */
    assert_int_equal(ui_heat_level(1, 5), 4);
    assert_int_equal(ui_heat_level(2, 5), 4);
    assert_int_equal(ui_heat_level(0.25f, 5), 3); /* square root scale: sqrt(.25) * 4 = 2, + 1 */
    int prev = 0;
    for (int i = 0; i <= 100; i++) { /* monotonic */
        int l = ui_heat_level((float)i / 100, 10);
        assert_true(l >= prev && l < 10);
        prev = l;
    }
}

static void test_top_entries(void **state) {
    (void)state;
    float row[] = {0.1f, 0.5f, 0.05f, 0.3f, 0.05f};
    int idx[3];
    float w[3];
    assert_int_equal(ui_top_entries(row, 5, 3, idx, w), 3);
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 3);
    assert_int_equal(idx[2], 0);
    assert_float_equal(w[0], 0.5f, 0);
    float ties[] = {0.2f, 0.2f, 0.2f};
    assert_int_equal(ui_top_entries(ties, 3, 2, idx, w), 2);
    assert_int_equal(idx[0], 0); /* ties to the lower index */
    assert_int_equal(idx[1], 1);
    assert_int_equal(ui_top_entries(row, 2, 3, idx, w), 2);
}

/* The legend's ticks: level l is where sqrt(w) * (n - 1) reaches l - 1. */
static void test_level_floors(void **state) {
    (void)state;
    const int n = 5; /* the shade glyphs: " ░▒▓█" */
    assert_float_equal(ui_heat_level_floor(0, n), 0, 0);
    assert_float_equal(ui_heat_level_floor(1, n), 0, 0);
    assert_float_equal(ui_heat_level_floor(2, n), 0.0625f, 1e-7); /* (1/4)^2 */
    assert_float_equal(ui_heat_level_floor(3, n), 0.25f, 1e-7);   /* (2/4)^2 */
    assert_float_equal(ui_heat_level_floor(4, n), 0.5625f, 1e-7); /* (3/4)^2 */
    for (int l = 2; l < n; l++) { /* each floor is the first weight of its level */
        float f = ui_heat_level_floor(l, n);
        assert_int_equal(ui_heat_level(f * 1.001f, n), l);
        assert_int_equal(ui_heat_level(f * 0.999f, n), l - 1);
    }
    assert_float_equal(ui_heat_level_floor(10, 10), 64.0f / 81.0f, 1e-6); /* clamped to level 9: (8/9)^2 */
}

static void test_scale(void **state) {
    (void)state;
    float row[] = {0.1f, NAN, 0.4f, 0.2f};
    assert_float_equal(ui_row_max(row, 4), 0.4f, 0);
    assert_float_equal(ui_row_max(row, 2), 0.1f, 0);
    assert_float_equal(ui_row_max(row, 0), 0, 0);
    assert_float_equal(ui_heat_scaled(0.1f, 0), 0.1f, 0);      /* global: as it is */
    assert_float_equal(ui_heat_scaled(0.1f, 0.4f), 0.25f, 1e-7); /* per row: over the row's max */
    assert_float_equal(ui_heat_scaled(0.4f, 0.4f), 1.0f, 0);
    assert_true(isnan(ui_heat_scaled(NAN, 0.4f)));
}

/* Cell scale: the largest square that fits both ways; axis steps 1-2-5. */
static void test_cell_scale(void **state) {
    (void)state;
    assert_int_equal(ui_cell_scale(10, 80, 40), 4);  /* 8 across, 4 down: the smaller */
    assert_int_equal(ui_cell_scale(20, 79, 40), 2);  /* 3 across, 2 down */
    assert_int_equal(ui_cell_scale(30, 200, 90), 3); /* 6 across, 3 down */
    assert_int_equal(ui_cell_scale(100, 80, 40), 1); /* already pooled: one cell */
    assert_int_equal(ui_cell_scale(0, 80, 40), 1);
    assert_int_equal(ui_axis_step(1, 1), 5);  /* "0" needs 3 columns: 5 bins, not 2 (2 < 3) */
    assert_int_equal(ui_axis_step(1, 3), 1);  /* 3 columns per bin: every bin */
    assert_int_equal(ui_axis_step(2, 2), 2);  /* 4 columns: 2 bins of 2 */
    assert_int_equal(ui_axis_step(3, 1), 5);  /* 5 columns */
    assert_int_equal(ui_axis_step(4, 1), 10); /* 6 columns: 10, not 5 */
    assert_int_equal(ui_axis_step(9, 1), 20); /* 11 columns */
}

static void test_bins(void **state) {
    (void)state;
    assert_int_equal(ui_bin_size(90, 40), 3); /* ceil(90 / 40) */
    assert_int_equal(ui_bin_size(80, 40), 2);
    assert_int_equal(ui_bin_size(10, 40), 1);
    assert_int_equal(ui_bin_size(0, 40), 1);
    assert_int_equal(ui_bin_size(7, 0), 7);
    float row[] = {0.1f, 0.5f, 0.2f, NAN, 0.05f, NAN, NAN};
    float out[4];
    assert_int_equal(ui_bin_max(row, 7, 2, out, 0), 4);
    assert_float_equal(out[0], 0.5f, 0);  /* max(0.1, 0.5) */
    assert_float_equal(out[1], 0.2f, 0);  /* max(0.2, NaN) */
    assert_float_equal(out[2], 0.05f, 0); /* max(0.05, NaN) */
    assert_true(isnan(out[3]));           /* NaN alone */
    float row2[] = {0.3f, 0.1f, 0.1f, 0.6f, NAN, NAN, 0.9f};
    assert_int_equal(ui_bin_max(row2, 7, 2, out, 1), 4);
    assert_float_equal(out[0], 0.5f, 0);  /* max(0.5, 0.3, 0.1) */
    assert_float_equal(out[1], 0.6f, 0);
    assert_float_equal(out[2], 0.05f, 0); /* nothing finite to add */
    assert_float_equal(out[3], 0.9f, 0);  /* a NaN bin takes the new value */
    assert_int_equal(ui_bin_max(row, 7, 7, out, 0), 1);
    assert_float_equal(out[0], 0.5f, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_fits), cmocka_unit_test(test_window_follows_newest),
        cmocka_unit_test(test_window_scroll_and_cursor), cmocka_unit_test(test_levels),
        cmocka_unit_test(test_top_entries), cmocka_unit_test(test_level_floors),
        cmocka_unit_test(test_scale), cmocka_unit_test(test_bins), cmocka_unit_test(test_cell_scale), cmocka_unit_test(test_key_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
