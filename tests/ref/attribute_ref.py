#!/usr/bin/python3
"""attribute_ref.py - direct logit attribution (include/gpt2_attribute.h) in numpy,
float64, written from its definition on top of the reference forward passes
(gpt2_ref.py for GPT-2, decoder_ref.py for Llama, Mistral, Qwen2, Qwen3, GPT-NeoX).

    attribute_ref.py --fixtures DIR        writes DIR/attribute/ (below)
    attribute_ref.py check MODEL_DIR FILE [--top1]
                                           a `gptscope attribute --json` document against
                                           the reference (--top1: its target must be the
                                           reference's top 1); exit 1 on a difference
    attribute_ref.py csv FILE.csv FILE.json
                                           an --export CSV against the same run's JSON

Definition. At position P the residual stream after the last block is
    x = embed + sum_l (sum_h head_out[l,h] + attn_bias[l]) + sum_l mlp[l]
embed: what enters block 0 (wte[id] + wpe[P] for GPT-2; the token embedding
alone under rotary positions); head_out[l,h] = z[l,h] @ W_O[rows of head h],
z the head's attention-weighted values at P (before the output projection);
attn_bias[l] the output projection's bias (0 without one); mlp[l] the MLP's
output, its bias included. With d = W_U[A] - W_U[B] (W_U[A] without a
baseline) and u = g * d (g the final norm's weight):
    LayerNorm: s = sqrt(var(x) + eps), part c -> ((c - mean(c)) / s) . u,
               ln_f_bias = b . d
    RMSNorm:   s = sqrt(mean(x^2) + eps), part c -> (c / s) . u, ln_f_bias = 0
The contributions must add up to logits[P, A] - logits[P, B] of the reference
forward pass (checked here to 1e-9 of the logits' scale: a check of the
definition itself).

The activations come from a second run of each layer written with the
reference modules' own functions (norms, projections, rotary, attention) that
keeps z and the MLP output; every layer's output is checked against
gpt2_ref.forward's residual stream or decoder_ref's llama_layer / neox_layer
(to 1e-12), so the parts are those of the reference forward pass.

DIR/attribute/:
    cases.tsv     name<TAB>model path (relative to DIR)<TAB>parts JSON
    NAME.json     {"model", "ids", "cases": [{"pos", "target", "baseline" (null: none),
                   "norm": "layer"|"rms", "scale", "logit", "embed", "heads" [[...]],
                   "attn_bias", "mlp", "ln_f_bias", "sum", "logits_max_abs"}, ...]}
Three cases per model: the last position and its top-1; the middle position,
its top-1 against its second; position 0, a fixed token against another.
"""

import io
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import decoder_ref  # noqa: E402
import gpt2_ref  # noqa: E402

# GPT-2 fixtures (DIR/models) and the decoder families' (DIR/arch/models)
GPT2_MODELS = ["tiny-f32", "tiny-f16", "tiny-head64", "tiny-erf"]
ARCH_MODELS = ["llama-gqa", "llama-bias", "llama-mqa-untied-rope3", "llama-bf16", "qwen2", "qwen3", "mistral",
               "neox", "neox-seq"]
SAME = 1e-12   # the captured run against the reference forward pass (relative)
EXACT = 1e-9   # the parts' sum against the reference logit (relative to the logits' scale)


def is_gpt2(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f).get("model_type", "gpt2") == "gpt2"


def close(a, b, what, tol=SAME):
    scale = max(1.0, float(np.abs(b).max()))
    err = float(np.abs(np.asarray(a) - np.asarray(b)).max())
    if err > tol * scale:
        raise AssertionError(f"{what}: differs from the reference forward pass by {err:.3g}")


# ----------------------------------------------------------------------------
# the forward passes, keeping the parts


def no_edit(kind, layer, a):
    return a


