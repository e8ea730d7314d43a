/* model_gguf.c — a GGUF file of architecture "gpt2" (llama.cpp's convert script)
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gguf.h"
#include "model_source.h"
#include "quant.h"
#include "textio.h"

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

/* The Hugging Face name of a GGUF tensor name into hf (cap bytes); 0 for a
 * name the model does not use. */
static int hf_name(const char *name, char *hf, size_t cap) {
    for (size_t i = 0; i < sizeof top_names / sizeof *top_names; i++)
        if (strcmp(name, top_names[i].gguf) == 0) {
            snprintf(hf, cap, "%s", top_names[i].hf);
            return 1;
        }
    if (strncmp(name, "blk.", 4) != 0) return 0;
    const char *p = name + 4;
    long l = 0;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '.')) return 0;
    for (; *p >= '0' && *p <= '9' && l < 100000; p++) l = l * 10 + (*p - '0');
    if (*p++ != '.') return 0;
    for (size_t i = 0; i < sizeof block_names / sizeof *block_names; i++)
        if (strcmp(p, block_names[i].gguf) == 0) {
            snprintf(hf, cap, "h.%ld.%s", l, block_names[i].hf);
            return 1;
        }
    return 0;
}

static int st_cmp_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

/* st = the tensors the model uses, under Hugging Face names, sorted; the
 * mapping moves from g to st. */
static gpt2_status tensors_to_st(gguf_file *g, st_file *st, gpt2_error *err) {
    memset(st, 0, sizeof *st);
    st->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *st->tensors);
    if (!st->tensors || !(st->path = strdup(g->path))) return gpt2_fail(err, GPT2_ERR_NOMEM, "%s: out of memory", g->path);
    for (size_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        char hf[96];
        if (!hf_name(t->name, hf, sizeof hf)) continue;
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
    }
    qsort(st->tensors, (size_t)st->n_tensors, sizeof *st->tensors, st_cmp_name);
    for (int i = 1; i < st->n_tensors; i++) /* "blk.01" and "blk.1" are both refused above; this cannot fire */
        if (strcmp(st->tensors[i - 1].name, st->tensors[i].name) == 0)
            return gpt2_fail(err, GPT2_ERR_FORMAT, "%s: two tensors map to '%s'", g->path, st->tensors[i].name);
    st->map = g->map, st->map_size = g->map_size;
    g->map = NULL;
    return GPT2_OK;
}

/* general.architecture and the gpt2.* keys; n_vocab from token_embd. */
static gpt2_status read_config(const gguf_file *g, model_source *m, gpt2_error *err) {
    const char *arch;
    size_t n;
    char shown[TEXT_SHOW_BUF];
    gpt2_status st = gguf_get_str(g, "general.architecture", &arch, &n, err);
    if (st) return st;
    if (n != 4 || memcmp(arch, "gpt2", 4) != 0)
        return gpt2_fail(err, GPT2_ERR_CONFIG, "%s: general.architecture is \"%s\", expected \"gpt2\"", g->path,
                         text_show(arch, n, shown));
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
    for (size_t i = 0; i < g->n_tensors; i++)
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

static gpt2_status read_tokenizer(const gguf_file *g, model_source *m, gpt2_error *err) {
    const gguf_kv *tokens, *merges;
    const char *model;
    size_t n;
    char shown[TEXT_SHOW_BUF], vs[300], ms[300];
    int has_merges, has_eos;
    int64_t eos = -1;
    gpt2_status st = gguf_get_str(g, "tokenizer.ggml.model", &model, &n, err);
    if (st) return st;
    if (n != 4 || memcmp(model, "gpt2", 4) != 0)
        return gpt2_fail(err, GPT2_ERR_TOKENIZER, "%s: tokenizer.ggml.model is \"%s\", expected \"gpt2\" (byte-level BPE)",
                         g->path, text_show(model, n, shown));
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
    if (!(st = read_config(&g, src, err)) && !(st = read_tokenizer(&g, src, err)) &&
        !(st = source_fit_vocab(src, tok_path, err)))
        st = tensors_to_st(&g, &src->st, err);
    gguf_close(&g);
    return st;
}
