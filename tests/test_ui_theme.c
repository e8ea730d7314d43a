/* test_ui_theme.c — theme files: parsing, errors with file and line, colour conversion,
 * and the bundled themes (src/ui/theme.c, themes/). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ui/ui_logic.h"

static int parse(const char *text, ui_theme *t, char *err) {
    return ui_theme_parse(text, strlen(text), "x.theme", t, err, 256);
}

static void test_parse_roles(void **state) {
    (void)state;
    ui_theme t;
    char err[256] = "";
    assert_int_equal(parse("# comment\n\nname = mine\n"
                           "text = 252\n"
                           "user = #5fafff on blue bold underline   # trailing comment\n"
                           "status=black on bright-white reverse\n"
                           "heat = 0 #101010 255\n",
                           &t, err), 0);
    assert_string_equal(t.name, "mine");
    assert_int_equal(t.role[UI_ROLE_TEXT].fg.kind, UI_COLOR_INDEX);
    assert_int_equal(t.role[UI_ROLE_TEXT].fg.value, 252);
    assert_int_equal(t.role[UI_ROLE_TEXT].bg.kind, UI_COLOR_DEFAULT);
    assert_int_equal(t.role[UI_ROLE_USER].fg.kind, UI_COLOR_RGB);
    assert_int_equal(t.role[UI_ROLE_USER].fg.value, 0x5fafff);
    assert_int_equal(t.role[UI_ROLE_USER].bg.value, 4);
    assert_int_equal(t.role[UI_ROLE_USER].attrs, UI_ATTR_BOLD | UI_ATTR_UNDERLINE);
    assert_int_equal(t.role[UI_ROLE_STATUS].fg.value, 0);
    assert_int_equal(t.role[UI_ROLE_STATUS].bg.value, 15);
    assert_int_equal(t.role[UI_ROLE_STATUS].attrs, UI_ATTR_REVERSE);
    assert_int_equal(t.n_heat, 3);
    assert_int_equal(t.heat[1].value, 0x101010);
    /* roles not named keep the default */
    ui_theme d;
    ui_theme_default(&d);
    assert_memory_equal(&t.role[UI_ROLE_ERROR], &d.role[UI_ROLE_ERROR], sizeof d.role[0]);
}

static void expect_error(const char *text, const char *want) {
    ui_theme t;
    char err[256] = "";
    assert_int_equal(parse(text, &t, err), -1);
    if (!strstr(err, want)) fail_msg("error '%s' lacks '%s'", err, want);
}

static void test_parse_errors_name_file_and_line(void **state) {
    (void)state;
    expect_error("text = 252\nuser = blu\n", "x.theme:2: user: 'blu' is not a colour");
    expect_error("\n\n\nfoo = red\n", "x.theme:4: unknown setting 'foo'");
    expect_error("text 252\n", "x.theme:1: expected 'NAME = VALUE'");
    expect_error("text =\n", "x.theme:1: 'text' has no value");
    expect_error("heat = red\n", "x.theme:1: heat: expected 2 to 16 colours, found 1");
    expect_error("heat = red 256\n", "x.theme:1: heat: '256' is not a colour");
    expect_error("bar = red on\n", "x.theme:1: bar: 'on' needs a background colour");
    expect_error("bar = red green\n", "x.theme:1: bar: unexpected 'green'");
    expect_error("bar = #12345\n", "x.theme:1: bar: '#12345' is not a colour");
    expect_error("name = a b\n", "x.theme:1: name: expected one word");
}

static void test_colors(void **state) {
    (void)state;
    ui_color c;
    assert_int_equal(ui_color_parse("default", &c), 0);
    assert_int_equal(c.kind, UI_COLOR_DEFAULT);
    assert_int_equal(ui_color_parse("bright-red", &c), 0);
    assert_int_equal(c.value, 9);
    assert_int_equal(ui_color_parse("-1", &c), -1);
    assert_int_equal(ui_color_parse("#gggggg", &c), -1);
    assert_int_equal(ui_rgb_to_256(0xff0000), 196);
    assert_int_equal(ui_rgb_to_256(0x000000), 16);
    assert_int_equal(ui_rgb_to_256(0x808080), 244);
    assert_int_equal(ui_index_to_rgb(231), 0xffffff);
    assert_int_equal(ui_color_to_8((ui_color){UI_COLOR_RGB, 0xff0000}), 1);
    assert_int_equal(ui_color_to_8((ui_color){UI_COLOR_INDEX, 12}), 4);
    assert_int_equal(ui_color_to_8((ui_color){UI_COLOR_INDEX, 231}), 7);
    assert_int_equal(ui_color_to_8((ui_color){UI_COLOR_DEFAULT, 0}), -1);
}

static void test_bundled_themes(void **state) {
    (void)state;
    const char *names[] = {"dark", "light", "high-contrast"};
    for (int i = 0; i < 3; i++) {
        ui_theme t;
        char err[512] = "";
        if (ui_theme_load(names[i], "themes", &t, err, sizeof err) != 0) fail_msg("%s", err);
        assert_string_equal(t.name, names[i]);
        assert_true(t.n_heat >= 2);
    }
    /* dark.theme is the built-in default */
    ui_theme t, d;
    char err[512];
    assert_int_equal(ui_theme_load("themes/dark.theme", NULL, &t, err, sizeof err), 0);
    ui_theme_default(&d);
    assert_memory_equal(&t, &d, sizeof t);
    assert_int_equal(ui_theme_load("nosuch", "themes", &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "themes/nosuch.theme"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_roles), cmocka_unit_test(test_parse_errors_name_file_and_line),
        cmocka_unit_test(test_colors), cmocka_unit_test(test_bundled_themes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
