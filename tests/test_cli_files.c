/* test_cli_files.c — no command loses or replaces a user's file unasked:
 * output that cannot be written ends in status 1 and a message (a full
 * disk, a closed stdout); convert refuses a directory that holds files,
 * replaces only its own files with --force, and leaves nothing behind when
 * stopped; train refuses to start over a finished run and saves on a hangup.
 * $GPTSCOPE_BIN names the binary under test. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>

#include "cli_run.h"
#include "test_util.h"

static char *tmpdir_new(void) {
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/gptscope-files-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return dir;
}

/* A shell command whose output does not matter (freed). */
static void script(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    run_result r = run_script("%s", cmd);
    run_free(&r);
}

/* The repository (the tests run from its root); absolute, for commands run elsewhere. */
static const char *root(void) {
    static char cwd[2048];
    if (!cwd[0]) assert_non_null(getcwd(cwd, sizeof cwd));
    return cwd;
}

/* The binary, as an absolute path (some commands run in another directory). */
static const char *bin(void) {
    static char p[4096];
    const char *b = test_env("GPTSCOPE_BIN");
    snprintf(p, sizeof p, "%s%s%s", b[0] == '/' ? "" : root(), b[0] == '/' ? "" : "/", b);
    return p;
}

/* A text of at least `bytes` bytes at path: the README, repeated (three times at least). */
static void write_readme_text(const char *path, size_t bytes) {
    char text[2100];
    size_t len;
    snprintf(text, sizeof text, "%s/README.md", root());
    char *readme = read_file(text, &len);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t written = 0, n = 0; written < bytes || n < 3; written += len, n++) fwrite(readme, 1, len, f);
    fclose(f);
    free(readme);
}

static const char *model(const char *name) {
    static char p[4096];
    snprintf(p, sizeof p, "%s/models/%s", root(), name);
    return p;
}

static ino_t inode(const char *dir, const char *name) {
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &st) == 0 ? st.st_ino : 0;
}

/* Entries of dir whose name contains part. */
static int count_named(const char *dir, const char *part) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

/* Each command's output to /dev/full and to a closed stdout: status 1 and the reason. */
static void test_stdout_failures(void **state) {
    (void)state;
    const char *m = model("reverse");
    char cmds[6][4600];
    snprintf(cmds[0], sizeof cmds[0], "tokenize -m %s --text '12 7 99'", m);
    snprintf(cmds[1], sizeof cmds[1], "generate -m %s -p '12 7 99 3 45 0 8 61' -n 4 --temperature 0", m);
    snprintf(cmds[2], sizeof cmds[2], "topk -m %s -p '12 7 99' --json", m);
    snprintf(cmds[3], sizeof cmds[3], "heads -m %s -p '12 7 99 3'", m);
    snprintf(cmds[4], sizeof cmds[4], "lens -m %s -p '12 7 99 3'", m);
    snprintf(cmds[5], sizeof cmds[5], "--help");
    for (int i = 0; i < 6; i++) {
        run_result r = run_script("sh -c \"'%s' %s >/dev/full\"", bin(), cmds[i]);
        if (r.status != 1 || !strstr(r.err, "cannot write the output (stdout): No space left on device"))
            fail_msg("gptscope %s >/dev/full: status %d, stderr: %s", cmds[i], r.status, r.err);
        run_free(&r);
        r = run_script("sh -c \"'%s' %s >&-\"", bin(), cmds[i]);
        if (r.status != 1 || !strstr(r.err, "cannot write the output (stdout): Bad file descriptor"))
            fail_msg("gptscope %s >&-: status %d, stderr: %s", cmds[i], r.status, r.err);
        run_free(&r);
        r = run_script("sh -c \"'%s' %s >/dev/null\"", bin(), cmds[i]); /* and written: status 0 */
        if (r.status != 0) fail_msg("gptscope %s >/dev/null: status %d, stderr: %s", cmds[i], r.status, r.err);
        run_free(&r);
    }
    /* a command that writes nothing to stdout is fine with it closed */
    run_result r = run_script("sh -c \"'%s' eval -m %s /dev/null >&-\"", bin(), m);
    assert_false(strstr(r.err, "cannot write the output"));
    run_free(&r);
}

