/* model.c — binds a model source's named tensors (model_source.h: any format) into an
 * immutable model: each checked against the config, then copied once into the arena. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arch.h"
#include "error.h"
#include "gpt2_fileio.h"
#include "hugemem.h"
#include "json.h"
#include "model_internal.h"
#include "model_source.h"
#include "pool.h"
#include "quant.h"
#include "rng.h"
#include "textio.h"


const char *gpt2_dtype_name(gpt2_dtype dtype) {
    switch (dtype) {
    case GPT2_DTYPE_F32: return "f32";
    case GPT2_DTYPE_F16: return "f16";
    case GPT2_DTYPE_BF16: return "bf16";
    case GPT2_DTYPE_Q8: return "q8";
    case GPT2_DTYPE_Q8_0: return "q8_0";
    case GPT2_DTYPE_Q4_0: return "q4_0";
    case GPT2_DTYPE_Q4_1: return "q4_1";
    case GPT2_DTYPE_Q5_0: return "q5_0";
    case GPT2_DTYPE_Q5_1: return "q5_1";
    case GPT2_DTYPE_Q4_K: return "q4_k";
    case GPT2_DTYPE_Q5_K: return "q5_k";
    case GPT2_DTYPE_Q6_K: return "q6_k";
    case GPT2_N_DTYPES: break;
    }
    return "?";
}

/* --- tensor binding ------------------------------------------------------- */

typedef struct {
    gpt2_model *m;
    const model_source *src;
    const char *path;
    const char *prefix; /* "" or "transformer." */
    float *arena_next;  /* next free float in m->vectors */
    size_t vec_read;    /* floats of vectors decode reads (positions but one row excluded) */
    int dry;            /* 1: only check names, shapes and dtypes; bind nothing */
    gpt2_error *err;
} binder;

static const st_tensor *find_tensor(binder *b, const char *name) {
    char full[256];
    snprintf(full, sizeof full, "%s%s", b->prefix, name);
    return st_find(&b->m->st, full);
}

static gpt2_status check_shape(binder *b, const char *name, const st_tensor *t, int n_dims, int64_t d0,
                               int64_t d1) {
    int ok = t->n_dims == n_dims && t->shape[0] == d0 && (n_dims == 1 || t->shape[1] == d1);
    if (ok) return GPT2_OK;
    char found[96] = "", *p = found;
    for (int i = 0; i < t->n_dims && p < found + sizeof found - 24; i++)
        p += sprintf(p, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (n_dims == 1)
        return gpt2_fail(b->err, GPT2_ERR_CONFIG, "%s: tensor '%s%s' has shape (%s), expected (%lld) from %s",
                         b->path, b->prefix, name, found, (long long)d0, b->src->cfg_from);
    return gpt2_fail(b->err, GPT2_ERR_CONFIG, "%s: tensor '%s%s' has shape (%s), expected (%lld, %lld) from %s",
                     b->path, b->prefix, name, found, (long long)d0, (long long)d1, b->src->cfg_from);
}

/* F32, F16, BF16, and (only from a GGUF file: elem_size 0) its block formats. */
static gpt2_status dtype_of(binder *b, const char *name, const st_tensor *t, gpt2_dtype *dt) {
    for (gpt2_dtype d = GPT2_DTYPE_F32; d <= GPT2_DTYPE_Q6_K; d++) {
        const quant_format *f = quant_format_of(d);
        if (f && strcmp(t->dtype, f->name) == 0 && (t->elem_size != 0) == (f->block == 1)) {
            *dt = d;
            return GPT2_OK;
        }
    }
    return gpt2_fail(b->err, GPT2_ERR_FORMAT, "%s: tensor '%s%s' has dtype %s, expected F32, F16 or BF16", b->path,
                     b->prefix, name, t->dtype);
}

static gpt2_status missing(binder *b, const char *name) {
    return gpt2_fail(b->err, GPT2_ERR_FORMAT, "%s: missing tensor '%s%s'", b->path, b->prefix, name);
}

/* What a vector the file may leave out becomes (a source with bias_optional):
 * a Linear's bias NULL (the matmuls add nothing, at no cost), a LayerNorm's
 * zeros (exact: x + 0 is x). VEC_IF_PRESENT: NULL when absent from any
 * source (a Llama's optional biases). */
typedef enum { VEC_REQUIRED, VEC_LINEAR_BIAS, VEC_NORM_BIAS, VEC_IF_PRESENT, VEC_ZERO_IF_ABSENT } vec_kind;

/* Whether n matrices bound by output (nn.Linear's layout, a block format) in
 * one dtype over the same inputs can run as one, their outputs side by side:
 * one matmul, one pass of the pool, where there were n. */
static int fusable(const gpt2_matrix *const *w, int n) {
    for (int i = 0; i < n; i++)
        if (!w[i]->data || !w[i]->trans || w[i]->dtype != w[0]->dtype || w[i]->rows != w[0]->rows) return 0;
    return 1;
}

/* The stored row of output i of n, in `heads` heads, for a tensor whose rows
 * lie in another order (st_tensor.rows_order):
 *   ST_ROWS_ROPE_PAIRS   rotate-half order (HF: pairs (j, j + hd/2)) from
 *                        llama.cpp's (pairs (2j, 2j + 1)): the inverse of
 *                        convert_hf_to_gguf.py's permute, head by head
 *   ST_ROWS_QKV_BY_HEAD  [all q | all k | all v] from (H, 3, hd) */
static int stored_row(int order, int heads, int n, int i) {
    if (order == ST_ROWS_AS_IS) return i;
    if (order == ST_ROWS_ROPE_PAIRS) {
        const int hd = n / heads, j = i % hd;
        return i - j + (j % (hd / 2)) * 2 + j / (hd / 2);
    }
    const int third = n / 3, hd = third / heads, part = i / third, h = (i % third) / hd;
    return (h * 3 + part) * hd + i % hd;
}

/* Whether n outputs split into `heads` heads as the order needs. */
static int order_fits(int order, int heads, int64_t n) {
    if (order == ST_ROWS_AS_IS) return 1;
    if (heads < 1 || n % heads) return 0;
    return order == ST_ROWS_ROPE_PAIRS ? (n / heads) % 2 == 0 : n % (3 * heads) == 0;
}

/* Binds a float vector (or small matrix) of n0 x n1 elements, converted into the arena. */
static gpt2_status bind_vector_t(binder *b, const char *name, const st_tensor *t, vec_kind kind, int n_dims,
                                 int64_t n0, int64_t n1, float **out) {
    const size_t n = (size_t)n0 * (size_t)(n_dims == 2 ? n1 : 1);
    if (!t) t = find_tensor(b, name);
    if (!t && (kind == VEC_IF_PRESENT || kind == VEC_ZERO_IF_ABSENT ||
               (kind != VEC_REQUIRED && b->src->bias_optional))) {
        if (b->dry) return GPT2_OK;
        *out = NULL;
        if (kind == VEC_NORM_BIAS || kind == VEC_ZERO_IF_ABSENT) {
            *out = memset(b->arena_next, 0, n * sizeof(float));
            b->arena_next += n, b->vec_read += n;
        }
        return GPT2_OK;
    }
    if (!t) return missing(b, name);
    gpt2_status st = check_shape(b, name, t, n_dims, n0, n1);
    gpt2_dtype dt = GPT2_DTYPE_F32;
    if (st || (st = dtype_of(b, name, t, &dt))) return st;
    if (b->dry) return GPT2_OK;
    float *dst = b->arena_next;
    b->arena_next += n, b->vec_read += n;
    const unsigned char *src = t->data;
    if (quant_is_block(dt)) { /* a GGUF file's position embedding may be quantized */
        const size_t row = (size_t)(n_dims == 2 ? n1 : n0), row_bytes = quant_row_bytes(dt, row);
        for (size_t r = 0; r < n / row; r++) quant_dequantize_row(dt, src + r * row_bytes, dst + r * row, (int)row);
    }
    for (size_t i = 0; i < n; i++) { /* memcpy per element: the map may be misaligned */
        if (dt == GPT2_DTYPE_F32) {
            memcpy(&dst[i], src + 4 * i, 4);
        } else if (!quant_is_block(dt)) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = dt == GPT2_DTYPE_F16 ? gpt2_f16_to_f32(h) : gpt2_bf16_to_f32(h);
        }
        if (!isfinite(dst[i])) /* cheap here; matrices are checked through the logits (context.c) */
            return gpt2_fail(b->err, GPT2_ERR_FORMAT, "%s: tensor '%s%s' holds %f at element %zu: weights must be finite",
                             b->path, b->prefix, name, dst[i], i);
    }
    if (t->rows_order) { /* a bias in another order: restored */
        float *tmp = malloc(n * sizeof(float));
        if (!order_fits(t->rows_order, t->rows_heads, (int64_t)n) || !tmp) {
            free(tmp);
            return gpt2_fail(b->err, tmp ? GPT2_ERR_FORMAT : GPT2_ERR_NOMEM, "%s: tensor '%s' of %zu values: %s",
                             b->path, name, n, tmp ? "not whole heads" : "out of memory");
        }
        for (size_t i = 0; i < n; i++) tmp[i] = dst[stored_row(t->rows_order, t->rows_heads, (int)n, (int)i)];
        memcpy(dst, tmp, n * sizeof(float));
        free(tmp);
    }
    *out = dst;
    return GPT2_OK;
}

