/* fileio.c — atomic whole-file replacement and logs opened for appending:
 * every file gptscope writes goes through here (contract in gpt2_fileio.h). */
#include "gpt2_fileio.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "rng.h"

enum { MAX_LINK_HOPS = 40, TMP_RAND = 6 };

static const char *kind_name(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/* The directory part of path ("." for a bare name, "/" for "/x"), malloc'd. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* link's text read at p, made a path (relative links are relative to p's directory); malloc'd. */
static char *link_target(const char *p, gpt2_error *err) {
    char buf[PATH_MAX];
    ssize_t n = readlink(p, buf, sizeof buf - 1);
    if (n < 0) {
        gpt2_fail(err, GPT2_ERR_IO, "%s: cannot read the symbolic link: %s", p, strerror(errno));
        return NULL;
    }
    buf[n] = '\0';
    char *d = buf[0] == '/' ? NULL : dir_of(p);
    size_t cap = (d ? strlen(d) + 1 : 0) + (size_t)n + 1;
    char *next = malloc(cap);
    if (next) snprintf(next, cap, "%s%s%s", d ? d : "", d ? "/" : "", buf);
    else gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", p);
    free(d);
    return next;
}

/* Follows symbolic links from path to the file a write replaces: *target
 * (malloc'd) and whether it exists (then *sb is its lstat). */
static gpt2_status resolve(const char *path, char **target, int *exists, struct stat *sb, gpt2_error *err) {
    char *p = strdup(path);
    for (int hop = 0; p; hop++) {
        if (lstat(p, sb) != 0) {
            int e = errno;
            if (e == ENOENT || e == ENOTDIR) { /* a new file; a bad directory is named when the write begins */
                *exists = 0, *target = p;
                return GPT2_OK;
            }
            gpt2_status st = gpt2_fail(err, GPT2_ERR_IO, "%s: cannot look at %s: %s", path, p, strerror(e));
            free(p);
            return st;
        }
        if (!S_ISLNK(sb->st_mode)) {
            *exists = 1, *target = p;
            return GPT2_OK;
        }
        if (hop == MAX_LINK_HOPS) {
            free(p);
            return gpt2_fail(err, GPT2_ERR_IO, "%s: more than %d symbolic links in a row", path, MAX_LINK_HOPS);
        }
        char *next = link_target(p, err);
        free(p);
        if (!next) return err ? err->status : GPT2_ERR_IO;
        p = next;
    }
    return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
}

/* Whether name is ".BASE.tmp-PID-XXXXXX" for this base; *pid gets PID. */
static int is_temp_of(const char *name, const char *base, long *pid) {
    size_t bl = strlen(base);
    if (name[0] != '.' || strncmp(name + 1, base, bl) != 0 || strncmp(name + 1 + bl, ".tmp-", 5) != 0) return 0;
    const char *s = name + 1 + bl + 5;
    if (!isdigit((unsigned char)*s)) return 0;
    char *end;
    errno = 0;
    *pid = strtol(s, &end, 10);
    if (errno || *pid <= 0 || *pid > INT_MAX || *end != '-' || strlen(end + 1) != TMP_RAND) return 0;
    for (const char *c = end + 1; *c; c++)
        if (!isalnum((unsigned char)*c)) return 0;
    return 1;
}

/* Removes the temporary files of dir/base whose writer no longer exists
 * (killed mid-write): they can never be renamed, so they would pile up.
 * A live writer's file (kill(pid, 0) succeeds or says EPERM) is left alone. */
static void remove_stale(const char *dir, const char *base) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    long pid;
    while ((e = readdir(d)))
        if (is_temp_of(e->d_name, base, &pid) && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 &&
            errno == ESRCH)
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
}

/* Creates dir/.base.tmp-PID-XXXXXX exclusively with mode (less the umask,
 * which open applies); *tmp malloc'd. -1 with errno on failure. */