def gpt2_run(hp, params, ids, ablate=(), edit=None):
    """GPT-2. Returns dict: embed (T, C), z [L] (H, T, hd), w_o [L] (C, C) rows by
    input, bias [L] (C,), mlp [L] (T, C), x (T, C), logits (T, V), norm {g, b}, rms False.
    edit(kind, l, a) -> a may change the stream entering block l ("resid", (T, C)),
    its heads' values ("heads", (H, T, hd)) and its MLP output ("mlp", (T, C))
    (then the logits are this pass's own, not checked against gpt2_ref)."""
    T, C, H, eps = len(ids), hp["n_embd"], hp["n_head"], hp["eps"]
    hd = C // H
    ed = edit or no_edit
    x = params["wte"][ids] + params["wpe"][np.arange(T)]        # (T, C)
    out = {"embed": x.copy(), "z": [], "w_o": [], "bias": [], "mlp": []}
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    for blk in params["blocks"]:
        x = ed("resid", len(out["z"]), x)
        n = gpt2_ref.layer_norm(x, **blk["ln_1"], eps=eps)
        q, k, v = np.split(gpt2_ref.linear(n, **blk["attn"]["c_attn"]), 3, axis=-1)
        heads = lambda a: a.reshape(T, H, hd).transpose(1, 0, 2)  # noqa: E731  (H, T, hd)
        q, k, v = heads(q), heads(k), heads(v)
        probs = gpt2_ref.softmax(np.where(future, -np.inf, q @ k.transpose(0, 2, 1) / math.sqrt(hd)))
        z = probs @ v                                             # (H, T, hd)
        for bl, h in ablate:                                      # zero-ablation: no output at all
            if bl == len(out["z"]):
                z[h] = 0.0
        z = ed("heads", len(out["z"]), z)
        proj = blk["attn"]["c_proj"]
        x = x + gpt2_ref.linear(z.transpose(1, 0, 2).reshape(T, C), **proj)
        m = gpt2_ref.mlp(gpt2_ref.layer_norm(x, **blk["ln_2"], eps=eps), **blk["mlp"], erf=hp.get("gelu_erf", False))
        m = ed("mlp", len(out["z"]), m)
        x = x + m
        out["z"].append(z)
        out["w_o"].append(proj["w"])                              # (in C, out C)
        out["bias"].append(proj["b"])
        out["mlp"].append(m)
    if edit:
        logits = gpt2_ref.layer_norm(x, **params["ln_f"], eps=eps) @ params["lm_head"].T
    else:
        logits, _, resid = gpt2_ref.forward(hp, params, ids, ablate=ablate)
        close(x, resid[-1], "the residual stream after the last block")
    out.update(x=x, logits=logits, g=params["ln_f"]["g"], b=params["ln_f"]["b"], rms=False, eps=eps,
               lm_head=params["lm_head"])
    return out


def llama_run_layer(hp, p, x, window, out, ed=no_edit):
    """decoder_ref.llama_layer, keeping z and the MLP output (edited by ed)."""
    T = x.shape[0]
    H, KV, hd = hp["n_head"], hp["n_kv"], hp["head_dim"]
    pos = np.arange(T, dtype=np.float64)
    n = decoder_ref.norm(hp, x, p["ln1"])
    heads = lambda a, nh: a.reshape(T, nh, hd).transpose(1, 0, 2)  # noqa: E731
    q = heads(decoder_ref.linear(n, p["q"]), H)
    k = heads(decoder_ref.linear(n, p["k"]), KV)
    v = heads(decoder_ref.linear(n, p["v"]), KV)
    if p["q_norm"] is not None:
        q = decoder_ref.rms_norm(q, p["q_norm"], hp["eps"])
        k = decoder_ref.rms_norm(k, p["k_norm"], hp["eps"])
    q = decoder_ref.apply_rotary(q, pos, hp["inv_freq"])
    k = decoder_ref.apply_rotary(k, pos, hp["inv_freq"])
    z = ed("heads", len(out["z"]), decoder_ref.attend(q, k, v, window))   # (H, T, hd)
    h = x + decoder_ref.linear(z.transpose(1, 0, 2).reshape(T, H * hd), p["o"])
    n = decoder_ref.norm(hp, h, p["ln2"])
    m = decoder_ref.linear(decoder_ref.silu(decoder_ref.linear(n, p["gate"])) * decoder_ref.linear(n, p["up"]),
                           p["down"])
    m = ed("mlp", len(out["z"]), m)
    out["z"].append(z)
    out["w_o"].append(p["o"]["w"].T)                              # (H hd, C)
    out["bias"].append(p["o"]["b"])
    out["mlp"].append(m)
    return h + m


