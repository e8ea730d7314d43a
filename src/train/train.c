/* train.c — GPT-2 training: forward pass with saved activations, backward
 * pass, AdamW. Float32 throughout; OpenBLAS (single-threaded) inside the
 * chunks of the library's own thread pool, so one pool does the work.
 *
 * Notation in shape comments: B batch, T positions, C n_embd, H heads,
 * D = C / H head size, F = 4C MLP width, V vocabulary, L layers.
 * Weight matrices are kept (out, in) row-major, as y = x W^T + b; export
 * transposes them to Hugging Face's Conv1D (in, out).
 *
 * Reductions whose order would depend on the thread count (loss, layer-norm
 * parameter gradients, the gradient norm) are summed over a fixed number of
 * chunks in chunk order, so a run is reproducible for a given thread count.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fastmath.h"
#include "core/gemm.h"
#include "core/kernels.h"
#include "core/pool.h"
#include "core/rng.h"
#include "gpt2_testing.h"
#include "gpt2_train.h"
#include "train/train_internal.h"

enum { RED_CHUNKS = 16 }; /* fixed chunk count for deterministic reductions */

/* per-layer tensors, in the order of the tensor table */
static const char *const layer_tensor_names[N_LAYER_TENSORS] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

gpt2_train_params gpt2_train_default_params(void) {
    gpt2_train_params p;
    memset(&p, 0, sizeof p);
    p.n_layer = 4;
    p.n_head = 4;
    p.n_embd = 128;
    p.block_size = 128;
    p.batch_size = 16;
    p.steps = 1000;
    p.warmup_steps = 100;
    p.lr = 1e-3f;
    p.min_lr = 1e-4f;
    p.weight_decay = 0.1f;
    p.beta1 = 0.9f;
    p.beta2 = 0.99f;
    p.adam_eps = 1e-8f;
    p.grad_clip = 1.0f;
    p.dropout = 0.1f;
    p.seed = 1337;
    return p;
}

static gpt2_status check_params(const gpt2_train_params *p, gpt2_error *err) {
#define NEED(cond, ...) \
    if (!(cond)) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, __VA_ARGS__)
    NEED(p->n_layer >= 1 && p->n_layer <= 256, "train: n_layer %d is out of range 1..256", p->n_layer);
    NEED(p->n_head >= 1 && p->n_embd >= 1 && p->n_embd <= 16384, "train: n_embd %d / n_head %d out of range",
         p->n_embd, p->n_head);
    NEED(p->n_embd % p->n_head == 0, "train: n_embd %d is not a multiple of n_head %d", p->n_embd, p->n_head);
    NEED(p->block_size >= 1 && p->block_size <= 65536, "train: block_size %d is out of range 1..65536",
         p->block_size);
    NEED(p->n_vocab >= 2 && p->n_vocab <= (1 << 24), "train: n_vocab %d is out of range 2..16777216", p->n_vocab);
    NEED(p->batch_size >= 1 && p->batch_size <= 65536, "train: batch_size %d is out of range", p->batch_size);
    NEED(p->steps >= 0 && p->warmup_steps >= 0, "train: steps %d / warmup %d must be >= 0", p->steps,
         p->warmup_steps);
    NEED(p->lr >= 0 && p->min_lr >= 0 && isfinite(p->lr) && isfinite(p->min_lr), "train: bad learning rate");
    NEED(p->beta1 >= 0 && p->beta1 < 1 && p->beta2 >= 0 && p->beta2 < 1 && p->adam_eps > 0,
         "train: Adam betas must be in [0, 1) and eps > 0");
    NEED(p->weight_decay >= 0 && p->grad_clip >= 0, "train: weight decay and clip must be >= 0");
    NEED(p->dropout >= 0 && p->dropout < 1, "train: dropout %g must be in [0, 1)", p->dropout);
    NEED(p->attn_dropout >= 0 && p->attn_dropout < 1, "train: attn_dropout %g must be in [0, 1)", p->attn_dropout);
    NEED(p->n_threads >= 0 && p->n_threads <= 1024, "train: n_threads %d out of range", p->n_threads);
    NEED(p->short_steps >= 0 && p->short_block >= 0, "train: short_steps %d / short_block %d must be >= 0",
         p->short_steps, p->short_block);
    NEED(!p->short_steps || (p->short_block >= 1 && p->short_block <= p->block_size &&
                             p->block_size % p->short_block == 0),
         "train: short_block %d must divide block_size %d (a warmup step holds a full step's tokens)",
         p->short_block, p->block_size);
    NEED(p->short_init_positions == 0 || p->short_init_positions == 1,
         "train: short_init_positions = %d, expected 0 or 1", p->short_init_positions);
    NEED(!p->short_init_positions || p->short_steps,
         "train: short_init_positions needs a sequence-length warmup (short_steps > 0)");
    NEED(p->short_offsets >= 0 && p->short_offsets <= 1, "train: short_offsets = %g, expected a fraction 0..1",
         (double)p->short_offsets);
    NEED(!p->short_offsets || p->short_steps,
         "train: short_offsets needs a sequence-length warmup (short_steps > 0)");
    NEED(!(p->short_offsets && p->short_init_positions),
         "train: short_offsets trains every position row; short_init_positions would overwrite them");
    size_t per_seq = (size_t)p->block_size * p->n_embd * (16 + (size_t)p->n_layer * 17) +
                     (size_t)p->n_layer * p->n_head * p->block_size * p->block_size +
                     (size_t)p->block_size * p->n_vocab;
    NEED(per_seq * p->batch_size < ((size_t)1 << 36), "train: activations for batch %d x block %d need over 256 GB",
         p->batch_size, p->block_size);
#undef NEED
    return GPT2_OK;
}

/* --- tensor table ----------------------------------------------------------- */

static void tensor_shape(const gpt2_train_params *p, int i, int *rows, int *cols) {
    const int C = p->n_embd, nl = N_LAYER_TENSORS * p->n_layer;
    if (i == 0) *rows = p->n_vocab, *cols = C;
    else if (i == 1) *rows = p->block_size, *cols = C;
    else if (i >= 2 + nl) *rows = C, *cols = 0;
    else {
        static const int mult_rows[N_LAYER_TENSORS] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 1, 1};
        static const int mult_cols[N_LAYER_TENSORS] = {0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 0};
        int k = (i - 2) % N_LAYER_TENSORS;
        *rows = mult_rows[k] * C, *cols = mult_cols[k] * C;
    }
}

static void tensor_name(const gpt2_train_params *p, int i, char *out, size_t cap) {
    const int nl = N_LAYER_TENSORS * p->n_layer;
    if (i == 0) snprintf(out, cap, "wte.weight");
    else if (i == 1) snprintf(out, cap, "wpe.weight");
    else if (i == 2 + nl) snprintf(out, cap, "ln_f.weight");
    else if (i == 3 + nl) snprintf(out, cap, "ln_f.bias");
    else snprintf(out, cap, "h.%d.%s", (i - 2) / N_LAYER_TENSORS, layer_tensor_names[(i - 2) % N_LAYER_TENSORS]);
}

gpt2_status trainer_plan(const gpt2_train_params *p, size_t *n_params, gpt2_error *err) {
    gpt2_status st = check_params(p, err);
    if (st != GPT2_OK) return st;
    size_t n = 0; /* at most ~1e13 within check_params' limits: no overflow */
    for (int i = 0; i < 2 + N_LAYER_TENSORS * p->n_layer + 2; i++) {
        int rows, cols;
        tensor_shape(p, i, &rows, &cols);
        n += (size_t)rows * (size_t)(cols ? cols : 1);
    }
    *n_params = n;
    return GPT2_OK;
}

int gpt2_trainer_n_tensors(const gpt2_trainer *tr) { return tr->n_tensors; }

gpt2_train_tensor gpt2_trainer_tensor(const gpt2_trainer *tr, int i) {
    int rows, cols;
    tensor_shape(&tr->p, i, &rows, &cols);
    size_t off = tr->offset[i];
    return (gpt2_train_tensor){.name = tr->names[i],
                               .param = tr->params + off,
                               .grad = tr->grads + off,
                               .n = tr->offset[i + 1] - off,
                               .rows = rows,
                               .cols = cols};
}

