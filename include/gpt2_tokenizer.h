/* gpt2_tokenizer.h — GPT-2's byte-level BPE tokenizer, exactly; and the other kinds of
 * tokenizer of today's small models, each as its own library encodes (below).
 *
 * Encoding follows OpenAI's encoder.py: text is split by the pre-tokenization
 * pattern
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (PCRE2 does the Unicode matching; \s means Unicode White_Space, as in Python's
 * `regex` module), and each piece's bytes are merged by BPE rank: each round
 * merges every occurrence of the best-ranked adjacent pair, left to right.
 * Bytes that are not valid UTF-8 are not rejected: each maximal run of them
 * becomes a piece of its own, BPE-merged from its raw bytes, so
 * decode(encode(x)) == x for any byte string. (One known difference from
 * Python: PCRE2 10.42 has Unicode 14 tables, so characters first assigned in
 * Unicode 15, such as Kawi or CJK Extension H, are not letters here.)
 *
 * The literal text "<|endoftext|>" is ordinary text unless the caller passes
 * GPT2_ENCODE_SPECIAL, which turns each occurrence into the special token id.
 *
 *     gpt2_tokenizer *tok;
 *     if (gpt2_tokenizer_load("models/gpt2", &tok, &err) != GPT2_OK) ...
 *     int32_t *ids; size_t n;
 *     gpt2_tokenizer_encode(tok, "Hello world", 11, 0, &ids, &n, &err);
 *     ...
 *     free(ids);
 *     gpt2_tokenizer_free(tok);
 *
 * Streaming decode: token bytes can end inside a UTF-8 character; a
 * gpt2_utf8_stream holds such a tail back until the character completes.
 *
 * SentencePiece-style BPE (Llama 2, TinyLlama, Mistral, Gemma: a tokenizer.json whose BPE has
 * byte_fallback, a GGUF whose tokenizer.ggml.model is "llama"). Its vocabulary's strings,
 * the *pieces*, write a space as U+2581 '▁' ("▁the") and byte NN as the token "<0xNN>".
 * Encoding: the text is split on the added tokens; each section between them gets a '▁'
 * before it (the "space prefix": Llama 2's Prepend normalizer and a GGUF's add_space_prefix
 * before every section; Metaspace's prepend_scheme "always" before every section that does
 * not start with a space, "first" only before the one that starts the text) and '▁' for each
 * space; then it is merged from its characters as one word, as Hugging Face's BPE does (by
 * merge rank) or, for a GGUF, as llama.cpp does (by the merged token's score); a character
 * that is no token of the model becomes its UTF-8 bytes' byte tokens, so any bytes encode.
 * A token's *bytes* (gpt2_tokenizer_token_bytes) are what it decodes to: its piece with each
 * '▁' a space, a byte token's one byte, a special token's text ("<s>"). So "<0x61>" and "a"
 * decode alike but are two pieces: lookups by piece (gpt2_tokenizer_piece_id) tell them
 * apart; gpt2_tokenizer_token_id, by bytes, gives the ordinary token before a byte token.
 * The space prefix: a text's ids decode to " " + text; gpt2_tokenizer_decode drops that one
 * leading space (HF's Strip decoder, llama.cpp's detokenize), and so must a display that
 * streams a reply or any text decoded from its first token: where
 * gpt2_tokenizer_space_prefix says so, the first token's leading space is not shown. So
 * decode(encode(text)) == text, but for a text with '▁' in it (it decodes as a space), a
 * Metaspace tokenizer's text that starts with a space (the prefix absorbs it), and a text
 * that an added token splits (each section after one gets its own '▁', as in Hugging Face).
 */
#ifndef GPT2_TOKENIZER_H
#define GPT2_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpt2_tokenizer gpt2_tokenizer;

/* Loads dir/vocab.json + dir/merges.txt, or failing those dir/encoder.json +
 * dir/vocab.bpe (OpenAI's names for the same content). vocab.json maps token
 * strings in GPT-2's bytes_to_unicode alphabet to ids; it must hold all 256
 * single-byte tokens, ids may have gaps. merges.txt holds one "left right"
 * merge per line in rank order; a first line "#version..." and blank lines are
 * skipped; a merge listed twice keeps its later rank (as encoder.py's dict
 * does). Every part and result of a merge must be in the vocabulary. Failures:
 * GPT2_ERR_IO for a missing file, GPT2_ERR_TOKENIZER for bad content, with a
 * message naming the file (and line). The loaded tokenizer is read-only: any
 * number of threads may encode with it at once. */
gpt2_status gpt2_tokenizer_load(const char *dir, gpt2_tokenizer **out, gpt2_error *err);

