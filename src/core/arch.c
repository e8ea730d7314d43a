/* arch.c — the decoder families beyond GPT-2 as descriptions (gpt2_arch):
 * what a Hugging Face config.json says of a Llama, Mistral, Qwen2, Qwen3,
 * GPT-NeoX or Gemma (1, 2, 3) model, checked and turned into the one
 * description the forward pass runs; and the other way, a description written
 * as the config.json of its family (convert). GGUF's
 * metadata says the same under other keys (model_gguf.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#include "arch.h"
#include "error.h"
#include "textio.h"

/* model_type -> what sets the family apart; one row per family the engine runs */
static const struct {
    const char *model_type, *architecture;
    int qk_norm, window; /* window: sliding_window counts without use_sliding_window (Mistral) */
} families[] = {
    {"llama", "LlamaForCausalLM", 0, 0},
    {"mistral", "MistralForCausalLM", 0, 1},
    {"qwen2", "Qwen2ForCausalLM", 0, 0},
    {"qwen3", "Qwen3ForCausalLM", 1, 0},
};

/* Gemma's model_types: each generation, or (refused, with a line of their own) what is
 * not a text-only decoder the engine runs */
static const struct {
    const char *model_type;
    int gen;             /* 1, 2, 3; 0: refused */
    const char *refusal; /* why, for gen 0 */
} gemmas[] = {
    {"gemma", 1, NULL},
    {"gemma2", 2, NULL},
    {"gemma3_text", 3, NULL},
    {"gemma3", 0, "\"gemma3_text\" (Gemma 3's multimodal model, a vision tower beside the text model, is not supported; "
                  "its 1B and 270M text-only models are)"},
    {"gemma3n", 0, "\"gemma3_text\" (Gemma 3n's per-layer embeddings and AltUp are not supported)"},
    {"gemma3n_text", 0, "\"gemma3_text\" (Gemma 3n's per-layer embeddings and AltUp are not supported)"},
};
enum { N_GEMMAS = sizeof gemmas / sizeof *gemmas };

int arch_hf_family(const char *model_type) {
    for (int i = 0; i < (int)(sizeof families / sizeof *families); i++)
        if (strcmp(model_type, families[i].model_type) == 0) return i;
    for (int i = 0; i < N_GEMMAS; i++)
        if (strcmp(model_type, gemmas[i].model_type) == 0) return ARCH_GEMMA + i;
    return strcmp(model_type, "gpt_neox") == 0 ? ARCH_NEOX : -1;
}

/* A rotary kind in object rs (rope_scaling's, or transformers 5's rope_parameters'):
 * "default", Llama 3's, or linear where allowed (Gemma 3); other kinds are refused by
 * name. in: rs's messages' source (its prefix says where rs is). */
static gpt2_status rope_kind(const json_src *in, const cJSON *rs, gpt2_arch *a, int linear) {
    const char *kind = NULL;
    const char *key = json_has(rs, "rope_type") ? "rope_type" : "type";
    if (!json_has(rs, key)) return GPT2_OK; /* rope_parameters without a type: the default */
    gpt2_status st = json_get_str(in, rs, key, &kind);
    if (st) return st;
    if (strcmp(kind, "default") == 0) return GPT2_OK;
    if (linear && strcmp(kind, "linear") == 0) return json_get_float(in, rs, "factor", 1, 0, 1e6, &a->rope_linear);
    if (strcmp(kind, "llama3") != 0) {
        char shown[TEXT_SHOW_BUF], found[TEXT_SHOW_BUF + 32];
        snprintf(found, sizeof found, "\"%s\" (not supported)", text_show(kind, strlen(kind), shown));
        return json_bad(in, key, linear ? "\"linear\", \"llama3\" or \"default\"" : "\"llama3\" or \"default\"", found);
    }
    if ((st = json_get_float(in, rs, "factor", 1, 0, 1e6, &a->rope_factor)) ||
        (st = json_get_float(in, rs, "low_freq_factor", 0, 1, 1e6, &a->rope_low_freq)) ||
        (st = json_get_float(in, rs, "high_freq_factor", 0, 1, 1e6, &a->rope_high_freq)) ||
        (st = json_get_int(in, rs, "original_max_position_embeddings", 1, 1 << 24, &a->rope_orig_ctx)))
        return st;
    if (!(a->rope_high_freq > a->rope_low_freq))
        return json_bad(in, "high_freq_factor", "a value above low_freq_factor", "one that is not");
    return GPT2_OK;
}

/* rope_scaling: null, or an object rope_kind reads. */
static gpt2_status rope_scaling(const json_src *js, const cJSON *root, gpt2_arch *a, int linear) {
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) return GPT2_OK;
    if (!cJSON_IsObject(rs)) return json_bad(js, "rope_scaling", "an object or null", json_type_name(rs));
    json_src in = *js;
    in.prefix = "rope_scaling.";
    return rope_kind(&in, rs, a, linear);
}

/* One object of transformers 5's rope_parameters at `where`: rope_theta into
 * *theta, the kind (rope_kind; only "default" unless kind_ok), and
 * partial_rotary_factor into *pct. */
