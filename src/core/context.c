/* context.c — the forward pass: KV cache, batched prefill, single-token decode, hooks. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gpt2_context.h"
#include "kernels.h"
#include "model_internal.h"
#include "hugemem.h"
#include "pool.h"

struct gpt2_context {
    const gpt2_model *m;
    int n_ctx, n_batch, n_past;
    int logits_valid;
    float *k_cache, *v_cache; /* (L, KVH, n_ctx, hd), huge pages: a head's keys are
                                 one contiguous run, which decode streams */
    size_t cache_bytes;       /* of each */
    int32_t *tokens;          /* (n_ctx) */
    /* activations for one batch of up to B = n_batch positions */
    float *x;                 /* (B, C) residual stream */
    float *xn;                /* (B, C) layer-norm output */
    float *qkv;               /* (B, 3C) fused; or q (B, Q), then k (B, KV), then v (B, KV) */
    float *atty;              /* (B, Q) attention output, heads concatenated */
    float *hid;               /* (B, F) MLP hidden */
    float *gate;              /* (B, F) SwiGLU's gate, or NULL */
    float *rope_cos, *rope_sin; /* (n_ctx, rope_dim / 2) rotary angles' cosines and sines, or NULL */
    float *rope_cos_local, *rope_sin_local; /* the same for the windowed layers' own base, or NULL */
    float *att;               /* (H, B, n_ctx) scores / probabilities, per head */
    float *logits;            /* (V) of the last position */
    float *logits_all;        /* (B, V), only while an on_logits hook is set */
    float **scratch;          /* (n_threads) x KERNEL_SCRATCH_FLOATS, unless all weights are F32 row-major */
    float *partials;          /* (KERNEL_DECODE_CHUNKS, min(B, KERNEL_SMALL_T), max(3C, F)) partial sums;
                                 Q8: kernel_work_floats(B, ...) */
    gpt2_pool *pool;
    gpt2_hooks hooks[GPT2_HOOKS_MAX]; /* [0] the caller's (set_hooks), then pushed observers */
    int n_hooks;                      /* entries in use, >= 1 */
    int want_logits;                  /* some entry has on_logits */
    unsigned char *ablated;           /* (L, H) non-zero: the head's output is zeroed; NULL: none */
    int n_ablated;
};

gpt2_context_params gpt2_context_default_params(void) {
    return (gpt2_context_params){.n_ctx = 0, .n_batch = 256, .n_threads = 0};
}

/* Whether prefill widens or gathers weights into scratch buffers: for any
 * matrix not F32 row-major. */
static int needs_scratch(const gpt2_model *m) {
    if (m->wte.dtype != GPT2_DTYPE_F32 || m->lm_head.dtype != GPT2_DTYPE_F32) return 1;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        gpt2_matrix *w[LAYER_MATRICES_MAX];
        const int n = layer_matrices(&m->layers[l], w);
        for (int i = 0; i < n; i++)
            if (w[i]->dtype != GPT2_DTYPE_F32 || w[i]->packed) return 1;
    }
    return 0;
}

/* cos and sin of every position's rotary angles, pos x theta^(-2i/d) / div[i]
 * (/ linear), in double and rounded once. */
static int rope_table(gpt2_context *ctx, double theta, const float *div, double linear, float **cs, float **sn) {
    const int half = ctx->m->cfg.arch.rope_dim / 2, d = ctx->m->cfg.arch.rope_dim;
    *cs = malloc((size_t)ctx->n_ctx * half * sizeof(float));
    *sn = malloc((size_t)ctx->n_ctx * half * sizeof(float));
    double *inv = malloc((size_t)half * sizeof(double));
    if (!*cs || !*sn || !inv) {
        free(inv);
        return 0;
    }
    for (int i = 0; i < half; i++) {
        inv[i] = pow(theta, -2.0 * i / d) / (div ? div[i] : 1.0);
        if (linear > 0) inv[i] /= linear;
    }
    for (int p = 0; p < ctx->n_ctx; p++)
        for (int i = 0; i < half; i++) {
            (*cs)[(size_t)p * half + i] = (float)cos(p * inv[i]);
            (*sn)[(size_t)p * half + i] = (float)sin(p * inv[i]);
        }
    free(inv);
    return 1;
}

/* The rotary tables: every layer's, and the windowed layers' own where
 * their base differs (Gemma 3's local layers: no scaling either). */
static int rope_tables(gpt2_context *ctx) {
    const gpt2_model *m = ctx->m;
    const gpt2_arch *a = &m->cfg.arch;
    if (!a->rope_dim) return 1;
    if (!rope_table(ctx, a->rope_theta, m->rope_div, a->rope_linear, &ctx->rope_cos, &ctx->rope_sin)) return 0;
    return !(a->rope_theta_local > 0) ||
           rope_table(ctx, a->rope_theta_local, NULL, 0, &ctx->rope_cos_local, &ctx->rope_sin_local);
}

/* Its complexity is its allocation checks: one straight path, every buffer
 * checked, one message naming the cache size. */