/* index of the first bad value of a (non-finite, or negative when nonneg), or n */
static size_t first_bad(const float *a, size_t n, int nonneg) {
    for (size_t j = 0; j < n; j++)
        if (!isfinite(a[j]) || (nonneg && a[j] < 0)) return j;
    return n;
}

int trainer_values_ok(const gpt2_trainer *tr, int optimizer, char *buf, size_t cap) {
    static const char *what[3] = {"parameter", "Adam first moment", "Adam second moment"};
    const float *arrays[3] = {tr->params, tr->m, tr->v};
    for (int a = 0; a < (optimizer ? 3 : 1); a++) {
        size_t j = first_bad(arrays[a], tr->n_params, a == 2);
        if (j == tr->n_params) continue;
        int i = 0;
        while (tr->offset[i + 1] <= j) i++;
        snprintf(buf, cap, "%s %s[%zu] = %g", what[a], tr->names[i], j - tr->offset[i], (double)arrays[a][j]);
        return 0;
    }
    return 1;
}

/* pointer to tensor k of layer l inside a params-shaped buffer */
static inline float *LT(const gpt2_trainer *tr, float *base, int l, int k) {
    return base + tr->offset[2 + l * N_LAYER_TENSORS + k];
}

/* --- lifecycle ---------------------------------------------------------------- */

static void *xcalloc(size_t n, size_t size, int *ok) {
    void *p = n ? calloc(n, size) : NULL;
    if (n && !p) *ok = 0;
    return p;
}

static gpt2_status trainer_alloc(const gpt2_train_params *p, gpt2_trainer **out, gpt2_error *err) {
    *out = NULL;
    gpt2_status st = check_params(p, err);
    if (st != GPT2_OK) return st;
    gpt2_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return gpt2_fail(err, GPT2_ERR_NOMEM, "train: out of memory");
    tr->p = *p;
    int nt = p->n_threads > 0 ? p->n_threads : pool_default_threads();
    tr->p.n_threads = p->n_threads; /* 0 stays 0: "all CPUs" wherever resumed */
    tr->pool = pool_new(nt);
    tr->n_threads = nt;
    openblas_set_num_threads(1);
    const int L = p->n_layer;
    tr->n_tensors = 2 + N_LAYER_TENSORS * L + 2;
    int ok = tr->pool != NULL;
    tr->offset = xcalloc((size_t)tr->n_tensors + 1, sizeof *tr->offset, &ok);
    tr->names = xcalloc((size_t)tr->n_tensors, sizeof *tr->names, &ok);
    if (!ok) goto nomem;
    for (int i = 0; i < tr->n_tensors; i++) {
        int rows, cols;
        tensor_shape(p, i, &rows, &cols);
        tr->offset[i + 1] = tr->offset[i] + (size_t)rows * (cols ? cols : 1);
        char name[64];
        tensor_name(p, i, name, sizeof name);
        if (!(tr->names[i] = strdup(name))) goto nomem;
    }
    tr->n_params = tr->offset[tr->n_tensors];
    tr->params = xcalloc(tr->n_params, sizeof(float), &ok);
    tr->grads = xcalloc(tr->n_params, sizeof(float), &ok);
    tr->m = xcalloc(tr->n_params, sizeof(float), &ok);
    tr->v = xcalloc(tr->n_params, sizeof(float), &ok);
    tr->packed = xcalloc(tr->n_params, sizeof(float), &ok);

    const size_t B = (size_t)p->batch_size, T = (size_t)p->block_size, C = (size_t)p->n_embd, F = 4 * C;
    const size_t H = (size_t)p->n_head, V = (size_t)p->n_vocab, BT = B * T, BTC = BT * C;
    tr->inputs = xcalloc(BT, sizeof(int32_t), &ok);
    tr->targets = xcalloc(BT, sizeof(int32_t), &ok);
    tr->pos0 = xcalloc(BT, sizeof(int32_t), &ok); /* a warmup batch has up to B T / short_block sequences */
    tr->x0 = xcalloc(BTC, sizeof(float), &ok);
    tr->ln1 = xcalloc(L * BTC, sizeof(float), &ok);
    tr->ln1_stats = xcalloc(L * BT * 2, sizeof(float), &ok);
    tr->qkv = xcalloc(L * BTC * 3, sizeof(float), &ok);
    tr->att = xcalloc(L * B * H * T * T, sizeof(float), &ok);
    tr->atty = xcalloc(L * BTC, sizeof(float), &ok);
    tr->res2 = xcalloc(L * BTC, sizeof(float), &ok);
    tr->ln2 = xcalloc(L * BTC, sizeof(float), &ok);
    tr->ln2_stats = xcalloc(L * BT * 2, sizeof(float), &ok);
    tr->fch = xcalloc(L * BT * F, sizeof(float), &ok);
    tr->fchg = xcalloc(L * BT * F, sizeof(float), &ok);
    tr->res3 = xcalloc(L * BTC, sizeof(float), &ok);
    tr->lnf = xcalloc(BTC, sizeof(float), &ok);
    tr->lnf_stats = xcalloc(BT * 2, sizeof(float), &ok);
    tr->logits = xcalloc(BT * V, sizeof(float), &ok);
    tr->dres = xcalloc(BTC, sizeof(float), &ok);
    tr->dbuf = xcalloc(BTC, sizeof(float), &ok);
    tr->dbig = xcalloc(BT * F, sizeof(float), &ok);
    tr->dqkv = xcalloc(BTC * 3, sizeof(float), &ok);
    tr->dscores = xcalloc((size_t)nt * T * T, sizeof(float), &ok);
    tr->pdrop = xcalloc((size_t)nt * ATT_ROWS * T, sizeof(float), &ok);
    tr->partials = xcalloc(RED_CHUNKS * 2 * (C + 16), sizeof(double), &ok);
    if (!ok) goto nomem;
    *out = tr;
    return GPT2_OK;
nomem:
    gpt2_trainer_free(tr);
    return gpt2_fail(err, GPT2_ERR_NOMEM, "train: out of memory for a %d-layer, %d-wide model at batch %d x %d",
                     p->n_layer, p->n_embd, p->batch_size, p->block_size);
}

gpt2_status gpt2_trainer_new(gpt2_train_params params, gpt2_trainer **out, gpt2_error *err) {
    const gpt2_train_params *p = &params;
    gpt2_status st = trainer_alloc(p, out, err);
    if (st != GPT2_OK) return st;
    gpt2_trainer *tr = *out;
    uint64_t seed = p->seed;
    const float resid_std = 0.02f / sqrtf(2.0f * (float)p->n_layer);
    for (int i = 0; i < tr->n_tensors; i++) {
        gpt2_train_tensor t = gpt2_trainer_tensor(tr, i);
        int k = (i >= 2 && i < 2 + N_LAYER_TENSORS * p->n_layer) ? (i - 2) % N_LAYER_TENSORS : -1;
        int is_ln_weight = (k == LN1_W || k == LN2_W || i == tr->n_tensors - 2);
        if (t.cols) {
            float std = (k == PROJ_W || k == FCPROJ_W) ? resid_std : 0.02f;
            for (size_t j = 0; j < t.n; j++) t.param[j] = (float)rng_normal(&seed) * std;
        } else {
            for (size_t j = 0; j < t.n; j++) t.param[j] = is_ln_weight ? 1.0f : 0.0f;
        }
    }
    tr->rng = rng_mix(p->seed ^ 0x5EED0F0BA7C4E5ull);
    return GPT2_OK;
}

