/* model_save.c — a loaded model written back as a Hugging Face directory of its
 * own architecture (gpt2_model_save), each file atomically:
 *   GPT-2     config.json, model.safetensors, vocab.json + merges.txt. Whatever
 *             format the model came from, what it holds is already the HF layout
 *             (Conv1D matrices (in, out), absent biases as zeros or NULL, the
 *             vocabulary without padding).
 *   the rest  config.json of the family (arch.c), model.safetensors under HF's
 *             names as nn.Linear (out, in) — q, k, v and gate, up split from the
 *             matrices a load joins, GPT-NeoX's query_key_value put back per head,
 *             biases where the family has them — and the tokenizer: an HF source
 *             directory's files copied byte for byte, else tokenizer.json,
 *             tokenizer_config.json and generation_config.json written from the
 *             loaded tokenizer and chat template (tokenizer_save.c).
 * Every tensor is read back from the loaded model a row at a time: no second copy
 * of the weights (a float matrix that rows of outputs are cut from is widened one
 * at a time). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "arch.h"
#include "error.h"
#include "gpt2_fileio.h"
#include "json.h"
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

static gpt2_status save_family(const gpt2_model *m, const char *dir, int dtype, gpt2_error *err);

static gpt2_status save(const gpt2_model *m, const char *dir, int dtype, gpt2_error *err) {
    if (m->wte.dtype == GPT2_DTYPE_Q8 || m->layers[0].fcproj_w.dtype == GPT2_DTYPE_Q8)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "save: %s holds 8-bit weights; save it before quantizing", m->name);
    if (!m->tok) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "save: %s has no tokenizer", m->name);
    if (m->cfg.arch.family[0] && strcmp(m->cfg.arch.family, "gpt2") != 0) return save_family(m, dir, dtype, err);
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

/* --- the families beyond GPT-2 ---------------------------------------------------- */

/* A float matrix widened to (out, in), so that its outputs can be read as rows: the one
 * the rows come from now (shared by the tensors cut from it). */
enum { CUT_ROWS = 16 };
typedef struct {
    const gpt2_matrix *of;
    float *wide; /* (cols, rows) floats, then CUT_ROWS rows of cols */
} out_rows;

/* One tensor cut from the model: rows of an nn.Linear (out, in) weight taken from the
 * outputs of w, or (w NULL) a vector of n floats from v (NULL: zeros). heads > 0: GPT-NeoX's
 * query_key_value, whose rows HF keeps per head (H, 3, hd) where w's are [q | k | v]. */
typedef struct {
    const gpt2_matrix *w;
    const float *v;
    int off, n, heads, outs; /* the first output taken; per row: inputs (w) or floats (v); outs: all of w's / v's */
    int by_row;              /* 1: w's own rows (the embedding and head, (V, C) as held) */
    out_rows *cache;
    float shift;             /* added to v's floats: -1 for Gemma's norms, held as 1 + w, written as w */
} cut_src;

/* Output (or element) j of the tensor: which of the model's it is. */
static int cut_index(const cut_src *s, int64_t j) {
    if (!s->heads) return s->off + (int)j;
    const int C = s->outs / 3, hd = C / s->heads, h = (int)(j / (3 * hd)), part = (int)(j / hd) % 3;
    return part * C + h * hd + (int)(j % hd);
}

static void cut_row(const void *user, int64_t r, float *out) {
    const cut_src *s = user;
    if (!s->w) {
        for (int i = 0; i < s->n; i++) out[i] = s->v ? s->v[cut_index(s, i)] + s->shift : 0.0f;
        return;
    }
    const gpt2_matrix *w = s->w;
    const int o = cut_index(s, r);
    if (s->by_row) {
        kernel_row(out, w, (int)r);
        return;
    }
    if (w->trans) { /* a block format, stored by output: its rows are the outputs */
        gpt2_matrix by_row = *w;
        by_row.rows = w->cols, by_row.cols = w->rows, by_row.trans = 0;
        kernel_row(out, &by_row, o);
        return;
    }
    out_rows *c = s->cache;
    if (c->of != w) { /* transposed CUT_ROWS inputs at a time: whole cache lines written */
        float *rows = c->wide + (size_t)w->rows * (size_t)w->cols;
        for (int k0 = 0; k0 < w->rows; k0 += CUT_ROWS) {
            const int nk = w->rows - k0 < CUT_ROWS ? w->rows - k0 : CUT_ROWS;
            for (int k = 0; k < nk; k++) kernel_row(rows + (size_t)k * w->cols, w, k0 + k);
            for (int n = 0; n < w->cols; n++)
                for (int k = 0; k < nk; k++) c->wide[(size_t)n * w->rows + k0 + k] = rows[(size_t)k * w->cols + n];
        }
        c->of = w;
    }
    memcpy(out, c->wide + (size_t)o * (size_t)w->rows, (size_t)w->rows * sizeof *out);
}