def neox_run_layer(hp, p, x, out, ed=no_edit):
    """decoder_ref.neox_layer, keeping z and the MLP output (edited by ed)."""
    T, C = x.shape
    H, hd = hp["n_head"], hp["head_dim"]
    pos = np.arange(T, dtype=np.float64)
    qkv = decoder_ref.linear(decoder_ref.norm(hp, x, p["ln1"]), p["qkv"])
    qkv = qkv.reshape(T, H, 3 * hd).transpose(1, 0, 2)
    q, k, v = qkv[..., :hd], qkv[..., hd:2 * hd], qkv[..., 2 * hd:]
    q = decoder_ref.apply_rotary(q, pos, hp["inv_freq"])
    k = decoder_ref.apply_rotary(k, pos, hp["inv_freq"])
    z = ed("heads", len(out["z"]), decoder_ref.attend(q, k, v, None))
    a = decoder_ref.linear(z.transpose(1, 0, 2).reshape(T, C), p["dense"])
    mlp = lambda u: decoder_ref.linear(decoder_ref.act(hp, decoder_ref.linear(u, p["fc_in"])), p["fc_out"])  # noqa
    m = ed("mlp", len(out["z"]), mlp(decoder_ref.norm(hp, x if hp["parallel"] else x + a, p["ln2"])))
    out["z"].append(z)
    out["w_o"].append(p["dense"]["w"].T)
    out["bias"].append(p["dense"]["b"])
    out["mlp"].append(m)
    return x + a + m


def decoder_run(hp, params, ids, edit=None):
    """As gpt2_run, for decoder_ref's families (edit: the same, unchecked)."""
    ed = edit or no_edit
    x = params["embed"][np.asarray(ids)]                          # (T, C)
    out = {"embed": x.copy(), "z": [], "w_o": [], "bias": [], "mlp": []}
    for l, p in enumerate(params["layers"]):
        x = ed("resid", l, x)
        if hp["model_type"] == "gpt_neox":
            nxt = neox_run_layer(hp, p, x, out, ed)
            if not edit:
                close(nxt, decoder_ref.neox_layer(hp, p, x), f"layer {l}")
        else:
            nxt = llama_run_layer(hp, p, x, hp["windows"][l], out, ed)
            if not edit:
                close(nxt, decoder_ref.llama_layer(hp, p, x, hp["windows"][l]), f"layer {l}")
        x = nxt
    logits = decoder_ref.norm(hp, x, params["norm"]) @ params["lm_head"].T
    if not edit:
        close(logits, decoder_ref.forward(hp, params, ids), "the logits")
    nrm = params["norm"]
    out.update(x=x, logits=logits, g=nrm["w"], b=nrm["b"], rms=nrm["b"] is None, eps=hp["eps"],
               lm_head=params["lm_head"])
    return out


def run(model_dir, ids, ablate=(), edit=None):
    """ablate: (layer, head) pairs zero-ablated (GPT-2 only: gpt2_ref.forward's);
    edit: gpt2_run's."""
    if is_gpt2(model_dir):
        hp, params = gpt2_ref.load_model(model_dir)
        return hp, gpt2_run(hp, params, ids, ablate, edit)
    if ablate:
        raise ValueError("ablation is checked on GPT-2 models only")
    hp, params = decoder_ref.load_model(model_dir)
    return hp, decoder_run(hp, params, ids, edit)


# ----------------------------------------------------------------------------
# the attribution