static gpt2_status rope_object(const json_src *js, const cJSON *rp, const char *where, gpt2_arch *a, int kind_ok,
                               int linear, float *theta, float *pct) {
    json_src in = *js;
    in.prefix = where;
    gpt2_status st;
    if ((json_has(rp, "rope_theta") && (st = json_get_float(&in, rp, "rope_theta", 0, 1, 1e12, theta))) ||
        (json_has(rp, "partial_rotary_factor") &&
         (st = json_get_float(&in, rp, "partial_rotary_factor", 0, 1, 1, pct))))
        return st;
    if (kind_ok) return rope_kind(&in, rp, a, linear);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(rp, "rope_type");
    if (!k || (cJSON_IsString(k) && strcmp(k->valuestring, "default") == 0)) return GPT2_OK;
    char shown[TEXT_SHOW_BUF], found[TEXT_SHOW_BUF + 8];
    if (cJSON_IsString(k)) snprintf(found, sizeof found, "\"%s\"", text_show(k->valuestring, strlen(k->valuestring), shown));
    return json_bad(&in, "rope_type", "\"default\" (the sliding layers' rotary is not scaled)",
                    cJSON_IsString(k) ? found : json_type_name(k));
}

/* transformers 5's rope_parameters, which config.json holds in place of
 * rope_theta and rope_scaling (and NeoX's rotary_pct and rotary_emb_base): an
 * object with rope_theta, rope_type and that type's keys, and
 * partial_rotary_factor; for Gemma 3 one such object per layer type,
 * "full_attention" (rope_theta, scaling) and "sliding_attention"
 * (*theta_local; no scaling). Where present it is what counts, as in
 * transformers 5; *pct: its partial_rotary_factor (left as is if absent). */
static gpt2_status rope_parameters(const json_src *js, const cJSON *root, gpt2_arch *a, int linear, float *pct,
                                   float *theta_local) {
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (!rp || cJSON_IsNull(rp)) return GPT2_OK;
    if (!cJSON_IsObject(rp)) return json_bad(js, "rope_parameters", "an object or null", json_type_name(rp));
    const cJSON *full = cJSON_GetObjectItemCaseSensitive(rp, "full_attention"),
                *sliding = cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention");
    if (!full && !sliding) return rope_object(js, rp, "rope_parameters.", a, 1, linear, &a->rope_theta, pct);
    if (!theta_local)
        return json_bad(js, "rope_parameters", "one object for every layer (per layer type only for Gemma 3)",
                        "objects per layer type");
    gpt2_status st;
    if ((full && !cJSON_IsObject(full)) || (sliding && !cJSON_IsObject(sliding)))
        return json_bad(js, "rope_parameters", "an object per layer type", "another value");
    if ((full && (st = rope_object(js, full, "rope_parameters.full_attention.", a, 1, linear, &a->rope_theta, pct))) ||
        (sliding && (st = rope_object(js, sliding, "rope_parameters.sliding_attention.", a, 0, 0, theta_local, pct))))
        return st;
    return GPT2_OK;
}

/* An activation key, when present and not null, must name one of ok[0..n) (the first is
 * what the message expects). */
static gpt2_status activation(const json_src *js, const cJSON *root, const char *key, const char *const *ok, int n,
                              const char *expected) {
    char found[TEXT_SHOW_BUF + 8], shown[TEXT_SHOW_BUF];
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!act || cJSON_IsNull(act)) return GPT2_OK;
    for (int i = 0; cJSON_IsString(act) && i < n; i++)
        if (strcmp(act->valuestring, ok[i]) == 0) return GPT2_OK;
    if (cJSON_IsString(act))
        snprintf(found, sizeof found, "\"%s\"", text_show(act->valuestring, strlen(act->valuestring), shown));
    return json_bad(js, key, expected, cJSON_IsString(act) ? found : json_type_name(act));
}

/* Keys that would change the computation in ways the engine does not run:
 * refused with their value rather than ignored. */
static gpt2_status refuse_options(const json_src *js, const cJSON *root) {
    char found[TEXT_SHOW_BUF + 8];
    const cJSON *prf = cJSON_GetObjectItemCaseSensitive(root, "partial_rotary_factor");
    if (prf && !(cJSON_IsNumber(prf) && prf->valuedouble == 1.0)) {
        snprintf(found, sizeof found, "%g", prf->valuedouble);
        return json_bad(js, "partial_rotary_factor", "1 (partial rotation is not supported for this family)",
                        cJSON_IsNumber(prf) ? found : json_type_name(prf));
    }
    static const char *moe[] = {"num_local_experts", "num_experts", "n_routed_experts"};
    for (size_t i = 0; i < sizeof moe / sizeof *moe; i++) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, moe[i]);
        if (e && !cJSON_IsNull(e) && !(cJSON_IsNumber(e) && e->valuedouble <= 1)) {
            snprintf(found, sizeof found, "%g", e->valuedouble);
            return json_bad(js, moe[i], "at most 1 (mixture-of-experts models are not supported)",
                            cJSON_IsNumber(e) ? found : json_type_name(e));
        }
    }
    return GPT2_OK;
}

/* rope_parameters' partial_rotary_factor, outside GPT-NeoX: 1 or refused. */
static gpt2_status whole_rotation(const json_src *js, float pct) {
    char found[32];
    snprintf(found, sizeof found, "%g", pct);
    return pct == 1 ? GPT2_OK
                    : json_bad(js, "rope_parameters.partial_rotary_factor",
                               "1 (partial rotation is not supported for this family)", found);
}

