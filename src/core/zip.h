/* zip.h — a zip archive's stored entries, read in place from a mapping (library-private).
 *
 * What torch.save writes (PyTorch >= 1.6) is a zip whose entries are stored, not
 * compressed: ARCHIVE/data.pkl, ARCHIVE/data/0, ARCHIVE/data/1, ..., ARCHIVE/version.
 * This reader takes only that: every entry must be stored (method 0, compressed
 * size = size), so an entry's bytes are a range of the file and a "zip bomb"
 * (a small file that inflates to a huge one) cannot exist; a compressed,
 * encrypted or multi-disk archive is refused with a message saying so.
 *
 * Nothing in the file is trusted: the end-of-central-directory record (zip64
 * too) must lie where it says, every central-directory entry must fit the
 * directory, every local header must fit the file, carry the same name and
 * method as its central entry, and have its data inside the file before the
 * central directory; entries must not overlap and names must be unique.
 *
 *     zip_archive z;
 *     if (zip_open(path, map, size, &z, &err) != GPT2_OK) return err.status;
 *     const zip_entry *e = zip_find(&z, "ckpt/data.pkl");   // e->data, e->size
 *     zip_close(&z);
 */
#ifndef GPT2_CORE_ZIP_H
#define GPT2_CORE_ZIP_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_status.h"

enum { ZIP_MAX_ENTRIES = 1 << 20 };

typedef struct {
    char *name;                /* NUL-terminated, no NUL inside */
    const unsigned char *data; /* into the mapping */
    uint64_t size;
    uint32_t crc;              /* CRC-32 from the central directory */
    uint64_t header_at;        /* the local header's offset in the file */
    uint64_t data_at;          /* the data's offset in the file */
} zip_entry;

typedef struct {
    const char *path;          /* not owned: for messages */
    zip_entry *entries;        /* sorted by name */
    size_t n;
} zip_archive;

/* Reads the central directory of the size bytes at data (a mapping the caller
 * keeps). On failure nothing stays allocated. */
gpt2_status zip_open(const char *path, const void *data, size_t size, zip_archive *z, gpt2_error *err);
void zip_close(zip_archive *z);

/* The entry with that exact name, or NULL. */
const zip_entry *zip_find(const zip_archive *z, const char *name);

/* Checks an entry's bytes against its CRC-32 (GPT2_ERR_FORMAT naming it). */
gpt2_status zip_check_crc(const zip_archive *z, const zip_entry *e, gpt2_error *err);

#endif
