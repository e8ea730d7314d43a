/* gpt2_testing.h — entry points for tests only: the trainer's tensors by
 * name and its loss for one batch, for gradient checks against a reference.
 * Not part of gpt2.h; an application has no use for them. */
#ifndef GPT2_TESTING_H
#define GPT2_TESTING_H

#include "gpt2_train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *name;  /* the Hugging Face name, e.g. "h.0.attn.c_attn.weight" */
    float *param;      /* training layout: matrices (out, in) row-major */
    float *grad;
    size_t n;
    int rows, cols;    /* cols == 0 for vectors */
} gpt2_train_tensor;

int gpt2_trainer_n_tensors(const gpt2_trainer *tr);
gpt2_train_tensor gpt2_trainer_tensor(const gpt2_trainer *tr, int i);

/* Loss (mean over B x T predictions) of inputs (B, T) -> targets (B, T) and,
 * with backward, the gradients of every tensor (overwritten). Dropout applies
 * when the params have it and backward is set; use dropout 0 for gradient
 * checks. B * T <= batch_size * block_size, T <= block_size. */
gpt2_status gpt2_trainer_loss(gpt2_trainer *tr, const int32_t *inputs, const int32_t *targets, int B, int T,
                              int backward, float *loss, gpt2_error *err);

/* The same with sequence b's positions starting at row pos0[b] of the
 * position table (pos0[b] + T <= block_size), as a --short-offsets step
 * places them. */
gpt2_status gpt2_trainer_loss_at(gpt2_trainer *tr, const int32_t *inputs, const int32_t *targets, int B, int T,
                                 const int32_t *pos0, int backward, float *loss, gpt2_error *err);

#ifdef __cplusplus
}
#endif
#endif
