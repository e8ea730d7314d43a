/* checkpoint.c — save and resume a training run exactly.
 *
 * File layout (little-endian, as the x86-64 and arm64 machines that run this):
 *   "GPT2CKPT"  8 bytes magic
 *   u32 version (4), u32 n_fields (27)
 *   n_fields x u64: the params, step, RNG, data hash, n_params, the
 *   short-window warmup, attention dropout, the warmup's two position-row
 *   options (see FIELDS; field 25 was reserved, 0, before it held its flag)
 *   f32 params[n_params], f32 adam_m[n_params], f32 adam_v[n_params]
 *   u64 FNV-1a of every byte before it
 * The file size must match the header exactly and the hash must agree, so a
 * truncated or damaged checkpoint is refused with the reason; every field is
 * range-checked and every value must be finite, so a crafted one is too.
 * Version 3 (27 fields, short_offsets a flag 0 or 1 where version 4 holds a
 * fraction as a float) resumes with the flag as the fraction 0 or 1, version
 * 2 (26 fields: no short_offsets) as a run without it, and version 1 (23
 * fields: none of the three before field 25) as a run without a warmup or
 * attention dropout.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/textio.h"
#include "gpt2_fileio.h"
#include "train/train_internal.h"

enum { CKPT_VERSION = 4, CKPT_FIELDS = 27, CKPT_V2_FIELDS = 26, CKPT_V1_FIELDS = 23 };
static const char CKPT_MAGIC[8] = {'G', 'P', 'T', '2', 'C', 'K', 'P', 'T'};

typedef struct {
    uint64_t h;
} fnv;
static void fnv_add(fnv *f, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) f->h = (f->h ^ p[i]) * 0x100000001b3ull;
}

static uint64_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint64_t u) {
    uint32_t v = (uint32_t)u;
    float f;
    memcpy(&f, &v, 4);
    return f;
}

/* The header fields, in file order. */
static void pack(const gpt2_trainer *tr, uint64_t data_hash, uint64_t *f) {
    const gpt2_train_params *p = &tr->p;
    uint64_t v[CKPT_FIELDS] = {(uint64_t)p->n_layer, (uint64_t)p->n_head, (uint64_t)p->n_embd,
                               (uint64_t)p->block_size, (uint64_t)p->n_vocab, (uint64_t)p->batch_size,
                               (uint64_t)p->steps, (uint64_t)p->warmup_steps, f2u(p->lr), f2u(p->min_lr),
                               f2u(p->weight_decay), f2u(p->beta1), f2u(p->beta2), f2u(p->adam_eps),
                               f2u(p->grad_clip), f2u(p->dropout), p->seed, (uint64_t)p->n_threads,
                               (uint64_t)tr->step, tr->rng, data_hash, tr->n_params, (uint64_t)p->short_block,
                               (uint64_t)p->short_steps, f2u(p->attn_dropout), (uint64_t)p->short_init_positions,
                               f2u(p->short_offsets)};
    memcpy(f, v, sizeof v);
}

static void unpack(const uint64_t *f, gpt2_train_params *p, int *step, uint64_t *rng, uint64_t *data_hash,
                   uint64_t *n_params) {
    *p = (gpt2_train_params){.n_layer = (int)f[0], .n_head = (int)f[1], .n_embd = (int)f[2],
                             .block_size = (int)f[3], .n_vocab = (int)f[4], .batch_size = (int)f[5],
                             .steps = (int)f[6], .warmup_steps = (int)f[7], .lr = u2f(f[8]), .min_lr = u2f(f[9]),
                             .weight_decay = u2f(f[10]), .beta1 = u2f(f[11]), .beta2 = u2f(f[12]),
                             .adam_eps = u2f(f[13]), .grad_clip = u2f(f[14]), .dropout = u2f(f[15]),
                             .seed = f[16], .n_threads = (int)f[17], .short_block = (int)f[22],
                             .short_steps = (int)f[23], .attn_dropout = u2f(f[24]),
                             .short_init_positions = (int)f[25], .short_offsets = u2f(f[26])};
    *step = (int)f[18], *rng = f[19], *data_hash = f[20], *n_params = f[21];
}

typedef struct {
    const gpt2_trainer *tr;
    uint64_t data_hash;
} ckpt_job;

