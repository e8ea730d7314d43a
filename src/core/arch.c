/* arch.c — the decoder families beyond GPT-2 as descriptions (gpt2_arch):
 * what a Hugging Face config.json says of a Llama, Mistral, Qwen2 or Qwen3
 * model, checked and turned into the one description the forward pass runs.
 * GGUF's metadata says the same under other keys (model_gguf.c). */
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "error.h"
#include "textio.h"

/* model_type -> what sets the family apart; one row per family the engine runs */
static const struct {
    const char *model_type;
    int qk_norm, window; /* window: sliding_window counts without use_sliding_window (Mistral) */
} families[] = {
    {"llama", 0, 0},
    {"mistral", 0, 1},
    {"qwen2", 0, 0},
    {"qwen3", 1, 0},
};

int arch_hf_family(const char *model_type) {
    for (int i = 0; i < (int)(sizeof families / sizeof *families); i++)
        if (strcmp(model_type, families[i].model_type) == 0) return i;
    return strcmp(model_type, "gpt_neox") == 0 ? ARCH_NEOX : -1;
}

/* rope_scaling: null, or Llama 3's; other kinds are refused by name. */
static gpt2_status rope_scaling(const json_src *js, const cJSON *root, gpt2_arch *a) {
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) return GPT2_OK;
    if (!cJSON_IsObject(rs)) return json_bad(js, "rope_scaling", "an object or null", json_type_name(rs));
    json_src in = *js;
    in.prefix = "rope_scaling.";
    const char *kind = NULL;
    const char *key = json_has(rs, "rope_type") ? "rope_type" : "type";
    gpt2_status st = json_get_str(&in, rs, key, &kind);
    if (st) return st;
    if (strcmp(kind, "default") == 0) return GPT2_OK;
    if (strcmp(kind, "llama3") != 0) {
        char shown[TEXT_SHOW_BUF], found[TEXT_SHOW_BUF + 32];
        snprintf(found, sizeof found, "\"%s\" (not supported)", text_show(kind, strlen(kind), shown));
        return json_bad(&in, key, "\"llama3\" or \"default\"", found);
    }
    if ((st = json_get_float(&in, rs, "factor", 1, 0, 1e6, &a->rope_factor)) ||
        (st = json_get_float(&in, rs, "low_freq_factor", 0, 1, 1e6, &a->rope_low_freq)) ||
        (st = json_get_float(&in, rs, "high_freq_factor", 0, 1, 1e6, &a->rope_high_freq)) ||
        (st = json_get_int(&in, rs, "original_max_position_embeddings", 1, 1 << 24, &a->rope_orig_ctx)))
        return st;
    if (!(a->rope_high_freq > a->rope_low_freq))
        return json_bad(&in, "high_freq_factor", "a value above low_freq_factor", "one that is not");
    return GPT2_OK;
}

/* Keys that would change the computation in ways the engine does not run:
 * refused with their value rather than ignored. */
static gpt2_status refuse_options(const json_src *js, const cJSON *root) {
    char found[TEXT_SHOW_BUF + 8], shown[TEXT_SHOW_BUF];
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (act && !(cJSON_IsString(act) && strcmp(act->valuestring, "silu") == 0)) {
        if (cJSON_IsString(act))
            snprintf(found, sizeof found, "\"%s\"", text_show(act->valuestring, strlen(act->valuestring), shown));
        return json_bad(js, "hidden_act", "\"silu\"", cJSON_IsString(act) ? found : json_type_name(act));
    }
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
    float pct = 1.0f;
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
        (st = rope_scaling(js, root, a)))
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

gpt2_status arch_from_hf_config(const json_src *js, const cJSON *root, const char *model_type, gpt2_config *c,
                                int *n_ff, int *gelu_erf, int *tied) {
    const int fam = arch_hf_family(model_type);
    gpt2_arch *a = &c->arch;
    memset(a, 0, sizeof *a);
    if (fam == ARCH_NEOX) return neox_config(js, root, c, n_ff, gelu_erf, tied);
    snprintf(a->family, sizeof a->family, "%s", model_type);
    a->rms_norm = a->swiglu = 1;
    a->qk_norm = families[fam].qk_norm;
    gpt2_status st;
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
        (st = rope_scaling(js, root, a)) || (st = refuse_options(js, root)))
        return st;
    /* a window counts where the family always applies it (Mistral), or where the config
     * switches it on (Qwen2/3: then for the layers from max_window_layers on) */
    const cJSON *use = cJSON_GetObjectItemCaseSensitive(root, "use_sliding_window");
    int from = 0;
    if (cJSON_IsTrue(use) && json_has(root, "max_window_layers") &&
        (st = json_get_int(js, root, "max_window_layers", 0, 1000, &from)))
        return st;
    if (from > 0 && from < c->n_layer)
        return json_bad(js, "max_window_layers", "0 or at least num_hidden_layers (a window in some layers only "
                        "is not supported)", "a layer in between");
    if (json_has(root, "sliding_window") && (families[fam].window || (cJSON_IsTrue(use) && from == 0)) &&
        (st = json_get_int(js, root, "sliding_window", 1, 1 << 24, &a->sliding_window)))
        return st;
    *tied = -1;
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (tie && (st = json_get_bool(js, root, "tie_word_embeddings", tied))) return st;
    return GPT2_OK;
}
