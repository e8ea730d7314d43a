#!/usr/bin/env python3
"""gen_seeds.py — the mini model and seed corpora for the fuzz harnesses.

    python3 tests/fuzz/gen_seeds.py --fixtures build/fixtures --tokenizer .cache/gpt2-tokenizer --out build/fuzz \
        --seed-maker build/fuzz/seed_maker

Writes OUT/mini/ (a one-layer, C=4, 8-position GPT-2 with the tiny-f32 fixture's
tokenizer: small enough to fuzz fast) and OUT/seeds/<harness>/ for each harness.
Session files and checkpoints are the library's own, written by the seed maker
(tests/fuzz/seed_maker.c), then varied here. Standard library only.
"""
import argparse, glob, json, os, random, shutil, struct, subprocess, tempfile, zipfile

ORDER = ["wte.weight", "wpe.weight"]


def tensors(L=1, C=4, T=8, V=507, F=None, rng=None):
    F = F or 4 * C
    rng = rng or random.Random(1)
    shapes = {"wte.weight": (V, C), "wpe.weight": (T, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    for l in range(L):
        p = "h.%d." % l
        shapes.update({p + "ln_1.weight": (C,), p + "ln_1.bias": (C,),
                       p + "attn.c_attn.weight": (C, 3 * C), p + "attn.c_attn.bias": (3 * C,),
                       p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
                       p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
                       p + "mlp.c_fc.weight": (C, F), p + "mlp.c_fc.bias": (F,),
                       p + "mlp.c_proj.weight": (F, C), p + "mlp.c_proj.bias": (C,)})
    out = {}
    for name, shape in shapes.items():
        n = 1
        for d in shape:
            n *= d
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            vals = [1.0] * n
        else:
            vals = [rng.gauss(0, 0.1) for _ in range(n)]
        out[name] = (shape, vals)
    return out


def encode(vals, dtype):
    if dtype == "F32":
        return struct.pack("<%df" % len(vals), *vals)
    if dtype == "F16":
        return struct.pack("<%de" % len(vals), *vals)
    if dtype == "BF16":
        return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in vals)
    raise ValueError(dtype)


def safetensors(ts, dtype="F32", prefix="", extra=None, pad=0, metadata=True):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {"format": "pt"}
    for name, (shape, vals) in ts.items():
        b = encode(vals, dtype)
        header[prefix + name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    for name, (dt, shape, b) in (extra or {}).items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode() + b" " * pad
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


MINI_CONFIG = {"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 4, "n_positions": 8,
               "vocab_size": 507, "layer_norm_epsilon": 1e-5}


def same(a, b):
    with open(a, "rb") as f, open(b, "rb") as g:
        return f.read() == g.read()


def copy_bad(bad, tiny, fname, dst):
    """Each bad case's copy of fname that differs from the good fixture's."""
    for d in sorted(os.listdir(bad)):
        p = os.path.join(bad, d, fname)
        if os.path.isfile(p) and not (os.path.isfile(os.path.join(tiny, fname)) and same(p, os.path.join(tiny, fname))):
            shutil.copy(p, os.path.join(dst, "bad-" + d))


GGUF_TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "BF16": (30, 1, 2), "Q8_0": (8, 32, 34), "Q4_0": (2, 32, 18),
              "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24), "Q4_K": (12, 256, 144),
              "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210)}


def gguf_str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf(kv, tensors, version=3):
    """A GGUF file (stdlib only): kv [(key, type, packed value)], tensors
    [(name, ne, type name, data)]: blocks filled with arbitrary bytes whose
    fp16 scales are small, so that a model runs."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for k, t, v in kv:
        out += gguf_str(k) + struct.pack("<I", t) + v
    off, data = 0, b""
    for name, ne, typ, raw in tensors:
        out += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", GGUF_TYPES[typ][0], off)
        data += raw + bytes(-len(raw) % 32)
        off = len(data)
    return out + bytes(-len(out) % 32) + data


def gguf_blocks(n_el, typ, rng):
    _, block, nbytes = GGUF_TYPES[typ]
    if typ in ("F32", "F16"):
        return encode([rng.gauss(0, 0.1) for _ in range(n_el)], typ)
    if typ == "BF16":
        return encode([rng.gauss(0, 0.1) for _ in range(n_el)], "BF16")
    out = bytearray(rng.getrandbits(8) for _ in range(n_el // block * nbytes))
    scale = struct.pack("<e", 0.002)
    for b in range(n_el // block):
        at = [b * nbytes + (208 if typ == "Q6_K" else 0)] + ([b * nbytes + 2] if typ in ("Q4_1", "Q5_1", "Q4_K", "Q5_K") else [])
        for p in at:
            out[p:p + 2] = scale
    return bytes(out)


def byte_tokens():
    """tokenizer.ggml.tokens: the 256 bytes in GPT-2's byte alphabet, no merges."""
    printable = [b for b in range(33, 127)] + [b for b in range(161, 173)] + [b for b in range(174, 256)]
    table, n = {}, 0
    for b in range(256):
        table[b] = chr(b) if b in printable else chr(256 + n)
        n += b not in printable
    return ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 256) + b"".join(gguf_str(table[b]) for b in range(256)))


