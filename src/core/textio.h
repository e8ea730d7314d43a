/* textio.h — reading small text files, and quoting their contents in error
 * messages (library-private). Shared by the config, safetensors-header and
 * tokenizer loaders, which all face the same hostile input. */
#ifndef GPT2_CORE_TEXTIO_H
#define GPT2_CORE_TEXTIO_H

#include <stddef.h>

#include "gpt2_status.h"

/* Reads all of a regular file into a malloc'd buffer with a NUL after the last
 * byte. Not a regular file (a FIFO, a device) -> GPT2_ERR_IO at once, never a
 * hang; more than max_bytes -> too_big_status, naming `what` ("config file"). */
gpt2_status text_read_file(const char *path, size_t max_bytes, gpt2_status too_big_status, const char *what,
                           char **data, size_t *len, gpt2_error *err);

/* Maps a whole regular file read-only (MAP_PRIVATE): *map and *size, to
 * munmap. Not a regular file (a FIFO, a device) -> GPT2_ERR_IO "not a regular
 * file" at once, never a hang. A 0-byte file gives *map = NULL, *size = 0 (a
 * loader then says what it expected). */
gpt2_status text_map_file(const char *path, void **map, size_t *size, gpt2_error *err);

/* Offset of the first NUL inside a JSON string of text (raw, or the escape
 * \u0000), or -1. cJSON keeps strings NUL-terminated, so such a name would
 * silently lose its tail. Only for text cJSON accepted, where string
 * boundaries are where a plain scan sees them. */
long text_json_nul(const char *text, size_t len);

enum { TEXT_SHOW_MAX = 60, TEXT_SHOW_BUF = TEXT_SHOW_MAX + 4 };

/* n bytes of s fit for a one-line message, in buf: gpt2_text_escape's form
 * (control bytes and invalid UTF-8 as \xNN), cut to TEXT_SHOW_BUF - 1 bytes
 * with "..." when longer. */
const char *text_show(const char *s, size_t n, char buf[TEXT_SHOW_BUF]);

#endif