/* The sizes every family's config.json gives under the same keys. */
static gpt2_status read_shape(const json_src *js, const cJSON *root, gpt2_config *c, int *n_ff) {
    gpt2_status st;
    if ((st = json_get_int(js, root, "num_hidden_layers", 1, 1000, &c->n_layer)) ||
        (st = json_get_int(js, root, "num_attention_heads", 1, 4096, &c->n_head)) ||
        (st = json_get_int(js, root, "hidden_size", 1, 65536, &c->n_embd)) ||
        (st = json_get_int(js, root, "intermediate_size", 1, 1 << 20, n_ff)) ||
        (st = json_get_int(js, root, "max_position_embeddings", 1, 1 << 24, &c->n_ctx)) ||
        (st = json_get_int(js, root, "vocab_size", 1, 1 << 24, &c->n_vocab)))
        return st;
    c->arch.n_ff = *n_ff;
    return GPT2_OK;
}

/* GPT-NeoX (Pythia): LayerNorm with biases, rotary on rotary_pct of each
 * head, parallel or sequential residual, the GELU named by hidden_act. */
static gpt2_status neox_config(const json_src *js, const cJSON *root, gpt2_config *c, int *n_ff, int *gelu_erf,
                               int *tied) {
    gpt2_arch *a = &c->arch;
    snprintf(a->family, sizeof a->family, "gpt_neox");
    gpt2_status st;
    float pct = 0.25f; /* GPTNeoXConfig's rotary_pct */
    if ((st = read_shape(js, root, c, n_ff))) return st;
    if (c->n_embd % c->n_head)
        return gpt2_fail(js->err, js->code, "%s: hidden_size %d is not divisible by num_attention_heads %d", js->path,
                         c->n_embd, c->n_head);
    a->head_dim = c->n_embd / c->n_head;
    a->rope_theta = 10000.0f;
    c->ln_eps = 1e-5f;
    a->parallel_residual = 1;
    if ((json_has(root, "rotary_pct") && (st = json_get_float(js, root, "rotary_pct", 0, 1, 1, &pct))) ||
        (json_has(root, "rotary_emb_base") && (st = json_get_float(js, root, "rotary_emb_base", 0, 1, 1e12, &a->rope_theta))) ||
        (json_has(root, "layer_norm_eps") && (st = json_get_float(js, root, "layer_norm_eps", 0, 1, 1, &c->ln_eps))) ||
        (json_has(root, "use_parallel_residual") && (st = json_get_bool(js, root, "use_parallel_residual", &a->parallel_residual))) ||
        (st = rope_scaling(js, root, a, 0)) || (st = rope_parameters(js, root, a, 0, &pct, NULL)))
        return st;
    a->rope_dim = (int)(a->head_dim * pct); /* HF: int(head_size * rotary_pct) */
    if (a->rope_dim < 2 || a->rope_dim % 2)
        return gpt2_fail(js->err, js->code, "%s: rotary_pct %g of head_dim %d gives %d rotary dimensions: an even number "
                         "of at least 2 is needed", js->path, pct, a->head_dim, a->rope_dim);
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    const char *name = cJSON_IsString(act) ? act->valuestring : "gelu";
    if (strcmp(name, "gelu") && strcmp(name, "gelu_new") && strcmp(name, "gelu_fast") && strcmp(name, "gelu_pytorch_tanh"))
        return json_bad(js, "hidden_act", "\"gelu\", \"gelu_new\", \"gelu_fast\" or \"gelu_pytorch_tanh\"", name);
    *gelu_erf = strcmp(name, "gelu") == 0;
    if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "attention_bias")))
        return json_bad(js, "attention_bias", "true (GPT-NeoX without biases is not supported)", "false");
    *tied = 0; /* GPT-NeoX's head is embed_out, tied or not: bound by its own name */
    return GPT2_OK;
}

/* A float key that may be null or absent (then def): a positive value, or 0 for none. */
static gpt2_status opt_positive(const json_src *js, const cJSON *root, const char *key, float def, float *out) {
    *out = def;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return GPT2_OK;
    if (cJSON_IsNull(v)) return (*out = 0), GPT2_OK;
    return json_get_float(js, root, key, 1e-6, 0, 1e12, out);
}

/* Which layers attend through the window: layer_types (Hugging Face's list, "sliding_attention"
 * or "full_attention" each) where given, else every P-th layer full (Gemma 2: 2; Gemma 3:
 * sliding_window_pattern, default 6). The list must be such a period; all "sliding_attention"
 * is every layer windowed, all "full_attention" none. */