static gpt2_status bind_vector(binder *b, const char *name, vec_kind kind, int n_dims, int64_t n0, int64_t n1,
                               float **out) {
    return bind_vector_t(b, name, NULL, kind, n_dims, n0, n1, out);
}

/* Binds a weight matrix (rows, cols) where it lies in the map; pack_matrices
 * copies it out (with memcpy, so a misaligned tensor needs nothing special).
 * stored_rows >= rows: the file's rows (a padded vocabulary), of which the
 * first `rows` are used. linear: a block matrix, stored (cols, rows) by
 * sources with linear_out_in. */
static gpt2_status bind_matrix(binder *b, const char *name, const st_tensor *t, int64_t stored_rows, int64_t rows,
                               int64_t cols, int linear, gpt2_matrix *out) {
    if (!t && !(t = find_tensor(b, name))) return missing(b, name);
    const int tr = linear && b->src->linear_out_in;
    gpt2_status st = tr ? check_shape(b, name, t, 2, cols, stored_rows) : check_shape(b, name, t, 2, stored_rows, cols);
    if (st || (st = dtype_of(b, name, t, &out->dtype))) return st;
    if (b->dry) return GPT2_OK;
    out->rows = (int)rows;
    out->cols = (int)cols;
    out->data = t->data;
    out->trans = tr;
    out->packed = 0;
    out->rows_order = t->rows_order, out->rows_heads = t->rows_heads;
    if (!order_fits(t->rows_order, t->rows_heads, cols))
        return gpt2_fail(b->err, GPT2_ERR_FORMAT, "%s: tensor '%s' has %lld outputs: not %d whole heads", b->path, name,
                         (long long)cols, t->rows_heads);
    b->m->weight_bytes += kernel_matrix_bytes(out);
    if (out == &b->m->wte) b->m->wte_bytes = kernel_matrix_bytes(out);
    return GPT2_OK;
}

/* Floats the vectors may take (an upper bound: optional biases counted). */
static size_t vector_floats(const gpt2_model *m) {
    const gpt2_config *c = &m->cfg;
    const size_t C = (size_t)c->n_embd, F = (size_t)m->n_inner, hd = (size_t)gpt2_config_head_dim(c);
    const size_t qkv = hd * ((size_t)c->n_head + 2 * (size_t)gpt2_config_kv_heads(c));
    /* per layer: two norms (4C), q/k/v biases, q/k norms (2 hd), proj_b (C), gate_b and fc_b (2F), fcproj_b (C),
     * the outputs' norms (2C) */
    const size_t layer = 4 * C + (qkv > 3 * C ? qkv : 3 * C) + 2 * hd + 2 * C + 2 * F + (c->arch.post_norms ? 2 * C : 0);
    return (size_t)c->n_layer * layer + (c->arch.rope_dim ? (size_t)c->arch.rope_dim / 2 : (size_t)c->n_ctx * C) + 2 * C;
}

