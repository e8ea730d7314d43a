/* model_gguf.c — a GGUF file of architecture "gpt2" (llama.cpp's convert script),
 * or of the families beyond it (llama, qwen2, qwen3, gptneox, gemma, gemma2, gemma3),
 * as a model: the config from its metadata, its tensors under the Hugging Face
 * names model.c binds, its tokenizer from tokenizer.ggml.*.
 *
 * Names: token_embd -> wte, position_embd -> wpe, output_norm -> ln_f, output
 * -> lm_head (optional: tied to token_embd), blk.N.{attn_norm, attn_qkv,
 * attn_output, ffn_norm, ffn_up, ffn_down} -> h.N.{ln_1, attn.c_attn,
 * attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}. Other tensors are ignored.
 * Layout: GGUF lists dimensions fastest first, so a tensor with ne = [a, b] is
 * b rows of a: shape (b, a) as stored. The convert script transposes the
 * blocks' Conv1D weights to (out, in), as nn.Linear stores them
 * (model_source.linear_out_in); token_embd is (vocab, C) as in HF. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gguf.h"
#include "model_source.h"
#include "quant.h"
#include "textio.h"
#include "tokenizer_internal.h"

typedef struct {
    const char *gguf, *hf;
} name_map;

static const name_map top_names[] = {
    {"token_embd.weight", "wte.weight"},   {"position_embd.weight", "wpe.weight"},
    {"output_norm.weight", "ln_f.weight"}, {"output_norm.bias", "ln_f.bias"},
    {"output.weight", "lm_head.weight"},
};
static const name_map block_names[] = {
    {"attn_norm.weight", "ln_1.weight"},       {"attn_norm.bias", "ln_1.bias"},
    {"attn_qkv.weight", "attn.c_attn.weight"}, {"attn_qkv.bias", "attn.c_attn.bias"},
    {"attn_output.weight", "attn.c_proj.weight"}, {"attn_output.bias", "attn.c_proj.bias"},
    {"ffn_norm.weight", "ln_2.weight"},        {"ffn_norm.bias", "ln_2.bias"},
    {"ffn_up.weight", "mlp.c_fc.weight"},      {"ffn_up.bias", "mlp.c_fc.bias"},
    {"ffn_down.weight", "mlp.c_proj.weight"},  {"ffn_down.bias", "mlp.c_proj.bias"},
};

/* The Llama family (llama, qwen2, qwen3): HF Llama's names, under "model." but the head */
static const name_map llama_top_names[] = {
    {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},                {"rope_freqs.weight", "rope_freqs.weight"},
};
static const name_map llama_block_names[] = {
    {"attn_norm.weight", "input_layernorm.weight"},   {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},     {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},         {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},         {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"}, {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},      {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},      {"ffn_gate.bias", "mlp.gate_proj.bias"},
    {"ffn_up.bias", "mlp.up_proj.bias"},              {"ffn_down.bias", "mlp.down_proj.bias"},
};

/* Gemma 2 and 3: four norms a block, ffn_norm the MLP's input norm (HF's
 * pre_feedforward_layernorm), post_attention_norm the attention output's */
static const name_map gemma2_block_names[] = {
    {"attn_norm.weight", "input_layernorm.weight"},      {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},        {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},   {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},   {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"}, {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},         {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

/* GPT-NeoX: HF's names under "gpt_neox." but the head; attn_qkv's rows are [q | k | v] */
static const name_map neox_top_names[] = {
    {"token_embd.weight", "gpt_neox.embed_in.weight"},
    {"output_norm.weight", "gpt_neox.final_layer_norm.weight"},
    {"output_norm.bias", "gpt_neox.final_layer_norm.bias"},
    {"output.weight", "embed_out.weight"},
};
static const name_map neox_block_names[] = {
    {"attn_norm.weight", "input_layernorm.weight"},   {"attn_norm.bias", "input_layernorm.bias"},
    {"attn_qkv.weight", "attention.query_key_value.weight"}, {"attn_qkv.bias", "attention.query_key_value.bias"},
    {"attn_output.weight", "attention.dense.weight"}, {"attn_output.bias", "attention.dense.bias"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"}, {"ffn_norm.bias", "post_attention_layernorm.bias"},
    {"ffn_up.weight", "mlp.dense_h_to_4h.weight"},    {"ffn_up.bias", "mlp.dense_h_to_4h.bias"},
    {"ffn_down.weight", "mlp.dense_4h_to_h.weight"},  {"ffn_down.bias", "mlp.dense_4h_to_h.bias"},
};

/* How one architecture's names map */
typedef struct {
    const name_map *top, *block;
    size_t n_top, n_block;
    const char *layer_fmt; /* "h.%ld.%s" */
} name_maps;

static const name_maps gpt2_maps = {top_names, block_names, sizeof top_names / sizeof *top_names,
                                    sizeof block_names / sizeof *block_names, "h.%ld.%s"};
static const name_maps llama_maps = {llama_top_names, llama_block_names,
                                     sizeof llama_top_names / sizeof *llama_top_names,
                                     sizeof llama_block_names / sizeof *llama_block_names, "model.layers.%ld.%s"};
static const name_maps gemma2_maps = {llama_top_names, gemma2_block_names,
                                      sizeof llama_top_names / sizeof *llama_top_names,
                                      sizeof gemma2_block_names / sizeof *gemma2_block_names, "model.layers.%ld.%s"};
static const name_maps neox_maps = {neox_top_names, neox_block_names, sizeof neox_top_names / sizeof *neox_top_names,
                                    sizeof neox_block_names / sizeof *neox_block_names, "gpt_neox.layers.%ld.%s"};

/* The Hugging Face name of a GGUF tensor name into hf (cap bytes); 0 for a
 * name the model does not use. */
static int hf_name(const name_maps *nm, const char *name, char *hf, size_t cap) {
    for (size_t i = 0; i < nm->n_top; i++)
        if (strcmp(name, nm->top[i].gguf) == 0) {
            snprintf(hf, cap, "%s", nm->top[i].hf);
            return 1;
        }
    if (strncmp(name, "blk.", 4) != 0) return 0;
    const char *p = name + 4;
    long l = 0;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '.')) return 0;
    for (; *p >= '0' && *p <= '9' && l < 100000; p++) l = l * 10 + (*p - '0');
    if (*p++ != '.') return 0;
    for (size_t i = 0; i < nm->n_block; i++)
        if (strcmp(p, nm->block[i].gguf) == 0) {
            snprintf(hf, cap, nm->layer_fmt, l, nm->block[i].hf);
            return 1;
        }
    return 0;
}

/* llama.cpp's converter reorders a llama's q and k rows for its rotation (not
 * qwen2's or qwen3's): their order and heads, ST_ROWS_AS_IS for any other tensor. */
static int rows_order_of(const model_source *m, const char *gguf_name, int *heads) {
    const char *dot = strchr(gguf_name, '.');
    if (strcmp(m->cfg.arch.family, "llama") != 0 || strncmp(gguf_name, "blk.", 4) != 0 || !(dot = strchr(dot + 1, '.')))
        return ST_ROWS_AS_IS;
    *heads = !strncmp(dot, ".attn_q.", 8) ? m->cfg.n_head : !strncmp(dot, ".attn_k.", 8) ? gpt2_config_kv_heads(&m->cfg) : 0;
    return *heads ? ST_ROWS_ROPE_PAIRS : ST_ROWS_AS_IS;
}

static int st_cmp_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

/* st = the tensors the model uses, under Hugging Face names, sorted; the
 * mapping moves from g to st. */
static gpt2_status tensors_to_st(gguf_file *g, const model_source *m, st_file *st, gpt2_error *err) {
    const name_maps *nm = !strcmp(m->cfg.arch.family, "gpt_neox") ? &neox_maps
                          : m->cfg.arch.post_norms               ? &gemma2_maps
                          : m->cfg.arch.rms_norm                 ? &llama_maps
                                                                 : &gpt2_maps;
    memset(st, 0, sizeof *st);
    st->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *st->tensors);
    if (!st->tensors || !(st->path = strdup(g->path))) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", g->path);
    for (size_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        char hf[96];
        if (!hf_name(nm, t->name, hf, sizeof hf)) continue;
        st_tensor *s = &st->tensors[st->n_tensors];
        if (!(s->name = strdup(hf))) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", g->path);
        st->n_tensors++;
        snprintf(s->dtype, sizeof s->dtype, "%s", gguf_dtype_name(t->dtype));
        const quant_format *q = quant_format_of(t->dtype);
        s->elem_size = q->block == 1 ? q->block_bytes : 0;
        s->n_dims = t->n_dims;
        for (int d = 0; d < t->n_dims; d++) s->shape[d] = (int64_t)t->ne[t->n_dims - 1 - d];
        s->data = t->data;
        s->n_bytes = t->n_bytes;
        s->rows_order = rows_order_of(m, t->name, &s->rows_heads);
    }
    qsort(st->tensors, (size_t)st->n_tensors, sizeof *st->tensors, st_cmp_name);
    for (int i = 1; i < st->n_tensors; i++) /* "blk.01" and "blk.1" are both refused above; this cannot fire */
        if (strcmp(st->tensors[i - 1].name, st->tensors[i].name) == 0)
            return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: two tensors map to '%s'", g->path, st->tensors[i].name);
    st->map = g->map, st->map_size = g->map_size;
    g->map = NULL;
    return GPT2_OK;
}

/* "ARCH.what" into buf (KEY_MAX bytes) */
enum { KEY_MAX = 96 };
static const char *key(char *buf, const char *arch, const char *what) {
    snprintf(buf, KEY_MAX, "%s.%s", arch, what);
    return buf;
}

/* What sets Gemma apart in its GGUF files (llama.cpp's converter and its
 * llama-model.cpp): GeGLU, embeddings times sqrtf(n_embd) (not rounded), norm
 * weights stored as the 1 + w they are applied as; Gemma 2 and 3: the
 * outputs' norms, a window (Gemma 2's 4096 unless written) on every other
 * layer (Gemma 2) or five of six (Gemma 3, whose windowed layers rotate by
 * 10000), Gemma 2's soft-caps (50 and 30 unless written), Gemma 3's final
 * cap where written, its q/k norms and linear rope scaling; the attention's
 * scale is 1/sqrt(head_dim) but for the 27B models (46 and 62 layers), whose
 * query_pre_attn_scalar is n_embd / n_head: the files do not carry it. */
static gpt2_status read_gemma_config(const gguf_file *g, const char *arch, model_source *m, gpt2_error *err) {
    gpt2_config *c = &m->cfg;
    gpt2_arch *a = &c->arch;
    const int gen = !strcmp(arch, "gemma3") ? 3 : !strcmp(arch, "gemma2") ? 2 : 1;
    char k[KEY_MAX];
    int64_t win = 0;
    int has_win, has_cap, has_final;
    double cap = 50, final = gen == 2 ? 30 : 0;
    gpt2_status st;
    a->geglu = 1;
    a->embed_scale = sqrtf((float)c->n_embd);
    if (gen == 1) return GPT2_OK;
    a->post_norms = 1;
    a->qk_norm = gen == 3;
    if ((st = gguf_get_int(g, key(k, arch, "attention.sliding_window"), 0, 1 << 24, &has_win, &win, err)) ||
        (st = gguf_get_float(g, key(k, arch, "attn_logit_softcapping"), 1e-6, 1e12, &has_cap, &cap, err)) ||
        (st = gguf_get_float(g, key(k, arch, "final_logit_softcapping"), 1e-6, 1e12, &has_final, &final, err)))
        return st;
    a->sliding_window = (int)(has_win ? win : gen == 2 ? 4096 : 0);
    a->window_period = gen == 2 ? 2 : 6;
    if (gen == 3 && a->sliding_window) a->rope_theta_local = 10000.0f;
    a->attn_softcap = gen == 2 ? (float)cap : 0.0f; /* llama.cpp caps no Gemma 3 scores */
    a->final_softcap = (float)final;
    if (c->n_layer == (gen == 2 ? 46 : 62)) a->attn_scale = 1.0f / sqrtf((float)(c->n_embd / c->n_head));
    return GPT2_OK;
}

/* The Llama family's ARCH.* keys (llama, qwen2, qwen3; gemma, gemma2, gemma3) as a description. */
static gpt2_status read_llama_config(const gguf_file *g, const char *arch, model_source *m, gpt2_error *err) {
    gpt2_config *c = &m->cfg;
    gpt2_arch *a = &c->arch;
    char k[KEY_MAX], shown[TEXT_SHOW_BUF];
    int64_t v[5], kv = 0, kl = 0, vl = 0, rd = 0, experts = 0, win = 0;
    int has_kv, has_kl, has_vl, has_rd, has_ex, has_win, has_theta, has_eps;
    double theta = 10000, eps = 1e-5;
    gpt2_status st;
    if ((st = gguf_get_int(g, key(k, arch, "block_count"), 1, 1000, NULL, &v[0], err)) ||
        (st = gguf_get_int(g, key(k, arch, "attention.head_count"), 1, 4096, NULL, &v[1], err)) ||
        (st = gguf_get_int(g, key(k, arch, "embedding_length"), 1, 65536, NULL, &v[2], err)) ||
        (st = gguf_get_int(g, key(k, arch, "context_length"), 1, 1 << 24, NULL, &v[3], err)) ||
        (st = gguf_get_int(g, key(k, arch, "feed_forward_length"), 1, 1 << 20, NULL, &v[4], err)) ||
        (st = gguf_get_int(g, key(k, arch, "attention.head_count_kv"), 1, v[1], &has_kv, &kv, err)) ||
        (st = gguf_get_int(g, key(k, arch, "attention.key_length"), 2, 4096, &has_kl, &kl, err)) ||
        (st = gguf_get_int(g, key(k, arch, "attention.value_length"), 2, 4096, &has_vl, &vl, err)) ||
        (st = gguf_get_int(g, key(k, arch, "rope.dimension_count"), 2, 4096, &has_rd, &rd, err)) ||
        (st = gguf_get_int(g, key(k, arch, "expert_count"), 0, 1 << 20, &has_ex, &experts, err)) ||
        (st = gguf_get_int(g, key(k, arch, "attention.sliding_window"), 0, 1 << 24, &has_win, &win, err)) ||
        (st = gguf_get_float(g, key(k, arch, "rope.freq_base"), 1e-6, 1e12, &has_theta, &theta, err)) ||
        (st = gguf_get_float(g, key(k, arch, "attention.layer_norm_rms_epsilon"), 0, 1, &has_eps, &eps, err)))
        return st;
    c->n_layer = (int)v[0], c->n_head = (int)v[1], c->n_embd = (int)v[2], c->n_ctx = (int)v[3];
    m->n_inner = a->n_ff = (int)v[4];
    snprintf(a->family, sizeof a->family, "%s", arch);
    a->rms_norm = a->swiglu = 1;
    a->qk_norm = strcmp(arch, "qwen3") == 0;
    const int gemma = !strncmp(arch, "gemma", 5);
    a->n_kv_head = has_kv ? (int)kv : c->n_head;
    a->head_dim = has_kl ? (int)kl : c->n_embd / c->n_head;
    a->rope_dim = has_rd ? (int)rd : a->head_dim;
    a->rope_theta = (float)theta;
    a->sliding_window = has_win ? (int)win : 0;
    c->ln_eps = eps > 0 ? (float)eps : 1e-5f;
    if (has_ex && experts > 0)
        return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: %s.expert_count is %lld: mixture-of-experts models are not supported",
                         g->path, arch, (long long)experts);
    if (c->n_head % a->n_kv_head)
        return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: %s.attention.head_count %d is not a multiple of head_count_kv %d",
                         g->path, arch, c->n_head, a->n_kv_head);
    if (!has_kl && c->n_embd % c->n_head)
        return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: %s.embedding_length %d is not divisible by attention.head_count %d",
                         g->path, arch, c->n_embd, c->n_head);
    if ((has_vl && vl != a->head_dim) || a->rope_dim != a->head_dim || a->head_dim % 2)
        return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: heads of %d keys, %lld values and %d rotary dimensions: gptscope "
                         "runs %s with even heads rotated whole", g->path, a->head_dim,
                         (long long)(has_vl ? vl : a->head_dim), a->rope_dim, arch);
    if (gemma && (st = read_gemma_config(g, arch, m, err))) return st;
    const char *scaling;
    size_t n;
    if (gguf_find(g, key(k, arch, "rope.scaling.type")) &&
        (st = gguf_get_str(g, key(k, arch, "rope.scaling.type"), &scaling, &n, err)))
        return st;
    if (gguf_find(g, k) && n == 6 && !memcmp(scaling, "linear", 6) && !strcmp(arch, "gemma3")) {
        double factor; /* Gemma 3's global layers' */
        if ((st = gguf_get_float(g, key(k, arch, "rope.scaling.factor"), 1e-6, 1e6, NULL, &factor, err))) return st;
        a->rope_linear = (float)factor;
    } else if (gguf_find(g, k) && !(n == 4 && !memcmp(scaling, "none", 4))) {
        return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: %s is \"%s\": that rope scaling is not supported", g->path, k,
                         text_show(scaling, n, shown));
    }
    return GPT2_OK;
}