static gpt2_status put_checkpoint(FILE *f, void *user, gpt2_error *err) {
    const ckpt_job *j = user;
    fnv h = {0xcbf29ce484222325ull};
    uint32_t head[2] = {CKPT_VERSION, CKPT_FIELDS};
    uint64_t fields[CKPT_FIELDS];
    pack(j->tr, j->data_hash, fields);
    fwrite(CKPT_MAGIC, 8, 1, f), fwrite(head, sizeof head, 1, f), fwrite(fields, sizeof fields, 1, f);
    fnv_add(&h, CKPT_MAGIC, 8), fnv_add(&h, head, sizeof head), fnv_add(&h, fields, sizeof fields);
    const float *arrays[3] = {j->tr->params, j->tr->m, j->tr->v};
    for (int a = 0; a < 3; a++) {
        fwrite(arrays[a], sizeof(float), j->tr->n_params, f);
        fnv_add(&h, arrays[a], j->tr->n_params * sizeof(float));
    }
    fwrite(&h.h, 8, 1, f);
    return GPT2_OK;
}

gpt2_status gpt2_trainer_save(const gpt2_trainer *tr, const char *path, uint64_t data_hash, gpt2_error *err) {
    char bad[256];
    if (!trainer_values_ok(tr, 1, bad, sizeof bad))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                         "%s: checkpoint not written: %s (training diverged?); the file there is kept", path, bad);
    ckpt_job j = {tr, data_hash};
    return gpt2_fileio_write_atomic(path, put_checkpoint, &j, err);
}

/* Each header field's name and what it may hold: an int (0..INT_MAX), a
 * finite float in the low 32 bits, any 64-bit value, 0 or 1, or a float
 * 0..1. */
enum { K_INT, K_FLOAT, K_ANY, K_BOOL, K_FRACTION };
static const struct {
    const char *name;
    int kind;
} FIELDS[CKPT_FIELDS] = {
    {"n_layer", K_INT},    {"n_head", K_INT},      {"n_embd", K_INT},       {"block_size", K_INT},
    {"n_vocab", K_INT},    {"batch_size", K_INT},  {"steps", K_INT},        {"warmup_steps", K_INT},
    {"lr", K_FLOAT},       {"min_lr", K_FLOAT},    {"weight_decay", K_FLOAT}, {"beta1", K_FLOAT},
    {"beta2", K_FLOAT},    {"adam_eps", K_FLOAT},  {"grad_clip", K_FLOAT},  {"dropout", K_FLOAT},
    {"seed", K_ANY},       {"n_threads", K_INT},   {"step", K_INT},         {"rng", K_ANY},
    {"data_hash", K_ANY},  {"n_params", K_ANY},    {"short_block", K_INT},  {"short_steps", K_INT},
    {"attn_dropout", K_FLOAT}, {"short_init_positions", K_BOOL}, {"short_offsets", K_FRACTION},
};
enum { F_STEPS = 6, F_STEP = 18, F_NPARAMS = 21, F_OFFSETS = 26 };

/* Range checks of the header, before any of it is used: a checksum only
 * says the file is as written, not that a sane run wrote it. */
static gpt2_status check_fields(const char *path, const uint64_t *f, gpt2_error *err) {
    for (int i = 0; i < CKPT_FIELDS; i++) {
        const char *n = FIELDS[i].name;
        const unsigned long long v = f[i];
        if (FIELDS[i].kind == K_INT && v > INT_MAX)
            return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %s = %llu is out of range 0..%d", path, n, v, INT_MAX);
        if (FIELDS[i].kind == K_FLOAT && (v >> 32 || !isfinite(u2f(v))))
            return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %s = 0x%llx is not a finite 32-bit float", path, n, v);
        if (FIELDS[i].kind == K_BOOL && v > 1)
            return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %s = %llu, expected 0 or 1", path, n, v);
        if (FIELDS[i].kind == K_FRACTION && (v >> 32 || !(u2f(v) >= 0 && u2f(v) <= 1)))
            return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %s = 0x%llx is not a 32-bit float 0..1", path, n, v);
    }
    if (f[F_STEP] > f[F_STEPS])
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: step = %llu is past the run's end (steps = %llu)", path,
                         (unsigned long long)f[F_STEP], (unsigned long long)f[F_STEPS]);
    return GPT2_OK;
}

/* Long by design: a loader's validation, the header's fields range-checked
 * one by one before anything is allocated from them. */