static void test_convert_refuses(void **state) {
    (void)state;
    const char *dir = tmpdir_new();
    char out[256];
    snprintf(out, sizeof out, "%s/out", dir);
    run_result r = run(NULL, "convert %s %s", model("reverse"), out);
    assert_int_equal(r.status, 0);
    run_free(&r);
    ino_t st_ino = inode(out, "model.safetensors"), cfg_ino = inode(out, "config.json");
    /* again: refused, nothing touched */
    r = run(NULL, "convert %s %s --dtype f16", model("reverse"), out);
    assert_int_equal(r.status, 1);
    if (!strstr(r.err, "already holds files") || !strstr(r.err, "--force replaces config.json, model.safetensors"))
        fail_msg("stderr: %s", r.err);
    run_free(&r);
    assert_true(inode(out, "model.safetensors") == st_ino && inode(out, "config.json") == cfg_ino);
    /* --force: the four files replaced, the user's own kept */
    script("sh -c 'echo mine > %s/README.md'", out);
    r = run(NULL, "convert %s %s --dtype f16 --force", model("reverse"), out);
    assert_int_equal(r.status, 0);
    run_free(&r);
    assert_true(inode(out, "model.safetensors") != st_ino && inode(out, "README.md") != 0);
    r = run(NULL, "topk -m %s -p '12 7' --json", out);
    assert_int_equal(r.status, 0);
    run_free(&r);
    /* one of its names a directory there: refused before any file moves */
    st_ino = inode(out, "model.safetensors");
    script("rm %s/config.json && mkdir %s/config.json", out, out);
    r = run(NULL, "convert %s %s --force", model("reverse"), out);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "config.json is not a regular file: not replaced, nothing moved"));
    run_free(&r);
    assert_true(inode(out, "model.safetensors") == st_ino);
    assert_int_equal(count_named(dir, ".partial-"), 0);
    /* an empty directory is taken; a file is not a directory */
    script("mkdir %s/empty && sh -c ': > %s/file'", dir, dir);
    r = run(NULL, "convert %s %s/empty", model("reverse"), dir);
    assert_int_equal(r.status, 0);
    run_free(&r);
    r = run(NULL, "convert %s %s/file", model("reverse"), dir);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "file exists and is not a directory"));
    run_free(&r);
    script("rm -rf %s", dir);
}

/* convert keeps the logits by default: an F16 GGUF whose norms and biases are
 * F32 (llama.cpp's layout, values F16 cannot hold) keeps those in F32, so the
 * converted model's next-token distribution is the GGUF's, digit for digit;
 * --dtype f16 asks for rounding and gets it. */
static void test_convert_keeps_logits(void **state) {
    (void)state;
    const char *dir = tmpdir_new();
    const char *gguf = fixture_path("gguf/tiny-f32.f16.gguf");
    run_result r = run(NULL, "convert %s %s/out", gguf, dir);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "(f16, every value as loaded)"));
    run_free(&r);
    run_result a = run(NULL, "topk -m %s -p 'the cat sat' -k 20 --json", gguf);
    run_result b = run(NULL, "topk -m %s/out -p 'the cat sat' -k 20 --json", dir);
    assert_int_equal(a.status, 0);
    assert_string_equal(a.out, b.out);
    run_free(&b);
    r = run(NULL, "convert %s %s/f16 --dtype f16", gguf, dir);
    assert_int_equal(r.status, 0);
    run_free(&r);
    b = run(NULL, "topk -m %s/f16 -p 'the cat sat' -k 20 --json", dir);
    assert_string_not_equal(a.out, b.out); /* the norms rounded: the logits move */
    run_free(&a), run_free(&b);
    script("rm -rf %s", dir);
}

/* Stopped at any moment (SIGTERM, SIGINT, SIGHUP), convert leaves the whole
 * directory or nothing: never a partial directory or a temporary file. */