gpt2_status gpt2_context_new(const gpt2_model *m, gpt2_context_params p, gpt2_context **out,
                             gpt2_error *err) {
    *out = NULL;
    const gpt2_config *c = &m->cfg;
    if (p.n_ctx < 0 || p.n_ctx > c->n_ctx)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "context size %d is outside [1, n_positions %d]", p.n_ctx,
                         c->n_ctx);
    if (p.n_batch < 1 || p.n_batch > 4096)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "batch size %d is outside [1, 4096]", p.n_batch);
    if (p.n_threads < 0 || p.n_threads > 256)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "thread count %d is outside [0, 256]", p.n_threads);
    /* Our pool does all the work; OpenBLAS runs inside its jobs, single-threaded. */
    openblas_set_num_threads(1);
    gpt2_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    ctx->m = m;
    ctx->n_ctx = p.n_ctx ? p.n_ctx : c->n_ctx < GPT2_CONTEXT_DEFAULT_MAX ? c->n_ctx : GPT2_CONTEXT_DEFAULT_MAX;
    ctx->n_batch = p.n_batch < ctx->n_ctx ? p.n_batch : ctx->n_ctx;
    const size_t L = (size_t)c->n_layer, C = (size_t)c->n_embd, B = (size_t)ctx->n_batch,
                 T = (size_t)ctx->n_ctx, F = (size_t)m->n_inner, V = (size_t)c->n_vocab;
    const size_t hd = (size_t)gpt2_config_head_dim(c), Q = hd * c->n_head, KV = hd * gpt2_config_kv_heads(c);
    const size_t QKV = Q + 2 * KV > 3 * C ? Q + 2 * KV : 3 * C, AY = Q > C ? Q : C;
    ctx->cache_bytes = L * T * KV * sizeof(float);
    ctx->k_cache = huge_alloc(ctx->cache_bytes);
    ctx->v_cache = huge_alloc(ctx->cache_bytes);
    ctx->tokens = malloc(T * sizeof(int32_t));
    ctx->x = malloc(B * C * sizeof(float));
    ctx->xn = malloc(B * C * sizeof(float));
    ctx->qkv = malloc(B * QKV * sizeof(float));
    ctx->atty = malloc(B * AY * sizeof(float));
    ctx->hid = malloc(B * F * sizeof(float));
    int gate_ok = !c->arch.swiglu || (ctx->gate = malloc(B * 2 * F * sizeof(float)));
    ctx->att = malloc((size_t)c->n_head * B * T * sizeof(float));
    ctx->logits = malloc(V * sizeof(float));
    const size_t small_t = B < KERNEL_SMALL_T ? B : KERNEL_SMALL_T, N_max = QKV > 2 * F ? QKV : 2 * F;
    const size_t K_max = C > F ? (C > Q ? C : Q) : (F > Q ? F : Q);
    ctx->partials = malloc((m->layers[0].fcproj_w.dtype == GPT2_DTYPE_Q8 /* its inputs quantized for any B */
                                ? kernel_work_floats((int)B, (int)K_max, (int)N_max)
                                : KERNEL_DECODE_CHUNKS * small_t * N_max) * sizeof(float));
    ctx->n_hooks = 1; /* the caller's entry, empty */
    ctx->pool = pool_new(p.n_threads ? p.n_threads : pool_default_threads());
    int scratch_ok = 1;
    if (ctx->pool && needs_scratch(m)) {
        const int nt = pool_n_threads(ctx->pool);
        ctx->scratch = calloc((size_t)nt, sizeof *ctx->scratch);
        scratch_ok = ctx->scratch != NULL;
        for (int i = 0; scratch_ok && i < nt; i++)
            scratch_ok = (ctx->scratch[i] = malloc(KERNEL_SCRATCH_FLOATS * sizeof(float))) != NULL;
    }
    if (!ctx->k_cache || !ctx->v_cache || !ctx->tokens || !ctx->x || !ctx->xn || !ctx->qkv || !ctx->atty ||
        !ctx->hid || !gate_ok || !ctx->att || !ctx->logits || !ctx->partials || !ctx->pool || !scratch_ok ||
        !rope_tables(ctx)) {
        gpt2_context_free(ctx);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for a context of %zu positions (KV cache %zu MB)",
                         T, 2 * L * T * KV * sizeof(float) >> 20);
    }
    *out = ctx;
    return GPT2_OK;
}

void gpt2_context_free(gpt2_context *ctx) {
    if (!ctx) return;
    huge_free(ctx->k_cache, ctx->cache_bytes);
    huge_free(ctx->v_cache, ctx->cache_bytes);
    free(ctx->tokens);
    free(ctx->x);
    free(ctx->xn);
    free(ctx->qkv);
    free(ctx->atty);
    free(ctx->ablated);
    free(ctx->hid);
    free(ctx->gate);
    free(ctx->rope_cos);
    free(ctx->rope_sin);
    free(ctx->rope_cos_local);
    free(ctx->rope_sin_local);
    free(ctx->att);
    free(ctx->logits);
    free(ctx->logits_all);
    free(ctx->partials);
    if (ctx->scratch)
        for (int i = 0; i < pool_n_threads(ctx->pool); i++) free(ctx->scratch[i]);
    free(ctx->scratch);
    pool_free(ctx->pool);
    free(ctx);
}

