/* gpt2_model.h — an immutable GPT-2 model: config, weights, tokenizer.
 *
 * Model sources: gpt2_model_load takes a directory or a file and tells the
 * format from the file's bytes, not its name:
 *     Hugging Face     a directory with config.json + model.safetensors (below),
 *                      or its shards + model.safetensors.index.json (the index
 *                      names each tensor's shard; model.safetensors wins when
 *                      both are there), or + pytorch_model.bin (PyTorch zip,
 *                      same names and layout); a .safetensors file or the index
 *                      names its directory
 *     nanoGPT          ckpt.pt (or its directory): model_args give the config,
 *                      nn.Linear weights (out, in), exact GELU, bias=False means
 *                      no biases, the vocabulary padded (50304): only the
 *                      tokenizer's ids are computed and sampled; tokenizer:
 *                      meta.pkl beside it or at ../data/DATASET/meta.pkl
 *                      (character-level), else vocab.json + merges.txt beside it,
 *                      else GPT-2's (params.gpt2_tokenizer_dir), as nanoGPT does
 *     llm.c            gpt2_124M.bin / gpt2_124M_bf16.bin (versions 3 and 5),
 *                      with gpt2_tokenizer.bin (or vocab.json + merges.txt) beside,
 *                      else GPT-2's (params.gpt2_tokenizer_dir)
 *     GGUF             a .gguf file of architecture gpt2 (versions 2 and 3): config
 *                      from its gpt2.* metadata, tokenizer from tokenizer.ggml.*;
 *                      F32, F16, BF16 and the block formats (Q8_0, Q4_0, Q4_1,
 *                      Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), whose matrices stay in their
 *                      format and run as stored
 * Pickles are read by a restricted reader that never runs code, and every
 * offset, size and shape of every format is checked before use.
 *
 * A Hugging Face model directory:
 *     config.json        n_layer, n_head, n_embd, n_positions (or n_ctx), vocab_size,
 *                        layer_norm_epsilon
 *     model.safetensors  F32, F16 or BF16 tensors named wte.weight, wpe.weight,
 *                        h.N.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj}.*,
 *                        ln_f.*, each optionally prefixed "transformer."; an untied
 *                        lm_head.weight is used when present; buffers such as
 *                        h.N.attn.bias are ignored
 *     vocab.json + merges.txt (or encoder.json + vocab.bpe); without them, a
 *                        vocab_size of 50257 means GPT-2's (params.gpt2_tokenizer_dir)
 *
 * The file is mapped while it loads: every tensor is copied once into the
 * model's own memory (huge pages where the kernel gives them) and the file is
 * unmapped before the call returns, so it may then change or go away. Weight
 * matrices keep their stored dtype (F32, F16, BF16, or GGUF's block formats)
 * and are widened to float on the fly by the kernels; the small vectors
 * (biases, layer norms, position embeddings) are converted to float. Every
 * header field, offset and shape is checked before anything is read.
 *
 *     gpt2_model *m;
 *     gpt2_error err;
 *     if (gpt2_model_load("models/shakespeare", &m, &err) != GPT2_OK) ...
 *     const gpt2_config *c = gpt2_model_config(m);   // c->n_layer, ...
 *     ...
 *     gpt2_model_free(m);
 *
 * A model is read-only after load and may be shared by any number of contexts.
 */
#ifndef GPT2_MODEL_H
#define GPT2_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_status.h"
#include "gpt2_tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a decoder differs from GPT-2: one forward pass runs every
 * description. All zero is GPT-2 (LayerNorm, learned positions, fused
 * q/k/v with biases, GELU MLP, sequential residual).
 *     Llama, SmolLM, TinyLlama  RMSNorm, rotary, grouped-query attention, SwiGLU
 *     Mistral                   the same, with a sliding window
 *     Qwen2 / Qwen2.5           the same, with q/k/v biases (present in the file)
 *     Qwen3                     the same, with q/k RMSNorm per head, head_dim set
 *     GPT-NeoX, Pythia          LayerNorm, partial rotary, parallel residual, GELU
 *     Gemma                     RMSNorm (1 + w), GeGLU, scaled embeddings, wide heads
 *     Gemma 2                   + norms around attention and MLP outputs, soft-capped
 *                               scores and logits, a window on every other layer
 *     Gemma 3                   + q/k norms, a window on 5 layers of 6 with their own
 *                               rotary base, no soft-capping */