/* The tensors being written, with their names and sources. */
typedef struct {
    st_out *o;
    cut_src *s;
    char (*names)[96];
    int n;
    int dt;          /* a dtype, or GPT2_SAVE_STORED */
    out_rows cache;
    size_t wide;     /* floats the widest float matrix cut needs */
} tensor_list;

/* pre + part into the next name. */
static const char *next_name(tensor_list *t, const char *pre, const char *part) {
    snprintf(t->names[t->n], sizeof t->names[t->n], "%s%s", pre, part);
    return t->names[t->n];
}

/* rows outputs of w from off on, as an (out, in) weight. */
static void add_linear(tensor_list *t, const char *pre, const char *part, const gpt2_matrix *w, int off, int rows,
                       int heads) {
    const char *name = next_name(t, pre, part);
    t->s[t->n] = (cut_src){w, NULL, off, w->rows, heads, w->cols, 0, &t->cache, 0};
    t->o[t->n] = (st_out){name, 2, rows, w->rows, cut_row, &t->s[t->n], out_dtype(t->dt, w)};
    if (!w->trans) {
        const size_t need = (size_t)w->rows * (size_t)w->cols + CUT_ROWS * (size_t)w->cols;
        t->wide = need > t->wide ? need : t->wide;
    }
    t->n++;
}

/* The embedding or the head, (V, C) as the model holds it. */
static void add_table(tensor_list *t, const char *name, const gpt2_matrix *w) {
    name = next_name(t, "", name);
    t->s[t->n] = (cut_src){w, NULL, 0, w->cols, 0, w->rows, 1, NULL, 0};
    t->o[t->n] = (st_out){name, 2, w->rows, w->cols, cut_row, &t->s[t->n], out_dtype(t->dt, w)};
    t->n++;
}

/* n floats of v (NULL: zeros), as a vector. */
static void add_floats(tensor_list *t, const char *pre, const char *part, const float *v, int n, int heads) {
    const char *name = next_name(t, pre, part);
    t->s[t->n] = (cut_src){NULL, v, 0, n, heads, n, 0, NULL, 0};
    t->o[t->n] = (st_out){name, 1, 1, n, cut_row, &t->s[t->n], vector_dtype(t->dt, t->o[0].dtype, v, n)};
    t->n++;
}

/* A norm's n weights: Gemma's written as w where it holds 1 + w (1 + (v - 1) gives v back
 * exactly for v in [0.5, 2], by Sterbenz's lemma), in F32 unless a dtype is asked. */
static void add_norm(tensor_list *t, const char *pre, const char *part, const float *v, int n, int gemma) {
    add_floats(t, pre, part, v, n, 0);
    if (!gemma) return;
    t->s[t->n - 1].shift = -1.0f;
    if (t->dt == GPT2_SAVE_STORED) t->o[t->n - 1].dtype = GPT2_DTYPE_F32;
}

/* Whether v (n floats) is absent or all zeros: a bias the family's layout may leave out. */
static int zeros(const float *v, int n) {
    for (int i = 0; v && i < n; i++)
        if (v[i] != 0.0f) return 0;
    return 1;
}

/* Which biases a Llama-family model holds, and whether its family's Hugging Face layout
 * can say them: Llama's attention_bias (q, k, v, o) and mlp_bias (gate, up, down), Qwen3's
 * attention_bias, Qwen2's q, k, v (always there), Mistral's none. Biases the layout lacks
 * must be zeros; those it has and the model lacks are written as zeros. */
