/* test_ui_theme.c — theme files: parsing, errors with file and line, colour conversion,
 * and the bundled themes (src/ui/theme.c, themes/). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ui/theme.h"

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
    /* too long: it was cut to 63 bytes, here inside the 'é' (fuzz_theme) */
    char long_name[100];
    snprintf(long_name, sizeof long_name, "name = %062d\xc3\xa9\n", 0);
    expect_error(long_name, "x.theme:1: name: expected at most 63 bytes, found 64");
}

/* Messages that say what is wrong: a '#' value that is no colour (it used to
 * read "has no value", the '#' having started a comment), with the accepted forms. */
static void test_error_messages_say_what(void **state) {
    (void)state;
    expect_error("text = #zzzzzz\n", "x.theme:1: text: '#zzzzzz' is not a colour");
    expect_error("text = #zzzzzz\n", "#rrggbb");
    expect_error("user = red on #zzzzzz\n", "x.theme:1: user: '#zzzzzz' is not a colour");
    expect_error("user = blu\n", "expected default, black, red");
    expect_error("text = # a comment only\n", "x.theme:1: 'text' has no value");
}

static void assert_no_control_bytes(const char *msg) {
    for (const char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) fail_msg("raw control byte 0x%02x in '%s'", *c, msg);
}

/* Values and paths from the user's files are shown escaped, never raw: an
 * OSC title sequence as a colour, a name with a screen-clearing escape, a
 * path with a newline and a colour escape. */
static void test_hostile_bytes_escaped(void **state) {
    (void)state;
    ui_theme t;
    char err[512] = "";
    assert_int_equal(parse("text = \x1b]0;x\a\n", &t, err), -1);
    assert_no_control_bytes(err);
    assert_non_null(strstr(err, "x.theme:1: text: '\\x1b]0;x\\x07' is not a colour"));
    assert_int_equal(parse("name = \x1b[2J\xff\n", &t, err), -1);
    assert_no_control_bytes(err);
    assert_non_null(strstr(err, "name: '\\x1b[2J\\xff' has control characters"));
    assert_int_equal(ui_theme_parse("text = red\n", 11, "evil\n\x1b[31m.theme", &t, err, sizeof err), 0);
    assert_int_equal(ui_theme_parse("text = bad\n", 11, "evil\n\x1b[31m.theme", &t, err, sizeof err), -1);
    assert_no_control_bytes(err);
    assert_non_null(strstr(err, "evil\\n\\x1b[31m.theme:1: text: 'bad'"));
    assert_int_equal(ui_theme_load("/nonexistent/evil\n\x1b[31m.theme", NULL, &t, err, sizeof err), -1);
    assert_no_control_bytes(err);
    assert_non_null(strstr(err, "/nonexistent/evil\\n\\x1b[31m.theme: cannot open theme"));
}

/* A directory in place of a theme file says so (it read "larger than 64 KiB"). */
static void test_directory_theme(void **state) {
    (void)state;
    char dir[] = "/tmp/gptscope-theme-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/x.theme", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    ui_theme t;
    char err[512] = "";
    assert_int_equal(ui_theme_load(path, NULL, &t, err, sizeof err), -1);
    if (!strstr(err, "x.theme: is a directory, expected a theme file")) fail_msg("message: %s", err);
    rmdir(path);
    rmdir(dir);
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

/* Text on a heat cell: dark on light colours, light on dark ones (relative
 * luminance of the sRGB colour, threshold 0.18). */
static void test_color_is_light(void **state) {
    (void)state;
    ui_color white = {UI_COLOR_RGB, 0xffffff}, black = {UI_COLOR_RGB, 0}, def = {UI_COLOR_DEFAULT, 0};
    assert_int_equal(ui_color_is_light(white), 1);
    assert_int_equal(ui_color_is_light(black), 0);
    assert_int_equal(ui_color_is_light(def), -1);
    assert_int_equal(ui_color_is_light((ui_color){UI_COLOR_INDEX, 231}), 1); /* #ffffff */
    assert_int_equal(ui_color_is_light((ui_color){UI_COLOR_INDEX, 17}), 0);  /* #00005f, navy */
    assert_int_equal(ui_color_is_light((ui_color){UI_COLOR_INDEX, 220}), 1); /* #ffd700, gold: Y = 0.70 */
    /* grey: Y is the channel's linear value: #808080 0.216 > 0.18, light; #707070 0.162, dark */
    assert_int_equal(ui_color_is_light((ui_color){UI_COLOR_RGB, 0x808080}), 1);
    assert_int_equal(ui_color_is_light((ui_color){UI_COLOR_RGB, 0x707070}), 0);
    assert_int_equal(ui_color_is_light((ui_color){UI_COLOR_RGB, 0x0000ff}), 0); /* blue: Y = 0.0722 */
    assert_int_equal(ui_color_is_light((ui_color){UI_COLOR_RGB, 0x00ff00}), 1); /* green: Y = 0.7152 */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_roles), cmocka_unit_test(test_parse_errors_name_file_and_line),
        cmocka_unit_test(test_colors), cmocka_unit_test(test_bundled_themes),
        cmocka_unit_test(test_error_messages_say_what), cmocka_unit_test(test_hostile_bytes_escaped),
        cmocka_unit_test(test_directory_theme), cmocka_unit_test(test_color_is_light),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
