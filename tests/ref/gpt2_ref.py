#!/usr/bin/python3
"""gpt2_ref.py - an independent reference GPT-2 forward pass in numpy (float64).

This is the yardstick the C engine is compared against. It is deliberately
small and written for clarity, picoGPT-style: every function is the textbook
formula, every array carries its shape in a comment.

What it reads (a model directory in the Hugging Face GPT-2 layout):
    config.json        n_layer, n_head, n_embd, n_positions, vocab_size,
                       layer_norm_epsilon (default 1e-5)
    model.safetensors  F32, F16 or BF16 tensors, read by our own parser below.
                       Names may carry a "transformer." prefix; the buffers
                       h.N.attn.bias / h.N.attn.masked_bias are ignored; the LM
                       head is lm_head.weight when present, else wte (tied).

Math (HF GPT-2 conventions):
    Conv1D weights are stored (in, out), so a linear layer is y = x @ W + b.
    x = wte[ids] + wpe[0..T-1]
    per block:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
    logits = ln_f(x) @ lm_head.T
    GELU is the tanh approximation; LayerNorm uses the biased variance.

All weights are widened to float64 *after* decoding their stored dtype, so an
F16/BF16 model is evaluated with exactly the rounded values in its file.

Usage as a script (prints the logits' argmax for each position):
    /usr/bin/python3 gpt2_ref.py MODEL_DIR ID [ID ...]
    /usr/bin/python3 gpt2_ref.py --selftest MODEL_DIR
"""

import json
import math
import os
import struct
import sys

import numpy as np

# ----------------------------------------------------------------------------
# safetensors

# bytes per element of every dtype this reader decodes
DTYPE_SIZE = {"F32": 4, "F16": 2, "BF16": 2}


