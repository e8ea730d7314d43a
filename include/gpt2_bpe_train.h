/* gpt2_bpe_train.h — learns a byte-level BPE vocabulary in GPT-2's format.
 *
 * The trainer is the inverse of gpt2_tokenizer: it reads text and writes the
 * vocab.json + merges.txt that gpt2_tokenizer_load() reads, so a model trained
 * with it is served by the ordinary tokenizer, unchanged.
 *
 * How it learns:
 *   1. Pre-tokenization: the text is cut into pieces by GPT-2's own pattern
 *      (the very code gpt2_tokenizer uses; see gpt2_tokenizer.h). A run of
 *      bytes that is not valid UTF-8 is a piece of its own, learned from as
 *      raw bytes like any other. Equal pieces are counted once, with their
 *      multiplicity.
 *   2. Every piece starts as its bytes. Repeatedly, the adjacent pair of
 *      symbols that occurs most often (summed over pieces, times each piece's
 *      count; never across two pieces) is merged everywhere, left to right
 *      within a piece ("a a a" -> "aa a"), and becomes a new token.
 *      Ties: the pair whose left token's bytes are smallest, then whose right
 *      token's bytes are smallest (bytewise, as memcmp; a prefix sorts first).
 *      A pair whose concatenation is already a token (say "a"+"bc" after
 *      "ab"+"c") would be skipped for good, so that every merge adds exactly
 *      one token, as in GPT-2's own files; training from single bytes has not
 *      been seen to meet one (none in Tiny Shakespeare down to one token per
 *      piece), so this is a guard.
 *   3. It stops when the vocabulary is full, when the best remaining pair
 *      occurs fewer than min_frequency times, or when no pair is left.
 *
 * Ids: 0..255 are the single bytes in GPT-2's order (the order of OpenAI's
 * bytes_to_unicode(): '!'..'~', 0xA1..0xAC, 0xAE..0xFF, then the other 68
 * bytes in increasing order; id 0 is '!', id 188 is byte 0x00), merge i makes
 * id 256 + i, and "<|endoftext|>" takes the last id, 256 + n_merges.
 * Because each merge is new, encoding the training text with the saved files
 * gives exactly the tokens training ended with (stats.n_tokens).
 *
 *     gpt2_bpe_train_params p = gpt2_bpe_train_default_params();
 *     p.vocab_size = 4096;
 *     gpt2_bpe_vocab *v;
 *     gpt2_error err;
 *     if (gpt2_bpe_train(text, len, p, &v, &err) != GPT2_OK) ...   // err.msg says why
 *     const gpt2_bpe_train_stats *st = gpt2_bpe_vocab_stats(v);
 *     if (st->stop != GPT2_BPE_STOP_VOCAB_SIZE) ...   // came out smaller than asked
 *     if (gpt2_bpe_vocab_save(v, "models/mine", &err) != GPT2_OK) ...
 *     gpt2_bpe_vocab_free(v);
 *
 * Speed: pair counts are updated incrementally (only the places where the
 * merged pair occurs are touched) and the best pair comes from a max-heap with
 * lazy invalidation. 4096 tokens from 1 MB of Tiny Shakespeare take about
 * 0.05 s; 1 MB with no spaces at all (one piece) or 2 MB of random bytes
 * about 0.4 s.
 */
#ifndef GPT2_BPE_TRAIN_H
#define GPT2_BPE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GPT2_BPE_MIN_VOCAB = 257,     /* 256 byte tokens + "<|endoftext|>": no merges */
    GPT2_BPE_MAX_VOCAB = 1 << 24  /* the tokenizer's own limit */
};

typedef struct {
    int vocab_size;        /* total ids: 256 bytes + merges + "<|endoftext|>";
                              [GPT2_BPE_MIN_VOCAB, GPT2_BPE_MAX_VOCAB] */
    int64_t min_frequency; /* >= 1: stop once the best pair occurs fewer times */
    /* Optional: called after every merge with the merges learned so far and
     * the number asked for (vocab_size - 257); non-zero stops training with
     * GPT2_CANCELLED and no vocabulary. */
    gpt2_progress_fn progress; /* (user_data, n_merges done, n_wanted) */
    void *user_data;
} gpt2_bpe_train_params;

