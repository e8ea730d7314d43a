/* bpe_train.c — learns a byte-level BPE vocabulary in GPT-2's format (gpt2_bpe_train.h).
 *
 * Layout of the work:
 *   - pieces: the text cut by GPT-2's pattern (core/pretokenize.c); equal pieces are counted
 *     once in a hash table, and each distinct piece gets a run of "symbol positions" in one
 *     global array. A position holds a token id and links to its live neighbours inside the
 *     piece; merging (A, B) at position p keeps A's position (now the merged id) and unlinks
 *     B's. Positions of one piece stay in increasing order along the links, so sorting
 *     positions sorts occurrences left to right.
 *   - pairs: (left id, right id) -> count (summed over occurrences, times the piece's count)
 *     and a list of left positions where the pair was seen. Lists are never cleaned: an entry
 *     is checked against the symbols when used, so stale and repeated entries are harmless.
 *   - a max-heap of (count, pair) with lazy invalidation. Counts only fall, except for the
 *     pairs holding the token just made, which are pushed after each merge. A popped entry
 *     whose count is out of date is pushed again with the current count, so the top entry
 *     that matches its pair's count is the true maximum.
 * A merge touches only the positions in its pair's list: cost proportional to the merged
 * pair's occurrences, not to the text.
 */
#include "gpt2_bpe_train.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/byte_alphabet.h"
#include "core/error.h"
#include "gpt2_fileio.h"
#include "core/tokenizer_internal.h"
#include "core/pretokenize.h"

static const char EOT_TEXT[] = "<|endoftext|>";

typedef struct {
    int32_t left, right; /* ids of the parts */
    int64_t count;       /* the pair's count when merged */
} merge_rec;

struct gpt2_bpe_vocab {
    gpt2_bpe_train_stats stats;
    char *blob;             /* every token's bytes back to back, "<|endoftext|>" last */
    size_t *tok_off;        /* (n_vocab + 1) token i is blob[tok_off[i], tok_off[i + 1]) */
    merge_rec *merge;       /* (n_merges) */
};

/* ---- small growable arrays and hashing ------------------------------------------------ */