/* One GPT-2 block's twelve tensors. */
static gpt2_status bind_layer_gpt2(binder *b, int l, gpt2_layer *L) {
    const int64_t C = b->m->cfg.n_embd, F = b->m->n_inner;
    char n[12][64];
    static const char *suffix[12] = {"ln_1.weight",      "ln_1.bias",          "attn.c_attn.weight",
                                     "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                                     "ln_2.weight",      "ln_2.bias",          "mlp.c_fc.weight",
                                     "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    for (int i = 0; i < 12; i++) snprintf(n[i], sizeof n[i], "h.%d.%s", l, suffix[i]);
    gpt2_status st;
    if ((st = bind_vector(b, n[0], VEC_REQUIRED, 1, C, 0, &L->ln1_g)) ||
        (st = bind_vector(b, n[1], VEC_NORM_BIAS, 1, C, 0, &L->ln1_b)) ||
        (st = bind_matrix(b, n[2], NULL, C, C, 3 * C, 1, &L->attn_w)) ||
        (st = bind_vector(b, n[3], VEC_LINEAR_BIAS, 1, 3 * C, 0, &L->attn_b)) ||
        (st = bind_matrix(b, n[4], NULL, C, C, C, 1, &L->proj_w)) ||
        (st = bind_vector(b, n[5], VEC_LINEAR_BIAS, 1, C, 0, &L->proj_b)) ||
        (st = bind_vector(b, n[6], VEC_REQUIRED, 1, C, 0, &L->ln2_g)) ||
        (st = bind_vector(b, n[7], VEC_NORM_BIAS, 1, C, 0, &L->ln2_b)) ||
        (st = bind_matrix(b, n[8], NULL, C, C, F, 1, &L->fc_w)) ||
        (st = bind_vector(b, n[9], VEC_LINEAR_BIAS, 1, F, 0, &L->fc_b)) ||
        (st = bind_matrix(b, n[10], NULL, F, F, C, 1, &L->fcproj_w)) ||
        (st = bind_vector(b, n[11], VEC_LINEAR_BIAS, 1, C, 0, &L->fcproj_b)))
        return st;
    return GPT2_OK;
}

/* A norm's weights as applied: (1 + w) where the file stores w (Gemma's
 * Hugging Face files), in float as Hugging Face computes it. */
static void norm_weights(const binder *b, float *w, int64_t n) {
    if (b->dry || !w || !b->m->cfg.arch.norm_plus_one) return;
    for (int64_t i = 0; i < n; i++) w[i] = 1.0f + w[i];
}

/* One Llama-family block (HF's names under "model."): RMSNorms, q/k/v/o
 * projections with optional biases and q/k norms, the SwiGLU (GeGLU) MLP;
 * Gemma 2/3's norms of the attention's and MLP's outputs (its
 * post_attention_layernorm is then the attention's, pre_feedforward_layernorm
 * the MLP's input norm). */
static gpt2_status bind_layer_llama(binder *b, int l, gpt2_layer *L) {
    const gpt2_config *c = &b->m->cfg;
    const int64_t C = c->n_embd, F = b->m->n_inner, hd = gpt2_config_head_dim(c);
    const int64_t Q = hd * c->n_head, KV = hd * gpt2_config_kv_heads(c);
    static const char *suffix[] = {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                   "self_attn.v_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.bias",
                                   "self_attn.v_proj.bias", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                                   "self_attn.o_proj.weight", "self_attn.o_proj.bias",
                                   "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                                   "mlp.down_proj.weight", "mlp.gate_proj.bias", "mlp.up_proj.bias",
                                   "mlp.down_proj.bias", "pre_feedforward_layernorm.weight",
                                   "post_feedforward_layernorm.weight"};
    enum { N = sizeof suffix / sizeof *suffix };
    char n[N][80];
    for (int i = 0; i < N; i++) snprintf(n[i], sizeof n[i], "layers.%d.%s", l, suffix[i]);
    gpt2_status st;
    if ((st = bind_vector(b, n[0], VEC_REQUIRED, 1, C, 0, &L->ln1_g)) ||
        (st = bind_matrix(b, n[1], NULL, C, C, Q, 1, &L->q_w)) ||
        (st = bind_matrix(b, n[2], NULL, C, C, KV, 1, &L->k_w)) ||
        (st = bind_matrix(b, n[3], NULL, C, C, KV, 1, &L->v_w)) ||
        (st = bind_matrix(b, n[12], NULL, C, C, F, 1, &L->gate_w)) ||
        (st = bind_matrix(b, n[13], NULL, C, C, F, 1, &L->fc_w)))
        return st;
    /* q, k, v as one matrix, gate and up as one (pack_matrices joins them), where they
     * share a dtype: their biases then lie side by side too, zeros for a missing one */
    const gpt2_matrix *qkv[] = {&L->q_w, &L->k_w, &L->v_w}, *gu[] = {&L->gate_w, &L->fc_w};
    L->fuse_qkv = !b->dry && fusable(qkv, 3);
    L->fuse_gate_up = !b->dry && fusable(gu, 2);
    const vec_kind qkv_kind = L->fuse_qkv && (find_tensor(b, n[4]) || find_tensor(b, n[5]) || find_tensor(b, n[6]))
                                  ? VEC_ZERO_IF_ABSENT : VEC_IF_PRESENT;
    const vec_kind gu_kind = L->fuse_gate_up && (find_tensor(b, n[15]) || find_tensor(b, n[16]))
                                 ? VEC_ZERO_IF_ABSENT : VEC_IF_PRESENT;
    if ((st = bind_vector(b, n[4], qkv_kind, 1, Q, 0, &L->q_b)) ||
        (st = bind_vector(b, n[5], qkv_kind, 1, KV, 0, &L->k_b)) ||
        (st = bind_vector(b, n[6], qkv_kind, 1, KV, 0, &L->v_b)) ||
        (st = bind_vector(b, n[15], gu_kind, 1, F, 0, &L->gate_b)) ||
        (st = bind_vector(b, n[16], gu_kind, 1, F, 0, &L->fc_b)) ||
        (c->arch.qk_norm && ((st = bind_vector(b, n[7], VEC_REQUIRED, 1, hd, 0, &L->q_norm)) ||
                             (st = bind_vector(b, n[8], VEC_REQUIRED, 1, hd, 0, &L->k_norm)))) ||
        (st = bind_matrix(b, n[9], NULL, Q, Q, C, 1, &L->proj_w)) ||
        (st = bind_vector(b, n[10], VEC_IF_PRESENT, 1, C, 0, &L->proj_b)) ||
        (st = bind_matrix(b, n[14], NULL, F, F, C, 1, &L->fcproj_w)) ||
        (st = bind_vector(b, n[17], VEC_IF_PRESENT, 1, C, 0, &L->fcproj_b)))
        return st;
    if (c->arch.post_norms) {
        if ((st = bind_vector(b, n[11], VEC_REQUIRED, 1, C, 0, &L->attn_out_norm)) ||
            (st = bind_vector(b, n[18], VEC_REQUIRED, 1, C, 0, &L->ln2_g)) ||
            (st = bind_vector(b, n[19], VEC_REQUIRED, 1, C, 0, &L->mlp_out_norm)))
            return st;
    } else if ((st = bind_vector(b, n[11], VEC_REQUIRED, 1, C, 0, &L->ln2_g))) {
        return st;
    }
    norm_weights(b, L->ln1_g, C), norm_weights(b, L->ln2_g, C);
    norm_weights(b, L->attn_out_norm, C), norm_weights(b, L->mlp_out_norm, C);
    norm_weights(b, L->q_norm, hd), norm_weights(b, L->k_norm, hd);
    if (L->fuse_qkv) L->attn_b = L->q_b; /* (Q + 2 KV): q_b, k_b, v_b are consecutive */
    if (L->fuse_gate_up) L->gate_up_b = L->gate_b; /* (2F) */
    return GPT2_OK;
}

/* One GPT-NeoX block (HF's names under "gpt_neox."): LayerNorms, the fused
 * query_key_value (HF's rows per head (H, 3, hd), restored to [q | k | v];
 * a GGUF's are so already), dense, the GELU MLP. */
static gpt2_status bind_layer_neox(binder *b, int l, gpt2_layer *L) {
    const int64_t C = b->m->cfg.n_embd, F = b->m->n_inner;
    static const char *suffix[] = {"input_layernorm.weight",      "input_layernorm.bias",
                                   "attention.query_key_value.weight", "attention.query_key_value.bias",
                                   "attention.dense.weight",      "attention.dense.bias",
                                   "post_attention_layernorm.weight", "post_attention_layernorm.bias",
                                   "mlp.dense_h_to_4h.weight",    "mlp.dense_h_to_4h.bias",
                                   "mlp.dense_4h_to_h.weight",    "mlp.dense_4h_to_h.bias"};
    enum { N = sizeof suffix / sizeof *suffix };
    char n[N][80];
    for (int i = 0; i < N; i++) snprintf(n[i], sizeof n[i], "layers.%d.%s", l, suffix[i]);
    st_tensor qkv[2];
    for (int i = 0; i < 2; i++) {
        const st_tensor *t = find_tensor(b, n[2 + i]);
        if (!t) return missing(b, n[2 + i]);
        qkv[i] = *t;
        if (b->src->qkv_by_head) qkv[i].rows_order = ST_ROWS_QKV_BY_HEAD, qkv[i].rows_heads = b->m->cfg.n_head;
    }
    gpt2_status st;
    if ((st = bind_vector(b, n[0], VEC_REQUIRED, 1, C, 0, &L->ln1_g)) ||
        (st = bind_vector(b, n[1], VEC_REQUIRED, 1, C, 0, &L->ln1_b)) ||
        (st = bind_matrix(b, n[2], &qkv[0], C, C, 3 * C, 1, &L->attn_w)) ||
        (st = bind_vector_t(b, n[3], &qkv[1], VEC_REQUIRED, 1, 3 * C, 0, &L->attn_b)) ||
        (st = bind_matrix(b, n[4], NULL, C, C, C, 1, &L->proj_w)) ||
        (st = bind_vector(b, n[5], VEC_REQUIRED, 1, C, 0, &L->proj_b)) ||
        (st = bind_vector(b, n[6], VEC_REQUIRED, 1, C, 0, &L->ln2_g)) ||
        (st = bind_vector(b, n[7], VEC_REQUIRED, 1, C, 0, &L->ln2_b)) ||
        (st = bind_matrix(b, n[8], NULL, C, C, F, 1, &L->fc_w)) ||
        (st = bind_vector(b, n[9], VEC_REQUIRED, 1, F, 0, &L->fc_b)) ||
        (st = bind_matrix(b, n[10], NULL, F, F, C, 1, &L->fcproj_w)) ||
        (st = bind_vector(b, n[11], VEC_REQUIRED, 1, C, 0, &L->fcproj_b)))
        return st;
    return GPT2_OK;
}

/* Whose names a model's tensors go by (model_source.h: every format maps onto these) */
typedef enum { NAMES_GPT2, NAMES_LLAMA, NAMES_NEOX } naming;

static naming naming_of(const gpt2_config *c) {
    return !strcmp(c->arch.family, "gpt_neox") ? NAMES_NEOX : c->arch.rms_norm ? NAMES_LLAMA : NAMES_GPT2;
}

/* Binds (or, with b->dry, only checks) every tensor the config calls for. */
static gpt2_status bind_pass(gpt2_model *m, binder *b) {
    const gpt2_config *c = &m->cfg;
    const int64_t C = c->n_embd, V = c->n_vocab, VR = b->src->vocab_rows;
    const naming names = naming_of(c);
    const char *embd = names == NAMES_LLAMA ? "embed_tokens.weight" : names == NAMES_NEOX ? "embed_in.weight" : "wte.weight";
    const st_tensor *wte = find_tensor(b, embd);
    gpt2_status st = bind_matrix(b, embd, wte, VR, V, C, 0, &m->wte);
    if (st) return st;
    if (names == NAMES_NEOX) {
        if ((st = bind_vector(b, "final_layer_norm.weight", VEC_REQUIRED, 1, C, 0, &m->lnf_g)) ||
            (st = bind_vector(b, "final_layer_norm.bias", VEC_REQUIRED, 1, C, 0, &m->lnf_b)))
            return st;
    } else if (names == NAMES_LLAMA) {
        const int half = c->arch.rope_dim / 2;
        const char *prefix = b->prefix;
        if (st_find(&m->st, "rope_freqs.weight")) { /* a GGUF's Llama 3 factors, named without a prefix */
            b->prefix = "";
            st = bind_vector(b, "rope_freqs.weight", VEC_REQUIRED, 1, half, 0, &m->rope_div);
            b->prefix = prefix;
        } else if (c->arch.rope_factor > 0 && !b->dry) {
            arch_llama3_rope_div(&c->arch, m->rope_div = b->arena_next);
            b->arena_next += half, b->vec_read += half;
        }
        if (st || (st = bind_vector(b, "norm.weight", VEC_REQUIRED, 1, C, 0, &m->lnf_g))) return st;
        norm_weights(b, m->lnf_g, C);
    } else if ((st = bind_vector(b, "wpe.weight", VEC_REQUIRED, 2, c->n_ctx, C, &m->wpe)) ||
               (st = bind_vector(b, "ln_f.weight", VEC_REQUIRED, 1, C, 0, &m->lnf_g)) ||
               (st = bind_vector(b, "ln_f.bias", VEC_NORM_BIAS, 1, C, 0, &m->lnf_b))) {
        return st;
    }
    gpt2_layer unused; /* the dry pass binds nothing, and m->layers is not allocated yet */
    for (int l = 0; l < c->n_layer; l++) {
        gpt2_layer *L = b->dry ? memset(&unused, 0, sizeof unused) : &m->layers[l];
        if ((st = names == NAMES_LLAMA ? bind_layer_llama(b, l, L)
                  : names == NAMES_NEOX ? bind_layer_neox(b, l, L) : bind_layer_gpt2(b, l, L)))
            return st;
    }
    /* HF names the untied head "lm_head.weight" outside the "transformer." prefix. A head
     * that is wte's own bytes (PyTorch saves a tied head as a second view of one storage)
     * is tied. */
    const char *head_name = names == NAMES_NEOX ? "embed_out.weight" : "lm_head.weight";
    const st_tensor *head = st_find(&m->st, head_name);
    if (head && wte && head->data == wte->data && head->n_bytes == wte->n_bytes && !strcmp(head->dtype, wte->dtype))
        head = NULL;
    if (b->src->tied == 1) head = NULL; /* config.json ties it: HF ignores a stored copy */
    if (!head && b->src->tied == 0)
        return gpt2_fail(b->err, GPT2_ERR_FORMAT, "%s: missing tensor '%s' (%s says the head is not tied)", b->path,
                         head_name, b->src->cfg_from);
    if (head) {
        binder hb = *b;
        hb.prefix = "";
        if ((st = bind_matrix(&hb, head_name, head, VR, V, C, 0, &m->lm_head))) return st;
    } else if (!b->dry) {
        m->lm_head = m->wte;
    }
    return GPT2_OK;
}

typedef struct {
    const gpt2_model *m;
    gpt2_matrix **w;     /* the matrices to copy: n_plain row-major (wte, head), then Conv1D weights */
    const size_t *at;    /* where each goes, bytes into m->arena */
    int n_plain;
    int base;            /* the first matrix of the group being copied */
    const struct join_src *src; /* per matrix: the stored matrices it is gathered from, or none */
    int *nomem;          /* set when a copy could not get its scratch */
} pack_job;

/* A matrix made at load from stored ones by output rows: one whose rows lie
 * in another order (rows_order), or q, k, v (gate, up) joined side by side. */
typedef struct join_src {
    gpt2_matrix part[3]; /* each as bound: by output (trans, or a block format), its own row order */
    int n;               /* 0: the matrix is copied as it is bound */
} join_src;

/* Whether chunk i of j is packed: a Conv1D weight kernel_pack takes (wte and
 * the head are read by rows, and stay row-major). */
static int packs(const pack_job *j, int i) { return i >= j->n_plain && kernel_packable(j->w[i]); }

static size_t matrix_bytes(const gpt2_matrix *w) { return kernel_matrix_bytes(w); }

/* Whether a block-format matrix is interleaved at load (quant.h, x8). */
static int x8_packs(const gpt2_matrix *w) { return quant_is_block(w->dtype) && quant_x8(w->dtype); }

/* Bytes w takes in the arena: interleaved, or as it is. */
static size_t arena_bytes_of(const gpt2_matrix *w) {
    gpt2_matrix p = *w;
    p.packed = x8_packs(w);
    return matrix_bytes(&p);
}

/* w's rows (outputs) gathered from its parts into a new buffer, each part's
 * in the order the forward pass reads (stored_row); NULL when out of memory.
 * All parts share w's dtype and inputs, so their rows are equally long. */
static void *gather(const join_src *js, const gpt2_matrix *w, gpt2_matrix *out) {
    const size_t bytes = matrix_bytes(w), row = bytes / (size_t)w->cols; /* bound as (in, out): cols are outputs */
    unsigned char *tmp = malloc(bytes), *at = tmp;
    if (!tmp) return NULL;
    for (int p = 0; p < js->n; p++) {
        const gpt2_matrix *q = &js->part[p];
        for (int r = 0; r < q->cols; r++, at += row)
            memcpy(at, (const unsigned char *)q->data + (size_t)stored_row(q->rows_order, q->rows_heads, q->cols, r) * row,
                   row);
    }
    *out = *w;
    out->data = tmp;
    out->rows_order = ST_ROWS_AS_IS;
    return tmp;
}

/* A float matrix stored (out, in) (trans) is transposed into the layout a
 * safetensors file's would get; block formats are interleaved (x8) where
 * they can be, else copied as stored (by output). */
static void pack_one(void *arg, int chunk, int n_chunks, int ith) {
    const pack_job *j = arg;
    chunk += j->base;
    const gpt2_matrix *w = j->w[chunk];
    unsigned char *dst = j->m->arena + j->at[chunk];
    (void)n_chunks, (void)ith;
    const join_src *js = &j->src[chunk];
    gpt2_matrix gathered;
    void *tmp = NULL;
    if (js->n) {
        if (!(tmp = gather(js, w, &gathered))) {
            *j->nomem = 1;
            return;
        }
        w = &gathered;
    }
    if (x8_packs(w)) quant_x8_pack(w->dtype, w->data, w->trans ? w->cols : w->rows, w->trans ? w->rows : w->cols, dst);
    else if (packs(j, chunk)) kernel_pack(dst, w);
    else if (w->trans && !quant_is_block(w->dtype)) kernel_copy_transposed(dst, w);
    else memcpy(dst, w->data, matrix_bytes(w));
    free(tmp);
    if (!js->n) st_release(&j->m->st, w->data, matrix_bytes(w)); /* no-op off the map */
    for (int p = 0; p < js->n; p++) st_release(&j->m->st, js->part[p].data, matrix_bytes(&js->part[p]));
}

/* Joins parts (n of them, bound by output over the same inputs) into *dst, their
 * outputs side by side; the parts lose their data (layer_matrices skips them). */
static void join(gpt2_matrix *dst, gpt2_matrix *const *parts, int n, join_src *js) {
    js->n = n;
    int cols = 0;
    for (int i = 0; i < n; i++) js->part[i] = *parts[i], cols += parts[i]->cols;
    for (int i = 0; i < n; i++) memset(parts[i], 0, sizeof *parts[i]);
    *dst = js->part[0];
    dst->cols = cols;
    dst->rows_order = ST_ROWS_AS_IS;
}

/* The matrices to copy into w (wte, an untied head, then each layer's), with
 * how each is gathered into src; the count. */
static int plan_matrices(gpt2_model *m, gpt2_matrix **w, join_src *src) {
    int n = 0;
    w[n++] = &m->wte;
    if (m->lm_head.data != m->wte.data) w[n++] = &m->lm_head;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        gpt2_layer *L = &m->layers[l];
        join_src qkv = {0}, gu = {0};
        if (L->fuse_qkv) join(&L->attn_w, (gpt2_matrix *[]){&L->q_w, &L->k_w, &L->v_w}, 3, &qkv);
        if (L->fuse_gate_up) join(&L->gate_w, (gpt2_matrix *[]){&L->gate_w, &L->fc_w}, 2, &gu);
        L->fuse_qkv = L->fuse_gate_up = 0;
        const int k = layer_matrices(L, w + n);
        for (int i = n; i < n + k; i++)
            src[i] = w[i] == &L->attn_w && qkv.n ? qkv
                     : w[i] == &L->gate_w && gu.n ? gu
                     : w[i]->rows_order       ? (join_src){{*w[i]}, 1}
                                              : (join_src){0};
        n += k;
    }
    return n;
}

