/* test_fileio.c — every file writer of the library (session save, checkpoint,
 * model export, BPE tokenizer files) against the rules of gpt2_fileio.h,
 * judged by what is on disk afterwards (lstat, readlink, the bytes):
 * symbolic links written through, non-regular files refused and left as they
 * were, modes kept or taken from the umask, temporary files of killed writers
 * removed and those of live ones kept, no fixed temporary names, concurrent
 * writers, a missing directory named, a failed write leaving the old file. */
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "gpt2.h"
#include "test_util.h"

static gpt2_model *g_model;
static gpt2_session *g_session;
static gpt2_trainer *g_trainer;
static gpt2_bpe_vocab *g_vocab;

/* A writer: writes `file` inside dir (and perhaps other files beside it). */
typedef struct {
    const char *label, *file;
    gpt2_status (*write)(const char *dir, gpt2_error *err);
} writer;

/* A broken rule: printed, counted, and the test fails at its end (so one
 * run shows every writer that breaks it). */
static int g_problems;
#define PROBLEM(...) (print_error(__VA_ARGS__), print_error("\n"), g_problems++)
#define END_PROBLEMS() \
    do { \
        int n_ = g_problems; \
        g_problems = 0; \
        if (n_) fail_msg("%d problem(s), listed above", n_); \
    } while (0)

static void join(char *out, size_t cap, const char *dir, const char *name) {
    int n = snprintf(out, cap, "%s/%s", dir, name);
    assert_true(n > 0 && (size_t)n < cap);
}

static gpt2_status w_session(const char *dir, gpt2_error *err) {
    char p[512];
    join(p, sizeof p, dir, "chat.json");
    return gpt2_session_save(g_session, p, err);
}
static gpt2_status w_checkpoint(const char *dir, gpt2_error *err) {
    char p[512];
    join(p, sizeof p, dir, "checkpoint.bin");
    return gpt2_trainer_save(g_trainer, p, 77, err);
}
static gpt2_status w_export(const char *dir, gpt2_error *err) {
    return gpt2_trainer_export(g_trainer, dir, GPT2_DTYPE_F32, -1, err);
}
static gpt2_status w_bpe(const char *dir, gpt2_error *err) { return gpt2_bpe_vocab_save(g_vocab, dir, err); }

/* The file each writes last is the one under test, so a refusal comes
 * after its other files are written (export: config.json; bpe: vocab.json). */
static const writer WRITERS[] = {
    {"session save", "chat.json", w_session},
    {"checkpoint", "checkpoint.bin", w_checkpoint},
    {"export", "config.json", w_export},
    {"export", "model.safetensors", w_export},
    {"bpe tokenizer", "vocab.json", w_bpe},
    {"bpe tokenizer", "merges.txt", w_bpe},
};
enum { N_WRITERS = sizeof WRITERS / sizeof *WRITERS };