static void test_convert_interrupted(void **state) {
    (void)state;
    const char *dir = tmpdir_new();
    static const char *sigs[3] = {"TERM", "INT", "HUP"};
    int stopped = 0;
    for (int i = 0; i < 12; i++) {
        run_result r = run_script("cd %s && rm -rf out && { '%s' convert %s out --dtype f32 >/dev/null 2>err & p=$!; "
                                  "sleep 0.0%d; kill -%s $p; wait $p; echo $?; }",
                                  dir, bin(), model("shakespeare"), 1 + i, sigs[i % 3]);
        int rc = atoi(r.out);
        run_free(&r);
        int files = 0;
        char p[300];
        snprintf(p, sizeof p, "%s/out", dir);
        struct stat st;
        if (stat(p, &st) == 0) files = count_named(p, ".json") + count_named(p, ".safetensors") + count_named(p, ".txt");
        if (count_named(dir, ".partial-") != 0) fail_msg("a partial directory left after a %s at 0.0%ds", sigs[i % 3], 1 + i);
        static const int sig_rc[3] = {128 + 15, 128 + 2, 128 + 1};
        if (rc != 0 && rc != sig_rc[i % 3]) fail_msg("convert after SIG%s: status %d", sigs[i % 3], rc);
        if (rc == 0) assert_int_equal(files, 4);
        else stopped++, assert_int_equal(files, 0);
    }
    assert_true(stopped > 0);
    script("rm -rf %s", dir);
}

static void test_train_refuses_and_hangup(void **state) {
    (void)state;
    const char *dir = tmpdir_new();
    char data[256], out[256];
    snprintf(data, sizeof data, "%s/data.txt", dir);
    snprintf(out, sizeof out, "%s/m", dir);
    write_readme_text(data, 1);
    const char *shape = "--layers 1 --heads 2 --embd 16 --block 16 --batch 4 --threads 1";
    run_result r = run(NULL, "train-tokenizer --vocab-size 300 -o %s %s", out, data);
    if (r.status != 0) fail_msg("train-tokenizer: %s", r.err);
    run_free(&r);
    r = run(NULL, "train --tokenizer %s -o %s %s --steps 4 %s", out, out, shape, data);
    assert_int_equal(r.status, 0);
    run_free(&r);
    ino_t m_ino = inode(out, "model.safetensors"), c_ino = inode(out, "checkpoint.bin");
    /* the same command again: the finished run is not replaced */
    r = run(NULL, "train --tokenizer %s -o %s %s --steps 4 %s", out, out, shape, data);
    assert_int_equal(r.status, 1);
    if (!strstr(r.err, "config.json exists: --resume continues that run, --force starts over"))
        fail_msg("stderr: %s", r.err);
    run_free(&r);
    assert_true(inode(out, "model.safetensors") == m_ino && inode(out, "checkpoint.bin") == c_ino);
    /* a checkpoint elsewhere that exists: refused too */
    r = run(NULL, "train --tokenizer %s -o %s/m2 --checkpoint %s/checkpoint.bin %s --steps 4 %s", out, dir, out, shape,
            data);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "checkpoint.bin exists"));
    run_free(&r);
    /* a hangup mid-run saves as Ctrl-C does (a run long enough to be in its steps) */
    r = run_script("cd %s && { '%s' train --force --tokenizer %s -o %s %s --steps 1000000 --log-every 1 %s 2>err & "
                   "p=$!; i=0; while ! grep -q '^step' err && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; "
                   "kill -HUP $p; wait $p; echo $?; cat err; }",
                   dir, bin(), out, out, shape, data);
    if (atoi(r.out) != 130 || !strstr(r.out, "interrupted after step") || !strstr(r.out, "--resume goes on from step"))
        fail_msg("train after SIGHUP:\n%s", r.out);
    run_free(&r);
    script("rm -rf %s", dir);
}

/* Messages keep what went wrong when a path is long (its middle gives way),
 * and a config.json with a key twice is refused naming the key. */
static void test_messages(void **state) {
    (void)state;
    const char *dir = tmpdir_new();
    char deep[2048];
    int n = snprintf(deep, sizeof deep, "%s", dir);
    for (int i = 0; i < 6; i++) n += snprintf(deep + n, sizeof deep - (size_t)n, "/%0150d", i);
    run_result r = run_script("mkdir -p %s", deep);
    run_free(&r);
    r = run(NULL, "topk -m %s -p hi", deep);
    assert_int_equal(r.status, 1);
    if (!strstr(r.err, "model.safetensors: cannot open: No such file or directory") || !strstr(r.err, dir) ||
        !strstr(r.err, "\xe2\x80\xa6"))
        fail_msg("the message lost its reason or its start: %s", r.err);
    run_free(&r);
    r = run_script("cp -r %s %s/m", model("reverse"), dir);
    assert_int_equal(r.status, 0);
    run_free(&r);
    char cfg[256];
    snprintf(cfg, sizeof cfg, "%s/m/config.json", dir);
    char *text = read_file(cfg, NULL), *at = strstr(text, "\"n_layer\":");
    assert_non_null(at);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fprintf(f, "%.*s\"n_layer\": 9, %s", (int)(at - text), text, at); /* the key twice, the first 9 */
    fclose(f);
    free(text);
    r = run(NULL, "topk -m %s/m -p hi", dir);
    assert_int_equal(r.status, 1);
    if (!strstr(r.err, "config.json: the key \"n_layer\" appears twice in one object")) fail_msg("stderr: %s", r.err);
    run_free(&r);
    script("rm -rf %s", dir);
}

