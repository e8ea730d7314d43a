/* model_source.h — what every model format hands the binder (library-private).
 *
 * `-m PATH` may name a directory or a file; source_open finds the weights,
 * tells the format from the bytes (never the name) and turns it into one
 * shape, so that model.c binds every format the same way:
 *
 *     the config        gpt2_config, n_inner, the GELU form
 *     named tensors     an st_file over the file's mapping, named as the Hugging
 *                       Face GPT-2 layout names them (gpt2_model.h), with an
 *                       optional "transformer." prefix; data never copied here
 *     how they lie      Conv1D (in, out) as HF stores them, or nn.Linear (out, in)
 *                       as PyTorch and llm.c do (the binder transposes while it
 *                       packs: the one copy every load makes); biases present,
 *                       or absent and meaning zero (nanoGPT's bias=False); the
 *                       embedding's stored rows, padded past the vocabulary
 *     a tokenizer       owned by the source until the model takes it
 *     a description     one line for -v, the chat and messages
 *
 * Formats (model_source.c dispatches, each reader in its own file):
 *     safetensors       a directory with config.json + model.safetensors + tokenizer,
 *                       or, sharded, + model.safetensors.index.json and the shards it
 *                       names (st_open_index: one st_file over every shard's mapping)
 *     PyTorch zip       nanoGPT's ckpt.pt, HF's pytorch_model.bin (torch_ckpt.c:
 *                       zip.c + pickle.c)
 *     llm.c             gpt2_124M.bin / gpt2_124M_bf16.bin (+ gpt2_tokenizer.bin)
 *     GGUF              magic "GGUF", architecture gpt2 (model_gguf.c: gguf.c),
 *                       block formats (quant.h) bound as they are stored
 */
#ifndef GPT2_CORE_MODEL_SOURCE_H
#define GPT2_CORE_MODEL_SOURCE_H

#include "gpt2_model.h"
#include "safetensors.h"

enum { SOURCE_DESC_MAX = 256, SOURCE_PATH_MAX = 4096, SOURCE_END_IDS = 8 };

typedef struct {
    gpt2_config cfg;          /* n_vocab: the ids the model may produce (the tokenizer's, at most vocab_rows) */
    int n_inner;              /* F, 4C for GPT-2 */
    int gelu_erf;             /* 1: exact erf GELU (nanoGPT, HF "gelu"); 0: tanh (gelu_new) */
    int vocab_rows;           /* rows of wte (and an untied lm_head) stored: >= cfg.n_vocab when padded */
    int linear_out_in;        /* 1: the blocks' four matrices stored (out, in) (nn.Linear) */
    int bias_optional;        /* 1: a missing bias (Linear or LayerNorm) is zero */
    int qkv_by_head;          /* GPT-NeoX's fused query_key_value rows as (H, 3, hd): HF's (a GGUF's
                                 are [q | k | v] already) */
    int tied;                 /* tie_word_embeddings: 1 an lm_head.weight is ignored, 0 one is
                                 required; -1 (not said): tied unless the file holds one */
    const char *cfg_from;     /* where the shapes come from, for messages: "config.json", "model_args" */
    st_file st;               /* the tensors, over the weights file's mapping */
    gpt2_tokenizer *tok;      /* owned; NULL once the model takes it */
    const char *gpt2_tok_dir; /* GPT-2's tokenizer for a file that implies it (gpt2_model_params); may be NULL */
    int tok_fallback;         /* 1: tok is GPT-2's from gpt2_tok_dir (the description says so) */
    /* what chatting needs beyond the tokenizer (owned; NULL / none when the files say nothing) */
    char *chat_template;      /* Jinja: tokenizer_config.json's chat_template, a GGUF's tokenizer.chat_template */
    char *bos_text, *eos_text; /* the template's bos_token and eos_token */
    int32_t end_ids[SOURCE_END_IDS]; /* ids that end a reply: eos_token_id (config, generation_config, GGUF) */
    int n_end;
    char path[SOURCE_PATH_MAX]; /* the weights file (of sharded weights: the index) */
    char desc[SOURCE_DESC_MAX]; /* "nanoGPT checkpoint (ckpt.pt, iter 5000), bias=False, ..." */
} model_source;