static char *mkdir_tmp(void) {
    static char dirs[8][64];
    static int slot;
    char *d = dirs[slot++ & 7];
    snprintf(d, 64, "/tmp/gptscope-fileio-XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void rm_rf(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void put(const char *path, const char *text, mode_t mode) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

/* The names in dir that start with '.', the temporary files' prefix. */
static int count_hidden(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void must_write(const writer *w, const char *dir) {
    gpt2_error err;
    if (w->write(dir, &err) != GPT2_OK) fail_msg("%s into %s: %s", w->label, dir, err.msg);
}

/* The permission bits of p, or -1 when it is not a regular file. */
static int reg_mode(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) ? (int)(sb.st_mode & 07777) : -1;
}

/* A new file gets 0666 less the umask; a rewritten one keeps its mode. */
static void test_modes(void **state) {
    (void)state;
    for (int i = 0; i < N_WRITERS; i++) {
        const writer *w = &WRITERS[i];
        const mode_t masks[2] = {022, 077}, want[2] = {0644, 0600};
        char p[512];
        for (int k = 0; k < 2; k++) {
            char *dir = mkdir_tmp();
            mode_t old = umask(masks[k]);
            must_write(w, dir);
            umask(old);
            join(p, sizeof p, dir, w->file);
            int m = reg_mode(p);
            if (m != (int)want[k])
                PROBLEM("%s: new %s under umask %03o has mode %04o, expected %04o", w->label, w->file, masks[k], m,
                        want[k]);
            rm_rf(dir);
        }
        char *dir = mkdir_tmp();
        join(p, sizeof p, dir, w->file);
        put(p, "old", 0640);
        must_write(w, dir);
        if (reg_mode(p) != 0640) PROBLEM("%s: rewritten %s (was 0640) has mode %04o", w->label, w->file, reg_mode(p));
        struct stat sb;
        assert_int_equal(stat(p, &sb), 0);
        assert_true(sb.st_size > 3);
        assert_int_equal(count_hidden(dir), 0);
        rm_rf(dir);
    }
    END_PROBLEMS();
}

/* Whether p is still a symbolic link reading "real/target". */
static int is_link_to_target(const char *p) {
    char got[64];
    ssize_t n = readlink(p, got, sizeof got - 1);
    return n == 11 && memcmp(got, "real/target", 11) == 0;
}

/* A symlink is written through: the link stays, its target gets the data
 * and keeps its mode; a dangling link makes its target. */
static void test_symlinks(void **state) {
    (void)state;
    for (int i = 0; i < N_WRITERS; i++) {
        const writer *w = &WRITERS[i];
        char *dir = mkdir_tmp(), p[512], real[512], real_dir[512];
        join(real_dir, sizeof real_dir, dir, "real");
        assert_int_equal(mkdir(real_dir, 0755), 0);
        join(real, sizeof real, real_dir, "target");
        put(real, "old", 0640);
        join(p, sizeof p, dir, w->file);
        assert_int_equal(symlink("real/target", p), 0);
        must_write(w, dir);
        struct stat sb;
        if (!is_link_to_target(p)) PROBLEM("%s: the symlink %s was replaced", w->label, w->file);
        else if (reg_mode(real) != 0640 || stat(real, &sb) != 0 || sb.st_size <= 3)
            PROBLEM("%s: the link's target was not rewritten in place (mode %04o)", w->label, reg_mode(real));
        assert_int_equal(count_hidden(real_dir), 0);

        /* dangling: the target is created */
        rm_rf(dir);
        dir = mkdir_tmp();
        join(real_dir, sizeof real_dir, dir, "real");
        assert_int_equal(mkdir(real_dir, 0755), 0);
        join(real, sizeof real, real_dir, "target");
        join(p, sizeof p, dir, w->file);
        assert_int_equal(symlink("real/target", p), 0);
        must_write(w, dir);
        if (!is_link_to_target(p) || reg_mode(real) < 0)
            PROBLEM("%s: a dangling symlink %s was replaced instead of its target created", w->label, w->file);
        rm_rf(dir);
    }
    END_PROBLEMS();
}

/* Makes a node of kind k at p: 0 FIFO, 1 directory, 2 socket, 3 character
 * device (root only; returns 0 when it cannot). */
static int make_node(int k, const char *p) {
    if (k == 0) return mkfifo(p, 0644) == 0;
    if (k == 1) return mkdir(p, 0755) == 0;
    if (k == 2) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        if (snprintf(a.sun_path, sizeof a.sun_path, "%s", p) >= (int)sizeof a.sun_path) return 0;
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        int ok = s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0;
        if (s >= 0) close(s);
        return ok;
    }
    return geteuid() == 0 && mknod(p, S_IFCHR | 0666, makedev(1, 3)) == 0; /* a /dev/null of our own */
}

/* A FIFO, directory, socket or device in the file's place is refused with
 * a message naming the path and what is there, and stays what it was. */
static void test_non_regular_refused(void **state) {
    (void)state;
    static const char *kinds[4] = {"a FIFO", "a directory", "a socket", "a character device"};
    static const mode_t fmt[4] = {S_IFIFO, S_IFDIR, S_IFSOCK, S_IFCHR};
    for (int i = 0; i < N_WRITERS; i++) {
        const writer *w = &WRITERS[i];
        for (int k = 0; k < 4; k++) {
            char *dir = mkdir_tmp(), p[512];
            join(p, sizeof p, dir, w->file);
            if (!make_node(k, p)) {
                assert_int_equal(k, 3); /* only the device needs root */
                rm_rf(dir);
                continue;
            }
            gpt2_error err;
            struct stat sb;
            if (w->write(dir, &err) == GPT2_OK) PROBLEM("%s replaced %s at %s", w->label, kinds[k], p);
            else if (err.status != GPT2_ERR_IO || !strstr(err.msg, p) || !strstr(err.msg, kinds[k]))
                PROBLEM("%s, %s in place: message '%s' should name %s and what it is", w->label, kinds[k], err.msg,
                        p);
            if (lstat(p, &sb) != 0 || (sb.st_mode & S_IFMT) != fmt[k])
                PROBLEM("%s: %s at %s is gone or changed", w->label, kinds[k], p);
            assert_int_equal(count_hidden(dir), 0);
            rm_rf(dir);
        }
    }
    END_PROBLEMS();
}

static pid_t dead_pid(void) {
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) _exit(0);
    assert_int_equal(waitpid(c, NULL, 0), c);
    return c;
}