/* A FIFO where eval expects its text: one with no writer is refused at once
 * (the open blocked for ever, Ctrl-C unseen); a pipe with a writer is read. */
static void test_eval_fifo(void **state) {
    (void)state;
    const char *dir = tmpdir_new();
    run_result r = run_script("true && { mkfifo %s/f && timeout -s KILL 20 '%s' eval -m %s %s/f; echo $?; }", dir, bin(),
                              model("shakespeare"), dir);
    if (atoi(r.out) != 1 || !strstr(r.err, "/f: a FIFO that no program writes to (nothing to read)"))
        fail_msg("eval on a FIFO: status %s, stderr: %s", r.out, r.err);
    run_free(&r);
    r = run_script("true && { echo 'ROMEO: good morrow' | '%s' eval -m %s /dev/stdin; }", bin(), model("shakespeare"));
    if (r.status != 0 || !strstr(r.out, "/dev/stdin: ")) fail_msg("eval on a pipe: %d, %s%s", r.status, r.out, r.err);
    run_free(&r);
    script("rm -rf %s", dir);
}

/* Short of memory (address space limits from 60 to 400 MB: the model, the KV
 * cache or OpenBLAS's buffers fail in turn), every run ends by itself with
 * status 0, or 1 and one line; it never hangs (it did, for ever). A
 * sanitizer build cannot start under such limits: skipped there. */
static void test_memory_limits(void **state) {
    (void)state;
    /* its report, if any, kept out of the captured stderr (which would count as a sanitizer failure) */
    run_result r = run_script("sh -c \"ulimit -v 400000; '%s' --version 2>/dev/null\"", bin());
    int usable = r.status == 0;
    run_free(&r);
    if (!usable) {
        print_message("the binary does not start under ulimit -v (a sanitizer build): skipped\n");
        skip();
    }
    /* at 60 MB OpenBLAS cannot start its threads in its constructor, says so in its own lines and raises SIGINT */
    static const int limits[] = {60000, 80000, 100000, 120000, 150000, 200000, 300000};
    for (int i = 0; i < 7; i++) {
        r = run_script("sh -c \"ulimit -v %d; exec timeout -s KILL 30 '%s' generate -m %s -n 5 -p ROMEO: >/dev/null\"",
                       limits[i], bin(), model("shakespeare"));
        int lines = 0;
        for (const char *c = r.err; *c; c = strchr(c, '\n') ? strchr(c, '\n') + 1 : c + strlen(c))
            lines += strncmp(c, "OpenBLAS ", 9) != 0; /* OpenBLAS's own lines not counted */
        print_message("ulimit -v %d: status %d, %s", limits[i], r.status, r.status ? r.err : "ok\n");
        if (r.status == 137) fail_msg("ulimit -v %d: killed after 30 s: it hung", limits[i]);
        if (!(r.status == 0 || (r.status == 1 && lines == 1)))
            fail_msg("ulimit -v %d: status %d, stderr: %s", limits[i], r.status, r.err);
        run_free(&r);
    }
}

/* Ctrl-C (here SIGTERM, handled alike) while eval reads a 50 MB text stops it there (it used to encode the
 * whole text first: 1.5 s, 15 s under load). The message says where it
 * stopped; a signal that came before the handler was there is tried again later. */
