/* fuzz_session.c — the input is a session file (what gpt2_session_save writes).
 *
 * Each input is loaded into a session on the tiny-f32 fixture model (n_ctx 64)
 * that already holds one exchange (its reply finished, or still in progress for
 * inputs of odd size); inputs whose size is a multiple of 5 have the load's
 * progress callback cancel it. gpt2_session_load must either
 *   - fail cleanly (fuzz_check_error) and leave the session as it was: same
 *     turns, tokens, template, parameters and RNG, the cache a prefix of the
 *     tokens (fuzz_session.h); or
 *   - give a session whose invariants hold (fuzz_session.h) and which can go on:
 *     a reply in progress steps to its end, otherwise a new message is sent
 *     (or refused cleanly as too long) and replied to. Before and after that
 *     the session is saved and its save loaded into a fresh session, which must
 *     hold the same state and save to the same bytes.
 */
#include "fuzz_session.h"

static gpt2_model *g_model;
static char *g_dir, g_in[300], g_out[2][300];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    g_model = fuzz_fixture_model("tiny-f32");
    g_dir = fuzz_tmpdir("session");
    snprintf(g_in, sizeof g_in, "%s/in.json", g_dir);
    for (int i = 0; i < 2; i++) snprintf(g_out[i], sizeof g_out[i], "%s/save%d.json", g_dir, i);
    return 0;
}

static gpt2_session *new_session(void) {
    gpt2_session_params p = gpt2_session_default_params();
    p.context.n_threads = 1;
    p.context.n_batch = 8; /* so that the progress callback is asked */
    p.sampler.seed = 7;
    p.max_new_tokens = 6;
    gpt2_session *s;
    gpt2_error err;
    if (gpt2_session_new(g_model, p, &s, &err) != GPT2_OK) FUZZ_DIE("session: %s", err.msg);
    return s;
}

static int cancel_at_once(void *ud, int done, int total) {
    (void)ud; (void)done; (void)total;
    return 1;
}


/* save(s), load it into a fresh session: the same state, saved to the same bytes. */
static void roundtrip(gpt2_session *s) {
    gpt2_error err;
    FUZZ_CHECK(gpt2_session_save(s, g_out[0], &err) == GPT2_OK, "save: %s", err.msg);
    gpt2_session *s2 = new_session();
    gpt2_status st = gpt2_session_load(s2, g_out[0], NULL, NULL, &err);
    FUZZ_CHECK(st == GPT2_OK, "the session's own save does not load: %s", err.msg);
    fz_check_session(s2, 1);
    fz_snap a = fz_snap_take(s), b = fz_snap_take(s2);
    FUZZ_CHECK(fz_snap_same(&a, &b), "the reloaded session differs from the one saved");
    fz_snap_free(&a);
    fz_snap_free(&b);
    FUZZ_CHECK(gpt2_session_save(s2, g_out[1], &err) == GPT2_OK, "save: %s", err.msg);
    fuzz_check_same_files(g_out[0], g_out[1], "save(load(save(s))) != save(s)");
    gpt2_session_free(s2);
}

static void go_on(gpt2_session *s) {
    gpt2_error err;
    if (gpt2_session_replying(s)) {
        roundtrip(s); /* mid-reply */
        fz_reply(s, 8, 0);
    } else {
        gpt2_status st = gpt2_session_send(s, "Hi there", 8, NULL, NULL, &err);
        if (st == GPT2_OK) {
            fz_check_session(s, 1);
            fz_reply(s, 8, 1);
        } else {
            fuzz_check_error(st, &err);
            FUZZ_CHECK(st == GPT2_ERR_CONTEXT_FULL, "send failed: %s", err.msg);
        }
    }
    roundtrip(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(g_dir, "in.json", data, size);
    gpt2_session *s = new_session();
    gpt2_error err;
    FUZZ_CHECK(gpt2_session_send(s, "Good morrow", 11, NULL, NULL, &err) == GPT2_OK, "send: %s", err.msg);
    gpt2_session_token t;
    for (int k = 0; k < 3 && gpt2_session_step(s, &t, &err) == GPT2_OK && !t.done; k++) continue;
    if (size % 2 == 0) gpt2_session_stop(s, NULL, &err);
    fz_snap before = fz_snap_take(s);
    gpt2_status st = gpt2_session_load(s, g_in, size % 5 == 0 ? cancel_at_once : NULL, NULL, &err);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "%s\n", st ? err.msg : "loaded");
    if (st != GPT2_OK) {
        fuzz_check_error(st, &err);
        fz_snap after = fz_snap_take(s);
        FUZZ_CHECK(fz_snap_same(&before, &after), "a failed load changed the session (%s)", err.msg);
        fz_snap_free(&after);
        fz_check_session(s, 0);
        if (gpt2_session_replying(s)) fz_reply(s, 2, 0); /* it still works */
    } else {
        fz_check_session(s, 1);
        go_on(s);
    }
    fz_snap_free(&before);
    gpt2_session_free(s);
    return 0;
}
