/* standalone_main.c — runs a fuzz harness without libFuzzer, for `make check`.
 *
 *     fuzz_NAME [-n MAX] FILE|DIR ...
 *
 * Linked into a harness instead of -fsanitize=fuzzer (built with the project's
 * compiler and flags, ASan/UBSan in the SAN=1 pass): calls LLVMFuzzerInitialize
 * when the harness has one, then LLVMFuzzerTestOneInput on every file named and
 * on the files of every directory named (sorted by name; at most MAX of each
 * directory with -n). Each input runs in a child process, so that one failing
 * check (abort), sanitizer report, leak or hang (60 s) fails that input alone
 * and names it. Prints cmocka's lines, which tests/run_tests.sh counts.
 */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_HAVE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_HAVE_LSAN 1
#endif
#endif
#ifdef FUZZ_HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int n_run, n_failed;
static char **failed;

/* The child: one input, then a leak check; _exit skips the harness's atexit
 * handlers, which would remove the parent's temporary directory. */
static void run_child(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot read %s\n", path);
        _exit(2);
    }
    size_t cap = 4096, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap && !(buf = realloc(buf, cap *= 2))) break;
    fclose(f);
    if (!buf) _exit(2);
    alarm(60);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
#ifdef FUZZ_HAVE_LSAN
    if (__lsan_do_recoverable_leak_check()) _exit(3);
#endif
    _exit(0);
}

static void run_one(const char *path) {
    printf("[ RUN      ] %s\n", path);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) run_child(path);
    int status = 0;
    int ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    n_run++;
    if (ok) {
        printf("[       OK ] %s\n", path);
        return;
    }
    if (pid > 0 && WIFSIGNALED(status)) printf("(killed by signal %d)\n", WTERMSIG(status));
    printf("[  FAILED  ] %s\n", path);
    failed = realloc(failed, (size_t)(n_failed + 1) * sizeof *failed);
    if (failed) failed[n_failed++] = strdup(path);
}

static int only_files(const struct dirent *e) { return e->d_name[0] != '.'; }

static void run_arg(const char *arg, int max) {
    struct stat sb;
    if (stat(arg, &sb) != 0) {
        printf("[  FAILED  ] %s (missing)\n", arg);
        n_run++, n_failed++;
        return;
    }
    if (!S_ISDIR(sb.st_mode)) {
        run_one(arg);
        return;
    }
    struct dirent **list;
    int n = scandir(arg, &list, only_files, alphasort), done = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", arg, list[i]->d_name);
        if ((max <= 0 || done < max) && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) run_one(path), done++;
        free(list[i]);
    }
    free(list);
}

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int max = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) max = atoi(argv[++i]);
        else run_arg(argv[i], max);
    }
    printf("[==========] %d test(s) run.\n[  PASSED  ] %d test(s).\n", n_run, n_run - n_failed);
    if (n_failed) {
        printf("[  FAILED  ] %d test(s), listed below:\n", n_failed);
        for (int i = 0; failed && i < n_failed; i++) printf("[  FAILED  ] %s\n", failed[i]);
    }
    return n_failed ? 1 : 0;
}
