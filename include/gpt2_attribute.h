/* gpt2_attribute.h — direct logit attribution: why the model predicts a token.
 *
 * The residual stream after the last block at position P is a sum of parts,
 *   x = embed + sum_l (sum_h head_out[l,h] + attn_bias[l]) + sum_l mlp[l],
 * where embed is what enters block 0 (the token's embedding, plus its learned
 * position's; none under rotary positions), head_out[l,h] = z_h W_O[rows of
 * head h] (z_h the head's attention-weighted values, W_O the output
 * projection; Qwen2's q/k/v biases and Qwen3's q/k norms act inside z),
 * attn_bias[l] the output projection's bias, mlp[l] the MLP's output with its
 * bias (GPT-NeoX's parallel residual adds both to the stream all the same).
 * With the final norm's scale frozen at its value for x, the logit of a
 * target token A (or the difference A - B against a baseline B) is linear in
 * the parts. With d = W_U[A] - W_U[B] (W_U[A] alone without a baseline):
 *   LayerNorm (GPT-2, GPT-NeoX): sigma = sqrt(var(x) + eps), u = g * d;
 *     a part c contributes ((c - mean(c)) / sigma) . u, and the norm's bias
 *     adds b . d (ln_f_bias);
 *   RMSNorm (Llama, Mistral, Qwen2, Qwen3): rms = sqrt(mean(x^2) + eps),
 *     u = g * d; a part c contributes (c / rms) . u; no mean, no bias.
 * The contributions sum to the model's logit (difference) up to float
 * rounding (and, for 8-bit and block-format weights, the rounding of the
 * activations those kernels quantize; see docs/microscope.md).
 *
 *     gpt2_attribution_params p = gpt2_attribution_default_params(); // last position, top-1
 *     gpt2_attribution a;
 *     if (gpt2_attribute(ctx, ids, n, p, &a, &err) != GPT2_OK) ... err.msg
 *     printf("%g = %g\n", a.logit, a.sum);   // a.heads[l * a.n_head + h] ...
 *     gpt2_attribution_free(&a);
 *
 * Everything is computed in double from the engine's own activations (the
 * hooks on_embed, on_head_values, on_mlp_out and on_residual of
 * gpt2_context.h) and the model's matrices; the context's head ablation
 * applies (an ablated head's part is 0).
 */
#ifndef GPT2_ATTRIBUTE_H
#define GPT2_ATTRIBUTE_H

#include <stdint.h>

#include "gpt2_context.h"
#include "gpt2_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int pos;          /* the position whose next-token logit is explained; -1: the last */
    int32_t target;   /* A; -1: the model's top-1 at pos (the lowest id among equals) */
    int32_t baseline; /* B, for the logit difference A - B; -1: none (A's logit) */
} gpt2_attribution_params;

/* pos -1, target -1, baseline -1. */
gpt2_attribution_params gpt2_attribution_default_params(void);

typedef struct {
    int pos, n_layer, n_head;
    int32_t target, baseline; /* baseline -1: none */
    int rms_norm;             /* 1: the final norm is RMSNorm (no mean, no bias term) */
    double scale;             /* the frozen scale: sigma (LayerNorm) or rms (RMSNorm) */
    double logit;             /* the model's logit of target at pos, minus baseline's */
    double embed;
    double *heads;            /* (n_layer, n_head) */
    double *attn_bias;        /* (n_layer): 0 where the projection has no bias */
    double *mlp;              /* (n_layer) */
    double ln_f_bias;         /* 0 under RMSNorm */
    double sum;               /* of all the parts above */
    double logits_max_abs;    /* the largest |logit| at pos: the scale of the numbers */
} gpt2_attribution;

/* Evaluates tokens[0 .. pos] in ctx and attributes the logit at pos. The
 * cache is reused up to the first position where it differs from tokens
 * (or pos, whichever comes first): ctx ends holding tokens[0 .. pos]. The
 * caller's hooks stay set and see that evaluation. Refused, nothing
 * evaluated, with a message naming the value and its range: n_tokens < 1,
 * pos outside [0, n_tokens) (or -1), a token, target or baseline id outside
 * the vocabulary, target equal to baseline; GPT2_ERR_FORMAT when the parts
 * do not add up to the residual stream (relative L2 difference over 1e-2),
 * or their sum to the logit (over 1e-3 of the largest |logit|): a model whose
 * description adds something attribution does not know (a norm after a
 * branch, a scaled embedding, a capped logit). *out is zeroed on failure;
 * gpt2_attribution_free it after success. */
gpt2_status gpt2_attribute(gpt2_context *ctx, const int32_t *tokens, int n_tokens, gpt2_attribution_params p,
                           gpt2_attribution *out, gpt2_error *err);
void gpt2_attribution_free(gpt2_attribution *a);

#ifdef __cplusplus
}
#endif
#endif