def bf16_bits_to_f32(bits):
    """uint16 array of bfloat16 bit patterns -> float32 (exact: bf16 is the
    top half of an IEEE float32)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path):
    """Parses a .safetensors file.

    Layout: u64 little-endian header length N, N bytes of JSON header
    {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
    then the data section; offsets are relative to the start of the data section.

    Returns {name: float32 ndarray} (F16 and BF16 decoded to float32 exactly).
    Raises ValueError on anything malformed.
    """
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: {len(blob)} bytes, shorter than the 8-byte header length")
    (n_header,) = struct.unpack("<Q", blob[:8])
    if 8 + n_header > len(blob):
        raise ValueError(f"{path}: header length {n_header} runs past the end of the file")
    header = json.loads(blob[8:8 + n_header].decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    data = memoryview(blob)[8 + n_header:]

    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape = info["dtype"], info["shape"]
        begin, end = info["data_offsets"]
        if dtype not in DTYPE_SIZE:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dtype}")
        if not (0 <= begin <= end <= len(data)):
            raise ValueError(f"{path}: tensor {name}: data_offsets {begin},{end} "
                             f"outside the data section ({len(data)} bytes)")
        n = int(np.prod(shape, dtype=np.int64))  # prod([]) == 1 for a scalar
        if end - begin != n * DTYPE_SIZE[dtype]:
            raise ValueError(f"{path}: tensor {name}: {end - begin} bytes for shape {shape} {dtype}")
        raw = data[begin:end]
        if dtype == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif dtype == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        else:  # BF16
            arr = bf16_bits_to_f32(np.frombuffer(raw, dtype="<u2"))
        tensors[name] = arr.reshape(shape)
    return tensors


# ----------------------------------------------------------------------------
# model loading

def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    return {
        "n_layer": int(cfg["n_layer"]),
        "n_head": int(cfg["n_head"]),
        "n_embd": int(cfg["n_embd"]),
        "n_positions": int(cfg["n_positions"]),
        "vocab_size": int(cfg["vocab_size"]),
        "eps": float(cfg.get("layer_norm_epsilon", 1e-5)),
        # "gelu" is the exact erf form (nanoGPT's nn.GELU()); the rest the tanh one
        "gelu_erf": cfg.get("activation_function", "gelu_new") == "gelu",
    }


def load_model(model_dir):
    """Returns (hparams, params). params is a nested dict of float64 arrays:
    wte (V, C), wpe (P, C), lm_head (V, C), ln_f {g, b},
    blocks[l] = {ln_1, attn: {c_attn, c_proj}, ln_2, mlp: {c_fc, c_proj}}
    where a linear layer is {w: (in, out), b: (out,)} and a norm is {g, b}."""
    hp = load_config(model_dir)
    raw = read_safetensors(os.path.join(model_dir, "model.safetensors"))

    # Strip the optional "transformer." prefix (lm_head.weight never has it).
    t = {}
    for name, arr in raw.items():
        if name.startswith("transformer."):
            name = name[len("transformer."):]
        t[name] = arr.astype(np.float64)

    def get(name, shape):
        if name not in t:
            raise KeyError(f"missing tensor {name}")
        if t[name].shape != shape:
            raise ValueError(f"tensor {name}: shape {t[name].shape}, expected {shape}")
        return t[name]

    C, V, P = hp["n_embd"], hp["vocab_size"], hp["n_positions"]
    lin = lambda p, i, o: {"w": get(p + ".weight", (i, o)), "b": get(p + ".bias", (o,))}
    norm = lambda p: {"g": get(p + ".weight", (C,)), "b": get(p + ".bias", (C,))}

    params = {
        "wte": get("wte.weight", (V, C)),
        "wpe": get("wpe.weight", (P, C)),
        "ln_f": norm("ln_f"),
        "blocks": [],
    }
    params["lm_head"] = get("lm_head.weight", (V, C)) if "lm_head.weight" in t else params["wte"]
    for l in range(hp["n_layer"]):
        p = f"h.{l}."
        params["blocks"].append({
            "ln_1": norm(p + "ln_1"),
            "attn": {"c_attn": lin(p + "attn.c_attn", C, 3 * C),
                     "c_proj": lin(p + "attn.c_proj", C, C)},
            "ln_2": norm(p + "ln_2"),
            "mlp": {"c_fc": lin(p + "mlp.c_fc", C, 4 * C),
                    "c_proj": lin(p + "mlp.c_proj", 4 * C, C)},
        })
    return hp, params


# ----------------------------------------------------------------------------
# forward pass

def gelu(x):
    """tanh approximation (GPT-2's "gelu_new")."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


_erf = np.vectorize(math.erf)


def gelu_erf(x):
    """The exact form, x * Phi(x) (PyTorch's nn.GELU(), HF's "gelu")."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))  # exp(-inf) == 0 exactly
    return e / np.sum(e, axis=-1, keepdims=True)


def layer_norm(x, g, b, eps):
    """x: (T, C). Biased variance, as torch.nn.LayerNorm."""
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return g * (x - mean) / np.sqrt(var + eps) + b


def linear(x, w, b):
    """x: (T, in), w: (in, out), b: (out,) -> (T, out)."""
    return x @ w + b


def attention(x, c_attn, c_proj, n_head, ablate=()):
    """x: (T, C) -> (output (T, C), probs (n_head, T, T)).
    ablate: heads whose output is zeroed before c_proj (zero-ablation)."""
    T, C = x.shape
    hd = C // n_head
    qkv = linear(x, **c_attn)                                  # (T, 3C)
    q, k, v = np.split(qkv, 3, axis=-1)                        # 3 x (T, C)
    # (T, C) -> (n_head, T, hd): head h owns columns h*hd .. (h+1)*hd-1
    heads = lambda a: a.reshape(T, n_head, hd).transpose(1, 0, 2)
    q, k, v = heads(q), heads(k), heads(v)
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(hd)          # (n_head, T, T)
    future = np.triu(np.ones((T, T), dtype=bool), k=1)         # j > i
    scores = np.where(future, -np.inf, scores)
    probs = softmax(scores)                                    # (n_head, T, T), 0 above diag
    out = probs @ v                                            # (n_head, T, hd)
    for h in ablate:
        out[h] = 0.0
    out = out.transpose(1, 0, 2).reshape(T, C)                 # (T, C)
    return linear(out, **c_proj), probs


def mlp(x, c_fc, c_proj, erf=False):
    """x: (T, C) -> (T, C)."""
    return linear((gelu_erf if erf else gelu)(linear(x, **c_fc)), **c_proj)


def forward(hp, params, ids, ablate=()):
    """ids: sequence of T ints (T <= n_positions); ablate: (layer, head) pairs
    to zero-ablate.

    Returns (logits (T, V), attn (L, H, T, T), resid (L, T, C)), float64.
    resid[l] is the residual stream after block l (before ln_f)."""
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    if not 1 <= T <= hp["n_positions"]:
        raise ValueError(f"{T} tokens, context holds {hp['n_positions']}")
    if ids.min() < 0 or ids.max() >= hp["vocab_size"]:
        raise ValueError("token id out of range")
    eps, H = hp["eps"], hp["n_head"]

    x = params["wte"][ids] + params["wpe"][np.arange(T)]       # (T, C)
    attn_all, resid_all = [], []
    for l, blk in enumerate(params["blocks"]):
        off = [h for (bl, h) in ablate if bl == l]
        a, probs = attention(layer_norm(x, **blk["ln_1"], eps=eps), **blk["attn"], n_head=H, ablate=off)
        x = x + a
        x = x + mlp(layer_norm(x, **blk["ln_2"], eps=eps), **blk["mlp"], erf=hp.get("gelu_erf", False))
        attn_all.append(probs)
        resid_all.append(x)
    x = layer_norm(x, **params["ln_f"], eps=eps)
    logits = x @ params["lm_head"].T                           # (T, V)
    return logits, np.stack(attn_all), np.stack(resid_all)


def lens(hp, params, resid):
    """The logit lens: resid (L, T, C) -> (L, T, V), ln_f then the
    unembedding applied to the residual stream after each block."""
    return np.stack([layer_norm(r, **params["ln_f"], eps=hp["eps"]) @ params["lm_head"].T for r in resid])


def head_scores(A, ids):
    """A: (T, T) one head's probabilities (row q over keys 0..q); ids: T ints.
    Returns [prev_token, first_token, self, entropy, induction, n_induction]
    by the definitions in include/gpt2_inspect.h, NaN where undefined."""
    T = len(ids)
    if T < 2:
        return [math.nan] * 5 + [0]
    qs = range(1, T)
    prev = np.mean([A[q, q - 1] for q in qs])
    first = np.mean([A[q, 0] for q in qs])
    self_ = np.mean([A[q, q] for q in qs])
    ent = np.mean([-sum(p * math.log(p) for p in A[q, :q + 1] if p > 0) for q in qs])
    ind = []
    for q in qs:
        earlier = [j for j in range(q - 1) if ids[j] == ids[q]]
        if earlier:
            ind.append(A[q, max(earlier) + 1])
    return [prev, first, self_, ent, np.mean(ind) if ind else math.nan, len(ind)]


def greedy(hp, params, prompt, n_new):
    """Argmax decoding, recomputing the full forward pass each step.
    Returns (new ids, list of top-1 minus top-2 logit margins per step)."""
    ids = list(prompt)
    out, margins = [], []
    for _ in range(n_new):
        logits, _, _ = forward(hp, params, ids)
        last = logits[-1]
        top2 = np.sort(last)[-2:]
        nxt = int(np.argmax(last))
        margins.append(float(top2[1] - top2[0]))
        out.append(nxt)
        ids.append(nxt)
    return out, margins


# ----------------------------------------------------------------------------
# self-test: a second, independent derivation written with scalar-ish loops and
# an incremental key/value cache (the way the C engine runs), compared against
# the vectorised forward() above.

def forward_loops(hp, params, ids):
    """Token-at-a-time forward with a KV cache; returns (logits (T,V), attn (L,H,T,T))."""
    C, H, L, eps = hp["n_embd"], hp["n_head"], hp["n_layer"], hp["eps"]
    hd = C // H
    T = len(ids)

    def ln(v, p):  # v: (C,)
        mu = sum(v) / C
        var = sum((vi - mu) ** 2 for vi in v) / C
        return np.array([p["g"][i] * (v[i] - mu) / math.sqrt(var + eps) + p["b"][i]
                         for i in range(C)])

    def gelu1(z):
        if hp.get("gelu_erf", False):
            return 0.5 * z * (1 + math.erf(z / math.sqrt(2)))
        return 0.5 * z * (1 + math.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z * z * z)))

    kcache = [[] for _ in range(L)]  # kcache[l][t]: (C,)
    vcache = [[] for _ in range(L)]
    logits = np.zeros((T, hp["vocab_size"]))
    attn = np.zeros((L, H, T, T))
    for t, tok in enumerate(ids):
        x = params["wte"][tok] + params["wpe"][t]
        for l, blk in enumerate(params["blocks"]):
            h = ln(x, blk["ln_1"])
            qkv = blk["attn"]["c_attn"]["w"].T.dot(h) + blk["attn"]["c_attn"]["b"]
            q, k, v = qkv[:C], qkv[C:2 * C], qkv[2 * C:]
            kcache[l].append(k)
            vcache[l].append(v)
            y = np.zeros(C)
            for hh in range(H):
                sl = slice(hh * hd, (hh + 1) * hd)
                s = [float(np.dot(q[sl], kcache[l][j][sl])) / math.sqrt(hd) for j in range(t + 1)]
                m = max(s)
                e = [math.exp(si - m) for si in s]
                z = sum(e)
                for j in range(t + 1):
                    p = e[j] / z
                    attn[l, hh, t, j] = p
                    y[sl] += p * vcache[l][j][sl]
            x = x + blk["attn"]["c_proj"]["w"].T.dot(y) + blk["attn"]["c_proj"]["b"]
            h = ln(x, blk["ln_2"])
            f = blk["mlp"]["c_fc"]["w"].T.dot(h) + blk["mlp"]["c_fc"]["b"]
            f = np.array([gelu1(z) for z in f])
            x = x + blk["mlp"]["c_proj"]["w"].T.dot(f) + blk["mlp"]["c_proj"]["b"]
        logits[t] = params["lm_head"].dot(ln(x, params["ln_f"]))
    return logits, attn


def selftest(model_dir, n_tokens=12, seed=0):
    """Checks forward() against forward_loops(), causality, and softmax rows.
    Returns the list of failure strings (empty when all checks pass)."""
    hp, params = load_model(model_dir)
    rng = np.random.default_rng(seed)
    ids = [int(i) for i in rng.integers(0, hp["vocab_size"] - 1, size=n_tokens)]
    logits, attn, resid = forward(hp, params, ids)
    fails = []

    ll, la = forward_loops(hp, params, ids)
    if not np.allclose(ll, logits, rtol=0, atol=1e-9):
        fails.append(f"loop logits differ by {np.abs(ll - logits).max():.3g}")
    if not np.allclose(la, attn, rtol=0, atol=1e-12):
        fails.append(f"loop attention differs by {np.abs(la - attn).max():.3g}")

    if not np.allclose(attn.sum(-1), 1.0, atol=1e-12):
        fails.append("attention rows do not sum to 1")
    future = np.triu(np.ones((n_tokens, n_tokens), dtype=bool), k=1)
    if np.any(attn[..., future] != 0):
        fails.append("attention above the diagonal is not exactly 0")
    for t in range(n_tokens):  # causality: a prefix sees the same logits
        lp, ap, rp = forward(hp, params, ids[:t + 1])
        if not (np.allclose(lp, logits[:t + 1], atol=1e-10)
                and np.allclose(rp, resid[:, :t + 1], atol=1e-10)
                and np.allclose(ap, attn[:, :, :t + 1, :t + 1], atol=1e-12)):
            fails.append(f"prefix of length {t + 1} disagrees")
    return fails


def main(argv):
    if len(argv) >= 2 and argv[0] == "--selftest":
        fails = selftest(argv[1])
        for f in fails:
            print("FAIL", f)
        print("selftest", "failed" if fails else "passed")
        return 1 if fails else 0
    if len(argv) < 2:
        print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    hp, params = load_model(argv[0])
    logits, _, _ = forward(hp, params, [int(a) for a in argv[1:]])
    print(" ".join(str(int(i)) for i in logits.argmax(-1)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
