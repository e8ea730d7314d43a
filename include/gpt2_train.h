/* gpt2_train.h — train a GPT-2-architecture model from scratch on tokens.
 *
 * The model is GPT-2's: learned position embeddings, pre-norm blocks (causal
 * multi-head attention, GELU(tanh) MLP of width 4C), a final layer norm and an
 * LM head tied to the token embeddings. Training is plain float32 on OpenBLAS:
 * mean cross-entropy over every predicted position, backpropagation, global
 * gradient-norm clipping, AdamW (weight decay on matrices and embeddings only),
 * linear warmup then cosine decay of the learning rate, dropout on the
 * embeddings and on both residual branches.
 *
 *     gpt2_train_params p = gpt2_train_default_params();
 *     p.n_vocab = n_vocab;  p.n_layer = 4;  ...
 *     gpt2_trainer *tr;
 *     gpt2_error err;
 *     if (gpt2_trainer_new(p, &tr, &err) != GPT2_OK) ...
 *     gpt2_train_data train = {ids, n_train}, val = {ids + n_train, n_val};
 *     while (gpt2_trainer_step_count(tr) < p.steps) {
 *         float loss;
 *         gpt2_trainer_step(tr, &train, &loss, &err);
 *         if (step % 100 == 0) printf("%f\n", gpt2_trainer_eval(tr, &val, 20));
 *     }
 *     gpt2_trainer_export(tr, "models/mine", GPT2_DTYPE_F16, eot, &err);
 *     gpt2_trainer_free(tr);
 *
 * Determinism: the same params (seed included), data and thread count give
 * bit-identical runs, and a run resumed from a checkpoint continues exactly as
 * if it had never stopped.
 */
#ifndef GPT2_TRAIN_H
#define GPT2_TRAIN_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "gpt2_model.h"
#include "gpt2_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    /* model shape */
    int n_layer, n_head, n_embd;
    int block_size;      /* context window (n_positions) */
    int n_vocab;         /* from the tokenizer */
    /* optimisation */
    int batch_size;      /* sequences per step */
    int steps;           /* total optimizer steps; the cosine schedule ends here */
    int warmup_steps;    /* linear warmup from 0 to lr */
    float lr, min_lr;    /* peak and final learning rate */
    float weight_decay;  /* AdamW, decoupled; 2-D tensors only */
    float beta1, beta2, adam_eps;
    float grad_clip;     /* max global gradient L2 norm; 0 = off */
    float dropout;       /* embeddings and residual branches; 0 = off */
    float attn_dropout;  /* attention probabilities (as nanoGPT's); 0 = off */
    /* Sequence-length warmup: the first short_steps steps train on windows of
     * short_block tokens, batch_size * block_size / short_block of them, so a
     * step holds as many tokens as the later full-length ones (position rows
     * from short_block on learn only after). short_block divides block_size;
     * token streams only (not examples). 0 = off. */
    int short_block, short_steps;
    /* 1: at the switch to block_size, position rows short_block.. (never
     * trained) start as a copy of row short_block - 1, the last learned one;
     * needs short_steps. 0 = they start as they are (initialised, decayed). */
    int short_init_positions;
    /* The fraction (0..1) of the warmup's windows that start at a random
     * position row, 0..block_size - short_block, so that the rows past
     * short_block train before the switch too; the others start at row 0.
     * Needs short_steps, excludes short_init_positions. 0 = every window
     * starts at row 0; 1 = every window at a random row. */
    float short_offsets;
    uint64_t seed;       /* initial weights, batch sampling, dropout */
    int n_threads;       /* 0 = all online CPUs */
} gpt2_train_params;

/* 4 layers, 4 heads, 128 wide, block 128, batch 16, 1000 steps, lr 1e-3 -> 1e-4,
 * 100 warmup steps, weight decay 0.1, betas 0.9/0.99, clip 1.0, dropout 0.1,
 * seed 1337. n_vocab must be set. */
gpt2_train_params gpt2_train_default_params(void);

/* Training data: tokens, either one stream (example_len 0: each sequence is a
 * random window of block_size + 1 tokens, short_block + 1 in the warmup) or fixed-length examples back to back
 * (example_len E, 2 <= E <= block_size + 1: each sequence is one whole example,
 * predicting its last E - 1 tokens). */
typedef struct {
    const int32_t *tokens;
    size_t n_tokens;
    int example_len;
} gpt2_train_data;