def attribute(hp, r, pos, target, baseline):
    """The parts' contributions at pos, as the dict the C library's result holds."""
    x = r["x"][pos]                                                # (C,)
    d = r["lm_head"][target] - (r["lm_head"][baseline] if baseline is not None else 0.0)
    u = r["g"] * d
    if r["rms"]:
        s = math.sqrt(np.mean(x ** 2) + r["eps"])
        contrib = lambda c: float(c @ u) / s                       # noqa: E731
    else:
        s = math.sqrt(np.var(x) + r["eps"])
        contrib = lambda c: float((c - c.mean()) @ u) / s          # noqa: E731
    H = hp["n_head"]
    L = len(r["z"])
    hd = r["z"][0].shape[2]
    heads = [[contrib(r["z"][l][h, pos] @ r["w_o"][l][h * hd:(h + 1) * hd]) for h in range(H)] for l in range(L)]
    bias = [contrib(b) if b is not None else 0.0 for b in r["bias"]]
    mlp = [contrib(m[pos]) for m in r["mlp"]]
    embed = contrib(r["embed"][pos])
    ln_f_bias = float(r["b"] @ d) if not r["rms"] else 0.0
    total = embed + sum(map(sum, heads)) + sum(bias) + sum(mlp) + ln_f_bias
    lg = r["logits"][pos]
    logit = float(lg[target] - (lg[baseline] if baseline is not None else 0.0))
    scale = float(np.abs(lg).max())
    if abs(total - logit) > EXACT * max(1.0, scale):
        raise AssertionError(f"position {pos}: the parts add up to {total!r}, the logit is {logit!r}")
    return {"pos": pos, "target": target, "baseline": baseline, "norm": "rms" if r["rms"] else "layer",
            "scale": s, "logit": logit, "embed": embed, "heads": heads, "attn_bias": bias, "mlp": mlp,
            "ln_f_bias": ln_f_bias, "sum": total, "logits_max_abs": scale}


