#!/usr/bin/python3
"""decoder_ref.py - an independent reference forward pass in numpy (float64) for
the decoder families after GPT-2: Llama, Mistral, Qwen2, Qwen3, GPT-NeoX and
Gemma 1, 2, 3 (text).

Written from the Hugging Face modeling definitions (modeling_llama,
modeling_mistral, modeling_qwen2, modeling_qwen3, modeling_gpt_neox,
modeling_gemma, modeling_gemma2, modeling_gemma3 and modeling_rope_utils'
_compute_llama3_parameters), in the style of gpt2_ref.py: every function is the
textbook formula, every array carries its shape.

What it reads (a Hugging Face model directory):
    config.json        model_type llama | mistral | qwen2 | qwen3 | gpt_neox |
                       gemma | gemma2 | gemma3_text and that type's keys (see load_config)
    model.safetensors  F32, F16 or BF16, read by gpt2_ref.read_safetensors; HF's
                       names (model.layers.N.self_attn.q_proj.weight, ...,
                       gpt_neox.layers.N.attention.query_key_value.weight, ...)

Math (nn.Linear weights are (out, in): y = x @ W.T + b):
  Llama / Mistral / Qwen2 / Qwen3
    x = embed_tokens[ids]
    per layer:  h = x + o_proj(attn(input_layernorm(x)))
                x = h + down_proj(silu(gate_proj(n)) * up_proj(n)),  n = post_attention_layernorm(h)
    logits = norm(x) @ lm_head.T          (lm_head tied to embed_tokens when absent)
    RMSNorm(x) = x / sqrt(mean(x^2) + eps) * w
    attention: q (H, T, hd), k and v (KV, T, hd); query head h reads kv head
    h // (H / KV); Qwen3 applies q_norm / k_norm (RMSNorm over hd) per head
    before the rotary embedding; scores / sqrt(hd), causal softmax; Mistral's
    sliding_window W: query i sees keys j with 0 <= i - j < W.
  GPT-NeoX
    x = embed_in[ids]
    per layer:  a = dense(attn(input_layernorm(x)))
                parallel:   x = x + a + mlp(post_attention_layernorm(x))
                sequential: h = x + a;  x = h + mlp(post_attention_layernorm(h))
    logits = final_layer_norm(x) @ embed_out.T
    query_key_value's output is per head [q | k | v] (HF's interleaved layout);
    rotary on the first int(hd * rotary_pct) dims of q and k only;
    mlp = dense_4h_to_h(act(dense_h_to_4h(x))), act "gelu" = exact erf GELU.
  Gemma (1, 2, 3)
    x = embed_tokens[ids] * normalizer, normalizer = sqrt(hidden_size) rounded
    to the model's dtype (torch.tensor(hidden_size ** 0.5, dtype))
    RMSNorm(x) = x / sqrt(mean(x^2) + eps) * (1 + w)   (every norm, q/k norms too)
    mlp = down_proj(gelu_tanh(gate_proj(n)) * up_proj(n))
    Gemma 1:  as Llama (input_layernorm, post_attention_layernorm before the MLP)
    Gemma 2/3: h = x + post_attention_layernorm(o_proj(attn(input_layernorm(x))))
               x = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))
    scores * query_pre_attn_scalar^-0.5 (Gemma 1: head_dim^-0.5), then
    attn_logit_softcapping c: c tanh(s / c), then the mask and softmax;
    logits -> final_logit_softcapping c: c tanh(z / c).
    Sliding layers (sliding_window): Gemma 2 every layer l with l % 2 == 0,
    Gemma 3 those with (l + 1) % sliding_window_pattern != 0 (or as
    layer_types says); Gemma 3's q_norm / k_norm before the rotary embedding,
    whose base is rope_local_base_freq on sliding layers (no scaling) and
    rope_theta with rope_scaling (linear: inv_freq / factor) on the others.
  Rotary (rotate_half form): inv_freq[i] = theta^(-2i/d), i < d/2, d the rotary
  dims; angle = pos * inv_freq; cos, sin = cos/sin(cat(angle, angle));
  x' = x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x[d/2:], x[:d/2]).
  rope_scaling {"rope_type": "llama3"} rescales inv_freq as
  modeling_rope_utils._compute_llama3_parameters does (see rope_inv_freq).

All weights are widened to float64 after decoding their stored dtype.

Usage as a script:
    /usr/bin/python3 decoder_ref.py MODEL_DIR ID [ID ...]   per-position argmax
    /usr/bin/python3 decoder_ref.py --logits OUT MODEL_DIR ID [ID ...]
                                                       every position's logits to OUT,
                                                       float32 (T, V) little-endian
    /usr/bin/python3 decoder_ref.py --selftest MODEL_DIR     loop/KV-cache version, causality
    /usr/bin/python3 decoder_ref.py --torch-check MODEL_DIR  against PyTorch (float64)
"""

import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_ref  # noqa: E402

LLAMA_LIKE = ("llama", "mistral", "qwen2", "qwen3")
GEMMAS = {"gemma": 1, "gemma2": 2, "gemma3_text": 3}
MODEL_TYPES = LLAMA_LIKE + ("gpt_neox",) + tuple(GEMMAS)

# ----------------------------------------------------------------------------
# config


