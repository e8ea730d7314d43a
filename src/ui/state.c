/* state.c — the state directory and the conversations kept in it (state.h). */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ui/state.h"

static gpt2_status fail(gpt2_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static gpt2_status fail(gpt2_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->status = GPT2_ERR_IO;
    return GPT2_ERR_IO;
}

/* dir exists (made if missing), is a directory and may be written. */
static int usable_dir(const char *dir, char *why, size_t cap) {
    gpt2_error err;
    struct stat st;
    if (gpt2_fileio_mkdirs(dir, &err) != GPT2_OK) {
        snprintf(why, cap, "%s", err.msg);
        return 0;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) != 0) {
        snprintf(why, cap, "%.500s: not a directory this user may write", dir);
        return 0;
    }
    return 1;
}

/* A private directory under /tmp: ours (owner, mode 0700), not a link. */
static int usable_private(const char *dir, char *why, size_t cap) {
    struct stat st;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(why, cap, "%s: %s", dir, strerror(errno));
        return 0;
    }
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) {
        snprintf(why, cap, "%s: not a private directory of this user", dir);
        return 0;
    }
    return 1;
}

int state_dir(char *out, size_t cap, char *note, size_t note_cap) {
    char why[2][600] = {"", ""};
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    int n_why = 0;
    note[0] = '\0';
    if (xdg && *xdg) {
        if (snprintf(out, cap, "%s/gptscope", xdg) < (int)cap && usable_dir(out, why[0], sizeof why[0])) return 0;
        if (!why[0][0]) snprintf(why[0], sizeof why[0], "XDG_STATE_HOME is too long");
        n_why = 1;
    }
    if (home && *home) {
        if (snprintf(out, cap, "%s/.local/state/gptscope", home) < (int)cap &&
            usable_dir(out, why[n_why], sizeof why[n_why])) {
            if (n_why) snprintf(note, note_cap, "%.500s; using %.400s", why[0], out);
            return 0;
        }
        if (!why[n_why][0]) snprintf(why[n_why], sizeof why[n_why], "HOME is too long");
        n_why++;
    }
    const char *tmp = getenv("TMPDIR");
    const char *bases[2] = {tmp && *tmp ? tmp : "/tmp", "/tmp"};
    for (int i = 0; i < 2; i++) {
        char last[600];
        if (snprintf(out, cap, "%s/gptscope-%u", bases[i], (unsigned)getuid()) < (int)cap &&
            usable_private(out, last, sizeof last)) {
            snprintf(note, note_cap, "%.240s%s%.240s; using %.400s", n_why ? why[0] : "no XDG_STATE_HOME or HOME",
                     n_why > 1 ? "; " : "", n_why > 1 ? why[1] : "", out);
            return 0;
        }
    }
    snprintf(note, note_cap, "no state directory: %.240s%s%.240s, and none under %.200s", n_why ? why[0] : "",
             n_why > 1 ? "; " : "", n_why > 1 ? why[1] : "", bases[0]);
    out[0] = '\0';
    return -1;
}

int state_path(const char *name, char *out, size_t cap) {
    char dir[PATH_MAX], note[1024];
    if (state_dir(dir, sizeof dir, note, sizeof note) != 0) return 0;
    return snprintf(out, cap, "%s/%s", dir, name) < (int)cap;
}

void state_keeper_init(state_keeper *k) { memset(k, 0, sizeof *k); }

void state_keep_next(state_keeper *k) {
    k->path[0] = '\0';
    k->seq++;
}

/* A kept conversation's name: DATE-TIME-PID-N.json */
static int kept_name(const char *n) {
    size_t l = strlen(n);
    return l > 5 && !strcmp(n + l - 5, ".json") && n[0] >= '0' && n[0] <= '9';
}

typedef struct {
    char name[256];
    struct timespec mtime;
} kept_file;

static int newest_first(const void *x, const void *y) {
    const kept_file *a = x, *b = y;
    if (a->mtime.tv_sec != b->mtime.tv_sec) return a->mtime.tv_sec < b->mtime.tv_sec ? 1 : -1;
    if (a->mtime.tv_nsec != b->mtime.tv_nsec) return a->mtime.tv_nsec < b->mtime.tv_nsec ? 1 : -1;
    return strcmp(b->name, a->name); /* the same instant: the later name first */
}

