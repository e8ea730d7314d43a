/* gpt2_patch.h — activation patching: what causes a prediction.
 * Two prompts of the same length, clean C and corrupt K, an answer A and a
 * wrong token B; the metric is the logit difference at the last position,
 * LD = logit(A) - logit(B). K is run again with one activation replaced by
 * C's, and each cell reports how much of the way from K to C that moves LD:
 *     score = (LD_patched - LD_K) / (LD_C - LD_K)
 * (1: this activation alone restores the clean answer; 0: it does nothing;
 * negative: it pushes the other way). What is patched:
 *   GPT2_PATCH_RESID  the residual stream entering block l (l = 0: the
 *                     embeddings) at position p: an (n_layer, n_tokens) grid;
 *   GPT2_PATCH_MLP    layer l's MLP output at position p: (n_layer, n_tokens);
 *   GPT2_PATCH_HEADS  head (l, h)'s attention-weighted values at every
 *                     position: (n_layer, n_head).
 *     gpt2_patch_result r;
 *     if (gpt2_patch(ctx, clean, corrupt, n, answer, wrong, GPT2_PATCH_RESID, &r, &err) != GPT2_OK) ... err.msg
 *     r.scores[l * r.cols + p] ...
 *     gpt2_patch_result_free(&r);
 * The clean activations are caught by the engine's observers, the patched
 * runs made by its editors (gpt2_context.h). Positions before the first
 * token where C and K differ hold the same activations in both runs, so a
 * cell there is exactly 0 and not run; the rest reuse the cache: the cell
 * (l, p) evaluates K's positions p .. n - 1 only, a head's cell those from
 * the first difference. The context's head ablation applies to every run; the
 * caller's hooks stay set and see every run.
 */
#ifndef GPT2_PATCH_H
#define GPT2_PATCH_H

#include <stdint.h>

#include "gpt2_context.h"
#include "gpt2_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { GPT2_PATCH_RESID, GPT2_PATCH_MLP, GPT2_PATCH_HEADS } gpt2_patch_what;

/* "resid", "mlp", "heads"; NULL for another value. */
const char *gpt2_patch_what_name(gpt2_patch_what what);

typedef struct {
    gpt2_patch_what what;
    int n_tokens, n_layer, n_head;
    int rows, cols;        /* n_layer x (n_tokens, or n_head for heads) */
    int32_t answer, wrong;
    int first_diff;        /* the first position where the prompts differ */
    double ld_clean, ld_corrupt;
    double *ld;            /* (rows, cols): LD of each patched run */
    double *scores;        /* (rows, cols): (ld - ld_corrupt) / (ld_clean - ld_corrupt) */
    int n_runs;            /* patched evaluations made (cells before first_diff are not run) */
    long n_positions;      /* positions they evaluated, all together */
} gpt2_patch_result;

/* Runs the experiment in ctx, which ends holding the prompts' common prefix
 * (also when it fails or is cancelled after evaluating anything: never a
 * position a patched run computed).
 * Refused, nothing evaluated, with a message naming the value: n_tokens < 1
 * or more than the context holds, a token, the answer or the wrong token
 * outside the vocabulary, answer == wrong, prompts that are the same token
 * for token, GPT2_PATCH_MLP on a model whose MLP output is normed before it
 * is added (Gemma 2 and 3); after the clean and corrupt runs, GPT2_ERR_INVALID_ARG
 * when they give the same LD (nothing to explain: the message gives it).
 * GPT2_CANCELLED from the context's cancel hook. *out is zeroed on failure;
 * gpt2_patch_result_free it after success. */
gpt2_status gpt2_patch(gpt2_context *ctx, const int32_t *clean, const int32_t *corrupt, int n_tokens,
                       int32_t answer, int32_t wrong, gpt2_patch_what what, gpt2_patch_result *out,
                       gpt2_error *err);
void gpt2_patch_result_free(gpt2_patch_result *r);

#ifdef __cplusplus
}
#endif
#endif