/* Makes room for n elements of size sz in *p (capacity *cap); 0 or -1 on failure. */
static int grow(void **p, size_t *cap, size_t n, size_t sz) {
    if (n <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < n) c *= 2;
    if (c > SIZE_MAX / sz) return -1;
    void *q = realloc(*p, c * sz);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static uint64_t hash_bytes(const void *s, size_t n) {
    const unsigned char *b = s;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static uint64_t hash_key(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 17; }

static size_t table_size(size_t n) { /* a power of two at least twice n */
    size_t size = 16;
    while (size < 2 * n) size *= 2;
    return size;
}

/* ---- the trainer's state ---------------------------------------------------------------- */

typedef struct {
    const unsigned char *s; /* into the caller's text */
    size_t len;
    int64_t count;
    uint64_t hash;
} piece;

typedef struct {
    uint64_t key;     /* (left id << 32) | right id */
    int64_t count;    /* occurrences, times their pieces' counts */
    int32_t *pos;     /* left positions where the pair was seen (unsorted, maybe stale) */
    size_t n_pos, cap_pos;
    int32_t stamp;    /* the merge that last gave it a new occurrence */
    int closed;       /* merged, or skipped as a duplicate: never a candidate again */
} pair_rec;

typedef struct {
    int64_t count;
    int32_t pair;
} heap_ent;

typedef struct {
    /* pieces */
    piece *pieces;
    size_t n_pieces, cap_pieces;
    int32_t *piece_table; /* -1 empty */
    size_t piece_mask;
    /* tokens: ids 0..255 bytes in GPT-2 order, then merges */
    char *blob;
    size_t blob_len, cap_blob;
    size_t *tok_off;      /* (n_tok + 1) */
    size_t n_tok, cap_tok;
    int32_t *tok_table;   /* bytes -> id, -1 empty; sized for every token there can be */
    size_t tok_mask;
    int32_t byte_id[256];
    /* symbols */
    int32_t *sym;         /* (n_sym) token id, -1 once merged into the left neighbour */
    int32_t *next, *prev; /* (n_sym) live neighbours in the same piece, -1 at the ends */
    int32_t *owner;       /* (n_sym) the piece a position belongs to */
    size_t n_sym;
    /* pairs */
    pair_rec *pairs;
    size_t n_pairs, cap_pairs;
    int32_t *pair_table;  /* -1 empty */
    size_t pair_mask;
    heap_ent *heap;
    size_t n_heap, cap_heap;
    int32_t *fresh;       /* pairs that gained occurrences in the current merge */
    size_t n_fresh, cap_fresh;
    /* result */
    merge_rec *merge;
    size_t cap_merge;
    int n_merges;
} trainer;

static void trainer_free(trainer *t) {
    free(t->pieces);
    free(t->piece_table);
    free(t->blob);
    free(t->tok_off);
    free(t->tok_table);
    free(t->sym);
    free(t->next);
    free(t->prev);
    free(t->owner);
    for (size_t i = 0; i < t->n_pairs; i++) free(t->pairs[i].pos);
    free(t->pairs);
    free(t->pair_table);
    free(t->heap);
    free(t->fresh);
    free(t->merge);
}

/* ---- pieces ------------------------------------------------------------------------------ */

static int piece_table_resize(trainer *t, size_t size) {
    int32_t *tab = malloc(size * sizeof *tab);
    if (!tab) return -1;
    memset(tab, 0xFF, size * sizeof *tab);
    for (size_t i = 0; i < t->n_pieces; i++) {
        size_t j = t->pieces[i].hash & (size - 1);
        while (tab[j] >= 0) j = (j + 1) & (size - 1);
        tab[j] = (int32_t)i;
    }
    free(t->piece_table);
    t->piece_table = tab;
    t->piece_mask = size - 1;
    return 0;
}

/* Counts one occurrence of s[0, len). */
static gpt2_status add_piece(trainer *t, const unsigned char *s, size_t len, gpt2_error *err) {
    uint64_t h = hash_bytes(s, len);
    size_t j = h & t->piece_mask;
    for (int32_t i; (i = t->piece_table[j]) >= 0; j = (j + 1) & t->piece_mask) {
        piece *p = &t->pieces[i];
        if (p->hash == h && p->len == len && memcmp(p->s, s, len) == 0) {
            p->count++;
            return GPT2_OK;
        }
    }
    /* Positions are int32: all distinct pieces together must stay below 2^31 bytes. */
    if (len >= (size_t)INT32_MAX - t->n_sym || t->n_pieces >= (size_t)INT32_MAX - 1)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "training text has 2^31 bytes or more of "
                         "distinct pieces (words, numbers, runs); use less text");
    if (grow((void **)&t->pieces, &t->cap_pieces, t->n_pieces + 1, sizeof *t->pieces))
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory counting pieces of the training text");
    t->piece_table[j] = (int32_t)t->n_pieces;
    t->pieces[t->n_pieces++] = (piece){s, len, 1, h};
    t->n_sym += len;
    if (2 * t->n_pieces > t->piece_mask + 1 && piece_table_resize(t, 2 * (t->piece_mask + 1)))
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory counting pieces of the training text");
    return GPT2_OK;
}

static gpt2_status count_pieces(trainer *t, const unsigned char *s, size_t len,
                                gpt2_bpe_train_stats *st, gpt2_error *err) {
    if (piece_table_resize(t, 1 << 12)) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    pcre2_code *re = pretok_compile(err);
    if (!re) return err ? err->status : GPT2_ERR_TOKENIZER;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    gpt2_status rc = md ? GPT2_OK : gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for regex match data");
    for (size_t pos = 0, start, stop; rc == GPT2_OK && pos < len; pos = stop) {
        rc = pretok_next(re, md, s, len, pos, &start, &stop, err);
        if (rc == GPT2_OK && start > pos) { /* a run of invalid UTF-8: raw bytes, as encode does */
            rc = add_piece(t, s + pos, start - pos, err);
            st->n_pieces++;
        }
        if (rc == GPT2_OK && stop > start) {
            rc = add_piece(t, s + start, stop - start, err);
            st->n_pieces++;
        }
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    st->n_unique_pieces = t->n_pieces;
    return rc;
}

/* ---- tokens ------------------------------------------------------------------------------ */

static const char *tok_bytes(const trainer *t, int32_t id, size_t *len) {
    *len = t->tok_off[id + 1] - t->tok_off[id];
    return t->blob + t->tok_off[id];
}

/* The id of bytes s[0, n), or -1; *slot gets the slot it is in or would go in. */
static int32_t tok_find(const trainer *t, const char *s, size_t n, size_t *slot) {
    size_t j = hash_bytes(s, n) & t->tok_mask;
    for (;; j = (j + 1) & t->tok_mask) {
        int32_t id = t->tok_table[j];
        if (id < 0) break;
        size_t m;
        const char *b = tok_bytes(t, id, &m);
        if (m == n && memcmp(b, s, n) == 0) break;
    }
    *slot = j;
    return t->tok_table[j];
}

/* Bytes order, memcmp style, a prefix first: the tie rule. */
static int tok_cmp(const trainer *t, int32_t a, int32_t b) {
    size_t na, nb;
    const char *sa = tok_bytes(t, a, &na), *sb = tok_bytes(t, b, &nb);
    int c = memcmp(sa, sb, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

static gpt2_status init_tokens(trainer *t, size_t max_tokens, gpt2_error *err) {
    if (grow((void **)&t->blob, &t->cap_blob, 256, 1) ||
        grow((void **)&t->tok_off, &t->cap_tok, 257, sizeof *t->tok_off))
        return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
    size_t size = table_size(max_tokens);
    t->tok_table = malloc(size * sizeof *t->tok_table);
    if (!t->tok_table) return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for %zu tokens", max_tokens);
    memset(t->tok_table, 0xFF, size * sizeof *t->tok_table);
    t->tok_mask = size - 1;
    /* ids 0..255: the printable bytes, then the others, each group in increasing order */
    for (int pass = 1; pass >= 0; pass--)
        for (int b = 0; b < 256; b++) {
            if (byte_is_printable(b) != pass) continue;
            int32_t id = (int32_t)t->n_tok++;
            t->tok_off[id] = t->blob_len;
            t->blob[t->blob_len++] = (char)b;
            t->tok_off[id + 1] = t->blob_len;
            size_t slot;
            tok_find(t, t->blob + t->tok_off[id], 1, &slot);
            t->tok_table[slot] = id;
            t->byte_id[b] = id;
        }
    return GPT2_OK;
}

/* ---- pairs and the heap ------------------------------------------------------------------ */

static uint64_t pair_key(int32_t l, int32_t r) { return ((uint64_t)(uint32_t)l << 32) | (uint32_t)r; }
static int32_t key_left(uint64_t k) { return (int32_t)(k >> 32); }
static int32_t key_right(uint64_t k) { return (int32_t)(uint32_t)k; }

static int pair_table_resize(trainer *t, size_t size) {
    int32_t *tab = malloc(size * sizeof *tab);
    if (!tab) return -1;
    memset(tab, 0xFF, size * sizeof *tab);
    for (size_t i = 0; i < t->n_pairs; i++) {
        size_t j = hash_key(t->pairs[i].key) & (size - 1);
        while (tab[j] >= 0) j = (j + 1) & (size - 1);
        tab[j] = (int32_t)i;
    }
    free(t->pair_table);
    t->pair_table = tab;
    t->pair_mask = size - 1;
    return 0;
}

/* Index of pair (l, r), created with count 0 if new; -1 when out of memory. */
static int32_t pair_get(trainer *t, int32_t l, int32_t r) {
    uint64_t key = pair_key(l, r);
    size_t j = hash_key(key) & t->pair_mask;
    for (int32_t i; (i = t->pair_table[j]) >= 0; j = (j + 1) & t->pair_mask)
        if (t->pairs[i].key == key) return i;
    if (t->n_pairs >= (size_t)INT32_MAX ||
        grow((void **)&t->pairs, &t->cap_pairs, t->n_pairs + 1, sizeof *t->pairs))
        return -1;
    int32_t i = (int32_t)t->n_pairs++;
    t->pairs[i] = (pair_rec){.key = key, .stamp = -1};
    t->pair_table[j] = i;
    if (2 * t->n_pairs > t->pair_mask + 1 && pair_table_resize(t, 2 * (t->pair_mask + 1))) return -1;
    return i;
}

/* Adds c occurrences of (l, r), the left one at position p. */
static int pair_add(trainer *t, int32_t l, int32_t r, int64_t c, int32_t p) {
    int32_t i = pair_get(t, l, r);
    if (i < 0) return -1;
    pair_rec *pr = &t->pairs[i];
    if (grow((void **)&pr->pos, &pr->cap_pos, pr->n_pos + 1, sizeof *pr->pos)) return -1;
    pr->pos[pr->n_pos++] = p;
    pr->count += c;
    return i;
}

/* Removes c occurrences of (l, r), which exists: its positions go stale by themselves. */
static void pair_sub(trainer *t, int32_t l, int32_t r, int64_t c) {
    uint64_t key = pair_key(l, r);
    size_t j = hash_key(key) & t->pair_mask;
    for (int32_t i; (i = t->pair_table[j]) >= 0; j = (j + 1) & t->pair_mask)
        if (t->pairs[i].key == key) {
            t->pairs[i].count -= c;
            return;
        }
}

/* Heap order: a before b when a's count is higher, then by the tie rule. */
static int heap_before(const trainer *t, heap_ent a, heap_ent b) {
    if (a.count != b.count) return a.count > b.count;
    uint64_t ka = t->pairs[a.pair].key, kb = t->pairs[b.pair].key;
    int c = tok_cmp(t, key_left(ka), key_left(kb));
    if (c) return c < 0;
    return tok_cmp(t, key_right(ka), key_right(kb)) < 0;
}

static void sift_down(trainer *t, size_t i) {
    heap_ent *h = t->heap, e = h[i];
    size_t n = t->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(t, h[c + 1], h[c])) c++;
        if (!heap_before(t, h[c], e)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = e;
}

static int heap_push(trainer *t, int64_t count, int32_t pair) {
    if (grow((void **)&t->heap, &t->cap_heap, t->n_heap + 1, sizeof *t->heap)) return -1;
    heap_ent e = {count, pair};
    size_t i = t->n_heap++;
    while (i > 0 && heap_before(t, e, t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = e;
    return 0;
}

static heap_ent heap_pop(trainer *t) {
    heap_ent top = t->heap[0];
    t->heap[0] = t->heap[--t->n_heap];
    if (t->n_heap > 0) sift_down(t, 0);
    return top;
}

/* ---- training ---------------------------------------------------------------------------- */

static gpt2_status build_symbols(trainer *t, gpt2_error *err) {
    size_t n = t->n_sym ? t->n_sym : 1;
    t->sym = malloc(n * sizeof *t->sym);
    t->next = malloc(n * sizeof *t->next);
    t->prev = malloc(n * sizeof *t->prev);
    t->owner = malloc(n * sizeof *t->owner);
    if (!t->sym || !t->next || !t->prev || !t->owner || pair_table_resize(t, table_size(t->n_sym)))
        goto nomem;
    size_t p = 0;
    for (size_t i = 0; i < t->n_pieces; i++) {
        const piece *pc = &t->pieces[i];
        for (size_t k = 0; k < pc->len; k++, p++) {
            t->sym[p] = t->byte_id[pc->s[k]];
            t->prev[p] = k > 0 ? (int32_t)p - 1 : -1;
            t->next[p] = k + 1 < pc->len ? (int32_t)p + 1 : -1;
            t->owner[p] = (int32_t)i;
            if (k > 0 && pair_add(t, t->sym[p - 1], t->sym[p], pc->count, (int32_t)p - 1) < 0)
                goto nomem;
        }
    }
    if (grow((void **)&t->heap, &t->cap_heap, t->n_pairs, sizeof *t->heap)) goto nomem;
    for (size_t i = 0; i < t->n_pairs; i++) t->heap[i] = (heap_ent){t->pairs[i].count, (int32_t)i};
    t->n_heap = t->n_pairs;
    for (size_t i = t->n_heap / 2; i-- > 0;) sift_down(t, i);
    return GPT2_OK;
nomem:
    return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory for %zu symbols of training text", t->n_sym);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int note_fresh(trainer *t, int32_t pair, int32_t stamp) {
    if (pair < 0) return -1;
    if (t->pairs[pair].stamp == stamp) return 0;
    t->pairs[pair].stamp = stamp;
    if (grow((void **)&t->fresh, &t->cap_fresh, t->n_fresh + 1, sizeof *t->fresh)) return -1;
    t->fresh[t->n_fresh++] = pair;
    return 0;
}

/* Replaces every occurrence of pair pi, left to right within each piece, by token id nid,
 * and sets *saved to the tokens that saves over the whole text. 0, or -1 when out of memory. */
static int apply_merge(trainer *t, int32_t pi, int32_t nid, int64_t *saved) {
    const int32_t L = key_left(t->pairs[pi].key), R = key_right(t->pairs[pi].key);
    int32_t *pos = t->pairs[pi].pos; /* taken over: the pair is closed after this */
    size_t n_pos = t->pairs[pi].n_pos;
    t->pairs[pi].pos = NULL;
    t->pairs[pi].n_pos = t->pairs[pi].cap_pos = 0;
    if (n_pos > 1) qsort(pos, n_pos, sizeof *pos, cmp_i32);
    t->n_fresh = 0;
    int rc = 0;
    *saved = 0;
    for (size_t k = 0; k < n_pos && rc == 0; k++) {
        int32_t p = pos[k];
        if (k > 0 && p == pos[k - 1]) continue;
        int32_t q = t->next[p];
        if (t->sym[p] != L || q < 0 || t->sym[q] != R) continue; /* stale, or overlapped */
        int64_t c = t->pieces[t->owner[p]].count;
        int32_t x = t->prev[p], y = t->next[q];
        pair_sub(t, L, R, c);
        if (x >= 0) {
            pair_sub(t, t->sym[x], L, c);
            rc = note_fresh(t, pair_add(t, t->sym[x], nid, c, x), nid);
        }
        if (y >= 0 && rc == 0) {
            pair_sub(t, R, t->sym[y], c);
            rc = note_fresh(t, pair_add(t, nid, t->sym[y], c, p), nid);
        }
        t->sym[p] = nid;
        t->sym[q] = -1;
        t->next[p] = y;
        if (y >= 0) t->prev[y] = p;
        *saved += c;
    }
    free(pos);
    t->pairs[pi].closed = 1;
    for (size_t k = 0; k < t->n_fresh && rc == 0; k++)
        if (t->pairs[t->fresh[k]].count > 0) rc = heap_push(t, t->pairs[t->fresh[k]].count, t->fresh[k]);
    return rc;
}

static gpt2_status learn(trainer *t, gpt2_bpe_train_params p, gpt2_bpe_train_stats *st, gpt2_error *err) {
    const int wanted = p.vocab_size - GPT2_BPE_MIN_VOCAB;
    st->stop = GPT2_BPE_STOP_VOCAB_SIZE;
    while (t->n_merges < wanted) {
        if (t->n_heap == 0) {
            st->stop = GPT2_BPE_STOP_NO_PAIRS;
            break;
        }
        heap_ent top = heap_pop(t);
        pair_rec *pr = &t->pairs[top.pair];
        if (pr->closed) continue;
        if (pr->count != top.count) { /* out of date: counts only fell since the push */
            if (pr->count > 0 && heap_push(t, pr->count, top.pair)) goto nomem;
            continue;
        }
        /* The candidate token goes at the end of the blob; kept only if it is new. */
        size_t nl, nr;
        int32_t L = key_left(pr->key), R = key_right(pr->key);
        tok_bytes(t, L, &nl);
        tok_bytes(t, R, &nr);
        if (grow((void **)&t->blob, &t->cap_blob, t->blob_len + nl + nr, 1) ||
            grow((void **)&t->tok_off, &t->cap_tok, t->n_tok + 2, sizeof *t->tok_off) ||
            grow((void **)&t->merge, &t->cap_merge, (size_t)t->n_merges + 1, sizeof *t->merge))
            goto nomem;
        char *cand = t->blob + t->blob_len;
        memcpy(cand, t->blob + t->tok_off[L], nl);
        memcpy(cand + nl, t->blob + t->tok_off[R], nr);
        size_t slot;
        if (tok_find(t, cand, nl + nr, &slot) >= 0) { /* "a"+"bc" after "ab"+"c": skip for good */
            free(pr->pos);
            pr->pos = NULL;
            pr->n_pos = pr->cap_pos = 0;
            pr->closed = 1;
            continue;
        }
        if (top.count < p.min_frequency) {
            st->stop = GPT2_BPE_STOP_MIN_FREQUENCY;
            st->stop_count = top.count;
            break;
        }
        int32_t nid = (int32_t)t->n_tok++;
        t->blob_len += nl + nr;
        t->tok_off[nid + 1] = t->blob_len;
        t->tok_table[slot] = nid;
        int64_t saved;
        if (apply_merge(t, top.pair, nid, &saved)) goto nomem;
        t->merge[t->n_merges++] = (merge_rec){L, R, top.count};
        st->n_tokens -= saved;
        if (p.progress && p.progress(p.user_data, t->n_merges, wanted))
            return gpt2_fail(err, GPT2_CANCELLED, "BPE training cancelled after %d of %d merges",
                             t->n_merges, wanted);
    }
    return GPT2_OK;
nomem:
    return gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory after %d merges", t->n_merges);
}

gpt2_bpe_train_params gpt2_bpe_train_default_params(void) {
    return (gpt2_bpe_train_params){.vocab_size = 4096, .min_frequency = 2};
}

gpt2_status gpt2_bpe_train(const char *text, size_t len, gpt2_bpe_train_params params,
                           gpt2_bpe_vocab **out, gpt2_error *err) {
    if (out) *out = NULL;
    if (!out || (!text && len > 0))
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "gpt2_bpe_train: NULL argument");
    if (params.vocab_size < GPT2_BPE_MIN_VOCAB || params.vocab_size > GPT2_BPE_MAX_VOCAB)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG,
                         "vocab_size %d is out of range: expected %d (the 256 byte tokens and "
                         "<|endoftext|>, no merges) to %d",
                         params.vocab_size, GPT2_BPE_MIN_VOCAB, GPT2_BPE_MAX_VOCAB);
    if (params.min_frequency < 1)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "min_frequency %lld: expected at least 1",
                         (long long)params.min_frequency);
    if (len == 0)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "no training text (0 bytes): BPE learns from text");

    trainer t = {0};
    gpt2_bpe_train_stats st = {.n_bytes = len, .n_tokens = (int64_t)len};
    gpt2_bpe_vocab *v = NULL;
    gpt2_status rc = count_pieces(&t, (const unsigned char *)text, len, &st, err);
    if (rc == GPT2_OK) {
        /* Each merge removes at least one symbol, so n_sym bounds the merges. */
        size_t most = (size_t)params.vocab_size - GPT2_BPE_MIN_VOCAB;
        if (most > t.n_sym) most = t.n_sym;
        rc = init_tokens(&t, 256 + most, err);
    }
    if (rc == GPT2_OK) rc = build_symbols(&t, err);
    if (rc == GPT2_OK) rc = learn(&t, params, &st, err);
    if (rc == GPT2_OK) { /* hand the tokens over, with "<|endoftext|>" appended */
        const size_t m = sizeof EOT_TEXT - 1;
        if (grow((void **)&t.blob, &t.cap_blob, t.blob_len + m, 1) ||
            grow((void **)&t.tok_off, &t.cap_tok, t.n_tok + 2, sizeof *t.tok_off) ||
            !(v = calloc(1, sizeof *v))) {
            rc = gpt2_fail(err, GPT2_ERR_NOMEM, "out of memory");
        } else {
            memcpy(t.blob + t.blob_len, EOT_TEXT, m);
            t.blob_len += m;
            t.tok_off[++t.n_tok] = t.blob_len;
            st.n_merges = t.n_merges;
            st.n_vocab = (int)t.n_tok;
            v->stats = st;
            v->blob = t.blob;
            v->tok_off = t.tok_off;
            v->merge = t.merge;
            t.blob = NULL;
            t.tok_off = NULL;
            t.merge = NULL;
        }
    }
    trainer_free(&t);
    if (rc != GPT2_OK) return rc;
    gpt2_error_clear(err);
    *out = v;
    return GPT2_OK;
}

void gpt2_bpe_vocab_free(gpt2_bpe_vocab *v) {
    if (!v) return;
    free(v->blob);
    free(v->tok_off);
    free(v->merge);
    free(v);
}

const gpt2_bpe_train_stats *gpt2_bpe_vocab_stats(const gpt2_bpe_vocab *v) { return v ? &v->stats : NULL; }

int gpt2_bpe_vocab_n_merges(const gpt2_bpe_vocab *v) { return v ? v->stats.n_merges : 0; }

int gpt2_bpe_vocab_n_vocab(const gpt2_bpe_vocab *v) { return v ? v->stats.n_vocab : 0; }

const char *gpt2_bpe_vocab_token(const gpt2_bpe_vocab *v, int32_t id, size_t *len) {
    if (!v || id < 0 || id >= v->stats.n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->tok_off[id + 1] - v->tok_off[id];
    return v->blob + v->tok_off[id];
}

int gpt2_bpe_vocab_merge(const gpt2_bpe_vocab *v, int i, gpt2_bpe_merge *m) {
    if (!v || !m || i < 0 || i >= v->stats.n_merges) return -1;
    m->left_id = v->merge[i].left;
    m->right_id = v->merge[i].right;
    m->left = gpt2_bpe_vocab_token(v, m->left_id, &m->left_len);
    m->right = gpt2_bpe_vocab_token(v, m->right_id, &m->right_len);
    m->id = 256 + i;
    m->count = v->merge[i].count;
    return 0;
}

/* ---- saving ------------------------------------------------------------------------------ */

static const char *file_token(const void *user, int32_t id, size_t *len) {
    return gpt2_bpe_vocab_token(user, id, len);
}

static void file_merge(const void *user, int rank, int32_t *left, int32_t *right) {
    gpt2_bpe_merge m = {0};
    gpt2_bpe_vocab_merge(user, rank, &m);
    *left = m.left_id;
    *right = m.right_id;
}

gpt2_status gpt2_bpe_vocab_save(const gpt2_bpe_vocab *v, const char *dir, gpt2_error *err) {
    if (!v || !dir) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "gpt2_bpe_vocab_save: NULL argument");
    if (!*dir) return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "gpt2_bpe_vocab_save: empty directory name");
    gpt2_status rc = gpt2_fileio_mkdirs(dir, err);
    tok_file_src src = {v->stats.n_vocab, v->stats.n_merges, file_token, file_merge, v};
    if (rc == GPT2_OK) rc = tok_save_files(&src, dir, err);
    if (rc == GPT2_OK) gpt2_error_clear(err);
    return rc;
}