gpt2_status gpt2_trainer_resume(const char *path, int n_threads, gpt2_trainer **out, uint64_t *data_hash,
                                gpt2_error *err) {
    *out = NULL;
    size_t len;
    char *data = NULL;
    gpt2_status st = text_read_file(path, (size_t)1 << 40, GPT2_ERR_FORMAT, "checkpoint", &data, &len, err);
    if (st != GPT2_OK) return st;
    uint32_t head[2];
    uint64_t fields[CKPT_FIELDS] = {0};
    if (len < 16 + 8 || memcmp(data, CKPT_MAGIC, 8) != 0) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: not a gptscope checkpoint (no GPT2CKPT header)", path);
        goto out;
    }
    memcpy(head, data + 8, sizeof head);
    const int v1 = head[0] == 1 && head[1] == CKPT_V1_FIELDS, v2 = head[0] == 2 && head[1] == CKPT_V2_FIELDS,
              v3 = head[0] == 3 && head[1] == CKPT_FIELDS;
    if (!v1 && !v2 && !v3 && (head[0] != CKPT_VERSION || head[1] != CKPT_FIELDS)) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT,
                       "%s: checkpoint version %u with %u fields; this build reads versions 1 (%d fields), 2 (%d), "
                       "3 (%d) and %d (%d)", path, head[0], head[1], CKPT_V1_FIELDS, CKPT_V2_FIELDS, CKPT_FIELDS,
                       CKPT_VERSION, CKPT_FIELDS);
        goto out;
    }
    const size_t head_bytes = 8 + 8 + (size_t)head[1] * 8;
    if (len < head_bytes + 8) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %zu bytes, shorter than its header (truncated?)", path, len);
        goto out;
    }
    if (v1) { /* fields 0..21, then its last (then reserved) as field 25; the newer ones stay 0 */
        memcpy(fields, data + 16, (CKPT_V1_FIELDS - 1) * 8);
        memcpy(fields + 25, data + 16 + (CKPT_V1_FIELDS - 1) * 8, 8);
    } else {
        memcpy(fields, data + 16, (size_t)head[1] * 8); /* version 2: short_offsets stays 0 */
    }
    const uint64_t np = fields[F_NPARAMS]; /* the size first: a cut file says so, whatever its fields hold */
    if (np > (len - head_bytes - 8) / 12 || len != head_bytes + 12 * np + 8) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %zu bytes, expected %llu for the %llu parameters it declares "
                       "(truncated?)", path, len, (unsigned long long)(head_bytes + 12 * np + 8), (unsigned long long)np);
        goto out;
    }
    if (v3 && fields[F_OFFSETS] > 1) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: short_offsets = %llu, expected 0 or 1 (version 3)", path,
                       (unsigned long long)fields[F_OFFSETS]);
        goto out;
    }
    if (v3) fields[F_OFFSETS] = f2u((float)fields[F_OFFSETS]); /* the flag as a fraction */
    if ((st = check_fields(path, fields, err)) != GPT2_OK) goto out;
    gpt2_train_params p;
    int step;
    uint64_t rng, n_params;
    unpack(fields, &p, &step, &rng, data_hash, &n_params);
    if (n_threads >= 0) p.n_threads = n_threads;
    /* The shapes must make the parameters the file holds before anything is
     * allocated for them: else a few hundred bytes could ask for gigabytes. */
    size_t planned = 0;
    gpt2_trainer *tr;
    if ((st = trainer_plan(&p, &planned, err)) == GPT2_OK && planned != n_params) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT,
                       "%s: n_params = %llu, but %d layers of width %d, block %d and %d tokens make %zu parameters",
                       path, (unsigned long long)n_params, p.n_layer, p.n_embd, p.block_size, p.n_vocab, planned);
        goto out;
    }
    if (st != GPT2_OK || (st = gpt2_trainer_new(p, &tr, err)) != GPT2_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", err->msg);
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: invalid settings in checkpoint: %s", path, why);
        goto out;
    }
    const size_t want = head_bytes + 3 * tr->n_params * sizeof(float) + 8;
    if (n_params != tr->n_params || len != want) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %zu bytes, expected %zu for %zu parameters (truncated?)", path, len,
                       want, tr->n_params);
        gpt2_trainer_free(tr);
        goto out;
    }
    fnv h = {0xcbf29ce484222325ull};
    fnv_add(&h, data, len - 8);
    uint64_t stored;
    memcpy(&stored, data + len - 8, 8);
    if (stored != h.h) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: checksum mismatch (file damaged)", path);
        gpt2_trainer_free(tr);
        goto out;
    }
    const char *src = data + head_bytes;
    float *arrays[3] = {tr->params, tr->m, tr->v};
    for (int a = 0; a < 3; a++, src += tr->n_params * sizeof(float))
        memcpy(arrays[a], src, tr->n_params * sizeof(float));
    char bad[256];
    if (!trainer_values_ok(tr, 1, bad, sizeof bad)) {
        st = gpt2_fail(err, GPT2_ERR_FORMAT, "%s: %s; a checkpoint holds finite values (second moments >= 0)",
                       path, bad);
        gpt2_trainer_free(tr);
        goto out;
    }
    tr->step = step;
    tr->rng = rng;
    *out = tr;
out:
    free(data);
    return st;
}
