#!/usr/bin/python3
"""check_arch_gguf.py - reads the GGUF files make_arch_fixtures.py wrote the way
llama.cpp does, and checks that they reproduce the references gguf.tsv names.

    /usr/bin/python3 tests/ref/check_arch_gguf.py --fixtures DIR

Not part of the build. A third forward pass, independent of the HF layout:
its own GGUF parser (version 3, alignment 32), then llama.cpp's conventions:
  llama (and Mistral):  attn_q / attn_k rows permuted by convert_hf_to_gguf.py,
                        so rotary turns adjacent pairs (2i, 2i+1) of each head
                        (GGML's normal rope mode); rope_freqs.weight, when
                        present, divides the angle of pair i
  qwen2, qwen3:         rows as in HF, rotary on pairs (i, i + n_rot/2) (NEOX mode)
  gptneox:              attn_qkv rows all q, then all k, then all v (the converter
                        de-interleaves HF's per-head layout); NEOX mode on the
                        first rope.dimension_count dims; parallel residual per
                        use_parallel_residual; GELU exact (llama.cpp itself uses
                        the tanh form)
  the head is output.weight, or token_embd.weight when the file has none.
Hyperparameters come from the file only: {arch}.attention.key_length else
embedding_length / head_count; rope.dimension_count else the head size;
rope.freq_base else 10000; head_count_kv else head_count.
"""

import argparse
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_write as gw  # noqa: E402
import gpt2_ref  # noqa: E402

SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf(path):
    """-> (metadata {key: value}, {tensor name: float64 array in numpy (rows, cols) order})."""
    with open(path, "rb") as f:
        b = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, b, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        pos += n
        return b[pos - n:pos].decode("utf-8")

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<I"), take("<Q")
            return [value(et) for _ in range(n)]
        return take(SCALARS[t])

    if b[:4] != b"GGUF":
        raise ValueError(f"{path}: not GGUF")
    pos = 4
    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    if version != 3:
        raise ValueError(f"{path}: version {version}")
    kv = {}
    for _ in range(n_kv):
        key = string()
        kv[key] = value(take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        ne = [take("<Q") for _ in range(take("<I"))]
        infos.append((name, ne, take("<I"), take("<Q")))
    align = kv.get("general.alignment", 32)
    base = -(-pos // align) * align
    by_id = {v[0]: k for k, v in gw.TYPES.items()}
    tensors = {}
    for name, ne, tid, off in infos:
        typ = by_id[tid]
        _, block, nbytes = gw.TYPES[typ]
        size = int(np.prod(ne)) // block * nbytes
        tensors[name] = gw.decode_tensor(b[base + off:base + off + size], typ,
                                         tuple(reversed(ne))).astype(np.float64)
    return kv, tensors


def rope(x, pos, n_rot, base, neox_mode, factors):
    """x: (T, heads, hd). Pair i turns by pos * base^(-2i/n_rot) / factors[i]."""
    x = x.copy()
    half = n_rot // 2
    for i in range(half):
        angle = pos * base ** (-2.0 * i / n_rot) / (1.0 if factors is None else factors[i])
        c, s = np.cos(angle)[:, None], np.sin(angle)[:, None]
        a, b = (i, i + half) if neox_mode else (2 * i, 2 * i + 1)
        xa, xb = x[:, :, a].copy(), x[:, :, b].copy()
        x[:, :, a] = xa * c - xb * s
        x[:, :, b] = xa * s + xb * c
    return x


def forward(kv, t, ids):
    A = kv["general.architecture"]
    hp = lambda k, d=None: kv.get(f"{A}.{k}", d)
    L, C, H = hp("block_count"), hp("embedding_length"), hp("attention.head_count")
    hd = hp("attention.key_length", C // H)
    n_rot, base = hp("rope.dimension_count", hd), hp("rope.freq_base", 10000.0)
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    factors = t.get("rope_freqs.weight")
    neox_mode = A != "llama"
    causal = np.triu(np.ones((T, T), dtype=bool), 1)
    bias = lambda n: t.get(n, 0.0)

    def rms(x, w, eps):
        return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * w

    def ln(x, p, eps):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + eps) * t[p + ".weight"] + t[p + ".bias"]

    def lin(x, p):
        return x @ t[p + ".weight"].T + bias(p + ".bias")

    def attn(q, k, v):
        rep = q.shape[1] // k.shape[1]
        k, v = np.repeat(k, rep, 1), np.repeat(v, rep, 1)
        s = np.einsum("thd,shd->hts", q, k) / math.sqrt(q.shape[-1])
        s = np.where(causal, -np.inf, s)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        return np.einsum("hts,shd->thd", p, v).reshape(T, -1)

    x = t["token_embd.weight"][ids]
    for l in range(L):
        p = f"blk.{l}."
        if A == "gptneox":
            eps = hp("attention.layer_norm_epsilon")
            qkv = lin(ln(x, p + "attn_norm", eps), p + "attn_qkv")
            q, k, v = (qkv[:, i * C:(i + 1) * C].reshape(T, H, hd) for i in range(3))
            a = lin(attn(rope(q, pos, n_rot, base, True, None), rope(k, pos, n_rot, base, True, None), v),
                    p + "attn_output")
            mlp = lambda z: lin(gpt2_ref.gelu_erf(lin(z, p + "ffn_up")), p + "ffn_down")
            if hp("use_parallel_residual", True):
                x = x + a + mlp(ln(x, p + "ffn_norm", eps))
            else:
                x = x + a
                x = x + mlp(ln(x, p + "ffn_norm", eps))
            continue
        eps = hp("attention.layer_norm_rms_epsilon")
        KV = hp("attention.head_count_kv", H)
        h = rms(x, t[p + "attn_norm.weight"], eps)
        q = lin(h, p + "attn_q").reshape(T, H, hd)
        k = lin(h, p + "attn_k").reshape(T, KV, hd)
        v = lin(h, p + "attn_v").reshape(T, KV, hd)
        if p + "attn_q_norm.weight" in t:
            q, k = rms(q, t[p + "attn_q_norm.weight"], eps), rms(k, t[p + "attn_k_norm.weight"], eps)
        a = attn(rope(q, pos, n_rot, base, neox_mode, factors), rope(k, pos, n_rot, base, neox_mode, factors), v)
        x = x + lin(a, p + "attn_output")
        h = rms(x, t[p + "ffn_norm.weight"], eps)
        g = lin(h, p + "ffn_gate")
        x = x + lin(g / (1 + np.exp(-g)) * lin(h, p + "ffn_up"), p + "ffn_down")
    if A == "gptneox":
        x = ln(x, "output_norm", hp("attention.layer_norm_epsilon"))
    else:
        x = rms(x, t["output_norm.weight"], hp("attention.layer_norm_rms_epsilon"))
    return x @ t.get("output.weight", t["token_embd.weight"]).T


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixtures", required=True)
    args = ap.parse_args(argv)
    arch = os.path.join(args.fixtures, "arch")
    worst = 0.0
    with open(os.path.join(arch, "gguf.tsv")) as f:
        rows = [ln.split("\t") for ln in f.read().splitlines()]
    for fname, case, ref, typ in rows:
        rdir = os.path.join(arch, "ref", ref)
        with open(os.path.join(rdir, "ids.txt")) as f:
            ids = [int(i) for i in f.read().split()]
        want = np.fromfile(os.path.join(rdir, "logits.f32"), dtype="<f4").reshape(len(ids), -1)
        kv, t = read_gguf(os.path.join(arch, "gguf", fname))
        d = float(np.abs(forward(kv, t, ids) - want).max())
        worst = max(worst, d)
        print(f"{fname:30s} {typ:5s} vs ref/{ref:24s} max |diff| {d:.3g}")
    ok = worst < 1e-4
    print("check_arch_gguf", "passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