def gguf_mini(typ, C=32, L=1, T=8, rng=None):
    """A one-layer GPT-2 GGUF on the 256 byte tokens (no merges)."""
    rng = rng or random.Random(7)
    kv = [("general.architecture", 8, gguf_str("gpt2")), ("gpt2.block_count", 4, struct.pack("<I", L)),
          ("gpt2.context_length", 4, struct.pack("<I", T)), ("gpt2.embedding_length", 4, struct.pack("<I", C)),
          ("gpt2.feed_forward_length", 4, struct.pack("<I", 4 * C)),
          ("gpt2.attention.head_count", 4, struct.pack("<I", 2)),
          ("gpt2.attention.layer_norm_epsilon", 6, struct.pack("<f", 1e-5)),
          ("tokenizer.ggml.model", 8, gguf_str("gpt2"))]
    kv.append(byte_tokens())
    mat = lambda name, o, i: (name, [i, o], typ, gguf_blocks(o * i, typ, rng))
    vec = lambda name, n: (name, [n], "F32", encode([1.0 if "norm.weight" in name else rng.gauss(0, 0.1)
                                                     for _ in range(n)], "F32"))
    ts = [mat("token_embd.weight", 256, C), ("position_embd.weight", [C, T], "F32",
                                             encode([rng.gauss(0, 0.1) for _ in range(C * T)], "F32")),
          vec("output_norm.weight", C), vec("output_norm.bias", C)]
    for l in range(L):
        for g, (o, i) in (("attn_qkv", (3 * C, C)), ("attn_output", (C, C)), ("ffn_up", (4 * C, C)),
                          ("ffn_down", (C, 4 * C))):
            ts += [mat("blk.%d.%s.weight" % (l, g), o, i), vec("blk.%d.%s.bias" % (l, g), o)]
        for g in ("attn_norm", "ffn_norm"):
            ts += [vec("blk.%d.%s.weight" % (l, g), C), vec("blk.%d.%s.bias" % (l, g), C)]
    return gguf(kv, ts)


