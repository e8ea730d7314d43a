/* test_jinja.c — the Jinja interpreter (src/core/jinja.h) against Jinja2.
 *
 * Every expected text here comes from Python's Jinja2 with Hugging Face's
 * settings (tests/ref/jinja_ref.py writes $GPTSCOPE_FIXTURES/jinja/cases.json):
 * real chat templates (Llama 2/3/3.1/3.2, Qwen 2.5/3, Mistral, Gemma 2/3, Phi,
 * SmolLM2, Zephyr, DeepSeek, Hermes, ChatML) over the conversations of
 * tests/ref/chat_cases.json, and the units of tests/ref/jinja_units.txt
 * (whitespace control, scoping, loops, macros, arithmetic, filters, tests,
 * undefined values, errors). Each must match byte for byte, or fail as Jinja2
 * does: raise_exception with its message verbatim, a syntax error as
 * GPT2_ERR_FORMAT, any other error as GPT2_ERR_TEMPLATE whose message holds
 * Jinja2's. The rest checks what Jinja2 has no say on: where syntax errors
 * point, the bounds on hostile templates, jinja_render_chat. */
#include "core/error.h"
#include "core/jinja.h"
#include "gpt2.h"
#include "test_util.h"

#include <cjson/cJSON.h>
#include <locale.h>

static cJSON *g_ref;           /* cases.json */
static struct tm g_now;        /* the reference's clock */

static int load_reference(void **state) {
    (void)state;
    size_t n;
    char *text = read_file(fixture_path("jinja/cases.json"), &n);
    g_ref = cJSON_ParseWithLength(text, n);
    free(text);
    if (!g_ref) fail_msg("jinja/cases.json: not JSON");
    const cJSON *now = cJSON_GetObjectItemCaseSensitive(g_ref, "now");
    int v[8];
    for (int i = 0; i < 8; i++) v[i] = cJSON_GetArrayItem(now, i)->valueint;
    g_now = (struct tm){.tm_year = v[0] - 1900, .tm_mon = v[1] - 1, .tm_mday = v[2], .tm_hour = v[3],
                        .tm_min = v[4], .tm_sec = v[5], .tm_wday = (v[6] + 1) % 7, .tm_yday = v[7] - 1};
    return 0;
}

static int free_reference(void **state) {
    (void)state;
    cJSON_Delete(g_ref);
    return 0;
}

static jinja_opts ref_opts(void) {
    jinja_opts o = jinja_default_opts();
    o.now = &g_now;
    return o;
}

/* Where a and b first differ, shown with some context, for a failure message. */
static void show_difference(const char *name, const char *want, size_t wn, const char *got, size_t gn) {
    size_t i = 0;
    while (i < wn && i < gn && want[i] == got[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    char a[512], b[512];
    gpt2_text_escape(want + from, (wn - from) < 120 ? wn - from : 120, a, sizeof a);
    gpt2_text_escape(got + from, (gn - from) < 120 ? gn - from : 120, b, sizeof b);
    print_message("  %s: differs at byte %zu (of %zu expected, %zu rendered)\n    expected: %s\n    rendered: %s\n", name,
                  i, wn, gn, a, b);
}

/* One reference case; returns 1 when it holds, printing why not otherwise. */
static int check_case(const cJSON *c, const jinja_template *t, gpt2_status parse_st, const gpt2_error *parse_err) {
    const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "output");
    const cJSON *werr = cJSON_GetObjectItemCaseSensitive(c, "error");
    int loose = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "loose"));
    char *out = NULL;
    size_t n = 0;
    gpt2_error err = {0};
    gpt2_status st = parse_st;
    if (st == GPT2_OK) {
        jinja_opts o = ref_opts();
        st = jinja_render(t, cJSON_GetObjectItemCaseSensitive(c, "vars"), &o, &out, &n, &err);
    } else {
        err = *parse_err;
    }
    int ok = 1;
    if (want) {
        if (st != GPT2_OK) {
            print_message("  %s: expected text, failed (%s): %s\n", name, gpt2_status_name(st), err.msg);
            ok = 0;
        } else if (n != strlen(want->valuestring) || memcmp(out, want->valuestring, n) != 0) {
            show_difference(name, want->valuestring, strlen(want->valuestring), out, n);
            ok = 0;
        }
    } else {
        const char *type = cJSON_GetObjectItemCaseSensitive(werr, "type")->valuestring;
        const char *msg = cJSON_GetObjectItemCaseSensitive(werr, "message")->valuestring;
        gpt2_error shown;
        gpt2_fail(&shown, GPT2_ERR_TEMPLATE, "%s", msg); /* Jinja2's message as a gpt2_error holds it */
        /* compile errors (SyntaxError: the Python Jinja2 generates); Python's own limits (RecursionError) */
        int syntax = !strcmp(type, "TemplateSyntaxError") || !strcmp(type, "TemplateAssertionError") ||
                     !strcmp(type, "SyntaxError");
        loose |= !strcmp(type, "RecursionError");
        if (st == GPT2_OK) {
            print_message("  %s: rendered, expected %s: %s\n", name, type, msg);
            ok = 0;
        } else if (loose) {
        } else if (!strcmp(type, "TemplateError")) { /* raise_exception: the message alone */
            if (st != GPT2_ERR_TEMPLATE || strcmp(err.msg, shown.msg) != 0) {
                print_message("  %s: expected raise_exception(\"%s\"), got (%s) %s\n", name, shown.msg,
                              gpt2_status_name(st), err.msg);
                ok = 0;
            }
        } else if (syntax ? st != GPT2_ERR_FORMAT : (st != GPT2_ERR_TEMPLATE || !strstr(err.msg, shown.msg))) {
            print_message("  %s: expected %s: %s\n    got (%s) %s\n", name, type, shown.msg, gpt2_status_name(st),
                          err.msg);
            ok = 0;
        }
    }
    free(out);
    return ok;
}