static gpt2_status window_layers(const json_src *js, const cJSON *root, int gen, gpt2_config *c) {
    gpt2_arch *a = &c->arch;
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    gpt2_status st;
    if (!types || cJSON_IsNull(types)) {
        a->window_period = gen == 2 ? 2 : 6;
        const char *key = json_has(root, "sliding_window_pattern") ? "sliding_window_pattern" : "_sliding_window_pattern";
        if (gen == 3 && json_has(root, key) && (st = json_get_int(js, root, key, 1, 1 << 20, &a->window_period)))
            return st;
        if (a->window_period == 1) a->sliding_window = a->window_period = 0; /* every layer global */
        return GPT2_OK;
    }
    const int n = cJSON_IsArray(types) ? cJSON_GetArraySize(types) : -1;
    char found[64];
    if (n != c->n_layer) {
        if (n < 0) snprintf(found, sizeof found, "%s", json_type_name(types));
        else snprintf(found, sizeof found, "%d entries", n);
        return json_bad(js, "layer_types", "a list of num_hidden_layers strings", found);
    }
    int first_full = -1, l = 0;
    for (const cJSON *t = types->child; t; t = t->next, l++) {
        const int full = cJSON_IsString(t) && !strcmp(t->valuestring, "full_attention");
        if (!full && !(cJSON_IsString(t) && !strcmp(t->valuestring, "sliding_attention")))
            return json_bad(js, "layer_types", "\"sliding_attention\" or \"full_attention\" each", "another value");
        if (full && first_full < 0) first_full = l;
    }
    a->window_period = first_full + 1; /* 0: every layer windowed; 1: none */
    l = 0;
    for (const cJSON *t = types->child; t; t = t->next, l++) {
        const int full = !strcmp(t->valuestring, "full_attention"), P = a->window_period;
        if (full != (P == 0 ? 0 : P == 1 ? 1 : l % P == P - 1)) {
            snprintf(found, sizeof found, "layer %d \"%s\"", l, t->valuestring);
            return json_bad(js, "layer_types", "windows in all layers but every P-th (the pattern the engine runs)",
                            found);
        }
    }
    if (a->window_period == 1) a->sliding_window = a->window_period = 0;
    return GPT2_OK;
}

/* sqrt(n) as the model's dtype rounds it (config.json's torch_dtype, or dtype):
 * Hugging Face multiplies the embeddings by torch.tensor(sqrt(hidden_size), dtype). */
static float embed_normalizer(const cJSON *root, int n) {
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(root, "torch_dtype");
    if (!cJSON_IsString(dt)) dt = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    const float f = (float)sqrt((double)n);
    if (cJSON_IsString(dt) && !strcmp(dt->valuestring, "bfloat16")) return gpt2_bf16_to_f32(gpt2_f32_to_bf16(f));
    if (cJSON_IsString(dt) && !strcmp(dt->valuestring, "float16")) return gpt2_f16_to_f32(gpt2_f32_to_f16(f));
    return f;
}

/* Gemma 1, 2 and 3 (text): RMSNorm (1 + w), GeGLU, embeddings times sqrt(hidden_size),
 * head_dim 256 unless given; Gemma 2 and 3: norms of the attention's and MLP's outputs,
 * query_pre_attn_scalar, a sliding window on a pattern of layers; Gemma 2's soft-capping
 * (Gemma 3's too, where its config sets it); Gemma 3's q/k norms and its windowed layers'
 * own rotary base. */
static gpt2_status gemma_config(const json_src *js, const cJSON *root, int g, gpt2_config *c, int *n_ff, int *tied) {
    gpt2_arch *a = &c->arch;
    const int gen = gemmas[g].gen;
    char found[TEXT_SHOW_BUF + 8], shown[TEXT_SHOW_BUF];
    if (!gen) {
        snprintf(found, sizeof found, "\"%s\"", text_show(gemmas[g].model_type, strlen(gemmas[g].model_type), shown));
        return json_bad(js, "model_type", gemmas[g].refusal, found);
    }
    gpt2_status st;
    snprintf(a->family, sizeof a->family, "%s", gemmas[g].model_type);
    a->rms_norm = a->swiglu = a->geglu = a->norm_plus_one = 1;
    a->post_norms = gen >= 2;
    a->qk_norm = gen == 3;
    if ((st = read_shape(js, root, c, n_ff))) return st;
    a->n_kv_head = c->n_head;
    a->head_dim = 256;
    a->rope_theta = gen == 3 ? 1e6f : 1e4f;
    c->ln_eps = 1e-6f;
    float qpas = 256, local = 1e4f, pct = 1;
    if ((json_has(root, "num_key_value_heads") &&
         (st = json_get_int(js, root, "num_key_value_heads", 1, c->n_head, &a->n_kv_head))) ||
        (json_has(root, "head_dim") && (st = json_get_int(js, root, "head_dim", 2, 4096, &a->head_dim))) ||
        (json_has(root, "rope_theta") && (st = json_get_float(js, root, "rope_theta", 0, 1, 1e12, &a->rope_theta))) ||
        (json_has(root, "rms_norm_eps") && (st = json_get_float(js, root, "rms_norm_eps", 0, 1, 1, &c->ln_eps))) ||
        (gen >= 2 && json_has(root, "query_pre_attn_scalar") &&
         (st = json_get_float(js, root, "query_pre_attn_scalar", 0, 1, 1e12, &qpas))) ||
        (gen == 3 && json_has(root, "rope_local_base_freq") &&
         (st = json_get_float(js, root, "rope_local_base_freq", 0, 1, 1e12, &local))) ||
        (gen >= 2 && (st = opt_positive(js, root, "attn_logit_softcapping", gen == 2 ? 50 : 0, &a->attn_softcap))) ||
        (gen >= 2 && (st = opt_positive(js, root, "final_logit_softcapping", gen == 2 ? 30 : 0, &a->final_softcap))) ||
        (st = rope_scaling(js, root, a, gen == 3)) ||
        (st = rope_parameters(js, root, a, gen == 3, &pct, gen == 3 ? &local : NULL)) ||
        (st = refuse_options(js, root)) || (st = whole_rotation(js, pct)) ||
        (st = activation(js, root, "hidden_activation",
                         (const char *const[]){"gelu_pytorch_tanh", "gelu_new", "gelu_fast"}, 3,
                         "\"gelu_pytorch_tanh\" (GELU's tanh form)")))
        return st;
    if (c->n_head % a->n_kv_head)
        return gpt2_fail(js->err, js->code, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                         js->path, c->n_head, a->n_kv_head);
    if (a->head_dim % 2)
        return gpt2_fail(js->err, js->code, "%s: head_dim %d is odd: rotary positions need pairs", js->path, a->head_dim);
    if (a->rope_factor > 0 && gen == 3) /* Llama 3's scaling would reach the local layers' table too */
        return json_bad(js, "rope_scaling", "\"linear\" or null for Gemma 3", "\"llama3\"");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "use_bidirectional_attention")))
        return json_bad(js, "use_bidirectional_attention", "false (EmbeddingGemma's bidirectional attention is not "
                        "supported)", "true");
    a->rope_dim = a->head_dim;
    if (gen >= 2) a->attn_scale = (float)(1.0 / sqrt((double)qpas));
    if (gen == 3) a->rope_theta_local = local;
    a->embed_scale = embed_normalizer(root, c->n_embd);
    if (gen >= 2) { /* 4096 unless said (null: none) */
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
        a->sliding_window = w && cJSON_IsNull(w) ? 0 : 4096;
        if (w && !cJSON_IsNull(w) && (st = json_get_int(js, root, "sliding_window", 1, 1 << 24, &a->sliding_window)))
            return st;
        if (a->sliding_window && (st = window_layers(js, root, gen, c))) return st;
    }
    *tied = 1; /* Gemma ties its head unless the config says otherwise */
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (tie && (st = json_get_bool(js, root, "tie_word_embeddings", tied))) return st;
    return GPT2_OK;
}