static void hooks_changed(gpt2_context *ctx) {
    ctx->want_logits = 0;
    for (int i = 0; i < ctx->n_hooks; i++) ctx->want_logits |= ctx->hooks[i].on_logits != NULL;
}

void gpt2_context_set_hooks(gpt2_context *ctx, const gpt2_hooks *hooks) {
    if (hooks) ctx->hooks[0] = *hooks;
    else memset(&ctx->hooks[0], 0, sizeof ctx->hooks[0]);
    hooks_changed(ctx);
}

gpt2_status gpt2_context_push_hooks(gpt2_context *ctx, const gpt2_hooks *hooks, gpt2_error *err) {
    if (!hooks) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "push_hooks: NULL hooks");
    if (ctx->n_hooks >= GPT2_HOOKS_MAX)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "push_hooks: %d observers already, the most a context takes",
                         GPT2_HOOKS_MAX);
    ctx->hooks[ctx->n_hooks++] = *hooks;
    hooks_changed(ctx);
    return GPT2_OK;
}

void gpt2_context_pop_hooks(gpt2_context *ctx) {
    if (ctx->n_hooks > 1) ctx->n_hooks--;
    hooks_changed(ctx);
}

int gpt2_context_hooks_depth(const gpt2_context *ctx) { return ctx->n_hooks; }

/* The stop requests: the newest observer asked first; the first yes stops. */
static int any_progress_stop(const gpt2_context *ctx, int done, int n) {
    for (int i = ctx->n_hooks - 1; i >= 0; i--) {
        const gpt2_hooks *h = &ctx->hooks[i];
        if (h->progress && h->progress(h->user_data, done, n)) return 1;
    }
    return 0;
}

static int any_cancel(const gpt2_context *ctx) {
    for (int i = ctx->n_hooks - 1; i >= 0; i--) {
        const gpt2_hooks *h = &ctx->hooks[i];
        if (h->cancel && h->cancel(h->user_data)) return 1;
    }
    return 0;
}

/* Where a batch's queries, keys and values lie in ctx->qkv: rows of one
 * joined matrix's outputs (Q + 2 KV: q, k, v; GPT-2's 3C), or three blocks of
 * rows (q (T, Q), k (T, KV), v (T, KV)) from separate ones. */
typedef struct {
    float *q, *k, *v;
    int ldq, ldkv; /* row strides */
} qkv_view;

static qkv_view qkv_of(const gpt2_context *ctx, const gpt2_layer *L, int T) {
    const gpt2_config *c = &ctx->m->cfg;
    const int C = c->n_embd, hd = gpt2_config_head_dim(c), Q = hd * c->n_head, KV = hd * gpt2_config_kv_heads(c);
    (void)C;
    if (L->attn_w.data) return (qkv_view){ctx->qkv, ctx->qkv + Q, ctx->qkv + Q + KV, Q + 2 * KV, Q + 2 * KV};
    return (qkv_view){ctx->qkv, ctx->qkv + (size_t)T * Q, ctx->qkv + (size_t)T * (Q + KV), Q, KV};
}

typedef struct {
    gpt2_context *ctx;
    qkv_view v;
    int l, p0, T;
} attention_job;

/* Prefill's attention takes the new positions in blocks of this many. */
enum { ATTN_ROWS = 64 };

/* Query heads [h0, h1) of causal self-attention, each reading key/value head
 * h / (H / KVH) of the cache (keys 0 .. p0+T-1, the new ones appended
 * already): probabilities into att[h] (T, P), output into atty (T, Q). A
 * windowed layer's sliding window of W keys: a query sees its last W keys,
 * the rest of its row zero. Soft-capped scores are capped before the
 * softmax: att holds the probabilities the output used. */