/* Loads a Hugging Face tokenizer.json of the byte-level BPE kind (Llama 3,
 * GPT-2, GPT-NeoX): its model's vocabulary and merges, its pre-tokenizer's
 * split pattern (a Split regex, or GPT-2's), ignore_merges, and its added
 * tokens, each matched whole in the text before it is split (the special
 * ones only with GPT2_ENCODE_SPECIAL); or of the SentencePiece-style BPE
 * kind (Llama 2, Mistral: byte_fallback, a normalizer of Prepend("▁") and
 * Replace(" ", "▁"), or a Metaspace pre-tokenizer). A file asking for what
 * gptscope does not run yet (another normalizer or pre-tokenizer, a BPE
 * with unknown characters as <unk>, added tokens that strip spaces) is
 * refused with GPT2_ERR_TOKENIZER naming it.
 * gpt2_tokenizer_load reads dir/tokenizer.json when dir has no vocab.json
 * or encoder.json. */
gpt2_status gpt2_tokenizer_load_json(const char *path, gpt2_tokenizer **out, gpt2_error *err);

/* Loads from explicit paths. */
gpt2_status gpt2_tokenizer_load_files(const char *vocab_json_path, const char *merges_path,
                                      gpt2_tokenizer **out, gpt2_error *err);

/* Builds a tokenizer from strings in memory (a GGUF file's tokenizer.ggml.tokens
 * and .merges): token i (token_lens[i] bytes, in GPT-2's byte alphabet as in
 * vocab.json) has id i; merges[i] is merges.txt's line i + 1 ("left right"),
 * in rank order. eot: the end-of-text id, or -1 to take "<|endoftext|>"'s.
 * The same checks as the files (all 256 byte tokens, no duplicates, every
 * merge's parts and result in the vocabulary), with messages that name
 * vocab_source or merges_source. */
gpt2_status gpt2_tokenizer_new(const char *vocab_source, const char *merges_source, const char *const *tokens,
                               const size_t *token_lens, int n_tokens, const char *const *merges,
                               const size_t *merge_lens, int n_merges, int32_t eot, gpt2_tokenizer **out,
                               gpt2_error *err);

void gpt2_tokenizer_free(gpt2_tokenizer *tok);

/* Writes tok as Hugging Face's files into the directory dir (which must exist), each
 * replaced atomically: tokenizer.json — its kind (byte-level BPE with its pre-tokenizer:
 * GPT-2's pattern, the model's Split regex, or SmolLM's digits; NFC where it normalizes;
 * or SentencePiece-style BPE with byte_fallback and its space-prefix rule), its vocabulary
 * and merges in rank order, its added tokens, and a TemplateProcessing putting its BOS
 * before a text where it adds one — and tokenizer_config.json (add_bos_token, bos_token,
 * eos_token). Loading it back (gpt2_tokenizer_load_json, Hugging Face's tokenizers,
 * transformers.js) encodes as tok does; for a GGUF's SentencePiece vocabulary, whose merges
 * come from scores, pieces of equal score merge in the order of their ids where llama.cpp
 * merges the leftmost first. GPT2_ERR_TOKENIZER for a character-level tokenizer, or a
 * token whose text is not UTF-8. */
gpt2_status gpt2_tokenizer_save_hf(const gpt2_tokenizer *tok, const char *dir, gpt2_error *err);

/* "byte-level BPE", "SentencePiece BPE" or "characters" (nanoGPT's). */
const char *gpt2_tokenizer_kind(const gpt2_tokenizer *tok);

/* 1 when the tokenizer puts a space ('▁') before a text (SentencePiece's
 * space prefix, above): a text's ids then decode to " " + text, and the
 * first token of a decoded text is shown without its leading space. */
int gpt2_tokenizer_space_prefix(const gpt2_tokenizer *tok);

/* "NFC" when the tokenizer puts text in Unicode's NFC before splitting it
 * (a tokenizer.json's normalizer): its ids then decode to the normalized
 * text. NULL for none. */
const char *gpt2_tokenizer_normalizer(const gpt2_tokenizer *tok);

/* Number of ids (1 + the largest id in the vocabulary). */
int gpt2_tokenizer_n_vocab(const gpt2_tokenizer *tok);

/* Id of "<|endoftext|>", or -1 if the vocabulary has none. */
int32_t gpt2_tokenizer_eot(const gpt2_tokenizer *tok);

/* The id the model's tokenizer puts before a text (Llama 3's <|begin_of_text|>:
 * tokenizer.json's post-processor, a GGUF's tokenizer.ggml.add_bos_token), or
 * -1 when it adds none (GPT-2, Qwen). */
int32_t gpt2_tokenizer_bos(const gpt2_tokenizer *tok);

enum {
    GPT2_ENCODE_SPECIAL = 1 << 0, /* "<|endoftext|>" in the text becomes the special id */
    GPT2_ENCODE_BOS = 1 << 1,     /* the ids start with gpt2_tokenizer_bos's, when there is one:
                                     a prompt as the model's own tokenizer encodes it */
    GPT2_ENCODE_CONTINUE = 1 << 2 /* the text does not start the input: it follows a special
                                     token the caller puts before it (a chat template's text
                                     after <s>), so Metaspace's prepend_scheme "first" adds no
                                     '▁' (the others add theirs after a special token too) */
};

