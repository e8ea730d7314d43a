/* test_json_read.c — the library's JSON getters (src/core/json.h), each
 * against values whose right answer follows from the JSON text alone: range
 * edges, non-integers, floats that round to 0, 64-bit integers past a
 * double's 2^53, missing keys, and the one message shape
 * "PATH: PREFIXKEY: expected ..., found ...". */
#include "core/json.h"
#include "gpt2.h"
#include "test_util.h"

static cJSON *parse(const char *text) {
    cJSON *root = NULL;
    gpt2_error err;
    assert_int_equal(json_parse("t.json", text, strlen(text), GPT2_ERR_FORMAT, &root, &err), GPT2_OK);
    return root;
}

/* Asserts st is a failure with code whose message holds want. */
static void expect_fail(gpt2_status st, gpt2_status code, const gpt2_error *err, const char *want) {
    assert_int_equal(st, code);
    if (!strstr(err->msg, want)) fail_msg("message \"%s\" lacks \"%s\"", err->msg, want);
}

/* A key twice in one object, at any depth, is refused naming it; the same
 * key in two objects is fine. The files that go through json_parse (config,
 * session, template, vocab) share it; each is checked here through its loader too. */
static void test_duplicate_keys(void **state) {
    (void)state;
    static const struct {
        const char *text, *key;
    } bad[] = {
        {"{\"a\": 1, \"b\": 2, \"a\": 3}", "\"a\""},
        {"{\"x\": [{\"k\": 1}, {\"k\": 1, \"j\": 0, \"k\": 2}]}", "\"k\""},
        {"{\"o\": {\"\\u0001\": 1, \"\\u0001\": 2}}", "\"\\x01\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cJSON *root = (cJSON *)1;
        gpt2_error err;
        expect_fail(json_parse("t.json", bad[i].text, strlen(bad[i].text), GPT2_ERR_CONFIG, &root, &err),
                    GPT2_ERR_CONFIG, &err, "appears twice in one object");
        if (!strstr(err.msg, bad[i].key)) fail_msg("\"%s\" does not name %s", err.msg, bad[i].key);
        assert_null(root);
    }
    cJSON *ok = parse("{\"a\": {\"k\": 1}, \"b\": {\"k\": 2}, \"k\": [1, 1]}");
    cJSON_Delete(ok);
    /* through the loaders */
    char dir[] = "/tmp/gptscope-dup-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[256];
    snprintf(p, sizeof p, "%s/t.json", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("{\"name\": \"a\", \"user_prefix\": \"U\", \"name\": \"b\"}", f);
    fclose(f);
    gpt2_chat_template *t = NULL;
    gpt2_error err;
    expect_fail(gpt2_chat_template_load(p, &t, &err), GPT2_ERR_FORMAT, &err, "the key \"name\" appears twice");
    unlink(p);
    rmdir(dir);
}

static void test_int(void **state) {
    (void)state;
    cJSON *r = parse("{\"a\": 3, \"b\": 3.5, \"c\": \"3\", \"d\": -1, \"e\": 1e300, \"f\": 10}");
    gpt2_error err;
    json_src s = {"t.json", "x.", GPT2_ERR_CONFIG, &err};
    int v = 77;
    assert_int_equal(json_get_int(&s, r, "a", 0, 10, &v), GPT2_OK);
    assert_int_equal(v, 3);
    assert_int_equal(json_get_int(&s, r, "f", 0, 10, &v), GPT2_OK); /* hi is inside */
    assert_int_equal(v, 10);
    v = 77;
    expect_fail(json_get_int(&s, r, "b", 0, 10, &v), GPT2_ERR_CONFIG, &err,
                "t.json: x.b: expected an integer in [0, 10], found 3.5");
    expect_fail(json_get_int(&s, r, "c", 0, 10, &v), GPT2_ERR_CONFIG, &err, "x.c: expected an integer in [0, 10], found a string");
    expect_fail(json_get_int(&s, r, "d", 0, 10, &v), GPT2_ERR_CONFIG, &err, "found -1");
    expect_fail(json_get_int(&s, r, "e", 0, 10, &v), GPT2_ERR_CONFIG, &err, "found 1.0000000000000001e+300");
    expect_fail(json_get_int(&s, r, "f", 0, 9, &v), GPT2_ERR_CONFIG, &err, "found 10");
    expect_fail(json_get_int(&s, r, "zz", 0, 9, &v), GPT2_ERR_CONFIG, &err,
                "t.json: x.zz: missing (expected an integer in [0, 9])");
    assert_int_equal(v, 77); /* untouched by failures */
    cJSON_Delete(r);
}

static void test_float(void **state) {
    (void)state;
    cJSON *r = parse("{\"a\": 0.5, \"z\": 0, \"tiny\": 1e-300, \"big\": 2, \"s\": true}");
    gpt2_error err;
    json_src s = {"t.json", NULL, GPT2_ERR_FORMAT, &err};
    float f = -1.0f;
    assert_int_equal(json_get_float(&s, r, "a", 0, 1, 1, &f), GPT2_OK);
    assert_true(f == 0.5f);
    assert_int_equal(json_get_float(&s, r, "z", 0, 0, 1, &f), GPT2_OK); /* closed: 0 is in */
    assert_true(f == 0.0f);
    expect_fail(json_get_float(&s, r, "z", 0, 1, 1, &f), GPT2_ERR_FORMAT, &err, "t.json: z: expected a number in (0, 1], found 0");
    /* > 0 as a double, 0 as the float it becomes: refused when 0 is excluded */
    expect_fail(json_get_float(&s, r, "tiny", 0, 1, 1, &f), GPT2_ERR_FORMAT, &err, "found 1e-300");
    expect_fail(json_get_float(&s, r, "big", 0, 1, 1, &f), GPT2_ERR_FORMAT, &err, "found 2");
    expect_fail(json_get_float(&s, r, "s", 0, 1, 1, &f), GPT2_ERR_FORMAT, &err, "found a boolean");
    cJSON_Delete(r);
}

static void test_u64(void **state) {
    (void)state;
    cJSON *r = parse("{\"max\": \"18446744073709551615\", \"over\": \"18446744073709551616\", \"neg\": \"-1\","
                     " \"num\": 5, \"empty\": \"\", \"big\": \"9007199254740993\"}");
    gpt2_error err;
    json_src s = {"t.json", NULL, GPT2_ERR_FORMAT, &err};
    uint64_t v = 0;
    assert_int_equal(json_get_u64(&s, r, "max", &v), GPT2_OK);
    assert_true(v == UINT64_MAX);
    assert_int_equal(json_get_u64(&s, r, "big", &v), GPT2_OK); /* 2^53 + 1: no double holds it */
    assert_true(v == 9007199254740993ull);
    expect_fail(json_get_u64(&s, r, "over", &v), GPT2_ERR_FORMAT, &err, "found \"18446744073709551616\"");
    expect_fail(json_get_u64(&s, r, "neg", &v), GPT2_ERR_FORMAT, &err, "found \"-1\"");
    expect_fail(json_get_u64(&s, r, "empty", &v), GPT2_ERR_FORMAT, &err, "found \"\"");
    expect_fail(json_get_u64(&s, r, "num", &v), GPT2_ERR_FORMAT, &err, "found a number");
    cJSON_Delete(r);
}

static void test_types_and_keys(void **state) {
    (void)state;
    cJSON *r = parse("{\"s\": \"hi\", \"b\": false, \"o\": {}, \"a\": [1], \"n\": null}");
    gpt2_error err;
    json_src s = {"t.json", "p.", GPT2_ERR_FORMAT, &err};
    const char *str = NULL;
    int b = 7;
    const cJSON *j = NULL;
    assert_int_equal(json_get_str(&s, r, "s", &str), GPT2_OK);
    assert_string_equal(str, "hi");
    assert_int_equal(json_get_bool(&s, r, "b", &b), GPT2_OK);
    assert_int_equal(b, 0);
    assert_int_equal(json_get_object(&s, r, "o", &j), GPT2_OK);
    assert_int_equal(json_get_array(&s, r, "a", NULL, &j), GPT2_OK);
    expect_fail(json_get_str(&s, r, "b", &str), GPT2_ERR_FORMAT, &err, "p.b: expected a string, found a boolean");
    expect_fail(json_get_bool(&s, r, "s", &b), GPT2_ERR_FORMAT, &err, "p.s: expected true or false, found a string");
    expect_fail(json_get_object(&s, r, "a", &j), GPT2_ERR_FORMAT, &err, "p.a: expected an object, found an array");
    expect_fail(json_get_array(&s, r, "o", "an array of ids", &j), GPT2_ERR_FORMAT, &err,
                "p.o: expected an array of ids, found an object");
    expect_fail(json_get_str(&s, r, "n", &str), GPT2_ERR_FORMAT, &err, "p.n: expected a string, found null");
    assert_true(json_has(r, "s"));
    assert_false(json_has(r, "n")); /* null counts as absent */
    assert_false(json_has(r, "missing"));
    static const char *const keys[] = {"s", "b", "o", "a"};
    expect_fail(json_only_keys(&s, r, keys, 4), GPT2_ERR_FORMAT, &err, "t.json: p.n: unknown field");
    static const char *const all[] = {"s", "b", "o", "a", "n"};
    assert_int_equal(json_only_keys(&s, r, all, 5), GPT2_OK);
    cJSON_Delete(r);
}

static void test_parse(void **state) {
    (void)state;
    cJSON *r = NULL;
    gpt2_error err;
    expect_fail(json_parse("p.json", "{\"a\": 1} x", 10, GPT2_ERR_TOKENIZER, &r, &err), GPT2_ERR_TOKENIZER, &err,
                "p.json: not valid JSON (text after the value at byte 9)");
    assert_null(r);
    expect_fail(json_parse("p.json", "{\"a\": }", 7, GPT2_ERR_FORMAT, &r, &err), GPT2_ERR_FORMAT, &err,
                "parse error at byte 6");
    const char nul[] = "{\"a\": \"x\\u0000y\"}"; /* the escape starts at byte 8 */
    expect_fail(json_parse("p.json", nul, strlen(nul), GPT2_ERR_FORMAT, &r, &err), GPT2_ERR_FORMAT, &err,
                "NUL character (at byte 8)");
    assert_int_equal(json_parse("p.json", "[1] \n\t", 6, GPT2_ERR_FORMAT, &r, &err), GPT2_OK);
    assert_true(cJSON_IsArray(r));
    cJSON_Delete(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_int),   cmocka_unit_test(test_float), cmocka_unit_test(test_u64),
        cmocka_unit_test(test_types_and_keys), cmocka_unit_test(test_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