/* Every reference case, each template parsed once. */
static void test_reference(void **state) {
    (void)state;
    const cJSON *templates = cJSON_GetObjectItemCaseSensitive(g_ref, "templates");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(g_ref, "cases");
    int n_tpl = cJSON_GetArraySize(templates), n_bad = 0, n = 0;
    jinja_template **parsed = calloc((size_t)n_tpl, sizeof *parsed);
    gpt2_status *pst = calloc((size_t)n_tpl, sizeof *pst);
    gpt2_error *perr = calloc((size_t)n_tpl, sizeof *perr);
    assert_true(parsed && pst && perr);
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, templates) {
        pst[i] = jinja_parse(t->string, t->valuestring, strlen(t->valuestring), &parsed[i], &perr[i]);
        i++;
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *tn = cJSON_GetObjectItemCaseSensitive(c, "template")->valuestring;
        int k = 0;
        for (t = templates->child; t && strcmp(t->string, tn) != 0; t = t->next) k++;
        assert_non_null(t);
        n_bad += !check_case(c, parsed[k], pst[k], &perr[k]);
        n++;
    }
    for (i = 0; i < n_tpl; i++) jinja_free(parsed[i]);
    free(parsed);
    free(pst);
    free(perr);
    print_message("  %d of %d renderings as Jinja2 %s renders them\n", n - n_bad, n,
                  cJSON_GetObjectItemCaseSensitive(g_ref, "jinja2")->valuestring);
    assert_int_equal(n_bad, 0);
}

/* jinja_render_chat's text is apply_chat_template's: every reference case
 * made only of {role, content} strings, without tools or extra variables. */
static void test_render_chat(void **state) {
    (void)state;
    const cJSON *templates = cJSON_GetObjectItemCaseSensitive(g_ref, "templates");
    const cJSON *c;
    int checked = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(g_ref, "cases")) {
        const char *tn = cJSON_GetObjectItemCaseSensitive(c, "template")->valuestring;
        const cJSON *vars = cJSON_GetObjectItemCaseSensitive(c, "vars"), *want = cJSON_GetObjectItemCaseSensitive(c, "output");
        if (!strncmp(tn, "unit/", 5) || !want) continue;
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(vars, "messages"), *m;
        int plain = cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(vars, "tools")), n = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, vars) {
            static const char *const known[] = {"messages", "tools", "documents", "add_generation_prompt", "bos_token",
                                                "eos_token"};
            int k = 0;
            while (k < 6 && strcmp(v->string, known[k])) k++;
            plain &= k < 6;
        }
        const char *roles[64], *contents[64];
        cJSON_ArrayForEach(m, msgs) {
            plain &= cJSON_GetArraySize(m) == 2 && n < 64;
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *content = cJSON_GetObjectItemCaseSensitive(m, "content");
            plain &= cJSON_IsString(role) && cJSON_IsString(content);
            if (plain) roles[n] = role->valuestring, contents[n++] = content->valuestring;
        }
        const cJSON *src = cJSON_GetObjectItemCaseSensitive(templates, tn);
        if (!plain) continue;
        const cJSON *bos = cJSON_GetObjectItemCaseSensitive(vars, "bos_token"), *eos = cJSON_GetObjectItemCaseSensitive(vars, "eos_token");
        jinja_template *t;
        gpt2_error err;
        assert_int_equal(jinja_parse(tn, src->valuestring, strlen(src->valuestring), &t, &err), GPT2_OK);
        char *out;
        size_t len;
        jinja_opts o = ref_opts();
        gpt2_status st = jinja_render_chat(t, roles, contents, n,
                                           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(vars, "add_generation_prompt")),
                                           bos ? bos->valuestring : NULL, eos ? eos->valuestring : NULL, &o, &out, &len,
                                           &err);
        if (st != GPT2_OK) fail_msg("%s: %s", cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring, err.msg);
        if (len != strlen(want->valuestring) || memcmp(out, want->valuestring, len))
            fail_msg("%s: jinja_render_chat differs from apply_chat_template", cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring);
        assert_int_equal(out[len], '\0');
        free(out);
        jinja_free(t);
        checked++;
    }
    print_message("  %d conversations through jinja_render_chat\n", checked);
    assert_true(checked > 100);
}

