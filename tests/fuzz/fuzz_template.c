/* fuzz_template.c — the input is chat_template.json.
 *
 * gpt2_chat_template_load and gpt2_chat_template_for_model (the same file in a
 * model directory) must agree, and either fail cleanly with a message that
 * starts with the path, or give a template that passes gpt2_chat_template_check
 * and copies. A session on the tiny-f32 fixture model (n_ctx 64) must then take
 * it or refuse it cleanly (a preamble too long for the context), and send two
 * messages with it (or refuse one cleanly as too long), replying to each through
 * the stop strings (fuzz_session.h checks the rendering and the replies); its
 * save, template included, must load back into a fresh session unchanged. A
 * session holding a conversation under "transcript" must switch to the template
 * (set_template) or fail cleanly and unchanged.
 */
#include "fuzz_session.h"

static gpt2_model *g_model;
static char *g_dir, g_path[300], g_save[300];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    g_model = fuzz_fixture_model("tiny-f32");
    g_dir = fuzz_tmpdir("template");
    snprintf(g_path, sizeof g_path, "%s/chat_template.json", g_dir);
    snprintf(g_save, sizeof g_save, "%s/session.json", g_dir);
    return 0;
}

static gpt2_status new_session(const gpt2_chat_template *t, gpt2_session **s, gpt2_error *err) {
    gpt2_session_params p = gpt2_session_default_params();
    p.context.n_threads = 1;
    p.sampler.seed = 11;
    p.sampler.temperature = 1.5f; /* wander: more text for the stop strings to meet */
    p.sampler.top_k = 0;
    p.sampler.min_p = 0;
    p.max_new_tokens = 10;
    p.chat_template = t;
    return gpt2_session_new(g_model, p, s, err);
}

static int same_str(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

static int same_template(const gpt2_chat_template *a, const gpt2_chat_template *b) {
    if (!same_str(a->name, b->name) || !same_str(a->description, b->description) ||
        !same_str(a->preamble, b->preamble) || !same_str(a->user_prefix, b->user_prefix) ||
        !same_str(a->user_suffix, b->user_suffix) || !same_str(a->assistant_prefix, b->assistant_prefix) ||
        !same_str(a->assistant_suffix, b->assistant_suffix) || a->n_stop != b->n_stop ||
        !a->eot_after_turn != !b->eot_after_turn)
        return 0;
    for (int i = 0; i < a->n_stop; i++)
        if (strcmp(a->stop[i], b->stop[i]) != 0) return 0;
    return 1;
}

static void check_load_error(gpt2_status st, const gpt2_error *err) {
    fuzz_check_error(st, err);
    FUZZ_CHECK(st == GPT2_ERR_FORMAT, "status %d: %s", st, err->msg);
    FUZZ_CHECK(strncmp(err->msg, g_path, strlen(g_path)) == 0, "the message does not start with the path: %s",
               err->msg);
}

/* Two exchanges with the template, then its save loaded into a fresh session. */
static void converse(gpt2_session *s, const gpt2_chat_template *t) {
    static const char *const msgs[2] = {"Good morrow", "What light"};
    gpt2_error err;
    for (int m = 0; m < 2; m++) {
        gpt2_status st = gpt2_session_send(s, msgs[m], strlen(msgs[m]), NULL, NULL, &err);
        if (st != GPT2_OK) {
            fuzz_check_error(st, &err);
            FUZZ_CHECK(st == GPT2_ERR_CONTEXT_FULL, "send failed: %s", err.msg);
            break;
        }
        fz_check_session(s, 1);
        fz_reply(s, 12, 1);
    }
    FUZZ_CHECK(gpt2_session_save(s, g_save, &err) == GPT2_OK, "save: %s", err.msg);
    gpt2_session *s2;
    FUZZ_CHECK(new_session(NULL, &s2, &err) == GPT2_OK, "session: %s", err.msg);
    FUZZ_CHECK(gpt2_session_load(s2, g_save, NULL, NULL, &err) == GPT2_OK, "reload: %s", err.msg);
    FUZZ_CHECK(same_template(gpt2_session_template(s2), t), "the template did not survive the session file");
    fz_snap a = fz_snap_take(s), b = fz_snap_take(s2);
    FUZZ_CHECK(fz_snap_same(&a, &b), "the reloaded session differs from the one saved");
    fz_snap_free(&a);
    fz_snap_free(&b);
    gpt2_session_free(s2);
}

/* A conversation under "transcript" switches to t, or stays as it was. */
static void switch_to(const gpt2_chat_template *t) {
    gpt2_session *s;
    gpt2_error err;
    FUZZ_CHECK(new_session(NULL, &s, &err) == GPT2_OK, "session: %s", err.msg);
    FUZZ_CHECK(gpt2_session_send(s, "Hi", 2, NULL, NULL, &err) == GPT2_OK, "send: %s", err.msg);
    fz_reply(s, 4, 1);
    fz_snap before = fz_snap_take(s);
    gpt2_status st = gpt2_session_set_template(s, t, NULL, NULL, &err);
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        fz_snap after = fz_snap_take(s);
        FUZZ_CHECK(fz_snap_same(&before, &after), "a failed set_template changed the session (%s)", err.msg);
        fz_snap_free(&after);
        fz_check_session(s, 0);
    } else {
        FUZZ_CHECK(same_template(gpt2_session_template(s), t), "set_template kept another template");
        fz_check_session(s, 1);
    }
    fz_snap_free(&before);
    gpt2_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(g_dir, "chat_template.json", data, size);
    gpt2_chat_template *t = NULL, *t2 = NULL;
    gpt2_error err, err2;
    gpt2_status st = gpt2_chat_template_load(g_path, &t, &err);
    gpt2_status st2 = gpt2_chat_template_for_model(g_dir, &t2, &err2);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "%s\n", st ? err.msg : "loaded");
    FUZZ_CHECK(st == st2 && (st != GPT2_OK || same_template(t, t2)) && (st == GPT2_OK || !strcmp(err.msg, err2.msg)),
               "load and for_model disagree");
    gpt2_chat_template_free(t2);
    if (st != GPT2_OK) {
        check_load_error(st, &err);
        FUZZ_CHECK(t == NULL, "a failed load left a template");
        return 0;
    }
    FUZZ_CHECK(gpt2_chat_template_check(t, &err) == GPT2_OK, "a loaded template fails the check: %s", err.msg);
    gpt2_chat_template *c;
    FUZZ_CHECK(gpt2_chat_template_copy(t, &c, &err) == GPT2_OK && same_template(c, t), "copy");
    gpt2_chat_template_free(c);
    gpt2_session *s;
    st = new_session(t, &s, &err);
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(st == GPT2_ERR_CONTEXT_FULL, "the session refused the template: %s", err.msg);
    } else {
        FUZZ_CHECK(same_template(gpt2_session_template(s), t), "the session holds another template");
        fz_check_session(s, 0); /* nothing evaluated yet */
        converse(s, t);
        gpt2_session_free(s);
    }
    switch_to(t);
    gpt2_chat_template_free(t);
    return 0;
}