/* The gptneox.* keys (Pythia): LayerNorm, partial rotary (no freq_base
 * written: 10000), parallel residual or not, the exact GELU as HF runs it. */
static gpt2_status read_neox_config(const gguf_file *g, model_source *m, gpt2_error *err) {
    gpt2_config *c = &m->cfg;
    gpt2_arch *a = &c->arch;
    int64_t v[6];
    int has_theta;
    double eps = 1e-5, theta = 10000;
    gpt2_status st;
    if ((st = gguf_get_int(g, "gptneox.block_count", 1, 1000, NULL, &v[0], err)) ||
        (st = gguf_get_int(g, "gptneox.attention.head_count", 1, 4096, NULL, &v[1], err)) ||
        (st = gguf_get_int(g, "gptneox.embedding_length", 1, 65536, NULL, &v[2], err)) ||
        (st = gguf_get_int(g, "gptneox.context_length", 1, 1 << 24, NULL, &v[3], err)) ||
        (st = gguf_get_int(g, "gptneox.feed_forward_length", 1, 1 << 20, NULL, &v[4], err)) ||
        (st = gguf_get_int(g, "gptneox.rope.dimension_count", 2, 4096, NULL, &v[5], err)) ||
        (st = gguf_get_float(g, "gptneox.rope.freq_base", 1e-6, 1e12, &has_theta, &theta, err)) ||
        (st = gguf_get_float(g, "gptneox.attention.layer_norm_epsilon", 0, 1, NULL, &eps, err)))
        return st;
    c->n_layer = (int)v[0], c->n_head = (int)v[1], c->n_embd = (int)v[2], c->n_ctx = (int)v[3];
    m->n_inner = a->n_ff = (int)v[4];
    m->gelu_erf = 1;
    snprintf(a->family, sizeof a->family, "gpt_neox");
    a->rope_dim = (int)v[5];
    a->rope_theta = (float)theta;
    c->ln_eps = eps > 0 ? (float)eps : 1e-5f;
    const gguf_kv *par = gguf_find(g, "gptneox.use_parallel_residual");
    if (par && par->type != GGUF_BOOL)
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: gptneox.use_parallel_residual: expected a bool", g->path);
    a->parallel_residual = par ? par->val[0] != 0 : 1;
    if (c->n_embd % c->n_head || (c->n_embd / c->n_head) < a->rope_dim || a->rope_dim % 2)
        return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: %d heads of %d and %d rotary dimensions do not fit", g->path,
                         c->n_head, c->n_embd, a->rope_dim);
    a->head_dim = c->n_embd / c->n_head;
    return GPT2_OK;
}