/* vocab_size 4096, min_frequency 2, no progress callback. */
gpt2_bpe_train_params gpt2_bpe_train_default_params(void);

typedef enum {
    GPT2_BPE_STOP_VOCAB_SIZE = 0, /* reached vocab_size */
    GPT2_BPE_STOP_MIN_FREQUENCY,  /* the best pair left occurs < min_frequency times */
    GPT2_BPE_STOP_NO_PAIRS        /* every piece is a single token already */
} gpt2_bpe_stop;

typedef struct {
    int n_merges;           /* merges learned */
    int n_vocab;            /* 256 + n_merges + 1 */
    gpt2_bpe_stop stop;     /* why training ended */
    int64_t stop_count;     /* MIN_FREQUENCY: how often the best pair left occurs */
    size_t n_bytes;         /* bytes of training text */
    size_t n_pieces;        /* pre-tokenized pieces in it */
    size_t n_unique_pieces; /* distinct ones */
    int64_t n_tokens;       /* tokens the training text encodes to with this vocabulary */
} gpt2_bpe_train_stats;

typedef struct gpt2_bpe_vocab gpt2_bpe_vocab;

/* Learns from len bytes of text (any bytes; NUL is ordinary; the text is not
 * kept). On success *out owns the result. Failures: GPT2_ERR_INVALID_ARG for
 * a vocab_size or min_frequency out of range, an empty text or a text with
 * 2^31 or more bytes of distinct pieces; GPT2_ERR_TOKENIZER if the
 * pre-tokenizer fails; GPT2_ERR_NOMEM; GPT2_CANCELLED from the callback. */
gpt2_status gpt2_bpe_train(const char *text, size_t len, gpt2_bpe_train_params params,
                           gpt2_bpe_vocab **out, gpt2_error *err);

void gpt2_bpe_vocab_free(gpt2_bpe_vocab *v);

/* The summary of the run that made v (never NULL for a non-NULL v). */
const gpt2_bpe_train_stats *gpt2_bpe_vocab_stats(const gpt2_bpe_vocab *v);

/* Number of merges (stats.n_merges) and of ids (stats.n_vocab); 0 for NULL. */
int gpt2_bpe_vocab_n_merges(const gpt2_bpe_vocab *v);
int gpt2_bpe_vocab_n_vocab(const gpt2_bpe_vocab *v);

/* The raw bytes of token id (not NUL-terminated; the last id is the text
 * "<|endoftext|>"), or NULL with *len = 0 outside [0, n_vocab). */
const char *gpt2_bpe_vocab_token(const gpt2_bpe_vocab *v, int32_t id, size_t *len);

typedef struct {
    const char *left, *right;  /* the two parts' raw bytes; live as long as v */
    size_t left_len, right_len;
    int32_t left_id, right_id; /* their ids */
    int32_t id;                /* the merged token's id: 256 + i */
    int64_t count;             /* how often the pair occurred when it was merged */
} gpt2_bpe_merge;

/* Merge i (0 = the first learned, rank 0 in merges.txt). Returns 0, or -1
 * with *m untouched when i is outside [0, n_merges). */
int gpt2_bpe_vocab_merge(const gpt2_bpe_vocab *v, int i, gpt2_bpe_merge *m);

/* Writes dir/vocab.json ({token: id} in id order, tokens spelled in GPT-2's
 * bytes_to_unicode alphabet, UTF-8) and dir/merges.txt ("#version: 0.2", then
 * "left right" per merge in order), creating dir and missing parents. Each
 * file is written to a temporary name in dir and renamed over the old one,
 * so a reader sees the old file or the whole new one. GPT2_ERR_IO with the
 * path and the system's reason when dir cannot be made or written. */
gpt2_status gpt2_bpe_vocab_save(const gpt2_bpe_vocab *v, const char *dir, gpt2_error *err);

#ifdef __cplusplus
}
#endif
#endif