static void attention_heads(void *arg, int chunk, int n_chunks, int ith) {
    const attention_job *j = arg;
    gpt2_context *ctx = j->ctx;
    const gpt2_config *c = &ctx->m->cfg;
    const int H = c->n_head, KVH = gpt2_config_kv_heads(c), hd = gpt2_config_head_dim(c), Q = H * hd;
    const int p0 = j->p0, T = j->T, P = p0 + T, W = gpt2_config_windowed(c, j->l) ? c->arch.sliding_window : 0;
    const float *kc = ctx->k_cache + (size_t)j->l * ctx->n_ctx * KVH * hd; /* (KVH, n_ctx, hd) */
    const float *vc = ctx->v_cache + (size_t)j->l * ctx->n_ctx * KVH * hd;
    const float scale = c->arch.attn_scale > 0 ? c->arch.attn_scale : 1.0f / sqrtf((float)hd);
    const float cap = c->arch.attn_softcap;
    int h0, h1;
    (void)ith;
    pool_share(H, 1, chunk, n_chunks, &h0, &h1);
    for (int h = h0; h < h1; h++) {
        const float *q = j->v.q + h * hd;   /* row stride ldq */
        const float *k = kc + (size_t)(h / (H / KVH)) * ctx->n_ctx * hd; /* row stride hd */
        const float *v = vc + (size_t)(h / (H / KVH)) * ctx->n_ctx * hd;
        float *y = ctx->atty + h * hd;       /* row stride Q */
        float *att = ctx->att + (size_t)h * ctx->n_batch * ctx->n_ctx; /* (T, P) */
        if (T <= KERNEL_SMALL_T || (W && P > W)) {
            /* row by row, as decode does, so that a few positions evaluated
             * together (speculative verification) match decode bit for bit */
            for (int t = 0; t < T; t++) {
                float *row = att + (size_t)t * P;
                const int n_keys = p0 + t + 1, first = W && n_keys > W ? n_keys - W : 0;
                memset(row, 0, (size_t)first * sizeof(float));
                kernel_attention_row(y + (size_t)t * Q, row + first, q + (size_t)t * j->v.ldq, k + (size_t)first * hd,
                                     v + (size_t)first * hd, n_keys - first, hd, hd, scale, cap);
                memset(row + n_keys, 0, (size_t)(P - n_keys) * sizeof(float));
            }
        } else {
            /* In blocks of ATTN_ROWS positions [t0, t1), which see keys
             * [0, p0 + t1) only: the products skip the masked triangle.
             * att (n, keys) = q k^T * scale, causal softmax per row, then
             * y (n, hd) = att (n, keys) v (keys, hd). */
            for (int t0 = 0; t0 < T; t0 += ATTN_ROWS) {
                const int t1 = t0 + ATTN_ROWS < T ? t0 + ATTN_ROWS : T, n = t1 - t0, keys = p0 + t1;
                float *blk = att + (size_t)t0 * P;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, keys, hd, scale, q + (size_t)t0 * j->v.ldq,
                            j->v.ldq, k, hd, 0.0f, blk, P);
                for (int t = t0; t < t1; t++) {
                    float *row = att + (size_t)t * P;
                    const int n_keys = p0 + t + 1;
                    if (cap > 0) kernel_softcap(row, (size_t)n_keys, cap);
                    kernel_softmax(row, n_keys);
                    memset(row + n_keys, 0, (size_t)(P - n_keys) * sizeof(float));
                }
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, hd, keys, 1.0f, blk, P, v, hd, 0.0f,
                            y + (size_t)t0 * Q, Q);
            }
        }
    }
}

/* Rotary positions of layer l, after Qwen3's and Gemma 3's per-head q/k
 * norm: every query and key head of the T new positions, in place. */
static void rotate(gpt2_context *ctx, int l, const gpt2_layer *L, const qkv_view *v, int p0, int T) {
    const gpt2_config *c = &ctx->m->cfg;
    const int H = c->n_head, KVH = gpt2_config_kv_heads(c), hd = gpt2_config_head_dim(c);
    const int half = c->arch.rope_dim / 2, local = ctx->rope_cos_local && gpt2_config_windowed(c, l);
    const float *cos_tab = local ? ctx->rope_cos_local : ctx->rope_cos, *sin_tab = local ? ctx->rope_sin_local : ctx->rope_sin;
    for (int t = 0; t < T; t++) {
        const float *cs = cos_tab + (size_t)(p0 + t) * half, *sn = sin_tab + (size_t)(p0 + t) * half;
        for (int h = 0; h < H + KVH; h++) {
            float *x = h < H ? v->q + (size_t)t * v->ldq + h * hd : v->k + (size_t)t * v->ldkv + (h - H) * hd;
            const float *g = h < H ? L->q_norm : L->k_norm;
            if (g) kernel_rmsnorm(x, x, g, 1, hd, c->ln_eps);
            kernel_rope(x, cs, sn, half);
        }
    }
}

/* Whether an editor wants to change `what` in layer l. */
static int wants_edit(const gpt2_context *ctx, int what, int l) {
    for (int i = 0; i < ctx->n_hooks; i++) {
        const gpt2_hooks *hk = &ctx->hooks[i];
        if (hk->edit && (!hk->want_edit || hk->want_edit(hk->user_data, what, l))) return 1;
    }
    return 0;
}

/* The editors' turn at `what` of layer l: rows of n floats, `stride` apart,
 * for the T positions from p0. */
static void run_edits(gpt2_context *ctx, int what, int l, int p0, int T, float *v, size_t stride, int n) {
    for (int i = 0; i < ctx->n_hooks; i++) {
        const gpt2_hooks *hk = &ctx->hooks[i];
        if (!hk->edit || (hk->want_edit && !hk->want_edit(hk->user_data, what, l))) continue;
        for (int t = 0; t < T; t++) hk->edit(hk->user_data, what, l, p0 + t, v + (size_t)t * stride, n);
    }
}

/* Layer l's attention for T positions at p0: the new keys and values into
 * the cache, the heads over the pool, then zero-ablation and the heads each
 * observer wants. */
