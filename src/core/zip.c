/* zip.c — the stored entries of a zip archive, every field checked (zip.h).
 * Layouts from the PKWARE APPNOTE: local header (30 bytes + name + extra),
 * central-directory entry (46 + name + extra + comment), end record (22 +
 * comment), zip64 end record (56) and its locator (20). */
#include "zip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "textio.h"

enum {
    SIG_LOCAL = 0x04034b50, SIG_CENTRAL = 0x02014b50, SIG_END = 0x06054b50,
    SIG_END64 = 0x06064b50, SIG_LOCATOR64 = 0x07064b50,
    LOCAL_LEN = 30, CENTRAL_LEN = 46, END_LEN = 22, END64_LEN = 56, LOCATOR64_LEN = 20,
};

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* The central directory's place, from the end record (zip64 where it says so). */
typedef struct {
    uint64_t n, cd_at, cd_size, end_at; /* end_at: where the end records begin */
} zip_end;

/* Long by design: a loader's validation, one message per way the end records can be wrong. */
static gpt2_status read_end(const char *path, const unsigned char *b, size_t size, zip_end *e, gpt2_error *err) {
    if (size < END_LEN)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %zu bytes, too short for a zip archive (truncated?)", path, size);
    /* the end record: the last signature whose comment ends exactly at the end of the file */
    size_t at = size - END_LEN, lowest = size - END_LEN > 65535 ? size - END_LEN - 65535 : 0;
    for (;; at--) {
        if (rd32(b + at) == SIG_END && at + END_LEN + rd16(b + at + 20) == size) break;
        if (at == lowest)
            return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: no zip end-of-central-directory record at the end of the file "
                             "(truncated, or not a zip)", path);
    }
    const unsigned char *r = b + at;
    if (rd16(r + 4) != 0 || rd16(r + 6) != 0 || rd16(r + 8) != rd16(r + 10))
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: a multi-disk zip archive (disk %u of its central directory), "
                         "expected one file", path, rd16(r + 6));
    e->n = rd16(r + 10);
    e->cd_size = rd32(r + 12);
    e->cd_at = rd32(r + 16);
    e->end_at = at;
    if (e->n != 0xFFFF && e->cd_size != 0xFFFFFFFFu && e->cd_at != 0xFFFFFFFFu) return GPT2_OK;
    /* zip64: the locator just before the end record points at the zip64 end record */
    if (at < LOCATOR64_LEN || rd32(b + at - LOCATOR64_LEN) != SIG_LOCATOR64)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: the end record asks for zip64, but no zip64 locator precedes it",
                         path);
    const unsigned char *loc = b + at - LOCATOR64_LEN;
    const uint64_t at64 = rd64(loc + 8);
    if (rd32(loc + 4) != 0 || rd32(loc + 16) > 1)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: a multi-disk zip64 archive, expected one file", path);
    if (at64 > at - LOCATOR64_LEN || at - LOCATOR64_LEN - at64 < END64_LEN || rd32(b + at64) != SIG_END64)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: the zip64 end record at offset %llu is not inside the file where "
                         "the locator says", path, (unsigned long long)at64);
    const unsigned char *r64 = b + at64;
    if (rd32(r64 + 16) != 0 || rd32(r64 + 20) != 0 || rd64(r64 + 24) != rd64(r64 + 32))
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: a multi-disk zip64 archive, expected one file", path);
    e->n = rd64(r64 + 32);
    e->cd_size = rd64(r64 + 40);
    e->cd_at = rd64(r64 + 48);
    e->end_at = at64;
    return GPT2_OK;
}

/* The zip64 extra field's values for the 32-bit fields that are 0xFFFFFFFF, in APPNOTE's order. */
static gpt2_status zip64_extra(const char *path, const char *name, const unsigned char *x, size_t xlen, uint64_t *usize,
                               uint64_t *csize, uint64_t *local_at, gpt2_error *err) {
    for (size_t i = 0; i + 4 <= xlen;) {
        const unsigned id = rd16(x + i), len = rd16(x + i + 2);
        if (i + 4 + len > xlen) break;
        if (id == 1) {
            uint64_t *want[3] = {usize, csize, local_at};
            size_t k = 0;
            for (int f = 0; f < 3; f++) {
                if (*want[f] != 0xFFFFFFFFu) continue;
                if (k + 8 > len)
                    return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: entry '%s': its zip64 extra field is %u bytes, too "
                                     "short for the sizes it must hold", path, name, len);
                *want[f] = rd64(x + i + 4 + k);
                k += 8;
            }
            return GPT2_OK;
        }
        i += 4 + len;
    }
    if (*usize == 0xFFFFFFFFu || *csize == 0xFFFFFFFFu || *local_at == 0xFFFFFFFFu)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: entry '%s' needs a zip64 extra field, and has none", path, name);
    return GPT2_OK;
}

