/* arch.h — decoder families beyond GPT-2, read from a Hugging Face config.json and
 * written as one (library-private; the description itself is gpt2_arch in gpt2_model.h). */
#ifndef GPT2_CORE_ARCH_H
#define GPT2_CORE_ARCH_H

#include "gpt2_model.h"
#include "json.h"

enum { ARCH_NEOX = 100, ARCH_GEMMA = 200 };

/* The family a model_type names ("llama", "mistral", "qwen2", "qwen3";
 * ARCH_NEOX for "gpt_neox"; ARCH_GEMMA + i for "gemma", "gemma2",
 * "gemma3_text", and for Gemma's other model_types, "gemma3" (multimodal) and
 * "gemma3n", which arch_from_hf_config refuses with a line of their own), or -1. */
int arch_hf_family(const char *model_type);

/* Fills c (shapes, eps, arch) from a config.json of such a family: n_ff gets
 * intermediate_size, gelu_erf the GELU's form (GPT-NeoX), tied
 * tie_word_embeddings (-1: not said). Options the engine does not run
 * (another rope scaling, partial rotation in Llama's kin, experts, another
 * activation) fail naming the key and its value. */
gpt2_status arch_from_hf_config(const json_src *js, const cJSON *root, const char *model_type, gpt2_config *c,
                                int *n_ff, int *gelu_erf, int *tied);

/* Llama 3's rope scaling (a->rope_factor > 0 and its kin) as a divisor of each of the
 * rope_dim / 2 frequencies, as transformers' _compute_llama3_parameters and llama.cpp's
 * rope_freqs.weight have it: wavelengths under orig / high kept, over orig / low divided
 * by factor, between interpolated smoothly. */
void arch_llama3_rope_div(const gpt2_arch *a, float *div);

/* The other way: rope scaling parameters (rope_factor, rope_low_freq, rope_high_freq,
 * rope_orig_ctx, set in *a) that give the divisors div (a GGUF's rope_freqs.weight),
 * from a's theta and rope_dim. 0: div is all ones (no scaling; *a untouched); 2: found,
 * arch_llama3_rope_div gives div bit for bit; 1: found within a millionth of each
 * divisor (as close as a config.json can say); -1: div is not Llama 3's shape. */
int arch_llama3_from_div(gpt2_arch *a, const float *div);

/* What config.json says of a model of these families that gptscope writes (convert). */
typedef struct {
    gpt2_config cfg;           /* the description, rope scaling as config.json says it */
    int gelu_erf;              /* GPT-NeoX's GELU: 1 exact ("gelu"), 0 tanh ("gelu_new") */
    int tied;                  /* the head is the embedding (GPT-NeoX writes embed_out anyway) */
    int attention_bias;        /* Llama's and Qwen3's: every attention projection has a bias */
    int mlp_bias;              /* Llama's: every MLP projection has one */
    int32_t bos;               /* bos_token_id, or -1 */
    const int32_t *eos;        /* eos_token_id: one id, or a list (n_eos > 1); none when 0 */
    int n_eos;
    gpt2_dtype dtype;          /* torch_dtype: F32, F16 or BF16 */
    const char *converted_from; /* gptscope_converted_from, or NULL */
} arch_hf_config;

/* Writes path (atomically) as the config.json transformers reads for the family
 * (architectures, model_type and every key arch_from_hf_config reads). A description
 * that family cannot say (a llama with a sliding window) fails with
 * GPT2_ERR_INVALID_ARG naming it. */
gpt2_status arch_write_hf_config(const char *path, const arch_hf_config *h, gpt2_error *err);

#endif