static void attention(gpt2_context *ctx, int l, const qkv_view *v, int p0, int T) {
    const gpt2_config *c = &ctx->m->cfg;
    const int H = c->n_head, KVH = gpt2_config_kv_heads(c), hd = gpt2_config_head_dim(c), Q = H * hd, P = p0 + T;
    float *kc = ctx->k_cache + (size_t)l * ctx->n_ctx * KVH * hd, *vc = ctx->v_cache + (size_t)l * ctx->n_ctx * KVH * hd;
    for (int g = 0; g < KVH; g++)
        for (int t = 0; t < T; t++) {
            const size_t at = ((size_t)g * ctx->n_ctx + p0 + t) * hd;
            memcpy(kc + at, v->k + (size_t)t * v->ldkv + g * hd, (size_t)hd * sizeof(float));
            memcpy(vc + at, v->v + (size_t)t * v->ldkv + g * hd, (size_t)hd * sizeof(float));
        }
    attention_job job = {ctx, *v, l, p0, T};
    pool_run(ctx->pool, attention_heads, &job, H);
    if (ctx->n_ablated) /* zero-ablation: the head adds nothing to the output projection */
        for (int h = 0; h < H; h++)
            if (ctx->ablated[(size_t)l * H + h])
                for (int t = 0; t < T; t++) memset(ctx->atty + (size_t)t * Q + h * hd, 0, (size_t)hd * sizeof(float));
    if (wants_edit(ctx, GPT2_EDIT_HEAD_VALUES, l)) run_edits(ctx, GPT2_EDIT_HEAD_VALUES, l, p0, T, ctx->atty, Q, Q);
    for (int i = 0; i < ctx->n_hooks; i++) { /* each observer gets the heads it wants */
        const gpt2_hooks *hk = &ctx->hooks[i];
        for (int h = 0; hk->on_attention && h < H; h++) {
            if (hk->want_attention && !hk->want_attention(hk->user_data, l, h)) continue;
            const float *att = ctx->att + (size_t)h * ctx->n_batch * ctx->n_ctx;
            for (int t = 0; t < T; t++) hk->on_attention(hk->user_data, l, h, p0 + t, att + (size_t)t * P, p0 + t + 1);
        }
        if (hk->on_head_values && (!hk->want_head_values || hk->want_head_values(hk->user_data, l)))
            for (int t = 0; t < T; t++) hk->on_head_values(hk->user_data, l, p0 + t, ctx->atty + (size_t)t * Q, H, hd);
    }
}

/* Row-parallel layer norm for a batch; one position runs inline, where a
 * pool round trip would cost more than the work. */
typedef struct {
    float *out;
    const float *in, *g, *b;
    int T, C;
    float eps;
    int rms;
    float *sum; /* (T, C) or NULL: out's rows then added into it (a residual) */
} rows_job;

/* Row blocks: enough chunks to balance two threads, few enough to be cheap. */
static int row_chunks(int T) { return T < 16 ? T : 16; }

/* LayerNorm, or RMSNorm (b unused) when the description says. */
static void norm_rows(void *arg, int chunk, int n_chunks, int ith) {
    const rows_job *j = arg;
    int t0, t1;
    (void)ith;
    pool_share(j->T, 1, chunk, n_chunks, &t0, &t1);
    if (t0 >= t1) return;
    if (j->rms) kernel_rmsnorm(j->out + (size_t)t0 * j->C, j->in + (size_t)t0 * j->C, j->g, t1 - t0, j->C, j->eps);
    else kernel_layernorm(j->out + (size_t)t0 * j->C, j->in + (size_t)t0 * j->C, j->g, j->b, t1 - t0, j->C, j->eps);
    if (j->sum)
        for (size_t i = (size_t)t0 * j->C; i < (size_t)t1 * j->C; i++) j->sum[i] += j->out[i];
}

static void run_rows(gpt2_context *ctx, rows_job *j) {
    if (j->T == 1) norm_rows(j, 0, 1, 0);
    else pool_run(ctx->pool, norm_rows, j, row_chunks(j->T));
}

static void norm(gpt2_context *ctx, float *out, const float *in, const float *g, const float *b, int T) {
    const gpt2_config *c = &ctx->m->cfg;
    rows_job j = {out, in, g, b, T, c->n_embd, c->ln_eps, c->arch.rms_norm, NULL};
    run_rows(ctx, &j);
}

/* x (T, C) += rmsnorm(y) * g, y normed in place: a block's output joining
 * the residual through its own norm (gpt2_arch.post_norms). */
static void norm_into(gpt2_context *ctx, float *x, float *y, const float *g, int T) {
    const gpt2_config *c = &ctx->m->cfg;
    rows_job j = {y, y, g, NULL, T, c->n_embd, c->ln_eps, 1, x};
    run_rows(ctx, &j);
}

/* hid (T, F) = silu(gate) * up (gelu(gate) * up: GeGLU), rows over the pool
 * past one position: gate and up the halves of one matrix's rows (T, 2F), or
 * gate (T, F) and hid itself. */
typedef struct {
    gpt2_context *ctx;
    int T, joined;
} swiglu_job;