/* The local header an entry points at: inside the file, the same name and
 * method, its data inside the file before the central directory. */
static gpt2_status check_local(const char *path, const unsigned char *b, const zip_end *end, zip_entry *e,
                               const char *shown, uint16_t method, gpt2_error *err) {
    const uint64_t at = e->header_at;
    if (at > end->cd_at || end->cd_at - at < LOCAL_LEN || rd32(b + at) != SIG_LOCAL)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: entry '%s': no local header at offset %llu (it must lie before the "
                         "central directory at %llu)", path, shown, (unsigned long long)at,
                         (unsigned long long)end->cd_at);
    const unsigned char *h = b + at;
    const uint64_t nl = rd16(h + 26), xl = rd16(h + 28), data_at = at + LOCAL_LEN + nl + xl;
    if (data_at > end->cd_at || rd16(h + 8) != method || nl != strlen(e->name) || memcmp(h + LOCAL_LEN, e->name, nl))
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: entry '%s': its local header at offset %llu disagrees with the "
                         "central directory (name, method or length)", path, shown, (unsigned long long)at);
    if (e->size > end->cd_at - data_at)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: entry '%s': %llu bytes from offset %llu run past the start of the "
                         "central directory at %llu (truncated, or a bad size)", path, shown,
                         (unsigned long long)e->size, (unsigned long long)data_at, (unsigned long long)end->cd_at);
    e->data = b + data_at;
    e->data_at = data_at;
    return GPT2_OK;
}

/* One central-directory entry at *pos (advanced past it). Long by design: a
 * loader's validation, each field checked with its own message. */
static gpt2_status read_central(const char *path, const unsigned char *b, const zip_end *end, uint64_t *pos,
                                size_t i, zip_entry *e, gpt2_error *err) {
    const uint64_t cd_end = end->cd_at + end->cd_size;
    if (cd_end - *pos < CENTRAL_LEN || rd32(b + *pos) != SIG_CENTRAL)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: central directory entry %zu of %llu is not at offset %llu where "
                         "the directory says", path, i, (unsigned long long)end->n, (unsigned long long)*pos);
    const unsigned char *c = b + *pos;
    const uint16_t flags = rd16(c + 8), method = rd16(c + 10), nl = rd16(c + 28), xl = rd16(c + 30), cl = rd16(c + 32);
    if (cd_end - *pos - CENTRAL_LEN < (uint64_t)nl + xl + cl)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: central directory entry %zu runs past the directory's end", path, i);
    if (memchr(c + CENTRAL_LEN, 0, nl) || !(e->name = malloc((size_t)nl + 1)))
        return gpt2_fail(err, nl && !memchr(c + CENTRAL_LEN, 0, nl) ? GPT2_ERR_NOMEM : GPT2_ERR_FORMAT,
                         "%s: central directory entry %zu: %s", path, i,
                         memchr(c + CENTRAL_LEN, 0, nl) ? "its name holds a NUL byte" : "out of memory");
    memcpy(e->name, c + CENTRAL_LEN, nl);
    e->name[nl] = '\0';
    char shown[TEXT_SHOW_BUF];
    text_show(e->name, nl, shown);
    uint64_t usize = rd32(c + 24), csize = rd32(c + 20), local_at = rd32(c + 42);
    gpt2_status st = zip64_extra(path, shown, c + CENTRAL_LEN + nl, xl, &usize, &csize, &local_at, err);
    if (st) return st;
    if (flags & 1)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: entry '%s' is encrypted; gptscope reads only plain stored entries",
                         path, shown);
    if (method != 0 || csize != usize)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: entry '%s' is compressed (method %u, %llu bytes unpacking to %llu); "
                         "gptscope reads only stored entries, as torch.save writes them", path, shown, method,
                         (unsigned long long)csize, (unsigned long long)usize);
    e->size = usize;
    e->crc = rd32(c + 16);
    e->header_at = local_at;
    *pos += CENTRAL_LEN + (uint64_t)nl + xl + cl;
    return check_local(path, b, end, e, shown, method, err);
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const zip_entry *)a)->name, ((const zip_entry *)b)->name);
}

