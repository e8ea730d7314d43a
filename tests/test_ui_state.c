/* test_ui_state.c — the chat's state directory and kept conversations
 * (src/ui/state.c): the fallbacks when XDG_STATE_HOME or HOME is unusable, one
 * file per conversation that no second keeper ever takes, pruning to the newest
 * STATE_KEEP, and --continue's choice of the newest conversation of a model. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpt2.h"
#include "test_util.h"
#include "ui/state.h"

static char g_root[64];
static gpt2_model *g_model;

static void sh(const char *fmt, ...) {
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    assert_int_equal(system(cmd), 0);
}

/* A fresh directory under the root for each test, as XDG_STATE_HOME. */
static const char *fresh(const char *name) {
    static char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", g_root, name);
    sh("rm -rf '%s' && mkdir -p '%s'", dir, dir);
    setenv("XDG_STATE_HOME", dir, 1);
    return dir;
}

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A session with one exchange: "a b" and a reply of a few tokens. */
static gpt2_session *session_with_turns(void) {
    gpt2_error err;
    gpt2_session *s;
    gpt2_session_params p = gpt2_session_default_params();
    p.chat_template = gpt2_chat_template_builtin("raw");
    p.max_new_tokens = 2;
    assert_int_equal(gpt2_session_new(g_model, p, &s, &err), GPT2_OK);
    assert_int_equal(gpt2_session_send(s, "a b", 3, NULL, NULL, &err), GPT2_OK);
    gpt2_session_token t;
    do assert_int_equal(gpt2_session_step(s, &t, &err), GPT2_OK);
    while (!t.done);
    return s;
}

