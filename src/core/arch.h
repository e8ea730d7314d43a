/* arch.h — decoder families beyond GPT-2, read from a Hugging Face config.json
 * (library-private; the description itself is gpt2_arch in gpt2_model.h). */
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

#endif
