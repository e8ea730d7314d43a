/* gpt2_context.h — the mutable half: KV cache, activations, position, hooks.
 *
 * A context runs tokens through a model and keeps every layer's keys and
 * values, so each new token costs one position's work. Prompts go through in
 * batches of up to n_batch positions with sgemm (prefill); up to 16 positions
 * (decode, a speculative verification pass) use kernels that read each weight
 * once for all of them, and give the same floats, bit for bit, as evaluating
 * those positions one at a time. Other chunkings change results only by float
 * rounding of the summation order.
 *
 *     gpt2_context *ctx;
 *     gpt2_context_new(model, gpt2_context_default_params(), &ctx, &err);
 *     gpt2_context_eval(ctx, prompt_ids, n_prompt, &err);  // prefill
 *     for (;;) {
 *         const float *logits = gpt2_context_logits(ctx); // (n_vocab)
 *         int32_t id = gpt2_sampler_sample(s, logits, ...);
 *         gpt2_context_eval(ctx, &id, 1, &err);            // decode
 *     }
 *     gpt2_context_rewind(ctx, n);  // forget positions >= n (regenerate, undo)
 *     gpt2_context_free(ctx);
 *
 * Hooks (observers). Set with gpt2_context_set_hooks; every pointer may be
 * NULL. During gpt2_context_eval, for each batch of positions, in order:
 *   1. for each layer l: want_attention(l, h) is asked once per head per
 *      batch; for each position p of the batch and each wanted head,
 *      on_attention(l, h, p, probs, p + 1) receives that query's softmax row
 *      over keys 0..p. Then, if want_residual(l) says yes, on_residual(l, p, x)
 *      receives the residual stream after block l for each position p.
 *      The additive parts of that stream, for attribution (gpt2_attribute.h),
 *      each only where asked: on_embed(p, x) receives what enters block 0
 *      (the token's embedding, plus its learned position's) before layer 0;
 *      on_head_values(l, p, z, n_head, head_dim), after the on_attention
 *      calls, every query head's attention-weighted values z (n_head,
 *      head_dim) at p, ablated heads zero, before the output projection
 *      (head h's output is z[h] times rows h * head_dim .. of that
 *      projection); on_mlp_out(l, p, y) the MLP's output y (n_embd) at p,
 *      its bias included: what the block's MLP adds to the stream (computed
 *      apart, once per batch of a wanted layer, so observing it leaves the
 *      forward pass's own floats unchanged). want_head_values(l) and
 *      want_mlp_out(l) choose the layers (NULL: all).
 *      Editors change the pass: where want_edit(what, l) says yes (NULL:
 *      everywhere), edit(what, l, p, v, n) may rewrite in place, at each
 *      position p of the batch, the stream entering block l before it runs
 *      (GPT2_EDIT_RESIDUAL), the heads' values after ablation and before
 *      the output projection (GPT2_EDIT_HEAD_VALUES; observers see them
 *      edited), or the MLP's output before it is added (GPT2_EDIT_MLP_OUT:
 *      then computed apart and added, as observe_mlp computes it; not for
 *      Gemma 2/3's normed outputs, which pass unedited). The cache keeps
 *      what an edited pass computed.
 *   2. on_logits(p, logits, n_vocab) for each position of the batch (the LM
 *      head then runs over every position instead of only the last one).
 *   3. progress(n_done, n_total): after the batch; non-zero stops the eval with
 *      GPT2_CANCELLED. The positions already evaluated stay in the cache, and
 *      gpt2_context_n_past tells how many; logits are those of the last one.
 * cancel() is asked before every layer of every batch, so that a stop
 * request (Ctrl-C) is seen within one layer's work even when the prompt is
 * one big batch; non-zero abandons the batch in progress (none of its
 * positions is added; hooks may have seen some of its layers) and the eval
 * returns GPT2_CANCELLED with the state of the last complete batch, as above.
 * Keep it cheap: read a flag.
 * With no hooks set nothing is captured and nothing costs extra. The buffers
 * passed to hooks are valid only during the call. Hooks are always called on
 * the thread that called gpt2_context_eval, never concurrently.
 */
#ifndef GPT2_CONTEXT_H
#define GPT2_CONTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_model.h"
#include "gpt2_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int n_ctx;     /* positions the KV cache holds; 0 = the model's n_positions, at most
                      GPT2_CONTEXT_DEFAULT_MAX (a Llama 3's 131072 would be gigabytes) */
    int n_batch;   /* positions per prefill batch (memory vs speed); default 256 */
    int n_threads; /* worker threads, caller included; 0 = one per online CPU.
                      Results do not depend on it. The context's own pool does
                      all the work and sets OpenBLAS to one thread (process-wide)
                      so that two thread pools never compete for the cores. */
} gpt2_context_params;