static void test_eval_interrupt(void **state) {
    (void)state;
    const char *dir = tmpdir_new();
    char big[256];
    snprintf(big, sizeof big, "%s/big.txt", dir);
    write_readme_text(big, 50u << 20);
    int seen = 0;
    for (int ms = 300; ms <= 9600 && !seen; ms *= 2) { /* a sanitizer build takes seconds to get there */
        /* SIGTERM, which eval takes as Ctrl-C: a background job of a script ignores SIGINT
           until eval's handler is in (and would then score all 50 MB); timeout as a guard */
        run_result r = run_script("true && { timeout -s KILL 300 '%s' eval -m %s %s >/dev/null & p=$!; sleep %d.%03d; "
                                  "kill -TERM $p; wait $p; echo $?; }",
                                  bin(), model("shakespeare"), big, ms / 1000, ms % 1000);
        if (strstr(r.err, "interrupted")) {
            seen = 1;
            if (atoi(r.out) != 130 || !strstr(r.err, "eval interrupted while reading"))
                fail_msg("eval after Ctrl-C: status %s, stderr: %s", r.out, r.err);
        }
        run_free(&r);
    }
    assert_true(seen);
    script("rm -rf %s", dir);
}

/* What varies with the CPU, as the README says: OpenBLAS picks its kernels
 * by CPU (OPENBLAS_CORETYPE forces one), and prefill's attention products
 * run on it, so a long prompt's logits move in their last bits (here within
 * 1e-5 of the default's) while the ranking and greedy decoding stay the same. */
static void test_openblas_kernels(void **state) {
    (void)state;
    static const char *const cores[] = {"Prescott", "Sandybridge", "Haswell"};
    char prompt[1200];
    size_t len;
    char path[2100];
    snprintf(path, sizeof path, "%s/README.md", root());
    char *readme = read_file(path, &len);
    size_t o = 0;
    for (size_t i = 0; i < len && o < 1000; i++) /* a long prompt of plain words, no quotes for the shell */
        if ((readme[i] >= 'a' && readme[i] <= 'z') || readme[i] == ' ') prompt[o++] = readme[i];
    prompt[o] = '\0';
    free(readme);
    for (int c = 0; c < 3; c++) {
        run_result t = run(NULL, "topk -m %s -p '%s' -k 5 --json", model("shakespeare"), prompt);
        run_result g = run(NULL, "generate -m %s -p '%s' -n 16 --temperature 0 --ids", model("shakespeare"), prompt);
        char env[64];
        snprintf(env, sizeof env, "OPENBLAS_CORETYPE=%s", cores[c]);
        run_result tf = run_script("%s '%s' topk -m %s -p '%s' -k 5 --json", env, bin(), model("shakespeare"), prompt);
        run_result gf = run_script("%s '%s' generate -m %s -p '%s' -n 16 --temperature 0 --ids", env, bin(),
                                   model("shakespeare"), prompt);
        assert_int_equal(t.status | g.status | tf.status | gf.status, 0);
        assert_string_equal(g.out, gf.out); /* greedy decoding: the same tokens */
        cJSON *a = cJSON_Parse(t.out), *b = cJSON_Parse(tf.out);
        assert_true(cJSON_IsArray(a) && cJSON_IsArray(b));
        assert_int_equal(cJSON_GetArraySize(a), cJSON_GetArraySize(b));
        for (int i = 0; i < cJSON_GetArraySize(a); i++) {
            const cJSON *x = cJSON_GetArrayItem(a, i), *y = cJSON_GetArrayItem(b, i);
            assert_int_equal(cJSON_GetObjectItem(x, "id")->valueint, cJSON_GetObjectItem(y, "id")->valueint);
            double dp = fabs(cJSON_GetObjectItem(x, "prob")->valuedouble - cJSON_GetObjectItem(y, "prob")->valuedouble);
            double dl = fabs(cJSON_GetObjectItem(x, "logit")->valuedouble - cJSON_GetObjectItem(y, "logit")->valuedouble);
            if (dp > 1e-5 || dl > 1e-4) fail_msg("%s: candidate %d moved by %g (prob), %g (logit)", cores[c], i, dp, dl);
        }
        cJSON_Delete(a), cJSON_Delete(b);
        run_free(&t), run_free(&g), run_free(&tf), run_free(&gf);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stdout_failures),
        cmocka_unit_test(test_convert_refuses),
        cmocka_unit_test(test_convert_interrupted),
        cmocka_unit_test(test_convert_keeps_logits),
        cmocka_unit_test(test_train_refuses_and_hangup),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_eval_fifo),
        cmocka_unit_test(test_memory_limits),
        cmocka_unit_test(test_eval_interrupt),
        cmocka_unit_test(test_openblas_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
