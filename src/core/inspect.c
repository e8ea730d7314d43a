/* inspect.c — head scores from an attention pattern (gpt2_inspect.h). */
#include "gpt2_inspect.h"

#include <math.h>

void gpt2_head_scores_compute(const float *A, size_t stride, const int32_t *tokens, int T, gpt2_head_scores *out) {
    *out = (gpt2_head_scores){NAN, NAN, NAN, NAN, NAN, 0};
    if (!A || T < 2) return;
    double prev = 0, first = 0, self = 0, ent = 0, ind = 0;
    int n_ind = 0;
    for (int q = 1; q < T; q++) {
        const float *row = A + (size_t)q * stride;
        prev += row[q - 1];
        first += row[0];
        self += row[q];
        double h = 0;
        for (int k = 0; k <= q; k++)
            if (row[k] > 0) h -= (double)row[k] * log((double)row[k]);
        ent += h;
        if (!tokens) continue;
        for (int j = q - 2; j >= 0; j--) /* the latest earlier occurrence before q-1 */
            if (tokens[j] == tokens[q]) {
                ind += row[j + 1];
                n_ind++;
                break;
            }
    }
    const double n = T - 1;
    out->prev_token = prev / n;
    out->first_token = first / n;
    out->self = self / n;
    out->entropy = ent / n;
    out->n_induction = n_ind;
    if (n_ind) out->induction = ind / n_ind;
}
