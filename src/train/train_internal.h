/* train_internal.h — the trainer's state, shared by train.c (math),
 * checkpoint.c (save/resume) and export.c (Hugging Face layout). Library-private.
 */
#ifndef GPT2_TRAIN_INTERNAL_H
#define GPT2_TRAIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/pool.h"
#include "gpt2_testing.h"

#define LN_EPS 1e-5 /* layer_norm_epsilon, as GPT-2 */

/* Causal attention works in blocks of ATT_ROWS query rows (train.c). */
enum { ATT_ROWS = 64 };

/* the tensors of one block, in table order */
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FCPROJ_W, FCPROJ_B, N_LAYER_TENSORS };

/* Tensor table: wte (V, C), wpe (block, C), then per layer the 12 above
 * (matrices (out, in)), then ln_f weight and bias. */
struct gpt2_trainer {
    gpt2_train_params p;
    gpt2_pool *pool;
    int n_threads;
    int step;
    uint64_t rng;          /* batch sampling; advances every step */
    uint64_t dropout_key;  /* this step's dropout masks */
    int dropout_on, attn_dropout_on; /* this pass drops (training steps only) */
    float last_grad_norm;
    gpt2_cancel_fn cancel;       /* asked before each layer's work; see gpt2_trainer_set_cancel */
    void *cancel_ud;
    const volatile sig_atomic_t *stop; /* read between pieces of work on every thread; see gpt2_trainer_set_stop_flag */

    int n_tensors;
    size_t *offset;        /* (n_tensors + 1) into params */
    char **names;
    size_t n_params;
    float *params, *grads, *m, *v; /* (n_params) each */
    float *packed;         /* (n_params): the matrices W (N, K) as W^T in gemm's panels, redone each forward */

    /* activations, sized for (batch_size, block_size); per-layer ones are L slices */
    int32_t *inputs, *targets; /* (B, T) */
    int32_t *pos0;             /* (B) each sequence's first position row: 0 but in gpt2_trainer_loss_at */
    float *x0;                 /* (B, T, C) embeddings after dropout */
    float *ln1, *ln1_stats;    /* (L, B, T, C), (L, B, T, 2) mean, 1/std */
    float *qkv;                /* (L, B, T, 3C) */
    float *att;                /* (L, B, H, T, T) attention probabilities */
    float *atty;               /* (L, B, T, C) heads' outputs, concatenated */
    float *res2;               /* (L, B, T, C) residual after attention */
    float *ln2, *ln2_stats;    /* (L, B, T, C), (L, B, T, 2) */
    float *fch, *fchg;         /* (L, B, T, F) MLP pre- and post-GELU */
    float *res3;               /* (L, B, T, C) residual after the MLP */
    float *lnf, *lnf_stats;    /* (B, T, C), (B, T, 2) */
    float *logits;             /* (B, T, V); dlogits after backward */
    /* backward scratch */
    float *dres, *dbuf;        /* (B, T, C) */
    float *dbig;               /* (B, T, F) */
    float *dqkv;               /* (B, T, 3C) */
    float *dscores;            /* (n_threads, T, T) */
    float *pdrop;              /* (n_threads, ATT_ROWS, T) a row block's probabilities after attention dropout */
    double *partials;          /* fixed-order reduction partials */
};

/* Whether params (and, with optimizer, Adam's m and v) hold only values a
 * saved model may hold: finite, and v >= 0. If not, 0 with the first bad one
 * described in buf ("Adam first moment h.0.ln_1.weight[3] = nan"). Export
 * and checkpoints check before writing, resume after reading. */
int trainer_values_ok(const gpt2_trainer *tr, int optimizer, char *buf, size_t cap);

/* Checks p as gpt2_trainer_new does and gives in *n_params the parameter
 * count its shapes make, allocating nothing (resume compares it with the
 * checkpoint's before it allocates). */
gpt2_status trainer_plan(const gpt2_train_params *p, size_t *n_params, gpt2_error *err);

#endif
