/* model_internal.h — the model struct, shared by model.c and context.c (library-private). */
#ifndef GPT2_CORE_MODEL_INTERNAL_H
#define GPT2_CORE_MODEL_INTERNAL_H

#include "gpt2_model.h"
#include "kernels.h"
#include "safetensors.h"

typedef struct {
    float *ln1_g, *ln1_b;       /* (C) */
    gpt2_matrix attn_w;         /* (C, 3C) */
    float *attn_b;              /* (3C) */
    gpt2_matrix proj_w;         /* (C, C) */
    float *proj_b;              /* (C) */
    float *ln2_g, *ln2_b;       /* (C) */
    gpt2_matrix fc_w;           /* (C, F) with F = n_inner, 4C for GPT-2 */
    float *fc_b;                /* (F) */
    gpt2_matrix fcproj_w;       /* (F, C) */
    float *fcproj_b;            /* (C) */
} gpt2_layer;

struct gpt2_model {
    gpt2_config cfg;
    int n_inner;                /* F */
    int gelu_erf;               /* 1: exact GELU ("gelu"); 0: tanh ("gelu_new") */
    gpt2_dtype quantized_to;    /* what gpt2_model_quantize last made (F32: never called) */
    char *name;
    char *source;               /* how it was loaded (gpt2_model_source) */
    gpt2_matrix wte;            /* (V, C) */
    gpt2_matrix lm_head;        /* (V, C): wte unless untied */
    float *wpe;                 /* (n_ctx, C) */
    float *lnf_g, *lnf_b;       /* (C) */
    gpt2_layer *layers;         /* (n_layer) */
    float *vectors;             /* arena holding every float vector above */
    unsigned char *arena;       /* every weight matrix (packed where it can be), huge pages */
    size_t arena_bytes, arena_used;
    st_file st;                 /* the mapping, during load only (empty after) */
    gpt2_tokenizer *tok;
    size_t weight_bytes;        /* gpt2_model_weight_bytes */
    size_t wte_bytes;           /* wte's part of it */
};

#endif