/* Copies every weight matrix out of the map into one huge-page arena: the
 * Conv1D weights that can be packed (kernels.h) in the packed layout, wte
 * (and an untied head) as they are. Each source range is released as it is
 * copied, so peak memory stays near one copy, and the file is unmapped after:
 * once loaded, a model never reads its file again, so a file truncated or
 * rewritten while in use (cp over it) cannot fault the process. On all cores:
 * the arena's first touch costs more than the copy. */
/* Copies the matrices a group at a time, asking params.cancel before each
 * group and telling params.progress after it. */
static gpt2_status pack_groups(gpt2_pool *pool, pack_job *job, int n, const gpt2_model_params *p, const char *path,
                               gpt2_error *err) {
    const int group = 2 * pool_n_threads(pool) > 8 ? 2 * pool_n_threads(pool) : 8;
    for (int done = 0; done < n; done += group) {
        if ((p->cancel && p->cancel(p->user_data)) ||
            (done && p->progress && p->progress(p->user_data, done, n)))
            return gpt2_fail(err, GPT2_CANCELLED, "%s: loading cancelled after %d of %d weight matrices", path, done, n);
        job->base = done;
        pool_run(pool, pack_one, job, n - done < group ? n - done : group);
    }
    if (p->progress && p->progress(p->user_data, n, n))
        return gpt2_fail(err, GPT2_CANCELLED, "%s: loading cancelled after its %d weight matrices", path, n);
    return GPT2_OK;
}