gpt2_status arch_from_hf_config(const json_src *js, const cJSON *root, const char *model_type, gpt2_config *c,
                                int *n_ff, int *gelu_erf, int *tied) {
    const int fam = arch_hf_family(model_type);
    gpt2_arch *a = &c->arch;
    memset(a, 0, sizeof *a);
    if (fam == ARCH_NEOX) return neox_config(js, root, c, n_ff, gelu_erf, tied);
    if (fam >= ARCH_GEMMA) return gemma_config(js, root, fam - ARCH_GEMMA, c, n_ff, tied);
    snprintf(a->family, sizeof a->family, "%s", model_type);
    a->rms_norm = a->swiglu = 1;
    a->qk_norm = families[fam].qk_norm;
    gpt2_status st;
    float pct = 1;
    if ((st = read_shape(js, root, c, n_ff))) return st;
    a->n_kv_head = c->n_head;
    if (json_has(root, "num_key_value_heads") &&
        (st = json_get_int(js, root, "num_key_value_heads", 1, c->n_head, &a->n_kv_head)))
        return st;
    if (c->n_head % a->n_kv_head)
        return gpt2_fail(js->err, js->code, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                         js->path, c->n_head, a->n_kv_head);
    /* head_dim: given, or hidden_size / heads (Qwen3's default is 128) */
    a->head_dim = fam == arch_hf_family("qwen3") && !json_has(root, "head_dim") ? 128 : 0;
    if (json_has(root, "head_dim") && (st = json_get_int(js, root, "head_dim", 2, 4096, &a->head_dim))) return st;
    if (!a->head_dim) {
        if (c->n_embd % c->n_head)
            return gpt2_fail(js->err, js->code, "%s: hidden_size %d is not divisible by num_attention_heads %d",
                             js->path, c->n_embd, c->n_head);
        a->head_dim = c->n_embd / c->n_head;
    }
    if (a->head_dim % 2)
        return gpt2_fail(js->err, js->code, "%s: head_dim %d is odd: rotary positions need pairs", js->path, a->head_dim);
    a->rope_dim = a->head_dim;
    a->rope_theta = 10000.0f;
    c->ln_eps = 1e-6f;
    if ((json_has(root, "rope_theta") && (st = json_get_float(js, root, "rope_theta", 0, 1, 1e12, &a->rope_theta))) ||
        (json_has(root, "rms_norm_eps") && (st = json_get_float(js, root, "rms_norm_eps", 0, 1, 1, &c->ln_eps))) ||
        (st = rope_scaling(js, root, a, 0)) || (st = rope_parameters(js, root, a, 0, &pct, NULL)) ||
        (st = refuse_options(js, root)) || (st = whole_rotation(js, pct)) ||
        (st = activation(js, root, "hidden_act", (const char *const[]){"silu"}, 1, "\"silu\"")))
        return st;
    /* a window counts where the family always applies it (Mistral), or where the config
     * switches it on (Qwen2/3: then for the layers from max_window_layers on) */
    const cJSON *use = cJSON_GetObjectItemCaseSensitive(root, "use_sliding_window");
    int from = 0;
    if (cJSON_IsTrue(use) && json_has(root, "max_window_layers") &&
        (st = json_get_int(js, root, "max_window_layers", 0, 1000, &from)))
        return st;
    if (from > 0 && from < c->n_layer)
        return json_bad(js, "max_window_layers", "0 or at least num_hidden_layers (a window from some layer on is "
                        "not supported; windows every layer but each P-th are)", "a layer in between");
    if (json_has(root, "sliding_window") && (families[fam].window || (cJSON_IsTrue(use) && from == 0)) &&
        (st = json_get_int(js, root, "sliding_window", 1, 1 << 24, &a->sliding_window)))
        return st;
    *tied = -1;
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (tie && (st = json_get_bool(js, root, "tie_word_embeddings", tied))) return st;
    return GPT2_OK;
}

