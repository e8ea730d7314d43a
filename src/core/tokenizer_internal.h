/* tokenizer_internal.h — tokenizers from other files' token lists (tokenizer.c), and
 * writing them back: vocab.json + merges.txt, tokenizer.json (tokenizer_save.c)
 * (library-private). */
#ifndef GPT2_CORE_TOKENIZER_INTERNAL_H
#define GPT2_CORE_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_tokenizer.h"

/* A tokenizer from each id's raw bytes (tok[id], len[id]; tok[id] NULL for a gap);
 * path names the file in messages.
 *   chars = 1: character-level (nanoGPT's meta.pkl): every token one UTF-8
 *              character; text is encoded character by character, and a
 *              character outside the vocabulary is refused.
 *   chars = 0: byte-level BPE whose ids are merge ranks (llm.c's
 *              gpt2_tokenizer.bin, tiktoken's order): all 256 single-byte
 *              tokens, and each longer token (eot aside) is the merge of the two
 *              tokens that BPE with the merges of lower id makes of its bytes;
 *              a token that is not is refused.
 * eot: the id of "<|endoftext|>", or -1 to look it up by its text. */
gpt2_status tok_from_tokens(const char *const *tok, const size_t *len, int n, int32_t eot, int chars, const char *path,
                            gpt2_tokenizer **out, gpt2_error *err);

/* A BPE tokenizer from its parts (a tokenizer.json's, tokenizer_json.c; a GGUF's, model_gguf.c):
 * byte-level, or SentencePiece-style (spm), merging one pair at a time (lowest rank, then
 * leftmost), as Hugging Face's BPE does. */
typedef struct {
    const char *path;               /* the file, for messages */
    int n_vocab;                    /* ids 0 .. n_vocab - 1 */
    const char *const *token;       /* (n_vocab) each id's raw bytes (spm: its piece); NULL: no such id */
    const size_t *token_len;        /* (n_vocab) */
    int n_merges;
    const int32_t *merges;          /* (n_merges, 2) each merge's two parts, in rank order */
    const char *pattern;            /* the split pattern (pretok_compile_pattern); NULL: GPT-2's */
    int ignore_merges;              /* 1: a piece that is a token whole is that token (Llama 3) */
    int nfc;                        /* 1: the text put in Unicode's NFC first (Qwen, GPT-NeoX) */
    int split_digits;               /* 1: each digit a piece of its own before the pattern (SmolLM) */
    const unsigned char *in_model;  /* (n_vocab) 1: a model token, which BPE may make; NULL: every id */
    int n_added;
    const int32_t *added;           /* (n_added) ids matched whole in text before splitting */
    const unsigned char *added_flags; /* (n_added) TOK_ADDED_* */
    int32_t eot;                    /* the end-of-text id; -1: "<|endoftext|>"'s, if there is one */
    int32_t bos;                    /* the id put before a text (GPT2_ENCODE_BOS); -1: none */
    /* SentencePiece-style BPE (spm = 1: Llama 2, Mistral, Gemma): token[] holds each id's
     * piece as the vocabulary writes it (U+2581 for a space, "<0xNN>" for byte NN), not its
     * bytes; pattern, ignore_merges, nfc and split_digits are unused. Each section of text
     * between added tokens is normalized (spm_prepend, spm_replace, spm_metaspace) and merged
     * from its characters as one word (with spm_split, one word per U+2581); a character that
     * is no model token becomes its UTF-8 bytes' byte tokens, all 256 of which must be there. */
    int spm;
    int spm_prepend;                /* TOK_SPM_*: where a U+2581 goes before a section */
    int spm_replace;                /* 1: the normalizer makes each ' ' a U+2581 (before the added
                                     * tokens matched on normalized text are split off) */
    int spm_metaspace;              /* 1: a Metaspace pre-tokenizer does it (after them), and adds
                                     * TOK_SPM_ALWAYS's or TOK_SPM_FIRST's U+2581 */
    int spm_split;                  /* 1: Metaspace's split: a word starts at each U+2581 */
    const float *scores;            /* (n_vocab) with no merges: two adjacent model tokens merge when
                                     * their concatenation is a model token, the highest score first,
                                     * ties leftmost (llama.cpp's SentencePiece BPE; a GGUF's scores) */
} tok_parts;

