/* model_internal.h — the model struct, shared by model.c and context.c (library-private). */
#ifndef GPT2_CORE_MODEL_INTERNAL_H
#define GPT2_CORE_MODEL_INTERNAL_H

#include "gpt2_model.h"
#include "kernels.h"
#include "safetensors.h"

/* One block. Sizes: C = n_embd, F = the MLP's width, Q = n_head x head_dim,
 * KV = n_kv_head x head_dim (Q = KV = C for GPT-2). A matrix that a
 * description does not use has no data (rows 0); a vector, NULL. */
typedef struct {
    float *ln1_g, *ln1_b;       /* (C); ln1_b NULL under RMSNorm */
    gpt2_matrix attn_w;         /* (C, Q + 2 KV): q, k, v side by side (GPT-2's c_attn; the
                                   others' joined at load where they share a dtype) */
    float *attn_b;              /* (Q + 2 KV) or NULL */
    gpt2_matrix q_w, k_w, v_w;  /* (C, Q), (C, KV), (C, KV): separate projections (no data once joined) */
    float *q_b, *k_b, *v_b;     /* (Q), (KV), (KV) or NULL (Qwen2 has them) */
    float *q_norm, *k_norm;     /* (head_dim): per-head RMSNorm weights (Qwen3) */
    gpt2_matrix proj_w;         /* (Q, C) */
    float *proj_b;              /* (C) or NULL */
    float *ln2_g, *ln2_b;       /* (C) */
    float *attn_out_norm;       /* (C) or NULL: RMSNorm of the attention's output before the residual (Gemma 2/3) */
    float *mlp_out_norm;        /* (C) or NULL: the same for the MLP's output */
    gpt2_matrix gate_w;         /* (C, F): SwiGLU's gate; (C, 2F) [gate | up] once joined */
    float *gate_b;              /* (F) or NULL (Llama's mlp_bias) */
    float *gate_up_b;           /* (2F) the joined matrix's bias, or NULL */
    gpt2_matrix fc_w;           /* (C, F): GPT-2's c_fc, SwiGLU's up (no data once joined) */
    float *fc_b;                /* (F) or NULL */
    gpt2_matrix fcproj_w;       /* (F, C) */
    float *fcproj_b;            /* (C) or NULL */
    unsigned char fuse_qkv, fuse_gate_up; /* load only: pack_matrices joins these (model.c) */
} gpt2_layer;

enum { LAYER_MATRICES_MAX = 8 };

/* The matrices a layer holds (data set), in the order the forward pass reads
 * them; returns the count. */
static inline int layer_matrices(gpt2_layer *L, gpt2_matrix **out) {
    gpt2_matrix *all[] = {&L->attn_w, &L->q_w, &L->k_w, &L->v_w, &L->proj_w, &L->gate_w, &L->fc_w, &L->fcproj_w};
    int n = 0;
    for (int i = 0; i < (int)(sizeof all / sizeof *all); i++)
        if (all[i]->data) out[n++] = all[i];
    return n;
}

struct gpt2_model {
    gpt2_config cfg;
    int n_inner;                /* F */
    int gelu_erf;               /* 1: exact GELU ("gelu"); 0: tanh ("gelu_new") */
    gpt2_dtype quantized_to;    /* what gpt2_model_quantize last made (F32: never called) */
    char *name;
    char *source;               /* how it was loaded (gpt2_model_source) */
    char *dir;                  /* a Hugging Face source's directory, whose tokenizer files convert
                                   copies; NULL for other sources */
    gpt2_matrix wte;            /* (V, C) */
    gpt2_matrix lm_head;        /* (V, C): wte unless untied */
    float *wpe;                 /* (n_ctx, C); NULL under rotary positions */
    float *rope_div;            /* (rope_dim / 2): each rotary frequency is divided by this
                                   (Llama 3's scaling, or a GGUF's rope_freqs); NULL: 1 */
    float *lnf_g, *lnf_b;       /* (C) */
    gpt2_layer *layers;         /* (n_layer) */
    float *vectors;             /* arena holding every float vector above */
    unsigned char *arena;       /* every weight matrix (packed where it can be), huge pages */
    size_t arena_bytes, arena_used;
    st_file st;                 /* the mapping, during load only (empty after) */
    gpt2_tokenizer *tok;
    char *chat_template;        /* the model's Jinja template, or NULL (model_source.h) */
    char *bos_text, *eos_text;  /* the template's bos_token and eos_token, or NULL */
    int32_t end_ids[8];         /* ids that end a reply beside <|endoftext|> */
    int n_end;
    size_t weight_bytes;        /* gpt2_model_weight_bytes */
    size_t wte_bytes;           /* wte's part of it */
    size_t vector_bytes;        /* the float vectors' part (the position table excluded) */
};

#endif