/* What a file's first bytes say it is. */
typedef enum {
    SOURCE_FMT_UNKNOWN = 0,
    SOURCE_FMT_SAFETENSORS,
    SOURCE_FMT_ZIP,           /* a PyTorch checkpoint (torch.save since 1.6) */
    SOURCE_FMT_PICKLE,        /* a bare pickle: PyTorch's legacy format, or meta.pkl */
    SOURCE_FMT_LLMC,          /* llm.c model, magic 20240326 */
    SOURCE_FMT_LLMC_TOKENIZER,/* llm.c tokenizer, magic 20240328 */
    SOURCE_FMT_GGUF,
    SOURCE_FMT_JSON           /* a JSON object: a shard index (model.safetensors.index.json) if it has a weight_map */
} source_format;

source_format source_sniff(const unsigned char *p, size_t n);

/* Resolves path (a directory or a file), detects the format and fills src:
 * config, tensors, tokenizer, description; cfg.n_vocab already reconciled with
 * the tokenizer. On failure nothing stays open. */
gpt2_status source_open(const char *path, const char *gpt2_tok_dir, model_source *src, source_format *fmt,
                        gpt2_error *err);
void source_close(model_source *src);

/* Whether a directory holds a weights file source_open would take (a
 * sharded PyTorch checkpoint's index is not one: it is refused). */
int source_has_weights(const char *dir);

/* The directory a file lies in ("." for a bare name, "/" at the root), and its last component. */
void source_dir_of(const char *path, char *out, size_t cap);
const char *source_base_of(const char *path);

/* llm.c's gpt2_tokenizer.bin (llmc.c). */
gpt2_status llmc_tokenizer_load(const char *path, gpt2_tokenizer **out, gpt2_error *err);

/* GPT-2's BPE into src->tok for a file that implies it and carries none,
 * from src->gpt2_tok_dir (checked to be GPT-2's 50257 tokens; the
 * description says where it came from); tok_path gets the vocabulary file's
 * path for source_fit_vocab. Without a directory: GPT2_ERR_IO, "PATH: "
 * then lacks (what the file lacks and where a tokenizer could be put). */
gpt2_status source_gpt2_tokenizer(model_source *src, char *tok_path, size_t cap, const char *lacks, gpt2_error *err);
/* A Hugging Face directory's tokenizer (safetensors or pytorch_model.bin
 * beside it): vocab.json + merges.txt, encoder.json + vocab.bpe, tokenizer.json,
 * or GPT-2's for 50257 tokens (source_gpt2_tokenizer); tok_path as there. */
gpt2_status source_hf_tokenizer(model_source *src, const char *dir, char *tok_path, size_t cap, gpt2_error *err);
/* What a Hugging Face directory says for chatting, into src: tokenizer_config.json's
 * chat_template (a string, or the "default" of a list of {name, template}) or
 * chat_template.jinja, its bos_token and eos_token, and generation_config.json's
 * eos_token_id (an id or a list) as end ids. Files that are absent say nothing;
 * a file that is not JSON fails, naming it. */
gpt2_status source_hf_chat(model_source *src, const char *dir, gpt2_error *err);
/* Adds id to src's end ids (ignored past SOURCE_END_IDS, or when there already). */
void source_add_end(model_source *src, int64_t id);

/* Reads a Hugging Face config.json into src (cfg, n_inner, gelu_erf, vocab_rows). */
gpt2_status source_parse_config(const char *path, model_source *src, gpt2_error *err);

/* What config.json says of a model gptscope writes (convert, train). */
typedef struct {
    gpt2_config cfg;
    int n_inner, gelu_erf, tied;
    int32_t eot;                /* bos/eos_token_id; -1: none */
    gpt2_dtype dtype;           /* model.safetensors' (torch_dtype) */
    float dropout;              /* a trained model's (with its init range); < 0: not written */
    const char *converted_from; /* convert's source description, or NULL */
} source_config;

/* Writes path (replaced atomically) as a Hugging Face GPT-2 config.json. */
gpt2_status source_write_config(const char *path, const source_config *c, gpt2_error *err);

/* Reconciles the vocabulary: the tokenizer's ids must fit the stored rows;
 * cfg.n_vocab becomes the tokenizer's count, so padded rows are never
 * computed or sampled (description amended). tok_path names the tokenizer's
 * file in messages. */
gpt2_status source_fit_vocab(model_source *src, const char *tok_path, gpt2_error *err);

/* The format readers, each filling src from the mapping it is given (src owns
 * map from the call on: closed with the source, unmapped on failure). */
gpt2_status torch_source_open(model_source *src, void *map, size_t size, gpt2_error *err);
gpt2_status llmc_source_open(model_source *src, void *map, size_t size, gpt2_error *err);
gpt2_status gguf_source_open(model_source *src, void *map, size_t size, gpt2_error *err);


#endif