/* The kept conversations of dir, newest first (malloc'd; *n of them). */
static kept_file *list_kept(const char *dir, int *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    int cap = 0;
    kept_file *v = NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[PATH_MAX];
        struct stat st;
        if (!kept_name(e->d_name) || strlen(e->d_name) >= sizeof v->name) continue;
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) continue;
        if (lstat(p, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (*n == cap) {
            kept_file *nv = realloc(v, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *v);
            if (!nv) break;
            v = nv;
        }
        snprintf(v[*n].name, sizeof v[*n].name, "%s", e->d_name);
        v[(*n)++].mtime = st.st_mtim;
    }
    closedir(d);
    if (*n > 1) qsort(v, (size_t)*n, sizeof *v, newest_first);
    return v;
}

/* Keeps the newest STATE_KEEP - 1 (one more is about to be claimed). */
static void prune(const char *dir) {
    int n;
    kept_file *v = list_kept(dir, &n);
    for (int i = STATE_KEEP - 1; i < n; i++) {
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, v[i].name) < (int)sizeof p) unlink(p);
    }
    free(v);
}

/* A new file of our own in STATE/chats (empty until the save replaces it). */
static gpt2_status claim(state_keeper *k, gpt2_error *err) {
    char dir[PATH_MAX], chats[PATH_MAX];
    if (state_dir(dir, sizeof dir, k->note, sizeof k->note) != 0)
        return fail(err, "cannot keep the conversation: %s", k->note);
    if (gpt2_fileio_join(chats, sizeof chats, dir, "chats", err) != GPT2_OK) return GPT2_ERR_IO;
    char why[700];
    if (!usable_dir(chats, why, sizeof why))
        return fail(err, "cannot keep the conversation: %s", why);
    prune(chats);
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    for (int tries = 0; tries < 1000; tries++, k->seq++) {
        char name[96];
        snprintf(name, sizeof name, "%04d%02d%02d-%02d%02d%02d-%ld-%d.json", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)getpid(), k->seq);
        if (gpt2_fileio_join(k->path, sizeof k->path, chats, name, err) != GPT2_OK) break;
        int fd = open(k->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(fd);
            return GPT2_OK;
        }
        if (errno != EEXIST) {
            fail(err, "cannot keep the conversation: %s: %s", k->path, strerror(errno));
            break;
        }
    }
    k->path[0] = '\0';
    return GPT2_ERR_IO;
}

gpt2_status state_keep(state_keeper *k, const gpt2_session *s, gpt2_error *err) {
    if (gpt2_session_n_turns(s) == 0) return GPT2_OK;
    int claimed = !k->path[0];
    if (claimed && claim(k, err) != GPT2_OK) return GPT2_ERR_IO;
    gpt2_status st = gpt2_session_save(s, k->path, err);
    if (st != GPT2_OK && claimed) { /* nothing of ours there: the empty claim goes */
        unlink(k->path);
        k->path[0] = '\0';
    }
    return st;
}

int state_latest_chat(const char *model, int n_vocab, char *out, size_t cap, char *newer_other,
                      size_t other_cap) {
    char dir[PATH_MAX], chats[PATH_MAX + 8], note[1024];
    if (newer_other) newer_other[0] = '\0';
    if (state_dir(dir, sizeof dir, note, sizeof note) != 0) return 0;
    snprintf(chats, sizeof chats, "%s/chats", dir);
    int n, found = 0;
    kept_file *v = list_kept(chats, &n);
    for (int i = 0; i < n && !found; i++) {
        char p[PATH_MAX + 300], saved[256];
        int nv;
        gpt2_error err;
        snprintf(p, sizeof p, "%s/%s", chats, v[i].name);
        if (gpt2_session_file_model(p, saved, sizeof saved, &nv, &err) != GPT2_OK) continue;
        if (!strcmp(saved, model) && nv == n_vocab) {
            found = snprintf(out, cap, "%s", p) < (int)cap;
        } else if (newer_other && !newer_other[0]) {
            snprintf(newer_other, other_cap, "%s", p);
        }
    }
    free(v);
    return found;
}