typedef struct {
    char family[16];       /* "gpt2", "llama", "qwen2", "qwen3", "mistral", "gpt_neox", "gemma", "gemma2",
                              "gemma3_text" (a GGUF's "gemma3"): for display */
    int rms_norm;          /* 1: RMSNorm x / sqrt(mean(x^2) + eps) * w, no bias */
    int n_kv_head;         /* key/value heads; 0: n_head (no grouping) */
    int head_dim;          /* 0: n_embd / n_head */
    int n_ff;              /* the MLP's width; 0: 4 n_embd */
    int rope_dim;          /* rotary dimensions of each head, rotate-half pairs (i, i + d/2);
                              0: learned positions (wpe) */
    float rope_theta;      /* rotary base (10000 for Llama 2, 500000 for Llama 3) */
    /* Llama 3's rope scaling (factor 0: none): frequencies with a wavelength past
     * orig_ctx / low_freq are divided by factor, those under orig_ctx / high_freq
     * kept, those between interpolated */
    float rope_factor, rope_low_freq, rope_high_freq;
    int rope_orig_ctx;
    int swiglu;            /* 1: down(silu(gate(x)) * up(x)) */
    int qk_norm;           /* 1: RMSNorm over each head's q and k before the rotation (Qwen3) */
    int sliding_window;    /* > 0: a query of a windowed layer sees only its last sliding_window keys */
    int window_period;     /* which layers are windowed: 0 every one (Mistral); P > 1 all but every
                              P-th, l % P == P - 1 (Gemma 2: 2, Gemma 3: 6); gpt2_config_windowed */
    float rope_theta_local;/* > 0: the windowed layers' rotary base (Gemma 3's rope_local_base_freq),
                              without rope scaling; 0: every layer rotates by rope_theta */
    float rope_linear;     /* > 0: linear rope scaling, positions / rope_linear, on the layers that
                              rotate by rope_theta (Gemma 3 4B+'s global layers) */
    int parallel_residual; /* 1: x + attn(ln_1(x)) + mlp(ln_2(x)) (GPT-NeoX) */
    /* Gemma */
    int geglu;             /* with swiglu: gelu(gate(x)) * up(x), GELU's tanh form */
    int norm_plus_one;     /* 1: every RMSNorm weight is stored as w - 1 and applied as (1 + w), computed
                              at load in float (Gemma's Hugging Face files; its GGUF files hold 1 + w) */
    int post_norms;        /* 1: the attention's and the MLP's outputs are RMSNormed before they join
                              the residual: x + norm(attn(ln_1(x))), then x + norm(mlp(ln_2(x))) (Gemma 2, 3) */
    float embed_scale;     /* > 0: token embeddings multiplied by this (Gemma: sqrt(n_embd), rounded as
                              the model's own dtype rounds it) */
    float attn_scale;      /* > 0: attention scores' scale (Gemma 2/3: query_pre_attn_scalar^-1/2);
                              0: 1 / sqrt(head_dim) */
    float attn_softcap;    /* > 0: scores s -> cap tanh(s / cap) before the softmax (Gemma 2) */
    float final_softcap;   /* > 0: logits z -> cap tanh(z / cap) (Gemma 2) */
} gpt2_arch;

typedef struct {
    int n_layer;
    int n_head;
    int n_embd;    /* C; head size is n_embd / n_head unless arch.head_dim says */
    int n_ctx;     /* n_positions: the context window (max_position_embeddings) */
    int n_vocab;   /* rows of wte */
    float ln_eps;  /* layer_norm_epsilon (rms_norm_eps), 1e-5 for GPT-2 */
    gpt2_arch arch;/* all zero: GPT-2 */
} gpt2_config;

/* The description's derived sizes, its zeros resolved. */
static inline int gpt2_config_head_dim(const gpt2_config *c) {
    return c->arch.head_dim ? c->arch.head_dim : c->n_embd / c->n_head;
}
static inline int gpt2_config_kv_heads(const gpt2_config *c) {
    return c->arch.n_kv_head ? c->arch.n_kv_head : c->n_head;
}
static inline int gpt2_config_n_ff(const gpt2_config *c) { return c->arch.n_ff ? c->arch.n_ff : 4 * c->n_embd; }
/* Whether layer l attends through the sliding window (and rotates by rope_theta_local). */
static inline int gpt2_config_windowed(const gpt2_config *c, int l) {
    const int P = c->arch.window_period;
    return c->arch.sliding_window > 0 && (P < 2 || l % P != P - 1);
}
/* "gpt2" when the description leaves the family empty */
static inline const char *gpt2_config_family(const gpt2_config *c) {
    return c->arch.family[0] ? c->arch.family : "gpt2";
}

/* Q8: signed 8-bit weights with one float scale per output (per column of a
 * block's Conv1D weight, per row of wte), made at load by gpt2_model_quantize;
 * never a file's dtype.
 * Q8_0 ... Q6_K: GGUF's block formats, run as stored (a GGUF file's, or made by
 * gpt2_model_quantize: Q4_0, Q4_K, Q8_0); a block runs along a matrix's
 * inputs, so these matrices are stored by output (N rows of K). */