def rope_inv_freq(theta, dim, scaling=None):
    """(dim/2,) inverse frequencies theta^(-2i/dim), rescaled for llama3.

    _compute_llama3_parameters: wavelen = 2 pi / inv_freq;
      wavelen < original / high_freq_factor  (high frequencies): kept
      wavelen > original / low_freq_factor   (low frequencies):  inv_freq / factor
      otherwise (medium): s = (original / wavelen - low) / (high - low),
                          inv_freq * ((1 - s) / factor + s)"""
    inv = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)      # (dim/2,)
    if not scaling:
        return inv
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind in (None, "default"):
        return inv
    if kind == "linear":                     # _compute_linear_scaling_rope_parameters
        return inv / float(scaling["factor"])
    if kind != "llama3":
        raise ValueError(f"rope_scaling type {kind!r} is not implemented here")
    factor = float(scaling["factor"])
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    old_ctx = float(scaling["original_max_position_embeddings"])
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_ctx / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, scaled)


def rope_regimes(hp):
    """For llama3 scaling: per frequency 'high' (kept), 'low' (/ factor) or
    'medium' (interpolated); for information and the fixtures' sanity check."""
    sc = hp["rope_scaling"]
    inv = rope_inv_freq(hp["theta"], hp["rot_dim"])
    wavelen = 2 * math.pi / inv
    old = float(sc["original_max_position_embeddings"])
    hi_w, lo_w = old / float(sc["high_freq_factor"]), old / float(sc["low_freq_factor"])
    return ["high" if w < hi_w else "low" if w > lo_w else "medium" for w in wavelen]


def load_config(model_dir=None, cfg=None):
    """config.json -> hparams dict (the same keys for every family)."""
    if cfg is None:
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
    mt = cfg.get("model_type")
    if mt not in MODEL_TYPES:
        raise ValueError(f"model_type {mt!r}: decoder_ref runs {', '.join(MODEL_TYPES)}")
    C, H, L = int(cfg["hidden_size"]), int(cfg["num_attention_heads"]), int(cfg["num_hidden_layers"])
    hp = {"model_type": mt, "n_embd": C, "n_head": H, "n_layer": L,
          "n_ff": int(cfg["intermediate_size"]), "vocab_size": int(cfg["vocab_size"]),
          "n_ctx": int(cfg["max_position_embeddings"]),
          "tied": bool(cfg.get("tie_word_embeddings", False)),
          "act": cfg.get("hidden_act", "silu" if mt != "gpt_neox" else "gelu"),
          "rope_scaling": cfg.get("rope_scaling")}
    if mt in GEMMAS:
        return gemma_config(cfg, hp)
    if mt == "gpt_neox":
        hd = C // H
        pct = cfg.get("rotary_pct", cfg.get("partial_rotary_factor", 0.25))   # GPTNeoXConfig's default
        hp.update(n_kv=H, head_dim=hd, rot_dim=int(hd * pct), eps=float(cfg.get("layer_norm_eps", 1e-5)),
                  theta=float(cfg.get("rotary_emb_base", cfg.get("rope_theta", 10000.0))),
                  parallel=bool(cfg.get("use_parallel_residual", True)),
                  attn_bias=bool(cfg.get("attention_bias", True)), windows=[None] * L)
    else:
        hd = cfg.get("head_dim") or C // H
        hp.update(n_kv=int(cfg.get("num_key_value_heads") or H), head_dim=int(hd), rot_dim=int(hd),
                  eps=float(cfg.get("rms_norm_eps", 1e-6)), theta=float(cfg.get("rope_theta", 10000.0)))
        # sliding window: Mistral on every layer; Qwen2/Qwen3 only with
        # use_sliding_window, on layers from max_window_layers on
        W = cfg.get("sliding_window")
        if mt == "mistral":
            hp["windows"] = [W] * L
        elif mt in ("qwen2", "qwen3") and cfg.get("use_sliding_window", False) and W is not None:
            first = int(cfg.get("max_window_layers", L))
            hp["windows"] = [W if l >= first else None for l in range(L)]
        else:
            hp["windows"] = [None] * L
    if hp["n_head"] % hp["n_kv"]:
        raise ValueError("num_attention_heads is not a multiple of num_key_value_heads")
    hp["inv_freq"] = rope_inv_freq(hp["theta"], hp["rot_dim"], hp["rope_scaling"])    # (rot_dim/2,)
    return hp


def round_to_dtype(x, dtype):
    """x (a Python float) as torch.tensor(x, dtype=dtype) holds it."""
    f = np.float32(x)
    if dtype == "bfloat16":       # round to nearest even on the top 16 bits
        u = int(f.view(np.uint32))
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        return float(np.uint32(u).view(np.float32))
    if dtype == "float16":
        return float(np.float16(f))
    return float(f)


