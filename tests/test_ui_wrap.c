/* test_ui_wrap.c — the chat app's word wrapping, UTF-8 widths and bars (src/ui/wrap.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "gpt2_tokenizer.h"
#include "ui/wrap.h"

/* Wraps s and returns the lines joined with '|' (for compact expectations). */
static const char *wrapped(const char *s, int width) {
    static char out[4096];
    ui_line L[128];
    int n = ui_wrap(s, strlen(s), width, L, 128);
    assert_true(n <= 128);
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        if (i) out[o++] = '|';
        memcpy(out + o, s + L[i].start, L[i].end - L[i].start);
        o += L[i].end - L[i].start;
        assert_true(L[i].cols <= width || L[i].end - L[i].start <= 4); /* one over-wide char per line */
        assert_int_equal(L[i].cols, ui_text_width(s + L[i].start, L[i].end - L[i].start));
    }
    out[o] = '\0';
    return out;
}

static void test_wrap_words(void **state) {
    (void)state;
    assert_string_equal(wrapped("hello world", 20), "hello world");
    assert_string_equal(wrapped("hello world", 5), "hello|world");
    assert_string_equal(wrapped("hello world", 7), "hello|world");
    assert_string_equal(wrapped("the quick brown fox jumps", 10), "the quick|brown fox|jumps");
    assert_string_equal(wrapped("a  b", 2), "a|b");            /* spaces at a break are dropped */
    assert_string_equal(wrapped("abcdefghij", 4), "abcd|efgh|ij"); /* long words are cut */
    assert_string_equal(wrapped("hi abcdefghij", 4), "hi|abcd|efgh|ij");
}

static void test_wrap_newlines_and_empty(void **state) {
    (void)state;
    assert_string_equal(wrapped("", 10), "");
    assert_int_equal(ui_wrap("", 0, 10, NULL, 0), 1);
    assert_string_equal(wrapped("a\nb", 10), "a|b");
    assert_string_equal(wrapped("a\n\nb", 10), "a||b");
    assert_string_equal(wrapped("a\n", 10), "a|");
    assert_int_equal(ui_wrap("ab cd", 5, 0, NULL, 0), 4); /* width < 1 counts as 1: a line per character */
}

static void test_wrap_utf8_widths(void **state) {
    (void)state;
    /* é is 2 bytes 1 column; 日本 are 2 columns each */
    assert_int_equal(ui_text_width("caf\xc3\xa9", 5), 4);
    assert_int_equal(ui_text_width("\xe6\x97\xa5\xe6\x9c\xac", 6), 4);
    assert_string_equal(wrapped("caf\xc3\xa9 ol\xc3\xa9", 4), "caf\xc3\xa9|ol\xc3\xa9");
    /* wide characters never split and never overflow */
    assert_string_equal(wrapped("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", 5), "\xe6\x97\xa5\xe6\x9c\xac|\xe8\xaa\x9e");
    assert_string_equal(wrapped("\xe6\x97\xa5", 1), "\xe6\x97\xa5"); /* wider than the line: alone */
    /* a combining mark takes no column */
    assert_int_equal(ui_text_width("e\xcc\x81", 3), 1);
    /* invalid bytes: one column each, decoded as U+FFFD */
    uint32_t cp;
    assert_int_equal(ui_utf8_decode("\xff", 1, &cp), 1);
    assert_int_equal(cp, 0xFFFD);
    assert_int_equal(ui_utf8_decode("\xc3", 1, &cp), 1); /* truncated */
    assert_int_equal(cp, 0xFFFD);
    assert_int_equal(ui_utf8_decode("\xed\xa0\x80", 3, &cp), 1); /* surrogate */
    assert_int_equal(ui_utf8_decode("\xf0\x9f\x98\x80", 4, &cp), 4);
    assert_int_equal(cp, 0x1F600);
    assert_string_equal(wrapped("ab\xff\xfe" "cd", 3), "ab\xff|\xfe" "cd");
}

static void test_wrap_counts_without_output(void **state) {
    (void)state;
    const char *s = "one two three four five six";
    int n = ui_wrap(s, strlen(s), 9, NULL, 0);
    ui_line L[2];
    assert_int_equal(ui_wrap(s, strlen(s), 9, L, 2), n); /* max limits what is written, not the count */
    assert_int_equal(n, 4);
}

static void test_bars(void **state) {
    (void)state;
    char b[3 * 10 + 1], pct[8];
    assert_string_equal(ui_bar(0, 4, b), "    ");
    assert_string_equal(ui_bar(1, 4, b), "\u2588\u2588\u2588\u2588");
    assert_string_equal(ui_bar(0.5f, 4, b), "\u2588\u2588  ");
    assert_string_equal(ui_bar(3.0f / 32, 4, b), "\u258D   "); /* 3/8 of a cell */
    assert_string_equal(ui_bar(2.0f, 2, b), "\u2588\u2588");
    assert_string_equal(ui_bar(-1, 2, b), "  ");
    assert_string_equal(ui_percent(0.123f, pct), " 12.3%");
    assert_string_equal(ui_percent(1.0f, pct), "100.0%");
    assert_string_equal(ui_percent(0.0001f, pct), " <0.1%");
    assert_string_equal(ui_percent(0, pct), "  0.0%");
}

