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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_fits), cmocka_unit_test(test_window_follows_newest),
        cmocka_unit_test(test_window_scroll_and_cursor), cmocka_unit_test(test_levels),
        cmocka_unit_test(test_top_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