def gemma_config(cfg, hp):
    """Gemma 1/2/3's keys, with the defaults of GemmaConfig, Gemma2Config and
    Gemma3TextConfig."""
    gen = GEMMAS[cfg["model_type"]]
    C, H, L = hp["n_embd"], hp["n_head"], hp["n_layer"]
    hd = int(cfg.get("head_dim") or 256)
    act = cfg.get("hidden_activation") or "gelu_pytorch_tanh"   # Gemma 1 ignores hidden_act
    theta = float(cfg.get("rope_theta", 1e6 if gen == 3 else 1e4))
    hp.update(n_kv=int(cfg.get("num_key_value_heads") or H), head_dim=hd, rot_dim=hd, act=act,
              eps=float(cfg.get("rms_norm_eps", 1e-6)), theta=theta, gemma=gen,
              tied=bool(cfg.get("tie_word_embeddings", True)),
              normalizer=round_to_dtype(C ** 0.5, cfg.get("torch_dtype", cfg.get("dtype", "float32"))))
    default_cap = lambda k, d: cfg.get(k, d) or None
    if gen == 1:
        hp.update(scale=hd ** -0.5, attn_cap=None, final_cap=None, windows=[None] * L)
    else:
        hp["scale"] = float(cfg.get("query_pre_attn_scalar", 256)) ** -0.5
        hp["attn_cap"] = default_cap("attn_logit_softcapping", 50.0 if gen == 2 else None)
        hp["final_cap"] = default_cap("final_logit_softcapping", 30.0 if gen == 2 else None)
        W = cfg.get("sliding_window", 4096)
        if cfg.get("layer_types"):
            types = cfg["layer_types"]
        elif gen == 2:
            types = ["sliding_attention" if (l + 1) % 2 else "full_attention" for l in range(L)]
        else:
            P = int(cfg.get("sliding_window_pattern", cfg.get("_sliding_window_pattern", 6)))
            types = ["sliding_attention" if (l + 1) % P else "full_attention" for l in range(L)]
        hp["windows"] = [W if t == "sliding_attention" else None for t in types]
    hp["inv_freq"] = rope_inv_freq(theta, hd, hp["rope_scaling"])
    if gen == 3:   # sliding layers rotate by rope_local_base_freq, unscaled
        local = rope_inv_freq(float(cfg.get("rope_local_base_freq", 1e4)), hd)
        hp["layer_inv_freq"] = [local if w is not None else hp["inv_freq"] for w in hp["windows"]]
    if hp["n_head"] % hp["n_kv"]:
        raise ValueError("num_attention_heads is not a multiple of num_key_value_heads")
    return hp


# ----------------------------------------------------------------------------
# weights