static int exists(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0;
}

/* Temporary files of the same target left by a dead writer go; a live
 * writer's (our parent's pid), other targets' and look-alikes stay. */
static void test_stale_temps(void **state) {
    (void)state;
    const pid_t dead = dead_pid(), live = getppid();
    for (int i = 0; i < N_WRITERS; i++) {
        const writer *w = &WRITERS[i];
        char *dir = mkdir_tmp(), stale[512], alive[512], other[512], odd[512], name[256];
        snprintf(name, sizeof name, ".%s.tmp-%d-aB3xYz", w->file, (int)dead);
        join(stale, sizeof stale, dir, name);
        snprintf(name, sizeof name, ".%s.tmp-%d-Qw9eRt", w->file, (int)live);
        join(alive, sizeof alive, dir, name);
        snprintf(name, sizeof name, ".other.txt.tmp-%d-aB3xYz", (int)dead);
        join(other, sizeof other, dir, name);
        snprintf(name, sizeof name, ".%s.tmp-%d-toolong", w->file, (int)dead);
        join(odd, sizeof odd, dir, name);
        const char *all[4] = {stale, alive, other, odd};
        for (int k = 0; k < 4; k++) put(all[k], "partial", 0600);
        must_write(w, dir);
        if (exists(stale)) PROBLEM("%s: the dead writer's %s is still there", w->label, stale);
        for (int k = 1; k < 4; k++)
            if (!exists(all[k])) PROBLEM("%s removed %s, not a dead writer's temporary file of it", w->label, all[k]);
        rm_rf(dir);
    }
    END_PROBLEMS();
}

/* Another run's file at the old fixed temporary name (NAME.tmp) is not
 * touched: temporary names are the writer's own. */
static void test_no_fixed_temp_name(void **state) {
    (void)state;
    for (int i = 0; i < N_WRITERS; i++) {
        const writer *w = &WRITERS[i];
        char *dir = mkdir_tmp(), p[512], name[256];
        snprintf(name, sizeof name, "%s.tmp", w->file);
        join(p, sizeof p, dir, name);
        put(p, "another run's half-written file", 0644);
        must_write(w, dir);
        char *text = exists(p) ? read_file(p, NULL) : NULL;
        if (!text || strcmp(text, "another run's half-written file"))
            PROBLEM("%s took %s, another writer's temporary file", w->label, p);
        free(text);
        rm_rf(dir);
    }
    END_PROBLEMS();
}

/* Two processes saving the same checkpoint and session 20 times each: every
 * save succeeds and the result loads. */
static void test_concurrent_writers(void **state) {
    (void)state;
    char *dir = mkdir_tmp();
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            gpt2_error err;
            for (int n = 0; n < 20; n++)
                if (w_checkpoint(dir, &err) != GPT2_OK || w_session(dir, &err) != GPT2_OK) {
                    fprintf(stderr, "writer %d, save %d: %s\n", k, n, err.msg);
                    _exit(1);
                }
            _exit(0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int ws;
        assert_int_equal(waitpid(kids[k], &ws, 0), kids[k]);
        assert_true(WIFEXITED(ws));
        assert_int_equal(WEXITSTATUS(ws), 0);
    }
    char p[512];
    join(p, sizeof p, dir, "checkpoint.bin");
    gpt2_trainer *tr;
    uint64_t hash;
    gpt2_error err;
    assert_int_equal(gpt2_trainer_resume(p, 1, &tr, &hash, &err), GPT2_OK);
    assert_int_equal(hash, 77);
    gpt2_trainer_free(tr);
    join(p, sizeof p, dir, "chat.json");
    assert_int_equal(gpt2_session_load(g_session, p, NULL, NULL, &err), GPT2_OK);
    assert_int_equal(count_hidden(dir), 0);
    rm_rf(dir);
}

