/* checkpoint_craft.h — checkpoint files as a hostile or buggy writer could
 * make them: bytes changed and the FNV-1a checksum made right again, from the
 * format described in src/train/checkpoint.c (not from its code). */
#ifndef GPTSCOPE_CHECKPOINT_CRAFT_H
#define GPTSCOPE_CHECKPOINT_CRAFT_H

#include "test_util.h"

/* header: "GPT2CKPT", u32 version (4), u32 n_fields (27), then 27 u64 fields;
 * version 3 the same with field 26 (short_offsets) a flag 0 or 1 instead of
 * a float, version 2 had 26 (no field 26), version 1 23 (nor short_block,
 * short_steps, attn_dropout: fields 22-24) */
enum { CKPT_FIELD0 = 16, CKPT_HEAD = 16 + 27 * 8, CKPT_STEP_FIELD = 18 };

static inline uint64_t ckpt_fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Writes n bytes to path. */
static inline void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* Writes orig (len bytes) to path with vlen bytes at off replaced by val and
 * the trailing checksum recomputed. */
static inline void ckpt_craft(const char *path, const char *orig, size_t len, size_t off, const void *val,
                              size_t vlen) {
    unsigned char *b = malloc(len);
    assert_non_null(b);
    memcpy(b, orig, len);
    memcpy(b + off, val, vlen);
    uint64_t h = ckpt_fnv1a(b, len - 8);
    memcpy(b + len - 8, &h, 8);
    write_bytes(path, b, len);
    free(b);
}

#endif
