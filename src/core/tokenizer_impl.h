/* tokenizer_impl.h — the tokenizer's struct (library-private): shared by tokenizer.c, which
 * builds and runs it, and tokenizer_save.c, which writes it back as files. Nothing else reads
 * it; the rest of the library goes through gpt2_tokenizer.h and tokenizer_internal.h. */
#ifndef GPT2_CORE_TOKENIZER_IMPL_H
#define GPT2_CORE_TOKENIZER_IMPL_H

#include <stdint.h>

#include "pretokenize.h"

typedef struct {
    uint64_t key;   /* (left << 32) | right, or PAIR_EMPTY */
    int32_t rank;   /* line order in merges.txt: lower merges first */
    int32_t merged; /* id of left's bytes followed by right's */
} pair_slot;

#define PAIR_EMPTY UINT64_MAX

struct gpt2_tokenizer {
    int n_vocab;
    int32_t eot;              /* id of "<|endoftext|>", or -1 */
    int32_t bos;              /* the id put before a text (GPT2_ENCODE_BOS), or -1 */
    int32_t byte_id[256];     /* id of each single-byte token */
    char *blob;               /* all tokens' raw bytes, back to back */
    uint32_t *tok_off;        /* (n_vocab) offset of each token in blob */
    int32_t *tok_len;         /* (n_vocab) byte length, -1 for an id the vocab leaves out */
    int32_t *ids;             /* bytes -> id table, open addressing, -1 = empty */
    uint32_t ids_mask;
    pair_slot *pairs;         /* (left, right) -> (rank, merged), open addressing */
    uint32_t pairs_mask;
    int32_t n_merges;         /* ranks given: 0 .. n_merges - 1 */
    int chars;                /* 1: character-level (no merges, not every byte a token) */
    int ignore_merges;        /* 1: a piece that is a token whole is that token (tok_parts) */
    int nfc;                  /* 1: text is put in Unicode's NFC before it is split (tok_parts) */
    int pair_at_a_time;       /* 1: BPE merges one pair at a time, as HF (tok_parts); 0: a rank a round */
    unsigned char *in_model;  /* (n_vocab) 1: a model token (BPE may make it); NULL: every id is */
    pcre2_code *digits_re;    /* \p{N}, when each digit is a piece of its own (tok_parts); else NULL */
    pcre2_code *re;
    char *pattern;            /* the split pattern as given (tok_parts.pattern); NULL: GPT-2's */
    /* Tokens matched whole in the text before it is split (tokenizer.json's added tokens;
     * else "<|endoftext|>"), grouped by whether they are matched on normalized text, then by
     * first byte, longest first; flags TOK_ADDED_* (tokenizer_internal.h). Those of group
     * g (1: normalized) starting with byte b are added[added_at_byte[g][b], ...[g][b + 1]). */
    int32_t *added;
    unsigned char *added_flags;
    int n_added;
    uint32_t added_at_byte[2][257];
    /* SentencePiece-style BPE (tok_parts.spm): blob holds each id's piece (U+2581 for a space,
     * "<0xNN>" for a byte), which the ids table and the merges are keyed by; byte_id[] holds the
     * byte tokens, the fallback of a character that is no model token; dec, dec_off and dec_len
     * what each id decodes to (gpt2_tokenizer_token_bytes): its piece with each U+2581 a space,
     * a byte token's byte. NULL dec: a token's bytes are its piece. */
    int spm, spm_prepend, spm_replace, spm_metaspace, spm_split; /* tok_parts' */
    char *dec;
    uint32_t *dec_off;        /* (n_vocab) */
    int32_t *dec_len;         /* (n_vocab) */
};

#endif