/* ---- what Jinja2 has no say on ---- */
static gpt2_status parse_str(const char *src, jinja_template **t, gpt2_error *err) {
    return jinja_parse("tpl", src, strlen(src), t, err);
}

/* Renders src with vars (JSON text or NULL) and opts: status, text in *out (free it). */
static gpt2_status render_str(const char *src, const char *vars, const jinja_opts *o, char **out, gpt2_error *err) {
    jinja_template *t;
    *out = NULL;
    gpt2_status st = parse_str(src, &t, err);
    if (st != GPT2_OK) return st;
    cJSON *v = vars ? cJSON_Parse(vars) : NULL;
    size_t n;
    st = jinja_render(t, v, o, out, &n, err);
    cJSON_Delete(v);
    jinja_free(t);
    return st;
}

static void expect_error(const char *src, gpt2_status want, const char *msg_part) {
    char *out;
    gpt2_error err = {0};
    gpt2_status st = render_str(src, NULL, NULL, &out, &err);
    if (st != want) fail_msg("%s: status %s, expected %s (%s)", src, gpt2_status_name(st), gpt2_status_name(want), err.msg);
    assert_null(out);
    if (!strstr(err.msg, msg_part)) fail_msg("%s: message \"%s\" lacks \"%s\"", src, err.msg, msg_part);
    for (const char *p = err.msg; *p; p++) assert_true((unsigned char)*p >= 0x20);
}

/* A syntax error names the template, the line and the column, and what was expected. */
static void test_syntax_errors(void **state) {
    (void)state;
    expect_error("line one\n{% for x in [1] %}\n  {{ x }}\n", GPT2_ERR_FORMAT,
                 "tpl:3:10: unexpected end of template: expected 'endfor' or 'else' to close the 'for' at line 2:1");
    expect_error("ok\n  {{ 1 + }}", GPT2_ERR_FORMAT, "tpl:2:10: unexpected end of print statement");
    expect_error("{% if true %}\n{% endfor %}", GPT2_ERR_FORMAT,
                 "tpl:2:4: unknown tag 'endfor' (expected 'elif' or 'else' or 'endif' to close the 'if' at line 1)");
    expect_error("\n\n   {% foo %}", GPT2_ERR_FORMAT, "tpl:3:7: unknown tag 'foo'");
    expect_error("{{ 'abc }}", GPT2_ERR_FORMAT, "tpl:1:4: unexpected char \"'\" (a string that does not end)");
    expect_error("{{ x|nosuch }}", GPT2_ERR_FORMAT, "tpl:1:6: no filter named 'nosuch'");
    expect_error("{{ x is nosuch }}", GPT2_ERR_FORMAT, "tpl:1:6: no test named 'nosuch'");
    expect_error("{{ x|wordwrap }}", GPT2_ERR_FORMAT, "the filter 'wordwrap' is not supported by this interpreter");
    expect_error("{% include 'x' %}", GPT2_ERR_FORMAT, "tpl:1:4: the 'include' tag is not supported");
    expect_error("{% for x in y recursive %}{% endfor %}", GPT2_ERR_FORMAT, "recursive loops are not supported");
    expect_error("{{ f(*args) }}", GPT2_ERR_FORMAT, "*args and **kwargs in calls are not supported");
    expect_error("{{ '\\N{DASH}' }}", GPT2_ERR_FORMAT, "\\N{...} escapes are not supported");
    expect_error("{{ 99999999999999999999 }}", GPT2_ERR_FORMAT, "integer literal too large");
    expect_error("{% break %}", GPT2_ERR_FORMAT, "'break' outside a loop");
    expect_error("{# open", GPT2_ERR_FORMAT, "tpl:1:1: missing end of comment tag");
    expect_error("{{ (1 ]] }}", GPT2_ERR_FORMAT, "unexpected ']', expected ')'");
    expect_error("{{ x \x1b }}", GPT2_ERR_FORMAT, "unexpected char '\\x1b'"); /* a control byte, shown escaped */
}