/* --- Llama 3's rope scaling as divisors -------------------------------------- */

void arch_llama3_rope_div(const gpt2_arch *a, float *div) {
    const int half = a->rope_dim / 2;
    const double lo_wave = a->rope_orig_ctx / a->rope_low_freq, hi_wave = a->rope_orig_ctx / a->rope_high_freq;
    for (int i = 0; i < half; i++) {
        const double freq = pow(a->rope_theta, -2.0 * i / a->rope_dim), wave = 2 * 3.14159265358979323846 / freq;
        if (wave < hi_wave) div[i] = 1.0f;
        else if (wave > lo_wave) div[i] = a->rope_factor;
        else {
            const double smooth = (a->rope_orig_ctx / wave - a->rope_low_freq) / (a->rope_high_freq - a->rope_low_freq);
            div[i] = (float)(1.0 / ((1 - smooth) / a->rope_factor + smooth));
        }
    }
}

typedef struct {
    const float *div; /* (half) the divisors to reproduce */
    float *tmp;       /* (half) scratch */
    gpt2_arch best;   /* the best fit so far */
    int fit;          /* its quality: 0 none, 1 within 1e-6, 2 bit for bit */
} rope_search;

/* Tries low, high and orig (rope_factor set): kept when it reproduces the divisors better. */
static void rope_try(rope_search *s, const gpt2_arch *a, double low, double high, double orig) {
    if (!(orig >= 1 && orig <= (1 << 24) && low > 0 && high < 1e6 && high > low)) return;
    gpt2_arch c = *a;
    c.rope_low_freq = (float)low, c.rope_high_freq = (float)high, c.rope_orig_ctx = (int)lround(orig);
    if (!(c.rope_high_freq > c.rope_low_freq)) return;
    arch_llama3_rope_div(&c, s->tmp);
    int exact = 1;
    double worst = 0;
    for (int i = 0; i < a->rope_dim / 2; i++) {
        exact &= memcmp(&s->tmp[i], &s->div[i], sizeof(float)) == 0;
        worst = fmax(worst, fabs((double)s->tmp[i] - s->div[i]) / s->div[i]);
    }
    const int fit = exact ? 2 : worst <= 1e-6 ? 1 : 0;
    if (fit > s->fit) s->fit = fit, s->best = c;
}

/* x to three decimals where that is within a millionth of it (0.99999994 -> 1). */
static double snap(double x) {
    const double r = round(x * 1000) / 1000;
    return fabs(r - x) <= 1e-6 * fabs(x) ? r : x;
}

int arch_llama3_from_div(gpt2_arch *a, const float *div) {
    const int half = a->rope_dim / 2;
    float factor = 1.0f;
    for (int i = 0; i < half; i++) {
        if (!(div[i] >= 1.0f) || (i && div[i] < div[i - 1])) return -1; /* Llama 3's grow with the wavelength */
        factor = div[i] > factor ? div[i] : factor;
    }
    if (factor == 1.0f) return 0;
    double *wave = malloc((size_t)half * sizeof *wave);
    rope_search s = {div, malloc((size_t)half * sizeof(float)), *a, 0};
    if (!wave || !s.tmp) {
        free(wave), free(s.tmp);
        return -1;
    }
    for (int i = 0; i < half; i++) wave[i] = 2 * 3.14159265358979323846 / pow(a->rope_theta, -2.0 * i / a->rope_dim);
    int med = 0, low = 0; /* the first medium (interpolated) frequency, the first low one (divided by factor) */
    while (med < half && div[med] == 1.0f) med++;
    for (low = med; low < half && div[low] != factor;) low++;
    gpt2_arch c = *a;
    c.rope_factor = factor;
    /* s = (orig / wave - low) / (high - low) on the medium frequencies, from 1 / div = (1 - s) / factor + s */
#define SMOOTH(i) ((1.0 / div[i] - 1.0 / factor) / (1.0 - 1.0 / factor))
    rope_try(&s, &c, 1, 4, 8192); /* Llama 3.1's and 3.2's own */
    if (low - med >= 2) { /* a line through the first and last: the waves where s is 0 and 1 */
        const double w1 = wave[med], w2 = wave[low - 1], s1 = SMOOTH(med), s2 = SMOOTH(low - 1);
        const double A = (s1 - s2) / (1 / w1 - 1 / w2), B = A / w1 - s1, lo = A / B, hi = A / (1 + B), orig = round(lo);
        rope_try(&s, &c, snap(orig / lo), snap(orig / hi), orig);
        rope_try(&s, &c, orig / lo, orig / hi, orig);
    }
    static const double pairs[][2] = {{1, 4}, {1, 2}, {1, 8}, {1, 16}, {1, 32}, {2, 4}, {2, 8}};
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs && s.fit < 2; k++) {
        const double lf = pairs[k][0], hf = pairs[k][1];
        if (low > med) { /* through the first medium point */
            rope_try(&s, &c, lf, hf, round(wave[med] * (SMOOTH(med) * (hf - lf) + lf)));
        } else { /* none: the thresholds anywhere between the last kept wave and the first divided one */
            const double lo_orig = med ? wave[med - 1] * hf : 0, hi_orig = wave[low] * lf;
            rope_try(&s, &c, lf, hf, floor((lo_orig + hi_orig) / 2));
        }
    }