static void test_dir_fallbacks(void **state) {
    (void)state;
    char out[4096], note[1024], want[512];
    const char *x = fresh("xdg");
    assert_int_equal(state_dir(out, sizeof out, note, sizeof note), 0);
    snprintf(want, sizeof want, "%s/gptscope", x);
    assert_string_equal(out, want);
    assert_string_equal(note, "");
    /* XDG_STATE_HOME a file: HOME's, and the note names what failed */
    sh("rm -rf '%s/fx' '%s/home' && : > '%s/fx' && mkdir '%s/home'", g_root, g_root, g_root, g_root);
    snprintf(want, sizeof want, "%s/fx", g_root);
    setenv("XDG_STATE_HOME", want, 1);
    snprintf(want, sizeof want, "%s/home", g_root);
    setenv("HOME", want, 1);
    assert_int_equal(state_dir(out, sizeof out, note, sizeof note), 0);
    snprintf(want, sizeof want, "%s/home/.local/state/gptscope", g_root);
    assert_string_equal(out, want);
    assert_non_null(strstr(note, "/fx/gptscope"));
    assert_non_null(strstr(note, want));
    /* HOME unusable too: a private directory under TMPDIR */
    sh("rm -rf '%s/home' && : > '%s/home' && rm -rf '%s/tmp' && mkdir '%s/tmp'", g_root, g_root, g_root, g_root);
    snprintf(want, sizeof want, "%s/tmp", g_root);
    setenv("TMPDIR", want, 1);
    assert_int_equal(state_dir(out, sizeof out, note, sizeof note), 0);
    snprintf(want, sizeof want, "%s/tmp/gptscope-%u", g_root, (unsigned)getuid());
    assert_string_equal(out, want);
    struct stat st;
    assert_int_equal(stat(out, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_non_null(strstr(note, want));
    /* a directory there that is not private is not used */
    sh("chmod 755 '%s'", want);
    assert_int_not_equal(strcmp(state_dir(out, sizeof out, note, sizeof note) == 0 ? out : "", want), 0);
    unsetenv("TMPDIR");
    setenv("HOME", g_root, 1);
}

static void test_one_file_per_conversation(void **state) {
    (void)state;
    gpt2_error err;
    const char *x = fresh("keep");
    char chats[512];
    snprintf(chats, sizeof chats, "%s/gptscope/chats", x);
    gpt2_session *s = session_with_turns(), *empty;
    gpt2_session_params p = gpt2_session_default_params();
    p.chat_template = gpt2_chat_template_builtin("raw");
    assert_int_equal(gpt2_session_new(g_model, p, &empty, &err), GPT2_OK);
    state_keeper k, other;
    state_keeper_init(&k), state_keeper_init(&other);
    /* nothing to keep: no file */
    assert_int_equal(state_keep(&other, empty, &err), GPT2_OK);
    assert_string_equal(other.path, "");
    assert_int_equal(state_keep(&k, s, &err), GPT2_OK);
    char first[4096];
    snprintf(first, sizeof first, "%s", k.path);
    assert_int_equal(strncmp(first, chats, strlen(chats)), 0);
    /* the same conversation again: the same file, loadable */
    assert_int_equal(state_keep(&k, s, &err), GPT2_OK);
    assert_string_equal(k.path, first);
    assert_int_equal(gpt2_session_load(empty, first, NULL, NULL, &err), GPT2_OK);
    assert_int_equal(gpt2_session_n_turns(empty), 2);
    /* a second keeper of the same process and second never takes that file */
    assert_int_equal(state_keep(&other, s, &err), GPT2_OK);
    assert_string_not_equal(other.path, first);
    /* a new conversation: a new file */
    state_keep_next(&k);
    assert_int_equal(state_keep(&k, s, &err), GPT2_OK);
    assert_string_not_equal(k.path, first);
    assert_string_not_equal(k.path, other.path);
    assert_int_equal(count_files(chats), 3);
    struct stat st;
    assert_int_equal(stat(first, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    /* a directory where chats/ should be: a precise error, nothing claimed */
    fresh("keep-bad");
    sh("mkdir -p '%s/keep-bad/gptscope' && : > '%s/keep-bad/gptscope/chats'", g_root, g_root);
    state_keeper bad;
    state_keeper_init(&bad);
    assert_int_equal(state_keep(&bad, s, &err), GPT2_ERR_IO);
    assert_non_null(strstr(err.msg, "cannot keep the conversation"));
    assert_non_null(strstr(err.msg, "keep-bad/gptscope/chats"));
    assert_string_equal(bad.path, "");
    gpt2_session_free(s);
    gpt2_session_free(empty);
}

static void test_prune_keeps_newest(void **state) {
    (void)state;
    gpt2_error err;
    const char *x = fresh("prune");
    char chats[512];
    snprintf(chats, sizeof chats, "%s/gptscope/chats", x);
    sh("mkdir -p '%s'", chats);
    /* 150 older conversations, one minute apart; and a file of the user's that is not one */
    for (int i = 0; i < 150; i++)
        sh("touch -d '@%d' '%s/20200101-0000%02d-1-%d.json'", 1600000000 + 60 * i, chats, i % 60, i);
    sh("touch '%s/notes.txt'", chats);
    gpt2_session *s = session_with_turns();
    state_keeper k;
    state_keeper_init(&k);
    assert_int_equal(state_keep(&k, s, &err), GPT2_OK);
    assert_int_equal(count_files(chats), STATE_KEEP + 1); /* + notes.txt */
    char p[1024];
    snprintf(p, sizeof p, "%s/notes.txt", chats);
    assert_int_equal(access(p, F_OK), 0);
    for (int i = 0; i < 150; i++) { /* the oldest 51 went; the newest 99 and ours stay */
        snprintf(p, sizeof p, "%s/20200101-0000%02d-1-%d.json", chats, i % 60, i);
        assert_int_equal(access(p, F_OK) == 0, i >= 150 - (STATE_KEEP - 1));
    }
    assert_int_equal(access(k.path, F_OK), 0);
    gpt2_session_free(s);
}

static void test_latest_of_model(void **state) {
    (void)state;
    gpt2_error err;
    const char *x = fresh("latest");
    char out[4096], other[4096];
    assert_int_equal(state_latest_chat(gpt2_model_name(g_model), gpt2_model_config(g_model)->n_vocab, out, sizeof out,
                                       other, sizeof other), 0);
    gpt2_session *s = session_with_turns();
    state_keeper a, b;
    state_keeper_init(&a), state_keeper_init(&b);
    assert_int_equal(state_keep(&a, s, &err), GPT2_OK);
    assert_int_equal(state_keep(&b, s, &err), GPT2_OK);
    sh("touch -d '@1600000000' '%s'", a.path); /* a is older */
    const char *name = gpt2_model_name(g_model);
    int nv = gpt2_model_config(g_model)->n_vocab;
    assert_int_equal(state_latest_chat(name, nv, out, sizeof out, other, sizeof other), 1);
    assert_string_equal(out, b.path);
    assert_string_equal(other, "");
    /* a newer conversation of another model: named, not chosen */
    char p[1024];
    snprintf(p, sizeof p, "%s/gptscope/chats/29990101-000000-1-0.json", x);
    sh("sed 's/\"model\":[^,]*/\"model\": \"othermodel\"/' '%s' > '%s'", b.path, p);
    assert_int_equal(state_latest_chat(name, nv, out, sizeof out, other, sizeof other), 1);
    assert_string_equal(out, b.path);
    assert_string_equal(other, p);
    /* the same name with another vocabulary size is another model */
    assert_int_equal(state_latest_chat(name, nv + 1, out, sizeof out, other, sizeof other), 0);
    gpt2_session_free(s);
}

int main(void) {
    gpt2_error err;
    snprintf(g_root, sizeof g_root, "/tmp/gptscope-state-XXXXXX");
    if (!mkdtemp(g_root)) return 1;
    if (gpt2_model_load(fixture_path("models/tiny-f32"), &g_model, &err) != GPT2_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dir_fallbacks),
        cmocka_unit_test(test_one_file_per_conversation),
        cmocka_unit_test(test_prune_keeps_newest),
        cmocka_unit_test(test_latest_of_model),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    gpt2_model_free(g_model);
    sh("rm -rf '%s'", g_root);
    return rc;
}
