#!/usr/bin/python3
"""make_arch_fixtures.py - random-weight Llama, Mistral, Qwen2, Qwen3, GPT-NeoX and
Gemma 1/2/3 models covering every option the decoder families have, their float64
reference logits (decoder_ref.py), and their GGUF conversions as llama.cpp's
convert_hf_to_gguf.py writes them.

    /usr/bin/python3 tests/ref/make_arch_fixtures.py --fixtures DIR

Writes DIR/arch/ (see tests/ref/README.md for the exact formats):
    models/CASE/    config.json, model.safetensors (HF names), tokenizer.json
    ref/CASE/       ids.txt, logits.f32 (T, V), meta.txt "T V"; for Gemma 2 also
                    attn.f32 (L, H, T, T): every layer's and head's probabilities
    gguf/NAME.gguf  GGUF v3 conversions
    cases.tsv       case<TAB>model_type<TAB>gguf file or -<TAB>reference of that gguf or -
    gguf.tsv        gguf file<TAB>source case<TAB>reference directory<TAB>tensor type
Fixed seeds: two runs write identical bytes. Needs numpy and regex only.
"""

import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_ref  # noqa: E402
import gguf_write as gw  # noqa: E402
import make_model_fixtures as mk  # noqa: E402

F32 = np.float32
T_REF = 24

# ----------------------------------------------------------------------------
# tokenizer: a byte-level BPE in tokenizer.json form, trained on this text

TRAIN_TEXT = """\
The quick brown fox jumps over the lazy dog. The dog sleeps in the sun, and the fox
runs into the woods. Then the rain comes down on the hills, the river rises, and the
old mill turns its wheel again. It's 7 o'clock; we've 12 miles to go.
"""
N_MERGES = 40
EOT = "<|endoftext|>"


def tokenizer_json(vocab, merges):
    """Hugging Face's tokenizer.json for a GPT-2-style byte-level BPE: ids 0..255
    the byte symbols (bytes_to_unicode order), then one token per merge, then
    <|endoftext|> (an added special token, also in the vocabulary as GPT-2's
    own tokenizer.json has it)."""
    eot = vocab[EOT]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": eot, "content": EOT, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": dict(byte_level, trim_offsets=False),
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": dict(sorted(vocab.items(), key=lambda kv: kv[1])),
                  "merges": [f"{a} {b}" for a, b in merges]},
    }
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


# ----------------------------------------------------------------------------
# configs, as transformers writes them (sorted keys, indent 2)

def llama_config(V, **kw):
    cfg = {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
           "bos_token_id": V - 1, "eos_token_id": V - 1, "hidden_act": "silu", "hidden_size": 64,
           "initializer_range": 0.02, "intermediate_size": 160, "max_position_embeddings": 128,
           "mlp_bias": False, "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
           "num_key_value_heads": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
           "rope_theta": 10000.0, "tie_word_embeddings": True, "torch_dtype": "float32",
           "transformers_version": "4.46.3", "use_cache": True, "vocab_size": V}
    cfg.update(kw)
    return cfg