typedef enum {
    GPT2_DTYPE_F32 = 0, GPT2_DTYPE_F16, GPT2_DTYPE_BF16, GPT2_DTYPE_Q8,
    GPT2_DTYPE_Q8_0, GPT2_DTYPE_Q4_0, GPT2_DTYPE_Q4_1, GPT2_DTYPE_Q5_0, GPT2_DTYPE_Q5_1,
    GPT2_DTYPE_Q4_K, GPT2_DTYPE_Q5_K, GPT2_DTYPE_Q6_K,
    GPT2_N_DTYPES /* how many there are */
} gpt2_dtype;

typedef struct gpt2_model gpt2_model;

/* How a model is loaded; gpt2_model_default_params() for the defaults. */
typedef struct {
    int n_threads;              /* threads copying the weights; 0 = one per online CPU */
    /* A directory holding GPT-2's tokenizer (vocab.json + merges.txt, or
     * encoder.json + vocab.bpe), for a file that implies GPT-2's BPE but
     * carries none: a nanoGPT ckpt.pt without meta.pkl, an llm.c model
     * without gpt2_tokenizer.bin, a Hugging Face directory of 50257 tokens
     * without tokenizer files. NULL (the default): such a file is refused,
     * with a message saying what it lacks. The gptscope app passes the copy
     * it installs (share/gptscope/tokenizers/gpt2). */
    const char *gpt2_tokenizer_dir;
    void *user_data;            /* passed to progress and cancel */
    /* Told after each group of weight matrices is copied (n_done of n_total
     * matrices); non-zero cancels. Called on the loading thread. */
    gpt2_progress_fn progress;
    /* Asked before each group; non-zero cancels. A cancelled load returns
     * GPT2_CANCELLED and leaves nothing allocated. */
    gpt2_cancel_fn cancel;
} gpt2_model_params;

gpt2_model_params gpt2_model_default_params(void);

/* Loads a model from path: a directory or a file, its format told by its
 * bytes (see "Model sources" above). */
gpt2_status gpt2_model_load_with(const char *path, gpt2_model_params params, gpt2_model **out,
                                 gpt2_error *err);
/* The same with the default params. */
gpt2_status gpt2_model_load(const char *path, gpt2_model **out, gpt2_error *err);

/* The tokenizer gpt2_model_load_with would give the model at path, without
 * its weights (only params.gpt2_tokenizer_dir counts): for a directory
 * without a weights file, its vocab.json + merges.txt (gpt2_tokenizer_load). */
gpt2_status gpt2_model_load_tokenizer(const char *path, gpt2_model_params params, gpt2_tokenizer **out,
                                      gpt2_error *err);

/* Writes m as a Hugging Face directory of its own architecture, creating it
 * (and its parents) if need be; each file is replaced atomically
 * (gpt2_fileio). Every tensor in dtype (F32, F16 or BF16, rounded to nearest
 * even), written a row at a time from the loaded model.
 *   GPT-2: config.json, model.safetensors (names without a prefix, Conv1D
 *     matrices (in, out), biases a source left out written as zeros, an untied
 *     lm_head.weight), vocab.json + merges.txt in GPT-2's format (a
 *     character-level vocabulary with no merges).
 *   Llama, Mistral, Qwen2, Qwen3, GPT-NeoX: the family's config.json (Llama 3's
 *     rope_scaling recovered from a GGUF's rope_freqs.weight), model.safetensors
 *     under HF's names as nn.Linear (out, in) (q/k/v and gate/up apart, GPT-NeoX's
 *     query_key_value per head, biases where the family's layout has them), and
 *     the tokenizer: a Hugging Face source directory's files (tokenizer.json,
 *     tokenizer_config.json, generation_config.json, ...) copied as they are, else
 *     tokenizer.json + tokenizer_config.json (gpt2_tokenizer_save_hf, with the
 *     chat template) and generation_config.json (the end ids). A model the
 *     family's layout cannot say (biases it lacks, a Llama with a sliding window,
 *     rope frequencies not of Llama 3's shape) fails with GPT2_ERR_INVALID_ARG.
 * Loading the directory gives the same model: the same floats when dtype is the
 * model's own. Not for a Q8 model. */
gpt2_status gpt2_model_save(const gpt2_model *m, const char *dir, gpt2_dtype dtype, gpt2_error *err);
/* The same with each tensor in the type it is held in: a matrix as stored
 * (F32, F16, BF16; a block format's dequantized floats as F32), a vector
 * (norms, biases, positions) in the matrices' type where every value
 * survives it exactly, else F32 (llama.cpp's F16 files keep those F32).
 * The saved model's logits are the loaded model's, bit for bit. */