/* The gpt2.* keys. */
static gpt2_status read_gpt2_config(const gguf_file *g, model_source *m, gpt2_error *err) {
    gpt2_status st;
    int64_t v[5];
    double eps = 1e-5;
    int has_ff, has_eps;
    if ((st = gguf_get_int(g, "gpt2.block_count", 1, 1000, NULL, &v[0], err)) ||
        (st = gguf_get_int(g, "gpt2.attention.head_count", 1, 4096, NULL, &v[1], err)) ||
        (st = gguf_get_int(g, "gpt2.embedding_length", 1, 65536, NULL, &v[2], err)) ||
        (st = gguf_get_int(g, "gpt2.context_length", 1, 1 << 20, NULL, &v[3], err)) ||
        (st = gguf_get_int(g, "gpt2.feed_forward_length", 1, 1 << 20, &has_ff, &v[4], err)) ||
        (st = gguf_get_float(g, "gpt2.attention.layer_norm_epsilon", 0, 1, &has_eps, &eps, err)))
        return st;
    gpt2_config *c = &m->cfg;
    c->n_layer = (int)v[0], c->n_head = (int)v[1], c->n_embd = (int)v[2], c->n_ctx = (int)v[3];
    m->n_inner = has_ff ? (int)v[4] : 4 * c->n_embd;
    c->ln_eps = (float)eps;
    if (!(c->ln_eps > 0)) c->ln_eps = 1e-5f; /* an epsilon of 0 (or below float's range) is no layer norm */
    if (c->n_embd % c->n_head)
        return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: gpt2.embedding_length %d is not divisible by "
                         "gpt2.attention.head_count %d", g->path, c->n_embd, c->n_head);
    return GPT2_OK;
}