/* Feeds bytes one at a time; returns the code points as "U+XXXX " joined. */
static const char *decoded(const char *bytes, size_t n) {
    static char out[512];
    ui_utf8_input in = {0};
    uint32_t cp[2];
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        int k = ui_utf8_push(&in, (unsigned char)bytes[i], cp);
        for (int j = 0; j < k; j++) o += (size_t)snprintf(out + o, sizeof out - o, "%04X ", (unsigned)cp[j]);
    }
    if (ui_utf8_flush(&in, cp)) o += (size_t)snprintf(out + o, sizeof out - o, "%04X ", (unsigned)cp[0]);
    return out;
}

/* A paste with an invalid byte keeps every valid byte around it (the bug:
 * "AB\xffCD" arrived as "AB"); expectations written from the UTF-8 definition. */
static void test_utf8_input(void **state) {
    (void)state;
    assert_string_equal(decoded("AB\xff" "CD", 5), "0041 0042 FFFD 0043 0044 ");
    assert_string_equal(decoded("\xc3\xa9t\xc3\xa9", 5), "00E9 0074 00E9 ");
    assert_string_equal(decoded("\xe2\x82\xac", 3), "20AC ");          /* the euro sign */
    assert_string_equal(decoded("\xf0\x9f\x98\x80", 4), "1F600 ");     /* an emoji */
    assert_string_equal(decoded("\xe2\x82" "A", 3), "FFFD 0041 ");      /* cut short, then ASCII */
    assert_string_equal(decoded("\xc3\xc3\xa9", 3), "FFFD 00E9 ");      /* cut short by a new lead */
    assert_string_equal(decoded("\x80\xbf", 2), "FFFD FFFD ");          /* lone continuation bytes */
    assert_string_equal(decoded("\xc0\xaf", 2), "FFFD FFFD ");          /* C0 never begins a character */
    assert_string_equal(decoded("\xed\xa0\x80", 3), "FFFD ");          /* a surrogate, encoded */
    assert_string_equal(decoded("\xe2\x82", 2), "FFFD ");               /* the input stops mid-character */
}

/* Labels: every byte accounted for, the invisible ones made visible. */
static void test_token_escape(void **state) {
    (void)state;
    char out[64];
    assert_int_equal(gpt2_token_escape(" ROMEO", 6, out, sizeof out), strlen("\u00B7ROMEO"));
    assert_string_equal(out, "\u00B7ROMEO");
    gpt2_token_escape("\n\n", 2, out, sizeof out);
    assert_string_equal(out, "\u21B5\u21B5");
    gpt2_token_escape("a\tb", 3, out, sizeof out);
    assert_string_equal(out, "a\u2192b");
    gpt2_token_escape("\xff", 1, out, sizeof out); /* a lone byte */
    assert_string_equal(out, "\\xff");
    gpt2_token_escape("\xe2\x80", 2, out, sizeof out); /* half a character (of U+2014) */
    assert_string_equal(out, "\\xe2\\x80");
    gpt2_token_escape("\xe2\x80\x94", 3, out, sizeof out); /* the whole character */
    assert_string_equal(out, "\u2014");
    gpt2_token_escape("\xef\xbf\xbd", 3, out, sizeof out); /* a real U+FFFD is text */
    assert_string_equal(out, "\uFFFD");
    gpt2_token_escape("\x01\x7f", 2, out, sizeof out);
    assert_string_equal(out, "\\x01\\x7f");
    gpt2_token_escape("\xc2\x9b", 2, out, sizeof out); /* U+009B, CSI: a C1 control, never printed as is */
    assert_string_equal(out, "\\xc2\\x9b");
    assert_int_equal(gpt2_token_escape("abc\xff", 4, out, 6), 3); /* "\xff" does not fit: stops before it */
    assert_string_equal(out, "abc");
    assert_int_equal(gpt2_token_escape("  ", 2, out, 4), 2); /* one '·' (2 bytes) + NUL fits, not two */
    assert_string_equal(out, "\u00B7");
}

static void test_char_at(void **state) {
    (void)state;
    const char *s = "a\u00B7\u21B5z";
    size_t st, n = strlen(s);
    assert_int_equal(ui_char_at(s, n, 0, &st), 1);
    assert_int_equal(st, 0);
    assert_int_equal(ui_char_at(s, n, 1, &st), 2);
    assert_int_equal(st, 1);
    assert_int_equal(ui_char_at(s, n, 2, &st), 3);
    assert_int_equal(st, 3);
    assert_int_equal(ui_char_at(s, n, 3, &st), 1);
    assert_int_equal(st, 6);
    assert_int_equal(ui_char_at(s, n, 4, &st), 0);
}

int main(void) {
    if (!setlocale(LC_ALL, "C.UTF-8")) setlocale(LC_ALL, "en_US.UTF-8");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrap_words),       cmocka_unit_test(test_wrap_newlines_and_empty),
        cmocka_unit_test(test_wrap_utf8_widths), cmocka_unit_test(test_wrap_counts_without_output),
        cmocka_unit_test(test_bars),             cmocka_unit_test(test_utf8_input),
        cmocka_unit_test(test_token_escape),     cmocka_unit_test(test_char_at),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
