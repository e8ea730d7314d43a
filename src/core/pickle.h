/* pickle.h — a restricted pickle reader for weights files (library-private).
 *
 * Python's pickle is a small stack machine whose GLOBAL and REDUCE opcodes
 * call any function by name: loading an untrusted pickle with Python runs its
 * code. This reader never calls anything. It builds plain values (None, bools,
 * integers up to 64 bits, floats, strings, bytes, tuples, lists, dicts) and
 * knows exactly these globals, which is all torch.save writes for a state dict
 * and a checkpoint around it (nanoGPT's ckpt.pt, HF's pytorch_model.bin) and
 * all a nanoGPT meta.pkl holds:
 *
 *     collections.OrderedDict          called with () -> an empty dict; BUILD's
 *                                      state (a state dict's _metadata) dropped
 *     torch._utils._rebuild_tensor_v2  (storage, offset, size, stride,
 *                                      requires_grad, hooks[, metadata]) -> a tensor
 *     torch._utils._rebuild_parameter  (tensor, requires_grad, hooks) -> the tensor
 *     torch.FloatStorage, HalfStorage, BFloat16Storage, DoubleStorage,
 *     LongStorage, IntStorage, ShortStorage, CharStorage, ByteStorage,
 *     BoolStorage                      only inside a persistent id:
 *                                      ('storage', TYPE, key, location, numel)
 *                                      -> a storage: the zip entry ARCHIVE/data/KEY
 *
 * Any other global ("os.system", "builtins.eval", "numpy...") is refused at the
 * GLOBAL opcode, before anything could be called, naming it; so is any opcode
 * outside protocols 2-5's data opcodes (INST, OBJ, NEWOBJ, EXT, the text
 * protocol 0 forms, ...). Limits: containers nested at most PK_MAX_DEPTH deep
 * (a container may not hold itself), memo indices below PK_MAX_MEMO, at most
 * PK_MAX_VALUES values. Every message names the file, the entry, the byte and
 * the defect.
 *
 *     pk_doc doc;
 *     if (pickle_load(path, "ckpt/data.pkl", bytes, n, &doc, &err)) return err.status;
 *     const pk_value *model = pk_dict_get(doc.root, "model");
 *     pickle_free(&doc);
 */
#ifndef GPT2_CORE_PICKLE_H
#define GPT2_CORE_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_status.h"

enum { PK_MAX_DEPTH = 64, PK_MAX_MEMO = 1 << 20, PK_MAX_VALUES = 1 << 22, PK_MAX_DIMS = 8 };

typedef enum {
    PK_NONE, PK_BOOL, PK_INT, PK_FLOAT, PK_STR, PK_BYTES,
    PK_TUPLE, PK_LIST, PK_DICT,  /* seq: DICT holds key, value, key, value, ... */
    PK_GLOBAL,                   /* one of the globals above, before it is called */
    PK_STORAGE, PK_TENSOR
} pk_kind;

typedef enum { PK_G_ORDERED_DICT, PK_G_REBUILD_TENSOR, PK_G_REBUILD_PARAMETER, PK_G_STORAGE } pk_global;

typedef struct pk_value pk_value;

typedef struct {
    const pk_value *storage;     /* PK_STORAGE */
    int64_t offset;              /* in elements */
    int n_dims;
    int64_t shape[PK_MAX_DIMS], stride[PK_MAX_DIMS];
} pk_tensor;

struct pk_value {
    pk_kind kind;
    int depth;                   /* 0 for scalars, 1 + the deepest element for containers */
    union {
        int64_t i;               /* BOOL, INT */
        double f;                /* FLOAT */
        struct { const char *s; size_t n; } str; /* STR (UTF-8 as written), BYTES; NUL-terminated copy */
        struct { pk_value **v; size_t n, cap; } seq;
        struct {                 /* GLOBAL; STORAGE (a storage's type is a PK_G_STORAGE global) */
            pk_global which;
            char dtype[8];       /* safetensors' names: "F32", "F16", "BF16", "I64", ... */
            int elem_size;
            const char *key;     /* STORAGE: its zip entry's last component */
            int64_t numel;       /* STORAGE: elements */
        } g;
        const pk_tensor *t;      /* TENSOR */
    } u;
};

typedef struct pk_block pk_block;

typedef struct {
    const pk_value *root;        /* what STOP returned */
    pk_block *blocks;            /* every allocation, freed together */
    size_t n_values;
} pk_doc;

/* Runs the pickle in data[0..n) with the restrictions above. path and what
 * ("ckpt/data.pkl", "meta.pkl") name it in messages. On failure nothing stays
 * allocated. */
gpt2_status pickle_load(const char *path, const char *what, const void *data, size_t n, pk_doc *doc,
                        gpt2_error *err);
void pickle_free(pk_doc *doc);

/* The value under a string key in a dict (the last, as Python keeps), or NULL. */
const pk_value *pk_dict_get(const pk_value *dict, const char *key);

/* The text of a STR value, or NULL for anything else. */
const char *pk_str(const pk_value *v);

#endif