/* general.architecture and its keys; n_vocab from token_embd. */
static gpt2_status read_config(const gguf_file *g, model_source *m, gpt2_error *err) {
    static const char *const archs[] = {"gpt2", "llama", "qwen2", "qwen3", "gptneox", "gemma", "gemma2", "gemma3"};
    const char *arch;
    size_t n;
    char shown[TEXT_SHOW_BUF], name[16];
    gpt2_status st = gguf_get_str(g, "general.architecture", &arch, &n, err);
    if (st) return st;
    size_t i = 0;
    while (i < sizeof archs / sizeof *archs && !(n == strlen(archs[i]) && !memcmp(arch, archs[i], n))) i++;
    if (i == sizeof archs / sizeof *archs)
        return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: general.architecture is \"%s\", expected \"gpt2\", \"llama\", "
                         "\"qwen2\", \"qwen3\", \"gptneox\", \"gemma\", \"gemma2\" or \"gemma3\"", g->path,
                         text_show(arch, n, shown));
    snprintf(name, sizeof name, "%s", archs[i]);
    if ((st = i == 0 ? read_gpt2_config(g, m, err) : i == 4 ? read_neox_config(g, m, err)
                                                            : read_llama_config(g, name, m, err)))
        return st;
    gpt2_config *c = &m->cfg;
    for (i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, "token_embd.weight") == 0 && g->tensors[i].n_dims == 2) {
            if (g->tensors[i].ne[1] > (1 << 24))
                return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: token_embd.weight has %llu rows, over the limit of %d",
                                 g->path, (unsigned long long)g->tensors[i].ne[1], 1 << 24);
            m->vocab_rows = c->n_vocab = (int)g->tensors[i].ne[1];
            return GPT2_OK;
        }
    return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: missing tensor 'token_embd.weight' (2 dimensions)", g->path);
}

