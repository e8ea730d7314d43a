/* outdir.c — an output directory written whole or not at all (cli.h,
 * cli_outdir_*): the files go into a scratch directory beside the target,
 * which Ctrl-C, SIGTERM or a hangup removes with everything in it before the
 * process ends; when all is written they move into the target. A target that
 * holds files is replaced only when the user said --force, and then only the
 * files written (each by one rename); its other files stay. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli/cli.h"

static char g_scratch[4096]; /* the scratch directory a signal removes ("": none) */
static struct sigaction g_old[3];
static const int g_sigs[3] = {SIGINT, SIGTERM, SIGHUP};

/* Everything in the scratch directory, then the directory: async-signal-safe
 * calls only (getdents64 straight from the kernel; opendir may allocate). */
static void wipe_scratch(void) {
    int fd = open(g_scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[4096];
        for (int pass = 0; pass < 64; pass++) { /* entries removed while listing: list again */
            long n, removed = 0;
            lseek(fd, 0, SEEK_SET);
            while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
                for (long off = 0; off < n;) {
                    const char *name = buf + off + 19; /* d_ino 8, d_off 8, d_reclen 2, d_type 1 */
                    unsigned short reclen;
                    memcpy(&reclen, buf + off + 16, sizeof reclen);
                    if (!(name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]))))
                        removed += unlinkat(fd, name, 0) == 0;
                    off += reclen;
                }
            if (!removed) break;
        }
        close(fd);
    }
    rmdir(g_scratch);
}

static void on_fatal(int sig) {
    wipe_scratch();
    cli_say("gptscope: interrupted; nothing was written to the output directory\n");
    signal(sig, SIG_DFL);
    raise(sig);
}

static void guard(int on) {
    for (int i = 0; i < 3; i++) {
        if (on) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_fatal;
            sigfillset(&sa.sa_mask);
            sigaction(g_sigs[i], &sa, &g_old[i]);
        } else {
            sigaction(g_sigs[i], &g_old[i], NULL);
        }
    }
}

/* The first entry of dir other than . and .. into name (""), or -1 when it cannot be read. */
static int first_entry(const char *dir, char *name, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    name[0] = '\0';
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(name, cap, "%s", e->d_name);
            break;
        }
    closedir(d);
    return 0;
}

int cli_outdir_begin(cli_outdir *d, const char *target, int force, const char *what) {
    struct stat st;
    char entry[256];
    memset(d, 0, sizeof *d);
    if (snprintf(d->target, sizeof d->target, "%s", target) >= (int)sizeof d->target) {
        cli_error("%s: the path is too long", cli_show(target));
        return 0;
    }
    d->exists = lstat(target, &st) == 0;
    if (d->exists && stat(target, &st) == 0 && !S_ISDIR(st.st_mode)) {
        cli_error("%s exists and is not a directory", cli_show(target));
        return 0;
    }
    if (d->exists && first_entry(target, entry, sizeof entry) != 0) {
        cli_error("%s: cannot read the directory: %s", cli_show(target), strerror(errno));
        return 0;
    }
    d->replace = d->exists && entry[0];
    if (d->replace && !force) {
        cli_error("%s already holds files (%s, ...): --force replaces %s in it; or give a new directory",
                  cli_show(target), cli_show(entry), what);
        return 0;
    }
    /* beside the target, so that the moves are renames within one file system */
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", target);
    size_t len = strlen(parent);
    while (len > 1 && parent[len - 1] == '/') parent[--len] = '\0';
    char *slash = strrchr(parent, '/');
    const char *base = slash ? slash + 1 : parent;
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == parent) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - parent), parent);
    gpt2_error err;
    if (gpt2_fileio_mkdirs(dir, &err) != GPT2_OK) {
        cli_error("%s", err.msg);
        return 0;
    }
    if (snprintf(d->scratch, sizeof d->scratch, "%s/.%s.partial-%ld", dir, base, (long)getpid()) >=
        (int)sizeof d->scratch) {
        cli_error("%s: the path is too long", cli_show(target));
        return 0;
    }
    snprintf(g_scratch, sizeof g_scratch, "%s", d->scratch);
    wipe_scratch(); /* one left by an earlier process of this pid */
    guard(1);       /* before it exists: a signal in between leaves nothing */
    if (mkdir(d->scratch, 0777) != 0) {
        cli_error("%s: cannot make a directory beside it: %s", cli_show(target), strerror(errno));
        guard(0);
        g_scratch[0] = '\0';
        return 0;
    }
    return 1;
}

void cli_outdir_abandon(cli_outdir *d) {
    if (!d->scratch[0]) return;
    wipe_scratch();
    guard(0);
    g_scratch[0] = '\0';
    d->scratch[0] = '\0';
}

/* Every file of the scratch directory over its namesake in the target: all
 * names checked first (a directory there would stop the moves half-way). */
static int move_files(cli_outdir *d) {
    DIR *dir = opendir(d->scratch);
    if (!dir) {
        cli_error("%s: %s", cli_show(d->scratch), strerror(errno));
        return 0;
    }
    struct dirent *e;
    int ok = 1;
    for (int pass = 0; pass < 2 && ok; pass++) {
        rewinddir(dir);
        while (ok && (e = readdir(dir))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char from[8192], to[8192];
            struct stat st;
            snprintf(from, sizeof from, "%s/%s", d->scratch, e->d_name);
            snprintf(to, sizeof to, "%s/%s", d->target, e->d_name);
            if (pass == 0 && lstat(to, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
                cli_error("%s is not a regular file: not replaced, nothing moved", cli_show(to));
                ok = 0;
            } else if (pass == 1 && rename(from, to) != 0) {
                cli_error("cannot move %s to %s: %s", cli_show(from), cli_show(to), strerror(errno));
                ok = 0;
            }
        }
    }
    closedir(dir);
    return ok;
}

int cli_outdir_commit(cli_outdir *d) {
    int ok;
    if (!d->replace) { /* missing or empty: the scratch directory becomes it */
        ok = rename(d->scratch, d->target) == 0;
        if (!ok) cli_error("cannot rename %s to %s: %s", cli_show(d->scratch), cli_show(d->target), strerror(errno));
    } else {
        ok = move_files(d);
    }
    if (ok && !d->replace) d->scratch[0] = '\0', g_scratch[0] = '\0', guard(0);
    else cli_outdir_abandon(d);
    return ok;
}

int cli_outdir_vacant(const char *dir, const char *const *names, int force, const char *how) {
    for (int i = 0; names[i] && !force; i++) {
        char p[8192];
        struct stat st;
        snprintf(p, sizeof p, "%s%s%s", dir ? dir : "", dir ? "/" : "", names[i]);
        if (lstat(p, &st) == 0) {
            cli_error("%s exists: %s", cli_show(p), how);
            return 0;
        }
    }
    return 1;
}

int cli_outputs_vacant(const char *const *paths, int n, int force) {
    for (int i = 0; i < n; i++)
        if (paths[i] && !cli_outdir_vacant(NULL, (const char *const[]){paths[i], NULL}, force,
                                           "--force replaces it; or give another name"))
            return 0;
    return 1;
}
