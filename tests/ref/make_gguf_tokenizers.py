#!/usr/bin/python3
"""make_gguf_tokenizers.py - real Hugging Face tokenizers carried by GGUF files,
as llama.cpp's convert_hf_to_gguf.py writes them, for the C tests to encode
with and compare against transformers.js's ids (hf_tok/NAME.json).

    /usr/bin/python3 tests/ref/make_gguf_tokenizers.py --hf DIR --out OUTDIR NAME:PRE[:bos] ...

For each NAME (a directory DIR/NAME with tokenizer.json) writes OUTDIR/NAME.gguf
(NAME-bos.gguf with :bos, which adds tokenizer.ggml.add_bos_token true):
a one-layer model of the architecture the tokenizer belongs to (llama for
"llama-bpe", qwen2 for "qwen2"), hidden size 8, random F16 weights (never
compared: only the tokenizer is tested), and the tokenizer as convert_hf_to_gguf
writes a byte-level BPE:
    tokenizer.ggml.model   "gpt2"
    tokenizer.ggml.pre     PRE ("llama-bpe" for Llama 3, "qwen2" for Qwen 2.5 and 3)
    tokenizer.ggml.tokens  every id's string: the vocabulary's in GPT-2's byte
                           alphabet, an added token's content as it is
    tokenizer.ggml.token_type  1 normal, 3 control (an added special token),
                           4 user-defined (an added token that is not special)
    tokenizer.ggml.merges  "left right" strings in rank order ([a, b] pairs joined)
    tokenizer.ggml.eos_token_id, bos_token_id when tokenizer_config.json names them
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_write as gw  # noqa: E402

NORMAL, CONTROL, USER_DEFINED = 1, 3, 4
ARCH = {"llama-bpe": "llama", "qwen2": "qwen2"}


def tokenizer_kv(g, tok, cfg, pre, add_bos):
    vocab = tok["model"]["vocab"]
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    n = max(list(vocab.values()) + list(added)) + 1
    strings, types = [""] * n, [NORMAL] * n
    for s, i in vocab.items():
        strings[i] = s
    for i, a in added.items():
        strings[i], types[i] = a["content"], CONTROL if a.get("special") else USER_DEFINED
    for i in range(n):
        assert strings[i], "gap at id %d" % i
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    g.add("tokenizer.ggml.model", gw.STRING, "gpt2")
    g.add("tokenizer.ggml.pre", gw.STRING, pre)
    g.add("tokenizer.ggml.tokens", gw.ARRAY, (gw.STRING, strings))
    g.add("tokenizer.ggml.token_type", gw.ARRAY, (gw.I32, types))
    g.add("tokenizer.ggml.merges", gw.ARRAY, (gw.STRING, merges))
    content = {a["content"]: i for i, a in added.items()}
    for key in ("eos", "bos"):
        t = cfg.get(key + "_token")
        t = t.get("content") if isinstance(t, dict) else t
        if t in content:
            g.add("tokenizer.ggml.%s_token_id" % key, gw.U32, content[t])
    if add_bos:
        g.add("tokenizer.ggml.add_bos_token", gw.BOOL, True)
    return n


def write(path, name, tok, cfg, pre, add_bos):
    arch, C, F = ARCH[pre], 8, 16
    g = gw.Gguf()
    g.add("general.architecture", gw.STRING, arch)
    g.add("general.name", gw.STRING, name)
    for key, val in (("block_count", 1), ("context_length", 64), ("embedding_length", C),
                     ("feed_forward_length", F), ("attention.head_count", 1), ("attention.head_count_kv", 1)):
        g.add("%s.%s" % (arch, key), gw.U32, val)
    g.add(arch + ".rope.freq_base", gw.FLOAT32, 10000.0)
    g.add(arch + ".attention.layer_norm_rms_epsilon", gw.FLOAT32, 1e-5)
    V = tokenizer_kv(g, tok, cfg, pre, add_bos)
    rng = np.random.default_rng(7)

    def mat(rows, cols):
        return np.asarray(rng.normal(0, 0.02, (rows, cols)), dtype=np.float16).tobytes()

    ones = np.ones(C, dtype=np.float32).tobytes()
    g.add_tensor("token_embd.weight", [C, V], "F16", mat(V, C))
    g.add_tensor("output_norm.weight", [C], "F32", ones)
    g.add_tensor("blk.0.attn_norm.weight", [C], "F32", ones)
    g.add_tensor("blk.0.ffn_norm.weight", [C], "F32", ones)
    for t, rows, cols in (("attn_q", C, C), ("attn_k", C, C), ("attn_v", C, C), ("attn_output", C, C),
                          ("ffn_gate", F, C), ("ffn_up", F, C), ("ffn_down", C, F)):
        g.add_tensor("blk.0.%s.weight" % t, [cols, rows], "F16", mat(rows, cols))
    if arch == "qwen2":
        for t in ("attn_q", "attn_k", "attn_v"):
            g.add_tensor("blk.0.%s.bias" % t, [C], "F32", np.zeros(C, dtype=np.float32).tobytes())
    with open(path, "wb") as f:
        f.write(g.to_bytes())


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("cases", nargs="+", help="NAME:PRE[:bos]")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    for case in a.cases:
        name, pre, *bos = case.split(":")
        d = os.path.join(a.hf, name)
        with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
            tok = json.load(f)
        with open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        write(os.path.join(a.out, name + ("-bos" if bos else "") + ".gguf"), name, tok, cfg, pre, bool(bos))


if __name__ == "__main__":
    main(sys.argv[1:])
