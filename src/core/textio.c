/* textio.c — whole-file reads that refuse non-files, and message-safe quoting. */
#include "textio.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "gpt2_tokenizer.h"

/* path opened for reading, only if it is a regular file. O_NONBLOCK: a FIFO
 * in its place must not hang the open; it is refused, as is a device such as
 * /dev/zero that would never end. */
static gpt2_status open_regular(const char *path, int *fd, struct stat *sb, gpt2_error *err) {
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) return gpt2_fail(err, GPT2_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(*fd, sb) != 0 || !S_ISREG(sb->st_mode)) {
        close(*fd);
        return gpt2_fail(err, GPT2_ERR_IO, "%s: not a regular file", path);
    }
    return GPT2_OK;
}

gpt2_status text_read_file(const char *path, size_t max_bytes, gpt2_status too_big_status, const char *what,
                           char **data, size_t *len, gpt2_error *err) {
    int fd;
    struct stat sb;
    gpt2_status st = open_regular(path, &fd, &sb, err);
    if (st != GPT2_OK) return st;
    if ((unsigned long long)sb.st_size > max_bytes) {
        close(fd);
        return gpt2_fail(err, too_big_status, "%s: %lld bytes, more than the %zu MiB a %s may have", path,
                         (long long)sb.st_size, max_bytes >> 20, what);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return gpt2_fail(err, GPT2_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    /* Read to the end rather than trusting st_size: the file may be growing. */
    size_t cap = (size_t)sb.st_size + 2, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
        }
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (n < cap - 1) break;
        if (n > max_bytes) {
            free(buf);
            fclose(f);
            return gpt2_fail(err, too_big_status, "%s: more than the %zu MiB a %s may have", path, max_bytes >> 20,
                             what);
        }
        char *grown = realloc(buf, cap *= 2);
        if (!grown) free(buf);
        buf = grown;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return gpt2_fail(err, GPT2_ERR_IO, "%s: read error", path);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return GPT2_OK;
}

gpt2_status text_map_file(const char *path, void **map, size_t *size, gpt2_error *err) {
    *map = NULL;
    *size = 0;
    int fd;
    struct stat sb;
    gpt2_status st = open_regular(path, &fd, &sb, err);
    if (st != GPT2_OK) return st;
    if (sb.st_size == 0) {
        close(fd);
        return GPT2_OK;
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return gpt2_fail(err, GPT2_ERR_IO, "%s: mmap of %lld bytes failed: %s", path, (long long)sb.st_size,
                         strerror(errno));
    *map = p;
    *size = (size_t)sb.st_size;
    return GPT2_OK;
}

long text_json_nul(const char *text, size_t len) {
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (!in_str) {
            in_str = c == '"';
        } else if (c == '\0') {
            return (long)i;
        } else if (c == '"') {
            in_str = 0;
        } else if (c == '\\' && i + 1 < len) {
            if (text[i + 1] == 'u' && i + 6 <= len && memcmp(text + i + 2, "0000", 4) == 0) return (long)i;
            i++; /* the escaped character */
        }
    }
    return -1;
}

const char *text_show(const char *s, size_t n, char buf[TEXT_SHOW_BUF]) {
    return gpt2_text_escape(s, n, buf, TEXT_SHOW_BUF);
}

size_t gpt2_text_split(const char *text, size_t len, double fraction) {
    if (!(fraction > 0)) return 0;
    if (fraction >= 1) return len;
    size_t at = (size_t)floor((double)len * fraction);
    while (at > 0 && at < len && ((unsigned char)text[at] & 0xC0) == 0x80) at--;
    return at;
}