/* Runtime errors: raise_exception's message alone; the others name their place. */
static void test_runtime_errors(void **state) {
    (void)state;
    expect_error("{{ raise_exception('Roles must alternate\nuser/assistant') }}", GPT2_ERR_TEMPLATE,
                 "Roles must alternate\\nuser/assistant");
    char *out;
    gpt2_error err;
    assert_int_equal(render_str("x{{ raise_exception('exactly this') }}", NULL, NULL, &out, &err), GPT2_ERR_TEMPLATE);
    assert_string_equal(err.msg, "exactly this");
    assert_int_equal(err.status, GPT2_ERR_TEMPLATE);
    expect_error("\n  {{ nothing.attr }}", GPT2_ERR_TEMPLATE, "tpl:2:"); /* where */
    expect_error("{{ nothing.attr }}", GPT2_ERR_TEMPLATE, "'nothing' is undefined");
    expect_error("{% if true %}{{ 1|nosuch }}{% endif %}", GPT2_ERR_TEMPLATE, "No filter named 'nosuch' found.");
    expect_error("{{ lipsum() }}", GPT2_ERR_TEMPLATE, "the global 'lipsum' is not supported");
    expect_error("{{ 'a'.zfill(3) }}", GPT2_ERR_TEMPLATE, "str.zfill() is not supported");
    expect_error("{{ '{:>3}'.format(1) }}", GPT2_ERR_TEMPLATE, "format specs");
    expect_error("{{ nosuchfunction(1) }}", GPT2_ERR_TEMPLATE, "'nosuchfunction' is undefined");
    expect_error("{{ 2 ** 64 }}", GPT2_ERR_TEMPLATE, "integer overflow");
    expect_error("{{ '%5.2f' % 1 }}", GPT2_ERR_TEMPLATE, "the printf-style conversion '%5' is not supported");
    assert_string_equal(gpt2_status_name(GPT2_ERR_TEMPLATE), "template error");
}

/* Hostile templates end with a message: runaway loops, recursion, output,
 * memory, nesting. Each bound is a field of jinja_opts (documented defaults). */