void gpt2_trainer_free(gpt2_trainer *tr) {
    if (!tr) return;
    pool_free(tr->pool);
    if (tr->names)
        for (int i = 0; i < tr->n_tensors; i++) free(tr->names[i]);
    free(tr->names);
    free(tr->offset);
    float *bufs[] = {tr->params, tr->grads, tr->m,    tr->v,    tr->x0,        tr->ln1,  tr->ln1_stats,
                     tr->qkv,    tr->att,   tr->atty, tr->res2, tr->ln2,       tr->ln2_stats, tr->fch,
                     tr->fchg,   tr->res3,  tr->lnf,  tr->lnf_stats, tr->logits, tr->dres, tr->dbuf,
                     tr->dbig,   tr->dqkv,  tr->dscores, tr->packed, tr->pdrop};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(tr->partials);
    free(tr->inputs);
    free(tr->targets);
    free(tr->pos0);
    free(tr);
}

const gpt2_train_params *gpt2_trainer_params(const gpt2_trainer *tr) { return &tr->p; }
int gpt2_trainer_step_count(const gpt2_trainer *tr) { return tr->step; }

gpt2_status gpt2_trainer_set_steps(gpt2_trainer *tr, int steps, gpt2_error *err) {
    if (steps < tr->step)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "train: --steps %d is below the %d steps already taken", steps,
                         tr->step);
    tr->p.steps = steps;
    return GPT2_OK;
}

float gpt2_trainer_lr(const gpt2_trainer *tr, int step) {
    const gpt2_train_params *p = &tr->p;
    if (step < p->warmup_steps) return p->lr * (float)(step + 1) / (float)p->warmup_steps;
    int span = p->steps - p->warmup_steps;
    double progress = span > 0 ? (double)(step - p->warmup_steps) / span : 1.0;
    if (progress > 1) progress = 1;
    return (float)(p->min_lr + 0.5 * (1.0 + cos(M_PI * progress)) * (p->lr - p->min_lr));
}

/* --- parallel building blocks ---------------------------------------------- */

/* C (M, N) = (accumulate ? C : 0) + bias + A (M, K) @ W by gemm_cols, W
 * (K, N) as gemm takes it: chunks of GEMM_ROWS rows by KERNEL_PREFILL_COLS
 * columns, fixed by the shape, and each output one chain over K in order
 * (gemm.h), so the result does not depend on the thread count. */
enum { GEMM_ROWS = 192 };
typedef struct {
    float *C;
    const float *A, *bias;
    gpt2_matrix W;
    int M, accumulate;
    gpt2_trainer *tr; /* its stop flag: once set, the chunks left do nothing (the step is undone) */
} gemm_job;

/* The stop flag is set: a chunk does nothing; what it leaves is never used
 * (interrupted() holds from then on, and the step is undone). */
static int stopping(const gpt2_trainer *tr) { return tr->stop && *tr->stop; }

static void gemm_chunk(void *arg, int chunk, int n_chunks, int ith) {
    const gemm_job *j = arg;
    if (stopping(j->tr)) return;
    const int N = j->W.cols, n_col = (N + KERNEL_PREFILL_COLS - 1) / KERNEL_PREFILL_COLS;
    const int r0 = chunk / n_col * GEMM_ROWS, c0 = chunk % n_col * KERNEL_PREFILL_COLS;
    const int rows = j->M - r0 < GEMM_ROWS ? j->M - r0 : GEMM_ROWS;
    const int cols = N - c0 < KERNEL_PREFILL_COLS ? N - c0 : KERNEL_PREFILL_COLS;
    (void)n_chunks, (void)ith;
    gemm_cols(j->C + (size_t)r0 * N + c0, N, j->A + (size_t)r0 * j->W.rows, rows, &j->W, c0, cols, j->bias,
              j->accumulate);
}

static void gemm_run(gpt2_trainer *tr, gemm_job *j) {
    j->tr = tr;
    const int n_col = (j->W.cols + KERNEL_PREFILL_COLS - 1) / KERNEL_PREFILL_COLS;
    pool_run(tr->pool, gemm_chunk, j, (j->M + GEMM_ROWS - 1) / GEMM_ROWS * n_col);
}

/* Whether gemm_cols takes a (K, N) product: N in whole panels (every shape
 * of the bundled models; others go through sgemm). */
static int gemm_ok(int N) { return N % KERNEL_PANEL_COLS == 0 && gemm_own(); }

/* tr->packed's copy of W (N, K) = params + off, as W^T (K, N) in panels. */
static void pack_matrix(gpt2_trainer *tr, size_t off, int N, int K) {
    gpt2_matrix w = {.data = tr->params + off, .dtype = GPT2_DTYPE_F32, .rows = K, .cols = N, .trans = 1};
    if (gemm_ok(N)) kernel_pack(tr->packed + off, &w);
}

/* y (M, N) = x (M, K) @ W (N, K)^T + b (N): threads split the M rows. */
typedef struct {
    float *y;
    const float *x, *w, *b;
    int M, N, K;
} mm_fwd_job;

static void mm_fwd_chunk(void *arg, int chunk, int n_chunks, int ith) {
    const mm_fwd_job *j = arg;
    int r0, r1;
    pool_share(j->M, 1, chunk, n_chunks, &r0, &r1);
    if (r1 <= r0) return;
    float *y = j->y + (size_t)r0 * j->N;
    float beta = 0;
    if (j->b) {
        for (int r = r0; r < r1; r++) memcpy(j->y + (size_t)r * j->N, j->b, (size_t)j->N * sizeof(float));
        beta = 1;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, j->N, j->K, 1.0f, j->x + (size_t)r0 * j->K, j->K,
                j->w, j->K, beta, y, j->N);
}

static void matmul_forward(gpt2_trainer *tr, float *y, const float *x, const float *w, const float *b, int M, int N,
                           int K) {
    if (gemm_ok(N)) { /* W^T packed at the start of the forward pass */
        gemm_job g = {y, x, b, {.data = tr->packed + (w - tr->params), .dtype = GPT2_DTYPE_F32, .rows = K, .cols = N,
                                .packed = 1}, M, 0, tr};
        gemm_run(tr, &g);
        return;
    }
    mm_fwd_job j = {y, x, w, b, M, N, K};
    pool_run(tr->pool, mm_fwd_chunk, &j, tr->n_threads);
}

/* Given dy (M, N): dx (M, K) = dy @ W (rows split), dW (N, K) += dy^T @ x and
 * db (N) += column sums of dy (W's rows split). dx may be NULL. */
typedef struct {
    float *dx, *dw, *db;
    const float *dy, *x, *w;
    int M, N, K;
} mm_bwd_job;

static void mm_bwd_dx_chunk(void *arg, int chunk, int n_chunks, int ith) {
    const mm_bwd_job *j = arg;
    int r0, r1;
    pool_share(j->M, 1, chunk, n_chunks, &r0, &r1);
    if (r1 <= r0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, j->K, j->N, 1.0f, j->dy + (size_t)r0 * j->N, j->N,
                j->w, j->K, 0.0f, j->dx + (size_t)r0 * j->K, j->K);
}

static void mm_bwd_dw_chunk(void *arg, int chunk, int n_chunks, int ith) {
    const mm_bwd_job *j = arg;
    int n0, n1;
    pool_share(j->N, 16, chunk, n_chunks, &n0, &n1);
    if (n1 <= n0) return;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n1 - n0, j->K, j->M, 1.0f, j->dy + n0, j->N, j->x, j->K,
                1.0f, j->dw + (size_t)n0 * j->K, j->K);
    if (!j->db) return;
    for (int m = 0; m < j->M; m++) {
        const float *row = j->dy + (size_t)m * j->N;
        for (int n = n0; n < n1; n++) j->db[n] += row[n];
    }
}

static void matmul_backward(gpt2_trainer *tr, float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int M, int N, int K) {
    mm_bwd_job j = {dx, dw, db, dy, x, w, M, N, K};
    if (dx && gemm_ok(K)) { /* dx = dy (M, N) @ W, W (N, K) row-major as gemm reads it */
        gemm_job g = {dx, dy, NULL, {.data = w, .dtype = GPT2_DTYPE_F32, .rows = N, .cols = K}, M, 0, tr};
        gemm_run(tr, &g);
    } else if (dx) {
        pool_run(tr->pool, mm_bwd_dx_chunk, &j, tr->n_threads);
    }
    pool_run(tr->pool, mm_bwd_dw_chunk, &j, tr->n_threads);
}

