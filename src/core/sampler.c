/* sampler.c — logits to a token id: penalty, temperature, top-k, top-p, min-p, one draw.
 *
 * Every token is ranked by its penalised logit z (descending, ties to the
 * lower id). Temperature is a monotone map, so this one order is the order by
 * prob, by prob_temp and by "most probable" in every stage, and each stage
 * keeps a prefix of it:
 *
 *   top-k  keeps ranks [0, K)          K = top_k, or n_vocab when off
 *   top-p  keeps ranks [0, c), c <= K  smallest prefix of mass >= top_p * mass(K)
 *   min-p  keeps ranks [0, L), L <= c  up to the first weight < min_p * max
 *
 * so a call reduces to finding K, c and L and drawing from ranks [0, L).
 * Weights are w = exp((z - max) / T): the maximum weighs exactly 1, and no
 * normaliser is needed until the draw, which only needs mass(L).
 *
 * Cost per call, n = n_vocab, no allocation:
 *   - copy + sanitise the logits, penalise at most repeat_last_n of them;
 *   - one streaming pass keeps the top H = max(256, K) ranks in a bounded heap
 *     (blocks of 32 that cannot enter it are skipped with one vector compare),
 *     then heap-sorts those H;
 *   - top-k on: K exps. top-k off: n exps (vectorised) for the normaliser, and
 *     only if the kept set is deeper than H, a few passes over the tokens that
 *     can still be in it (see keep_deep) — never a full sort.
 * On a 50257-token vocabulary that is some 30-200 us (tests/test_sampler.c,
 * test_speed). The report's two full softmax normalisers are computed by the
 * report, so that nobody pays for them unless a pane is looking.
 */
#include "gpt2_sampler.h"

#include "error.h"
#include "fastmath.h"
#include "rng.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    REPORT_MIN = 256, /* ranks always kept sorted, for the report and the top-p walk */
    HIST_BINS = 1024  /* histogram bins for a nucleus deeper than REPORT_MIN */
};

typedef struct {
    float z;    /* penalised, sanitised logit */
    float e;    /* weight exp((z - max) / T), where computed */
    int32_t id;
} tok;

struct gpt2_sampler {
    gpt2_sampler_params params; /* current, clamped */
    int n_vocab;
    uint64_t rng;               /* splitmix64 state: the whole RNG */
    int32_t last;

    float *z;                   /* (n_vocab) penalised logits of the last call */
    float *w;                   /* (n_vocab) weights, top-k off only */
    unsigned char *seen;        /* (n_vocab) penalty marks; all zero between calls */
    tok *top;                   /* (n_vocab) capacity; ranks [0, n_top) sorted */
    float *top_logit;           /* (n_vocab) capacity; raw logit of top[r] */
    tok *rest;                  /* (n_vocab) capacity; nucleus candidates below rank n_top */
    uint64_t *heap;             /* (n_vocab) capacity; selection scratch */
    uint16_t *bin_of;           /* (n_vocab) capacity; histogram bin of rest[i] */
    double bin_mass[HIST_BINS];
    int bin_count[HIST_BINS];

    /* What the last call decided, for the report. */
    gpt2_sampler_params used;   /* the params that call ran with */
    int has_dist;               /* 0 before the first call, or if every logit was -inf/NaN */
    float max_z;                /* z of rank 0 */
    int n_top;                  /* H */
    int cut_k;                  /* K */
    int cut_p;                  /* c, or INT_MAX when it lies beyond rank n_top */
    int n_kept;                 /* L (may exceed n_top) */
    double mass_kept;           /* sum of w over the kept ranks */
    double mass_all;            /* sum of w over all n, or -1 if this call did not need it */
    /* The kept set below rank H (keep_deep), or deep_bin = -1 when it ends
     * within top[]: rest[0..deep_in_bin) are kept from the bin where the
     * nucleus ends, rest[deep_nb..n_rest) with bin_of < deep_bin wholly. */
    int deep_bin, deep_nb, deep_in_bin, n_rest;
};

/* ---- parameters ---- */

gpt2_sampler_params gpt2_sampler_default_params(void) {
    gpt2_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f; /* off: plain GPT-2 sampling unless asked for */
    p.repeat_last_n = 64;
    p.seed = 42;
    return p;
}