typedef struct {
    void *user_data;
    int (*want_attention)(void *user_data, int layer, int head);
    void (*on_attention)(void *user_data, int layer, int head, int pos, const float *probs,
                         int n_keys);
    int (*want_residual)(void *user_data, int layer);
    void (*on_residual)(void *user_data, int layer, int pos, const float *x, int n_embd);
    void (*on_logits)(void *user_data, int pos, const float *logits, int n_vocab);
    gpt2_progress_fn progress;
    gpt2_cancel_fn cancel;
    /* the residual stream's additive parts (see above) */
    void (*on_embed)(void *user_data, int pos, const float *x, int n_embd);
    int (*want_head_values)(void *user_data, int layer);
    void (*on_head_values)(void *user_data, int layer, int pos, const float *z, int n_head, int head_dim);
    int (*want_mlp_out)(void *user_data, int layer);
    void (*on_mlp_out)(void *user_data, int layer, int pos, const float *y, int n_embd);
    /* editors (activation patching, gpt2_patch.h; see above) */
    int (*want_edit)(void *user_data, int what, int layer);
    void (*edit)(void *user_data, int what, int layer, int pos, float *v, int n);
} gpt2_hooks;

/* What an editor changes (gpt2_hooks.edit's `what`). */
enum {
    GPT2_EDIT_RESIDUAL,    /* the stream entering block l (l = 0: the embeddings); n = n_embd */
    GPT2_EDIT_HEAD_VALUES, /* every query head's attention-weighted values, (n_head, head_dim) */
    GPT2_EDIT_MLP_OUT      /* the MLP's output, bias included, before it is added; n = n_embd */
};

typedef struct gpt2_context gpt2_context;

gpt2_context_params gpt2_context_default_params(void);

gpt2_status gpt2_context_new(const gpt2_model *model, gpt2_context_params params,
                             gpt2_context **out, gpt2_error *err);
void gpt2_context_free(gpt2_context *ctx);

/* Observers. A context holds a stack of hook sets: the caller's own at the
 * bottom (gpt2_context_set_hooks replaces it, copied; NULL empties it), and
 * above it those pushed by code that watches for a while (a session's
 * progress during a long call, a speculative decoder capturing logits)
 * without forwarding anybody's callbacks. Every set gets every callback it
 * has: want_* is asked of each, a row goes to each that wants it (computed
 * once); progress and cancel are asked newest first, and the first non-zero
 * stops. gpt2_context_pop_hooks removes the newest pushed set (never the
 * caller's). At most GPT2_HOOKS_MAX sets, the caller's included. */
enum { GPT2_HOOKS_MAX = 8 };

/* The most positions a context holds when its params leave n_ctx 0. */
enum { GPT2_CONTEXT_DEFAULT_MAX = 4096 };
void gpt2_context_set_hooks(gpt2_context *ctx, const gpt2_hooks *hooks);
gpt2_status gpt2_context_push_hooks(gpt2_context *ctx, const gpt2_hooks *hooks, gpt2_error *err);
void gpt2_context_pop_hooks(gpt2_context *ctx);
/* Sets of hooks now stacked: 1 when only the caller's (set or empty) is. */
int gpt2_context_hooks_depth(const gpt2_context *ctx);

/* Runs n tokens at positions n_past .. n_past + n - 1. Fails without changing
 * anything if a token id is out of range or n_past + n exceeds n_ctx
 * (GPT2_ERR_CONTEXT_FULL). Fails with GPT2_ERR_FORMAT, naming the model, when
 * a batch's logits are not finite (weights holding NaN or Inf): that batch is
 * not added, the logits are unavailable. */
gpt2_status gpt2_context_eval(gpt2_context *ctx, const int32_t *tokens, int n, gpt2_error *err);

/* Logits after the last evaluated token: (n_vocab). NULL before any eval. */
const float *gpt2_context_logits(const gpt2_context *ctx);

/* Positions in the cache. */
int gpt2_context_n_past(const gpt2_context *ctx);
int gpt2_context_n_ctx(const gpt2_context *ctx);
int gpt2_context_n_threads(const gpt2_context *ctx);

/* The tokens in the cache, oldest first (n_past of them). */
const int32_t *gpt2_context_tokens(const gpt2_context *ctx);

/* Forgets positions >= n_past (0 <= n_past <= current n_past). The logits
 * become unavailable (NULL) until the next eval. */
gpt2_status gpt2_context_rewind(gpt2_context *ctx, int n_past, gpt2_error *err);
void gpt2_context_reset(gpt2_context *ctx);

const gpt2_model *gpt2_context_model(const gpt2_context *ctx);

/* Interventions. Zero-ablation of attention heads: heads is (n_layer,
 * n_head), non-zero marking a head whose output (its slice of the attention
 * output, before the output projection) is zeroed at every position; NULL
 * or all zero lifts every ablation. The head's pattern is still computed
 * and reported to on_attention. A change to the set resets the cache
 * (n_past 0, logits unavailable), since every later layer's keys and values
 * depend on it: evaluate the tokens again (gpt2_context_tokens before the
 * call has them). Setting the same set again changes nothing. With no head
 * ablated an eval costs nothing extra. */
gpt2_status gpt2_context_set_ablation(gpt2_context *ctx, const unsigned char *heads, gpt2_error *err);

/* The logit lens: the final layer norm and the unembedding applied to a
 * residual-stream vector x (n_embd floats, e.g. from on_residual after
 * block l) into logits (n_vocab). For the last block's residual at the last
 * evaluated position this is gpt2_context_logits, bit for bit. Uses the
 * context's threads and scratch: call it between evals, not from a hook. */
gpt2_status gpt2_context_unembed(gpt2_context *ctx, const float *x, float *logits, gpt2_error *err);

/* Whether head (layer, head) is ablated; 0 for ids out of range. */
int gpt2_context_ablated(const gpt2_context *ctx, int layer, int head);

#ifdef __cplusplus
}
#endif
#endif