static void test_bounds(void **state) {
    (void)state;
    expect_error("{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", GPT2_ERR_TEMPLATE,
                 "steps");
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", GPT2_ERR_TEMPLATE, "macro calls nest deeper than 40");
    expect_error("{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}", GPT2_ERR_TEMPLATE, "the output passed");
    expect_error("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                 GPT2_ERR_TEMPLATE, "bytes");
    expect_error("{{ 'x' * 10000000000 }}", GPT2_ERR_TEMPLATE, "a repetition of more than");
    expect_error("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
                 GPT2_ERR_TEMPLATE, "maximum recursion depth exceeded");
    char deep[4000];
    memset(deep, '(', 1000);
    strcpy(deep + 1000, "1");
    memset(deep + 1001, ')', 1000);
    deep[2001] = '\0';
    char src[4100];
    snprintf(src, sizeof src, "{{ %s }}", deep);
    expect_error(src, GPT2_ERR_FORMAT, "nests deeper than");
    char chain[8000] = "{{ 1";
    for (int i = 0; i < 500; i++) strcat(chain, " + 1");
    strcat(chain, " }}");
    expect_error(chain, GPT2_ERR_FORMAT, "nests deeper than");
    /* a tighter bound through the options */
    jinja_opts o = jinja_default_opts();
    o.max_output = 10;
    char *out;
    gpt2_error err;
    assert_int_equal(render_str("{{ 'x' * 11 }}", NULL, &o, &out, &err), GPT2_ERR_TEMPLATE);
    assert_non_null(strstr(err.msg, "the output passed 10 bytes"));
    assert_int_equal(render_str("{{ 'x' * 9 }}", NULL, &o, &out, &err), GPT2_OK);
    assert_string_equal(out, "xxxxxxxxx");
    free(out);
    /* a source past JINJA_MAX_SOURCE is refused before it is read */
    jinja_template *t;
    assert_int_equal(jinja_parse("big", "x", JINJA_MAX_SOURCE + 1, &t, &err), GPT2_ERR_FORMAT);
    assert_null(t);
}

/* The deepest template the bounds allow, recursing as deep as they allow, under ASan: no stack overflow. */
static void test_deepest_allowed(void **state) {
    (void)state;
    char expr[2048] = "n";
    for (int i = 0; i < 80; i++) strcat(expr, " + 0");
    char src[4096];
    snprintf(src, sizeof src, "{%% macro f(n) %%}{%% if n < 39 %%}{{ f(%s + 1) }}{%% else %%}{{ n }}{%% endif %%}"
                              "{%% endmacro %%}{{ f(0) }}", expr);
    char *out;
    gpt2_error err;
    assert_int_equal(render_str(src, NULL, NULL, &out, &err), GPT2_OK);
    assert_string_equal(out, "39");
    free(out);
}

/* Values from the caller: numbers, nesting, the variables' types; NULL vars; the NUL after the text. */
static void test_api(void **state) {
    (void)state;
    char *out;
    gpt2_error err;
    assert_int_equal(render_str("{{ a }} {{ b }} {{ c }} {{ d is none }} {{ e.f[1] }}",
                                "{\"a\": 3, \"b\": 2.5, \"c\": \"s\", \"d\": null, \"e\": {\"f\": [0, true]}}", NULL,
                                &out, &err),
                     GPT2_OK);
    assert_string_equal(out, "3 2.5 s True True");
    free(out);
    assert_int_equal(render_str("", NULL, NULL, &out, &err), GPT2_OK);
    assert_string_equal(out, "");
    free(out);
    jinja_template *t;
    assert_int_equal(parse_str("x", &t, &err), GPT2_OK);
    cJSON *arr = cJSON_CreateArray();
    size_t n;
    assert_int_equal(jinja_render(t, arr, NULL, &out, &n, &err), GPT2_ERR_INVALID_ARG);
    cJSON_Delete(arr);
    /* a template renders the same twice (it is not changed by rendering) */
    char *a, *b;
    assert_int_equal(jinja_render(t, NULL, NULL, &a, &n, &err), GPT2_OK);
    assert_int_equal(jinja_render(t, NULL, NULL, &b, &n, &err), GPT2_OK);
    assert_string_equal(a, b);
    free(a);
    free(b);
    jinja_free(t);
    jinja_free(NULL);
    /* render_chat: NULL tokens stay undefined, NULL strings read as "" */
    assert_int_equal(parse_str("{{ bos_token is defined }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
                               "{{ tools }}{{ add_generation_prompt }}",
                               &t, &err),
                     GPT2_OK);
    const char *roles[] = {"user", NULL}, *contents[] = {"hi", NULL};
    assert_int_equal(jinja_render_chat(t, roles, contents, 2, 1, NULL, NULL, NULL, &out, &n, &err), GPT2_OK);
    assert_string_equal(out, "False[user:hi][:]NoneTrue");
    free(out);
    assert_int_equal(jinja_render_chat(t, NULL, NULL, 1, 0, NULL, NULL, NULL, &out, &n, &err), GPT2_ERR_INVALID_ARG);
    jinja_free(t);
}

/* Numbers read and print as Python's whatever LC_NUMERIC the application set
 * (the chat sets the user's locale): tried with a decimal-comma locale when
 * one is installed, skipped otherwise. The caller's locale is left as it was. */
static void test_decimal_comma_locale(void **state) {
    (void)state;
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "ru_RU.UTF-8", "nl_NL.UTF-8"};
    const char *got = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !got; i++) got = setlocale(LC_ALL, names[i]);
    if (!got || strcmp(localeconv()->decimal_point, ",") != 0) {
        setlocale(LC_ALL, "C");
        print_message("  no decimal-comma locale installed: skipped\n");
        skip();
    }
    char *out;
    gpt2_error err;
    assert_int_equal(render_str("{{ 1.5 }} {{ '2.5'|float }} {{ 0.1 + 0.2 }} {{ 1e-7 }} {{ [0.5] }} {{ {'f': 2.25}|tojson }} "
                                "{{ '3.5'|int }}",
                                NULL, NULL, &out, &err),
                     GPT2_OK);
    assert_string_equal(out, "1.5 2.5 0.30000000000000004 1e-07 [0.5] {\"f\": 2.25} 3");
    free(out);
    assert_string_equal(localeconv()->decimal_point, ",");
    setlocale(LC_ALL, "C");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference),  cmocka_unit_test(test_render_chat), cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_runtime_errors), cmocka_unit_test(test_bounds), cmocka_unit_test(test_deepest_allowed),
        cmocka_unit_test(test_api), cmocka_unit_test(test_decimal_comma_locale),
    };
    return cmocka_run_group_tests(tests, load_reference, free_reference);
}