/* Pointers to the n strings of a validated string array. */
static gpt2_status str_list(const gguf_file *g, const gguf_kv *kv, const char ***s, size_t **len, gpt2_error *err) {
    *s = malloc((kv->n ? kv->n : 1) * sizeof **s);
    *len = malloc((kv->n ? kv->n : 1) * sizeof **len);
    if (!*s || !*len) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", g->path);
    const uint8_t *p = kv->val;
    for (uint64_t i = 0; i < kv->n; i++) (*s)[i] = gguf_str_next(&p, &(*len)[i]);
    return GPT2_OK;
}

/* tokenizer.ggml.pre: the pre-tokenizers llama.cpp names, as tokenizer.json
 * has them (Llama 3's and Qwen2's Split patterns, SmolLM's Digits), under
 * every name llama.cpp (llama-vocab.cpp) reads as one of them; its converter
 * names a tokenizer by a hash of how it splits a probe text, so one with
 * Llama 3's split can come out "smaug-bpe". bos: llama.cpp's add_bos default
 * for the name, where the file has no tokenizer.ggml.add_bos_token. */
#define LLAMA3_SPLIT                                                                                                \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"  \
    "\\s+(?!\\S)|\\s+"
#define QWEN2_SPLIT                                                                                                 \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"      \
    "\\s+(?!\\S)|\\s+"
static const struct {
    const char *pre, *pattern;
    int ignore_merges, nfc, split_digits, bos;
} pre_tokenizers[] = {
    {"gpt-2", NULL, 0, 0, 0, 0},     {"default", NULL, 0, 0, 0, 0},   {"phi-2", NULL, 0, 0, 0, 0},
    {"olmo", NULL, 0, 0, 0, 0},      {"mpt", NULL, 0, 0, 0, 0},
    {"llama-bpe", LLAMA3_SPLIT, 1, 0, 0, 1}, {"llama3", LLAMA3_SPLIT, 1, 0, 0, 1},
    {"llama-v3", LLAMA3_SPLIT, 1, 0, 0, 1},  {"falcon3", LLAMA3_SPLIT, 1, 0, 0, 1},
    {"pixtral", LLAMA3_SPLIT, 1, 0, 0, 1},   {"smaug-bpe", LLAMA3_SPLIT, 0, 0, 0, 0},
    {"qwen2", QWEN2_SPLIT, 0, 1, 0, 0},      {"deepseek-r1-qwen", QWEN2_SPLIT, 0, 1, 0, 0},
    {"smollm", NULL, 0, 0, 1, 0},
};

/* Element i of an integer array (validated: i < kv->n). */
static int64_t int_at(const gguf_kv *kv, uint64_t i) {
    static const int size[GGUF_N_TYPES] = {[GGUF_U8] = 1, [GGUF_I8] = 1, [GGUF_U16] = 2, [GGUF_I16] = 2,
                                           [GGUF_U32] = 4, [GGUF_I32] = 4, [GGUF_U64] = 8, [GGUF_I64] = 8};
    const int w = kv->elem_type < GGUF_N_TYPES ? size[kv->elem_type] : 0;
    uint64_t u = 0;
    for (int b = w - 1; b >= 0; b--) u = u << 8 | kv->val[i * (uint64_t)w + (uint64_t)b];
    const int sign = kv->elem_type == GGUF_I8 || kv->elem_type == GGUF_I16 || kv->elem_type == GGUF_I32;
    if (sign && w < 8 && (u >> (8 * w - 1)) & 1) u |= ~(uint64_t)0 << (8 * w);
    return (int64_t)u;
}

/* llama.cpp's token types */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

/* What a byte-level BPE of a Llama-family file needs beyond GPT-2's: its
 * pre-tokenizer, and its control and user-defined tokens (ChatML's
 * <|im_start|>, Llama 3's <|eot_id|>) matched whole, as tokenizer.json's
 * added tokens are: control tokens only as special tokens. */
typedef struct {
    tok_parts p;
    char **token;
    size_t *token_len;
    int32_t *merges, *added;
    unsigned char *added_flags, *in_model;
    tok_named *names;
    float *scores; /* a "llama" vocabulary's */
} gguf_bpe;

static void gguf_bpe_free(gguf_bpe *b) {
    for (int i = 0; b->token && i < b->p.n_vocab; i++) free(b->token[i]);
    free(b->token), free(b->token_len), free(b->merges), free(b->added), free(b->added_flags), free(b->in_model);
    free(b->names), free(b->scores);
}