static void swiglu_rows(void *arg, int chunk, int n_chunks, int ith) {
    const swiglu_job *j = arg;
    const size_t F = (size_t)j->ctx->m->n_inner;
    int t0, t1;
    (void)ith;
    pool_share(j->T, 1, chunk, n_chunks, &t0, &t1);
    for (int t = t0; t < t1; t++) {
        float *hid = j->ctx->hid + (size_t)t * F;
        const float *g = j->ctx->gate + (size_t)t * (j->joined ? 2 * F : F);
        if (j->ctx->m->cfg.arch.geglu) kernel_geglu(hid, g, j->joined ? g + F : hid, F);
        else kernel_swiglu(hid, g, j->joined ? g + F : hid, F);
    }
}

static void swiglu(gpt2_context *ctx, int T, int joined) {
    swiglu_job j = {ctx, T, joined};
    if (T == 1) swiglu_rows(&j, 0, 1, 0);
    else pool_run(ctx->pool, swiglu_rows, &j, row_chunks(T));
}

/* Layer l's MLP output, its down projection of hid with the bias, for the
 * observers that want it: computed apart into xn (free once the MLP has
 * read it), so that the stream's own sum is untouched; in_xn: it is there
 * already (an edited layer's). */
static void observe_mlp(gpt2_context *ctx, const gpt2_layer *L, int l, int T, int in_xn) {
    const int C = ctx->m->cfg.n_embd;
    int done = in_xn;
    for (int i = 0; i < ctx->n_hooks; i++) {
        const gpt2_hooks *hk = &ctx->hooks[i];
        if (!hk->on_mlp_out || (hk->want_mlp_out && !hk->want_mlp_out(hk->user_data, l))) continue;
        if (!done++)
            kernel_matmul(ctx->pool, ctx->xn, ctx->hid, T, &L->fcproj_w, L->fcproj_b, 0, ctx->scratch, ctx->partials);
        for (int t = 0; t < T; t++) hk->on_mlp_out(hk->user_data, l, ctx->n_past + t, ctx->xn + (size_t)t * C, C);
    }
}

/* The index of the first non-finite value in x (n), or -1. */
static long first_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return (long)i;
    return -1;
}

/* Runs one batch of T <= n_batch tokens at positions n_past ... On
 * GPT2_CANCELLED (the cancel hook) or non-finite logits (weights holding
 * NaN or Inf) n_past is unchanged. */