static gpt2_status pack_matrices(gpt2_model *m, const char *path, const gpt2_model_params *p, gpt2_error *err) {
    const int L = m->cfg.n_layer, untied = m->lm_head.data != m->wte.data;
    gpt2_matrix **w = malloc(((size_t)L * LAYER_MATRICES_MAX + 2) * sizeof *w);
    size_t *at = malloc(((size_t)L * LAYER_MATRICES_MAX + 2) * sizeof *at);
    join_src *src = calloc((size_t)L * LAYER_MATRICES_MAX + 2, sizeof *src);
    int n = 0, nomem = 0;
    size_t bytes = 0;
    if (w && at && src) {
        n = plan_matrices(m, w, src);
        for (int i = 0; i < n; i++) {
            at[i] = bytes;
            bytes += (arena_bytes_of(w[i]) + 63) & ~(size_t)63;
        }
    }
    gpt2_pool *pool = NULL;
    gpt2_status st = GPT2_OK;
    if (w && at && src && (m->arena = huge_alloc(bytes))) m->arena_bytes = m->arena_used = bytes;
    if (m->arena && (pool = pool_new(p->n_threads > 0 ? p->n_threads : pool_default_threads()))) {
        pack_job job = {m, w, at, 1 + untied, 0, src, &nomem};
        st = pack_groups(pool, &job, n, p, path, err);
        if (!st && nomem) st = gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory reordering a matrix", path);
        for (int i = 0; i < n && !st; i++) {
            w[i]->packed = packs(&job, i) || x8_packs(w[i]);
            w[i]->trans = w[i]->trans && quant_is_block(w[i]->dtype);
            w[i]->data = m->arena + at[i];
            w[i]->rows_order = ST_ROWS_AS_IS;
        }
        if (!untied) m->lm_head = m->wte;
        st_close(&m->st);
    }
    const int failed = !w || !at || !src || !pool;
    pool_free(pool);
    free(w);
    free(at);
    free(src);
    if (failed) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory for %zu MB of weights", path, bytes >> 20);
    return st;
}

static gpt2_status bind_all(gpt2_model *m, const model_source *src, const gpt2_model_params *p, gpt2_error *err) {
    const gpt2_config *c = &m->cfg;
    const char *path = src->path;
    binder b = {.m = m, .src = src, .path = path, .prefix = "", .dry = 1, .err = err};
    if (!st_find(&m->st, "wte.weight") && st_find(&m->st, "transformer.wte.weight")) b.prefix = "transformer.";
    if (naming_of(c) == NAMES_LLAMA) b.prefix = "model.";
    if (naming_of(c) == NAMES_NEOX) b.prefix = "gpt_neox.";
    /* First check every tensor against the config, then allocate: the sizes in a config are
     * only trustworthy once the file is known to hold tensors that big. A config with huge
     * sizes must be refused for disagreeing with the weights, not run out of memory. */
    gpt2_status st = bind_pass(m, &b);
    if (st) return st;
    m->vectors = malloc(vector_floats(m) * sizeof(float));
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->vectors || !m->layers) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", path);
    b.arena_next = m->vectors;
    b.dry = 0;
    if ((st = bind_pass(m, &b)) || (st = pack_matrices(m, path, p, err))) return st;
    m->vector_bytes = b.vec_read * sizeof(float) - (m->wpe ? (size_t)c->n_ctx * (size_t)c->n_embd * sizeof(float) : 0);
    m->weight_bytes += m->vector_bytes;
    return GPT2_OK;
}

/* "models/gpt2/" -> "gpt2"; "out/ckpt.pt" -> "ckpt.pt" */
static char *model_name(const char *dir) {
    size_t end = strlen(dir);
    while (end > 1 && dir[end - 1] == '/') end--;
    size_t start = end;
    while (start > 0 && dir[start - 1] != '/') start--;
    return strndup(dir + start, end - start);
}

