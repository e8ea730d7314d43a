/* test_faults.c — the gptscope binary under faults while it runs: Ctrl-C in
 * the middle of long commands, endless input, a model file truncated while in
 * use, weights that are not finite. Each check waits for a positive sign that
 * the command is at work (its progress line on stderr) before it acts, and
 * bounds every wait only to catch a hang (no timings are asserted). */
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"

typedef struct {
    pid_t pid;
    int ended, ws; /* reaped, and its wait status */
    char err_path[64], out_path[64];
} child;

/* Whether the child has ended (reaped once; its status kept in c->ws). */
static int ended(child *c) {
    if (!c->ended && waitpid(c->pid, &c->ws, WNOHANG) == c->pid) c->ended = 1;
    return c->ended;
}

/* Starts `$GPTSCOPE_BIN argv...` with stdin from stdin_path (or /dev/null). */
static child spawn(const char *stdin_path, char *const argv[]) {
    child c = {0};
    snprintf(c.err_path, sizeof c.err_path, "/tmp/gptscope-fault-err-XXXXXX");
    snprintf(c.out_path, sizeof c.out_path, "/tmp/gptscope-fault-out-XXXXXX");
    int efd = mkstemp(c.err_path), ofd = mkstemp(c.out_path);
    assert_true(efd >= 0 && ofd >= 0);
    c.pid = fork();
    assert_true(c.pid >= 0);
    if (c.pid == 0) {
        int in = open(stdin_path ? stdin_path : "/dev/null", O_RDONLY);
        dup2(in, 0), dup2(ofd, 1), dup2(efd, 2);
        signal(SIGINT, SIG_DFL); /* as a terminal's foreground job has it */
        setenv("ASAN_OPTIONS", "exitcode=99", 1);
        setenv("UBSAN_OPTIONS", "exitcode=98", 1);
        execv(test_env("GPTSCOPE_BIN"), argv);
        _exit(127);
    }
    close(efd), close(ofd);
    return c;
}

static void sleep_ms(int ms) { nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL); }

/* Waits until the child's stderr contains `sign`; fails if the child exits first
 * or nothing shows within two minutes (a hang, or a far too slow machine). */
static void wait_for(child *c, const char *sign) {
    for (int i = 0; i < 6000; i++) {
        char *err = read_file(c->err_path, NULL);
        int seen = strstr(err, sign) != NULL;
        if (!seen && ended(c)) fail_msg("exited before \"%s\":\n%s", sign, err);
        free(err);
        if (seen) return;
        sleep_ms(20);
    }
    fail_msg("no \"%s\" on stderr in 120 s", sign);
}

/* Waits for the child to end (killing it after a minute: a hang) and returns
 * its exit status (128 + signal if a signal ended it), with its stderr. */
static int finish(child *c, char **err) {
    for (int i = 0; i < 3000 && !ended(c); i++) sleep_ms(20);
    if (!c->ended) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        fail_msg("did not stop within 60 s");
    }
    const int ws = c->ws;
    *err = read_file(c->err_path, NULL);
    unlink(c->err_path), unlink(c->out_path);
    if (strstr(*err, "Sanitizer") || strstr(*err, "runtime error")) fail_msg("sanitizer report:\n%s", *err);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

/* A text long enough that no command gets through it in this test's time. */
static const char *long_text(void) {
    static char path[] = "/tmp/gptscope-fault-text-XXXXXX";
    static int made;
    if (made) return path;
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 120000; i++) fprintf(f, "ROMEO: I dreamt a dream to-night, %d times.\nJULIET: And so did I.\n", i);
    fclose(f);
    made = 1;
    return path;
}

/* Ctrl-C in the middle of eval: exit 130 and a line saying how far it got. */
static void test_eval_interrupt(void **state) {
    (void)state;
    char *argv[] = {"gptscope", "eval", "-m", (char *)fixture_path("models/tiny-f32"), (char *)long_text(), NULL};
    child c = spawn(NULL, argv);
    wait_for(&c, "tokens scored");
    kill(c.pid, SIGINT);
    char *err;
    assert_int_equal(finish(&c, &err), 130);
    assert_non_null(strstr(err, "eval interrupted after scoring"));
    free(err);
}

/* Ctrl-C in the middle of training: the step in progress is dropped, a
 * checkpoint and the model are saved, exit 130. */