/* A directory that is missing or not a directory is named, with the reason. */
static void test_bad_directory(void **state) {
    (void)state;
    char *dir = mkdir_tmp(), p[512], want[600], file[512];
    gpt2_error err;
    snprintf(p, sizeof p, "%s/nosuch/chat.json", dir);
    assert_int_equal(gpt2_session_save(g_session, p, &err), GPT2_ERR_IO);
    snprintf(want, sizeof want, "directory %s/nosuch: No such file or directory", dir);
    if (!strstr(err.msg, want)) fail_msg("message '%s' lacks '%s'", err.msg, want);
    join(file, sizeof file, dir, "plain");
    put(file, "x", 0644);
    join(p, sizeof p, file, "checkpoint.bin");
    assert_int_equal(gpt2_trainer_save(g_trainer, p, 1, &err), GPT2_ERR_IO);
    snprintf(want, sizeof want, "directory %s: Not a directory", file);
    if (!strstr(err.msg, want)) fail_msg("message '%s' lacks '%s'", err.msg, want);
    if (geteuid() != 0) { /* root writes anywhere */
        char ro[512];
        join(ro, sizeof ro, dir, "ro");
        assert_int_equal(mkdir(ro, 0555), 0);
        join(p, sizeof p, ro, "chat.json");
        assert_int_equal(gpt2_session_save(g_session, p, &err), GPT2_ERR_IO);
        snprintf(want, sizeof want, "directory %s: Permission denied", ro);
        if (!strstr(err.msg, want)) fail_msg("message '%s' lacks '%s'", err.msg, want);
    }
    rm_rf(dir);
}

/* A write that fails half way (file size limit: EFBIG) leaves the old file's
 * bytes and no temporary file. */
static void test_failed_write_keeps_old(void **state) {
    (void)state;
    char *dir = mkdir_tmp(), p[512];
    join(p, sizeof p, dir, "checkpoint.bin");
    put(p, "the old checkpoint", 0644);
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {4096, 4096};
        gpt2_error err;
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(3);
        gpt2_status st = gpt2_trainer_save(g_trainer, p, 1, &err);
        _exit(st == GPT2_ERR_IO && strstr(err.msg, "File too large") ? 0 : 1);
    }
    int ws;
    assert_int_equal(waitpid(c, &ws, 0), c);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
    char *text = read_file(p, NULL);
    assert_string_equal(text, "the old checkpoint");
    free(text);
    assert_int_equal(count_hidden(dir), 0);
    rm_rf(dir);
}

static gpt2_status give_up_half_way(FILE *f, void *user, gpt2_error *err) {
    fputs("half", f);
    err->status = GPT2_ERR_FORMAT;
    snprintf(err->msg, sizeof err->msg, "the writer gave up");
    return GPT2_ERR_FORMAT;
}

/* The writer's own failure comes back as it said it, the target untouched. */
static void test_writer_error(void **state) {
    (void)state;
    char *dir = mkdir_tmp(), p[512];
    join(p, sizeof p, dir, "out.txt");
    put(p, "old", 0644);
    gpt2_error err;
    assert_int_equal(gpt2_fileio_write_atomic(p, give_up_half_way, NULL, &err), GPT2_ERR_FORMAT);
    assert_string_equal(err.msg, "the writer gave up");
    char *text = read_file(p, NULL);
    assert_string_equal(text, "old");
    free(text);
    assert_int_equal(count_hidden(dir), 0);
    rm_rf(dir);
}

/* Logs: a new file under the umask, appended to; /dev/full opens (a device)
 * and its writes fail; a directory and a FIFO nobody reads are refused. */