/* Brings every field into its documented range. The comparisons are written so
 * that NaN fails them and lands on the "off" (or greedy) value. */
static gpt2_sampler_params clamp_params(gpt2_sampler_params p) {
    if (!(p.temperature > 0.0f)) p.temperature = 0.0f;
    else if (p.temperature > FLT_MAX) p.temperature = FLT_MAX; /* -inf / inf would be NaN */
    if (p.top_k < 0) p.top_k = 0;
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) p.top_p = 1.0f;
    if (!(p.min_p > 0.0f)) p.min_p = 0.0f;
    else if (p.min_p > 1.0f) p.min_p = 1.0f;
    if (!(p.repeat_penalty > 0.0f)) p.repeat_penalty = 1.0f;
    else if (p.repeat_penalty > FLT_MAX) p.repeat_penalty = FLT_MAX;
    if (p.repeat_last_n < 0) p.repeat_last_n = 0;
    return p;
}

gpt2_status gpt2_sampler_new(gpt2_sampler_params params, int n_vocab, gpt2_sampler **out, gpt2_error *err) {
    if (!out) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "sampler_new: NULL out");
    *out = NULL;
    if (n_vocab < 1)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "sampler: a vocabulary of %d tokens, expected at least 1", n_vocab);
    gpt2_sampler *s = calloc(1, sizeof *s);
    if (!s) return gpt2_fail(err, GPT2_ERR_NOMEM, "sampler: out of memory");
    size_t n = (size_t)n_vocab;
    s->z = malloc(n * sizeof *s->z);
    s->w = malloc(n * sizeof *s->w);
    s->seen = calloc(n, 1);
    s->top = malloc(n * sizeof *s->top);
    s->top_logit = malloc(n * sizeof *s->top_logit);
    s->rest = malloc(n * sizeof *s->rest);
    s->heap = malloc(n * sizeof *s->heap);
    s->bin_of = malloc(n * sizeof *s->bin_of);
    if (!s->z || !s->w || !s->seen || !s->top || !s->top_logit || !s->rest || !s->heap ||
        !s->bin_of) {
        gpt2_sampler_free(s);
        return gpt2_fail(err, GPT2_ERR_NOMEM, "sampler: out of memory for %d tokens", n_vocab);
    }
    s->n_vocab = n_vocab;
    s->params = clamp_params(params);
    s->rng = s->params.seed;
    s->last = -1;
    *out = s;
    return GPT2_OK;
}

void gpt2_sampler_free(gpt2_sampler *s) {
    if (!s) return;
    free(s->z);
    free(s->w);
    free(s->seen);
    free(s->top);
    free(s->top_logit);
    free(s->rest);
    free(s->heap);
    free(s->bin_of);
    free(s);
}

void gpt2_sampler_set_params(gpt2_sampler *s, gpt2_sampler_params params) {
    if (!s) return;
    params = clamp_params(params);
    if (params.seed != s->params.seed) s->rng = params.seed;
    s->params = params;
}

gpt2_sampler_params gpt2_sampler_get_params(const gpt2_sampler *s) {
    return s ? s->params : gpt2_sampler_default_params();
}

uint64_t gpt2_sampler_rng_state(const gpt2_sampler *s) { return s ? s->rng : 0; }

void gpt2_sampler_set_rng_state(gpt2_sampler *s, uint64_t state) {
    if (s) s->rng = state;
}

int32_t gpt2_sampler_last(const gpt2_sampler *s) { return s ? s->last : -1; }

/* ---- weights ---- */

static inline float weight(float z, float max, float temperature) {
    return fast_exp_nonpos((z - max) / temperature);
}

/* w[i] = weight(z[i]); the same arithmetic as weight(), so that a weight
 * recomputed later for one token is bit-identical. */
static void weights(float *restrict w, const float *restrict z, int n, float max, float temp) {
    for (int i = 0; i < n; i++) w[i] = fast_exp_nonpos((z[i] - max) / temp);
}

/* Sum in double with eight independent accumulators: exact enough for 50257
 * terms and not bound by the latency of one long add chain. */