def gguf_mini_gemma(arch, typ="Q8_0", C=32, L=2, T=8, rng=None):
    """A two-layer Gemma (gemma, gemma2, gemma3) GGUF on the 256 byte tokens, as
    llama.cpp's converter names and keys it: 2 heads of 16, 1 key/value head,
    GeGLU of 64; Gemma 2/3's four norms a block, windows of 4, Gemma 2's caps,
    Gemma 3's q/k norms and linear rope scaling."""
    rng = rng or random.Random(11)
    u32 = lambda k, v: (arch + "." + k, 4, struct.pack("<I", v))
    f32 = lambda k, v: (arch + "." + k, 6, struct.pack("<f", v))
    kv = [("general.architecture", 8, gguf_str(arch)), u32("block_count", L), u32("context_length", T),
          u32("embedding_length", C), u32("feed_forward_length", 2 * C), u32("attention.head_count", 2),
          u32("attention.head_count_kv", 1), u32("attention.key_length", 16), u32("attention.value_length", 16),
          f32("attention.layer_norm_rms_epsilon", 1e-6)]
    if arch != "gemma":
        kv += [u32("attention.sliding_window", 4)]
    if arch == "gemma2":
        kv += [f32("attn_logit_softcapping", 3.0), f32("final_logit_softcapping", 4.0)]
    if arch == "gemma3":
        kv += [f32("rope.freq_base", 1e6), (arch + ".rope.scaling.type", 8, gguf_str("linear")),
               f32("rope.scaling.factor", 4.0)]
    kv.append(("tokenizer.ggml.model", 8, gguf_str("gpt2")))
    kv.append(byte_tokens())
    mat = lambda name, o, i: (name, [i, o], typ, gguf_blocks(o * i, typ, rng))
    vec = lambda name, n: (name, [n], "F32", encode([1.0 + rng.gauss(0, 0.1) for _ in range(n)], "F32"))
    ts = [mat("token_embd.weight", 256, C), vec("output_norm.weight", C)]
    norms = ["attn_norm", "ffn_norm"] + (["post_attention_norm", "post_ffw_norm"] if arch != "gemma" else [])
    for l in range(L):
        for g, (o, i) in (("attn_q", (32, C)), ("attn_k", (16, C)), ("attn_v", (16, C)), ("attn_output", (C, 32)),
                          ("ffn_gate", (2 * C, C)), ("ffn_up", (2 * C, C)), ("ffn_down", (C, 2 * C))):
            ts.append(mat("blk.%d.%s.weight" % (l, g), o, i))
        ts += [vec("blk.%d.%s.weight" % (l, g), C) for g in norms]
        if arch == "gemma3":
            ts += [vec("blk.%d.attn_q_norm.weight" % l, 16), vec("blk.%d.attn_k_norm.weight" % l, 16)]
    return gguf(kv, ts)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", default="build/fixtures")
    ap.add_argument("--tokenizer", default=".cache/gpt2-tokenizer")
    ap.add_argument("--out", default="build/fuzz")
    ap.add_argument("--seed-maker", required=True, help="tests/fuzz/seed_maker.c, built")
    ap.add_argument("--root", default=".", help="the repository (models/, themes/)")
    a = ap.parse_args()
    tiny = os.path.join(a.fixtures, "models", "tiny-f32")
    mini = os.path.join(a.out, "mini")
    seeds = os.path.join(a.out, "seeds")
    shutil.rmtree(seeds, ignore_errors=True)
    os.makedirs(mini, exist_ok=True)
    ts = tensors()
    write(os.path.join(mini, "config.json"), json.dumps(MINI_CONFIG))
    write(os.path.join(mini, "model.safetensors"), safetensors(ts))
    for f in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(tiny, f), os.path.join(mini, f))

    # --- safetensors ---
    st = os.path.join(seeds, "safetensors")
    buf = struct.pack("<f", 0.0) * 64
    wte_nan = dict(ts)
    shape, vals = ts["wte.weight"]
    wte_nan["wte.weight"] = (shape, [float("nan") if i % 7 == 0 else float("inf") if i % 7 == 1 else v
                                     for i, v in enumerate(vals)])
    variants = {
        "mini-f32": safetensors(ts),
        "mini-f16": safetensors(ts, "F16"),
        "mini-bf16": safetensors(ts, "BF16"),
        "mini-prefix-lmhead": safetensors(ts, prefix="transformer.",
                                          extra={"lm_head.weight": ("F32", (507, 4), encode(ts["wte.weight"][1], "F32"))}),
        "mini-misaligned": safetensors(ts, pad=1),
        "mini-misaligned-f16": safetensors(ts, "F16", pad=1),
        "mini-buffer": safetensors(ts, extra={"h.0.attn.bias": ("F32", (1, 1, 8, 8), struct.pack("<64f", *[1.0] * 64)),
                                              "h.0.attn.masked_bias": ("F32", (), struct.pack("<f", -1e4))}),
        "mini-nometa": safetensors(ts, metadata=False),
        "mini-naninf": safetensors(wte_nan),
        "mini-zero": safetensors(ts, extra={"empty": ("F32", (0, 4), b"")}),
        "header-only": struct.pack("<Q", 2) + b"{}",
    }
    for k, v in variants.items():
        write(os.path.join(st, k), v)
    for d in sorted(os.listdir(os.path.join(a.fixtures, "models"))):
        shutil.copy(os.path.join(a.fixtures, "models", d, "model.safetensors"), os.path.join(st, "fixture-" + d))
    bad = os.path.join(a.fixtures, "bad")
    copy_bad(bad, tiny, "model.safetensors", st)

    # --- GGUF ---
    gg = os.path.join(seeds, "gguf")
    for typ in ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"):
        write(os.path.join(gg, "mini-" + typ.lower()), gguf_mini(typ))
    write(os.path.join(gg, "mini-q4_k"), gguf_mini("Q4_K", C=256, T=2))
    for arch in ("gemma", "gemma2", "gemma3"):
        write(os.path.join(gg, "mini-" + arch), gguf_mini_gemma(arch))
    write(os.path.join(gg, "mini-gemma2-f16"), gguf_mini_gemma("gemma2", "F16", L=1))
    gdir = os.path.join(a.fixtures, "gguf")
    if os.path.isdir(gdir):
        for f in sorted(os.listdir(gdir)):
            if f.endswith(".gguf") and os.path.getsize(os.path.join(gdir, f)) < 400000:
                shutil.copy(os.path.join(gdir, f), os.path.join(gg, "fixture-" + f))
        for f in sorted(os.listdir(os.path.join(gdir, "bad"))):
            if f.endswith(".gguf"):
                shutil.copy(os.path.join(gdir, "bad", f), os.path.join(gg, "bad-" + f))
    adir = os.path.join(a.fixtures, "arch", "gguf")   # the Llama family, GPT-NeoX, Gemma (make_arch_fixtures.py)
    if os.path.isdir(adir):
        for f in ("llama-gqa-q8_0.gguf", "llama-gqa-mix.gguf", "llama-bias.gguf", "qwen3.gguf", "neox.gguf",
                  "gemma.gguf", "gemma2-q8_0.gguf", "gemma3.gguf"):
            if os.path.exists(os.path.join(adir, f)):
                shutil.copy(os.path.join(adir, f), os.path.join(gg, "arch-" + f))

    # --- config.json ---
    cf = os.path.join(seeds, "config")
    with open(os.path.join(tiny, "config.json")) as f:
        tcfg = json.load(f)
    write(os.path.join(cf, "tiny"), json.dumps(tcfg, indent=2))
    write(os.path.join(cf, "mini"), json.dumps(MINI_CONFIG))
    write(os.path.join(cf, "mini-nctx"),
          json.dumps({k: v for k, v in dict(MINI_CONFIG, n_ctx=8).items() if k != "n_positions"}))
    write(os.path.join(cf, "mini-gelu"), json.dumps(dict(MINI_CONFIG, activation_function="gelu", n_inner=16)))
    write(os.path.join(cf, "mini-flags"), json.dumps(dict(MINI_CONFIG, scale_attn_weights=True, add_cross_attention=False,
                                                         scale_attn_by_inverse_layer_idx=False, n_inner=None)))
    copy_bad(bad, tiny, "config.json", cf)

    # --- vocab.json / merges.txt ---
    for kind, fname in (("vocab", "vocab.json"), ("merges", "merges.txt")):
        dst = os.path.join(seeds, kind)
        os.makedirs(dst, exist_ok=True)
        shutil.copy(os.path.join(tiny, fname), os.path.join(dst, "tiny"))
        copy_bad(bad, tiny, fname, dst)
    with open(os.path.join(tiny, "merges.txt")) as f:
        m = f.read()
    write(os.path.join(seeds, "merges", "crlf"), m.replace("\n", "\r\n"))
    write(os.path.join(seeds, "merges", "dup"), m + "\n".join(m.splitlines()[1:4]) + "\n")

    # --- tokenizer.json: the tiny vocabulary and merges as HF writes them, both merge forms ---
    tj = os.path.join(seeds, "tokjson")
    os.makedirs(tj, exist_ok=True)
    with open(os.path.join(tiny, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    pairs = [ln.split(" ") for ln in m.splitlines() if ln and not ln.startswith("#")]
    nxt = max(vocab.values()) + 1
    added = [{"id": nxt, "content": "<s>", "special": True}, {"id": nxt + 1, "content": "</s>", "special": True},
             {"id": nxt + 2, "content": "<sep>", "special": False}]
    llama3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")
    write(os.path.join(tj, "bytelevel"), json.dumps({
        "model": {"type": "BPE", "vocab": vocab, "merges": [" ".join(p) for p in pairs]},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}}).encode())
    write(os.path.join(tj, "digits"), json.dumps({
        "model": {"type": "BPE", "vocab": vocab, "merges": pairs},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                                {"type": "ByteLevel", "use_regex": True}]},
        "added_tokens": added[:1]}).encode())
    write(os.path.join(tj, "split"), json.dumps({
        "model": {"type": "BPE", "vocab": vocab, "merges": pairs, "ignore_merges": True}, "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": llama3}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
        "added_tokens": added}).encode())

    # --- encode ---
    enc = os.path.join(seeds, "encode")
    samples = [b"Hello world", b"The meaning of life is 42.\n\nYes!", b"<|endoftext|>Hi<|endoftext|>",
               "caf\u00e9 \u20ac \U0001F600 \u4e2d\u6587 \u0928\u092e\u0938\u094d\u0924\u0947".encode(),
               b"\xff\xfe\x80abc\xc3\x28\xe2\x82\xf0\x9f\x98", b"   \t\t\n\n  x  ", b"it's they're we've I'm you'll he'd",
               "\u00a0\u2028\u3000 \u180e \u200b \ufeff".encode(), b"\xed\xa0\x80\xf4\x90\x80\x80\xc0\xaf",
               bytes(range(256))]
    for i, s in enumerate(samples):
        write(os.path.join(enc, "s%02d" % i), s)
    tokdir = a.tokenizer
    if os.path.isfile(os.path.join(tokdir, "Encoder.js")):
        with open(os.path.join(tokdir, "Encoder.js"), "rb") as f:
            write(os.path.join(enc, "encoder-js"), f.read()[:4096])

    # --- PyTorch zips, pickles, llm.c files: make_format_fixtures.py's mini models and hostile files ---
    formats = os.path.join(a.fixtures, "formats")
    for kind in ("zip", "pickle", "llmc"):
        src = os.path.join(formats, "fuzz", "seeds", kind)
        os.makedirs(os.path.join(seeds, kind), exist_ok=True)
        for f in sorted(os.listdir(src)):
            shutil.copy(os.path.join(src, f), os.path.join(seeds, kind, f))
    with open(os.path.join(formats, "bad", "cases.tsv")) as f:
        for line in f:
            name, _, path = line.split("\t")[:3]
            full = os.path.join(formats, "bad", path)
            if name.startswith(("zip_", "t_", "ng_", "pkl_")):
                shutil.copy(full, os.path.join(seeds, "zip", "bad-" + name))
            if name.startswith("pkl_"):
                with zipfile.ZipFile(full) as z:
                    write(os.path.join(seeds, "pickle", "bad-" + name), z.read("archive/data.pkl"))
            if name.startswith("ng_meta"):
                shutil.copy(os.path.join(os.path.dirname(full), "meta.pkl"), os.path.join(seeds, "pickle", "bad-" + name))
            if name.startswith("llmc_"):
                tok = os.path.join(os.path.dirname(full), "gpt2_tokenizer.bin")
                shutil.copy(full, os.path.join(seeds, "llmc", "bad-" + name))
                if "_tok_" in name:
                    shutil.copy(tok, os.path.join(seeds, "llmc", "bad-" + name + "-tokenizer"))

    shard_seeds(a.fixtures, os.path.join(seeds, "shards"))

    with tempfile.TemporaryDirectory() as made:
        subprocess.run([a.seed_maker, a.fixtures, made], check=True)
        session_seeds(os.path.join(made, "session"), os.path.join(seeds, "session"))
        checkpoint_seeds(os.path.join(made, "checkpoint"), os.path.join(seeds, "checkpoint"))
    template_seeds(a.root, os.path.join(seeds, "template"))
    theme_seeds(a.root, os.path.join(seeds, "theme"))
    jinja_seeds(a.root, os.path.join(seeds, "jinja"))