static int make_temp(const char *dir, const char *base, mode_t mode, char **tmp) {
    static const char alnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    size_t cap = strlen(dir) + strlen(base) + 48;
    if (!(*tmp = malloc(cap))) return errno = ENOMEM, -1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t r = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)*tmp;
    for (int attempt = 0; attempt < 100; attempt++) {
        char rnd[TMP_RAND + 1];
        for (int i = 0; i < TMP_RAND; i++) rnd[i] = alnum[rng_next(&r) % (sizeof alnum - 1)];
        rnd[TMP_RAND] = '\0';
        snprintf(*tmp, cap, "%s/.%s.tmp-%ld-%s", dir, base, (long)getpid(), rnd);
        int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return errno = EEXIST, -1;
}

/* Gives the temporary file fd the old file's permission bits and, where
 * allowed, its owner (a root process rewriting a user's file keeps it theirs). */
static int keep_attributes(int fd, const struct stat *old) {
    if ((old->st_uid != geteuid() || old->st_gid != getegid()) && fchown(fd, old->st_uid, old->st_gid) != 0) {
        /* not permitted: the new file is ours, as any rewrite by this user would be */
    }
    return fchmod(fd, old->st_mode & 0777);
}

/* fsync of the directory, so that the rename itself survives a crash (best effort). */
static void sync_dir(const char *dir) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

/* Runs fill into the open temporary file, then flush, fsync, close; the
 * stream is closed whatever happens. */
static gpt2_status fill_temp(int fd, const char *path, gpt2_fileio_write_fn fill, void *user, gpt2_error *err) {
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        return gpt2_fail(err, GPT2_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    errno = 0;
    gpt2_status st = fill(f, user, err);
    const char *what = NULL;
    if (st == GPT2_OK && (fflush(f) != 0 || ferror(f))) what = "cannot write";
    else if (st == GPT2_OK && fsync(fd) != 0) what = "cannot sync";
    int e = errno ? errno : EIO;
    if (fclose(f) != 0 && st == GPT2_OK && !what) what = "cannot close", e = errno;
    if (what) st = gpt2_fail(err, GPT2_ERR_IO, "%s: %s: %s", path, what, strerror(e));
    return st;
}

/* Its complexity is its syscalls, each checked with the step named in the
 * message (create, write, fsync, rename, directory fsync). */
gpt2_status gpt2_fileio_write_atomic(const char *path, gpt2_fileio_write_fn fill, void *user, gpt2_error *err) {
    if (!path || !*path || !fill) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "fileio: no path or no writer");
    char *target = NULL, *dir = NULL, *tmp = NULL;
    int exists;
    struct stat sb;
    gpt2_status st = resolve(path, &target, &exists, &sb, err);
    if (st != GPT2_OK) return st;
    const int linked = strcmp(target, path) != 0;
    const char *base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
        st = gpt2_fail(err, GPT2_ERR_IO, "%s: names a directory, not a file", path);
    } else if (exists && !S_ISREG(sb.st_mode)) {
        st = gpt2_fail(err, GPT2_ERR_IO, "%s%s%s: is %s, not a regular file; not replacing it", path,
                       linked ? " -> " : "", linked ? target : "", kind_name(sb.st_mode));
    } else if (exists && faccessat(AT_FDCWD, target, W_OK, AT_EACCESS) != 0) {
        /* a read-only file says "keep this": replacing it would take only a writable directory */
        st = gpt2_fail(err, GPT2_ERR_IO, "%s%s%s: not writable (mode %04o): %s; not replacing it", path,
                       linked ? " -> " : "", linked ? target : "", (unsigned)(sb.st_mode & 07777), strerror(errno));
    } else if (!(dir = dir_of(target))) {
        st = gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    }
    if (st != GPT2_OK) goto out;
    remove_stale(dir, base);
    int fd = make_temp(dir, base, exists ? 0600 : 0666, &tmp);
    if (fd < 0) {
        st = gpt2_fail(err, GPT2_ERR_IO, "%s: cannot create a file in directory %s: %s", path, dir, strerror(errno));
        goto out;
    }
    if (exists && keep_attributes(fd, &sb) != 0) {
        st = gpt2_fail(err, GPT2_ERR_IO, "%s: cannot set the mode of the new file: %s", path, strerror(errno));
        close(fd);
    } else {
        st = fill_temp(fd, path, fill, user, err);
    }
    if (st == GPT2_OK && rename(tmp, target) != 0)
        st = gpt2_fail(err, GPT2_ERR_IO, "%s: cannot rename the new file over %s: %s", path, target,
                       strerror(errno));
    if (st != GPT2_OK) unlink(tmp);
    else sync_dir(dir);