def mistral_config(V, **kw):
    cfg = {"architectures": ["MistralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": V - 1,
           "eos_token_id": V - 1, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
           "intermediate_size": 128, "max_position_embeddings": 64, "model_type": "mistral",
           "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "rms_norm_eps": 1e-05,
           "rope_theta": 10000.0, "sliding_window": 8, "tie_word_embeddings": False, "torch_dtype": "float32",
           "transformers_version": "4.46.3", "use_cache": True, "vocab_size": V}
    cfg.update(kw)
    return cfg


def qwen2_config(V, **kw):
    # Qwen2's configs carry a sliding_window that use_sliding_window false turns
    # off; it is small here so that an engine applying it anyway is caught
    cfg = {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": V - 1,
           "eos_token_id": V - 1, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
           "intermediate_size": 96, "max_position_embeddings": 128, "max_window_layers": 2,
           "model_type": "qwen2", "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
           "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": 4,
           "tie_word_embeddings": True, "torch_dtype": "float32", "transformers_version": "4.46.3",
           "use_cache": True, "use_sliding_window": False, "vocab_size": V}
    cfg.update(kw)
    return cfg


def qwen3_config(V, **kw):
    cfg = {"architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
           "bos_token_id": V - 1, "eos_token_id": V - 1, "head_dim": 32, "hidden_act": "silu",
           "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
           "max_position_embeddings": 128, "max_window_layers": 2, "model_type": "qwen3",
           "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "rms_norm_eps": 1e-03,
           "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": False,
           "torch_dtype": "float32", "transformers_version": "4.51.3", "use_cache": True,
           "use_sliding_window": False, "vocab_size": V}
    cfg.update(kw)
    return cfg


def neox_config(V, **kw):
    cfg = {"architectures": ["GPTNeoXForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
           "bos_token_id": V - 1, "classifier_dropout": 0.1, "eos_token_id": V - 1, "hidden_act": "gelu",
           "hidden_dropout": 0.0, "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
           "layer_norm_eps": 1e-05, "max_position_embeddings": 64, "model_type": "gpt_neox",
           "num_attention_heads": 4, "num_hidden_layers": 2, "rope_scaling": None, "rotary_emb_base": 10000,
           "rotary_pct": 0.25, "tie_word_embeddings": False, "torch_dtype": "float32",
           "transformers_version": "4.46.3", "use_cache": True, "use_parallel_residual": True, "vocab_size": V}
    cfg.update(kw)
    return cfg


def gemma_config(V, **kw):
    # Gemma 1 as transformers 4.38 wrote google/gemma-2b's: hidden_act "gelu", which
    # GemmaMLP ignores (no hidden_activation: GELU's tanh form); heads wider than
    # hidden_size / heads; hidden_size 96, whose sqrt rounds differently in bfloat16
    cfg = {"architectures": ["GemmaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
           "bos_token_id": V - 1, "eos_token_id": V - 1, "head_dim": 32, "hidden_act": "gelu", "hidden_size": 96,
           "initializer_range": 0.02, "intermediate_size": 128, "max_position_embeddings": 128,
           "model_type": "gemma", "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 1,
           "pad_token_id": 0, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000.0,
           "torch_dtype": "float32", "transformers_version": "4.38.0", "use_cache": True, "vocab_size": V}
    cfg.update(kw)
    return cfg


def gemma2_config(V, **kw):
    # four layers: windows of 6 on layers 0 and 2; soft-caps small enough to bite;
    # query_pre_attn_scalar apart from head_dim
    cfg = {"architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
           "attn_logit_softcapping": 3.0, "bos_token_id": V - 1, "cache_implementation": "hybrid",
           "eos_token_id": V - 1, "final_logit_softcapping": 4.0, "head_dim": 32,
           "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 96,
           "initializer_range": 0.02, "intermediate_size": 128, "max_position_embeddings": 128,
           "model_type": "gemma2", "num_attention_heads": 4, "num_hidden_layers": 4, "num_key_value_heads": 2,
           "pad_token_id": 0, "query_pre_attn_scalar": 24, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
           "sliding_window": 6, "torch_dtype": "float32", "transformers_version": "4.44.0", "use_cache": True,
           "vocab_size": V}
    cfg.update(kw)
    return cfg


def gemma3_config(V, **kw):
    # seven layers of the 6-pattern: windows of 5 on all but layer 5, which rotates
    # by rope_theta where the others rotate by rope_local_base_freq
    cfg = {"architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
           "attn_logit_softcapping": None, "bos_token_id": V - 1, "cache_implementation": "hybrid",
           "eos_token_id": V - 1, "final_logit_softcapping": None, "head_dim": 32,
           "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 96, "initializer_range": 0.02,
           "intermediate_size": 128, "max_position_embeddings": 128, "model_type": "gemma3_text",
           "num_attention_heads": 4, "num_hidden_layers": 7, "num_key_value_heads": 1, "pad_token_id": 0,
           "query_pre_attn_scalar": 32, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0,
           "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": 5, "sliding_window_pattern": 6,
           "torch_dtype": "float32", "transformers_version": "4.50.0", "use_cache": True, "vocab_size": V}
    cfg.update(kw)
    return cfg


# name, config builder and its changes, storage dtype, weight seed, GGUF conversions
# (scheme, file name, reference directory)
CASES = [
    ("llama-gqa", llama_config, {}, "F32", 11,
     [("F32", "llama-gqa.gguf", "llama-gqa"), ("F16", "llama-gqa-f16.gguf", "llama-gqa-f16"),
      ("Q8_0", "llama-gqa-q8_0.gguf", "llama-gqa-q8_0"),
      # as llama-quantize's *_M mixes: v and up in another type than q, k and gate
      ("MIX", "llama-gqa-mix.gguf", "llama-gqa-mix")]),
    # head_dim given (as transformers >= 4.45 writes it); llama3 rope scaling
    # with original_max_position_embeddings 64: at head_dim 16 and theta 5e5 the
    # wavelengths are 6.3 (< 64/4: kept), 32.3 (medium) and 167 .. 6e5 (> 64: / 8)
    ("llama-mqa-untied-rope3", llama_config,
     {"num_key_value_heads": 1, "head_dim": 16, "tie_word_embeddings": False, "rope_theta": 500000.0,
      "max_position_embeddings": 128, "intermediate_size": 128,
      "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                       "original_max_position_embeddings": 64, "rope_type": "llama3"}},
     "F32", 12, [("F32", "llama-mqa-untied-rope3.gguf", "llama-mqa-untied-rope3")]),
    ("llama-bf16", llama_config, {"torch_dtype": "bfloat16"}, "BF16", 11, []),
    ("llama-bias", llama_config, {"attention_bias": True, "mlp_bias": True, "rms_norm_eps": 1e-03,
                                  "intermediate_size": 96}, "F32", 14,
     [("F32", "llama-bias.gguf", "llama-bias")]),
    ("qwen2", qwen2_config, {}, "F32", 15, [("F32", "qwen2.gguf", "qwen2")]),
    ("qwen3", qwen3_config, {}, "F32", 16, [("F32", "qwen3.gguf", "qwen3")]),
    # llama.cpp writes no sliding window for Mistral (architecture llama): its
    # GGUF's reference is the same weights with full causal attention
    ("mistral", mistral_config, {}, "F32", 17, [("F32", "mistral.gguf", "mistral-nowindow")]),
    ("neox", neox_config, {}, "F32", 18, [("F32", "neox.gguf", "neox")]),
    ("neox-seq", neox_config, {"use_parallel_residual": False, "rotary_pct": 0.5, "rotary_emb_base": 20000,
                               "layer_norm_eps": 1e-03, "intermediate_size": 160}, "F32", 19, []),
    ("gemma", gemma_config, {}, "F32", 20,
     [("F32", "gemma.gguf", "gemma"), ("F16", "gemma-f16.gguf", "gemma-f16")]),
    # bfloat16: the embeddings' normalizer sqrt(96) = 9.798 is 9.8125 in bfloat16, as
    # transformers rounds it (llama.cpp does not: the GGUF's reference is unrounded)
    ("gemma-bf16", gemma_config, {"torch_dtype": "bfloat16", "num_key_value_heads": 2}, "BF16", 21,
     [("F32", "gemma-bf16.gguf", "gemma-bf16-gguf")]),
    # llama.cpp's converter does not write query_pre_attn_scalar: it scales by
    # head_dim^-1/2 (but for the 27B models): the GGUF's reference does so too
    ("gemma2", gemma2_config, {}, "F32", 22,
     [("F32", "gemma2.gguf", "gemma2-gguf"), ("Q8_0", "gemma2-q8_0.gguf", "gemma2-q8_0")]),
    ("gemma3", gemma3_config, {}, "F32", 23,
     [("F32", "gemma3.gguf", "gemma3"), ("Q8_0", "gemma3-q8_0.gguf", "gemma3-q8_0")]),
    # the layer pattern as layer_types (every other layer global), linear rope
    # scaling on the global layers, a final soft-cap, bfloat16, an untied head
    ("gemma3-scaled", gemma3_config,
     {"num_hidden_layers": 4, "sliding_window_pattern": None, "query_pre_attn_scalar": 24,
      "layer_types": ["sliding_attention", "full_attention"] * 2, "final_logit_softcapping": 5.0,
      "rope_scaling": {"factor": 4.0, "rope_type": "linear"}, "torch_dtype": "bfloat16",
      "tie_word_embeddings": False}, "BF16", 24, []),
]


# ----------------------------------------------------------------------------
# random weights, HF names, model order

def random_weights(cfg, seed):
    """{HF name: float32 array} in model order. Matrices normal (std 0.1 - 0.3),
    norm weights 1 + N(0, 0.1) (Gemma's, applied as 1 + w: N(0, 0.1)), biases
    N(0, 0.05)."""
    rng = np.random.default_rng(seed)
    nrm = lambda std, *shape: (rng.standard_normal(shape) * std).astype(F32)
    one = lambda n: (1 + rng.standard_normal(n) * 0.1).astype(F32)
    C, F, V, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    H = cfg["num_attention_heads"]
    w = {}
    if cfg["model_type"] == "gpt_neox":
        w["gpt_neox.embed_in.weight"] = nrm(0.3, V, C)
        for l in range(L):
            p = f"gpt_neox.layers.{l}."
            for n in ("input_layernorm", "post_attention_layernorm"):
                w[p + n + ".weight"] = one(C)
                w[p + n + ".bias"] = nrm(0.05, C)
            for n, o, i, s in [("attention.query_key_value", 3 * C, C, 0.15), ("attention.dense", C, C, 0.1),
                               ("mlp.dense_h_to_4h", F, C, 0.12), ("mlp.dense_4h_to_h", C, F, 0.1)]:
                w[p + n + ".weight"] = nrm(s, o, i)
                w[p + n + ".bias"] = nrm(0.05, o)
        w["gpt_neox.final_layer_norm.weight"] = one(C)
        w["gpt_neox.final_layer_norm.bias"] = nrm(0.05, C)
        w["embed_out.weight"] = nrm(0.3, V, C)
        return w
    hd = cfg.get("head_dim") or C // H
    KV = cfg["num_key_value_heads"]
    mt = cfg["model_type"]
    if mt in decoder_ref.GEMMAS:
        return gemma_weights(cfg, rng, nrm, C, F, V, L, H, hd, KV)
    qkv_bias = mt == "qwen2" or cfg.get("attention_bias", False)
    o_bias = mt != "qwen2" and cfg.get("attention_bias", False)
    mlp_bias = cfg.get("mlp_bias", False)
    w["model.embed_tokens.weight"] = nrm(0.3, V, C)
    for l in range(L):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = one(C)
        for n, o, i, s, b in [("q_proj", H * hd, C, 0.15, qkv_bias), ("k_proj", KV * hd, C, 0.15, qkv_bias),
                              ("v_proj", KV * hd, C, 0.12, qkv_bias), ("o_proj", C, H * hd, 0.1, o_bias)]:
            w[p + "self_attn." + n + ".weight"] = nrm(s, o, i)
            if b:
                w[p + "self_attn." + n + ".bias"] = nrm(0.1, o)
        if mt == "qwen3":
            w[p + "self_attn.q_norm.weight"] = one(hd)
            w[p + "self_attn.k_norm.weight"] = one(hd)
        w[p + "post_attention_layernorm.weight"] = one(C)
        for n, o, i, s in [("gate_proj", F, C, 0.12), ("up_proj", F, C, 0.12), ("down_proj", C, F, 0.1)]:
            w[p + "mlp." + n + ".weight"] = nrm(s, o, i)
            if mlp_bias:
                w[p + "mlp." + n + ".bias"] = nrm(0.05, o)
    w["model.norm.weight"] = one(C)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = nrm(0.3, V, C)
    return w


def gemma_weights(cfg, rng, nrm, C, F, V, L, H, hd, KV):
    gen = decoder_ref.GEMMAS[cfg["model_type"]]
    small = lambda n: (rng.standard_normal(n) * 0.1).astype(F32)   # applied as 1 + w
    norms = ["input_layernorm", "post_attention_layernorm"]
    if gen >= 2:
        norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
    w = {"model.embed_tokens.weight": nrm(0.3, V, C)}
    for l in range(L):
        p = f"model.layers.{l}."
        for n in norms:
            w[p + n + ".weight"] = small(C)
        for n, o, i, sd in [("q_proj", H * hd, C, 0.15), ("k_proj", KV * hd, C, 0.15), ("v_proj", KV * hd, C, 0.12),
                            ("o_proj", C, H * hd, 0.1)]:
            w[p + "self_attn." + n + ".weight"] = nrm(sd, o, i)
        if gen == 3:
            w[p + "self_attn.q_norm.weight"] = small(hd)
            w[p + "self_attn.k_norm.weight"] = small(hd)
        for n, o, i, sd in [("gate_proj", F, C, 0.12), ("up_proj", F, C, 0.12), ("down_proj", C, F, 0.1)]:
            w[p + "mlp." + n + ".weight"] = nrm(sd, o, i)
    w["model.norm.weight"] = small(C)
    if not cfg.get("tie_word_embeddings", True):
        w["lm_head.weight"] = nrm(0.3, V, C)
    return w


def gemma_controls(name, cfg, hp, params, ids, logits):
    """What an engine missing one of Gemma's features would compute: each far from
    the reference: at least 25 times the test's tolerance of 2e-4. Returns the report line."""
    import copy
    gen = hp["gemma"]

    def without(**changes):
        h = dict(hp)
        h.update(changes)
        return decoder_ref.forward(h, params, ids)

    def minus_one(ps):   # norms applied as w, not 1 + w
        q = copy.deepcopy(ps)
        for p in [q] + q["layers"]:
            for k, v in p.items():
                if isinstance(v, dict) and v.get("b", 0) is None and k not in ("q", "k", "v", "o", "gate", "up", "down"):
                    v["w"] = v["w"] - 1.0
                elif k in ("q_norm", "k_norm") and v is not None:
                    p[k] = v - 1.0
        return q
    controls = {"norm w, not 1 + w": decoder_ref.forward(hp, minus_one(params), ids),
                "no embedding scale": without(normalizer=1.0)}
    if cfg.get("torch_dtype") == "bfloat16":
        controls["normalizer not rounded to bfloat16"] = without(normalizer=hp["n_embd"] ** 0.5)
    if gen >= 2:
        controls["no window"] = without(windows=[None] * hp["n_layer"])
        if hp["scale"] != hp["head_dim"] ** -0.5:
            controls["head_dim^-1/2, not query_pre_attn_scalar's"] = without(scale=hp["head_dim"] ** -0.5)
    if hp["attn_cap"]:
        controls["no attention soft-cap"] = without(attn_cap=None)
    if hp["final_cap"]:
        controls["no final soft-cap"] = without(final_cap=None)
    if gen == 3:
        controls["local layers by rope_theta"] = without(layer_inv_freq=[hp["inv_freq"]] * hp["n_layer"])
        if hp["rope_scaling"]:
            plain = decoder_ref.rope_inv_freq(hp["theta"], hp["rot_dim"])
            controls["no linear rope scaling"] = without(
                inv_freq=plain, layer_inv_freq=[f if w is not None else plain
                                                for f, w in zip(hp["layer_inv_freq"], hp["windows"])])
    out = []
    for what, other in controls.items():
        d = np.abs(other - logits).max()
        assert d > 25 * 2e-4, (name, what, d)
        out.append(f"{what} {d:.3g}")
    return "\n  controls (max |logits - reference|): " + ", ".join(out)


def write_model(mdir, cfg, weights, dtype, tok_json):
    mk.write(os.path.join(mdir, "config.json"), json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tensors = [(n, dtype, a.shape, mk.encode_tensor(a, dtype)) for n, a in weights.items()]
    mk.write(os.path.join(mdir, "model.safetensors"), mk.pack(*mk.layout(tensors)))
    mk.write(os.path.join(mdir, "tokenizer.json"), tok_json)
    # as a chat model's directory has them: its template and special tokens, and
    # generation_config.json's end ids (an extra one, 5, to be told apart from eos)
    tcfg = {"chat_template": CHAT_TEMPLATE, "bos_token": None, "eos_token": EOT,
            "tokenizer_class": "PreTrainedTokenizerFast"}
    mk.write(os.path.join(mdir, "tokenizer_config.json"), json.dumps(tcfg, indent=2) + "\n")
    gen = {"bos_token_id": cfg["bos_token_id"], "eos_token_id": [cfg["eos_token_id"], 5]}
    mk.write(os.path.join(mdir, "generation_config.json"), json.dumps(gen, indent=2) + "\n")


def write_ref(rdir, ids, logits):
    T, V = logits.shape
    mk.write(os.path.join(rdir, "ids.txt"), " ".join(map(str, ids)) + "\n")
    mk.write(os.path.join(rdir, "logits.f32"), logits.astype("<f4").tobytes())
    mk.write(os.path.join(rdir, "meta.txt"), f"{T} {V}\n")


# ----------------------------------------------------------------------------
# GGUF, as llama.cpp's convert_hf_to_gguf.py writes it

GGUF_ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gpt_neox": "gptneox",
             "gemma": "gemma", "gemma2": "gemma2", "gemma3_text": "gemma3"}
# ChatML, as Qwen's and SmolLM2's tokenizer_config.json carry it
CHAT_TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                 "{% endif %}")

FILE_TYPE = {"F32": 0, "F16": 1, "Q8_0": 7, "MIX": 7}

LLAMA_NAMES = [("input_layernorm", "attn_norm"), ("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"),
               ("self_attn.v_proj", "attn_v"), ("self_attn.o_proj", "attn_output"),
               ("self_attn.q_norm", "attn_q_norm"), ("self_attn.k_norm", "attn_k_norm"),
               ("post_attention_layernorm", "ffn_norm"), ("mlp.gate_proj", "ffn_gate"),
               ("mlp.up_proj", "ffn_up"), ("mlp.down_proj", "ffn_down")]
# Gemma 2 and 3 (gguf-py's TensorNameMap for their MODEL_TENSORS): four norms a block
GEMMA2_NAMES = [("input_layernorm", "attn_norm"), ("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"),
                ("self_attn.v_proj", "attn_v"), ("self_attn.o_proj", "attn_output"),
                ("self_attn.q_norm", "attn_q_norm"), ("self_attn.k_norm", "attn_k_norm"),
                ("post_attention_layernorm", "post_attention_norm"), ("pre_feedforward_layernorm", "ffn_norm"),
                ("post_feedforward_layernorm", "post_ffw_norm"), ("mlp.gate_proj", "ffn_gate"),
                ("mlp.up_proj", "ffn_up"), ("mlp.down_proj", "ffn_down")]
NEOX_NAMES = [("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm"),
              ("attention.query_key_value", "attn_qkv"), ("attention.dense", "attn_output"),
              ("mlp.dense_h_to_4h", "ffn_up"), ("mlp.dense_4h_to_h", "ffn_down")]


def gguf_name(hf, arch="llama"):
    """HF tensor name -> llama.cpp's (gguf-py's TensorNameMap)."""
    fixed = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight", "gpt_neox.embed_in.weight": "token_embd.weight",
             "gpt_neox.final_layer_norm.weight": "output_norm.weight",
             "gpt_neox.final_layer_norm.bias": "output_norm.bias", "embed_out.weight": "output.weight"}
    if hf in fixed:
        return fixed[hf]
    parts = hf.split(".")
    prefix, l = ("model.layers.", parts[2]) if hf.startswith("model.") else ("gpt_neox.layers.", parts[2])
    rest = hf[len(prefix) + len(l) + 1:]
    names = GEMMA2_NAMES if arch in ("gemma2", "gemma3") else LLAMA_NAMES if hf.startswith("model.") else NEOX_NAMES
    for h, g in names:
        if rest.startswith(h + "."):
            return f"blk.{l}.{g}.{rest[len(h) + 1:]}"
    raise KeyError(hf)


def permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: rows regrouped from HF's
    rotate_half halves to llama.cpp's adjacent pairs, per head."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def neox_split_qkv(w, n_head):
    """GPTNeoXModel.modify_tensors: HF's per-head [q | k | v] rows -> all q rows,
    all k rows, all v rows (weight (3C, C) or bias (3C,))."""
    C = w.shape[0] // 3
    x = w.reshape(n_head, 3, C // n_head, *w.shape[1:])
    return np.concatenate([x[:, 0].reshape(C, *w.shape[1:]), x[:, 1].reshape(C, *w.shape[1:]),
                           x[:, 2].reshape(C, *w.shape[1:])], axis=0)


def neox_join_qkv(w, n_head):
    C = w.shape[0] // 3
    q, k, v = w[:C], w[C:2 * C], w[2 * C:]
    return np.stack([a.reshape(n_head, C // n_head, *w.shape[1:]) for a in (q, k, v)], axis=1).reshape(w.shape)


def llama3_rope_factors(cfg):
    """LlamaModel.generate_extra_tensors: per frequency, 1 (high), factor (low)
    or 1 / ((1 - smooth) / factor + smooth) (medium) - the divisor llama.cpp
    applies to theta^(-2i/d). (llama.cpp's converter reads
    original_max_position_embeddings from the top level of config.json, default
    8192; here it is taken from rope_scaling, where transformers reads it.)"""
    sc = cfg["rope_scaling"]
    dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    freqs = 1.0 / (cfg["rope_theta"] ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    factor, lo, hi = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"]
    old = sc["original_max_position_embeddings"]
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < old / hi:
            out.append(1.0)
        elif wavelen > old / lo:
            out.append(factor)
        else:
            smooth = (old / wavelen - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=F32)


def convert(name, cfg, weights, tokens, merges, scheme):
    """HF weights (float32, HF names) -> (Gguf, {HF name: float32 as the file
    decodes, in HF layout}). scheme: F32, F16 (matrices), Q8_0 (matrices) or MIX
    (matrices Q8_0, v_proj and up_proj F16, as llama-quantize mixes types)."""
    mt = cfg["model_type"]
    arch = GGUF_ARCH[mt]
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    g = gw.Gguf(3)
    S, U32, F32K, BOOL, ARR, I32 = gw.STRING, gw.U32, gw.FLOAT32, gw.BOOL, gw.ARRAY, gw.I32
    g.add("general.architecture", S, arch)
    g.add("general.type", S, "model")
    g.add("general.name", S, name)
    if mt == "gpt_neox":   # GPTNeoXModel.set_gguf_parameters (no head_count_kv, no rope.freq_base)
        g.add(f"{arch}.context_length", U32, cfg["max_position_embeddings"])
        g.add(f"{arch}.embedding_length", U32, C)
        g.add(f"{arch}.block_count", U32, cfg["num_hidden_layers"])
        g.add(f"{arch}.feed_forward_length", U32, cfg["intermediate_size"])
        g.add(f"{arch}.rope.dimension_count", U32, int(cfg["rotary_pct"] * (C // H)))
        g.add(f"{arch}.attention.head_count", U32, H)
        g.add(f"{arch}.use_parallel_residual", BOOL, cfg.get("use_parallel_residual", True))
        g.add(f"{arch}.attention.layer_norm_epsilon", F32K, cfg["layer_norm_eps"])
        g.add("general.file_type", U32, FILE_TYPE[scheme])
    elif arch in ("gemma", "gemma2"):   # GemmaModel / Gemma2Model.set_gguf_parameters (no rope.freq_base)
        g.add(f"{arch}.context_length", U32, cfg["max_position_embeddings"])
        g.add(f"{arch}.embedding_length", U32, C)
        g.add(f"{arch}.block_count", U32, cfg["num_hidden_layers"])
        g.add(f"{arch}.feed_forward_length", U32, cfg["intermediate_size"])
        g.add(f"{arch}.attention.head_count", U32, H)
        g.add(f"{arch}.attention.head_count_kv", U32, KV)
        g.add(f"{arch}.attention.layer_norm_rms_epsilon", F32K, cfg["rms_norm_eps"])
        g.add(f"{arch}.attention.key_length", U32, cfg["head_dim"])
        g.add(f"{arch}.attention.value_length", U32, cfg["head_dim"])
        g.add("general.file_type", U32, FILE_TYPE[scheme])
        if arch == "gemma2":
            g.add(f"{arch}.attn_logit_softcapping", F32K, cfg["attn_logit_softcapping"])
            g.add(f"{arch}.final_logit_softcapping", F32K, cfg["final_logit_softcapping"])
            g.add(f"{arch}.attention.sliding_window", U32, cfg["sliding_window"])
    else:                  # TextModel.set_gguf_parameters, then LlamaModel's (Gemma3Model's) additions
        g.add(f"{arch}.block_count", U32, cfg["num_hidden_layers"])
        g.add(f"{arch}.context_length", U32, cfg["max_position_embeddings"])
        g.add(f"{arch}.embedding_length", U32, C)
        g.add(f"{arch}.feed_forward_length", U32, cfg["intermediate_size"])
        g.add(f"{arch}.attention.head_count", U32, H)
        g.add(f"{arch}.attention.head_count_kv", U32, KV)
        g.add(f"{arch}.rope.freq_base", F32K, float(cfg["rope_theta"]))
        g.add(f"{arch}.attention.layer_norm_rms_epsilon", F32K, cfg["rms_norm_eps"])
        if cfg.get("head_dim") is not None:
            g.add(f"{arch}.attention.key_length", U32, cfg["head_dim"])
            g.add(f"{arch}.attention.value_length", U32, cfg["head_dim"])
        g.add("general.file_type", U32, FILE_TYPE[scheme])
        if arch == "llama":
            g.add(f"{arch}.vocab_size", U32, cfg["vocab_size"])
            g.add(f"{arch}.rope.dimension_count", U32, cfg.get("head_dim") or C // H)
        if arch == "gemma3":
            if (cfg.get("rope_scaling") or {}).get("rope_type") == "linear":
                g.add(f"{arch}.rope.scaling.type", S, "linear")
                g.add(f"{arch}.rope.scaling.factor", F32K, cfg["rope_scaling"]["factor"])
            if cfg.get("final_logit_softcapping"):
                g.add(f"{arch}.final_logit_softcapping", F32K, cfg["final_logit_softcapping"])
            if cfg.get("sliding_window_pattern") != 1:
                g.add(f"{arch}.attention.sliding_window", U32, cfg["sliding_window"])
    g.add("general.quantization_version", U32, 2)
    g.add("tokenizer.ggml.model", S, "gpt2")
    g.add("tokenizer.ggml.pre", S, "gpt-2")
    g.add("tokenizer.ggml.tokens", ARR, (S, tokens))
    g.add("tokenizer.ggml.token_type", ARR, (I32, [3 if t == EOT else 1 for t in tokens]))
    g.add("tokenizer.ggml.merges", ARR, (S, [f"{a} {b}" for a, b in merges]))
    g.add("tokenizer.ggml.bos_token_id", U32, cfg["bos_token_id"])
    g.add("tokenizer.ggml.eos_token_id", U32, cfg["eos_token_id"])
    g.add("tokenizer.chat_template", S, CHAT_TEMPLATE)   # as the converter copies tokenizer_config.json's

    decoded = {}
    if (cfg.get("rope_scaling") or {}).get("rope_type") == "llama3":   # generate_extra_tensors comes first
        rf = llama3_rope_factors(cfg)
        g.add_tensor("rope_freqs.weight", [len(rf)], "F32", gw.encode_tensor(rf, "F32"))
    for hf, a in weights.items():
        if arch.startswith("gemma") and hf == "lm_head.weight":   # the converter skips it
            continue
        gname = gguf_name(hf, arch)
        to, back = (lambda x: x), (lambda x: x)
        if arch.startswith("gemma") and hf.endswith("norm.weight"):   # stored as the 1 + w applied
            to, back = (lambda x: x + F32(1)), (lambda x: x.astype(np.float64) - 1.0)
        elif arch == "llama" and (".q_proj." in hf or ".k_proj." in hf):
            nh = H if ".q_proj." in hf else KV
            to, back = (lambda x, nh=nh: permute(x, nh)), (lambda x, nh=nh: unpermute(x, nh))
        elif arch == "gptneox" and ".query_key_value." in hf:
            to, back = (lambda x: neox_split_qkv(x, H)), (lambda x: neox_join_qkv(x, H))
        stored = np.ascontiguousarray(to(a))
        typ = "F32"
        if stored.ndim == 2 and scheme == "MIX":   # Q8_0 but v_proj and up_proj, F16
            typ = "F16" if ".v_proj." in hf or ".up_proj." in hf or stored.shape[1] % 32 else "Q8_0"
        elif stored.ndim == 2 and scheme != "F32":
            typ = scheme if scheme == "F16" or stored.shape[1] % 32 == 0 else "F16"
        raw = gw.encode_tensor(stored, typ)
        g.add_tensor(gname, list(reversed(stored.shape)), typ, raw)
        decoded[hf] = np.ascontiguousarray(back(gw.decode_tensor(raw, typ, stored.shape)))
        if typ == "F32" and not (arch.startswith("gemma") and hf.endswith("norm.weight")):
            assert np.array_equal(decoded[hf], a), hf
    return g, decoded


# ----------------------------------------------------------------------------

def t5_config(cfg):
    """cfg as transformers 5 saves it (save_pretrained of 5.17, seen on every
    case): "dtype" for "torch_dtype", and rope_parameters in place of rope_theta,
    rope_scaling, GPT-NeoX's rotary_emb_base and rotary_pct
    (partial_rotary_factor) and Gemma 3's rope_local_base_freq (an object per
    layer type)."""
    c = dict(cfg, transformers_version="5.17.0")
    if "torch_dtype" in c:
        c["dtype"] = c.pop("torch_dtype")
    mt = c["model_type"]
    scaling = c.pop("rope_scaling", None) or {}
    kind = {k: v for k, v in scaling.items() if k not in ("type", "rope_type")}
    kind["rope_type"] = scaling.get("rope_type", scaling.get("type", "default"))
    if mt == "gpt_neox":
        rp = {"partial_rotary_factor": c.pop("rotary_pct", 0.25), "rope_theta": c.pop("rotary_emb_base", 10000)}
        rp.update(kind)
    elif mt == "gemma3_text":
        rp = {"full_attention": dict(kind, rope_theta=c.pop("rope_theta", 1e6)),
              "sliding_attention": {"rope_theta": c.pop("rope_local_base_freq", 1e4), "rope_type": "default"}}
    else:
        rp = dict(kind, rope_theta=c.pop("rope_theta", 1e4))
    c["rope_parameters"] = rp
    return c


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixtures", required=True)
    args = ap.parse_args(argv)
    t0 = time.time()
    out = os.path.join(args.fixtures, "arch")
    shutil.rmtree(out, ignore_errors=True)

    vocab, merges = mk.train_bpe(TRAIN_TEXT, N_MERGES)
    V = len(vocab)
    assert V == 256 + N_MERGES + 1 and vocab[EOT] == V - 1
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    tok_json = tokenizer_json(vocab, merges)

    case_lines, gguf_lines = [], []
    for case, make_cfg, changes, dtype, seed, ggufs in CASES:
        cfg = make_cfg(V, **changes)
        weights = random_weights(cfg, seed)
        mdir = os.path.join(out, "models", case)
        write_model(mdir, cfg, weights, dtype, tok_json)
        write_model(os.path.join(out, "t5", case), t5_config(cfg), weights, dtype, tok_json)
        hp, params = decoder_ref.load_model(mdir)          # the weights as stored (BF16 rounded)
        ids = [int(i) for i in np.random.default_rng(1000 + seed).integers(0, V, size=T_REF)]
        logits = decoder_ref.forward(hp, params, ids)
        write_ref(os.path.join(out, "ref", case), ids, logits)
        info = f"{case}: logits std {logits.std():.2f}, max {np.abs(logits).max():.2f}"

        if case == "llama-mqa-untied-rope3":
            regimes = decoder_ref.rope_regimes(hp)
            assert set(regimes) == {"high", "medium", "low"}, regimes
            plain = decoder_ref.rope_inv_freq(hp["theta"], hp["rot_dim"])
            info += "\n  inv_freq " + " ".join(f"{a:.4g}->{b:.4g}({r})" for a, b, r in
                                               zip(plain, hp["inv_freq"], regimes))
            assert np.allclose(plain / hp["inv_freq"], llama3_rope_factors(cfg), rtol=1e-6)
        if hp["model_type"] in ("mistral", "qwen2"):
            W = cfg["sliding_window"]
            if hp["model_type"] == "mistral":    # the window masks, from position W on
                other = decoder_ref.forward(hp, params, ids, windows=[None] * hp["n_layer"])
                write_ref(os.path.join(out, "ref", "mistral-nowindow"), ids, other)
            else:                                # use_sliding_window false: a window would change them
                other = decoder_ref.forward(hp, params, ids, windows=[W] * hp["n_layer"])
            d = np.abs(other - logits).max(axis=1)
            assert d[:W].max() < 1e-12 and d[W:].min() > 1e-3, d
            info += f"\n  |logits with window {W} - without|: positions < {W} {d[:W].max():.2g}, " \
                    f">= {W} from {d[W:].min():.3g} to {d[W:].max():.3g}"
        if hp["model_type"] in decoder_ref.GEMMAS:
            info += gemma_controls(case, cfg, hp, params, ids, logits)
            if hp["gemma"] == 2:   # every layer's attention, for the microscope's rows
                probs = []
                decoder_ref.forward(hp, params, ids, probs_out=probs)
                mk.write(os.path.join(out, "ref", case, "attn.f32"), np.stack(probs).astype("<f4").tobytes())
        if case == "llama-bf16":
            f32 = np.fromfile(os.path.join(out, "ref", "llama-gqa", "logits.f32"), dtype="<f4")
            info += f"\n  max |logits - llama-gqa's| = {np.abs(logits.astype(F32).ravel() - f32).max():.3g}"
        print(info)

        if dtype == "BF16":   # converted as stored
            weights = {n: (mk.f32_to_bf16_bits(a).astype(np.uint32) << 16).view(F32) for n, a in weights.items()}
        for scheme, fname, refname in ggufs:
            g, decoded = convert(case, cfg, weights, tokens, merges, scheme)
            mk.write(os.path.join(out, "gguf", fname), g.to_bytes())
            if refname != case and refname != "mistral-nowindow":
                ghp = hp
                if hp["model_type"] in decoder_ref.GEMMAS:   # as llama.cpp runs the file
                    ghp = dict(hp, normalizer=float(F32(hp["n_embd"] ** 0.5)))
                    if hp["gemma"] >= 2:
                        ghp["scale"] = float(F32(1) / np.sqrt(F32(hp["head_dim"])))
                deq = decoder_ref.forward(ghp, decoder_ref.build_params(hp, decoded), ids)
                write_ref(os.path.join(out, "ref", refname), ids, deq)
                print(f"  {fname}: max |logits - F32 logits| = {np.abs(deq - logits).max():.3g}")
            gguf_lines.append(f"{fname}\t{case}\t{refname}\t{scheme}")
        first = ggufs[0] if ggufs else ("-", "-", "-")
        case_lines.append(f"{case}\t{cfg['model_type']}\t{first[1]}\t{first[2]}")

    mk.write(os.path.join(out, "chat_template.jinja"), CHAT_TEMPLATE)   # what the files carry, for the tests
    mk.write(os.path.join(out, "cases.tsv"), "\n".join(case_lines) + "\n")
    mk.write(os.path.join(out, "gguf.tsv"), "\n".join(gguf_lines) + "\n")
    print(f"arch fixtures: {len(CASES)} models, {len(gguf_lines)} GGUF files, tokenizer {V} tokens, "
          f"written to {out} in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