static double sum_weights(const float *w, int n) {
    double acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += w[i + j];
    double sum = 0.0;
    for (; i < n; i++) sum += w[i];
    for (int j = 0; j < 8; j++) sum += acc[j];
    return sum;
}

/* ---- ranking ---- */

/* The one order of the whole file: higher z first, then lower id. */
static inline int before(const tok *a, const tok *b) {
    return a->z > b->z || (a->z == b->z && a->id < b->id);
}

static inline void swap_tok(tok *a, tok *b) {
    tok t = *a;
    *a = *b;
    *b = t;
}

/* Selection works on 64-bit keys that order exactly like before(): the
 * float's bits mapped to an unsigned integer of the same order, then the
 * complemented id, so one integer compare ranks two tokens. Equal floats must
 * have equal bits for this: z never holds NaN or -0. */
static inline uint64_t rank_key(float z, int32_t id) {
    uint32_t u;
    memcpy(&u, &z, sizeof u);
    u = u >> 31 ? ~u : u | 0x80000000u;
    return (uint64_t)u << 32 | (uint32_t)~id;
}

static inline int32_t key_id(uint64_t key) { return (int32_t)~(uint32_t)key; }

/* Min-heap of keys: the root is the latest-ranked token held. */
static void sift_down(uint64_t *h, int n, int i) {
    uint64_t x = h[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1] < h[c]) c++;
        if (x <= h[c]) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

/* Writes the h best-ranked of z[0..n) to top[0..h), sorted, using heap[0..h).
 * Tokens arrive in id order, so a newcomer whose z merely equals the root's
 * ranks after it and enters only when z > root: for logits in no particular
 * order about h ln(n/h) tokens ever enter, and blocks of 32 without one are
 * dismissed by a compare that vectorises. */
static void select_top(const float *z, int n, tok *top, uint64_t *heap, int h) {
    enum { BLOCK = 32 };
    for (int i = 0; i < h; i++) heap[i] = rank_key(z[i], i);
    for (int i = h / 2 - 1; i >= 0; i--) sift_down(heap, h, i);
    int i = h;
    float root = z[key_id(heap[0])];
    while (i < n) {
        if (n - i >= BLOCK) {
            int any = 0;
            for (int j = 0; j < BLOCK; j++) any |= z[i + j] > root;
            if (!any) {
                i += BLOCK;
                continue;
            }
        }
        for (int end = n - i >= BLOCK ? i + BLOCK : n; i < end; i++) {
            if (z[i] > root) {
                heap[0] = rank_key(z[i], i);
                sift_down(heap, h, 0);
                root = z[key_id(heap[0])];
            }
        }
    }
    for (int end = h - 1; end > 0; end--) { /* heap sort: the latest rank goes last */
        uint64_t t = heap[0];
        heap[0] = heap[end];
        heap[end] = t;
        sift_down(heap, end, 0);
    }
    for (int r = 0; r < h; r++) {
        int32_t id = key_id(heap[r]);
        top[r] = (tok){z[id], 0.0f, id};
    }
}

/* Mass-weighted quickselect. Reorders a[0..n) so that a[0..c) are its c
 * best-ranked elements (in no particular order) for the smallest c with
 * acc + mass(a[0..c)) >= target, and returns c; returns n if even all of a
 * falls short. *mass gets the mass of a[0..c). Expected O(n); median-of-three
 * pivots make sorted input cheap. Used on one histogram bin, which is small. */
static int nucleus_select(tok *a, int n, double acc, double target, double *mass) {
    int lo = 0, hi = n; /* invariant: a[0..lo) are in, the answer is in (lo, hi] */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2, last = hi - 1;
        /* median of a[lo], a[mid], a[last] goes to a[last] */
        if (before(&a[mid], &a[lo])) swap_tok(&a[mid], &a[lo]);
        if (before(&a[last], &a[lo])) swap_tok(&a[last], &a[lo]);
        if (before(&a[mid], &a[last])) swap_tok(&a[mid], &a[last]);
        tok pivot = a[last];
        int i = lo;
        double upper = 0.0;
        for (int j = lo; j < last; j++) {
            if (before(&a[j], &pivot)) {
                upper += a[j].e;
                swap_tok(&a[i++], &a[j]);
            }
        }
        swap_tok(&a[i], &a[last]);
        if (acc + upper >= target) {
            hi = i; /* i > lo here, since acc < target */
        } else if (acc + upper + a[i].e >= target) {
            hi = i + 1;
            break;
        } else {
            acc += upper + a[i].e;
            lo = i + 1;
        }
    }
    double m = 0.0;
    for (int i = 0; i < hi; i++) m += a[i].e;
    *mass = m;
    return hi;
}