out:
    free(target);
    free(dir);
    free(tmp);
    return st;
}

typedef struct {
    const void *data;
    size_t len;
} bytes;

static gpt2_status put_bytes(FILE *f, void *user, gpt2_error *err) {
    const bytes *b = user;
    if (b->len) fwrite(b->data, 1, b->len, f);
    return GPT2_OK;
}

gpt2_status gpt2_fileio_write_bytes(const char *path, const void *data, size_t len, gpt2_error *err) {
    bytes b = {data, len};
    return gpt2_fileio_write_atomic(path, put_bytes, &b, err);
}

gpt2_status gpt2_fileio_open_append(const char *path, FILE **out, gpt2_error *err) {
    if (!out) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "fileio: NULL argument");
    *out = NULL;
    if (!path || !*path) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "fileio: empty log path");
    /* O_NONBLOCK: a FIFO nobody reads fails at once (ENXIO) instead of hanging */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0666);
    if (fd < 0) {
        int e = errno;
        if (e == ENXIO) return gpt2_fail(err, GPT2_ERR_IO, "%s: a FIFO nobody reads, or a socket; not a log", path);
        char *dir = dir_of(path);
        gpt2_status st = gpt2_fail(err, GPT2_ERR_IO, "%s: cannot open for appending%s%s: %s", path,
                                   e == ENOENT || e == EACCES ? " in directory " : "",
                                   e == ENOENT || e == EACCES ? (dir ? dir : "?") : "", strerror(e));
        free(dir);
        return st;
    }
    struct stat sb;
    gpt2_status st = GPT2_OK;
    if (fstat(fd, &sb) != 0) {
        st = gpt2_fail(err, GPT2_ERR_IO, "%s: cannot examine it: %s", path, strerror(errno));
    } else if (S_ISBLK(sb.st_mode) || S_ISSOCK(sb.st_mode) || S_ISDIR(sb.st_mode)) {
        st = gpt2_fail(err, GPT2_ERR_IO, "%s: is %s; not a log", path, kind_name(sb.st_mode));
    } else {
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 || !(*out = fdopen(fd, "a")))
            st = gpt2_fail(err, GPT2_ERR_IO, "%s: cannot open for appending: %s", path, strerror(errno));
    }
    if (st != GPT2_OK) close(fd);
    return st;
}

gpt2_status gpt2_fileio_join(char *out, size_t cap, const char *dir, const char *name, gpt2_error *err) {
    if (!out || cap == 0 || !dir || !name) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "path join: NULL argument");
    int n = snprintf(out, cap, "%s/%s", dir, name);
    if (n >= 0 && (size_t)n < cap) return GPT2_OK;
    out[0] = '\0';
    return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "%s/%s: path too long (%d bytes, the limit is %zu)", dir, name, n,
                     cap - 1);
}

gpt2_status gpt2_fileio_mkdirs(const char *dir, gpt2_error *err) {
    if (!dir || !*dir) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "mkdirs: empty directory name");
    char *path = strdup(dir);
    if (!path) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    gpt2_status rc = GPT2_OK;
    for (char *s = path + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        char c = *s;
        *s = '\0';
        struct stat sb;
        if (stat(path, &sb) != 0 && mkdir(path, 0777) != 0 && errno != EEXIST) {
            rc = gpt2_fail(err, GPT2_ERR_IO, "%s: cannot create directory: %s", path, strerror(errno));
            break;
        }
        *s = c;
        if (c == '\0') break;
    }
    free(path);
    if (rc != GPT2_OK) return rc;
    struct stat sb;
    if (stat(dir, &sb) != 0) return gpt2_fail(err, GPT2_ERR_IO, "%s: cannot create directory: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return gpt2_fail(err, GPT2_ERR_IO, "%s: not a directory", dir);
    return GPT2_OK;
}