/* Takes over what the source found: config, tensors (the mapping, until packed), tokenizer. */
static gpt2_status model_from_source(gpt2_model *m, model_source *src, const gpt2_model_params *p, gpt2_error *err) {
    m->cfg = src->cfg;
    m->n_inner = src->n_inner;
    m->gelu_erf = src->gelu_erf;
    m->st = src->st;
    memset(&src->st, 0, sizeof src->st);
    /* beyond GPT-2 the description names the family: "GGUF v3 (x.gguf), Q4_K, llama" */
    const char *fam = src->cfg.arch.family;
    const size_t n = strlen(src->desc) + strlen(fam) + 3;
    if (!(m->source = malloc(n))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    snprintf(m->source, n, "%s%s%s", src->desc, fam[0] ? ", " : "", fam);
    gpt2_status st = bind_all(m, src, p, err);
    m->tok = src->tok;
    src->tok = NULL;
    m->chat_template = src->chat_template, m->bos_text = src->bos_text, m->eos_text = src->eos_text;
    src->chat_template = src->bos_text = src->eos_text = NULL;
    for (int i = 0; i < src->n_end && i < (int)(sizeof m->end_ids / sizeof *m->end_ids); i++)
        if (src->end_ids[i] < m->cfg.n_vocab) m->end_ids[m->n_end++] = src->end_ids[i];
    return st;
}

gpt2_model_params gpt2_model_default_params(void) { return (gpt2_model_params){0}; }

gpt2_status gpt2_model_load(const char *path, gpt2_model **out, gpt2_error *err) {
    return gpt2_model_load_with(path, gpt2_model_default_params(), out, err);
}

gpt2_status gpt2_model_load_with(const char *path, gpt2_model_params params, gpt2_model **out, gpt2_error *err) {
    *out = NULL;
    gpt2_error_clear(err);
    if (strlen(path) > SOURCE_PATH_MAX - 32) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "model path is too long");
    if (params.n_threads < 0 || params.n_threads > 1024)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "n_threads %d: expected 0 to 1024", params.n_threads);
    gpt2_model *m = calloc(1, sizeof *m);
    if (!m || !(m->name = model_name(path))) {
        free(m);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    }
    model_source src;
    source_format fmt;
    gpt2_status st = source_open(path, params.gpt2_tokenizer_dir, &src, &fmt, err);
    if (st == GPT2_OK) st = model_from_source(m, &src, &params, err);
    /* a Hugging Face directory (config.json beside the weights): its tokenizer files */
    if (st == GPT2_OK && (fmt == SOURCE_FMT_SAFETENSORS || fmt == SOURCE_FMT_ZIP) && !src.tok_fallback &&
        src.cfg_from && !strcmp(src.cfg_from, "config.json")) {
        char dir[SOURCE_PATH_MAX];
        source_dir_of(src.path, dir, sizeof dir);
        if (!(m->dir = strdup(dir))) st = gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    }
    source_close(&src);
    if (st != GPT2_OK) {
        gpt2_model_free(m);
        return st;
    }
    *out = m;
    return GPT2_OK;
}

gpt2_status gpt2_model_load_tokenizer(const char *path, gpt2_model_params params, gpt2_tokenizer **out,
                                      gpt2_error *err) {
    *out = NULL;
    gpt2_error_clear(err);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && !source_has_weights(path)) return gpt2_tokenizer_load(path, out, err);
    model_source src;
    source_format fmt;
    gpt2_status st = source_open(path, params.gpt2_tokenizer_dir, &src, &fmt, err);
    if (st == GPT2_OK) *out = src.tok, src.tok = NULL;
    source_close(&src);
    return st;
}

void gpt2_model_free(gpt2_model *m) {
    if (!m) return;
    huge_free(m->arena, m->arena_bytes);
    free(m->vectors);
    free(m->layers);
    st_close(&m->st);
    gpt2_tokenizer_free(m->tok);
    free(m->chat_template), free(m->bos_text), free(m->eos_text);
    free(m->name);
    free(m->source);
    free(m->dir);
    free(m);
}

const gpt2_config *gpt2_model_config(const gpt2_model *m) { return &m->cfg; }
const gpt2_tokenizer *gpt2_model_tokenizer(const gpt2_model *m) { return m->tok; }
const char *gpt2_model_chat_template(const gpt2_model *m) { return m->chat_template; }
const char *gpt2_model_bos_text(const gpt2_model *m) { return m->bos_text ? m->bos_text : ""; }
const char *gpt2_model_eos_text(const gpt2_model *m) { return m->eos_text ? m->eos_text : ""; }

int gpt2_model_is_end(const gpt2_model *m, int32_t id) {
    if (id >= 0 && id == gpt2_tokenizer_eot(m->tok)) return 1;
    for (int i = 0; i < m->n_end; i++)
        if (m->end_ids[i] == id) return 1;
    return 0;
}
gpt2_dtype gpt2_model_dtype(const gpt2_model *m) { return m->wte.dtype; }

int gpt2_model_dtype_bytes(const gpt2_model *m, size_t bytes[GPT2_N_DTYPES]) {
    memset(bytes, 0, GPT2_N_DTYPES * sizeof *bytes);
    bytes[m->wte.dtype] += matrix_bytes(&m->wte);
    if (m->lm_head.data != m->wte.data) bytes[m->lm_head.dtype] += matrix_bytes(&m->lm_head);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        gpt2_matrix *w[8];
        for (int i = 0, n = layer_matrices(&m->layers[l], w); i < n; i++) bytes[w[i]->dtype] += matrix_bytes(w[i]);
    }
    int n = 0;
    for (int d = 0; d < GPT2_N_DTYPES; d++) n += bytes[d] > 0;
    return n;
}
size_t gpt2_model_weight_bytes(const gpt2_model *m) { return m->weight_bytes; }

size_t gpt2_model_token_bytes(const gpt2_model *m) {
    const gpt2_matrix *w = &m->wte;
    const size_t pos_row = m->wpe ? (size_t)m->cfg.n_embd * sizeof(float) : 0;
    if (m->lm_head.data == w->data) return m->weight_bytes + pos_row;
    /* an untied head: the embedding is held in full (wte_bytes) but read one row */
    const size_t row = w->dtype == GPT2_DTYPE_Q8 ? (size_t)w->cols + sizeof(float) /* int8s and the row's scale */
                       : quant_is_block(w->dtype) ? quant_row_bytes(w->dtype, (size_t)w->cols)
                                                  : (size_t)w->cols * gpt2_dtype_size(w->dtype);
    return m->weight_bytes - m->wte_bytes + row + pos_row;
}
const char *gpt2_model_name(const gpt2_model *m) { return m->name; }
const char *gpt2_model_source(const gpt2_model *m) { return m->source ? m->source : "random weights"; }

/* --- 8-bit quantization ---------------------------------------------------- */

/* Bytes a Q8 copy of m (rows x cols) takes: the int8 data and the scales, each
 * 64-byte aligned. */
static size_t q8_bytes(const gpt2_matrix *m, int per_row) {
    const int rows = per_row && kernel_q8_head_packable(m) ? kernel_q8_head_cols(m->rows) : m->rows;
    size_t data = ((size_t)rows * m->cols + 63) & ~(size_t)63;
    return data + (((size_t)(per_row ? rows : m->cols) * sizeof(float) + 63) & ~(size_t)63);
}

static int8_t q8_round(float v, float s) {
    if (s == 0.0f) return 0;
    float r = rintf(v / s);
    if (r != r) return 0; /* an infinite weight (inf / inf): its scale is already inf */
    return (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : r);
}

/* Quantizes src into the arena at *next: scales per row (wte, stored as its
 * transpose in panels where it can be: kernels.h) or per column (Conv1D).
 * row (cols floats) is scratch. */