static gpt2_status read_bpe_parts(const gguf_file *g, const char *pre, size_t pre_len, int32_t eos, gguf_bpe *b,
                                  gpt2_error *err) {
    const gguf_kv *tokens, *merges, *types;
    int has_merges, has_types;
    char shown[TEXT_SHOW_BUF];
    gpt2_status st;
    if ((st = gguf_get_str_array(g, "tokenizer.ggml.tokens", NULL, &tokens, err)) ||
        (st = gguf_get_str_array(g, "tokenizer.ggml.merges", &has_merges, &merges, err)))
        return st;
    types = gguf_find(g, "tokenizer.ggml.token_type");
    has_types = types != NULL;
    if (types && (types->type != GGUF_ARRAY || types->n != tokens->n || types->elem_type == GGUF_STRING ||
                  types->elem_type == GGUF_F32 || types->elem_type == GGUF_F64 || types->elem_type == GGUF_BOOL ||
                  types->elem_type == GGUF_ARRAY))
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer.ggml.token_type: expected an integer per token", g->path);
    size_t k = 0;
    while (k < sizeof pre_tokenizers / sizeof *pre_tokenizers &&
           !(pre_len == strlen(pre_tokenizers[k].pre) && !memcmp(pre, pre_tokenizers[k].pre, pre_len)))
        k++;
    if (k == sizeof pre_tokenizers / sizeof *pre_tokenizers)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer.ggml.pre is \"%s\": gptscope knows GPT-2's split "
                         "(gpt-2, default, phi-2, olmo, mpt), Llama 3's (llama-bpe, llama3, llama-v3, falcon3, pixtral, "
                         "smaug-bpe), Qwen2's (qwen2, deepseek-r1-qwen) and SmolLM's (smollm)", g->path,
                         text_show(pre, pre_len, shown));
    const int n = (int)tokens->n, nm = has_merges ? (int)merges->n : 0;
    b->p = (tok_parts){.path = g->path, .n_vocab = n, .pattern = pre_tokenizers[k].pattern,
                       .ignore_merges = pre_tokenizers[k].ignore_merges, .nfc = pre_tokenizers[k].nfc,
                       .split_digits = pre_tokenizers[k].split_digits, .eot = eos, .bos = -1};
    /* BOS before a text where the file says so (llama.cpp's add_bos_token) */
    const gguf_kv *add_bos = gguf_find(g, "tokenizer.ggml.add_bos_token");
    int64_t bos = -1;
    int has_bos;
    if ((st = gguf_get_int(g, "tokenizer.ggml.bos_token_id", 0, n - 1, &has_bos, &bos, err))) return st;
    if (add_bos && add_bos->type != GGUF_BOOL)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer.ggml.add_bos_token: expected a bool", g->path);
    if (add_bos && add_bos->val[0] && !has_bos)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer.ggml.add_bos_token is true, but there is no "
                         "tokenizer.ggml.bos_token_id", g->path);
    if (add_bos ? add_bos->val[0] : pre_tokenizers[k].bos && has_bos) b->p.bos = (int32_t)bos;
    b->token = calloc((size_t)n + 1, sizeof *b->token);
    b->token_len = calloc((size_t)n + 1, sizeof *b->token_len);
    b->in_model = calloc((size_t)n + 1, 1);
    b->added = malloc(((size_t)n + 1) * sizeof *b->added);
    b->added_flags = malloc((size_t)n + 1);
    b->names = malloc(((size_t)n + 1) * sizeof *b->names);
    b->merges = malloc(2 * ((size_t)nm + 1) * sizeof *b->merges);
    if (!b->token || !b->token_len || !b->in_model || !b->added || !b->added_flags || !b->names || !b->merges)
        return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory for the tokenizer", g->path);
    const uint8_t *at = tokens->val;
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *s = gguf_str_next(&at, &len);
        const int64_t type = has_types ? int_at(types, (uint64_t)i) : TT_NORMAL;
        b->names[i] = (tok_named){s, len, i};
        if (type == TT_BYTE || type == TT_UNKNOWN)
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: token %d is of type %s: a SentencePiece vocabulary, not "
                             "byte-level BPE", g->path, i, type == TT_BYTE ? "byte" : "unknown");
        if (!(b->token[i] = malloc(len ? len : 1))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
        if (type == TT_CONTROL || type == TT_USER) { /* their text as it is, matched whole */
            memcpy(b->token[i], s, len);
            b->token_len[i] = len;
            b->added_flags[b->p.n_added] = type == TT_CONTROL ? TOK_ADDED_SPECIAL : TOK_ADDED_NORMALIZED;
            b->added[b->p.n_added++] = i;
            continue;
        }
        uint32_t bad;
        const long r = tok_alphabet_to_bytes(s, len, b->token[i], &bad);
        if (r <= 0)
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer.ggml.tokens[%d] \"%s\" is not in GPT-2's byte "
                             "alphabet", g->path, i, text_show(s, len, shown));
        b->token_len[i] = (size_t)r;
        b->in_model[i] = 1;
    }
    tok_named_sort(b->names, n);
    at = has_merges ? merges->val : NULL;
    for (int i = 0; i < nm; i++) {
        size_t len;
        const char *s = gguf_str_next(&at, &len), *sp = memchr(s, ' ', len);
        if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s)))
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer.ggml.merges[%d] \"%s\": expected \"left right\"",
                             g->path, i, text_show(s, len, shown));
        b->merges[2 * i] = tok_named_find(b->names, n, s, (size_t)(sp - s));
        b->merges[2 * i + 1] = tok_named_find(b->names, n, sp + 1, len - (size_t)(sp + 1 - s));
        if (b->merges[2 * i] < 0 || b->merges[2 * i + 1] < 0)
            return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer.ggml.merges[%d] \"%s\" names a token not in "
                             "tokenizer.ggml.tokens", g->path, i, text_show(s, len, shown));
    }
    b->p.n_merges = nm;
    b->p.token = (const char *const *)b->token, b->p.token_len = b->token_len, b->p.merges = b->merges;
    b->p.in_model = b->in_model, b->p.added = b->added, b->p.added_flags = b->added_flags;
    return GPT2_OK;
}

/* A bool key, or def when absent. */
static gpt2_status get_bool(const gguf_file *g, const char *key, int def, int *out, gpt2_error *err) {
    const gguf_kv *kv = gguf_find(g, key);
    *out = def;
    if (kv && kv->type != GGUF_BOOL) return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: %s: expected a bool", g->path, key);
    *out = kv ? kv->val[0] != 0 : def;
    return GPT2_OK;
}

/* An id key in [0, n) (another value refused), or when absent def (llama.cpp's default) if in range, else -1. */
static gpt2_status get_id(const gguf_file *g, const char *key, int n, int32_t def, int32_t *out, gpt2_error *err) {
    int64_t v;
    int has;
    gpt2_status st = gguf_get_int(g, key, 0, n - 1, &has, &v, err);
    *out = has ? (int32_t)v : def < n ? def : -1;
    return st;
}

/* Whether s is a byte token's piece, "<0xNN>". */
static int byte_piece(const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEFabcdef";
    return n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && s[3] && s[4] && strchr(hex, s[3]) && strchr(hex, s[4]);
}