/* One draw from a[0..n), whose weights total `mass`. Zero-weight tokens are
 * never returned: the fallback for rounding (u * mass beyond the running sum
 * at the end) is the last token that had weight, and a[0] always weighs 1. */
static int32_t draw(const tok *a, int n, double mass, double u) {
    double r = u * mass, cum = 0.0;
    int32_t pick = a[0].id;
    for (int i = 0; i < n; i++) {
        if (a[i].e > 0.0f) {
            cum += a[i].e;
            pick = a[i].id;
            if (r < cum) break;
        }
    }
    return pick;
}

/* ---- the stages ---- */

/* Stage 1, on s->z. The window is the last repeat_last_n entries of history;
 * a token that occurs there several times is penalised once (CTRL); a logit
 * of exactly 0 stays 0; ids outside [0, n_vocab) are ignored. */
static void penalise(gpt2_sampler *s, const int32_t *history, size_t n_history) {
    const float pen = s->params.repeat_penalty;
    if (pen == 1.0f || s->params.repeat_last_n == 0 || !history) return;
    size_t w = (size_t)s->params.repeat_last_n;
    size_t start = n_history > w ? n_history - w : 0;
    for (size_t i = start; i < n_history; i++) {
        int32_t t = history[i];
        if (t < 0 || t >= s->n_vocab || s->seen[t]) continue;
        s->seen[t] = 1;
        float v = s->z[t];
        v = v > 0.0f ? v / pen : v < 0.0f ? v * pen : v;
        /* a penalty below 1 can push FLT_MAX to +inf, which would make
         * z - max NaN; -inf is fine (probability 0). No -0: see rank_key. */
        s->z[t] = (v > FLT_MAX ? FLT_MAX : v) + 0.0f;
    }
    for (size_t i = start; i < n_history; i++) {
        int32_t t = history[i];
        if (t >= 0 && t < s->n_vocab) s->seen[t] = 0;
    }
}

/* Stages 3-5 when top-k is on: everything happens within the K best ranks,
 * which top[] already holds in order. */
static void keep_top_k(gpt2_sampler *s) {
    const gpt2_sampler_params *p = &s->used;
    tok *top = s->top;
    const int k = s->cut_k;
    double mass_k = 0.0;
    for (int r = 0; r < k; r++) {
        top[r].e = weight(top[r].z, s->max_z, p->temperature);
        mass_k += top[r].e;
    }
    int c = k;
    if (p->top_p < 1.0f) {
        /* The running sum over all K repeats mass_k's additions exactly, and
         * top_p <= 1, so the loop always stops by r = K - 1. */
        double target = (double)p->top_p * mass_k, cum = 0.0;
        for (int r = 0; r < k; r++) {
            cum += top[r].e;
            if (cum >= target) {
                c = r + 1;
                break;
            }
        }
    }
    int l = 1; /* rank 0 weighs 1 >= min_p */
    double mass = top[0].e;
    while (l < c && top[l].e >= p->min_p) mass += top[l++].e;
    s->cut_p = c;
    s->n_kept = l;
    s->mass_kept = mass;
}

/* Stages 4-5 over the whole vocabulary (top-k off).
 *
 * The H best ranks (sorted) are walked first; when the nucleus or the min-p
 * cut ends among them that settles it. Otherwise all H are kept and the rest
 * of the kept set lies below rank H: see keep_deep. */
static void keep_deep(gpt2_sampler *s, double mass_top, double target);

