/* tokenizer_internal.h — tokenizers from other files' token lists, and writing
 * vocab.json + merges.txt (library-private; tokenizer.c). */
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

#endif