/* A "llama" vocabulary: SentencePiece's BPE as llama.cpp runs it (llm_tokenizer_spm). Its
 * tokens are pieces ("▁the", "<0x0A>") with a score and a type (1 normal, 2 unknown,
 * 3 control, 4 user-defined, 5 unused, 6 byte; all normal when there are none, but for
 * "<0xNN>" pieces): normal tokens are merged from a section's characters, the highest-scored
 * merge first (tokenizer.ggml.scores; none: all equal), byte tokens are the fallback for a
 * character that is no normal token; control and unknown tokens are matched whole as special
 * tokens, user-defined ones always; each section of text gets a U+2581 before it
 * (tokenizer.ggml.add_space_prefix, default true) and for each space. llama.cpp's defaults:
 * bos 1, eos 2, add_bos_token true. */
static gpt2_status read_spm_parts(const gguf_file *g, gguf_bpe *b, gpt2_error *err) {
    const gguf_kv *tokens, *types, *scores;
    gpt2_status st;
    if ((st = gguf_get_str_array(g, "tokenizer.ggml.tokens", NULL, &tokens, err))) return st;
    const int n = (int)tokens->n;
    types = gguf_find(g, "tokenizer.ggml.token_type");
    if (types && (types->type != GGUF_ARRAY || types->n != tokens->n || types->elem_type == GGUF_STRING ||
                  types->elem_type == GGUF_F32 || types->elem_type == GGUF_F64 || types->elem_type == GGUF_BOOL ||
                  types->elem_type == GGUF_ARRAY))
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer.ggml.token_type: expected an integer per token", g->path);
    scores = gguf_find(g, "tokenizer.ggml.scores");
    if (scores && (scores->type != GGUF_ARRAY || scores->elem_type != GGUF_F32 || scores->n != tokens->n))
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer.ggml.scores: expected a float32 per token", g->path);
    int add_prefix = 1, add_bos = 1;
    int32_t eos = -1, bos = -1;
    if ((st = get_bool(g, "tokenizer.ggml.add_space_prefix", 1, &add_prefix, err)) ||
        (st = get_bool(g, "tokenizer.ggml.add_bos_token", 1, &add_bos, err)) ||
        (st = get_id(g, "tokenizer.ggml.eos_token_id", n, 2, &eos, err)) ||
        (st = get_id(g, "tokenizer.ggml.bos_token_id", n, 1, &bos, err)))
        return st;
    b->p = (tok_parts){.path = g->path, .n_vocab = n, .eot = eos, .bos = add_bos ? bos : -1, .spm = 1,
                       .spm_prepend = add_prefix ? TOK_SPM_LEGACY : TOK_SPM_NONE, .spm_replace = 1};
    b->token = calloc((size_t)n + 1, sizeof *b->token);
    b->token_len = calloc((size_t)n + 1, sizeof *b->token_len);
    b->in_model = calloc((size_t)n + 1, 1);
    b->added = malloc(((size_t)n + 1) * sizeof *b->added);
    b->added_flags = malloc((size_t)n + 1);
    b->scores = calloc((size_t)n + 1, sizeof *b->scores);
    if (!b->token || !b->token_len || !b->in_model || !b->added || !b->added_flags || !b->scores)
        return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory for the tokenizer", g->path);
    const uint8_t *at = tokens->val;
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *s = gguf_str_next(&at, &len);
        int64_t type = types ? int_at(types, (uint64_t)i) : byte_piece(s, len) ? TT_BYTE : TT_NORMAL;
        if (scores) {
            uint32_t u = 0;
            for (int k = 3; k >= 0; k--) u = u << 8 | scores->val[4 * (uint64_t)i + (uint64_t)k];
            memcpy(&b->scores[i], &u, sizeof u);
        }
        if (!(b->token[i] = malloc(len ? len : 1))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
        memcpy(b->token[i], s, len);
        b->token_len[i] = len;
        b->in_model[i] = type == TT_NORMAL;
        if (type == TT_CONTROL || type == TT_UNKNOWN || type == TT_USER) {
            b->added_flags[b->p.n_added] = type == TT_USER ? 0 : TOK_ADDED_SPECIAL;
            b->added[b->p.n_added++] = i;
        }
    }
    b->p.token = (const char *const *)b->token, b->p.token_len = b->token_len, b->p.scores = b->scores;
    b->p.in_model = b->in_model, b->p.added = b->added, b->p.added_flags = b->added_flags;
    return GPT2_OK;
}

