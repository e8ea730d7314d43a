#!/usr/bin/python3
"""check_fixtures.py - verifies what make_model_fixtures.py wrote.

    /usr/bin/python3 tests/ref/check_fixtures.py --fixtures DIR [--gpt2-tokenizer DIR]

Not part of the build; run it after changing the fixture generator.
  * every good model passes gpt2_ref's self-test (a loop/KV-cache derivation
    agrees with the vectorised forward pass; causality; softmax rows sum to 1)
    and the stored reference files have the sizes meta.txt announces;
  * the F16/BF16 models hold the F32 weights rounded to within their precision;
  * the tiny tokenizer's ids 0..255 are GPT-2's byte tokens in GPT-2's order
    (compared with the real encoder.json when --gpt2-tokenizer is given);
  * a strict validator that lists *every* defect of a model directory finds
    nothing in the good models and exactly the one intended defect in each
    bad case.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_ref  # noqa: E402
import make_model_fixtures as mk  # noqa: E402

# ----------------------------------------------------------------------------
# strict validator: returns the set of defect tags found in a model directory


def is_uint(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def st_defects(path, cfg):
    if not os.path.exists(path):
        return {"st_missing_file"}
    blob = open(path, "rb").read()
    if len(blob) == 0:
        return {"st_empty"}
    if len(blob) < 8:
        return {"st_short"}
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        return {"st_header_beyond_file"}
    try:
        header = json.loads(blob[8:8 + n])
    except ValueError:
        return {"st_header_not_json"}
    if not isinstance(header, dict):
        return {"st_header_not_object"}
    D = len(blob) - 8 - n
    found, spans, names = set(), [], {}
    offsets_ok = True
    for name, info in header.items():
        if name == "__metadata__":
            continue
        names[name] = info
        dtype_ok = info.get("dtype") in gpt2_ref.DTYPE_SIZE
        if not dtype_ok:
            found.add("st_unknown_dtype")
        shape = info.get("shape")
        shape_ok = isinstance(shape, list) and all(is_uint(d) for d in shape)
        if not shape_ok:
            found.add("st_bad_shape")
        offs = info.get("data_offsets")
        if not (isinstance(offs, list) and len(offs) == 2 and all(is_uint(o) for o in offs)
                and offs[0] <= offs[1]):
            found.add("st_bad_offsets")
            offsets_ok = False
            continue
        b, e = offs
        if e > D:
            found.add("st_outside")
        if dtype_ok and shape_ok:
            size = int(np.prod(shape, dtype=np.int64)) * gpt2_ref.DTYPE_SIZE[info["dtype"]]
            if e - b != size:
                found.add("st_wrong_size")
            if b % gpt2_ref.DTYPE_SIZE[info["dtype"]]:
                found.add("st_misaligned")
        spans.append((b, e))
    if offsets_ok:
        spans.sort()
        covered = 0
        for b, e in spans:
            if b < covered:
                found.add("st_overlap")
            elif b > covered and b < D:
                found.add("st_gap")
            covered = max(covered, e)
        if covered < D:
            found.add("st_gap")
    # required tensors and their shapes against the config
    stripped = {(k[len("transformer."):] if k.startswith("transformer.") else k): v
                for k, v in names.items()}
    if cfg is not None:
        C, V, P, L = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"]
        want = {"wte.weight": [V, C], "wpe.weight": [P, C], "ln_f.weight": [C], "ln_f.bias": [C]}
        for l in range(L):
            p = f"h.{l}."
            for ln in ("ln_1", "ln_2"):
                want[p + ln + ".weight"] = [C]
                want[p + ln + ".bias"] = [C]
            for lin, i, o in (("attn.c_attn", C, 3 * C), ("attn.c_proj", C, C),
                              ("mlp.c_fc", C, 4 * C), ("mlp.c_proj", 4 * C, C)):
                want[p + lin + ".weight"] = [i, o]
                want[p + lin + ".bias"] = [o]
        if "lm_head.weight" in stripped:
            want["lm_head.weight"] = [V, C]
        for name, shape in want.items():
            if name not in stripped:
                found.add("st_missing_tensor")
            elif stripped[name].get("shape") != shape and isinstance(stripped[name].get("shape"), list) \
                    and all(is_uint(d) for d in stripped[name]["shape"]):
                found.add("st_shape_mismatch")
    return found


def cfg_load(path):
    """(config dict or None, defects)."""
    if not os.path.exists(path):
        return None, {"cfg_missing"}
    try:
        cfg = json.load(open(path))
    except ValueError:
        return None, {"cfg_not_json"}
    keys = ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size")
    if any(k not in cfg for k in keys):
        return None, {"cfg_missing_key"}
    if any(not is_uint(cfg[k]) or cfg[k] == 0 for k in keys):
        return None, {"cfg_bad_value"}
    if cfg["n_embd"] % cfg["n_head"]:
        return cfg, {"cfg_not_divisible"}
    return cfg, set()


def tok_defects(d, cfg):
    found = set()
    vpath, mpath = os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt")
    vocab = None
    if not os.path.exists(vpath):
        found.add("tok_missing_vocab")
    elif os.path.getsize(vpath) == 0:
        found.add("tok_empty_vocab")
    else:
        try:
            vocab = json.load(open(vpath, encoding="utf-8"))
        except ValueError:
            found.add("tok_invalid_vocab")
        if vocab is not None:
            if not all(is_uint(v) for v in vocab.values()):
                found.add("tok_vocab_not_int")
                vocab = None
    if vocab is not None:
        if any(ch not in vocab for ch in mk.BYTE_ENCODER.values()):
            found.add("tok_vocab_missing_byte")
        if len(set(vocab.values())) != len(vocab):
            found.add("tok_duplicate_id")
        if cfg is not None and max(vocab.values()) >= cfg["vocab_size"]:
            found.add("tok_vocab_too_big")
    if not os.path.exists(mpath):
        found.add("tok_missing_merges")
    elif os.path.getsize(mpath) == 0:
        found.add("tok_empty_merges")
    else:
        lines = open(mpath, encoding="utf-8").read().split("\n")
        if lines[-1] == "":
            lines.pop()
        if not lines[0].startswith("#version"):
            found.add("tok_no_version_line")
        for line in lines[1:]:
            parts = line.split(" ")
            if len(parts) != 2 or not all(parts):
                found.add("tok_merge_bad_line")
            elif vocab is not None and not (parts[0] in vocab and parts[1] in vocab
                                            and parts[0] + parts[1] in vocab):
                found.add("tok_merge_unknown")
    return found


def defects(d):
    cfg, found = cfg_load(os.path.join(d, "config.json"))
    found |= st_defects(os.path.join(d, "model.safetensors"), cfg)
    found |= tok_defects(d, cfg)
    return found


# the validator's tag for each case (the same name, except where noted)
CASE_TAG = {"st_offsets_outside": "st_outside", "st_truncated_data": "st_outside",
            "st_bad_offsets_string": "st_bad_offsets", "st_bad_offsets_reversed": "st_bad_offsets"}

# ----------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--gpt2-tokenizer", help="directory with GPT-2's encoder.json")
    args = ap.parse_args()
    fails = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            fails.append(what)

    models = [m[0] for m in mk.MODELS]
    for name in models:
        mdir = os.path.join(args.fixtures, "models", name)
        rdir = os.path.join(args.fixtures, "ref", name)
        check(defects(mdir) == set(), f"{name}: strict validator finds no defect")
        st = gpt2_ref.selftest(mdir)
        check(not st, f"{name}: gpt2_ref self-test {st}")
        L, H, C, P, V, T = map(int, open(os.path.join(rdir, "meta.txt")).read().split())
        ids = list(map(int, open(os.path.join(rdir, "tokens.txt")).read().split()))
        check(len(ids) == T and max(ids) < V - 1, f"{name}: tokens.txt has {T} ids, no EOT")
        for f, n in (("logits.f32", T * V), ("attn.f32", L * H * T * T), ("resid.f32", L * T * C)):
            check(os.path.getsize(os.path.join(rdir, f)) == 4 * n, f"{name}: {f} holds {n} floats")
        # the stored logits are the reference's, to float32 rounding
        hp, params = gpt2_ref.load_model(mdir)
        logits, attn, _ = gpt2_ref.forward(hp, params, ids)
        stored = np.fromfile(os.path.join(rdir, "logits.f32"), "<f4").reshape(T, V)
        check(np.abs(stored - logits).max() < 1e-5, f"{name}: logits.f32 matches a fresh forward")
        a = np.fromfile(os.path.join(rdir, "attn.f32"), "<f4").reshape(L, H, T, T)
        check(np.allclose(a.sum(-1), 1, atol=1e-6) and not a[..., np.triu(np.ones((T, T), bool), 1)].any(),
              f"{name}: attn.f32 rows sum to 1, zero above the diagonal")
        prompt, gen = [list(map(int, l.split())) for l in open(os.path.join(rdir, "greedy.txt"))]
        g2, m = gpt2_ref.greedy(hp, params, prompt, len(gen))
        check(g2 == gen and len(gen) == 50 and min(m) >= 2e-3,
              f"{name}: greedy.txt reproduces, min margin {min(m):.4g}")

    # rounding of the F16/BF16 copies against the F32 weights
    ref = gpt2_ref.read_safetensors(os.path.join(args.fixtures, "models/tiny-f32/model.safetensors"))
    for name, rel in (("tiny-f16", 2.0 ** -11), ("tiny-bf16", 2.0 ** -8)):
        t = gpt2_ref.read_safetensors(os.path.join(args.fixtures, "models", name, "model.safetensors"))
        worst = 0.0
        for k, v in ref.items():
            if k.endswith(".attn.bias") and not k.endswith("c_attn.bias"):  # the mask buffer
                check(np.array_equal(t[k], v), f"{name}: {k} is the F32 mask")
                continue
            # relative error bound, plus an absolute floor for F16 subnormals
            err = np.abs(t[k] - v) / (np.abs(v) + (2.0 ** -24 / rel))
            worst = max(worst, float(err.max()))
        check(worst <= rel * 1.0001, f"{name}: weights within {rel:.3g} relative of F32 (worst {worst:.3g})")

    # GPT-2 byte-token order
    vocab = json.load(open(os.path.join(args.fixtures, "models/tiny-f32/vocab.json")))
    inv = {v: k for k, v in vocab.items()}
    check(inv[0] == "!" and inv[188] == "\u0100" and inv[len(vocab) - 1] == "<|endoftext|>",
          "tiny vocab: id 0 '!', id 188 U+0100, last id <|endoftext|>")
    if args.gpt2_tokenizer:
        enc = json.load(open(os.path.join(args.gpt2_tokenizer, "encoder.json")))
        einv = {v: k for k, v in enc.items()}
        check(all(einv[i] == inv[i] for i in range(256)), "tiny vocab ids 0..255 equal GPT-2's encoder.json")

    # bad cases: exactly one defect each
    bad = os.path.join(args.fixtures, "bad")
    cases = [l.rstrip("\n").split("\t") for l in open(os.path.join(bad, "cases.tsv"))]
    for name, status, fname, keyword in cases:
        got = defects(os.path.join(bad, name))
        want = {CASE_TAG.get(name, name)}
        check(got == want, f"bad/{name}: defects {sorted(got)}")

    print(f"{len(fails)} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
