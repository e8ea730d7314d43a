/* fuzz_model.h — checks a model the loader accepted, then runs it (fuzz harnesses only).
 *
 * Uses the library-private struct (src/core/model_internal.h) to check what the
 * loader promises: the file is unmapped once loaded, and every weight matrix has
 * the config's shape and lies wholly inside the weight arena, apart from every
 * other (the tied head is wte itself). The arena is mmapped, so ASan does not
 * bound reads inside it: this check stands in for that. Then it runs a context
 * over a few tokens, prefill and decode, with every hook on, reading every
 * buffer the hooks are handed, so that an out-of-bounds read shows up under ASan.
 */
#ifndef GPTSCOPE_FUZZ_MODEL_H
#define GPTSCOPE_FUZZ_MODEL_H

#include <math.h>

#include "fuzz_common.h"
#include "core/model_internal.h"

static volatile float fuzz_sink;

/* rows x cols elements, or (GGUF's block formats) the rows of blocks */
static inline size_t fuzz_matrix_bytes(const gpt2_matrix *w) {
    if (w->dtype > GPT2_DTYPE_Q8) return kernel_matrix_bytes(w);
    return (size_t)w->rows * (size_t)w->cols * (w->dtype == GPT2_DTYPE_F32 ? 4 : 2);
}

/* conv: a block's Conv1D weight, whose block-format data is by output (trans) */
static inline void fuzz_check_matrix(const gpt2_model *m, const char *what, const gpt2_matrix *w,
                                     int rows, int cols) {
    FUZZ_CHECK(w->rows == rows && w->cols == cols, "%s is %dx%d, config says %dx%d", what, w->rows,
               w->cols, rows, cols);
    const int conv = strcmp(what, "wte") != 0 && strcmp(what, "lm_head") != 0;
    FUZZ_CHECK(w->dtype == GPT2_DTYPE_F32 || w->dtype == GPT2_DTYPE_F16 || w->dtype == GPT2_DTYPE_BF16 ||
                   (w->dtype > GPT2_DTYPE_Q8 && w->dtype <= GPT2_DTYPE_Q6_K && w->trans == conv),
               "%s has dtype %d (trans %d)", what, (int)w->dtype, w->trans);
    FUZZ_CHECK(w->dtype > GPT2_DTYPE_Q8 || !w->trans, "%s: a float matrix left transposed", what);
    const size_t bytes = fuzz_matrix_bytes(w);
    const uint8_t *p = w->data, *lo = m->arena, *hi = m->arena + m->arena_used;
    FUZZ_CHECK(lo != NULL && m->arena_used <= m->arena_bytes, "%s: no weight arena", what);
    FUZZ_CHECK(p >= lo && p <= hi && bytes <= (size_t)(hi - p),
               "%s: [%td, +%zu) is not inside the weight arena [0, %zu)", what, p - lo, bytes, m->arena_used);
    FUZZ_CHECK((uintptr_t)p % 4 == 0, "%s: misaligned", what);
}