def shard_seeds(fixtures, dst):
    """model.safetensors.index.json for fuzz_shards (its directory holds gpt2-3's shards,
    whole.safetensors and bad.safetensors): gpt2-3's index, the same over the
    whole file and over a mix, and every index of make_shard_fixtures.py's bad cases (their
    two shards renamed as two of the three here)."""
    os.makedirs(dst, exist_ok=True)
    src = os.path.join(fixtures, "shards")
    with open(os.path.join(src, "gpt2-3", "model.safetensors.index.json"), "rb") as f:
        good = f.read()
    write(os.path.join(dst, "gpt2-3"), good)
    wm = json.loads(good)["weight_map"]
    write(os.path.join(dst, "whole"), json.dumps({"weight_map": {k: "whole.safetensors" for k in wm}}))
    mix = {k: ("bad.safetensors" if i == 3 else v) for i, (k, v) in enumerate(sorted(wm.items()))}
    write(os.path.join(dst, "with-bad"), json.dumps({"metadata": {"total_size": 1}, "weight_map": mix}))
    write(os.path.join(dst, "lmhead"), json.dumps({"weight_map": dict(wm, **{"lm_head.weight": wm["wte.weight"]})}))
    for d in sorted(os.listdir(os.path.join(src, "bad"))):
        for name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
            p = os.path.join(src, "bad", d, name)
            if os.path.isfile(p):
                with open(p, "rb") as f:
                    write(os.path.join(dst, "bad-" + d), f.read().replace(b"-of-00002.", b"-of-00003."))


