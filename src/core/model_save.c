/* model_save.c — a loaded model written back as a Hugging Face GPT-2 directory
 * (gpt2_model_save): config.json, model.safetensors, vocab.json + merges.txt,
 * each atomically. Whatever format the model came from, what it holds is
 * already the HF layout (Conv1D matrices (in, out), absent biases as zeros or
 * NULL, the vocabulary without padding), so every tensor is read back from the
 * loaded model a row at a time: no second copy of the weights. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gpt2_fileio.h"
#include "model_internal.h"
#include "model_source.h"
#include "tokenizer_internal.h"

/* One tensor of the model: a matrix (read through kernel_row, packed or not),
 * or a float vector (NULL: zeros, a bias the source left out). A block-format
 * matrix stored by output (trans) is widened whole into *wide on its first
 * row, since its rows are the stored matrix's columns. */
typedef struct {
    const gpt2_matrix *w;
    const float *v;
    int64_t n;
    float **wide;  /* the one widened matrix (shared, replaced per matrix) */
} save_src;

/* wide = w as (rows, cols) floats, read one stored row (output) at a time
 * into the rows floats after it. */
static void widen_transposed(const gpt2_matrix *w, float *wide) {
    kernel_widen(wide, wide + (size_t)w->rows * (size_t)w->cols, w);
}

static void save_row(const void *user, int64_t r, float *out) {
    const save_src *s = user;
    if (s->w && s->w->trans) {
        if (r == 0) widen_transposed(s->w, *s->wide);
        memcpy(out, *s->wide + r * s->n, (size_t)s->n * sizeof *out);
    } else if (s->w) {
        kernel_row(out, s->w, (int)r);
    } else if (s->v) {
        memcpy(out, s->v + r * s->n, (size_t)s->n * sizeof *out);
    } else {
        memset(out, 0, (size_t)s->n * sizeof *out);
    }
}

/* The type a tensor is written in: dt, or with dt GPT2_SAVE_STORED a matrix's
 * own (F32 for a block format, whose dequantized values are floats). */
enum { GPT2_SAVE_STORED = -1 };
static gpt2_dtype out_dtype(int dt, const gpt2_matrix *w) {
    if (dt != GPT2_SAVE_STORED) return (gpt2_dtype)dt;
    return w && w->dtype <= GPT2_DTYPE_BF16 ? w->dtype : GPT2_DTYPE_F32;
}

/* A vector's (norms, biases, positions: widened to floats at load) with
 * GPT2_SAVE_STORED: the matrices' 16-bit type when every value survives it
 * exactly (a Hugging Face F16 model's, bit for bit), else F32 (llama.cpp
 * keeps them F32 beside F16 matrices: rounding them would move the logits). */
static gpt2_dtype vector_dtype(int dt, gpt2_dtype matrices, const float *v, int64_t n) {
    if (dt != GPT2_SAVE_STORED) return (gpt2_dtype)dt;
    for (int64_t i = 0; v && matrices != GPT2_DTYPE_F32 && i < n; i++) {
        float back = matrices == GPT2_DTYPE_F16 ? gpt2_f16_to_f32(gpt2_f32_to_f16(v[i]))
                                                : gpt2_bf16_to_f32(gpt2_f32_to_bf16(v[i]));
        if (memcmp(&back, &v[i], sizeof back) != 0) return GPT2_DTYPE_F32;
    }
    return matrices;
}

/* Fills o[i] and s[i] for one tensor; returns i + 1. */
static int add_matrix(st_out *o, save_src *s, int i, const char *name, const gpt2_matrix *w, int dt) {
    s[i] = (save_src){w, NULL, w->cols, NULL};
    o[i] = (st_out){name, 2, w->rows, w->cols, save_row, &s[i], out_dtype(dt, w)};
    return i + 1;
}

static int add_vector(st_out *o, save_src *s, int i, const char *name, const float *v, int64_t rows, int64_t n,
                      int dt) {
    s[i] = (save_src){NULL, v, n, NULL};
    o[i] = (st_out){name, rows > 1 ? 2 : 1, rows, n, save_row, &s[i], vector_dtype(dt, o[0].dtype, v, rows * n)};
    return i + 1;
}