gpt2_status gpt2_model_save_stored(const gpt2_model *m, const char *dir, gpt2_error *err);

/* Builds a model with random weights (normal, std 0.02 like GPT-2's init) in
 * memory, with no tokenizer: for benchmarks and tests. GPT2_DTYPE_Q8 draws
 * F32 weights and quantizes them (gpt2_model_quantize). */
gpt2_status gpt2_model_new_random(gpt2_config config, gpt2_dtype dtype, uint64_t seed,
                                  gpt2_model **out, gpt2_error *err);

void gpt2_model_free(gpt2_model *m);

/* Converts every weight matrix (wte, an untied lm_head, the blocks' four) to
 * dtype `to`, from F32, F16 or BF16 weights (GPT2_ERR_INVALID_ARG for other
 * targets, or weights already quantized to something else; converting to
 * what the model already is does nothing). Nothing changes on failure
 * (GPT2_ERR_NOMEM). The new weights replace the old in the model's memory
 * (huge pages), whose old weights are released.
 *   GPT2_DTYPE_Q8: symmetric absmax quantization per output: a block's Conv1D
 *     weight W (K, N) gets one scale per column n, s[n] = max_k |W[k, n]| / 127,
 *     q = round(W / s); wte (V, C) one per row, serving both the embedding
 *     lookup and the tied LM head. Each weight's error is at most s / 2. A
 *     token reads about a quarter of F32's bytes and half of F16's.
 *   GPT2_DTYPE_Q8_0, GPT2_DTYPE_Q4_0, GPT2_DTYPE_Q4_K: GGUF's block formats
 *     (see quant.h), by output rows, the blocks along the inputs (which must
 *     be a multiple of 32; Q4_K takes Q4_0 for matrices whose inputs are not
 *     a multiple of 256). Q4_0/Q4_K read 4.5 bits per weight. */
gpt2_status gpt2_model_quantize(gpt2_model *m, gpt2_dtype to, gpt2_error *err);

const gpt2_config *gpt2_model_config(const gpt2_model *m);

/* The model's tokenizer, or NULL for a random model. Owned by the model. */
const gpt2_tokenizer *gpt2_model_tokenizer(const gpt2_model *m);

/* The model's own chat template, Jinja source (tokenizer_config.json's
 * chat_template or chat_template.jinja beside the weights, a GGUF's
 * tokenizer.chat_template), or NULL when it has none. Owned by the model. */
const char *gpt2_model_chat_template(const gpt2_model *m);
/* The texts the template knows as bos_token and eos_token ("" when none). */
const char *gpt2_model_bos_text(const gpt2_model *m);
const char *gpt2_model_eos_text(const gpt2_model *m);

/* Whether id ends a reply: the tokenizer's <|endoftext|>, or one of the
 * model's end-of-sequence ids (config.json's and generation_config.json's
 * eos_token_id, an id or a list; a GGUF's eos, eot and eom token ids). */
int gpt2_model_is_end(const gpt2_model *m, int32_t id);

/* The dtype of the large weight matrices (wte and the blocks' matrices). */
gpt2_dtype gpt2_model_dtype(const gpt2_model *m);

/* How the weight matrices (wte, an untied head, every layer's) are held:
 * bytes[d] of them in dtype d (as in memory: a block format's rows padded to
 * a multiple of 8), for each d < GPT2_N_DTYPES; returns how many
 * dtypes hold any (more than 1 for a llama-quantize mix such as Q4_K_M). */
int gpt2_model_dtype_bytes(const gpt2_model *m, size_t bytes[GPT2_N_DTYPES]);

/* Bytes of weights the model holds in memory: every matrix (wte and an
 * untied LM head both in full) and the float vectors but the position
 * table. */
size_t gpt2_model_weight_bytes(const gpt2_model *m);

/* Bytes of weights one decoded token reads: every block matrix and the LM
 * head in full; of the embedding, one row when the head is untied (a tied
 * head reads the whole matrix, that row included); one position row; the
 * vectors. Block formats count their scales; Q8 its per-output scales. */
size_t gpt2_model_token_bytes(const gpt2_model *m);

/* The path's last component ("gpt2", "shakespeare", "ckpt.pt"), for display. */
const char *gpt2_model_name(const gpt2_model *m);

/* What was loaded and how, one line for -v and the chat: "Hugging Face
 * safetensors (model.safetensors)", "Hugging Face safetensors (3 shards,
 * model.safetensors.index.json)", "nanoGPT checkpoint (ckpt.pt, iter 5000),
 * bias=False, vocab padded 50304 → 50257", "random weights". */
const char *gpt2_model_source(const gpt2_model *m);

const char *gpt2_dtype_name(gpt2_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