def session_seeds(made, dst):
    """The seed maker's sessions, and variants a hand could make of one."""
    shutil.copytree(made, dst)
    with open(os.path.join(made, "one-exchange")) as f:
        one = json.load(f)
    compact = lambda d: json.dumps(d, separators=(",", ":"))
    write(os.path.join(dst, "v-compact"), compact(one))  # short: more of it is structure
    other = dict(one, model="gpt2", n_vocab=50257)        # another model: texts re-encoded
    write(os.path.join(dst, "v-other-model"), compact(other))
    no_ids = json.loads(compact(one))
    for t in no_ids["turns"]:
        t.pop("ids", None)
    write(os.path.join(dst, "v-no-ids"), compact(no_ids))
    two = json.loads(compact(one))
    two["turns"] = two["turns"] * 3
    two["first_in_context"] = 2
    two["replying"] = True
    write(os.path.join(dst, "v-three-exchanges"), compact(two))
    tm = json.loads(compact(one))
    tm["template"] = {"name": "play", "user_prefix": "ROMEO:\n", "assistant_prefix": "JULIET:\n",
                      "stop": ["\n\n", "ROMEO"], "eot_after_turn": True}
    write(os.path.join(dst, "v-template-eot"), compact(tm))


def checkpoint_seeds(made, dst):
    """The seed maker's checkpoints, and its warmup one as version 3 wrote it
    (field 26 the flag 1, not a float); the FNV-1a checksum made right."""
    shutil.copytree(made, dst)
    with open(os.path.join(made, "c2-warmup-offsets"), "rb") as f:
        b = bytearray(f.read())
    b[8:12] = struct.pack("<I", 3)
    b[16 + 26 * 8:16 + 27 * 8] = struct.pack("<Q", 1)
    h = 0xcbf29ce484222325
    for x in b[:-8]:
        h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
    b[-8:] = struct.pack("<Q", h)
    write(os.path.join(dst, "v-version3-offsets"), bytes(b))