static void keep_full(gpt2_sampler *s) {
    const gpt2_sampler_params *p = &s->used;
    tok *top = s->top;
    const int h = s->n_top;

    weights(s->w, s->z, s->n_vocab, s->max_z, p->temperature);
    const double mass_all = sum_weights(s->w, s->n_vocab);
    s->mass_all = mass_all;
    const double target = p->top_p < 1.0f ? (double)p->top_p * mass_all : INFINITY;

    double cum = 0.0;
    int c = INT_MAX, l = INT_MAX;
    for (int r = 0; r < h; r++) {
        top[r].e = s->w[top[r].id];
        if (l == INT_MAX && top[r].e < p->min_p) l = r;
        cum += top[r].e;
        if (cum >= target) {
            c = r + 1;
            break;
        }
    }
    s->cut_p = c;
    if (c < l) l = c;
    if (l == INT_MAX) {
        keep_deep(s, cum, target);
        return;
    }
    double mass = 0.0;
    for (int r = 0; r < l; r++) mass += top[r].e;
    s->n_kept = l;
    s->mass_kept = mass;
}

/* The kept set is deeper than H. All of top[0..H) is kept (mass_top is their
 * mass, short of target); the rest is found among the tokens ranked below H.
 *
 * Pruning. Let S be the total weight and q = 1 - top_p. The tokens of weight
 * below q*S/n are fewer than n, so together they weigh less than q*S: the
 * tokens above that cut weigh more than top_p*S, hence the nucleus (the
 * smallest best-first prefix reaching top_p*S) lies entirely above the cut and
 * nothing below it is ever needed. Min-p cuts at min_p as well; the kept
 * prefix is the shorter of nucleus and min-p set, so pruning at the larger of
 * the two cuts loses nothing. What survives goes to rest[].
 *
 * Histogram. Survivors are binned by z, linearly from the H-th rank's z down
 * to the z where the weight reaches the cut; a bin is a monotone function of z
 * alone, so bin order refines rank order. The nucleus ends in the first bin at
 * which the running mass reaches top_p*S; only that bin's tokens need ordering
 * (nucleus_select). The draw (draw_deep) then picks a bin by the bins' masses
 * and walks only that bin's tokens, so nothing here is a sort or more than a
 * few passes. */
static void keep_deep(gpt2_sampler *s, double mass_top, double target) {
    const gpt2_sampler_params *p = &s->used;
    const int n = s->n_vocab, h = s->n_top;
    const tok *top = s->top;
    const tok last_top = top[h - 1];
    tok *rest = s->rest;
    uint16_t *bin_of = s->bin_of;

    float cut = p->top_p < 1.0f ? (float)((1.0 - p->top_p) * s->mass_all / n) : 0.0f;
    if (p->min_p > cut) cut = p->min_p;
    const float zhi = last_top.z;
    const double zlo = cut > 0.0f ? (double)s->max_z + (double)p->temperature * log(cut) : zhi;
    const double span = (double)zhi - zlo;
    const float scale = span > 0.0 ? (float)fmin(HIST_BINS / span, FLT_MAX) : 0.0f;

    /* Binning never branches: the distance below z_H is clamped before the
     * multiply (z = -inf gives inf), so the conversion to int is always
     * defined; a min against a constant keeps it monotone. */
    const float dmax = span > 0.0 ? (float)fmin(span, FLT_MAX) : 0.0f;
    memset(s->bin_mass, 0, sizeof s->bin_mass);
    memset(s->bin_count, 0, sizeof s->bin_count);
    int n_rest = 0;
    for (int i = 0; i < n; i++) {
        if (!(s->w[i] >= cut)) continue; /* pruned */
        const tok t = {s->z[i], s->w[i], i};
        if (!((t.z < zhi) | ((t.z == zhi) & (i > last_top.id)))) continue; /* among the H */
        float d = zhi - t.z;
        d = d < dmax ? d : dmax;
        int b = (int)(d * scale);
        b = b < HIST_BINS - 1 ? b : HIST_BINS - 1;
        s->bin_mass[b] += t.e;
        s->bin_count[b]++;
        rest[n_rest] = t;
        bin_of[n_rest++] = (uint16_t)b;
    }

    /* The bin where the nucleus ends, or HIST_BINS when all survivors are kept
     * (top_p = 1, a min-p cut, or a rounding shortfall). */
    double acc = mass_top;
    int bin = 0, n_before = 0;
    for (; bin < HIST_BINS; bin++) {
        if (acc + s->bin_mass[bin] >= target) break;
        acc += s->bin_mass[bin];
        n_before += s->bin_count[bin];
    }
    int nb = 0, in_bin = 0;
    double mass_bin = 0.0;
    if (bin < HIST_BINS) {
        /* Bring the bin's tokens to the front of rest[] and order just those. */
        for (int i = 0; i < n_rest; i++) {
            if (bin_of[i] != bin) continue;
            swap_tok(&rest[nb], &rest[i]);
            bin_of[i] = bin_of[nb];
            bin_of[nb++] = (uint16_t)bin;
        }
        in_bin = nucleus_select(rest, nb, acc, target, &mass_bin);
    }
    s->n_kept = h + n_before + in_bin;
    s->mass_kept = acc + mass_bin;
    s->deep_bin = bin;
    s->deep_nb = nb;
    s->deep_in_bin = in_bin;
    s->n_rest = n_rest;
}