static gpt2_status forward_batch(gpt2_context *ctx, const int32_t *tokens, int T, gpt2_error *err) {
    const gpt2_model *m = ctx->m;
    const gpt2_config *c = &m->cfg;
    const int C = c->n_embd, V = c->n_vocab, p0 = ctx->n_past;
    const float embed_scale = c->arch.embed_scale;
    for (int t = 0; t < T; t++) {
        float *x = ctx->x + (size_t)t * C;
        kernel_row(x, &m->wte, tokens[t]);
        if (m->wpe)
            for (int i = 0; i < C; i++) x[i] += m->wpe[(size_t)(p0 + t) * C + i];
        if (embed_scale > 0)
            for (int i = 0; i < C; i++) x[i] *= embed_scale;
    }
    for (int i = 0; i < ctx->n_hooks; i++)
        for (int t = 0; ctx->hooks[i].on_embed && t < T; t++)
            ctx->hooks[i].on_embed(ctx->hooks[i].user_data, p0 + t, ctx->x + (size_t)t * C, C);
    for (int l = 0; l < c->n_layer; l++) {
        const gpt2_layer *L = &m->layers[l];
        if (any_cancel(ctx))
            return gpt2_fail(err, GPT2_CANCELLED, "interrupted in layer %d of a batch of %d tokens", l, T);
        if (wants_edit(ctx, GPT2_EDIT_RESIDUAL, l)) run_edits(ctx, GPT2_EDIT_RESIDUAL, l, p0, T, ctx->x, C, C);
        norm(ctx, ctx->xn, ctx->x, L->ln1_g, L->ln1_b, T);
        const qkv_view v = qkv_of(ctx, L, T);
        if (L->attn_w.data) {
            kernel_matmul(ctx->pool, ctx->qkv, ctx->xn, T, &L->attn_w, L->attn_b, 0, ctx->scratch, ctx->partials);
        } else {
            kernel_matmul(ctx->pool, v.q, ctx->xn, T, &L->q_w, L->q_b, 0, ctx->scratch, ctx->partials);
            kernel_matmul(ctx->pool, v.k, ctx->xn, T, &L->k_w, L->k_b, 0, ctx->scratch, ctx->partials);
            kernel_matmul(ctx->pool, v.v, ctx->xn, T, &L->v_w, L->v_b, 0, ctx->scratch, ctx->partials);
        }
        if (ctx->rope_cos) rotate(ctx, l, L, &v, p0, T);
        attention(ctx, l, &v, p0, T);
        /* a parallel residual's MLP reads the block's input, before the attention adds to it */
        if (c->arch.parallel_residual) norm(ctx, ctx->xn, ctx->x, L->ln2_g, L->ln2_b, T);
        if (L->attn_out_norm) { /* the output normed on its own, then added: xn is free until ln_2 */
            kernel_matmul(ctx->pool, ctx->xn, ctx->atty, T, &L->proj_w, L->proj_b, 0, ctx->scratch, ctx->partials);
            norm_into(ctx, ctx->x, ctx->xn, L->attn_out_norm, T);
        } else {
            kernel_matmul(ctx->pool, ctx->x, ctx->atty, T, &L->proj_w, L->proj_b, 1, ctx->scratch, ctx->partials);
        }
        if (!c->arch.parallel_residual) norm(ctx, ctx->xn, ctx->x, L->ln2_g, L->ln2_b, T);
        if (L->gate_w.data && !L->fc_w.data) { /* gate and up joined: (T, 2F) */
            kernel_matmul(ctx->pool, ctx->gate, ctx->xn, T, &L->gate_w, L->gate_up_b, 0, ctx->scratch, ctx->partials);
            swiglu(ctx, T, 1);
        } else if (L->gate_w.data) {
            kernel_matmul(ctx->pool, ctx->gate, ctx->xn, T, &L->gate_w, L->gate_b, 0, ctx->scratch, ctx->partials);
            kernel_matmul(ctx->pool, ctx->hid, ctx->xn, T, &L->fc_w, L->fc_b, 0, ctx->scratch, ctx->partials);
            swiglu(ctx, T, 0);
        } else {
            kernel_matmul_gelu(ctx->pool, ctx->hid, ctx->xn, T, &L->fc_w, L->fc_b, m->gelu_erf, ctx->scratch,
                               ctx->partials);
        }
        if (L->mlp_out_norm) { /* as the attention's: xn is read no more once hid is made */
            kernel_matmul(ctx->pool, ctx->xn, ctx->hid, T, &L->fcproj_w, L->fcproj_b, 0, ctx->scratch, ctx->partials);
            norm_into(ctx, ctx->x, ctx->xn, L->mlp_out_norm, T);
        } else if (wants_edit(ctx, GPT2_EDIT_MLP_OUT, l)) { /* apart, edited, then added */
            kernel_matmul(ctx->pool, ctx->xn, ctx->hid, T, &L->fcproj_w, L->fcproj_b, 0, ctx->scratch, ctx->partials);
            run_edits(ctx, GPT2_EDIT_MLP_OUT, l, p0, T, ctx->xn, C, C);
            for (size_t i = 0; i < (size_t)T * C; i++) ctx->x[i] += ctx->xn[i];
            observe_mlp(ctx, L, l, T, 1);
        } else {
            kernel_matmul(ctx->pool, ctx->x, ctx->hid, T, &L->fcproj_w, L->fcproj_b, 1, ctx->scratch, ctx->partials);
            observe_mlp(ctx, L, l, T, 0); /* Gemma's normed output is not observed yet: attribution refuses it */
        }
        for (int i = 0; i < ctx->n_hooks; i++) {
            const gpt2_hooks *hk = &ctx->hooks[i];
            if (hk->on_residual && (!hk->want_residual || hk->want_residual(hk->user_data, l)))
                for (int t = 0; t < T; t++) hk->on_residual(hk->user_data, l, p0 + t, ctx->x + (size_t)t * C, C);
        }
    }
    float *rows = ctx->logits; /* (T or 1, V): what gets checked */
    int n_rows = 1;
    if (ctx->want_logits && ctx->logits_all) {
        norm(ctx, ctx->xn, ctx->x, m->lnf_g, m->lnf_b, T);
        kernel_matmul_t(ctx->pool, ctx->logits_all, V, ctx->xn, T, &m->lm_head, ctx->scratch, ctx->partials);
        rows = ctx->logits_all, n_rows = T;
    } else {
        const float *last = ctx->x + (size_t)(T - 1) * C;
        norm(ctx, ctx->xn, last, m->lnf_g, m->lnf_b, 1);
        kernel_matmul_t(ctx->pool, ctx->logits, V, ctx->xn, 1, &m->lm_head, ctx->scratch, ctx->partials);
    }
    if (c->arch.final_softcap > 0) kernel_softcap(rows, (size_t)n_rows * V, c->arch.final_softcap);
    /* NaN or Inf weights make every later result meaningless: stop at the first */
    long bad = first_nonfinite(rows, (size_t)n_rows * V);
    if (bad >= 0) {
        ctx->logits_valid = 0;
        return gpt2_fail(err, GPT2_ERR_FORMAT,
                         "model %s: the logit of token %ld at position %ld is %f: its weights hold NaN or Inf "
                         "values",
                         gpt2_model_name(m), bad % V, p0 + (rows == ctx->logits ? T - 1 : bad / V), rows[bad]);
    }
    if (rows == ctx->logits_all) {
        for (int i = 0; i < ctx->n_hooks; i++) {
            const gpt2_hooks *hk = &ctx->hooks[i];
            if (hk->on_logits)
                for (int t = 0; t < T; t++) hk->on_logits(hk->user_data, p0 + t, ctx->logits_all + (size_t)t * V, V);
        }
        memcpy(ctx->logits, ctx->logits_all + (size_t)(T - 1) * V, (size_t)V * sizeof(float));
    }
    memcpy(ctx->tokens + p0, tokens, (size_t)T * sizeof(int32_t));
    ctx->n_past += T;
    ctx->logits_valid = 1;
    return GPT2_OK;
}