static gpt2_status read_tokenizer(const gguf_file *g, model_source *m, gpt2_error *err) {
    const gguf_kv *tokens, *merges;
    const char *model;
    size_t n;
    char shown[TEXT_SHOW_BUF], vs[300], ms[300];
    int has_merges, has_eos;
    int64_t eos = -1;
    gpt2_status st = gguf_get_str(g, "tokenizer.ggml.model", &model, &n, err);
    if (st) return st;
    if (n == 5 && !memcmp(model, "llama", 5)) { /* SentencePiece's BPE */
        if ((st = gguf_get_str_array(g, "tokenizer.ggml.tokens", NULL, &tokens, err))) return st;
        if (tokens->n > (uint64_t)m->cfg.n_vocab)
            return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: tokenizer.ggml.tokens has %llu tokens, but token_embd.weight only "
                             "%d rows", g->path, (unsigned long long)tokens->n, m->cfg.n_vocab);
        gguf_bpe b = {0};
        if (!(st = read_spm_parts(g, &b, err))) st = tok_from_parts(&b.p, &m->tok, err);
        gguf_bpe_free(&b);
        return st;
    }
    if (n != 4 || memcmp(model, "gpt2", 4) != 0)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer.ggml.model is \"%s\", expected \"gpt2\" (byte-level "
                         "BPE) or \"llama\" (SentencePiece's BPE)", g->path, text_show(model, n, shown));
    if ((st = gguf_get_str_array(g, "tokenizer.ggml.tokens", NULL, &tokens, err)) ||
        (st = gguf_get_str_array(g, "tokenizer.ggml.merges", &has_merges, &merges, err)) ||
        (st = gguf_get_int(g, "tokenizer.ggml.eos_token_id", 0, (int64_t)tokens->n - 1, &has_eos, &eos, err)))
        return st;
    if (has_merges && merges->n > (1u << 24))
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer.ggml.merges has %llu merges, over the limit of %d",
                         g->path, (unsigned long long)merges->n, 1 << 24);
    if (tokens->n > (uint64_t)m->cfg.n_vocab)
        return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: tokenizer.ggml.tokens has %llu tokens, but token_embd.weight only %d rows",
                         g->path, (unsigned long long)tokens->n, m->cfg.n_vocab);
    if (m->cfg.arch.family[0]) { /* beyond GPT-2: the family's pre-tokenizer and added tokens */
        const char *pre = "default";
        size_t pre_len = 7;
        if (gguf_find(g, "tokenizer.ggml.pre") && (st = gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len, err)))
            return st;
        gguf_bpe b = {0};
        if (!(st = read_bpe_parts(g, pre, pre_len, has_eos ? (int32_t)eos : -1, &b, err)))
            st = tok_from_parts(&b.p, &m->tok, err);
        gguf_bpe_free(&b);
        return st;
    }
    const char **ts = NULL, **mstr = NULL;
    size_t *tl = NULL, *ml = NULL;
    snprintf(vs, sizeof vs, "%s: tokenizer.ggml.tokens", g->path);
    snprintf(ms, sizeof ms, "%s: tokenizer.ggml.merges", g->path);
    if (!(st = str_list(g, tokens, &ts, &tl, err)) && (!has_merges || !(st = str_list(g, merges, &mstr, &ml, err))))
        st = gpt2_tokenizer_new(vs, ms, ts, tl, (int)tokens->n, mstr, ml, has_merges ? (int)merges->n : 0,
                                has_eos ? (int32_t)eos : -1, &m->tok, err);
    free(ts), free(tl), free(mstr), free(ml);
    return st;
}

/* "F16", or the block formats of the four matrices of the blocks, most used first ("Q4_K, Q6_K"). */
static void describe_types(const gguf_file *g, char *out, size_t cap) {
    int count[GPT2_DTYPE_Q6_K + 1] = {0}, n = 0;
    for (size_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].n_dims == 2 && strncmp(g->tensors[i].name, "blk.", 4) == 0) count[g->tensors[i].dtype]++;
    out[0] = '\0';
    for (;;) {
        int best = -1;
        for (int d = 0; d <= GPT2_DTYPE_Q6_K; d++)
            if (count[d] && (best < 0 || count[d] > count[best])) best = d;
        if (best < 0) break;
        size_t k = strlen(out);
        snprintf(out + k, cap - k, "%s%s", n++ ? ", " : "", gguf_dtype_name((gpt2_dtype)best));
        count[best] = 0;
    }
}

/* What chatting needs: tokenizer.chat_template, the texts of the BOS and EOS
 * tokens (the template's bos_token and eos_token), and the ids that end a
 * reply (eos, and Llama 3's end of turn and of message). */
static gpt2_status read_chat(const gguf_file *g, model_source *src, gpt2_error *err) {
    static const char *const ends[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                       "tokenizer.ggml.eom_token_id"};
    const int V = gpt2_tokenizer_n_vocab(src->tok);
    gpt2_status st;
    for (int i = 0; i < 3; i++) {
        int64_t id;
        int has;
        if ((st = gguf_get_int(g, ends[i], 0, V - 1, &has, &id, err))) return st;
        if (has) source_add_end(src, id);
    }
    if (!strncmp(src->cfg.arch.family, "gemma", 5)) { /* a chat turn's end, which llama.cpp finds by its text */
        const int32_t turn = gpt2_tokenizer_piece_id(src->tok, "<end_of_turn>", 13);
        if (turn >= 0) source_add_end(src, turn);
    }
    static const char *const texts[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"};
    char **out[] = {&src->bos_text, &src->eos_text};
    for (int i = 0; i < 2; i++) {
        int64_t id;
        int has;
        size_t n;
        if ((st = gguf_get_int(g, texts[i], 0, V - 1, &has, &id, err))) return st;
        const char *b = has ? gpt2_tokenizer_token_bytes(src->tok, (int32_t)id, &n) : NULL;
        if (b && !(*out[i] = strndup(b, n))) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    }
    if (!gguf_find(g, "tokenizer.chat_template")) return GPT2_OK;
    const char *t;
    size_t n;
    if ((st = gguf_get_str(g, "tokenizer.chat_template", &t, &n, err))) return st;
    if (memchr(t, '\0', n))
        return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: tokenizer.chat_template holds a NUL byte", g->path);
    return (src->chat_template = strndup(t, n)) ? GPT2_OK : gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
}

gpt2_status gguf_source_open(model_source *src, void *map, size_t size, gpt2_error *err) {
    gguf_file g;
    gpt2_status st = gguf_open_map(src->path, map, size, &g, err);
    if (st) return st;
    char types[64];
    describe_types(&g, types, sizeof types);
    snprintf(src->desc, sizeof src->desc, "GGUF v%u (%.160s), %s", g.version, source_base_of(src->path),
             types[0] ? types : "no matrices");
    src->linear_out_in = 1;
    src->cfg_from = "the metadata";
    char tok_path[SOURCE_PATH_MAX + 32];
    snprintf(tok_path, sizeof tok_path, "%s: tokenizer.ggml.tokens", src->path);
    if (!(st = read_config(&g, src, err)) && !(st = read_tokenizer(&g, src, err)) && !(st = read_chat(&g, src, err)) &&
        !(st = source_fit_vocab(src, tok_path, err)))
        st = tensors_to_st(&g, src, &src->st, err);
    gguf_close(&g);
    return st;
}