/* The draw from a kept set that keep_deep found: top[0..h), then the bins
 * before deep_bin in order, then the kept part of deep_bin, rest[0..in_bin). */
static int32_t draw_deep(const gpt2_sampler *s, double u) {
    const tok *top = s->top, *rest = s->rest;
    const uint16_t *bin_of = s->bin_of;
    const int h = s->n_top, bin = s->deep_bin, nb = s->deep_nb;
    double r = u * s->mass_kept, cum = 0.0;
    int32_t pick = top[0].id;
    for (int i = 0; i < h; i++) {
        if (top[i].e > 0.0f) {
            cum += top[i].e;
            pick = top[i].id;
            if (r < cum) return pick;
        }
    }
    for (int b = 0; b < bin; b++) {
        if (!(s->bin_mass[b] > 0.0 && r < cum + s->bin_mass[b])) {
            cum += s->bin_mass[b];
            continue;
        }
        for (int i = nb; i < s->n_rest; i++) {
            if (bin_of[i] != b || !(rest[i].e > 0.0f)) continue;
            cum += rest[i].e;
            pick = rest[i].id;
            if (r < cum) break;
        }
        return pick; /* reached, or rounding: the bin's last token with weight */
    }
    for (int i = 0; i < s->deep_in_bin; i++) {
        if (rest[i].e > 0.0f) {
            cum += rest[i].e;
            pick = rest[i].id;
            if (r < cum) break;
        }
    }
    return pick;
}

/* Stage 1 and the ranking: z from the logits, the H best ranks in top[],
 * and the report's state reset to "argmax only". */
static void prepare(gpt2_sampler *s, const float *logits, const int32_t *history, size_t n_history) {
    const int n = s->n_vocab;
    const gpt2_sampler_params *p = &s->params;
    s->used = *p;

    /* NaN becomes -inf (never drawn); +inf becomes FLT_MAX, so several +inf
     * logits tie for the top and share its mass instead of producing NaN;
     * adding +0 turns -0 into +0 (rank_key needs equal floats to be equal bits). */
    for (int i = 0; i < n; i++) {
        float v = logits[i];
        s->z[i] = v != v ? -INFINITY : v > FLT_MAX ? FLT_MAX : v + 0.0f;
    }
    penalise(s, history, n_history);

    int k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    int h = k < n && k > REPORT_MIN ? k : REPORT_MIN;
    if (h > n) h = n;
    select_top(s->z, n, s->top, s->heap, h);
    for (int r = 0; r < h; r++) s->top_logit[r] = logits[s->top[r].id];

    s->n_top = h;
    s->cut_k = k;
    s->cut_p = INT_MAX;
    s->n_kept = 1;
    s->mass_kept = 1.0;
    s->mass_all = -1.0;
    s->deep_bin = -1;
    s->max_z = s->top[0].z;
    s->has_dist = s->max_z > -INFINITY;
}

/* Stages 2-5: the kept set and its mass. Returns 0 when the answer is the
 * argmax alone (greedy, or no distribution). */
static int keep(gpt2_sampler *s) {
    if (s->used.temperature == 0.0f || !s->has_dist) return 0;
    if (s->cut_k < s->n_vocab) keep_top_k(s);
    else keep_full(s);
    return 1;
}