static gpt2_status llama_biases(const gpt2_model *m, int *attn, int *mlp, int *qkv, gpt2_error *err) {
    const gpt2_config *c = &m->cfg;
    const char *fam = c->arch.family;
    const int hd = gpt2_config_head_dim(c), Q = hd * c->n_head, KV = hd * gpt2_config_kv_heads(c), F = m->n_inner;
    int has_qkv = 0, has_o = 0, has_mlp = 0;
    for (int l = 0; l < c->n_layer; l++) {
        const gpt2_layer *L = &m->layers[l];
        has_qkv |= L->q_b || L->k_b || L->v_b;
        has_o |= L->proj_b != NULL;
        has_mlp |= L->gate_b || L->fc_b || L->fcproj_b;
    }
    const int llama = !strcmp(fam, "llama"), qwen2 = !strcmp(fam, "qwen2"), qwen3 = !strcmp(fam, "qwen3");
    *attn = (llama || qwen3) && (has_qkv || has_o);
    *mlp = llama && has_mlp;
    *qkv = *attn || qwen2;
    for (int l = 0; l < c->n_layer; l++) {
        const gpt2_layer *L = &m->layers[l];
        const char *what = NULL;
        if (!*qkv && !(zeros(L->q_b, Q) && zeros(L->k_b, KV) && zeros(L->v_b, KV))) what = "q, k and v projections";
        else if (!*attn && !zeros(L->proj_b, c->n_embd)) what = "output projection (o_proj)";
        else if (!*mlp && !(zeros(L->gate_b, F) && zeros(L->fc_b, F) && zeros(L->fcproj_b, c->n_embd))) what = "MLP";
        if (what)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "save: %s: layer %d's %s has biases, which Hugging Face's "
                             "%s does not", m->name, l, what, fam);
    }
    return GPT2_OK;
}

/* A Llama-family block under HF's names: q, k, v from the joined matrix (or apart), gate
 * and up likewise. */
static void llama_layer(tensor_list *t, const gpt2_model *m, int l, int attn_b, int mlp_b, int qkv_b) {
    const gpt2_config *c = &m->cfg;
    const gpt2_layer *L = &m->layers[l];
    const int C = c->n_embd, F = m->n_inner, hd = gpt2_config_head_dim(c), Q = hd * c->n_head,
              KV = hd * gpt2_config_kv_heads(c);
    char f[48];
    snprintf(f, sizeof f, "model.layers.%d.", l);
    const int joined = L->attn_w.data != NULL, gu = L->fc_w.data == NULL, gemma = !strncmp(c->arch.family, "gemma", 5);
    add_norm(t, f, "input_layernorm.weight", L->ln1_g, C, gemma);
    add_linear(t, f, "self_attn.q_proj.weight", joined ? &L->attn_w : &L->q_w, 0, Q, 0);
    add_linear(t, f, "self_attn.k_proj.weight", joined ? &L->attn_w : &L->k_w, joined ? Q : 0, KV, 0);
    add_linear(t, f, "self_attn.v_proj.weight", joined ? &L->attn_w : &L->v_w, joined ? Q + KV : 0, KV, 0);
    if (qkv_b) {
        add_floats(t, f, "self_attn.q_proj.bias", L->q_b, Q, 0);
        add_floats(t, f, "self_attn.k_proj.bias", L->k_b, KV, 0);
        add_floats(t, f, "self_attn.v_proj.bias", L->v_b, KV, 0);
    }
    if (c->arch.qk_norm) {
        add_norm(t, f, "self_attn.q_norm.weight", L->q_norm, hd, gemma);
        add_norm(t, f, "self_attn.k_norm.weight", L->k_norm, hd, gemma);
    }
    add_linear(t, f, "self_attn.o_proj.weight", &L->proj_w, 0, C, 0);
    if (attn_b) add_floats(t, f, "self_attn.o_proj.bias", L->proj_b, C, 0);
    if (c->arch.post_norms) { /* Gemma 2, 3: post_attention_layernorm is the attention output's */
        add_norm(t, f, "post_attention_layernorm.weight", L->attn_out_norm, C, gemma);
        add_norm(t, f, "pre_feedforward_layernorm.weight", L->ln2_g, C, gemma);
        add_norm(t, f, "post_feedforward_layernorm.weight", L->mlp_out_norm, C, gemma);
    } else {
        add_norm(t, f, "post_attention_layernorm.weight", L->ln2_g, C, gemma);
    }
    add_linear(t, f, "mlp.gate_proj.weight", &L->gate_w, 0, F, 0);
    add_linear(t, f, "mlp.up_proj.weight", gu ? &L->gate_w : &L->fc_w, gu ? F : 0, F, 0);
    add_linear(t, f, "mlp.down_proj.weight", &L->fcproj_w, 0, C, 0);
    if (mlp_b) {
        add_floats(t, f, "mlp.gate_proj.bias", L->gate_b, F, 0);
        add_floats(t, f, "mlp.up_proj.bias", L->fc_b, F, 0);
        add_floats(t, f, "mlp.down_proj.bias", L->fcproj_b, C, 0);
    }
}