typedef struct gpt2_trainer gpt2_trainer;

/* A fresh model, GPT-2's initialisation: normal(0, 0.02), residual output
 * projections scaled by 1/sqrt(2 n_layer), biases 0, layer norms 1/0. */
gpt2_status gpt2_trainer_new(gpt2_train_params params, gpt2_trainer **out, gpt2_error *err);
void gpt2_trainer_free(gpt2_trainer *tr);

const gpt2_train_params *gpt2_trainer_params(const gpt2_trainer *tr);
int gpt2_trainer_step_count(const gpt2_trainer *tr);  /* optimizer steps taken */
float gpt2_trainer_lr(const gpt2_trainer *tr, int step);  /* the schedule */

/* Lets a resumed run go on past its planned end (the cosine schedule
 * stretches to the new total). steps >= step_count. */
gpt2_status gpt2_trainer_set_steps(gpt2_trainer *tr, int steps, gpt2_error *err);

/* cancel(user_data) is asked before each layer's forward and backward
 * work (keep it cheap: read a flag); non-zero stops the step or evaluation in
 * progress, which then returns GPT2_CANCELLED (gpt2_trainer_eval: NAN) and
 * leaves the trainer as it was before the step: a checkpoint saved then and
 * resumed goes on exactly as an uninterrupted run. NULL removes it. */
void gpt2_trainer_set_cancel(gpt2_trainer *tr, gpt2_cancel_fn cancel, void *user_data);

/* A flag (a signal handler's) read between pieces of work on every thread,
 * within a layer too: once it is non-zero the step stops within a few
 * milliseconds, whatever the layer's size, and is undone as with
 * cancel (GPT2_CANCELLED). NULL removes it. */
void gpt2_trainer_set_stop_flag(gpt2_trainer *tr, const volatile sig_atomic_t *flag);

/* One optimizer step on a batch sampled from data. *loss: the batch's mean
 * loss before the update (nats per predicted token). Once step_count reaches
 * params.steps it fails (GPT2_ERR_INVALID_ARG): raise steps first. */
gpt2_status gpt2_trainer_step(gpt2_trainer *tr, const gpt2_train_data *data, float *loss, gpt2_error *err);

/* Mean loss over up to max_batches deterministic batches of data (no dropout,
 * no update): consecutive non-overlapping windows (of the next step's length:
 * short_block during the warmup), or examples in order.
 * Returns NAN when data holds no whole sequence. */
float gpt2_trainer_eval(gpt2_trainer *tr, const gpt2_train_data *data, int max_batches);

/* Checkpoints hold the params, the trainer's state (step, RNG, Adam moments)
 * and a caller-chosen hash of the data, so a resume can refuse other data.
 * Written atomically (gpt2_fileio). Save refuses a trainer with a non-finite
 * value (GPT2_ERR_INVALID_ARG, naming the tensor and index) and leaves the
 * file there as it was. Resume refuses (GPT2_ERR_FORMAT, naming the field) a
 * damaged or truncated file, settings out of range, a step past the run's
 * steps, and non-finite weights or moments. */
gpt2_status gpt2_trainer_save(const gpt2_trainer *tr, const char *path, uint64_t data_hash, gpt2_error *err);
gpt2_status gpt2_trainer_resume(const char *path, int n_threads, gpt2_trainer **out, uint64_t *data_hash,
                                gpt2_error *err);

/* Writes dir/config.json and dir/model.safetensors in the Hugging Face GPT-2
 * layout (Conv1D weights as (in, out), tied head: no lm_head.weight), weights
 * in dtype, each atomically (gpt2_fileio). eot: the end-of-text id for bos/eos
 * in config.json, or -1. The tokenizer files are the caller's to add. A model
 * with a non-finite weight is not written (GPT2_ERR_INVALID_ARG); the files
 * there stay as they were. */
gpt2_status gpt2_trainer_export(const gpt2_trainer *tr, const char *dir, gpt2_dtype dtype, int eot,
                                gpt2_error *err);

/* 64-bit FNV-1a of a token array (for checkpoint data hashes). */
uint64_t gpt2_tokens_hash(const int32_t *tokens, size_t n);

/* The number of trained parameters (weights and biases, tied embedding
 * counted once). */
size_t gpt2_trainer_n_params(const gpt2_trainer *tr);

#ifdef __cplusplus
}
#endif
#endif
