/* gpt2_inspect.h — the numbers the microscope shows about attention heads.
 *
 * A head's pattern over a sequence of T tokens is A (T, T): row q holds
 * query q's softmax over keys 0..q (what on_attention delivers, row by
 * row). Its scores, each a mean over the queries q = 1 .. T-1 (query 0 can
 * only look at itself):
 *
 *   prev_token   A[q, q-1]                 a previous-token head scores ~1
 *   first_token  A[q, 0]                   an attention sink scores ~1
 *   self         A[q, q]
 *   entropy      -sum_k A[q,k] ln A[q,k]   in nats (0 ln 0 = 0); ln(q+1) at most
 *   induction    over the queries q whose token occurred before q-1, with
 *                j the latest such position (j <= q-2, tokens[j] ==
 *                tokens[q]): the mean of A[q, j+1], the token that followed
 *                the earlier occurrence. On a random sequence repeated twice
 *                this is the usual induction score.
 *
 *     gpt2_head_scores hs;
 *     gpt2_head_scores_compute(A, T, tokens, T, &hs);
 *
 * Undefined scores are NAN: all of them when T < 2, induction when no query
 * qualifies (gpt2_head_scores.n_induction == 0).
 */
#ifndef GPT2_INSPECT_H
#define GPT2_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double prev_token, first_token, self, entropy, induction;
    int n_induction; /* queries the induction mean is over */
} gpt2_head_scores;

/* A: row q at A + q * stride holds keys 0..q (later entries are not read);
 * tokens: the T ids (for induction). */
void gpt2_head_scores_compute(const float *A, size_t stride, const int32_t *tokens, int T, gpt2_head_scores *out);

#ifdef __cplusplus
}
#endif
#endif