static inline void fuzz_check_model(const gpt2_model *m) {
    const gpt2_config *c = gpt2_model_config(m);
    const int hd = gpt2_config_head_dim(c), KVH = gpt2_config_kv_heads(c);
    FUZZ_CHECK(c->n_layer >= 1 && c->n_head >= 1 && c->n_embd >= 1 && c->n_ctx >= 1 && c->n_vocab >= 1 &&
                   hd >= 1 && KVH >= 1 && c->n_head % KVH == 0 && m->n_inner >= 1 && c->arch.rope_dim <= hd &&
                   c->arch.rope_dim % 2 == 0,
               "accepted config: L=%d H=%d KV=%d hd=%d C=%d T=%d V=%d F=%d rope %d", c->n_layer, c->n_head, KVH, hd,
               c->n_embd, c->n_ctx, c->n_vocab, m->n_inner, c->arch.rope_dim);
    FUZZ_CHECK(m->st.map == NULL && m->st.shards == NULL, "the file (or a shard) is still mapped after load");
    const gpt2_arch *d = &c->arch; /* Gemma's scalars: finite, never negative */
    FUZZ_CHECK(isfinite(d->embed_scale) && d->embed_scale >= 0 && isfinite(d->attn_scale) && d->attn_scale >= 0 &&
                   isfinite(d->attn_softcap) && d->attn_softcap >= 0 && isfinite(d->final_softcap) &&
                   d->final_softcap >= 0 && isfinite(d->rope_linear) && d->rope_linear >= 0 &&
                   isfinite(d->rope_theta_local) && d->rope_theta_local >= 0 && d->sliding_window >= 0 &&
                   d->window_period >= 0,
               "accepted description: embed_scale %g attn_scale %g caps %g %g rope_linear %g local %g window %d/%d",
               d->embed_scale, d->attn_scale, d->attn_softcap, d->final_softcap, d->rope_linear, d->rope_theta_local,
               d->sliding_window, d->window_period);
    const int C = c->n_embd, F = m->n_inner, V = c->n_vocab, Q = hd * c->n_head, KV = hd * KVH;
    fuzz_check_matrix(m, "wte", &m->wte, V, C);
    fuzz_check_matrix(m, "lm_head", &m->lm_head, V, C);
    const gpt2_matrix *all[2 + LAYER_MATRICES_MAX * 64];
    int n = 0;
    all[n++] = &m->wte;
    if (m->lm_head.data != m->wte.data) all[n++] = &m->lm_head;
    for (int l = 0; l < c->n_layer; l++) {
        gpt2_layer *L = &m->layers[l];
        /* each matrix the layer holds, at the shape its place says (q, k, v joined or
           apart; gate and up joined or apart) */
        const struct {
            const char *what;
            const gpt2_matrix *w;
            int rows, cols;
        } want[] = {{"attn_w", &L->attn_w, C, Q + 2 * KV}, {"q_w", &L->q_w, C, Q},   {"k_w", &L->k_w, C, KV},
                    {"v_w", &L->v_w, C, KV},                {"proj_w", &L->proj_w, Q, C},
                    {"gate_w", &L->gate_w, C, L->fc_w.data ? F : 2 * F},
                    {"fc_w", &L->fc_w, C, F},               {"fcproj_w", &L->fcproj_w, F, C}};
        FUZZ_CHECK(!!L->attn_w.data != !!L->q_w.data && !!L->q_w.data == !!L->k_w.data && !!L->k_w.data == !!L->v_w.data,
                   "layer %d: q, k, v neither joined nor apart", l);
        FUZZ_CHECK(L->proj_w.data && L->fcproj_w.data && (L->fc_w.data || L->gate_w.data),
                   "layer %d: a projection is missing", l);
        /* the vectors the description reads: norms (Gemma 2/3's of the outputs too), q/k norms */
        FUZZ_CHECK(L->ln1_g && L->ln2_g && !!L->attn_out_norm == !!c->arch.post_norms &&
                       !!L->mlp_out_norm == !!c->arch.post_norms && (!c->arch.qk_norm || (L->q_norm && L->k_norm)),
                   "layer %d: a norm the description reads is missing (post_norms %d, qk_norm %d)", l,
                   c->arch.post_norms, c->arch.qk_norm);
        for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
            if (!want[i].w->data) continue;
            fuzz_check_matrix(m, want[i].what, want[i].w, want[i].rows, want[i].cols);
            if (n < (int)(sizeof all / sizeof *all)) all[n++] = want[i].w;
        }
    }
    for (int i = 0; i < n; i++) /* quadratic, but the fuzz models are small */
        for (int j = 0; j < i; j++) {
            const uint8_t *a = all[i]->data, *b = all[j]->data;
            FUZZ_CHECK(a + fuzz_matrix_bytes(all[i]) <= b || b + fuzz_matrix_bytes(all[j]) <= a,
                       "weight matrices %d and %d overlap in the arena", i, j);
        }
    const gpt2_tokenizer *tok = gpt2_model_tokenizer(m);
    FUZZ_CHECK(tok && gpt2_tokenizer_n_vocab(tok) <= V, "tokenizer has %d ids, model %d rows",
               gpt2_tokenizer_n_vocab(tok), V);
}

