#!/usr/bin/python3
"""patch_ref.py - activation patching (include/gpt2_patch.h) in numpy, float64,
written from its definition on attribute_ref.py's forward passes (gpt2_ref.py's
and decoder_ref.py's functions, every layer checked against them there).

    patch_ref.py --fixtures DIR      writes DIR/patch/ (below)
    patch_ref.py check MODEL_DIR FILE
                                     a `gptscope patch --json` document against the
                                     reference on its own prompts and tokens; exit 1
                                     on a difference over 2e-4 of max(1, |LD|)

Definition. Prompts C (clean) and K (corrupt) of T tokens, an answer A and a
wrong token B; LD = logits[T - 1, A] - logits[T - 1, B]. K is run again with
one activation replaced by C's; score = (LD_patched - LD_K) / (LD_C - LD_K).
    resid (l, p): the residual stream entering block l at position p
                  (l = 0: the embeddings)                 grid (L, T)
    mlp   (l, p): layer l's MLP output at position p      grid (L, T)
    heads (l, h): head h's attention-weighted values of layer l at every
                  position                                grid (L, H)

DIR/patch/:
    cases.tsv   name<TAB>model path (relative to DIR)<TAB>NAME.json
    NAME.json   {"model", "clean", "corrupt", "answer", "wrong", "ld_clean", "ld_corrupt",
                 "grids": {"resid": {"ld": [[...]], "scores": [[...]]}, "mlp": ..., "heads": ...}}
The clean prompt is the model's reference ids; the corrupt one changes two of
its tokens (a third of the way in, and two before the end); A is the clean
run's top 1 at the last position, B the corrupt run's (or the clean run's
second where they agree).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import attribute_ref as ar  # noqa: E402

GPT2_MODELS = ["tiny-f32", "tiny-head64"]
ARCH_MODELS = ["llama-gqa", "qwen3", "neox"]
KINDS = ("resid", "mlp", "heads")


def capture(model_dir, ids):
    """The clean run's activations: {kind: [per layer]} and its logits."""
    got = {k: {} for k in KINDS}

    def keep(kind, l, a):
        got[kind][l] = a.copy()
        return a

    _, r = ar.run(model_dir, ids, edit=keep)
    return got, r["logits"]


def ld_of(logits, a, b):
    return float(logits[-1, a] - logits[-1, b])


def grid(model_dir, corrupt, clean_acts, kind, L, H, a, b):
    """LD of every patched run (L, T or H)."""
    T = len(corrupt)
    cols = H if kind == "heads" else T
    out = np.zeros((L, cols))
    for l in range(L):
        for c in range(cols):
            def put(k, layer, x, l=l, c=c):
                if k != kind or layer != l:
                    return x
                x = x.copy()
                if kind == "heads":
                    x[c] = clean_acts[kind][l][c]          # (H, T, hd): head c at every position
                else:
                    x[c] = clean_acts[kind][l][c]          # (T, C): position c
                return x
            _, r = ar.run(model_dir, corrupt, edit=put)
            out[l, c] = ld_of(r["logits"], a, b)
    return out