/* out (R, C) = layernorm(x (R, C)) * g + b; stats (R, 2) = mean, 1/std */
typedef struct {
    float *out, *stats, *dx;
    const float *x, *g, *b, *dout;
    double *partials; /* (RED_CHUNKS, 2, C): dg, db per chunk */
    int R, C;
} ln_job;

static void ln_fwd_chunk(void *arg, int chunk, int n_chunks, int ith) {
    const ln_job *j = arg;
    int r0, r1;
    pool_share(j->R, 1, chunk, n_chunks, &r0, &r1);
    const int C = j->C;
    for (int r = r0; r < r1; r++) {
        const float *x = j->x + (size_t)r * C;
        float *o = j->out + (size_t)r * C;
        double sum = 0, sq = 0;
        for (int i = 0; i < C; i++) sum += x[i];
        const float mean = (float)(sum / C);
        for (int i = 0; i < C; i++) sq += (double)(x[i] - mean) * (x[i] - mean);
        const float rstd = (float)(1.0 / sqrt(sq / C + LN_EPS));
        for (int i = 0; i < C; i++) o[i] = (x[i] - mean) * rstd * j->g[i] + j->b[i];
        j->stats[2 * r] = mean, j->stats[2 * r + 1] = rstd;
    }
}

/* dx (R, C) += d layernorm; partials[chunk] = this chunk's dg, db */
static void ln_bwd_chunk(void *arg, int chunk, int n_chunks, int ith) {
    const ln_job *j = arg;
    int r0, r1;
    pool_share(j->R, 1, chunk, n_chunks, &r0, &r1);
    const int C = j->C;
    double *dg = j->partials + (size_t)chunk * 2 * C, *db = dg + C;
    memset(dg, 0, 2 * (size_t)C * sizeof(double));
    for (int r = r0; r < r1; r++) {
        const float *x = j->x + (size_t)r * C, *dy = j->dout + (size_t)r * C;
        float *dx = j->dx + (size_t)r * C;
        const float mean = j->stats[2 * r], rstd = j->stats[2 * r + 1];
        double mean_dn = 0, mean_dnx = 0;
        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - mean) * rstd, dn = dy[i] * j->g[i];
            mean_dn += dn;
            mean_dnx += (double)dn * xhat;
            dg[i] += (double)dy[i] * xhat;
            db[i] += dy[i];
        }
        const float a = (float)(mean_dn / C), bx = (float)(mean_dnx / C);
        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - mean) * rstd;
            dx[i] += rstd * (dy[i] * j->g[i] - a - xhat * bx);
        }
    }
}

static void layernorm_forward(gpt2_trainer *tr, float *out, float *stats, const float *x, const float *g,
                              const float *b, int R) {
    ln_job j = {.out = out, .stats = stats, .x = x, .g = g, .b = b, .R = R, .C = tr->p.n_embd};
    pool_run(tr->pool, ln_fwd_chunk, &j, RED_CHUNKS);
}

static void layernorm_backward(gpt2_trainer *tr, float *dx, float *dg, float *db, const float *dout, const float *x,
                               const float *stats, const float *g, int R) {
    const int C = tr->p.n_embd;
    ln_job j = {.dx = dx, .x = x, .g = g, .dout = dout, .stats = (float *)stats, .partials = tr->partials, .R = R,
                .C = C};
    pool_run(tr->pool, ln_bwd_chunk, &j, RED_CHUNKS);
    for (int c = 0; c < RED_CHUNKS; c++) {
        const double *pg = tr->partials + (size_t)c * 2 * C, *pb = pg + C;
        for (int i = 0; i < C; i++) dg[i] += (float)pg[i], db[i] += (float)pb[i];
    }
}

/* Causal attention over qkv (B, T, 3C) -> y (B, T, C), probabilities in
 * att (B, H, T, T) (rows' masked entries zero within their 64-row block, never
 * written past it, never read). Backward: dy -> dqkv. One chunk per
 * (b, h). */
typedef struct {
    gpt2_trainer *tr;
    const float *qkv, *att_in, *dy;
    float *att, *y, *dqkv;
    int B, T;
    uint64_t drop_key; /* attention dropout's mask key when tr->attn_dropout_on */
} attn_job;

/* Element idx of a dropout mask: a 16-bit lane of a hash of (key, idx / 4),
 * dropped when below thresh = p * 65536. */
static inline uint32_t drop_lane(uint64_t key, size_t idx) {
    return (uint32_t)(rng_mix(key + (idx >> 2) * 0x9E3779B97F4A7C15u) >> (16 * (idx & 3))) & 0xFFFF;
}

/* out[t] = in[t] / (1 - p), or 0 where element idx0 + t is dropped
 * (drop_lane): the one dropout mask of every site; out may be in. The body
 * takes 8 hashes (32 elements) at a time so that it vectorises (3.6x the
 * element loop's speed here). */
static void drop_row(float *out, const float *in, size_t n, size_t idx0, uint64_t key, uint32_t thresh,
                     float scale) {
    size_t t = 0;
    for (; t < n && ((idx0 + t) & 3); t++) out[t] = drop_lane(key, idx0 + t) < thresh ? 0.0f : in[t] * scale;
    for (; t + 32 <= n; t += 32) {
        const size_t g0 = (idx0 + t) >> 2;
        uint64_t h[8];
        uint32_t lane[32];
        for (int k = 0; k < 8; k++) h[k] = rng_mix(key + (g0 + (size_t)k) * 0x9E3779B97F4A7C15u);
        for (int k = 0; k < 32; k++) lane[k] = (uint32_t)(h[k >> 2] >> (16 * (k & 3))) & 0xFFFF;
        for (int k = 0; k < 32; k++) out[t + k] = lane[k] < thresh ? 0.0f : in[t + k] * scale;
    }
    for (; t < n; t++) out[t] = drop_lane(key, idx0 + t) < thresh ? 0.0f : in[t] * scale;
}

/* Rows [r0, r1) of (b, h)'s causal probabilities P (T, T) after attention
 * dropout, into Pd (n, T): the first r1 columns, zero past the diagonal.
 * Forward and backward make the same mask (element (i, t) of head bh), the
 * backward also on dP, in place (Pd = P + r0 T). */
static void attn_drop_block(const attn_job *j, size_t bh, const float *P, int r0, int r1, float *Pd) {
    const float p = j->tr->p.attn_dropout;
    const int T = j->T;
    for (int i = r0; i < r1; i++) {
        float *row = Pd + (size_t)(i - r0) * T;
        drop_row(row, P + (size_t)i * T, (size_t)i + 1, (bh * T + i) * T, j->drop_key, (uint32_t)lrintf(p * 65536.0f),
                 1.0f / (1.0f - p));
        memset(row + i + 1, 0, (size_t)(r1 - i - 1) * sizeof *row);
    }
}

/* Causal attention in blocks of ATT_ROWS query rows: row block [r0, r1) sees
 * keys [0, r1) only, so the products skip the masked upper triangle (at
 * 1,024 positions nearly half the attention's work). With attention dropout
 * the values are weighted by the dropped probabilities; P keeps the softmax's
 * own for its backward. */

