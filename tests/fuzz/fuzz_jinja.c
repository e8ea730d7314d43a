/* fuzz_jinja.c — the input is a chat template's Jinja source (src/core/jinja.h).
 *
 * jinja_parse either fails cleanly (GPT2_ERR_FORMAT, or GPT2_ERR_NOMEM, a
 * one-line message starting with the template's name, no template) or gives
 * a template that renders over fixed variables — a conversation with every
 * role, tool calls, unicode and empty contents, tools, nested data — within
 * tightened bounds: a text of at most max_output bytes with a NUL after it,
 * or a clean GPT2_ERR_TEMPLATE / GPT2_ERR_NOMEM and no text. The same render
 * twice gives the same result (nothing in a template changes when rendered;
 * the clock is fixed), and jinja_render_chat behaves the same way.
 */
#include "fuzz_common.h"

#include <cjson/cJSON.h>

#include "core/jinja.h"

static cJSON *g_vars;
static struct tm g_now = {.tm_year = 124, .tm_mon = 6, .tm_mday = 26, .tm_hour = 12, .tm_min = 34, .tm_sec = 56,
                          .tm_wday = 5, .tm_yday = 207};

static const char g_vars_json[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"  Be brief.\\n\"},"
    "{\"role\": \"user\", \"content\": \"Hi {{ x }} \\u00e9\\u4e2d\\ud83d\\ude00\"},"
    "{\"role\": \"assistant\", \"content\": \"<think>\\nhm\\n</think>\\n\\nHello\", \"reasoning_content\": \"r\"},"
    "{\"role\": \"user\", \"content\": \"\"},"
    "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call12345\", \"type\": \"function\","
    " \"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": [true, null, 2.5]}}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"call12345\", \"content\": {\"ok\": 1}}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": [\"string\", \"integer\"]}}}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"documents\": null,"
    " \"n\": -7, \"f\": 0.1, \"big\": 9007199254740991, \"d\": {\"items\": 1, \"\": \"empty key\"}}";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    g_vars = cJSON_Parse(g_vars_json);
    if (!g_vars) FUZZ_DIE("the variables do not parse\n");
    return 0;
}

static jinja_opts opts(void) {
    jinja_opts o = jinja_default_opts();
    o.now = &g_now;
    o.max_output = 1 << 20;
    o.max_memory = 64 << 20;
    o.max_steps = 1000000;
    return o;
}

/* One render's result: OK with text, or a clean failure without. */
static void check_render(gpt2_status st, const char *out, size_t len, const gpt2_error *err, size_t max_output) {
    if (st == GPT2_OK) {
        FUZZ_CHECK(out != NULL, "no text");
        FUZZ_CHECK(len <= max_output, "%zu bytes of text, more than the bound %zu", len, max_output);
        FUZZ_CHECK(out[len] == '\0', "no NUL after the text");
        return;
    }
    fuzz_check_error(st, err);
    FUZZ_CHECK(st == GPT2_ERR_TEMPLATE || st == GPT2_ERR_NOMEM, "status %d: %s", st, err->msg);
    FUZZ_CHECK(out == NULL, "a failed render left text");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    jinja_template *t = (jinja_template *)1;
    gpt2_error err;
    gpt2_status st = jinja_parse("fuzz", (const char *)data, size, &t, &err);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "parse: %s\n", st ? err.msg : "ok");
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(st == GPT2_ERR_FORMAT || st == GPT2_ERR_NOMEM, "status %d: %s", st, err.msg);
        FUZZ_CHECK(strncmp(err.msg, "fuzz", 4) == 0, "the message does not name the template: %s", err.msg);
        FUZZ_CHECK(t == NULL, "a failed parse left a template");
        return 0;
    }
    jinja_opts o = opts();
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    gpt2_error ea, eb;
    gpt2_status sa = jinja_render(t, g_vars, &o, &a, &na, &ea);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "render: %s\n", sa ? ea.msg : "ok");
    check_render(sa, a, na, &ea, o.max_output);
    gpt2_status sb = jinja_render(t, g_vars, &o, &b, &nb, &eb);
    FUZZ_CHECK(sa == sb && na == nb && (sa != GPT2_OK || memcmp(a, b, na) == 0) &&
                   (sa == GPT2_OK || strcmp(ea.msg, eb.msg) == 0),
               "two renders differ");
    free(a);
    free(b);
    static const char *const roles[] = {"system", "user", "assistant", "user"};
    static const char *const contents[] = {"sys", " hello\n", "", "\xc3\xa9"};
    st = jinja_render_chat(t, roles, contents, 4, 1, "<s>", NULL, &o, &a, &na, &ea);
    check_render(st, a, na, &ea, o.max_output);
    free(a);
    jinja_free(t);
    return 0;
}