int32_t gpt2_sampler_sample(gpt2_sampler *s, const float *logits, const int32_t *history,
                            size_t n_history) {
    if (!s || !logits) return -1;
    prepare(s, logits, history, n_history);
    /* Exactly one draw whenever temperature > 0, whatever the cuts leave, so
     * the RNG stream does not shift when a knob changes. */
    double u = s->used.temperature > 0.0f ? rng_uniform(&s->rng) : 0.0;
    int32_t id = s->top[0].id; /* argmax, lowest id on ties; 0 if all are -inf */
    if (keep(s)) id = s->deep_bin >= 0 ? draw_deep(s, u) : draw(s->top, s->n_kept, s->mass_kept, u);
    s->last = id;
    return id;
}

int gpt2_sampler_filter(gpt2_sampler *s, const float *logits, const int32_t *history,
                        size_t n_history, float *prob) {
    if (!s || !logits || !prob) return -1;
    prepare(s, logits, history, n_history);
    memset(prob, 0, (size_t)s->n_vocab * sizeof *prob);
    if (!keep(s)) {
        prob[s->top[0].id] = 1.0f;
        return 1;
    }
    /* Each kept weight over the kept mass: the report's prob_final, bit for bit. */
    const double mass = s->mass_kept;
    const tok *top = s->top, *rest = s->rest;
    const int ranked = s->n_kept < s->n_top ? s->n_kept : s->n_top;
    for (int r = 0; r < ranked; r++) prob[top[r].id] = (float)(top[r].e / mass);
    if (s->deep_bin >= 0) {
        for (int i = 0; i < s->deep_in_bin; i++) prob[rest[i].id] = (float)(rest[i].e / mass);
        for (int i = s->deep_nb; i < s->n_rest; i++)
            if (s->bin_of[i] < s->deep_bin) prob[rest[i].id] = (float)(rest[i].e / mass);
    }
    return s->n_kept;
}

/* ---- report ---- */

/* Sum of weight(z[i]) over all n, through a stack buffer so that the loop
 * vectorises without writing to the (const) sampler. */
static double mass_of(const float *z, int n, float max, float temp) {
    enum { CHUNK = 1024 };
    float buf[CHUNK];
    double sum = 0.0;
    for (int i = 0; i < n; i += CHUNK) {
        int len = n - i < CHUNK ? n - i : CHUNK;
        weights(buf, z + i, len, max, temp);
        sum += sum_weights(buf, len);
    }
    return sum;
}

size_t gpt2_sampler_report(const gpt2_sampler *s, gpt2_candidate *out, size_t max) {
    if (!s || !out || !s->has_dist) return 0;
    size_t count = max < (size_t)s->n_top ? max : (size_t)s->n_top;
    if (count == 0) return 0;

    const float mz = s->max_z, temp = s->used.temperature;
    const int greedy = temp == 0.0f;
    const double mass1 = mass_of(s->z, s->n_vocab, mz, 1.0f); /* softmax at T = 1 */
    double mass_t = mass1;
    if (!greedy && temp != 1.0f)
        mass_t = s->mass_all >= 0.0 ? s->mass_all : mass_of(s->z, s->n_vocab, mz, temp);

    for (size_t r = 0; r < count; r++) {
        const tok *t = &s->top[r];
        gpt2_candidate *c = &out[r];
        int rank = (int)r;
        c->id = t->id;
        c->logit = s->top_logit[r];
        c->prob = (float)(weight(t->z, mz, 1.0f) / mass1);
        if (greedy) {
            c->prob_temp = c->prob;
            c->removed_by = rank == 0 ? GPT2_STAGE_KEPT : GPT2_STAGE_GREEDY;
            c->prob_final = rank == 0 ? 1.0f : 0.0f;
            continue;
        }
        float e = weight(t->z, mz, temp);
        c->prob_temp = (float)(e / mass_t);
        c->removed_by = rank >= s->cut_k    ? GPT2_STAGE_TOP_K
                        : rank >= s->cut_p  ? GPT2_STAGE_TOP_P
                        : rank >= s->n_kept ? GPT2_STAGE_MIN_P
                                            : GPT2_STAGE_KEPT;
        c->prob_final = c->removed_by == GPT2_STAGE_KEPT ? (float)(e / s->mass_kept) : 0.0f;
    }
    return count;
}