static void attn_fwd_chunk(void *arg, int chunk, int n_chunks, int ith) {
    const attn_job *j = arg;
    if (stopping(j->tr)) return;
    const int T = j->T, C = j->tr->p.n_embd, H = j->tr->p.n_head, D = C / H, b = chunk / H, h = chunk % H;
    const float *q = j->qkv + (size_t)b * T * 3 * C + h * D, *k = q + C, *v = q + 2 * C;
    float *P = j->att + ((size_t)b * H + h) * T * T, *y = j->y + (size_t)b * T * C + h * D;
    float *Pd = j->tr->pdrop + (size_t)ith * ATT_ROWS * T;
    const int drop = j->tr->attn_dropout_on;
    (void)n_chunks;
    for (int r0 = 0; r0 < T; r0 += ATT_ROWS) {
        const int r1 = r0 + ATT_ROWS < T ? r0 + ATT_ROWS : T, n = r1 - r0;
        float *Pb = P + (size_t)r0 * T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, r1, D, 1.0f / sqrtf((float)D), q + (size_t)r0 * 3 * C,
                    3 * C, k, 3 * C, 0.0f, Pb, T);
        for (int i = r0; i < r1; i++) { /* causal softmax: the forward pass's own (vectorised exp) */
            float *row = P + (size_t)i * T;
            kernel_softmax(row, i + 1);
            memset(row + i + 1, 0, (size_t)(r1 - i - 1) * sizeof *row); /* past r1: never written, never read */
        }
        if (drop) attn_drop_block(j, (size_t)b * H + h, P, r0, r1, Pd);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, r1, 1.0f, drop ? Pd : Pb, T, v, 3 * C, 0.0f,
                    y + (size_t)r0 * C, C);
    }
}

static void attn_bwd_chunk(void *arg, int chunk, int n_chunks, int ith) {
    if (stopping(((const attn_job *)arg)->tr)) return;
    const attn_job *j = arg;
    const int T = j->T, C = j->tr->p.n_embd, H = j->tr->p.n_head, D = C / H, b = chunk / H, h = chunk % H;
    const float *q = j->qkv + (size_t)b * T * 3 * C + h * D, *k = q + C, *v = q + 2 * C;
    const float *P = j->att_in + ((size_t)b * H + h) * T * T, *dy = j->dy + (size_t)b * T * C + h * D;
    float *dq = j->dqkv + (size_t)b * T * 3 * C + h * D, *dk = dq + C, *dv = dq + 2 * C;
    float *dS = j->tr->dscores + (size_t)ith * j->tr->p.block_size * j->tr->p.block_size;
    float *Pd = j->tr->pdrop + (size_t)ith * ATT_ROWS * T;
    const float scale = 1.0f / sqrtf((float)D);
    const int drop = j->tr->attn_dropout_on;
    (void)n_chunks;
    for (int r0 = 0; r0 < T; r0 += ATT_ROWS) {
        const int r1 = r0 + ATT_ROWS < T ? r0 + ATT_ROWS : T, n = r1 - r0;
        const float *Pb = P + (size_t)r0 * T, *dyb = dy + (size_t)r0 * C;
        float *dSb = dS + (size_t)r0 * T;
        const float beta = r0 ? 1.0f : 0.0f; /* dv and dk sum over the row blocks */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, r1, D, 1.0f, dyb, C, v, 3 * C, 0.0f, dSb, T); /* dP */
        if (drop) { /* the values saw the dropped probabilities: Pd for dv, the mask on dP */
            attn_drop_block(j, (size_t)b * H + h, P, r0, r1, Pd);
            attn_drop_block(j, (size_t)b * H + h, dS, r0, r1, dSb); /* in place */
        }
        const float *Pv = drop ? Pd : Pb; /* what weighted the values */
        /* dv[0:r1] += Pv^T dy; rows of dv past r0 are new to this block */
        if (r0) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r0, D, n, 1.0f, Pv, T, dyb, C, beta, dv, 3 * C);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, D, n, 1.0f, Pv + r0, T, dyb, C, 0.0f,
                    dv + (size_t)r0 * 3 * C, 3 * C);
        for (int i = r0; i < r1; i++) { /* softmax backward, with the score scale folded in */
            const float *p = P + (size_t)i * T;
            float *d = dS + (size_t)i * T, dot = 0;
            for (int t = 0; t <= i; t++) dot += p[t] * d[t];
            for (int t = 0; t <= i; t++) d[t] = p[t] * (d[t] - dot) * scale;
            for (int t = i + 1; t < r1; t++) d[t] = 0;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, r1, 1.0f, dSb, T, k, 3 * C, 0.0f,
                    dq + (size_t)r0 * 3 * C, 3 * C);
        if (r0) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r0, D, n, 1.0f, dSb, T, q + (size_t)r0 * 3 * C,
                            3 * C, beta, dk, 3 * C);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, D, n, 1.0f, dSb + r0, T, q + (size_t)r0 * 3 * C, 3 * C,
                    0.0f, dk + (size_t)r0 * 3 * C, 3 * C);
    }
}

/* Element-wise jobs over n floats. */
typedef enum { EW_GELU_FWD, EW_GELU_BWD, EW_DROPOUT, EW_ADD } ew_kind;
typedef struct {
    ew_kind kind;
    float *out;
    const float *a, *b;
    size_t n;
    uint64_t key;     /* dropout: the mask's hash key */
    uint32_t thresh;  /* dropout: drop when the 16-bit lane < thresh */
    float scale;      /* dropout: 1 / (1 - p) */
} ew_job;

static const float GELU_S = 0.7978845608028654f; /* sqrt(2 / pi) */

static void ew_chunk(void *arg, int chunk, int n_chunks, int ith) {
    const ew_job *j = arg;
    size_t i0 = j->n * (size_t)chunk / n_chunks, i1 = j->n * (size_t)(chunk + 1) / n_chunks;
    switch (j->kind) {
    case EW_GELU_FWD: /* out = gelu(a), the forward pass's own GELU */
        kernel_gelu_tanh(j->out + i0, j->a + i0, i1 - i0);
        break;
    case EW_GELU_BWD: /* out (= dy) *= gelu'(a); fast_tanh vectorises where tanhf is a call */
        for (size_t i = i0; i < i1; i++) {
            float x = j->a[i], th = fast_tanh(GELU_S * (x + 0.044715f * x * x * x));
            float d = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
            j->out[i] *= d;
        }
        break;
    case EW_DROPOUT: /* out = out * mask / (1 - p) */
        drop_row(j->out + i0, j->out + i0, i1 - i0, i0, j->key, j->thresh, j->scale);
        break;
    case EW_ADD: /* out = a + b */
        for (size_t i = i0; i < i1; i++) j->out[i] = j->a[i] + j->b[i];
        break;
    }
}

static void elementwise(gpt2_trainer *tr, ew_job j) { pool_run(tr->pool, ew_chunk, &j, 4 * tr->n_threads); }

/* Dropout site s's mask key this step: sites 0 embeddings, 1 + 2l attention
 * output, 2 + 2l MLP output, 1 + 2L + l layer l's attention probabilities. */
static uint64_t site_key(const gpt2_trainer *tr, int site) {
    return rng_mix(tr->dropout_key ^ ((uint64_t)site << 40));
}
static uint64_t attn_drop_key(const gpt2_trainer *tr, int l) { return site_key(tr, 1 + 2 * tr->p.n_layer + l); }

/* Dropout at site s of the current step; the same mask drops the same
 * gradients in backward. */
static void dropout(gpt2_trainer *tr, float *x, size_t n, int site) {
    if (!tr->dropout_on) return;
    ew_job j = {.kind = EW_DROPOUT, .out = x, .n = n, .scale = 1.0f / (1.0f - tr->p.dropout),
                .thresh = (uint32_t)lrintf(tr->p.dropout * 65536.0f), .key = site_key(tr, site)};
    elementwise(tr, j);
}

/* Cross-entropy per row of logits (R, V) against targets; with backward,
 * logits become dlogits = (softmax - onehot) * dscale. */
typedef struct {
    float *logits;
    const int32_t *targets;
    double *partials; /* (RED_CHUNKS) loss sums */
    int R, V, backward;
    float dscale;
} ce_job;

static void ce_chunk(void *arg, int chunk, int n_chunks, int ith) {
    const ce_job *j = arg;
    int r0, r1;
    pool_share(j->R, 1, chunk, n_chunks, &r0, &r1);
    double loss = 0;
    for (int r = r0; r < r1; r++) {
        float *row = j->logits + (size_t)r * j->V, max = kernel_max(row, j->V);
        /* e^(z - max) once, vectorised; then summed in order in double (the loss is a mean of thousands) */
        const int32_t y = j->targets[r];
        const float zy = row[y];
        double sum = 0;
        for (int i = 0; i < j->V; i++) row[i] = fast_exp_nonpos(row[i] - max);
        for (int i = 0; i < j->V; i++) sum += row[i];
        loss += log(sum) - (double)(zy - max);
        if (j->backward) {
            const float scale = (float)(1.0 / sum) * j->dscale;
            for (int i = 0; i < j->V; i++) row[i] *= scale;
            row[y] -= j->dscale;
        }
    }
    j->partials[chunk] = loss;
}