static gpt2_status save_weights(const gpt2_model *m, const char *path, int dt, gpt2_error *err) {
    const gpt2_config *c = &m->cfg;
    const int n_max = 5 + 12 * c->n_layer, C = c->n_embd, F = m->n_inner;
    st_out *o = calloc((size_t)n_max, sizeof *o);
    save_src *s = calloc((size_t)n_max, sizeof *s);
    char (*names)[48] = calloc((size_t)n_max, sizeof *names);
    if (!o || !s || !names) {
        free(o), free(s), free(names);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    }
    int n = add_matrix(o, s, 0, "wte.weight", &m->wte, dt);
    n = add_vector(o, s, n, "wpe.weight", m->wpe, c->n_ctx, C, dt);
    for (int l = 0; l < c->n_layer; l++) {
        const gpt2_layer *L = &m->layers[l];
        static const char *const part[12] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                             "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                             "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
        for (int k = 0; k < 12; k++) snprintf(names[n + k], sizeof names[n + k], "h.%d.%s", l, part[k]);
        n = add_vector(o, s, n, names[n], L->ln1_g, 1, C, dt);
        n = add_vector(o, s, n, names[n], L->ln1_b, 1, C, dt);
        n = add_matrix(o, s, n, names[n], &L->attn_w, dt);
        n = add_vector(o, s, n, names[n], L->attn_b, 1, 3 * C, dt);
        n = add_matrix(o, s, n, names[n], &L->proj_w, dt);
        n = add_vector(o, s, n, names[n], L->proj_b, 1, C, dt);
        n = add_vector(o, s, n, names[n], L->ln2_g, 1, C, dt);
        n = add_vector(o, s, n, names[n], L->ln2_b, 1, C, dt);
        n = add_matrix(o, s, n, names[n], &L->fc_w, dt);
        n = add_vector(o, s, n, names[n], L->fc_b, 1, F, dt);
        n = add_matrix(o, s, n, names[n], &L->fcproj_w, dt);
        n = add_vector(o, s, n, names[n], L->fcproj_b, 1, C, dt);
    }
    n = add_vector(o, s, n, "ln_f.weight", m->lnf_g, 1, C, dt);
    n = add_vector(o, s, n, "ln_f.bias", m->lnf_b, 1, C, dt);
    if (m->lm_head.data != m->wte.data) n = add_matrix(o, s, n, "lm_head.weight", &m->lm_head, dt);
    /* the largest matrix stored by output, and one of its stored rows */
    const size_t big = (size_t)C * (size_t)(3 * C > F ? 3 * C : F) + (size_t)(C > F ? C : F);
    float *wide = NULL;
    int any_trans = 0;
    for (int i = 0; i < n; i++) s[i].wide = &wide, any_trans |= s[i].w && s[i].w->trans;
    wide = any_trans ? malloc(big * sizeof *wide) : NULL;
    gpt2_status st = any_trans && !wide ? gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path) : GPT2_OK;
    if (!st) st = st_write(path, o, n, err);
    free(o), free(s), free(names), free(wide);
    return st;
}

static gpt2_status save_config(const gpt2_model *m, const char *path, gpt2_dtype dt, gpt2_error *err) {
    const source_config sc = {m->cfg, m->n_inner, m->gelu_erf, m->lm_head.data == m->wte.data,
                              m->tok ? gpt2_tokenizer_eot(m->tok) : -1, dt, -1, m->source};
    return source_write_config(path, &sc, err);
}

static gpt2_status save(const gpt2_model *m, const char *dir, int dtype, gpt2_error *err) {
    if (m->cfg.arch.family[0] && strcmp(m->cfg.arch.family, "gpt2") != 0)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "save: %s is a %s model; gptscope writes only GPT-2 models so far",
                         m->name, m->cfg.arch.family);
    if (m->wte.dtype == GPT2_DTYPE_Q8 || m->layers[0].fc_w.dtype == GPT2_DTYPE_Q8)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "save: %s holds 8-bit weights; save it before quantizing", m->name);
    if (!m->tok) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "save: %s has no tokenizer", m->name);
    char path[4096];
    gpt2_status st = gpt2_fileio_mkdirs(dir, err);
    if (!st && !(st = gpt2_fileio_join(path, sizeof path, dir, "model.safetensors", err)))
        st = save_weights(m, path, dtype, err);
    /* config.json's torch_dtype: the matrices' type as written */
    const gpt2_dtype cfg_dt = out_dtype(dtype, &m->layers[0].fc_w);
    if (!st && !(st = gpt2_fileio_join(path, sizeof path, dir, "config.json", err))) st = save_config(m, path, cfg_dt, err);
    if (!st) st = tok_save(m->tok, dir, err);
    return st;
}

gpt2_status gpt2_model_save(const gpt2_model *m, const char *dir, gpt2_dtype dtype, gpt2_error *err) {
    if (dtype != GPT2_DTYPE_F32 && dtype != GPT2_DTYPE_F16 && dtype != GPT2_DTYPE_BF16)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "save: dtype %s, expected f32, f16 or bf16", gpt2_dtype_name(dtype));
    return save(m, dir, dtype, err);
}

gpt2_status gpt2_model_save_stored(const gpt2_model *m, const char *dir, gpt2_error *err) {
    return save(m, dir, GPT2_SAVE_STORED, err);
}