static int by_offset(const void *a, const void *b) {
    const zip_entry *x = *(const zip_entry *const *)a, *y = *(const zip_entry *const *)b;
    return (x->header_at > y->header_at) - (x->header_at < y->header_at);
}

/* Names unique; each entry's header and data end before the next entry's header begins. */
static gpt2_status check_disjoint(const zip_archive *z, gpt2_error *err) {
    char shown[TEXT_SHOW_BUF], shown2[TEXT_SHOW_BUF];
    for (size_t i = 1; i < z->n; i++)
        if (strcmp(z->entries[i - 1].name, z->entries[i].name) == 0)
            return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: entry '%s' appears twice", z->path,
                             text_show(z->entries[i].name, strlen(z->entries[i].name), shown));
    const zip_entry **o = malloc((z->n ? z->n : 1) * sizeof *o);
    if (!o) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", z->path);
    for (size_t i = 0; i < z->n; i++) o[i] = &z->entries[i];
    qsort(o, z->n, sizeof *o, by_offset);
    gpt2_status st = GPT2_OK;
    for (size_t i = 1; i < z->n && !st; i++)
        if (o[i - 1]->data_at + o[i - 1]->size > o[i]->header_at)
            st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: entries '%s' and '%s' overlap in the file, expected disjoint "
                           "entries", z->path, text_show(o[i - 1]->name, strlen(o[i - 1]->name), shown),
                           text_show(o[i]->name, strlen(o[i]->name), shown2));
    free(o);
    return st;
}

gpt2_status zip_open(const char *path, const void *data, size_t size, zip_archive *z, gpt2_error *err) {
    memset(z, 0, sizeof *z);
    z->path = path;
    const unsigned char *b = data;
    zip_end end = {0};
    gpt2_status st = read_end(path, b, size, &end, err);
    if (st) return st;
    if (end.cd_at > end.end_at || end.end_at - end.cd_at < end.cd_size)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: the central directory (%llu bytes at offset %llu) does not lie "
                         "before the end record at %llu (truncated?)", path, (unsigned long long)end.cd_size,
                         (unsigned long long)end.cd_at, (unsigned long long)end.end_at);
    if (end.n > ZIP_MAX_ENTRIES || end.n > end.cd_size / CENTRAL_LEN)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %llu entries in a central directory of %llu bytes (at most %d, "
                         "46 bytes each at least)", path, (unsigned long long)end.n, (unsigned long long)end.cd_size,
                         ZIP_MAX_ENTRIES);
    if (!(z->entries = calloc(end.n ? (size_t)end.n : 1, sizeof *z->entries)))
        return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    uint64_t pos = end.cd_at;
    for (size_t i = 0; i < end.n && !st; i++, z->n++) st = read_central(path, b, &end, &pos, i, &z->entries[i], err);
    if (!st) {
        qsort(z->entries, z->n, sizeof *z->entries, by_name);
        st = check_disjoint(z, err);
    }
    if (st) zip_close(z);
    return st;
}

void zip_close(zip_archive *z) {
    for (size_t i = 0; i < z->n; i++) free(z->entries[i].name);
    free(z->entries);
    memset(z, 0, sizeof *z);
}

const zip_entry *zip_find(const zip_archive *z, const char *name) {
    zip_entry key = {.name = (char *)name};
    return z->n ? bsearch(&key, z->entries, z->n, sizeof *z->entries, by_name) : NULL;
}

gpt2_status zip_check_crc(const zip_archive *z, const zip_entry *e, gpt2_error *err) {
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    uint32_t c = 0xFFFFFFFFu;
    for (uint64_t i = 0; i < e->size; i++) c = table[(c ^ e->data[i]) & 0xFF] ^ (c >> 8);
    if ((c ^ 0xFFFFFFFFu) == e->crc) return GPT2_OK;
    char shown[TEXT_SHOW_BUF];
    return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: entry '%s': CRC-32 %08x, the central directory says %08x (corrupt)",
                     z->path, text_show(e->name, strlen(e->name), shown), c ^ 0xFFFFFFFFu, e->crc);
}