BUILTIN_TEMPLATES = {
    "transcript": {"name": "transcript", "description": "base GPT-2",
                   "preamble": "A conversation between a user and an assistant.\n\n", "user_prefix": "User: ",
                   "user_suffix": "\n", "assistant_prefix": "Assistant:", "assistant_suffix": "\n",
                   "stop": ["\nUser:"], "eot_after_turn": False},
    "dialogpt": {"name": "dialogpt", "eot_after_turn": True},
    "raw": {"name": "raw"},
}


def template_seeds(root, dst):
    """The built-ins as files, every bundled model's chat_template.json, variants."""
    os.makedirs(dst, exist_ok=True)
    for k, v in BUILTIN_TEMPLATES.items():
        write(os.path.join(dst, "builtin-" + k), json.dumps(v, indent=2))
    for p in sorted(glob.glob(os.path.join(root, "models", "*", "chat_template.json"))):
        shutil.copy(p, os.path.join(dst, "model-" + os.path.basename(os.path.dirname(p))))
    variants = {
        "many-stops": {"name": "s", "stop": ["\n", "e", "th", " t", "the light", "\u00e9", "x" * 256] + ["a"] * 9},
        "overlapping-stops": {"name": "o", "user_prefix": "Q: ", "assistant_prefix": "A:",
                              "stop": ["aa", "a\n", "\n\n\n", "ab"]},
        "eot-turns": {"name": "e", "user_prefix": "<|endoftext|>", "assistant_suffix": "<|endoftext|>",
                      "eot_after_turn": True, "stop": ["<|endoftext|>"]},
        "long-preamble": {"name": "long", "preamble": "the light in the lamp " * 20},
        "unicode": {"name": "\u00fc\u00f1\u00ee", "description": "\u2028\U0001F600", "user_suffix": "\u0001"},
        "jinja": {"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"},
        "empty-name": {"name": ""},
    }
    for k, v in variants.items():
        write(os.path.join(dst, "v-" + k), json.dumps(v, separators=(",", ":"), ensure_ascii=False))
    write(os.path.join(dst, "v-unicode-escaped"), json.dumps(variants["unicode"]))  # \uXXXX, surrogate pairs