def build_params(hp, t):
    """{HF name: array} -> nested params of float64 arrays. A linear layer is
    {w: (out, in), b: (out,) or None}; a norm {w, b (LayerNorm) or None}."""
    t = {k: np.asarray(v, dtype=np.float64) for k, v in t.items()}
    C, V, F = hp["n_embd"], hp["vocab_size"], hp["n_ff"]
    H, KV, hd = hp["n_head"], hp["n_kv"], hp["head_dim"]

    def get(name, shape):
        if name not in t:
            raise KeyError(f"missing tensor {name}")
        if t[name].shape != tuple(shape):
            raise ValueError(f"tensor {name}: shape {t[name].shape}, expected {tuple(shape)}")
        return t[name]

    def opt(name, shape):
        return get(name, shape) if name in t else None

    def lin(p, o, i, bias=None):
        """bias None: whatever the file has; True: required; False: must be absent."""
        b = opt(p + ".bias", (o,))
        if bias is True and b is None:
            raise KeyError(f"missing tensor {p}.bias")
        if bias is False and b is not None:
            raise ValueError(f"unexpected tensor {p}.bias")
        return {"w": get(p + ".weight", (o, i)), "b": b}

    params = {"layers": []}
    if hp["model_type"] == "gpt_neox":
        ln = lambda p: {"w": get(p + ".weight", (C,)), "b": get(p + ".bias", (C,))}
        bias = hp["attn_bias"]
        params["embed"] = get("gpt_neox.embed_in.weight", (V, C))
        params["norm"] = ln("gpt_neox.final_layer_norm")
        params["lm_head"] = get("embed_out.weight", (V, C)) if not hp["tied"] else params["embed"]
        for l in range(hp["n_layer"]):
            p = f"gpt_neox.layers.{l}."
            params["layers"].append({
                "ln1": ln(p + "input_layernorm"), "ln2": ln(p + "post_attention_layernorm"),
                "qkv": lin(p + "attention.query_key_value", 3 * C, C, bias),
                "dense": lin(p + "attention.dense", C, C, bias),
                "fc_in": lin(p + "mlp.dense_h_to_4h", F, C, True),
                "fc_out": lin(p + "mlp.dense_4h_to_h", C, F, True)})
        return params

    if hp.get("gemma"):
        return gemma_params(hp, get, lin)
    rms = lambda p: {"w": get(p + ".weight", (C,)), "b": None}
    params["embed"] = get("model.embed_tokens.weight", (V, C))
    params["norm"] = rms("model.norm")
    # tie_word_embeddings: the head is embed_tokens (HF ties even when a file
    # also holds an lm_head.weight); otherwise lm_head.weight is required
    params["lm_head"] = params["embed"] if hp["tied"] else get("lm_head.weight", (V, C))
    for l in range(hp["n_layer"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        layer = {"ln1": rms(p + "input_layernorm"), "ln2": rms(p + "post_attention_layernorm"),
                 "q": lin(a + "q_proj", H * hd, C), "k": lin(a + "k_proj", KV * hd, C),
                 "v": lin(a + "v_proj", KV * hd, C), "o": lin(a + "o_proj", C, H * hd),
                 "gate": lin(p + "mlp.gate_proj", F, C), "up": lin(p + "mlp.up_proj", F, C),
                 "down": lin(p + "mlp.down_proj", C, F),
                 "q_norm": opt(a + "q_norm.weight", (hd,)), "k_norm": opt(a + "k_norm.weight", (hd,))}
        if hp["model_type"] == "qwen3" and (layer["q_norm"] is None or layer["k_norm"] is None):
            raise KeyError(f"missing tensor {a}q_norm.weight / k_norm.weight")
        params["layers"].append(layer)
    return params


def gemma_params(hp, get, lin):
    """Gemma's tensors; every norm weight w is applied as (1 + w): stored here so."""
    C, V, F = hp["n_embd"], hp["vocab_size"], hp["n_ff"]
    H, KV, hd = hp["n_head"], hp["n_kv"], hp["head_dim"]
    rms = lambda p, n=C: {"w": 1.0 + get(p + ".weight", (n,)), "b": None}
    params = {"layers": [], "embed": get("model.embed_tokens.weight", (V, C)), "norm": rms("model.norm")}
    params["lm_head"] = params["embed"] if hp["tied"] else get("lm_head.weight", (V, C))
    for l in range(hp["n_layer"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        layer = {"ln1": rms(p + "input_layernorm"),
                 "q": lin(a + "q_proj", H * hd, C), "k": lin(a + "k_proj", KV * hd, C),
                 "v": lin(a + "v_proj", KV * hd, C), "o": lin(a + "o_proj", C, H * hd),
                 "gate": lin(p + "mlp.gate_proj", F, C), "up": lin(p + "mlp.up_proj", F, C),
                 "down": lin(p + "mlp.down_proj", C, F), "q_norm": None, "k_norm": None,
                 "post_attn": None, "post_ff": None}
        if hp["gemma"] == 1:
            layer["ln2"] = rms(p + "post_attention_layernorm")
        else:
            layer.update(post_attn=rms(p + "post_attention_layernorm"), ln2=rms(p + "pre_feedforward_layernorm"),
                         post_ff=rms(p + "post_feedforward_layernorm"))
        if hp["gemma"] == 3:
            layer.update(q_norm=rms(a + "q_norm", hd)["w"], k_norm=rms(a + "k_norm", hd)["w"])
        params["layers"].append(layer)
    return params


def load_model(model_dir):
    """Returns (hparams, params) of a model directory."""
    hp = load_config(model_dir)
    t = gpt2_ref.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    return hp, build_params(hp, t)


# ----------------------------------------------------------------------------
# forward pass


def linear(x, p):
    """x: (T, in), p["w"]: (out, in), p["b"]: (out,) or None -> (T, out)."""
    y = x @ p["w"].T
    return y if p["b"] is None else y + p["b"]


def rms_norm(x, w, eps):
    """x: (..., n), w: (n,). RMSNorm as LlamaRMSNorm."""
    return x / np.sqrt(np.mean(x ** 2, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, p, eps):
    return gpt2_ref.layer_norm(x, p["w"], p["b"], eps)


def norm(hp, x, p):
    return rms_norm(x, p["w"], hp["eps"]) if p["b"] is None else layer_norm(x, p, hp["eps"])


def silu(x):
    return x / (1.0 + np.exp(-x))


def act(hp, x):
    a = hp["act"]
    if a == "silu":
        return silu(x)
    if a == "gelu":
        return gpt2_ref.gelu_erf(x)
    if a in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return gpt2_ref.gelu(x)
    raise ValueError(f"hidden_act {a!r} is not implemented here")


def rotate_half(x):
    """x: (..., d) -> cat(-x[d/2:], x[:d/2])."""
    d = x.shape[-1] // 2
    return np.concatenate([-x[..., d:], x[..., :d]], axis=-1)


def apply_rotary(x, pos, inv_freq):
    """x: (n_heads, T, hd), pos: (T,). The first rot = 2 len(inv_freq) dims
    rotate, the rest pass through (GPT-NeoX's partial rotary)."""
    rot = 2 * len(inv_freq)
    freqs = np.outer(pos, inv_freq)                           # (T, rot/2)
    emb = np.concatenate([freqs, freqs], axis=-1)             # (T, rot)
    cos, sin = np.cos(emb), np.sin(emb)
    xr, xp = x[..., :rot], x[..., rot:]
    return np.concatenate([xr * cos + rotate_half(xr) * sin, xp], axis=-1)


def softmax(x):
    return gpt2_ref.softmax(x)


def attend(q, k, v, window, scale=None, cap=None, probs_out=None):
    """q: (H, T, hd), k, v: (KV, T, hd) -> (H, T, hd). Causal, with an
    optional sliding window: query i sees keys j, i - W < j <= i. scale:
    1/sqrt(hd) unless given; cap: Gemma 2's soft-capping of the scores
    before the mask. probs_out: a list the (H, T, T) probabilities go to."""
    H, T, hd = q.shape
    group = H // k.shape[0]
    k = np.repeat(k, group, axis=0)                            # (H, T, hd): head h reads kv h // group
    v = np.repeat(v, group, axis=0)
    if scale is None:
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(hd)      # (H, T, T)
    else:
        scores = q @ k.transpose(0, 2, 1) * scale
    if cap is not None:
        scores = cap * np.tanh(scores / cap)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    hidden = j > i
    if window is not None:
        hidden = hidden | (i - j >= window)
    probs = softmax(np.where(hidden, -np.inf, scores))        # (H, T, T)
    if probs_out is not None:
        probs_out.append(probs)
    return probs @ v                                           # (H, T, hd)


def llama_layer(hp, p, x, window):
    """x: (T, C) -> (T, C)."""
    T = x.shape[0]
    H, KV, hd = hp["n_head"], hp["n_kv"], hp["head_dim"]
    pos = np.arange(T, dtype=np.float64)
    n = norm(hp, x, p["ln1"])                                  # (T, C)
    heads = lambda a, nh: a.reshape(T, nh, hd).transpose(1, 0, 2)
    q = heads(linear(n, p["q"]), H)                            # (H, T, hd)
    k = heads(linear(n, p["k"]), KV)                           # (KV, T, hd)
    v = heads(linear(n, p["v"]), KV)
    if p["q_norm"] is not None:                                # Qwen3: per head, before rotary
        q = rms_norm(q, p["q_norm"], hp["eps"])
        k = rms_norm(k, p["k_norm"], hp["eps"])
    q = apply_rotary(q, pos, hp["inv_freq"])
    k = apply_rotary(k, pos, hp["inv_freq"])
    y = attend(q, k, v, window).transpose(1, 0, 2).reshape(T, H * hd)
    h = x + linear(y, p["o"])
    n = norm(hp, h, p["ln2"])
    return h + linear(silu(linear(n, p["gate"])) * linear(n, p["up"]), p["down"])


def gemma_layer(hp, p, x, window, inv_freq, probs_out=None):
    """x: (T, C) -> (T, C). Norm weights are already (1 + w)."""
    T = x.shape[0]
    H, KV, hd = hp["n_head"], hp["n_kv"], hp["head_dim"]
    pos = np.arange(T, dtype=np.float64)
    n = norm(hp, x, p["ln1"])
    heads = lambda a, nh: a.reshape(T, nh, hd).transpose(1, 0, 2)
    q = heads(linear(n, p["q"]), H)
    k = heads(linear(n, p["k"]), KV)
    v = heads(linear(n, p["v"]), KV)
    if p["q_norm"] is not None:                                # Gemma 3
        q = rms_norm(q, p["q_norm"], hp["eps"])
        k = rms_norm(k, p["k_norm"], hp["eps"])
    q, k = apply_rotary(q, pos, inv_freq), apply_rotary(k, pos, inv_freq)
    y = attend(q, k, v, window, hp["scale"], hp["attn_cap"], probs_out).transpose(1, 0, 2).reshape(T, H * hd)
    a = linear(y, p["o"])
    h = x + (a if p["post_attn"] is None else norm(hp, a, p["post_attn"]))
    n = norm(hp, h, p["ln2"])
    m = linear(gpt2_ref.gelu(linear(n, p["gate"])) * linear(n, p["up"]), p["down"])
    return h + (m if p["post_ff"] is None else norm(hp, m, p["post_ff"]))


def neox_layer(hp, p, x):
    """x: (T, C) -> (T, C)."""
    T, C = x.shape
    H, hd = hp["n_head"], hp["head_dim"]
    pos = np.arange(T, dtype=np.float64)
    qkv = linear(norm(hp, x, p["ln1"]), p["qkv"])              # (T, 3C)
    qkv = qkv.reshape(T, H, 3 * hd).transpose(1, 0, 2)         # (H, T, 3hd): per head q | k | v
    q, k, v = qkv[..., :hd], qkv[..., hd:2 * hd], qkv[..., 2 * hd:]
    q = apply_rotary(q, pos, hp["inv_freq"])
    k = apply_rotary(k, pos, hp["inv_freq"])
    a = linear(attend(q, k, v, None).transpose(1, 0, 2).reshape(T, C), p["dense"])
    mlp = lambda z: linear(act(hp, linear(z, p["fc_in"])), p["fc_out"])
    if hp["parallel"]:
        return x + a + mlp(norm(hp, x, p["ln2"]))
    h = x + a
    return h + mlp(norm(hp, h, p["ln2"]))


def forward(hp, params, ids, windows=None, probs_out=None):
    """ids: T ints -> logits (T, V), float64. windows: per-layer sliding
    windows overriding hp["windows"] (None entries: full causal). probs_out:
    a list that gets each layer's (H, T, T) attention probabilities (Gemma)."""
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    if not 1 <= T <= hp["n_ctx"]:
        raise ValueError(f"{T} tokens, context holds {hp['n_ctx']}")
    if ids.min() < 0 or ids.max() >= hp["vocab_size"]:
        raise ValueError("token id out of range")
    windows = hp["windows"] if windows is None else windows
    x = params["embed"][ids]                                   # (T, C)
    if hp.get("gemma"):
        x = x * hp["normalizer"]
        for l, p in enumerate(params["layers"]):
            inv = hp["layer_inv_freq"][l] if "layer_inv_freq" in hp else hp["inv_freq"]
            x = gemma_layer(hp, p, x, windows[l], inv, probs_out)
        logits = norm(hp, x, params["norm"]) @ params["lm_head"].T
        return logits if hp["final_cap"] is None else hp["final_cap"] * np.tanh(logits / hp["final_cap"])
    for l, p in enumerate(params["layers"]):
        x = neox_layer(hp, p, x) if hp["model_type"] == "gpt_neox" else llama_layer(hp, p, x, windows[l])
    return norm(hp, x, params["norm"]) @ params["lm_head"].T   # (T, V)


# ----------------------------------------------------------------------------
# a second derivation: token at a time with a KV cache, scalar-ish loops,
# rotary applied pair by pair (i, i + d/2) with the angle computed per position


def forward_loops(hp, params, ids):
    H, KV, hd, L = hp["n_head"], hp["n_kv"], hp["head_dim"], hp["n_layer"]
    eps, neox, gemma = hp["eps"], hp["model_type"] == "gpt_neox", hp.get("gemma", 0)
    half = len(hp["inv_freq"])
    group = H // KV
    scale = hp.get("scale") or 1 / math.sqrt(hd)
    cap = lambda z, c: z if c is None else c * math.tanh(z / c)

    def nrm(vec, p):  # vec: (n,)
        n = len(vec)
        if p["b"] is None:
            ms = sum(float(z) * float(z) for z in vec) / n
            return np.array([vec[i] / math.sqrt(ms + eps) * p["w"][i] for i in range(n)])
        mu = sum(vec) / n
        var = sum((z - mu) ** 2 for z in vec) / n
        return np.array([(vec[i] - mu) / math.sqrt(var + eps) * p["w"][i] + p["b"][i] for i in range(n)])

    def lin(vec, p):
        out = p["w"].dot(vec)
        return out if p["b"] is None else out + p["b"]

    def rotate(vec, t, inv):  # vec: (hd,), rotary on the first 2 * half dims
        out = vec.copy()
        for i in range(half):
            c, s = math.cos(t * inv[i]), math.sin(t * inv[i])
            a, b = vec[i], vec[i + half]
            out[i] = a * c - b * s
            out[i + half] = b * c + a * s
        return out

    def f_act(z):
        if hp["act"] == "silu":
            return z / (1 + math.exp(-z))
        if hp["act"] == "gelu":
            return 0.5 * z * (1 + math.erf(z / math.sqrt(2)))
        return 0.5 * z * (1 + math.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))

    kc = [[] for _ in range(L)]  # kc[l][t]: (KV, hd) rotated keys
    vc = [[] for _ in range(L)]
    logits = np.zeros((len(ids), hp["vocab_size"]))
    for t, tok in enumerate(ids):
        x = params["embed"][tok] * hp.get("normalizer", 1.0)
        for l, p in enumerate(params["layers"]):
            W = hp["windows"][l]
            inv = hp["layer_inv_freq"][l] if "layer_inv_freq" in hp else hp["inv_freq"]
            n = nrm(x, p["ln1"])
            if neox:
                qkv = lin(n, p["qkv"])
                q = [qkv[h * 3 * hd: h * 3 * hd + hd] for h in range(H)]
                k = [qkv[h * 3 * hd + hd: h * 3 * hd + 2 * hd] for h in range(H)]
                v = [qkv[h * 3 * hd + 2 * hd: (h + 1) * 3 * hd] for h in range(H)]
            else:
                qa, ka, va = lin(n, p["q"]), lin(n, p["k"]), lin(n, p["v"])
                q = [qa[h * hd:(h + 1) * hd] for h in range(H)]
                k = [ka[g * hd:(g + 1) * hd] for g in range(KV)]
                v = [va[g * hd:(g + 1) * hd] for g in range(KV)]
                if p["q_norm"] is not None:
                    q = [nrm(z, {"w": p["q_norm"], "b": None}) for z in q]
                    k = [nrm(z, {"w": p["k_norm"], "b": None}) for z in k]
            q = [rotate(z, t, inv) for z in q]
            kc[l].append([rotate(z, t, inv) for z in k])
            vc[l].append(v)
            y = np.zeros(H * hd)
            for h in range(H):
                g = h // group
                js = [j for j in range(t + 1) if W is None or t - j < W]
                s = [cap(float(np.dot(q[h], kc[l][j][g])) * scale, hp.get("attn_cap")) for j in js]
                m = max(s)
                e = [math.exp(z - m) for z in s]
                z = sum(e)
                for j, ej in zip(js, e):
                    y[h * hd:(h + 1) * hd] += ej / z * vc[l][j][g]
            if neox:
                a = lin(y, p["dense"])
                mlp = lambda u: lin(np.array([f_act(z) for z in lin(u, p["fc_in"])]), p["fc_out"])
                if hp["parallel"]:
                    x = x + a + mlp(nrm(x, p["ln2"]))
                else:
                    x = x + a
                    x = x + mlp(nrm(x, p["ln2"]))
            else:
                a = lin(y, p["o"])
                x = x + (nrm(a, p["post_attn"]) if p.get("post_attn") else a)
                n = nrm(x, p["ln2"])
                gate, up = lin(n, p["gate"]), lin(n, p["up"])
                m = lin(np.array([f_act(a) * b for a, b in zip(gate, up)]), p["down"])
                x = x + (nrm(m, p["post_ff"]) if p.get("post_ff") else m)
        z = params["lm_head"].dot(nrm(x, params["norm"]))
        logits[t] = [cap(float(v), hp.get("final_cap")) for v in z] if gemma else z
    return logits


def selftest(model_dir, n_tokens=20, seed=0):
    """forward() against forward_loops(), causality, and for a sliding window in
    every layer that the first token cannot reach past the layers' combined window.
    Returns the list of failures."""
    hp, params = load_model(model_dir)
    rng = np.random.default_rng(seed)
    n_tokens = min(n_tokens, hp["n_ctx"])
    ids = [int(i) for i in rng.integers(0, hp["vocab_size"], size=n_tokens)]
    logits = forward(hp, params, ids)
    fails = []
    ll = forward_loops(hp, params, ids)
    if not np.allclose(ll, logits, rtol=0, atol=1e-9):
        fails.append(f"loop logits differ by {np.abs(ll - logits).max():.3g}")
    for t in range(n_tokens):
        if not np.allclose(forward(hp, params, ids[:t + 1]), logits[:t + 1], rtol=0, atol=1e-10):
            fails.append(f"prefix of length {t + 1} disagrees")
    if hp["windows"] and all(w is not None for w in hp["windows"]):   # a full layer reaches every key
        reach = sum(w - 1 for w in hp["windows"])                     # how far back token 0 is seen
        other = list(ids)
        other[0] = (ids[0] + 1) % hp["vocab_size"]
        lo = forward(hp, params, other)
        if reach + 1 < n_tokens and not np.array_equal(lo[reach + 1:], logits[reach + 1:]):
            fails.append(f"token 0 changes logits beyond position {reach}")
        if np.allclose(lo[:reach + 1], logits[:reach + 1]):
            fails.append("token 0 changes no logits at all")
    if not np.all(np.isfinite(logits)):
        fails.append("logits not finite")
    return fails


# ----------------------------------------------------------------------------
# PyTorch cross-check: the same definitions, written another way (float64
# torch ops; F.embedding / F.linear / F.layer_norm; RMSNorm by the vector norm;
# rotary as a complex multiplication of (x[i], x[i + d/2]) pairs; GQA by
# repeat_interleave; an additive mask; parallel residual by summing branches)


def torch_logits(model_dir, ids):
    import torch
    import torch.nn.functional as F

    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    w = {k: torch.from_numpy(np.asarray(v, dtype=np.float64))
         for k, v in gpt2_ref.read_safetensors(os.path.join(model_dir, "model.safetensors")).items()}
    mt = cfg["model_type"]
    C, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    T = len(ids)
    ids_t = torch.tensor(ids, dtype=torch.long)
    pos = torch.arange(T, dtype=torch.float64)

    def lin(x, name):
        return F.linear(x, w[name + ".weight"], w.get(name + ".bias"))

    def rms(x, weight, eps):
        n = x.shape[-1]
        r = torch.sqrt(torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / n + eps)
        return weight * (x / r)

    def rope_freqs(theta, d, sc):
        inv = 1.0 / torch.pow(torch.tensor(theta, dtype=torch.float64),
                              torch.arange(0, d, 2, dtype=torch.float64) / d)
        if sc and sc.get("rope_type", sc.get("type")) == "llama3":
            fac, lo, hi = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"]
            old = sc["original_max_position_embeddings"]
            wl = 2 * math.pi / inv
            ratio = old / wl                                   # wavelengths per original context
            smooth = ((ratio - lo) / (hi - lo)).clamp(0.0, 1.0)  # 0 below lo, 1 above hi
            inv = inv / fac * (1 - smooth) + inv * smooth
        return inv

    def rotary(x, inv):
        """x: (T, heads, d); pairs (i, i + r/2) of the first r dims as complex numbers."""
        r = 2 * inv.numel()
        xr, xp = x[..., :r], x[..., r:]
        z = torch.complex(xr[..., :r // 2], xr[..., r // 2:])            # (T, heads, r/2)
        rot = torch.polar(torch.ones(T, inv.numel(), dtype=torch.float64), torch.outer(pos, inv))
        z = z * rot[:, None, :]
        return torch.cat([z.real, z.imag, xp], dim=-1)

    def attention(q, k, v, window, scale=None, cap=None):
        """q: (T, H, d), k, v: (T, KV, d) -> (T, H*d)."""
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        d = q.shape[-1]
        qh, kh, vh = q.permute(1, 0, 2), k.permute(1, 0, 2), v.permute(1, 0, 2)
        ones = torch.ones(T, T, dtype=torch.bool)
        allowed = torch.tril(ones)
        if window is not None:
            allowed = allowed & torch.triu(ones, diagonal=-(window - 1))
        mask = torch.zeros(T, T, dtype=torch.float64).masked_fill(~allowed, float("-inf"))
        if cap is not None:   # capped before the mask is added
            s = torch.bmm(qh, kh.transpose(1, 2)) * scale
            s = torch.tanh(s / cap) * cap + mask
        else:
            s = torch.baddbmm(mask.expand(qh.shape[0], T, T), qh, kh.transpose(1, 2),
                              alpha=d ** -0.5 if scale is None else scale)
        return torch.bmm(F.softmax(s, dim=-1), vh).permute(1, 0, 2).reshape(T, -1)

    if mt == "gpt_neox":
        hd = C // H
        rdim = int(hd * cfg.get("rotary_pct", 0.25))
        inv = rope_freqs(float(cfg.get("rotary_emb_base", 10000)), rdim, None)
        eps = cfg["layer_norm_eps"]
        gelu = (lambda z: F.gelu(z)) if cfg.get("hidden_act", "gelu") == "gelu" else \
            (lambda z: F.gelu(z, approximate="tanh"))
        ln = lambda x, n: F.layer_norm(x, (C,), w[n + ".weight"], w[n + ".bias"], eps)
        x = F.embedding(ids_t, w["gpt_neox.embed_in.weight"])
        for l in range(L):
            p = f"gpt_neox.layers.{l}."
            qkv = lin(ln(x, p + "input_layernorm"), p + "attention.query_key_value").view(T, H, 3, hd)
            q, k, v = qkv.unbind(dim=2)                                  # each (T, H, hd)
            att = lin(attention(rotary(q, inv), rotary(k, inv), v, None), p + "attention.dense")
            mlp = lambda z: lin(gelu(lin(z, p + "mlp.dense_h_to_4h")), p + "mlp.dense_4h_to_h")
            if cfg.get("use_parallel_residual", True):
                x = torch.stack([x, att, mlp(ln(x, p + "post_attention_layernorm"))]).sum(0)
            else:
                x = x + att
                x = x + mlp(ln(x, p + "post_attention_layernorm"))
        x = ln(x, "gpt_neox.final_layer_norm")
        head = w["embed_out.weight"] if "embed_out.weight" in w else w["gpt_neox.embed_in.weight"]
        return F.linear(x, head).numpy()

    if mt in GEMMAS:
        hp = load_config(model_dir)
        gen = hp["gemma"]
        hd, KV, eps = hp["head_dim"], hp["n_kv"], hp["eps"]
        glob = rope_freqs(hp["theta"], hd, None)
        sc = cfg.get("rope_scaling") or {}
        if sc.get("rope_type", sc.get("type")) == "linear":
            glob = glob / sc["factor"]
        local = rope_freqs(float(cfg.get("rope_local_base_freq", 1e4)), hd, None)
        g1 = lambda x, n: rms(x, 1 + w[n + ".weight"], eps)
        x = F.embedding(ids_t, w["model.embed_tokens.weight"]) * hp["normalizer"]
        for l in range(L):
            p = f"model.layers.{l}."
            win = hp["windows"][l]
            inv = local if gen == 3 and win is not None else glob
            n = g1(x, p + "input_layernorm")
            q = lin(n, p + "self_attn.q_proj").view(T, H, hd)
            k = lin(n, p + "self_attn.k_proj").view(T, KV, hd)
            v = lin(n, p + "self_attn.v_proj").view(T, KV, hd)
            if gen == 3:
                q, k = g1(q, p + "self_attn.q_norm"), g1(k, p + "self_attn.k_norm")
            a = lin(attention(rotary(q, inv), rotary(k, inv), v, win, hp["scale"], hp["attn_cap"]),
                    p + "self_attn.o_proj")
            if gen == 1:
                x = x + a
                n = g1(x, p + "post_attention_layernorm")
            else:
                x = x + g1(a, p + "post_attention_layernorm")
                n = g1(x, p + "pre_feedforward_layernorm")
            m = lin(F.gelu(lin(n, p + "mlp.gate_proj"), approximate="tanh") * lin(n, p + "mlp.up_proj"),
                    p + "mlp.down_proj")
            x = x + (m if gen == 1 else g1(m, p + "post_feedforward_layernorm"))
        head = w["model.embed_tokens.weight"] if hp["tied"] else w["lm_head.weight"]
        z = F.linear(g1(x, "model.norm"), head)
        if hp["final_cap"] is not None:
            z = torch.tanh(z / hp["final_cap"]) * hp["final_cap"]
        return z.numpy()

    hd = cfg.get("head_dim") or C // H
    KV = cfg.get("num_key_value_heads") or H
    eps = cfg["rms_norm_eps"]
    inv = rope_freqs(float(cfg.get("rope_theta", 10000.0)), hd, cfg.get("rope_scaling"))
    if mt == "mistral":
        win = [cfg.get("sliding_window")] * L
    elif cfg.get("use_sliding_window") and cfg.get("sliding_window") is not None:
        win = [cfg["sliding_window"] if l >= cfg.get("max_window_layers", L) else None for l in range(L)]
    else:
        win = [None] * L
    x = F.embedding(ids_t, w["model.embed_tokens.weight"])
    for l in range(L):
        p = f"model.layers.{l}."
        n = rms(x, w[p + "input_layernorm.weight"], eps)
        q = lin(n, p + "self_attn.q_proj").view(T, H, hd)
        k = lin(n, p + "self_attn.k_proj").view(T, KV, hd)
        v = lin(n, p + "self_attn.v_proj").view(T, KV, hd)
        if p + "self_attn.q_norm.weight" in w:
            q = rms(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms(k, w[p + "self_attn.k_norm.weight"], eps)
        x = x + lin(attention(rotary(q, inv), rotary(k, inv), v, win[l]), p + "self_attn.o_proj")
        n = rms(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + lin(F.silu(lin(n, p + "mlp.gate_proj")) * lin(n, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms(x, w["model.norm.weight"], eps)
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
    return F.linear(x, head).numpy()


def torch_check(model_dir, n_tokens=24, seed=1):
    """Max |numpy - torch| over the logits of n_tokens random ids."""
    hp, params = load_model(model_dir)
    rng = np.random.default_rng(seed)
    ids = [int(i) for i in rng.integers(0, hp["vocab_size"], size=min(n_tokens, hp["n_ctx"]))]
    a = forward(hp, params, ids)
    b = torch_logits(model_dir, ids)
    return float(np.abs(a - b).max()), float(np.abs(a).max())


def main(argv):
    if len(argv) >= 2 and argv[0] == "--selftest":
        fails = selftest(argv[1])
        for f in fails:
            print("FAIL", f)
        print("selftest", "failed" if fails else "passed")
        return 1 if fails else 0
    if len(argv) >= 4 and argv[0] == "--logits":
        hp, params = load_model(argv[2])
        forward(hp, params, [int(a) for a in argv[3:]]).astype("<f4").tofile(argv[1])
        return 0
    if len(argv) >= 2 and argv[0] == "--torch-check":
        diff, mag = torch_check(argv[1])
        ok = diff < 1e-10
        print(f"max |numpy - torch| = {diff:.3g} (|logits| up to {mag:.3g}): {'passed' if ok else 'FAILED'}")
        return 0 if ok else 1
    if len(argv) < 2:
        print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    hp, params = load_model(argv[0])
    logits = forward(hp, params, [int(a) for a in argv[1:]])
    print(" ".join(str(int(i)) for i in logits.argmax(-1)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
