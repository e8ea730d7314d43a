/* safetensors.h — a validated, memory-mapped view of a .safetensors file (library-private).
 *
 * Format: u64 little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [r, c], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {...}}
 * then the data section; offsets are relative to its start. Opening checks every
 * entry: known dtype, non-negative integer shape and offsets, size = prod(shape) *
 * element size, range inside the data section, no two ranges overlapping.
 */
#ifndef GPT2_CORE_SAFETENSORS_H
#define GPT2_CORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_model.h"
#include "gpt2_status.h"

enum { ST_MAX_DIMS = 8 };

typedef struct {
    char *name;
    char dtype[12];       /* as written: "F32", "F16", "BF16", "I64", ...; from a GGUF file also
                             its block formats, "Q4_0", "Q6_K" ... (see quant.h) */
    int elem_size;        /* bytes per element (0 for a block format) */
    int n_dims;
    int64_t shape[ST_MAX_DIMS];
    const void *data;     /* into the mapping */
    size_t n_bytes;
    int rows_order;       /* ST_ROWS_*: its rows (outputs) lie in another order than the forward
                             pass reads, in rows_heads heads; the binder restores it (model.c) */
    int rows_heads;
} st_tensor;

enum {
    ST_ROWS_AS_IS = 0,
    ST_ROWS_ROPE_PAIRS,  /* llama.cpp's rotary order (pairs (2j, 2j+1)): a GGUF llama's attn_q/attn_k */
    ST_ROWS_QKV_BY_HEAD  /* q, k, v per head (H, 3, hd): HF GPT-NeoX's query_key_value */
};

/* One file of a sharded set, mapped whole (st_open_index). */
typedef struct {
    char *path;           /* the index's directory + the shard's name */
    void *map;
    size_t map_size;
} st_shard;

typedef struct {
    const char *path;     /* owned copy: the file, or a sharded set's index */
    void *map;            /* whole file, read-only; NULL for a sharded set */
    size_t map_size;
    st_tensor *tensors;   /* sorted by name */
    int n_tensors;
    st_shard *shards;     /* a sharded set's files, sorted by name; NULL for one file */
    int n_shards;
} st_file;

/* Maps and validates path. On failure nothing stays allocated. */
gpt2_status st_open(const char *path, st_file *f, gpt2_error *err);

/* A sharded set: Hugging Face's model.safetensors.index.json, parsed (root),
 * {"metadata": {...}, "weight_map": {"tensor name": "shard file name", ...}},
 * whose shards lie in the index's directory, each mapped and checked as
 * st_open does, seen as one tensor set: st_find, st_release and st_close work
 * as for one file. The index is the truth: f holds exactly the tensors
 * weight_map lists, each from the shard it names (a tensor a shard holds but
 * the index does not list is ignored: transformers too takes a checkpoint's
 * keys from the index); a tensor in two shards, or not in the shard named
 * for it, is refused. Messages name
 * index_path, or the shard for a defect of the shard itself. On failure
 * nothing stays allocated. */
struct cJSON;
gpt2_status st_open_index(const char *index_path, const struct cJSON *root, st_file *f, gpt2_error *err);

/* The same over a mapping already made (text_map_file): f owns map from here
 * on, and unmaps it on failure too. */
gpt2_status st_open_map(const char *path, void *map, size_t size, st_file *f, gpt2_error *err);
void st_close(st_file *f);

/* Drops the whole pages of [p, p + n), a range of f's mapping (of a sharded
 * set: of the shard's that holds p) that will not be read again, from this
 * process's memory (the file's page cache keeps them). */
void st_release(const st_file *f, const void *p, size_t n);

/* The tensor with that exact name, or NULL. */
const st_tensor *st_find(const st_file *f, const char *name);

/* --- writing -----------------------------------------------------------------
 * A tensor to write, given row by row as floats: shape (cols) when n_dims is 1
 * (rows is then 1), (rows, cols) when 2. */
typedef struct {
    const char *name;
    int n_dims;
    int64_t rows, cols;
    void (*row)(const void *user, int64_t r, float *out); /* out: cols floats */
    const void *user;
    gpt2_dtype dtype; /* written as: F32, or F16 / BF16 rounded to nearest even */
} st_out;

/* Writes a safetensors file atomically (gpt2_fileio): header {"__metadata__":
 * {"format": "pt"}, then the tensors in order}, padded with spaces to a
 * multiple of 8 bytes, then the tensors' data back to back, each in its
 * dtype, converted a row at a time (memory: one row, whatever the model's size). */
gpt2_status st_write(const char *path, const st_out *t, int n, gpt2_error *err);

#endif