def jinja_seeds(root, dst):
    """The chat templates of tests/ref/templates, the real ones when fetched, and each unit of
    tests/ref/jinja_units.txt (a "## NAME" line, maybe "vars: ...", then its template)."""
    os.makedirs(dst, exist_ok=True)
    for p in sorted(glob.glob(os.path.join(root, "tests", "ref", "templates", "*.jinja"))):
        shutil.copy(p, os.path.join(dst, "tpl-" + os.path.basename(p)[:-6]))
    for p in sorted(glob.glob(os.path.join(root, ".cache", "hf-tokenizers", "*", "tokenizer_config.json"))):
        with open(p, encoding="utf-8") as f:
            tpl = json.load(f).get("chat_template")
        if isinstance(tpl, str):
            write(os.path.join(dst, "hf-" + os.path.basename(os.path.dirname(p))), tpl.encode("utf-8"))
    name, lines = None, []
    with open(os.path.join(root, "tests", "ref", "jinja_units.txt"), encoding="utf-8") as f:
        for line in f.read().split("\n") + ["## end"]:
            if line.startswith("## "):
                if name:
                    write(os.path.join(dst, "unit-" + name), "\n".join(lines).encode("utf-8"))
                name, lines = line.split()[1], []
            elif name and not (not lines and line.startswith("vars: ")):
                lines.append(line)


def theme_seeds(root, dst):
    """Every bundled theme and a few forms the format allows."""
    os.makedirs(dst, exist_ok=True)
    for p in sorted(glob.glob(os.path.join(root, "themes", "*.theme"))):
        shutil.copy(p, os.path.join(dst, os.path.basename(p)))
    write(os.path.join(dst, "v-forms"), "name=x\ntext=#ffffff on #000000 bold dim underline reverse # c\n"
          "user = bright-cyan on grey\r\nheat = " + " ".join(str(i * 17) for i in range(16)) + "\n")
    write(os.path.join(dst, "v-glued-comment"), "text = #zzzzzz\nname = caf\u00e9\n")



if __name__ == "__main__":
    main()