#undef SMOOTH
    free(wave), free(s.tmp);
    if (s.fit) *a = s.best;
    return s.fit ? s.fit : -1;
}

/* --- config.json written -------------------------------------------------------- */

static void add_float(cJSON *j, const char *key, float v) { cJSON_AddNumberToObject(j, key, json_short_float(v)); }

/* rotary_pct for rope_dim of head_dim: the first value from which both HF's
 * int(head_dim * pct) (double) and the float this file reads give rope_dim. */
static double rotary_pct(int rope_dim, int head_dim) {
    double pct = (double)rope_dim / head_dim;
    for (int k = 0; k < 8; k++) {
        const float f = (float)pct;
        if ((int)(head_dim * pct) == rope_dim && (int)(head_dim * f) == rope_dim) break;
        pct = (double)nextafterf(f, 2.0f);
    }
    return pct;
}

static void add_rope_scaling(cJSON *j, const gpt2_arch *a) {
    if (!(a->rope_factor > 0)) {
        cJSON_AddNullToObject(j, "rope_scaling");
        return;
    }
    cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
    add_float(rs, "factor", a->rope_factor);
    add_float(rs, "high_freq_factor", a->rope_high_freq);
    add_float(rs, "low_freq_factor", a->rope_low_freq);
    cJSON_AddNumberToObject(rs, "original_max_position_embeddings", a->rope_orig_ctx);
    cJSON_AddStringToObject(rs, "rope_type", "llama3");
}

/* The Llama family's keys: grouped heads, RMSNorm, rotary, biases, the window. */
static void llama_keys(cJSON *j, const arch_hf_config *h, int fam) {
    const gpt2_config *c = &h->cfg;
    const gpt2_arch *a = &c->arch;
    cJSON_AddNumberToObject(j, "num_key_value_heads", gpt2_config_kv_heads(c));
    cJSON_AddNumberToObject(j, "head_dim", gpt2_config_head_dim(c));
    cJSON_AddStringToObject(j, "hidden_act", "silu");
    add_float(j, "rms_norm_eps", c->ln_eps);
    add_float(j, "rope_theta", a->rope_theta);
    add_rope_scaling(j, a);
    if (fam == arch_hf_family("llama") || fam == arch_hf_family("qwen3"))
        cJSON_AddBoolToObject(j, "attention_bias", h->attention_bias);
    if (fam == arch_hf_family("llama")) cJSON_AddBoolToObject(j, "mlp_bias", h->mlp_bias);
    if (fam == arch_hf_family("mistral")) {
        if (a->sliding_window > 0) cJSON_AddNumberToObject(j, "sliding_window", a->sliding_window);
        else cJSON_AddNullToObject(j, "sliding_window");
    } else if (fam != arch_hf_family("llama")) { /* Qwen: every layer's window, or none */
        cJSON_AddBoolToObject(j, "use_sliding_window", a->sliding_window > 0);
        if (a->sliding_window > 0) cJSON_AddNumberToObject(j, "sliding_window", a->sliding_window);
        else cJSON_AddNullToObject(j, "sliding_window");
        cJSON_AddNumberToObject(j, "max_window_layers", a->sliding_window > 0 ? 0 : c->n_layer);
    }
}

/* Gemma's (generation gen): what gemma_config reads back to the same description; the
 * embeddings' scale is the model's sqrt(hidden_size), which Hugging Face derives. */
static void gemma_keys(cJSON *j, const arch_hf_config *h, int gen) {
    const gpt2_config *c = &h->cfg;
    const gpt2_arch *a = &c->arch;
    cJSON_AddNumberToObject(j, "num_key_value_heads", gpt2_config_kv_heads(c));
    cJSON_AddNumberToObject(j, "head_dim", gpt2_config_head_dim(c));
    cJSON_AddStringToObject(j, "hidden_activation", "gelu_pytorch_tanh");
    cJSON_AddStringToObject(j, "hidden_act", "gelu_pytorch_tanh");
    add_float(j, "rms_norm_eps", c->ln_eps);
    add_float(j, "rope_theta", a->rope_theta);
    cJSON_AddBoolToObject(j, "attention_bias", 0);
    if (gen < 2) return;
    /* attn_scale = query_pre_attn_scalar^-1/2: the scalar, an integer where it is one */
    const double q = a->attn_scale > 0 ? 1.0 / ((double)a->attn_scale * a->attn_scale) : gpt2_config_head_dim(c);
    cJSON_AddNumberToObject(j, "query_pre_attn_scalar", fabs(q - round(q)) < 1e-4 * q ? round(q) : q);
    if (a->attn_softcap > 0) add_float(j, "attn_logit_softcapping", a->attn_softcap);
    else cJSON_AddNullToObject(j, "attn_logit_softcapping");
    if (a->final_softcap > 0) add_float(j, "final_logit_softcapping", a->final_softcap);
    else cJSON_AddNullToObject(j, "final_logit_softcapping");
    if (a->sliding_window > 0) cJSON_AddNumberToObject(j, "sliding_window", a->sliding_window);
    else cJSON_AddNullToObject(j, "sliding_window");
    if (a->sliding_window > 0) { /* each layer's kind, and Gemma 3's period as older transformers read it */
        cJSON *types = cJSON_AddArrayToObject(j, "layer_types");
        for (int l = 0; l < c->n_layer; l++)
            cJSON_AddItemToArray(types, cJSON_CreateString(gpt2_config_windowed(c, l) ? "sliding_attention"
                                                                                       : "full_attention"));
        if (gen == 3) cJSON_AddNumberToObject(j, "sliding_window_pattern", a->window_period ? a->window_period : 1);
    }
    if (gen == 3) {
        add_float(j, "rope_local_base_freq", a->rope_theta_local > 0 ? a->rope_theta_local : a->rope_theta);
        if (a->rope_linear > 0) {
            cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
            add_float(rs, "factor", a->rope_linear);
            cJSON_AddStringToObject(rs, "rope_type", "linear");
        } else {
            cJSON_AddNullToObject(j, "rope_scaling");
        }
    }
}