static void q8_matrix(const gpt2_matrix *src, int per_row, unsigned char **next, float *row, gpt2_matrix *dst) {
    const int R = src->rows, C = src->cols, head = per_row && kernel_q8_head_packable(src);
    const int Rp = head ? kernel_q8_head_cols(R) : R;
    int8_t *q = (int8_t *)*next;
    float *scale = (float *)(*next + (((size_t)Rp * C + 63) & ~(size_t)63));
    *next += q8_bytes(src, per_row);
    if (head) { /* the padding: zero weights, zero scales */
        memset(q, 0, (size_t)Rp * C);
        for (int r = R; r < Rp; r++) scale[r] = 0.0f;
    }
    if (!per_row)
        for (int c = 0; c < C; c++) scale[c] = 0.0f;
    for (int r = 0; r < R; r++) { /* pass 1: absmax per row or column */
        kernel_row(row, src, r);
        float mx = 0.0f;
        for (int c = 0; c < C; c++) {
            float a = fabsf(row[c]);
            if (per_row) mx = a > mx ? a : mx;
            else if (a > scale[c]) scale[c] = a;
        }
        if (per_row) scale[r] = mx;
    }
    for (int i = 0; i < (per_row ? R : C); i++) scale[i] /= 127.0f;
    *dst = (gpt2_matrix){.data = q, .dtype = GPT2_DTYPE_Q8, .rows = R, .cols = C, .scale = scale};
    dst->packed = head || (!per_row && kernel_packable(dst)); /* integer products (gemm.h) */
    dst->trans = head;
    for (int r = 0; r < R; r++) { /* pass 2: round to the grid */
        kernel_row(row, src, r);
        for (int c = 0; c < C; c++)
            q[head ? kernel_q8_packed_index(C, c, r) : dst->packed ? kernel_q8_packed_index(R, r, c) : (size_t)r * C + c] =
                q8_round(row[c], per_row ? scale[r] : scale[c]);
    }
}

/* --- GGUF's block formats ------------------------------------------------------ */

/* The block format a matrix with K inputs gets for `to`: Q4_K needs rows of
 * 256, so narrower ones take Q4_0 (as llama.cpp falls back). */
static gpt2_dtype block_target(gpt2_dtype to, int K) { return to == GPT2_DTYPE_Q4_K && K % 256 ? GPT2_DTYPE_Q4_0 : to; }

/* A matrix's inputs and outputs: a block's Conv1D (K, N), or wte's (V, C) rows. */
static void in_out(const gpt2_matrix *w, int conv, int *K, int *N) {
    *K = conv ? w->rows : w->cols;
    *N = conv ? w->cols : w->rows;
}

static size_t block_bytes(gpt2_dtype to, const gpt2_matrix *w, int conv) {
    int K, N;
    in_out(w, conv, &K, &N);
    const gpt2_dtype dt = block_target(to, K);
    const size_t bytes = quant_x8(dt) ? quant_x8_bytes(dt, N, K) : (size_t)N * quant_row_bytes(dt, (size_t)K);
    return (bytes + 63) & ~(size_t)63;
}

/* src (float, any layout) into the arena at *next in a block format, by
 * output: N rows of K, eight at a time (then interleaved where the format
 * has the x8 layout). tmp: K * N + K floats for a Conv1D weight, C for wte;
 * rows8: 8 rows of K in the format. */
static void block_matrix(gpt2_dtype to, const gpt2_matrix *src, int conv, unsigned char **next, float *tmp,
                         unsigned char *rows8, gpt2_matrix *dst) {
    int K, N;
    in_out(src, conv, &K, &N);
    const gpt2_dtype dt = block_target(to, K);
    const size_t rb = quant_row_bytes(dt, (size_t)K), gb = 8 * rb;
    unsigned char *out = *next;
    *next += block_bytes(to, src, conv);
    float *col = tmp + (conv ? (size_t)K * N : 0);
    if (conv)
        for (int k = 0; k < K; k++) kernel_row(tmp + (size_t)k * N, src, k); /* the (K, N) matrix */
    for (int n0 = 0; n0 < N; n0 += 8) {
        const int nr = N - n0 < 8 ? N - n0 : 8;
        for (int n = n0; n < n0 + nr; n++) {
            if (conv)
                for (int k = 0; k < K; k++) col[k] = tmp[(size_t)k * N + n];
            else
                kernel_row(col, src, n);
            quant_quantize_row(dt, col, rows8 + (size_t)(n - n0) * rb, K);
        }
        if (quant_x8(dt)) quant_x8_pack(dt, rows8, nr, K, out + (size_t)(n0 / 8) * gb);
        else memcpy(out + (size_t)n0 * rb, rows8, (size_t)nr * rb);
    }
    *dst = (gpt2_matrix){.data = out, .dtype = dt, .rows = src->rows, .cols = src->cols, .trans = conv,
                         .packed = quant_x8(dt)};
}

/* The model's weight matrices: wte, an untied head, then each layer's four
 * (Conv1D). Returns the count; conv[i] says which are Conv1D. */
static int all_matrices(gpt2_model *m, gpt2_matrix **w, int *conv) {
    int n = 0;
    w[n] = &m->wte, conv[n++] = 0;
    if (m->lm_head.data != m->wte.data) w[n] = &m->lm_head, conv[n++] = 0;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const int k = layer_matrices(&m->layers[l], w + n);
        for (int i = 0; i < k; i++) conv[n++] = 1;
    }
    return n;
}

/* What quantizing to `to` can start from: float weights whose inputs come in
 * whole blocks. */
static gpt2_status check_quantizable(gpt2_model *m, gpt2_dtype to, gpt2_matrix **w, const int *conv, int n,
                                     gpt2_error *err) {
    for (int i = 0; i < n; i++) {
        int K, N;
        in_out(w[i], conv[i], &K, &N);
        if (w[i]->dtype > GPT2_DTYPE_BF16)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                             "quantize: model %s's weights are already quantized (%s); to %s it needs F32, F16 or "
                             "BF16 weights", m->name, gpt2_dtype_name(w[i]->dtype), gpt2_dtype_name(to));
        if (to != GPT2_DTYPE_Q8 && K % 32)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                             "quantize: %s stores blocks of 32 inputs, but a matrix of model %s has %d inputs",
                             gpt2_dtype_name(to), m->name, K);
    }
    return GPT2_OK;
}

/* Quantizes every matrix into one new arena; long for its plan-allocate-
 * convert steps, each a few lines, with one failure path. */
gpt2_status gpt2_model_quantize(gpt2_model *m, gpt2_dtype to, gpt2_error *err) {
    if (to != GPT2_DTYPE_Q8 && !quant_can_quantize(to))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "quantize: to q8, q8_0, q4_0 or q4_k, not %s", gpt2_dtype_name(to));
    if (m->quantized_to == to) return GPT2_OK;
    gpt2_matrix **w = malloc(((size_t)m->cfg.n_layer * LAYER_MATRICES_MAX + 2) * sizeof *w);
    int *conv = malloc(((size_t)m->cfg.n_layer * LAYER_MATRICES_MAX + 2) * sizeof *conv);
    if (!w || !conv) {
        free(w), free(conv);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "quantize: out of memory");
    }
    const int n = all_matrices(m, w, conv);
    gpt2_status st = check_quantizable(m, to, w, conv, n, err);
    size_t bytes = 0, tmp_floats = (size_t)m->wte.cols;
    size_t wte_bytes = 0;
    for (int i = 0; i < n && !st; i++) {
        const size_t wb = to == GPT2_DTYPE_Q8 ? q8_bytes(w[i], !conv[i]) : block_bytes(to, w[i], conv[i]);
        bytes += wb;
        if (w[i] == &m->wte) wte_bytes = wb;
        const size_t need = conv[i] && to != GPT2_DTYPE_Q8 ? (size_t)w[i]->rows * (w[i]->cols + 1) : (size_t)w[i]->cols;
        tmp_floats = need > tmp_floats ? need : tmp_floats;
    }
    unsigned char *arena = st ? NULL : huge_alloc(bytes), *next = arena;
    float *tmp = st ? NULL : malloc(tmp_floats * sizeof(float));
    unsigned char *rows8 = st ? NULL : malloc(8 * tmp_floats); /* 8 rows of K: at most 8.5 bits a weight */
    if (!st && (!arena || !tmp || !rows8))
        st = gpt2_fail(err, GPT2_ERR_NOMEM, "quantize: out of memory for %zu MB of %s weights", bytes >> 20,
                       gpt2_dtype_name(to));
    const int tied = m->lm_head.data == m->wte.data;
    for (int i = 0; i < n && !st; i++) {
        gpt2_matrix q;
        if (to == GPT2_DTYPE_Q8) q8_matrix(w[i], !conv[i], &next, tmp, &q);
        else block_matrix(to, w[i], conv[i], &next, tmp, rows8, &q);
        *w[i] = q;
    }
    if (!st) {
        if (tied) m->lm_head = m->wte;
        /* the old weights are no longer read: release their arena */
        m->weight_bytes = bytes + m->vector_bytes;
        m->wte_bytes = wte_bytes;
        huge_free(m->arena, m->arena_bytes);
        m->arena = arena;
        m->arena_bytes = m->arena_used = bytes;
        m->quantized_to = to;
    } else {
        huge_free(arena, bytes);
    }
    free(tmp), free(rows8), free(w), free(conv);
    return st;
}