def case(model_dir, ids):
    T = len(ids)
    _, r = ar.run(model_dir, ids)
    V = r["logits"].shape[1]
    corrupt = list(ids)
    for p in (T // 3, T - 2):
        corrupt[p] = (corrupt[p] * 5 + 17) % V
    _, rk = ar.run(model_dir, corrupt)
    a = int(np.argmax(r["logits"][-1]))
    b = int(np.argmax(rk["logits"][-1]))
    if b == a:
        b = int(np.argsort(-r["logits"][-1], kind="stable")[1])
    acts, logits_c = capture(model_dir, ids)
    ld_c, ld_k = ld_of(logits_c, a, b), ld_of(rk["logits"], a, b)
    assert abs(ld_c - ld_k) > 0.1, (ld_c, ld_k)    # a difference worth explaining
    L = len(acts["heads"])
    H = acts["heads"][0].shape[0]
    grids = {}
    for kind in KINDS:
        g = grid(model_dir, corrupt, acts, kind, L, H, a, b)
        grids[kind] = {"ld": g.tolist(), "scores": ((g - ld_k) / (ld_c - ld_k)).tolist()}
    # the definition's own checks: where the tokens agree, the stream entering
    # block 0 is the same in both runs, and before the first difference every
    # activation is: patching it changes nothing
    first = next(p for p in range(T) if ids[p] != corrupt[p])
    res, mlp = np.array(grids["resid"]["ld"]), np.array(grids["mlp"]["ld"])
    for p in range(T):
        if ids[p] == corrupt[p]:
            assert abs(res[0, p] - ld_k) < 1e-12, (p, res[0, p], ld_k)
        if p < first:
            assert np.abs(res[:, p] - ld_k).max() < 1e-12 and np.abs(mlp[:, p] - ld_k).max() < 1e-12, p
    return {"clean": ids, "corrupt": corrupt, "answer": a, "wrong": b, "ld_clean": ld_c, "ld_corrupt": ld_k,
            "grids": grids}


def read_ids(path):
    with open(path) as f:
        return [int(t) for t in f.read().split()]


def write_fixtures(fixtures):
    out = os.path.join(fixtures, "patch")
    os.makedirs(out, exist_ok=True)
    models = [(n, os.path.join("models", n), os.path.join("ref", n, "tokens.txt")) for n in GPT2_MODELS]
    models += [(n, os.path.join("arch", "models", n), os.path.join("arch", "ref", n, "ids.txt")) for n in ARCH_MODELS]
    lines = []
    for name, rel, ids_rel in models:
        ids = read_ids(os.path.join(fixtures, ids_rel))[:16]
        c = case(os.path.join(fixtures, rel), ids)
        c["model"] = rel
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(c, f)
        lines.append(f"{name}\t{rel}\t{name}.json")
        s = np.array(c["grids"]["resid"]["scores"])
        print(f"patch {name}: LD clean {c['ld_clean']:.4f}, corrupt {c['ld_corrupt']:.4f}; resid scores "
              f"{s.min():.3f}..{s.max():.3f}, heads {np.min(c['grids']['heads']['scores']):.3f}.."
              f"{np.max(c['grids']['heads']['scores']):.3f}")
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")


def check(model_dir, path):
    with open(path) as f:
        doc = json.load(f)
    clean, corrupt = doc["clean"]["ids"], doc["corrupt"]["ids"]
    a, b, kind = doc["answer"]["id"], doc["wrong"]["id"], doc["what"]
    acts, logits_c = capture(model_dir, clean)
    _, rk = ar.run(model_dir, corrupt)
    ld_c, ld_k = ld_of(logits_c, a, b), ld_of(rk["logits"], a, b)
    L, H = len(acts["heads"]), acts["heads"][0].shape[0]
    g = grid(model_dir, corrupt, acts, kind, L, H, a, b)
    tol = 2e-4 * max(1.0, abs(ld_c), abs(ld_k))
    got_ld, got_sc = np.array(doc["ld"], dtype=float), np.array(doc["scores"], dtype=float)
    want_sc = (g - ld_k) / (ld_c - ld_k)
    bad = []
    if got_ld.shape != g.shape:
        bad.append(f"grid {got_ld.shape}, reference {g.shape}")
    else:
        if abs(doc["ld_clean"] - ld_c) > tol or abs(doc["ld_corrupt"] - ld_k) > tol:
            bad.append(f"LDs {doc['ld_clean']} {doc['ld_corrupt']}, reference {ld_c} {ld_k}")
        d, ds = np.abs(got_ld - g).max(), np.abs(got_sc - want_sc).max()
        if d > tol or ds > 2 * tol / abs(ld_c - ld_k):
            bad.append(f"cells differ by {d:.3g} (LD), {ds:.3g} (score)")
    if bad:
        print(f"{path}: " + "; ".join(bad))
        return 1
    print(f"patch {kind} {os.path.basename(model_dir)}: {g.size} cells within {d:.1e} of float64 "
          f"(LD clean {ld_c:.4f}, corrupt {ld_k:.4f})")
    return 0


def main(argv):
    if len(argv) == 2 and argv[0] == "--fixtures":
        write_fixtures(argv[1])
        return 0
    if len(argv) == 3 and argv[0] == "check":
        return check(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
