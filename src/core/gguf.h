/* gguf.h — a validated, memory-mapped view of a GGUF file (library-private).
 *
 * Format (ggml's docs/gguf.md), versions 2 and 3, little-endian:
 *   u32 magic "GGUF", u32 version, u64 tensor_count, u64 metadata_kv_count,
 *   metadata_kv_count x { string key, u32 value_type, value },
 *   tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type,
 *                    u64 offset },
 *   padding to general.alignment (default 32), then the data section; each
 *   tensor's offset is relative to it and a multiple of the alignment.
 * A string is u64 length + bytes (no NUL); an array is u32 element type, u64
 * count, then the elements. ne[0] is the fastest-varying dimension: a matrix
 * with ne = [in, out] is stored as out rows of in elements.
 *
 * gguf_open checks everything before anything is used: the magic and version,
 * counts against the bytes left, every key and string length, value types,
 * array element types (no arrays of arrays) and counts, duplicate keys and
 * tensor names, general.alignment (a power of two), each tensor's dimensions
 * (1 to 4, each >= 1, a product that does not overflow), its type (one this
 * engine runs, see quant.h; ne[0] a multiple of its block), its offset
 * (aligned, inside the data section) and byte range (inside the file, no
 * two overlapping). Every message names the file and the defect.
 */
#ifndef GPT2_CORE_GGUF_H
#define GPT2_CORE_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_model.h"
#include "gpt2_status.h"

enum {
    GGUF_U8 = 0, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL,
    GGUF_STRING, GGUF_ARRAY, GGUF_U64, GGUF_I64, GGUF_F64, GGUF_N_TYPES
};
enum { GGUF_MAX_DIMS = 4 };

typedef struct {
    const char *key;     /* into the map, key_len bytes, not NUL-terminated */
    size_t key_len;
    uint32_t type;       /* GGUF_U8 ... GGUF_F64 */
    uint32_t elem_type;  /* GGUF_ARRAY: its elements' type */
    uint64_t n;          /* GGUF_ARRAY: element count; GGUF_STRING: length */
    const uint8_t *val;  /* into the map: the value, a string's bytes, an array's first element */
} gguf_kv;

typedef struct {
    char *name;          /* NUL-terminated copy */
    int n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    gpt2_dtype dtype;
    const void *data;    /* into the map */
    size_t n_bytes;
} gguf_tensor;

typedef struct {
    char *path;          /* owned copy */
    void *map;           /* the whole file, read-only */
    size_t map_size;
    uint32_t version;
    size_t alignment;
    gguf_kv *kv;         /* in file order */
    size_t n_kv;
    gguf_tensor *tensors; /* in file order */
    size_t n_tensors;
} gguf_file;

/* Whether the first bytes of a file (n of them) are GGUF's magic. */
int gguf_sniff(const void *head, size_t n);

/* Maps and validates path. On failure nothing stays allocated. */
gpt2_status gguf_open(const char *path, gguf_file *f, gpt2_error *err);

/* The same over a mapping of path's size bytes (MAP_PRIVATE, read-only; NULL
 * for an empty file), which f owns from the call on: unmapped by gguf_close,
 * or at once on failure. */
gpt2_status gguf_open_map(const char *path, void *map, size_t size, gguf_file *f, gpt2_error *err);
void gguf_close(gguf_file *f);

/* The entry with that key, or NULL. */
const gguf_kv *gguf_find(const gguf_file *f, const char *key);

/* Typed getters: GPT2_ERR_FORMAT naming the file and key when the key is
 * missing (unless *present is given: then 0 there and GPT2_OK), of another
 * type, or out of [lo, hi]. Integers accept any integer type. */
gpt2_status gguf_get_int(const gguf_file *f, const char *key, int64_t lo, int64_t hi, int *present, int64_t *out,
                         gpt2_error *err);
gpt2_status gguf_get_float(const gguf_file *f, const char *key, double lo, double hi, int *present, double *out,
                           gpt2_error *err);
/* A string value: *s into the map (not NUL-terminated), *len bytes. */
gpt2_status gguf_get_str(const gguf_file *f, const char *key, const char **s, size_t *len, gpt2_error *err);
/* An array of strings (*present as above): its entry. Walk it with gguf_str_next. */
gpt2_status gguf_get_str_array(const gguf_file *f, const char *key, int *present, const gguf_kv **kv,
                               gpt2_error *err);

/* The next string of a validated string array: *p starts at kv->val. */
static inline const char *gguf_str_next(const uint8_t **p, size_t *len) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | (*p)[i];
    const char *s = (const char *)*p + 8;
    *p += 8 + n;
    *len = (size_t)n;
    return s;
}

/* "F32", "Q4_K": the name GGUF tools print for a tensor type. */
const char *gguf_dtype_name(gpt2_dtype dt);

#endif