/* Hooks that touch every element they are given. */
static int fz_want_att(void *u, int l, int h) { (void)u; return (l + h) % 2 == 0; }
static void fz_on_att(void *u, int l, int h, int pos, const float *p, int n) {
    (void)u; (void)l; (void)h;
    FUZZ_CHECK(n == pos + 1, "attention row of %d keys at position %d", n, pos);
    float s = 0;
    for (int i = 0; i < n; i++) s += p[i];
    fuzz_sink = s;
}
static int fz_want_res(void *u, int l) { (void)u; return l == 0; }
static void fz_on_res(void *u, int l, int pos, const float *x, int n) {
    (void)u; (void)l; (void)pos;
    float s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    fuzz_sink = s;
}
static void fz_on_logits(void *u, int pos, const float *x, int n) {
    (void)u; (void)pos;
    float s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    fuzz_sink = s;
}

/* Prefill a few tokens, decode one, with and without hooks. The weights are
 * arbitrary: non-finite logits must fail the eval cleanly, others be readable. */
static inline void fuzz_run_model(const gpt2_model *m) {
    fuzz_check_model(m);
    const gpt2_config *c = gpt2_model_config(m);
    int32_t toks[4] = {0, c->n_vocab - 1, c->n_vocab / 2, 1 % c->n_vocab};
    for (int pass = 0; pass < 2; pass++) {
        gpt2_context_params p = gpt2_context_default_params();
        p.n_batch = pass ? 2 : 128;
        p.n_threads = pass ? 2 : 1;
        gpt2_context *ctx = NULL;
        gpt2_error err;
        gpt2_status st = gpt2_context_new(m, p, &ctx, &err);
        if (st != GPT2_OK) { /* a huge n_positions may not fit: that must be a clean NOMEM */
            fuzz_check_error(st, &err);
            FUZZ_CHECK(st == GPT2_ERR_NOMEM, "context_new failed with %d: %s", st, err.msg);
            return;
        }
        if (pass) {
            gpt2_hooks hk = {.want_attention = fz_want_att, .on_attention = fz_on_att,
                             .want_residual = fz_want_res, .on_residual = fz_on_res,
                             .on_logits = fz_on_logits};
            gpt2_context_set_hooks(ctx, &hk);
        }
        const int n_ctx = gpt2_context_n_ctx(ctx);
        const int n_pre = n_ctx < 3 ? n_ctx : 3;
        st = gpt2_context_eval(ctx, toks, n_pre, &err);
        if (st == GPT2_OK && n_ctx > n_pre) st = gpt2_context_eval(ctx, toks + 3, 1, &err);
        if (st != GPT2_OK) { /* weights that are not finite: refused through the logits */
            fuzz_check_error(st, &err);
            FUZZ_CHECK(st == GPT2_ERR_FORMAT && strstr(err.msg, "NaN or Inf"), "eval failed: %s", err.msg);
        } else {
            const float *lg = gpt2_context_logits(ctx);
            FUZZ_CHECK(lg != NULL, "no logits after eval");
            float s = 0;
            for (int i = 0; i < c->n_vocab; i++) s += lg[i];
            fuzz_sink = s;
        }
        /* one more token than fits must be refused cleanly */
        int32_t *many = calloc((size_t)n_ctx + 1, sizeof *many);
        if (many) {
            gpt2_context_reset(ctx);
            st = gpt2_context_eval(ctx, many, n_ctx + 1, &err);
            FUZZ_CHECK(st == GPT2_ERR_CONTEXT_FULL, "overfull eval gave %d", st);
            free(many);
        }
        gpt2_context_free(ctx);
    }
}

#endif