/* --- random model --------------------------------------------------------- */

/* Approximately normal: sum of 4 uniforms, rescaled (cheap, good enough for a benchmark). */
static float rand_normal(uint64_t *s, float std) {
    float u = 0;
    for (int i = 0; i < 4; i++) u += (float)(rng_next(s) >> 40) / 16777216.0f;
    return (u - 2.0f) * 1.7320508f * std;
}

/* Fills the next rows x cols matrix of the model's huge-page arena, packed if
 * `pack` and it can be, as a loaded model's would be. */
static void random_matrix(gpt2_model *m, int rows, int cols, gpt2_dtype dt, int pack, uint64_t *seed,
                          gpt2_matrix *out) {
    size_t n = (size_t)rows * cols, bytes = (n * gpt2_dtype_size(dt) + 63) & ~(size_t)63;
    void *buf = m->arena + m->arena_used;
    m->arena_used += bytes;
    *out = (gpt2_matrix){.data = buf, .dtype = dt, .rows = rows, .cols = cols};
    out->packed = pack && kernel_packable(out);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float v = rand_normal(seed, 0.02f);
            size_t i = out->packed ? kernel_packed_index(rows, r, c) : (size_t)r * cols + c;
            if (dt == GPT2_DTYPE_F32) ((float *)buf)[i] = v;
            else ((uint16_t *)buf)[i] = dt == GPT2_DTYPE_F16 ? gpt2_f32_to_f16(v) : gpt2_f32_to_bf16(v);
        }
    m->weight_bytes += n * gpt2_dtype_size(dt);
}

gpt2_status gpt2_model_new_random(gpt2_config c, gpt2_dtype dt, uint64_t seed, gpt2_model **out,
                                  gpt2_error *err) {
    *out = NULL;
    const gpt2_arch *a = &c.arch;
    if (c.n_layer < 1 || c.n_head < 1 || c.n_embd < 1 || c.n_ctx < 1 || c.n_vocab < 1 ||
        (!a->head_dim && c.n_embd % c.n_head) || (a->n_kv_head && c.n_head % a->n_kv_head) ||
        (a->swiglu && !a->rms_norm) || (a->rms_norm && !a->rope_dim) || (a->post_norms && !a->rms_norm) ||
        a->rope_dim % 2 ||
        a->rope_dim > gpt2_config_head_dim(&c))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "random model: invalid config");
    if (dt > GPT2_DTYPE_BF16) {
        gpt2_status st = gpt2_model_new_random(c, GPT2_DTYPE_F32, seed, out, err);
        if (st == GPT2_OK && (st = gpt2_model_quantize(*out, dt, err)) != GPT2_OK) {
            gpt2_model_free(*out);
            *out = NULL;
        }
        return st;
    }
    gpt2_model *m = calloc(1, sizeof *m);
    if (!m) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    m->cfg = c;
    if (!(m->cfg.ln_eps > 0)) m->cfg.ln_eps = 1e-5f;
    m->n_inner = gpt2_config_n_ff(&c);
    m->name = strdup("random");
    const int C = c.n_embd, F = m->n_inner, hd = gpt2_config_head_dim(&c), Q = hd * c.n_head,
              KV = hd * gpt2_config_kv_heads(&c);
    const int llama = a->rms_norm, learned = !a->rope_dim, qkv_b = !llama || !strcmp(a->family, "qwen2");
    size_t nv = vector_floats(m);
    m->vectors = malloc(nv * sizeof(float));
    m->layers = calloc((size_t)c.n_layer, sizeof *m->layers);
    gpt2_status st = GPT2_OK;
    if (!m->vectors || !m->layers) {
        st = gpt2_fail(err, GPT2_ERR_NOMEM, "random model: out of memory");
        goto fail;
    }
    float *v = m->vectors;
#define TAKE(ptr, n, val)                                  \
    do {                                                   \
        (ptr) = v;                                         \
        for (size_t i_ = 0; i_ < (size_t)(n); i_++) v[i_] = (val); \
        v += (n);                                          \
    } while (0)
    /* All matrices in one huge-page arena: decode streams them every token. */
    const size_t per_layer = llama ? (size_t)C * (Q + 2 * KV) + (size_t)Q * C + 3 * (size_t)C * F
                                   : (size_t)C * 3 * C + (size_t)C * C + 2 * (size_t)C * F;
    m->arena_bytes = ((size_t)c.n_vocab * C + (size_t)c.n_layer * per_layer) * gpt2_dtype_size(dt) +
                     64 * (LAYER_MATRICES_MAX * (size_t)c.n_layer + 1);
    if (!(m->arena = huge_alloc(m->arena_bytes))) {
        st = gpt2_fail(err, GPT2_ERR_NOMEM, "random model: out of memory for %zu MB of weights", m->arena_bytes >> 20);
        goto fail;
    }
    random_matrix(m, c.n_vocab, C, dt, 0, &seed, &m->wte);
    m->wte_bytes = m->weight_bytes;
    m->lm_head = m->wte;
    if (learned) TAKE(m->wpe, (size_t)c.n_ctx * C, rand_normal(&seed, 0.01f));
    TAKE(m->lnf_g, C, 1.0f);
    if (!llama) TAKE(m->lnf_b, C, 0.0f);
    for (int l = 0; l < c.n_layer; l++) {
        gpt2_layer *L = &m->layers[l];
        TAKE(L->ln1_g, C, 1.0f);
        TAKE(L->ln2_g, C, 1.0f);
        if (a->post_norms) {
            TAKE(L->attn_out_norm, C, 1.0f);
            TAKE(L->mlp_out_norm, C, 1.0f);
        }
        if (llama) { /* q, k, v joined, gate and up joined: as a load joins them */
            if (qkv_b) TAKE(L->attn_b, Q + 2 * KV, 0.0f);
            if (a->qk_norm) {
                TAKE(L->q_norm, hd, 1.0f);
                TAKE(L->k_norm, hd, 1.0f);
            }
            random_matrix(m, C, Q + 2 * KV, dt, 1, &seed, &L->attn_w);
            random_matrix(m, Q, C, dt, 1, &seed, &L->proj_w);
            random_matrix(m, C, 2 * F, dt, 1, &seed, &L->gate_w);
            random_matrix(m, F, C, dt, 1, &seed, &L->fcproj_w);
            continue;
        }
        TAKE(L->ln1_b, C, 0.0f);
        TAKE(L->attn_b, 3 * C, 0.0f);
        TAKE(L->proj_b, C, 0.0f);
        TAKE(L->ln2_b, C, 0.0f);
        TAKE(L->fc_b, F, 0.0f);
        TAKE(L->fcproj_b, C, 0.0f);
        random_matrix(m, C, 3 * C, dt, 1, &seed, &L->attn_w);
        random_matrix(m, C, C, dt, 1, &seed, &L->proj_w);
        random_matrix(m, C, F, dt, 1, &seed, &L->fc_w);
        random_matrix(m, F, C, dt, 1, &seed, &L->fcproj_w);
    }
#undef TAKE
    m->vector_bytes = (size_t)(v - m->vectors) * sizeof(float) - (learned ? (size_t)c.n_ctx * C * sizeof(float) : 0);
    m->weight_bytes += m->vector_bytes;
    *out = m;
    return GPT2_OK;
fail:
    gpt2_model_free(m);
    return st;
}