/* A GPT-NeoX block: query_key_value's rows and bias put back per head. */
static void neox_layer(tensor_list *t, const gpt2_model *m, int l) {
    const gpt2_layer *L = &m->layers[l];
    const int C = m->cfg.n_embd, F = m->n_inner, H = m->cfg.n_head;
    char f[48];
    snprintf(f, sizeof f, "gpt_neox.layers.%d.", l);
    add_floats(t, f, "input_layernorm.weight", L->ln1_g, C, 0);
    add_floats(t, f, "input_layernorm.bias", L->ln1_b, C, 0);
    add_linear(t, f, "attention.query_key_value.weight", &L->attn_w, 0, 3 * C, H);
    add_floats(t, f, "attention.query_key_value.bias", L->attn_b, 3 * C, H);
    add_linear(t, f, "attention.dense.weight", &L->proj_w, 0, C, 0);
    add_floats(t, f, "attention.dense.bias", L->proj_b, C, 0);
    add_floats(t, f, "post_attention_layernorm.weight", L->ln2_g, C, 0);
    add_floats(t, f, "post_attention_layernorm.bias", L->ln2_b, C, 0);
    add_linear(t, f, "mlp.dense_h_to_4h.weight", &L->fc_w, 0, F, 0);
    add_floats(t, f, "mlp.dense_h_to_4h.bias", L->fc_b, F, 0);
    add_linear(t, f, "mlp.dense_4h_to_h.weight", &L->fcproj_w, 0, C, 0);
    add_floats(t, f, "mlp.dense_4h_to_h.bias", L->fcproj_b, C, 0);
}

static gpt2_status save_family_weights(const gpt2_model *m, const char *path, int dt, const int biases[3],
                                       gpt2_error *err) {
    const gpt2_config *c = &m->cfg;
    const int neox = !strcmp(c->arch.family, "gpt_neox"), n_max = 5 + 24 * c->n_layer;
    tensor_list t = {calloc((size_t)n_max, sizeof *t.o), calloc((size_t)n_max, sizeof *t.s),
                     calloc((size_t)n_max, sizeof *t.names), 0, dt, {NULL, NULL}, 0};
    gpt2_status st = t.o && t.s && t.names ? GPT2_OK : gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    if (!st) {
        add_table(&t, neox ? "gpt_neox.embed_in.weight" : "model.embed_tokens.weight", &m->wte);
        for (int l = 0; l < c->n_layer; l++)
            if (neox) neox_layer(&t, m, l);
            else llama_layer(&t, m, l, biases[0], biases[1], biases[2]);
        add_norm(&t, neox ? "gpt_neox.final_layer_norm." : "model.norm.", "weight", m->lnf_g, c->n_embd,
                 !strncmp(c->arch.family, "gemma", 5));
        if (neox) add_floats(&t, "gpt_neox.final_layer_norm.", "bias", m->lnf_b, c->n_embd, 0);
        if (neox || m->lm_head.data != m->wte.data) /* GPT-NeoX's embed_out, tied or not */
            add_table(&t, neox ? "embed_out.weight" : "lm_head.weight", &m->lm_head);
        if (t.wide && !(t.cache.wide = malloc(t.wide * sizeof(float))))
            st = gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    }
    if (!st) st = st_write(path, t.o, t.n, err);
    free(t.o), free(t.s), free(t.names), free(t.cache.wide);
    return st;
}

/* --- the tokenizer's files and config.json ----------------------------------------- */

/* What a Hugging Face directory holds of its tokenizer and generation settings: copied
 * as they are when the model came from one. */
static const char *const tok_files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                        "generation_config.json", "chat_template.jinja", "vocab.json", "merges.txt",
                                        "tokenizer.model", "added_tokens.json"};

typedef struct {
    FILE *in;
    const char *from;
} copy_job;

static gpt2_status put_copy(FILE *f, void *user, gpt2_error *err) {
    const copy_job *c = user;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, c->in)) > 0) fwrite(buf, 1, n, f);
    if (ferror(c->in)) return gpt2_fail(err, GPT2_ERR_IO, "%s: cannot read it: %s", c->from, strerror(errno));
    return GPT2_OK;
}

/* Copies src_dir's tokenizer files that exist into dir; *found: whether a tokenizer
 * (tokenizer.json, vocab.json) was among them. */