static void test_append(void **state) {
    (void)state;
    char *dir = mkdir_tmp(), p[512];
    join(p, sizeof p, dir, "chat.log");
    gpt2_error err;
    FILE *f;
    mode_t old = umask(027);
    assert_int_equal(gpt2_fileio_open_append(p, &f, &err), GPT2_OK);
    umask(old);
    fputs("one\n", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(gpt2_fileio_open_append(p, &f, &err), GPT2_OK);
    fputs("two\n", f);
    assert_int_equal(fclose(f), 0);
    char *text = read_file(p, NULL);
    assert_string_equal(text, "one\ntwo\n");
    free(text);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0640);

    assert_int_equal(gpt2_fileio_open_append("/dev/full", &f, &err), GPT2_OK);
    fputs("x\n", f);
    assert_int_not_equal(fflush(f), 0);
    assert_int_equal(errno, ENOSPC);
    fclose(f);

    assert_int_equal(gpt2_fileio_open_append(dir, &f, &err), GPT2_ERR_IO);
    assert_non_null(strstr(err.msg, dir));
    join(p, sizeof p, dir, "fifo");
    assert_int_equal(mkfifo(p, 0644), 0);
    assert_int_equal(gpt2_fileio_open_append(p, &f, &err), GPT2_ERR_IO);
    assert_non_null(strstr(err.msg, "FIFO nobody reads"));
    assert_null(f);
    rm_rf(dir);
}

static int setup(void **state) {
    (void)state;
    gpt2_error err;
    if (gpt2_model_load(fixture_path("models/tiny-f32"), &g_model, &err) != GPT2_OK) fail_msg("%s", err.msg);
    gpt2_session_params sp = gpt2_session_default_params();
    sp.context.n_threads = 1;
    if (gpt2_session_new(g_model, sp, &g_session, &err) != GPT2_OK) fail_msg("%s", err.msg);
    if (gpt2_session_send(g_session, "hello there", 11, NULL, NULL, &err) != GPT2_OK) fail_msg("%s", err.msg);
    gpt2_train_params tp = gpt2_train_default_params();
    tp.n_layer = 1, tp.n_head = 2, tp.n_embd = 8, tp.block_size = 8, tp.n_vocab = 300, tp.batch_size = 2;
    tp.n_threads = 1, tp.steps = 10;
    if (gpt2_trainer_new(tp, &g_trainer, &err) != GPT2_OK) fail_msg("%s", err.msg);
    const char *text = "the cat sat on the mat; the cat ate the rat. ";
    gpt2_bpe_train_params bp = gpt2_bpe_train_default_params();
    bp.vocab_size = 270;
    if (gpt2_bpe_train(text, strlen(text), bp, &g_vocab, &err) != GPT2_OK) fail_msg("%s", err.msg);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    gpt2_bpe_vocab_free(g_vocab);
    gpt2_trainer_free(g_trainer);
    gpt2_session_free(g_session);
    gpt2_model_free(g_model);
    return 0;
}

/* gpt2_fileio_join: a path that fits exactly is written; one byte more is
 * refused, not cut (a cut path would name another file). */
static void test_join(void **state) {
    (void)state;
    char out[12];
    gpt2_error err;
    assert_int_equal(gpt2_fileio_join(out, sizeof out, "mode", "x.json", &err), GPT2_OK);
    assert_string_equal(out, "mode/x.json"); /* 12 bytes with the NUL: exactly fits */
    assert_int_equal(gpt2_fileio_join(out, sizeof out, "models", "x.json", &err), GPT2_ERR_INVALID_ARG);
    assert_string_equal(out, "");
    assert_non_null(strstr(err.msg, "models/x.json: path too long (13 bytes, the limit is 11)"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_join),
        cmocka_unit_test(test_modes),
        cmocka_unit_test(test_symlinks),
        cmocka_unit_test(test_non_regular_refused),
        cmocka_unit_test(test_stale_temps),
        cmocka_unit_test(test_no_fixed_temp_name),
        cmocka_unit_test(test_concurrent_writers),
        cmocka_unit_test(test_bad_directory),
        cmocka_unit_test(test_failed_write_keeps_old),
        cmocka_unit_test(test_writer_error),
        cmocka_unit_test(test_append),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