gpt2_status gpt2_context_eval(gpt2_context *ctx, const int32_t *tokens, int n, gpt2_error *err) {
    const gpt2_config *c = &ctx->m->cfg;
    if (n < 0) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "eval: negative token count %d", n);
    if (n == 0) return GPT2_OK;
    if (n > ctx->n_ctx - ctx->n_past)
        return gpt2_fail(err, GPT2_ERR_CONTEXT_FULL,
                         "context full: %d positions in use + %d new tokens exceed the context window of %d",
                         ctx->n_past, n, ctx->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->n_vocab)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "eval: token %d (at index %d) is outside [0, %d)",
                             tokens[i], i, c->n_vocab);
    if (ctx->want_logits && !ctx->logits_all) {
        ctx->logits_all = malloc((size_t)ctx->n_batch * c->n_vocab * sizeof(float));
        if (!ctx->logits_all) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for per-position logits");
    }
    for (int done = 0; done < n;) {
        int T = n - done < ctx->n_batch ? n - done : ctx->n_batch;
        gpt2_status st = forward_batch(ctx, tokens + done, T, err);
        if (st != GPT2_OK) return st;
        done += T;
        if (done < n && any_progress_stop(ctx, done, n))
            return gpt2_fail(err, GPT2_CANCELLED, "cancelled after %d of %d tokens", done, n);
    }
    return GPT2_OK;
}

const float *gpt2_context_logits(const gpt2_context *ctx) { return ctx->logits_valid ? ctx->logits : NULL; }
int gpt2_context_n_past(const gpt2_context *ctx) { return ctx->n_past; }
int gpt2_context_n_ctx(const gpt2_context *ctx) { return ctx->n_ctx; }
int gpt2_context_n_threads(const gpt2_context *ctx) { return pool_n_threads(ctx->pool); }
const int32_t *gpt2_context_tokens(const gpt2_context *ctx) { return ctx->tokens; }
const gpt2_model *gpt2_context_model(const gpt2_context *ctx) { return ctx->m; }

gpt2_status gpt2_context_rewind(gpt2_context *ctx, int n_past, gpt2_error *err) {
    if (n_past < 0 || n_past > ctx->n_past)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "rewind to %d: outside [0, %d]", n_past, ctx->n_past);
    if (n_past != ctx->n_past) ctx->logits_valid = 0;
    ctx->n_past = n_past;
    return GPT2_OK;
}

void gpt2_context_reset(gpt2_context *ctx) {
    ctx->n_past = 0;
    ctx->logits_valid = 0;
}

gpt2_status gpt2_context_set_ablation(gpt2_context *ctx, const unsigned char *heads, gpt2_error *err) {
    if (!ctx) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "set_ablation: NULL context");
    const gpt2_config *c = &ctx->m->cfg;
    const size_t n = (size_t)c->n_layer * c->n_head;
    int count = 0;
    for (size_t i = 0; heads && i < n; i++) count += heads[i] != 0;
    if (!ctx->ablated && count) {
        if (!(ctx->ablated = calloc(n, 1))) return gpt2_fail(err, GPT2_ERR_NOMEM, "set_ablation: out of memory");
    }
    int same = 1;
    for (size_t i = 0; ctx->ablated && i < n; i++) {
        unsigned char v = heads && heads[i] ? 1 : 0;
        same &= ctx->ablated[i] == v;
        ctx->ablated[i] = v;
    }
    ctx->n_ablated = count;
    /* every position's keys and values from the first layer after an ablated
     * head on depend on the set: the cache no longer holds this model's state */
    if (!same) gpt2_context_reset(ctx);
    return GPT2_OK;
}

int gpt2_context_ablated(const gpt2_context *ctx, int layer, int head) {
    if (!ctx || !ctx->ablated) return 0;
    const gpt2_config *c = &ctx->m->cfg;
    if (layer < 0 || layer >= c->n_layer || head < 0 || head >= c->n_head) return 0;
    return ctx->ablated[(size_t)layer * c->n_head + head];
}

gpt2_status gpt2_context_unembed(gpt2_context *ctx, const float *x, float *logits, gpt2_error *err) {
    if (!ctx || !x || !logits) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "unembed: NULL argument");
    const gpt2_model *m = ctx->m;
    /* the same kernels as the forward pass's last position, so the last
     * block's residual gives the model's logits bit for bit */
    norm(ctx, ctx->xn, x, m->lnf_g, m->lnf_b, 1);
    kernel_matmul_t(ctx->pool, logits, m->cfg.n_vocab, ctx->xn, 1, &m->lm_head, ctx->scratch, ctx->partials);
    if (m->cfg.arch.final_softcap > 0) kernel_softcap(logits, (size_t)m->cfg.n_vocab, m->cfg.arch.final_softcap);
    return GPT2_OK;
}