/* --- forward and backward ------------------------------------------------------ */

static int interrupted(gpt2_trainer *tr) { return stopping(tr) || (tr->cancel && tr->cancel(tr->cancel_ud)); }

void gpt2_trainer_set_stop_flag(gpt2_trainer *tr, const volatile sig_atomic_t *flag) { tr->stop = flag; }

void gpt2_trainer_set_cancel(gpt2_trainer *tr, gpt2_cancel_fn cancel, void *user_data) {
    tr->cancel = cancel;
    tr->cancel_ud = user_data;
}

/* One layer's saved activations, (B, T, ...) each, inside the trainer's
 * buffers sized for the largest batch. */
typedef struct {
    const float *in; /* the block's input: x0 or the previous block's res3 */
    float *ln1, *qkv, *att, *atty, *res2, *ln2, *fch, *fchg, *res3;
    float *ln1_stats, *ln2_stats;
} layer_acts;

static layer_acts acts_of(const gpt2_trainer *tr, int l) {
    const gpt2_train_params *p = &tr->p;
    const size_t lBTC = (size_t)p->batch_size * p->block_size * p->n_embd;
    const size_t lBT = (size_t)p->batch_size * p->block_size, lATT = lBT * p->n_head * p->block_size;
    return (layer_acts){.in = l == 0 ? tr->x0 : tr->res3 + (l - 1) * lBTC,
                        .ln1 = tr->ln1 + l * lBTC, .qkv = tr->qkv + 3 * l * lBTC, .att = tr->att + l * lATT,
                        .atty = tr->atty + l * lBTC, .res2 = tr->res2 + l * lBTC, .ln2 = tr->ln2 + l * lBTC,
                        .fch = tr->fch + 4 * l * lBTC, .fchg = tr->fchg + 4 * l * lBTC, .res3 = tr->res3 + l * lBTC,
                        .ln1_stats = tr->ln1_stats + 2 * l * lBT, .ln2_stats = tr->ln2_stats + 2 * l * lBT};
}

/* Block l forward: res2 = in + drop(attn(ln1(in))), res3 = res2 + drop(mlp(ln2(res2))). */
static void block_forward(gpt2_trainer *tr, int l, int B, int T) {
    const int C = tr->p.n_embd, BT = B * T;
    const size_t BTC = (size_t)BT * C;
    float *P = tr->params;
    layer_acts a = acts_of(tr, l);
    layernorm_forward(tr, a.ln1, a.ln1_stats, a.in, LT(tr, P, l, LN1_W), LT(tr, P, l, LN1_B), BT);
    matmul_forward(tr, a.qkv, a.ln1, LT(tr, P, l, QKV_W), LT(tr, P, l, QKV_B), BT, 3 * C, C);
    attn_job aj = {.tr = tr, .qkv = a.qkv, .att = a.att, .y = a.atty, .B = B, .T = T, .drop_key = attn_drop_key(tr, l)};
    pool_run(tr->pool, attn_fwd_chunk, &aj, B * tr->p.n_head);
    matmul_forward(tr, tr->dbuf, a.atty, LT(tr, P, l, PROJ_W), LT(tr, P, l, PROJ_B), BT, C, C);
    dropout(tr, tr->dbuf, BTC, 1 + 2 * l);
    elementwise(tr, (ew_job){.kind = EW_ADD, .out = a.res2, .a = a.in, .b = tr->dbuf, .n = BTC});
    layernorm_forward(tr, a.ln2, a.ln2_stats, a.res2, LT(tr, P, l, LN2_W), LT(tr, P, l, LN2_B), BT);
    matmul_forward(tr, a.fch, a.ln2, LT(tr, P, l, FC_W), LT(tr, P, l, FC_B), BT, 4 * C, C);
    elementwise(tr, (ew_job){.kind = EW_GELU_FWD, .out = a.fchg, .a = a.fch, .n = (size_t)BT * 4 * C});
    matmul_forward(tr, tr->dbuf, a.fchg, LT(tr, P, l, FCPROJ_W), LT(tr, P, l, FCPROJ_B), BT, C, 4 * C);
    dropout(tr, tr->dbuf, BTC, 2 + 2 * l);
    elementwise(tr, (ew_job){.kind = EW_ADD, .out = a.res3, .a = a.res2, .b = tr->dbuf, .n = BTC});
}

/* Block l backward: dres holds d(loss)/d(res3) on entry, d(loss)/d(in) on
 * return; the block's parameter gradients are written into G. */
static void block_backward(gpt2_trainer *tr, int l, int B, int T) {
    const int C = tr->p.n_embd, F = 4 * C, BT = B * T;
    const size_t BTC = (size_t)BT * C;
    float *P = tr->params, *G = tr->grads;
    layer_acts a = acts_of(tr, l);
    /* MLP branch: res3 = res2 + drop(gelu(ln2 Wfc^T + bfc) Wproj^T + bproj) */
    memcpy(tr->dbuf, tr->dres, BTC * sizeof(float));
    dropout(tr, tr->dbuf, BTC, 2 + 2 * l);
    matmul_backward(tr, tr->dbig, LT(tr, G, l, FCPROJ_W), LT(tr, G, l, FCPROJ_B), tr->dbuf, a.fchg,
                    LT(tr, P, l, FCPROJ_W), BT, C, F);
    elementwise(tr, (ew_job){.kind = EW_GELU_BWD, .out = tr->dbig, .a = a.fch, .n = (size_t)BT * F});
    matmul_backward(tr, tr->dbuf, LT(tr, G, l, FC_W), LT(tr, G, l, FC_B), tr->dbig, a.ln2, LT(tr, P, l, FC_W), BT, F,
                    C);
    layernorm_backward(tr, tr->dres, LT(tr, G, l, LN2_W), LT(tr, G, l, LN2_B), tr->dbuf, a.res2, a.ln2_stats,
                       LT(tr, P, l, LN2_W), BT);
    /* attention branch: res2 = in + drop(attn(ln1 Wqkv^T + bqkv) Wproj^T + bproj) */
    memcpy(tr->dbuf, tr->dres, BTC * sizeof(float));
    dropout(tr, tr->dbuf, BTC, 1 + 2 * l);
    matmul_backward(tr, tr->dbig, LT(tr, G, l, PROJ_W), LT(tr, G, l, PROJ_B), tr->dbuf, a.atty, LT(tr, P, l, PROJ_W),
                    BT, C, C);
    attn_job aj = {.tr = tr, .qkv = a.qkv, .att_in = a.att, .dy = tr->dbig, .dqkv = tr->dqkv, .B = B, .T = T,
                   .drop_key = attn_drop_key(tr, l)};
    pool_run(tr->pool, attn_bwd_chunk, &aj, B * tr->p.n_head);
    matmul_backward(tr, tr->dbuf, LT(tr, G, l, QKV_W), LT(tr, G, l, QKV_B), tr->dqkv, a.ln1, LT(tr, P, l, QKV_W), BT,
                    3 * C, C);
    layernorm_backward(tr, tr->dres, LT(tr, G, l, LN1_W), LT(tr, G, l, LN1_B), tr->dbuf, a.in, a.ln1_stats,
                       LT(tr, P, l, LN1_W), BT);
}

/* x0 (B, T, C) = wte[inputs] + wpe[pos0[b] + t], then dropout. */
static void embed_forward(gpt2_trainer *tr, const int32_t *inputs, int B, int T) {
    const int C = tr->p.n_embd;
    const float *P = tr->params;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *x = tr->x0 + ((size_t)b * T + t) * C;
            const float *te = P + (size_t)inputs[b * T + t] * C,
                        *pe = P + tr->offset[1] + (size_t)(tr->pos0[b] + t) * C;
            for (int i = 0; i < C; i++) x[i] = te[i] + pe[i];
        }
    dropout(tr, tr->x0, (size_t)B * T * C, 0);
}