/* Where a SentencePiece-style tokenizer puts a U+2581 before a section of text (HF's
 * Prepend normalizer and Metaspace pre-tokenizer, llama.cpp's add_space_prefix) */
enum {
    TOK_SPM_NONE = 0,
    TOK_SPM_LEGACY,  /* the normalizer's, before every non-empty section: Prepend(U+2581), a GGUF's
                        add_space_prefix */
    TOK_SPM_ALWAYS,  /* Metaspace "always": before every section that does not start with one */
    TOK_SPM_FIRST    /* Metaspace "first": so, only before the one at the start of the text */
};

enum {
    TOK_ADDED_SPECIAL = 1,    /* matched only with GPT2_ENCODE_SPECIAL */
    TOK_ADDED_NORMALIZED = 2  /* matched on the normalized text, after those that are not (HF's order) */
};

/* Every check of the files (all 256 byte tokens, no id or bytes twice, each
 * merge's result in the vocabulary) with messages naming p->path. */
gpt2_status tok_from_parts(const tok_parts *p, gpt2_tokenizer **out, gpt2_error *err);

/* A string in GPT-2's byte alphabet as raw bytes into out (strlen(s) bytes
 * suffice): the byte count, or -1 with *bad the offending code point
 * (UINT32_MAX: invalid UTF-8). */
long tok_alphabet_to_bytes(const char *s, size_t n, char *out, uint32_t *bad);

/* A vocabulary's strings (as stored: GPT-2's byte alphabet) sorted for
 * lookups by string, as merges name their parts. */
typedef struct {
    const char *s;
    size_t len;
    int32_t id;
} tok_named;
void tok_named_sort(tok_named *v, int n);
/* The id of s (len bytes), or -1. */
int32_t tok_named_find(const tok_named *v, int n, const char *s, size_t len);

/* 1 for a character-level tokenizer. */
int tok_is_chars(const gpt2_tokenizer *t);

/* What vocab.json + merges.txt hold: ids' raw bytes (NULL: no such id) and the
 * merges in rank order (the ids of each merge's two parts). */
typedef struct {
    int n_vocab, n_merges;
    const char *(*token)(const void *user, int32_t id, size_t *len);
    void (*merge)(const void *user, int rank, int32_t *left, int32_t *right);
    const void *user;
} tok_file_src;

/* Writes dir/merges.txt and dir/vocab.json in GPT-2's format (atomically,
 * through gpt2_fileio): tokens in the byte alphabet, ids in order. */
gpt2_status tok_save_files(const tok_file_src *src, const char *dir, gpt2_error *err);

/* The same for a loaded tokenizer (a character-level one: its characters and
 * no merges, which loading reads back as character-level). */
gpt2_status tok_save(const gpt2_tokenizer *t, const char *dir, gpt2_error *err);

/* What tokenizer_config.json says beyond the tokenizer: a model's (NULL or "": not said). */
typedef struct {
    const char *chat_template;  /* Jinja */
    const char *bos_text, *eos_text; /* bos_token, eos_token (default: the texts of the
                                        tokenizer's BOS and end-of-text ids) */
    int model_max_length;       /* > 0: the context */
} tok_hf_extra;

/* Writes dir/tokenizer.json and dir/tokenizer_config.json (gpt2_tokenizer_save_hf), the
 * latter with x's fields (x may be NULL). */
gpt2_status tok_save_hf(const gpt2_tokenizer *t, const char *dir, const tok_hf_extra *x, gpt2_error *err);

#endif