/* Encodes len bytes of text (any bytes; NUL is ordinary). On success *ids is a
 * malloc'd array of *n_ids ids (the caller frees it; *ids may be NULL when
 * *n_ids is 0). With GPT2_ENCODE_SPECIAL, the text between two "<|endoftext|>"
 * is encoded on its own; the flag does nothing if the vocabulary has no such
 * token. */
gpt2_status gpt2_tokenizer_encode(const gpt2_tokenizer *tok, const char *text, size_t len,
                                  int flags, int32_t **ids, size_t *n_ids, gpt2_error *err);

/* As gpt2_tokenizer_encode, with BPE-dropout (Provilkov et al. 2020,
 * arXiv:1910.13267), the law of subword-nmt's: at each merge step every pair
 * present is kept with probability 1 - p, the kept occurrences of the
 * lowest-ranked kept pair merge, and a step that keeps none ends the piece.
 * The ids decode to the same text, but as one of its many segmentations, drawn
 * from seed (the same seed, the same ids): a regulariser for training. p = 0
 * gives gpt2_tokenizer_encode's ids; p = 1 one token per byte. A
 * character-level vocabulary has no merges and ignores p. */
gpt2_status gpt2_tokenizer_encode_dropout(const gpt2_tokenizer *tok, const char *text, size_t len, int flags,
                                          double p, uint64_t seed, int32_t **ids, size_t *n_ids, gpt2_error *err);

/* The raw bytes of one token (not NUL-terminated; never empty), what it
 * decodes to (SentencePiece: its piece with '▁' as a space, a byte token's
 * byte), or NULL with *len = 0 for an id outside [0, n_vocab) or an id the
 * vocabulary does not define. */
const char *gpt2_tokenizer_token_bytes(const gpt2_tokenizer *tok, int32_t id, size_t *len);

/* Id of a token given its raw bytes, or -1 if there is none. SentencePiece:
 * the token that decodes to them, an ordinary one before a byte token ("a"
 * rather than "<0x61>"), so that a byte token's bytes give another id. */
int32_t gpt2_tokenizer_token_id(const gpt2_tokenizer *tok, const char *bytes, size_t len);

/* A token's string as the vocabulary writes it (SentencePiece's piece:
 * "▁the", "<0x0A>", "<s>"; for byte-level BPE its raw bytes, as
 * gpt2_tokenizer_token_bytes), or NULL for an id it does not define; and
 * the id of such a string, or -1. */
const char *gpt2_tokenizer_token_piece(const gpt2_tokenizer *tok, int32_t id, size_t *len);
int32_t gpt2_tokenizer_piece_id(const gpt2_tokenizer *tok, const char *piece, size_t len);

/* The text of n_ids ids, as the model's tokenizer decodes them: their bytes
 * back to back, less the one leading space of a tokenizer with a space
 * prefix (gpt2_tokenizer_space_prefix). *text is malloc'd, NUL-terminated
 * (not counted in *len); the caller frees it. GPT2_ERR_INVALID_ARG for an id
 * the vocabulary does not define. */
gpt2_status gpt2_tokenizer_decode(const gpt2_tokenizer *tok, const int32_t *ids, size_t n_ids, char **text,
                                  size_t *len, gpt2_error *err);

/* Holds back an incomplete UTF-8 tail between pushes. Zero-initialise it. */
typedef struct {
    unsigned char pending[4];
    int n_pending;
} gpt2_utf8_stream;

/* Appends bytes to the stream and writes to out every byte that is ready: all
 * complete, valid UTF-8 characters (strict: no overlong forms, surrogates or
 * code points past U+10FFFF). A byte that cannot start a valid character is
 * written as U+FFFD (EF BF BD); so is each byte of a held sequence that a
 * later byte cannot continue ("\xE2\x82A" gives two U+FFFD, then "A"). The
 * output does not depend on how the input is cut into pushes. out must have
 * room for 3 * (n + 4) bytes. Returns the number of bytes written. */
size_t gpt2_utf8_stream_push(gpt2_utf8_stream *s, const char *bytes, size_t n, char *out);

/* Writes whatever is still pending (as U+FFFD per held byte) and resets the
 * stream. out must have room for 12 bytes. Returns bytes written. */
size_t gpt2_utf8_stream_flush(gpt2_utf8_stream *s, char *out);

/* A token's bytes as visible text, for labels and readouts: a space reads
 * `·`, a newline `↵`, a tab `→`, every other control character (C0, DEL, C1)
 * and every byte that is not part of valid UTF-8 `\xNN`; other text as it is
 * (so repeated spaces and a lone byte stay distinguishable from letters).
 * Writes at most cap bytes with the NUL, stopping before a piece that does
 * not fit; returns the bytes written (without the NUL). */
size_t gpt2_token_escape(const char *s, size_t n, char *out, size_t cap);

/* The byte offset where a text's held-out part starts: floor(len * fraction),
 * moved back to the start of a UTF-8 character (0 for fraction <= 0, len for
 * fraction >= 1). `train` (--val-fraction) and `eval --heldout` both cut
 * here, so they agree on which text a model never saw. */
size_t gpt2_text_split(const char *text, size_t len, double fraction);

#ifdef __cplusplus
}
#endif
#endif