static gpt2_status copy_tokenizer_files(const char *src_dir, const char *dir, int *found, gpt2_error *err) {
    *found = 0;
    for (size_t i = 0; i < sizeof tok_files / sizeof *tok_files; i++) {
        char from[4096], to[4096];
        gpt2_status st = gpt2_fileio_join(from, sizeof from, src_dir, tok_files[i], err);
        if (st || (st = gpt2_fileio_join(to, sizeof to, dir, tok_files[i], err))) return st;
        struct stat sb;
        if (stat(from, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        copy_job c = {fopen(from, "rb"), from};
        if (!c.in) return gpt2_fail(err, GPT2_ERR_IO, "%s: cannot open it: %s", from, strerror(errno));
        st = gpt2_fileio_write_atomic(to, put_copy, &c, err);
        fclose(c.in);
        if (st) return st;
        *found |= i == 0 || !strcmp(tok_files[i], "vocab.json");
    }
    return GPT2_OK;
}

/* The id of the model's BOS: the tokenizer's, else its bos_token's text; -1. */
static int32_t bos_id(const gpt2_model *m) {
    const int32_t bos = gpt2_tokenizer_bos(m->tok);
    const char *text = gpt2_model_bos_text(m);
    return bos >= 0 ? bos : *text ? gpt2_tokenizer_piece_id(m->tok, text, strlen(text)) : -1;
}

/* The ids that end a reply (config.json's and generation_config.json's eos_token_id): the
 * model's, else the tokenizer's end of text. Returns the count. */
static int eos_ids(const gpt2_model *m, int32_t *out) {
    for (int i = 0; i < m->n_end; i++) out[i] = m->end_ids[i];
    if (m->n_end) return m->n_end;
    out[0] = gpt2_tokenizer_eot(m->tok);
    return out[0] >= 0;
}

/* The tokenizer as files: an HF source directory's own, else written from the model. */
static gpt2_status save_tokenizer(const gpt2_model *m, const char *dir, gpt2_error *err) {
    int found = 0;
    gpt2_status st = m->dir ? copy_tokenizer_files(m->dir, dir, &found, err) : GPT2_OK;
    if (st || found) return st;
    const tok_hf_extra x = {m->chat_template, m->bos_text, m->eos_text, m->cfg.n_ctx};
    if ((st = tok_save_hf(m->tok, dir, &x, err))) return st;
    int32_t eos[8];
    const int n_eos = eos_ids(m, eos), bos = bos_id(m);
    char path[4096];
    if ((st = gpt2_fileio_join(path, sizeof path, dir, "generation_config.json", err))) return st;
    cJSON *g = cJSON_CreateObject();
    if (bos >= 0) cJSON_AddNumberToObject(g, "bos_token_id", bos);
    if (n_eos == 1) cJSON_AddNumberToObject(g, "eos_token_id", eos[0]);
    else if (n_eos > 1) cJSON_AddItemToObject(g, "eos_token_id", cJSON_CreateIntArray(eos, n_eos));
    return json_write_file(path, g, err);
}

/* config.json: the description, with Llama 3's rope scaling recovered from a GGUF's
 * rope_freqs.weight where that is what the model holds. */
static gpt2_status save_family_config(const gpt2_model *m, const char *path, gpt2_dtype dt, const int biases[3],
                                      gpt2_error *err) {
    int32_t eos[8];
    arch_hf_config h = {m->cfg, m->gelu_erf, m->lm_head.data == m->wte.data, biases[0], biases[1], bos_id(m), eos,
                        eos_ids(m, eos), dt, m->source};
    if (m->rope_div && !(h.cfg.arch.rope_factor > 0) && arch_llama3_from_div(&h.cfg.arch, m->rope_div) < 0)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "save: %s: its rotary frequencies are scaled (rope_freqs.weight) "
                         "otherwise than Llama 3's rope_scaling, the one kind config.json can say", m->name);
    return arch_write_hf_config(path, &h, err);
}

static gpt2_status save_family(const gpt2_model *m, const char *dir, int dtype, gpt2_error *err) {
    int biases[3] = {0, 0, 0}; /* attention_bias, mlp_bias, q/k/v biases written */
    gpt2_status st = strcmp(m->cfg.arch.family, "gpt_neox") ? llama_biases(m, &biases[0], &biases[1], &biases[2], err)
                                                             : GPT2_OK;
    char path[4096];
    if (!st) st = gpt2_fileio_mkdirs(dir, err);
    /* config.json first: a description the family cannot say fails before the weights */
    const gpt2_dtype cfg_dt = out_dtype(dtype, &m->layers[0].fcproj_w);
    if (!st && !(st = gpt2_fileio_join(path, sizeof path, dir, "config.json", err)))
        st = save_family_config(m, path, cfg_dt, biases, err);
    if (!st && !(st = gpt2_fileio_join(path, sizeof path, dir, "model.safetensors", err)))
        st = save_family_weights(m, path, dtype, biases, err);
    if (!st) st = save_tokenizer(m, dir, err);
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