/* dres = d(loss)/d(x0): through the dropout into wte's rows and wpe. */
static void embed_backward(gpt2_trainer *tr, const int32_t *inputs, int B, int T) {
    const int C = tr->p.n_embd;
    dropout(tr, tr->dres, (size_t)B * T * C, 0);
    float *dwte = tr->grads, *dwpe = tr->grads + tr->offset[1];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = tr->dres + ((size_t)b * T + t) * C;
            float *te = dwte + (size_t)inputs[b * T + t] * C, *pe = dwpe + (size_t)(tr->pos0[b] + t) * C;
            for (int i = 0; i < C; i++) te[i] += d[i], pe[i] += d[i];
        }
}

static gpt2_status check_batch(const gpt2_train_params *p, const int32_t *inputs, const int32_t *targets, int B,
                               int T, gpt2_error *err) {
    if (B < 1 || T < 1 || T > p->block_size || (size_t)B * T > (size_t)p->batch_size * p->block_size)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "train: batch %d x %d exceeds the trainer's %d x %d tokens", B, T,
                         p->batch_size, p->block_size);
    for (size_t i = 0; i < (size_t)B * T; i++)
        if (inputs[i] < 0 || inputs[i] >= p->n_vocab || targets[i] < 0 || targets[i] >= p->n_vocab)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "train: token id %d at position %zu is outside 0..%d",
                             inputs[i] < 0 || inputs[i] >= p->n_vocab ? inputs[i] : targets[i], i, p->n_vocab - 1);
    return GPT2_OK;
}

gpt2_status gpt2_trainer_loss(gpt2_trainer *tr, const int32_t *inputs, const int32_t *targets, int B, int T,
                              int backward, float *loss_out, gpt2_error *err) {
    const gpt2_train_params *p = &tr->p;
    gpt2_status st = check_batch(p, inputs, targets, B, T, err);
    if (st != GPT2_OK) return st;
    const int C = p->n_embd, V = p->n_vocab, L = p->n_layer, BT = B * T;
    const size_t lBTC = (size_t)p->batch_size * p->block_size * C;
    float *P = tr->params;
    tr->dropout_on = backward && p->dropout > 0;
    tr->attn_dropout_on = backward && p->attn_dropout > 0;
    pack_matrix(tr, 0, V, C); /* the tied head, then each block's four */
    for (int l = 0; l < L; l++) {
        const int K[4] = {C, C, C, 4 * C}, N[4] = {3 * C, C, 4 * C, C}, k[4] = {QKV_W, PROJ_W, FC_W, FCPROJ_W};
        for (int i = 0; i < 4; i++) pack_matrix(tr, (size_t)(LT(tr, P, l, k[i]) - P), N[i], K[i]);
    }

    embed_forward(tr, inputs, B, T);
    for (int l = 0; l < L; l++) {
        if (interrupted(tr)) return gpt2_fail(err, GPT2_CANCELLED, "train: interrupted in layer %d's forward", l);
        block_forward(tr, l, B, T);
    }
    /* what chunks skipped once the stop flag was set is garbage: never used past here */
    if (stopping(tr)) return gpt2_fail(err, GPT2_CANCELLED, "train: interrupted in the forward pass");
    const float *last = tr->res3 + (L - 1) * lBTC;
    float *lnf_w = P + tr->offset[tr->n_tensors - 2], *lnf_b = P + tr->offset[tr->n_tensors - 1];
    layernorm_forward(tr, tr->lnf, tr->lnf_stats, last, lnf_w, lnf_b, BT);
    matmul_forward(tr, tr->logits, tr->lnf, P, NULL, BT, V, C); /* tied head: wte (V, C) */
    ce_job cj = {.logits = tr->logits, .targets = targets, .partials = tr->partials, .R = BT, .V = V,
                 .backward = backward, .dscale = 1.0f / (float)BT};
    pool_run(tr->pool, ce_chunk, &cj, RED_CHUNKS);
    double loss = 0;
    for (int c = 0; c < RED_CHUNKS; c++) loss += tr->partials[c];
    *loss_out = (float)(loss / BT);
    if (!backward) return GPT2_OK;

    /* backward: dres holds d(loss)/d(residual stream) going down */
    float *G = tr->grads;
    memset(G, 0, tr->n_params * sizeof(float));
    matmul_backward(tr, tr->dbuf, G, NULL, tr->logits, tr->lnf, P, BT, V, C);
    memset(tr->dres, 0, (size_t)BT * C * sizeof(float));
    layernorm_backward(tr, tr->dres, G + tr->offset[tr->n_tensors - 2], G + tr->offset[tr->n_tensors - 1], tr->dbuf,
                       last, tr->lnf_stats, lnf_w, BT);
    for (int l = L - 1; l >= 0; l--) {
        if (interrupted(tr)) return gpt2_fail(err, GPT2_CANCELLED, "train: interrupted in layer %d's backward", l);
        block_backward(tr, l, B, T);
    }
    embed_backward(tr, inputs, B, T);
    if (stopping(tr)) return gpt2_fail(err, GPT2_CANCELLED, "train: interrupted in the backward pass");
    return GPT2_OK;
}

gpt2_status gpt2_trainer_loss_at(gpt2_trainer *tr, const int32_t *inputs, const int32_t *targets, int B, int T,
                                 const int32_t *pos0, int backward, float *loss, gpt2_error *err) {
    const gpt2_train_params *p = &tr->p;
    if (B < 1 || T < 1 || T > p->block_size || (size_t)B * T > (size_t)p->batch_size * p->block_size)
        return check_batch(p, inputs, targets, B, T, err);
    for (int b = 0; b < B; b++)
        if (pos0[b] < 0 || pos0[b] > p->block_size - T)
            return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "train: sequence %d starts at position row %d; %d positions "
                             "fit from rows 0..%d", b, (int)pos0[b], T, p->block_size - T);
    memcpy(tr->pos0, pos0, (size_t)B * sizeof *pos0);
    gpt2_status st = gpt2_trainer_loss(tr, inputs, targets, B, T, backward, loss, err);
    memset(tr->pos0, 0, (size_t)B * sizeof *pos0);
    return st;
}

/* --- optimizer ---------------------------------------------------------------- */

typedef struct {
    gpt2_trainer *tr;
    size_t begin, n;
    float lr, wd, gscale, bc1, bc2;
} adam_job;

static void adam_chunk(void *arg, int chunk, int n_chunks, int ith) {
    const adam_job *j = arg;
    const gpt2_train_params *p = &j->tr->p;
    size_t i0 = j->begin + j->n * (size_t)chunk / n_chunks, i1 = j->begin + j->n * (size_t)(chunk + 1) / n_chunks;
    /* locals and restrict: the stores could otherwise alias the settings, and the loop would not vectorise */
    float *restrict w = j->tr->params, *restrict m = j->tr->m, *restrict v = j->tr->v;
    const float *restrict g = j->tr->grads;
    const float b1 = p->beta1, b2 = p->beta2, eps = p->adam_eps, gscale = j->gscale, bc1 = j->bc1, bc2 = j->bc2;
    const float lr = j->lr, wd = j->wd;
    (void)ith;
    for (size_t i = i0; i < i1; i++) {
        float gi = g[i] * gscale;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        float mhat = m[i] / bc1, vhat = v[i] / bc2;
        w[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * w[i]);
    }
}

typedef struct {
    const float *g;
    size_t n;
    double *partials;
} norm_job;

static void norm_chunk(void *arg, int chunk, int n_chunks, int ith) {
    const norm_job *j = arg;
    size_t i0 = j->n * (size_t)chunk / n_chunks, i1 = j->n * (size_t)(chunk + 1) / n_chunks;
    double s = 0;
    for (size_t i = i0; i < i1; i++) s += (double)j->g[i] * j->g[i];
    j->partials[chunk] = s;
}