/* GPT-NeoX's: LayerNorm, partial rotary, the residual, the GELU (rotary_pct and
 * rotary_emb_base as transformers before 4.48 name them, partial_rotary_factor and
 * rope_theta as after). */
static void neox_keys(cJSON *j, const arch_hf_config *h) {
    const gpt2_config *c = &h->cfg;
    const gpt2_arch *a = &c->arch;
    const double pct = rotary_pct(a->rope_dim, gpt2_config_head_dim(c));
    cJSON_AddStringToObject(j, "hidden_act", h->gelu_erf ? "gelu" : "gelu_new");
    cJSON_AddNumberToObject(j, "rotary_pct", pct);
    cJSON_AddNumberToObject(j, "partial_rotary_factor", pct);
    add_float(j, "rotary_emb_base", a->rope_theta);
    add_float(j, "rope_theta", a->rope_theta);
    add_rope_scaling(j, a);
    add_float(j, "layer_norm_eps", c->ln_eps);
    cJSON_AddBoolToObject(j, "use_parallel_residual", a->parallel_residual);
    cJSON_AddBoolToObject(j, "attention_bias", 1);
}

gpt2_status arch_write_hf_config(const char *path, const arch_hf_config *h, gpt2_error *err) {
    const gpt2_config *c = &h->cfg;
    const gpt2_arch *a = &c->arch;
    /* a GGUF's "gemma3" is Hugging Face's text-only "gemma3_text" */
    const int fam = arch_hf_family(strcmp(a->family, "gemma3") ? a->family : "gemma3_text");
    if (fam < 0)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "%s: no Hugging Face family is named \"%s\"", path, a->family);
    if (fam == arch_hf_family("llama") && a->sliding_window > 0)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "%s: a llama model with a sliding window of %d: Hugging Face's "
                         "Llama has none (Mistral's has)", path, a->sliding_window);
    static const char *const gemma_arch[] = {"", "GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM"};
    const int gen = fam >= ARCH_GEMMA ? gemmas[fam - ARCH_GEMMA].gen : -1;
    if (gen == 0)
        return gpt2_fail(err, GPT2_ERR_INVALID_ARG, "%s: no config.json for a %s model", path, a->family);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "architectures"),
                         cJSON_CreateString(fam == ARCH_NEOX ? "GPTNeoXForCausalLM"
                                            : gen > 0        ? gemma_arch[gen]
                                                             : families[fam].architecture));
    cJSON_AddStringToObject(j, "model_type", fam == ARCH_NEOX ? "gpt_neox"
                                             : gen > 0        ? gemmas[fam - ARCH_GEMMA].model_type
                                                              : families[fam].model_type);
    cJSON_AddNumberToObject(j, "vocab_size", c->n_vocab);
    cJSON_AddNumberToObject(j, "hidden_size", c->n_embd);
    cJSON_AddNumberToObject(j, "intermediate_size", gpt2_config_n_ff(c));
    cJSON_AddNumberToObject(j, "num_hidden_layers", c->n_layer);
    cJSON_AddNumberToObject(j, "num_attention_heads", c->n_head);
    if (fam == ARCH_NEOX) neox_keys(j, h);
    else if (gen > 0) gemma_keys(j, h, gen);
    else llama_keys(j, h, fam);
    cJSON_AddNumberToObject(j, "max_position_embeddings", c->n_ctx);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", fam != ARCH_NEOX && h->tied);
    cJSON_AddNumberToObject(j, "attention_dropout", 0);
    cJSON_AddNumberToObject(j, "initializer_range", 0.02);
    cJSON_AddBoolToObject(j, "use_cache", 1);
    if (h->bos >= 0) cJSON_AddNumberToObject(j, "bos_token_id", h->bos);
    if (h->n_eos == 1) cJSON_AddNumberToObject(j, "eos_token_id", h->eos[0]);
    if (h->n_eos > 1) cJSON_AddItemToObject(j, "eos_token_id", cJSON_CreateIntArray(h->eos, h->n_eos));
    cJSON_AddStringToObject(j, "torch_dtype", h->dtype == GPT2_DTYPE_F32   ? "float32"
                                              : h->dtype == GPT2_DTYPE_F16 ? "float16"
                                                                           : "bfloat16");
    if (h->converted_from) cJSON_AddStringToObject(j, "gptscope_converted_from", h->converted_from);
    return json_write_file(path, j, err);
}