def cases_for(hp, r, ids):
    T, V = len(ids), r["logits"].shape[1]
    order = lambda p: [int(i) for i in np.argsort(-r["logits"][p], kind="stable")]  # noqa: E731
    mid = T // 2
    first = (ids[0] * 7 + 3) % V
    second = (first + V // 2) % V
    return [attribute(hp, r, T - 1, order(T - 1)[0], None),
            attribute(hp, r, mid, order(mid)[0], order(mid)[1]),
            attribute(hp, r, 0, first, second)]


def read_ids(path):
    with open(path) as f:
        return [int(t) for t in f.read().split()]


def write_fixtures(fixtures):
    out = os.path.join(fixtures, "attribute")
    os.makedirs(out, exist_ok=True)
    lines = []
    models = [(n, os.path.join("models", n), os.path.join("ref", n, "tokens.txt")) for n in GPT2_MODELS]
    models += [(n, os.path.join("arch", "models", n), os.path.join("arch", "ref", n, "ids.txt")) for n in ARCH_MODELS]
    for name, rel, ids_rel in models:
        ids = read_ids(os.path.join(fixtures, ids_rel))
        hp, r = run(os.path.join(fixtures, rel), ids)
        cases = cases_for(hp, r, ids)
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({"model": rel, "ids": ids, "cases": cases}, f)
        lines.append(f"{name}\t{rel}\t{name}.json")
        c = cases[0]
        print(f"attribute {name}: logit {c['logit']:.4f} at {c['pos']}, largest head part "
              f"{max(map(abs, sum(c['heads'], []))):.4f}, mlp {max(map(abs, c['mlp'])):.4f}")
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")


# ----------------------------------------------------------------------------
# check: the CLI's JSON against the reference


def check(model_dir, path, top1):
    with open(path) as f:
        doc = json.load(f)
    ids = doc["ids"]
    hp, r = run(model_dir, ids, [tuple(p) for p in doc["ablated"]])
    base = doc["baseline"]["id"] if doc["baseline"] is not None else None
    want = attribute(hp, r, doc["pos"], doc["target"]["id"], base)
    tol = 1e-4 * max(1.0, want["logits_max_abs"])
    worst, fails = 0.0, []
    for key in ("logit", "embed", "ln_f_bias", "sum", "scale"):
        worst = max(worst, abs(doc[key] - want[key]))
        if abs(doc[key] - want[key]) > tol:
            fails.append(f"{key}: {doc[key]!r}, reference {want[key]!r}")
    for key in ("heads", "attn_bias", "mlp"):
        got, ref = np.array(doc[key], dtype=float), np.array(want[key], dtype=float)
        if got.shape != ref.shape:
            fails.append(f"{key}: shape {got.shape}, reference {ref.shape}")
            continue
        err = float(np.abs(got - ref).max())
        worst = max(worst, err)
        if err > tol:
            fails.append(f"{key}: differs by {err:.3g} (tolerance {tol:.3g})")
    if doc["norm"] != want["norm"]:
        fails.append(f"norm {doc['norm']!r}, reference {want['norm']!r}")
    lg = r["logits"][doc["pos"]]
    if top1 and lg.max() - lg[want["target"]] > tol:
        # the default target: the reference's top 1, or a near tie with it
        fails.append(f"target {want['target']} is not the top 1 ({int(np.argmax(lg))})")
    for f_ in fails:
        print("FAIL", f_)
    print(f"attribute: {len(ids)} tokens, position {doc['pos']}, largest difference {worst:.3g} "
          f"(logits up to {want['logits_max_abs']:.3g})")
    return 1 if fails else 0


def check_csv(csv_path, json_path):
    """An `attribute --export F.csv` against the `--json` document of the same run."""
    import csv
    with open(json_path) as f:
        doc = json.load(f)
    with open(csv_path, "rb") as f:
        raw = f.read()
    fails = []
    if not raw.endswith(b"\r\n"):
        fails.append("rows do not end in CRLF")
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8", "surrogateescape"), newline="")))
    head = "model,prompt,pos,target,baseline,part,layer,head,value,ablated".split(",")
    if rows[0] != head:
        fails.append(f"header {rows[0]!r}")
    L, H = len(doc["heads"]), len(doc["heads"][0])
    want = [("embed", "", "", doc["embed"])]
    want += [("head", str(l), str(h), doc["heads"][l][h]) for l in range(L) for h in range(H)]
    want += [("attn_bias", str(l), "", v) for l, v in enumerate(doc["attn_bias"])]
    want += [("mlp", str(l), "", v) for l, v in enumerate(doc["mlp"])]
    want += [("ln_f_bias", "", "", doc["ln_f_bias"]), ("sum", "", "", doc["sum"]), ("logit", "", "", doc["logit"])]
    if len(rows) - 1 != len(want):
        fails.append(f"{len(rows) - 1} rows, {len(want)} parts")
    tb = lambda i: bytes(doc["tokens_bytes"][i]) if doc.get("tokens_bytes") and doc["tokens_bytes"][i] else \
        doc["tokens"][i].encode()  # noqa: E731
    prompt = b"".join(tb(i) for i in range(len(doc["ids"])))
    tok = lambda o: bytes(o["token_bytes"]) if "token_bytes" in o else o["token"].encode()  # noqa: E731
    base = tok(doc["baseline"]) if doc["baseline"] else b""
    for row, (part, layer, hh, v) in zip(rows[1:], want):
        enc = lambda c: c.encode("utf-8", "surrogateescape")  # noqa: E731
        lead = (row[0], enc(row[1]), int(row[2]), enc(row[3]), enc(row[4]))
        if lead != (doc["model"], prompt, doc["pos"], tok(doc["target"]), base):
            fails.append(f"{part} {layer} {hh}: leading cells {lead!r}")
        if row[5:8] != [part, layer, hh] or abs(float(row[8]) - v) > 1e-7 * max(1, abs(v)):
            fails.append(f"row {row[5:9]!r}, JSON {part} {layer} {hh} {v!r}")
        heads = {(int(i.split(".")[0]), h_) for i in row[9].split() for h_ in
                 (range(H) if i.endswith(".*") else [int(i.split(".")[1])])}
        if heads != {tuple(p) for p in doc["ablated"]}:
            fails.append(f"ablated {row[9]!r}, JSON {doc['ablated']!r}")
    for f_ in fails[:10]:
        print("FAIL", f_)
    print(f"attribute csv: {len(rows) - 1} rows against the JSON")
    return 1 if fails else 0


def main(argv):
    if len(argv) == 2 and argv[0] == "--fixtures":
        write_fixtures(argv[1])
        return 0
    if len(argv) == 3 and argv[0] == "csv":
        return check_csv(argv[1], argv[2])
    if len(argv) in (3, 4) and argv[0] == "check" and argv[3:] in ([], ["--top1"]):
        return check(argv[1], argv[2], argv[3:] == ["--top1"])
    print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