static void adamw_update(gpt2_trainer *tr) {
    const gpt2_train_params *p = &tr->p;
    norm_job nj = {tr->grads, tr->n_params, tr->partials};
    pool_run(tr->pool, norm_chunk, &nj, RED_CHUNKS);
    double sq = 0;
    for (int c = 0; c < RED_CHUNKS; c++) sq += tr->partials[c];
    const float norm = (float)sqrt(sq);
    tr->last_grad_norm = norm;
    const float gscale = (p->grad_clip > 0 && norm > p->grad_clip) ? p->grad_clip / norm : 1.0f;
    const int t = tr->step + 1;
    const float lr = gpt2_trainer_lr(tr, tr->step);
    const float bc1 = 1.0f - powf(p->beta1, (float)t), bc2 = 1.0f - powf(p->beta2, (float)t);
    for (int i = 0; i < tr->n_tensors; i++) {
        gpt2_train_tensor ten = gpt2_trainer_tensor(tr, i);
        adam_job j = {.tr = tr, .begin = tr->offset[i], .n = ten.n, .lr = lr, .gscale = gscale, .bc1 = bc1,
                      .bc2 = bc2, .wd = ten.cols ? p->weight_decay : 0.0f};
        pool_run(tr->pool, adam_chunk, &j, ten.n >= 65536 ? 4 * tr->n_threads : 1);
    }
}

/* --- batches -------------------------------------------------------------------- */

/* A stream's window at this step: short_block during the sequence-length warmup. */
static int window_len(const gpt2_trainer *tr) {
    return tr->step < tr->p.short_steps ? tr->p.short_block : tr->p.block_size;
}

/* The sequence length a data set gives (T = positions predicted per sequence),
 * or 0 when it holds no whole sequence. */
static int data_seq_len(const gpt2_trainer *tr, const gpt2_train_data *d, size_t *n_seq) {
    if (d->example_len > 0) {
        *n_seq = d->n_tokens / (size_t)d->example_len;
        return *n_seq ? d->example_len - 1 : 0;
    }
    const size_t T = (size_t)window_len(tr);
    *n_seq = d->n_tokens > T ? d->n_tokens - T : 0; /* window starts */
    return *n_seq ? (int)T : 0;
}

/* Sequences in a batch of T-token windows: a full step's tokens. */
static int batch_seqs(const gpt2_trainer *tr, const gpt2_train_data *d, int T) {
    return d->example_len ? tr->p.batch_size : tr->p.batch_size * (tr->p.block_size / T);
}

static void fill_seq(gpt2_trainer *tr, const gpt2_train_data *d, int b, int T, size_t start) {
    memcpy(tr->inputs + (size_t)b * T, d->tokens + start, (size_t)T * sizeof(int32_t));
    memcpy(tr->targets + (size_t)b * T, d->tokens + start + 1, (size_t)T * sizeof(int32_t));
}

static gpt2_status check_data(const gpt2_trainer *tr, const gpt2_train_data *d, int *T, size_t *n_seq,
                              gpt2_error *err) {
    if (d->example_len < 0 || d->example_len == 1 || d->example_len > tr->p.block_size + 1)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "train: examples of %d tokens do not fit block_size %d + 1",
                         d->example_len, tr->p.block_size);
    if (d->example_len && tr->p.short_steps)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "train: a short-window warmup needs a token stream, not examples");
    *T = data_seq_len(tr, d, n_seq);
    if (!*T)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "train: %zu tokens hold no whole sequence of %d tokens",
                         d->n_tokens, d->example_len ? d->example_len : window_len(tr) + 1);
    return GPT2_OK;
}

/* At the switch to full windows, done by the warmup's last step so that
 * whatever reads the weights from then on (validation, export, a checkpoint)
 * sees it, and a cancelled step never does it: position rows short_block..
 * have had no gradient (only weight decay), so they start as the last learned
 * row, short_block - 1. Their Adam moments are still zero. */
static void init_new_positions(gpt2_trainer *tr) {
    const int C = tr->p.n_embd, S = tr->p.short_block;
    float *wpe = tr->params + tr->offset[1]; /* (block_size, C) */
    for (int t = S; t < tr->p.block_size; t++)
        memcpy(wpe + (size_t)t * C, wpe + (size_t)(S - 1) * C, (size_t)C * sizeof(float));
}

gpt2_status gpt2_trainer_step(gpt2_trainer *tr, const gpt2_train_data *d, float *loss, gpt2_error *err) {
    int T;
    size_t n_seq;
    if (tr->step >= tr->p.steps) /* a step past the end would save a checkpoint that resume refuses */
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                         "train: all %d steps of the run are done (gpt2_trainer_set_steps to go on)", tr->p.steps);
    gpt2_status st = check_data(tr, d, &T, &n_seq, err);
    if (st != GPT2_OK) return st;
    const int B = batch_seqs(tr, d, T);
    const uint64_t rng_before = tr->rng; /* an interrupted step is undone, so a resume repeats it */
    for (int b = 0; b < B; b++) {
        size_t k = rng_next(&tr->rng) % n_seq;
        fill_seq(tr, d, b, T, d->example_len ? k * (size_t)d->example_len : k);
    }
    const float f = tr->p.short_offsets;
    const int offsets = f > 0 && tr->step < tr->p.short_steps;
    for (int b = 0; offsets && b < B; b++) /* tr->pos0 is zero outside this step; f = 1 needs no coin */
        if (f >= 1 || rng_uniform(&tr->rng) < f)
            tr->pos0[b] = (int32_t)(rng_next(&tr->rng) % (uint64_t)(tr->p.block_size - T + 1));
    tr->dropout_key = rng_next(&tr->rng);
    st = gpt2_trainer_loss(tr, tr->inputs, tr->targets, B, T, 1, loss, err);
    if (offsets) memset(tr->pos0, 0, (size_t)B * sizeof *tr->pos0);
    if (st == GPT2_CANCELLED) tr->rng = rng_before;
    if (st != GPT2_OK) return st;
    if (!isfinite(*loss))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "train: loss became %f at step %d (learning rate too high?)",
                         *loss, tr->step);
    adamw_update(tr);
    tr->step++;
    if (tr->step == tr->p.short_steps && tr->p.short_init_positions) init_new_positions(tr);
    return GPT2_OK;
}

float gpt2_trainer_eval(gpt2_trainer *tr, const gpt2_train_data *d, int max_batches) {
    int T;
    size_t n_seq;
    gpt2_error err;
    if (check_data(tr, d, &T, &n_seq, &err) != GPT2_OK) return NAN;
    const size_t stride = d->example_len ? (size_t)d->example_len : (size_t)T;
    const size_t n_win = d->example_len ? n_seq : (d->n_tokens - 1) / stride;
    const int B = batch_seqs(tr, d, T);
    double total = 0;
    size_t counted = 0;
    for (size_t w = 0; w < n_win && (max_batches <= 0 || w < (size_t)max_batches * B);) {
        int nb = 0;
        for (; nb < B && w < n_win && (max_batches <= 0 || w < (size_t)max_batches * B); nb++, w++)
            fill_seq(tr, d, nb, T, w * stride);
        float loss = 0;
        if (gpt2_trainer_loss(tr, tr->inputs, tr->targets, nb, T, 0, &loss, &err) != GPT2_OK) return NAN;
        total += (double)loss * nb;
        counted += (size_t)nb;
    }
    return counted ? (float)(total / counted) : NAN;
}

/* --- small utilities ------------------------------------------------------------ */

size_t gpt2_trainer_n_params(const gpt2_trainer *tr) {
    size_t n = 0;
    for (int i = 0; tr && i < gpt2_trainer_n_tensors(tr); i++) n += gpt2_trainer_tensor(tr, i).n;
    return n;
}

uint64_t gpt2_tokens_hash(const int32_t *tokens, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *p = (const unsigned char *)tokens;
    for (size_t i = 0; i < n * sizeof *tokens; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