static void test_train_interrupt(void **state) {
    (void)state;
    char dir[] = "/tmp/gptscope-fault-train-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *argv[] = {"gptscope", "train", "--tokenizer", (char *)fixture_path("models/tiny-f32"), "-o", dir,
                    "--layers", "2", "--heads", "2", "--embd", "32", "--block", "32", "--batch", "4",
                    "--steps", "1000000", "--log-every", "1", (char *)long_text(), NULL};
    child c = spawn(NULL, argv);
    wait_for(&c, "step      2/");
    kill(c.pid, SIGINT);
    char *err;
    assert_int_equal(finish(&c, &err), 130);
    assert_non_null(strstr(err, "interrupted after step"));
    assert_non_null(strstr(err, "--resume goes on from step"));
    free(err);
    char path[128];
    struct stat st;
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    assert_int_equal(stat(path, &st), 0);
    unlink(path);
    const char *files[] = {"config.json", "model.safetensors", "vocab.json", "merges.txt", "training.json"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    assert_int_equal(rmdir(dir), 0);
}

/* A model file truncated while the model is in use (as `cp` over it does)
 * harms nothing: the loaded model no longer reads its file. Before, the
 * process died of SIGBUS reading the embedding from the map. */
static void test_model_truncated_in_use(void **state) {
    (void)state;
    char dir[] = "/tmp/gptscope-fault-model-XXXXXX", path[128];
    assert_non_null(mkdtemp(dir));
    copy_fixture_model("tiny-f32", dir, 0);
    char *argv[] = {"gptscope", "eval", "-m", dir, (char *)long_text(), NULL};
    child c = spawn(NULL, argv);
    wait_for(&c, "tokens scored");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(truncate(path, 0), 0);
    char *before = read_file(c.err_path, NULL);
    const size_t seen = strlen(before);
    free(before);
    for (int i = 0; i < 3000; i++) { /* one more progress line: it went on reading the embedding */
        char *now = read_file(c.err_path, NULL);
        int more = strlen(now) > seen;
        free(now);
        if (more || ended(&c)) break;
        sleep_ms(20);
    }
    kill(c.pid, SIGINT);
    char *err;
    assert_int_equal(finish(&c, &err), 130);
    free(err);
    remove_model_copy(dir);
}

/* Endless input is refused at a stated limit instead of filling memory. */
static void test_endless_input(void **state) {
    (void)state;
    const char *m = fixture_path("models/tiny-f32");
    struct {
        const char *stdin_path, *limit;
        char *argv[8];
    } cases[] = {
        {"/dev/zero", "256 MiB", {"gptscope", "tokenize", "-m", (char *)m, NULL}},
        {NULL, "256 MiB", {"gptscope", "eval", "-m", (char *)m, "/dev/zero", NULL}},
        {"/dev/zero", "1 MiB", {"gptscope", "generate", "-m", (char *)m, "-p", "-", NULL}},
    };
    for (int i = 0; i < 3; i++) {
        child c = spawn(cases[i].stdin_path, cases[i].argv);
        char *err;
        assert_int_equal(finish(&c, &err), 1);
        if (!strstr(err, cases[i].limit) || !strstr(err, "into memory"))
            fail_msg("%s: expected the %s limit, got: %s", cases[i].argv[1], cases[i].limit, err);
        free(err);
    }
}

/* Weights with a NaN: generate and eval fail, naming the model, instead of
 * printing token 0 forever or a loss of nan. */
static void test_nonfinite_model(void **state) {
    (void)state;
    const char *m = fixture_path("nonfinite/nan-matrix");
    run_result r = run(NULL, "generate -m %s -p %s -n 5", sq(m), sq("hello"));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "nan-matrix"));
    assert_non_null(strstr(r.err, "NaN or Inf"));
    assert_string_equal(r.out, "");
    run_free(&r);
    r = run(NULL, "eval -m %s %s", sq(m), sq(long_text()));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "NaN or Inf"));
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eval_interrupt),  cmocka_unit_test(test_train_interrupt),
        cmocka_unit_test(test_model_truncated_in_use), cmocka_unit_test(test_endless_input),
        cmocka_unit_test(test_nonfinite_model),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(long_text());
    return rc;
}
