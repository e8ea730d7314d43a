#!/usr/bin/python3
"""make_format_fixtures.py - the same tiny models in every file format gptscope reads.

    /usr/bin/python3 tests/ref/make_format_fixtures.py --fixtures DIR

Run after make_model_fixtures.py (it reads DIR/models/tiny-*). Writes:

    DIR/models/tiny-erf, tiny-erf-nobias, tiny-char-erf
        Hugging Face originals (safetensors) for the nanoGPT fixtures: tiny-f32's
        weights with exact (erf) GELU, the same with every bias zero, and a
        character-level model (vocab.json of single characters, no merges);
        their references in DIR/ref/<name>/ (gpt2_ref.py, erf GELU).
    DIR/formats/<case>/...   one model per case, see CASES; DIR/formats/cases.tsv
        lists case<TAB>path to pass to -m<TAB>original model directory. Each case
        holds exactly the floats of its original, so the logits must agree bit
        for bit (and with the original's reference).

Writers (independent of the C code): torch_writer.py for PyTorch's zip
(torch.save's layout, protocol-2 pickle with persistent storages), llm.c's
.bin written here from its header layout (magic 20240326, version 3 = F32 /
5 = BF16, then the parameters in llm.c's order, matrices (out, in)), and its
tokenizer (magic 20240328, version 2: ids' bytes, each after a length byte).
"""

import argparse
import collections
import io
import json
import os
import pickle
import re
import shutil
import struct
import sys
import zipfile
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_ref  # noqa: E402
import make_model_fixtures as mm  # noqa: E402
import torch_writer as tw  # noqa: E402

CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def read_model(mdir):
    """(config dict, {name without prefix: float32 array}) of an HF directory."""
    with open(os.path.join(mdir, "config.json")) as f:
        cfg = json.load(f)
    raw = gpt2_ref.read_safetensors(os.path.join(mdir, "model.safetensors"))
    w = {}
    for k, v in raw.items():
        k = k[len("transformer."):] if k.startswith("transformer.") else k
        if not re.fullmatch(r"h\.\d+\.attn\.(masked_)?bias", k):  # the mask buffers
            w[k] = v
    return cfg, w


def write_hf(mdir, hp, V, weights, act, vocab_json_text, merges_text):
    """An HF directory (F32 safetensors) with the given activation_function."""
    cfg = json.loads(mm.config_json(hp, V, "F32"))
    cfg["activation_function"] = act
    mm.write(os.path.join(mdir, "config.json"), json.dumps(cfg, indent=2) + "\n")
    mm.write(os.path.join(mdir, "model.safetensors"),
             mm.pack(*mm.layout(mm.model_tensors(hp, weights, "F32", False))))
    mm.write(os.path.join(mdir, "vocab.json"), vocab_json_text)
    mm.write(os.path.join(mdir, "merges.txt"), merges_text)


def hp_of(cfg):
    return dict(n_layer=cfg["n_layer"], n_head=cfg["n_head"], n_embd=cfg["n_embd"], n_positions=cfg["n_positions"],
                eps=cfg.get("layer_norm_epsilon", 1e-5))


# ----------------------------------------------------------------------------
# PyTorch: HF's pytorch_model.bin and nanoGPT's ckpt.pt

def hf_state_dict(mdir):
    """The state dict an old transformers save_pretrained wrote: names and Conv1D
    layout as in the safetensors file, the attention buffers kept, a tied head
    saved as lm_head.weight viewing wte's storage."""
    raw = gpt2_ref.read_safetensors(os.path.join(mdir, "model.safetensors"))
    items = [(k, tw.tensor(v)) for k, v in raw.items()]
    names = [k for k, _ in items]
    if "lm_head.weight" not in names:
        wte = dict(items)["wte.weight" if "wte.weight" in names else "transformer.wte.weight"]
        items.append(("lm_head.weight", tw.Tensor(wte.storage, wte.shape)))
    return tw.state_dict(items, ("", "transformer", "lm_head"))


def nanogpt_state_dict(hp, w, V_pad, bias, mask, prefix, rng):
    """nanoGPT's GPT.state_dict(): transformer.* in module order, nn.Linear
    weights (out, in), the vocabulary padded to V_pad rows (random rows: they must
    never matter), lm_head.weight tied to wte (one storage), attn.bias causal masks
    when `mask` (PyTorch without flash attention), no biases when not `bias`."""
    C, P, L = hp["n_embd"], hp["n_positions"], hp["n_layer"]
    V = w["wte.weight"].shape[0]
    wte = np.concatenate([w["wte.weight"], rng.standard_normal((V_pad - V, C)).astype(np.float32)])
    items, t = [], lambda a: tw.tensor(np.ascontiguousarray(a, dtype=np.float32))
    wte_t = t(wte)
    items += [("transformer.wte.weight", wte_t), ("transformer.wpe.weight", t(w["wpe.weight"]))]
    for l in range(L):
        p = f"h.{l}."
        for part in ("ln_1", "attn", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"):
            if part == "attn":
                if mask:
                    items.append((f"transformer.{p}attn.bias", t(np.tril(np.ones((P, P))).reshape(1, 1, P, P))))
                continue
            wt = w[p + part + ".weight"]
            items.append((f"transformer.{p}{part}.weight", t(wt.T if (p + part + ".weight").endswith(CONV1D) else wt)))
            if bias:
                items.append((f"transformer.{p}{part}.bias", t(w[p + part + ".bias"])))
    items.append(("transformer.ln_f.weight", t(w["ln_f.weight"])))
    if bias:
        items.append(("transformer.ln_f.bias", t(w["ln_f.bias"])))
    items.append(("lm_head.weight", tw.Tensor(wte_t.storage, wte_t.shape)))
    meta = [""] + [k.rsplit(".", 1)[0] for k, _ in items]
    return tw.state_dict([(prefix + k, v) for k, v in items], tuple(dict.fromkeys(meta)))


def nanogpt_checkpoint(hp, w, V_pad, bias, mask, prefix, dataset, rng):
    """The dict nanoGPT's train.py saves: model, optimizer, model_args, iter_num,
    best_val_loss (a 0-d tensor), config."""
    sd = nanogpt_state_dict(hp, w, V_pad, bias, mask, prefix, rng)
    tensors = [v for k, v in sd.items() if not re.search(r"\.attn\.bias$", k)]
    state = {i: {"step": tw.tensor(np.float32(100.0)), "exp_avg": tw.tensor(np.zeros(v.shape, np.float32)),
                 "exp_avg_sq": tw.tensor(np.ones(v.shape, np.float32))} for i, v in enumerate(tensors[:3])}
    groups = [{"lr": 6e-4, "betas": (0.9, 0.95), "eps": 1e-08, "weight_decay": wd, "amsgrad": False,
               "foreach": None, "maximize": False, "capturable": False, "differentiable": False, "fused": True,
               "params": list(range(i, len(tensors), 2))} for i, wd in enumerate((0.1, 0.0))]
    args = {"n_layer": hp["n_layer"], "n_head": hp["n_head"], "n_embd": hp["n_embd"], "block_size": hp["n_positions"],
            "bias": bias, "vocab_size": V_pad, "dropout": 0.0}
    config = {"out_dir": "out-tiny", "eval_interval": 250, "always_save_checkpoint": False, "init_from": "scratch",
              "wandb_log": False, "dataset": dataset, "batch_size": 12, "block_size": hp["n_positions"],
              "n_layer": hp["n_layer"], "n_head": hp["n_head"], "n_embd": hp["n_embd"], "dropout": 0.0, "bias": bias,
              "learning_rate": 6e-4, "max_iters": 600000, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95,
              "grad_clip": 1.0, "decay_lr": True, "min_lr": 6e-5, "backend": "nccl", "device": "cuda",
              "dtype": "bfloat16", "compile": True}
    return {"model": sd, "optimizer": {"state": state, "param_groups": groups}, "model_args": args,
            "iter_num": 5000, "best_val_loss": tw.tensor(np.float32(1.4697)), "config": config}


# ----------------------------------------------------------------------------
# llm.c

LLMC_ORDER = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
              "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
              "mlp.c_proj.weight", "mlp.c_proj.bias"]


def llmc_model(hp, w, V_pad, bf16, rng):
    """llm.c's gpt2_*.bin: 256 int32 header, then wte (Vp, C), wpe (maxT, C), and
    each per-layer parameter stacked over the layers in llm.c's order (ln1w, ln1b,
    qkvw (L, 3C, C), qkvb, attprojw (L, C, C), attprojb, ln2w, ln2b, fcw (L, 4C, C),
    fcb, fcprojw (L, C, 4C), fcprojb), then lnfw, lnfb; F32, or BF16 throughout."""
    C, L = hp["n_embd"], hp["n_layer"]
    V, P = w["wte.weight"].shape[0], w["wpe.weight"].shape[0]
    header = np.zeros(256, np.int32)
    header[:8] = [20240326, 5 if bf16 else 3, P, V, L, hp["n_head"], C, V_pad]
    pad = rng.standard_normal((V_pad - V, C)).astype(np.float32)
    parts = [np.concatenate([w["wte.weight"], pad]), w["wpe.weight"]]
    for name in LLMC_ORDER:
        parts.append(np.stack([w[f"h.{l}.{name}"].T if name in CONV1D else w[f"h.{l}.{name}"] for l in range(L)]))
    parts += [w["ln_f.weight"], w["ln_f.bias"]]
    enc = (lambda a: mm.f32_to_bf16_bits(a).astype("<u2").tobytes()) if bf16 else \
        (lambda a: np.ascontiguousarray(a, np.float32).astype("<f4").tobytes())
    return header.astype("<i4").tobytes() + b"".join(enc(p) for p in parts)


def llmc_tokenizer(vocab):
    """gpt2_tokenizer.bin, version 2: header (magic, 2, n, eot), then each id's bytes."""
    dec = {c: b for b, c in mm.BYTE_ENCODER.items()}
    inv = sorted((i, t) for t, i in vocab.items())
    eot = vocab.get(mm.EOT, -1)
    out = [struct.pack("<4i", 20240328, 2, len(inv), eot) + bytes(4 * 252)]
    for i, t in inv:
        b = t.encode() if i == eot else bytes(dec[c] for c in t)
        out.append(struct.pack("<B", len(b)) + b)
    return b"".join(out)


# ----------------------------------------------------------------------------
# hostile files: each a valid file with one defect

def raw_zip(entries):
    """A zip of stored entries written field by field: entries are (name, data);
    returns (bytes, [local header offsets]), so that a case can patch any field."""
    out, offs, cd = b"", [], b""
    for name, data in entries:
        n, crc = name.encode(), zlib.crc32(data)
        offs.append(len(out))
        out += struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, 0, 0, 0x21, crc, len(data), len(data), len(n), 0) + n + data
    for (name, data), off in zip(entries, offs):
        n = name.encode()
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 20, 20, 0, 0, 0, 0x21, zlib.crc32(data), len(data),
                          len(data), len(n), 0, 0, 0, 0, 0, off) + n
    eocd = struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, len(entries), len(entries), len(cd), len(out), 0)
    return out + cd + eocd, offs


def torch_entries(obj, archive="archive", drop=(), resize=None):
    """torch.save's entries for obj (data.pkl, storages, version); storages whose key
    is in drop left out, resize(key, bytes) -> bytes changes one."""
    pkl, storages = tw.pickle_bytes(obj)
    ents = [(f"{archive}/data.pkl", pkl)]
    for key, st in storages:
        if key not in drop:
            ents.append((f"{archive}/data/{key}", resize(key, st.data) if resize else st.data))
    return ents + [(f"{archive}/version", b"3\n")]


class Evil:
    """Pickles as a call of any function: what a hostile checkpoint holds."""

    def __init__(self, f, args):
        self.f, self.args = f, args

    def __reduce__(self):
        return (self.f, self.args)


def nested(depth):
    x = []
    for _ in range(depth):
        x = [x]
    return x


def make_bad(out, hp, w, vocab_text, merges_text, vocab, rng):
    """formats/bad/<case>/...: name, status, path to load, the file the message names,
    keywords (joined by " && "), in formats/bad/cases.tsv."""
    bad = os.path.join(out, "bad")
    rows = []

    def put(case, fname, data, status, keyword, tok=True, extra=None, names=None):
        d = os.path.join(bad, case)
        mm.write(os.path.join(d, fname), data)
        if tok:
            mm.write(os.path.join(d, "vocab.json"), vocab_text)
            mm.write(os.path.join(d, "merges.txt"), merges_text)
        for k, v in (extra or {}).items():
            mm.write(os.path.join(d, k), v)
        rows.append((case, status, f"{case}/{fname}", names or fname, keyword))

    ck = lambda **kw: nanogpt_checkpoint(hp, w, 512, kw.get("bias", True), False, "_orig_mod.", "tinytext", rng)
    good, _ = raw_zip(torch_entries(ck()))
    # the zip
    put("zip_truncated", "ckpt.pt", good[:len(good) // 2], "format", "end-of-central-directory")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in torch_entries(ck()):
            zf.writestr(name, data)
    put("zip_compressed", "ckpt.pt", buf.getvalue(), "format", "compressed (method 8")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:  # 64 MiB of zeros in 64 KB
        zf.writestr("archive/data.pkl", bytes(64 << 20))
    put("zip_bomb", "ckpt.pt", buf.getvalue(), "format", "compressed && unpacking to 67108864")
    inner, _ = raw_zip([("archive/version", b"3\n")])
    inner_local = inner[:inner.index(b"PK\x01\x02")]  # B's local header and data
    a_name, b_name = b"archive/data.pkl", b"archive/version"
    b_at = 30 + len(a_name)
    body = struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, 0, 0, 0x21, zlib.crc32(inner_local), len(inner_local),
                       len(inner_local), len(a_name), 0) + a_name + inner_local
    cd = b""
    for name, off, data in ((a_name, 0, inner_local), (b_name, b_at, b"3\n")):
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 20, 20, 0, 0, 0, 0x21, zlib.crc32(data), len(data),
                          len(data), len(name), 0, 0, 0, 0, 0, off) + name
    put("zip_overlap", "ckpt.pt", body + cd + struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, 2, 2, len(cd), len(body), 0),
        "format", "overlap")
    cd_at = good.index(b"PK\x01\x02")
    z = bytearray(good)
    struct.pack_into("<I", z, cd_at + 42, len(good) + 100)
    put("zip_local_outside", "ckpt.pt", bytes(z), "format", "no local header at offset")
    z = bytearray(good)
    struct.pack_into("<I", z, len(good) - 6, 0x7FFFFFF0)
    put("zip_cd_outside", "ckpt.pt", bytes(z), "format", "central directory")
    z = bytearray(good)
    second = good.index(b"PK\x01\x02", cd_at + 4)  # data/0's entry: sizes past the directory
    struct.pack_into("<II", z, second + 20, 0x7FFFFFF0, 0x7FFFFFF0)
    put("zip_size_lie", "ckpt.pt", bytes(z), "format", "run past")
    put("zip_no_pickle", "ckpt.pt", raw_zip([("archive/version", b"3\n")])[0], "format", "data.pkl")
    z = bytearray(good)
    z[good.index(b"model_args") + 2] ^= 0x20
    put("zip_crc", "ckpt.pt", bytes(z), "format", "CRC-32")
    put("not_zip_empty", "ckpt.pt", b"", "format", "empty")
    # the pickle
    import builtins as _b
    evil = {
        "pkl_os_system": (pickle.dumps(Evil(os.system, ("echo pwned",)), 2), "posix.system' && refused"),
        "pkl_reduce_eval": (pickle.dumps({"model": Evil(_b.eval, ("1+1",))}, 2), "eval' && refused"),
        "pkl_deep": (pickle.dumps(nested(200), 2), "nested deeper than 64"),
        "pkl_marks": (b"\x80\x02" + b"(" * 100 + b".", "MARKs nested deeper than 64"),
        "pkl_huge_memo": (b"\x80\x02N" + b"r" + struct.pack("<I", 0xFFFFFFF0) + b".", "memo index 4294967280"),
        "pkl_truncated": (tw.pickle_bytes(ck())[0][:3000], "ends"),
        "pkl_inst": (b"\x80\x02(i__main__\nFoo\n.", "INST"),
        "pkl_self": (b"\x80\x02]q\x00h\x00a.", "holds itself"),
        "pkl_not_dict": (pickle.dumps([1, 2], 2), "no dict"),
    }
    for case, (pkl, kw) in evil.items():
        put(case, "ckpt.pt", raw_zip([("archive/data.pkl", pkl), ("archive/version", b"3\n")])[0], "format", kw)
    # the tensors (a state dict's tensor changed after it is built)
    def with_tensor(case, change, kw, **kw2):
        obj = ck()
        change(obj["model"]["_orig_mod.transformer.h.0.ln_1.weight"])
        put(case, "ckpt.pt", raw_zip(torch_entries(obj, **kw2))[0], "format", kw)
    with_tensor("t_storage_missing", lambda t: None, "is not in the archive", drop=("2",))
    with_tensor("t_outside", lambda t: setattr(t, "offset", 1000000), "outside its storage")
    with_tensor("t_overflow", lambda t: setattr(t, "shape", (1 << 40, 1 << 40)) or setattr(t, "stride", (1 << 40, 1)),
                "overflows")
    # an empty tensor may carry any offset: binding it must not compute a pointer past its storage (UBSan)
    obj = ck()
    t = obj["model"]["_orig_mod.transformer.h.0.ln_1.weight"]
    t.shape, t.stride, t.offset = (0,), (1,), 1 << 61
    put("t_empty_far", "ckpt.pt", raw_zip(torch_entries(obj))[0], "config", "has shape (0), expected (64)")
    with_tensor("t_storage_short", lambda t: None, "holds 128 bytes", resize=lambda k, d: d[:128] if k == "2" else d)
    def transpose(t):
        t.storage, t.shape, t.stride = tw.Storage("FloatStorage", np.zeros((8, 8), np.float32)), (8, 8), (1, 8)
    with_tensor("t_stride", transpose, "stride 8 in dimension 1")
    obj = ck()
    del obj["model"]["_orig_mod.transformer.h.1.mlp.c_fc.weight"]
    put("ng_missing_tensor", "ckpt.pt", raw_zip(torch_entries(obj))[0], "format", "missing tensor 'transformer.h.1.mlp.c_fc.weight'")
    obj = ck()
    obj["model_args"]["n_embd"] = 32
    put("ng_shape_mismatch", "ckpt.pt", raw_zip(torch_entries(obj))[0], "config", "from model_args")
    obj = ck()
    obj["model_args"]["n_layer"] = "2"
    put("ng_bad_arg", "ckpt.pt", raw_zip(torch_entries(obj))[0], "config", "model_args.n_layer")
    put("ng_no_tokenizer", "ckpt.pt", good, "io", "carries no tokenizer && too small for GPT-2's && meta.pkl", tok=False)
    meta = lambda itos: pickle.dumps({"vocab_size": len(itos), "itos": itos, "stoi": {}})
    put("ng_meta_bad", "ckpt.pt", good, "tokenizer", "not one character", tok=False, names="meta.pkl",
        extra={"meta.pkl": meta({i: ("ab" if i == 3 else chr(65 + i)) for i in range(40)})})
    put("ng_meta_evil", "ckpt.pt", good, "format", "posix.system", tok=False, names="meta.pkl",
        extra={"meta.pkl": pickle.dumps(Evil(os.system, ("echo pwned",)))})
    # llm.c
    lm = llmc_model(hp, w, 512, False, rng)
    tokbin = llmc_tokenizer(vocab)
    llmc = lambda data: {"gpt2_tokenizer.bin": tokbin}
    put("llmc_truncated", "gpt2.bin", lm[:-100], "format", "truncated", tok=False, extra=llmc(lm))
    patched = lambda i, v: lm[:4 * i] + struct.pack("<i", v) + lm[4 * i + 4:]
    put("llmc_version", "gpt2.bin", patched(1, 4), "format", "version 4", tok=False, extra=llmc(lm))
    huge = bytearray(lm)
    struct.pack_into("<ii", huge, 16, 1000, 4096)  # num_layers, num_heads
    struct.pack_into("<i", huge, 24, 65536)        # channels
    put("llmc_huge", "gpt2.bin", bytes(huge), "format", "need", tok=False, extra=llmc(lm))
    put("llmc_heads", "gpt2.bin", patched(5, 5), "format", "divisible", tok=False, extra=llmc(lm))
    put("llmc_padded_below", "gpt2.bin", patched(7, 100), "format", "padded_vocab_size 100", tok=False, extra=llmc(lm))
    put("llmc_tok_truncated", "gpt2.bin", lm, "tokenizer", "runs past the end", tok=False, names="gpt2_tokenizer.bin",
        extra={"gpt2_tokenizer.bin": tokbin[:-20]})
    inv = {i: t for t, i in vocab.items()}
    swapped = dict(vocab)
    swapped[inv[256]], swapped[inv[400]] = 400, 256  # a merge's result before its parts
    put("llmc_tok_order", "gpt2.bin", lm, "tokenizer", "not the merge", tok=False, names="gpt2_tokenizer.bin",
        extra={"gpt2_tokenizer.bin": llmc_tokenizer(swapped)})
    # formats gptscope does not read
    put("unknown", "model.bin", bytes(rng.integers(0, 256, 4096, dtype=np.uint8)), "format", "not a model file")
    put("legacy_pickle", "model.pt", pickle.dumps({"a": 1}, 2), "format", "legacy")
    mm.write(os.path.join(bad, "cases.tsv"), "".join("\t".join(r) + "\n" for r in rows))
    return len(rows)


# ----------------------------------------------------------------------------
# the fuzz harnesses' files (tests/fuzz: fuzz_zip, fuzz_pickle, fuzz_llmc)

MINI = dict(n_layer=1, n_head=2, n_embd=4, n_positions=8, eps=1e-5)


def make_fuzz_files(out, vocab, vocab_text, merges_text, rng):
    """formats/fuzz/support: mini models (C=4, one layer, 8 positions) the harnesses
    pair a fuzz input with; formats/fuzz/seeds/<harness>: their seed inputs."""
    sup, seeds = os.path.join(out, "fuzz", "support"), os.path.join(out, "fuzz", "seeds")
    V = len(vocab)
    w = mm.random_weights(MINI, V, 4242, untied=False)
    chars = sorted(set(mm.TRAIN_TEXT))[:20]
    wc = mm.random_weights(MINI, len(chars), 4243, untied=False)
    cfg = json.loads(mm.config_json(MINI, V, "F32"))
    mm.write(os.path.join(sup, "config.json"), json.dumps(cfg) + "\n")
    mm.write(os.path.join(sup, "vocab.json"), vocab_text)
    mm.write(os.path.join(sup, "merges.txt"), merges_text)
    meta = pickle.dumps({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}})
    mm.write(os.path.join(sup, "meta.pkl"), meta)
    ckpts = {
        "mini-ckpt.pt": nanogpt_checkpoint(MINI, w, 512, True, True, "_orig_mod.", "tinytext", rng),
        "mini-nobias.pt": nanogpt_checkpoint(MINI, w, 512, False, False, "", "tinytext", rng),
        "mini-char.pt": nanogpt_checkpoint(MINI, wc, len(chars), True, False, "", "tinychars", rng),
    }
    hf = tw.state_dict([(k, tw.tensor(v)) for k, v in w.items()])
    for name, obj in ckpts.items():
        tw.torch_save(obj, os.path.join(sup, name), archive="archive")
        mm.write(os.path.join(seeds, "zip", name), open(os.path.join(sup, name), "rb").read())
        mm.write(os.path.join(seeds, "pickle", name + ".pkl"), tw.pickle_bytes(obj)[0])
    tw.torch_save(hf, os.path.join(seeds, "zip", "pytorch_model.bin"))
    mm.write(os.path.join(seeds, "pickle", "hf.pkl"), tw.pickle_bytes(hf)[0])
    mm.write(os.path.join(seeds, "pickle", "meta.pkl"), meta)
    mm.write(os.path.join(seeds, "pickle", "meta-p2.pkl"), pickle.dumps(pickle.loads(meta), 2))
    tok = llmc_tokenizer(vocab)
    mm.write(os.path.join(sup, "gpt2_tokenizer.bin"), tok)
    mm.write(os.path.join(sup, "mini.bin"), llmc_model(MINI, w, 512, False, rng))
    mm.write(os.path.join(seeds, "llmc", "mini.bin"), llmc_model(MINI, w, 512, False, rng))
    mm.write(os.path.join(seeds, "llmc", "mini-bf16.bin"), llmc_model(MINI, w, 507, True, rng))
    mm.write(os.path.join(seeds, "llmc", "gpt2_tokenizer.bin"), tok)
    v1 = bytearray(tok)
    struct.pack_into("<ii", v1, 4, 1, 0)  # version 1: no eot id in the header
    mm.write(os.path.join(seeds, "llmc", "gpt2_tokenizer-v1.bin"), bytes(v1))


# ----------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixtures", required=True)
    args = ap.parse_args()
    fix = args.fixtures
    models, refs, out = (os.path.join(fix, d) for d in ("models", "ref", "formats"))
    shutil.rmtree(out, ignore_errors=True)
    rng = np.random.default_rng(77)

    cfg, w = read_model(os.path.join(models, "tiny-f32"))
    hp, V = hp_of(cfg), cfg["vocab_size"]
    with open(os.path.join(models, "tiny-f32", "vocab.json")) as f:
        vocab_text = f.read()
    vocab = json.loads(vocab_text)
    with open(os.path.join(models, "tiny-f32", "merges.txt")) as f:
        merges_text = f.read()

    # the Hugging Face originals of the nanoGPT cases (erf GELU; zero biases; characters)
    write_hf(os.path.join(models, "tiny-erf"), hp, V, w, "gelu", vocab_text, merges_text)
    w0 = {k: (np.zeros_like(v) if k.endswith(".bias") else v) for k, v in w.items()}
    write_hf(os.path.join(models, "tiny-erf-nobias"), hp, V, w0, "gelu", vocab_text, merges_text)
    chars = sorted(set(mm.TRAIN_TEXT))
    wc = mm.random_weights(mm.TINY, len(chars), 999, untied=False)
    char_vocab = json.dumps({"".join(mm.BYTE_ENCODER[b] for b in c.encode()): i for i, c in enumerate(chars)},
                            ensure_ascii=True)
    write_hf(os.path.join(models, "tiny-char-erf"), hp, len(chars), wc, "gelu", char_vocab, "#version: 0.2\n")
    for name, seed in (("tiny-erf", 100), ("tiny-erf-nobias", 100), ("tiny-char-erf", 500)):
        mm.write_reference(os.path.join(models, name), os.path.join(refs, name), seed=seed,
                           eot=-1 if name == "tiny-char-erf" else V - 1)

    cases = []

    def case(name, path, original):
        cases.append((name, path, original))

    # pytorch_model.bin beside config.json and the tokenizer
    for name, orig in (("hf-bin", "tiny-f32"), ("hf-bin-prefix", "tiny-prefix-lmhead")):
        d = os.path.join(out, name)
        os.makedirs(d)
        for f in ("config.json", "vocab.json", "merges.txt"):
            shutil.copy(os.path.join(models, orig, f), d)
        tw.torch_save(hf_state_dict(os.path.join(models, orig)), os.path.join(d, "pytorch_model.bin"))
        case(name, d, orig)

    # nanoGPT: out/ckpt.pt with GPT-2-style BPE files beside it
    d = os.path.join(out, "nanogpt", "out")
    os.makedirs(d)
    tw.torch_save(nanogpt_checkpoint(hp, w, 512, True, True, "_orig_mod.", "tinytext", rng), os.path.join(d, "ckpt.pt"))
    shutil.copy(os.path.join(models, "tiny-f32", "vocab.json"), d)
    shutil.copy(os.path.join(models, "tiny-f32", "merges.txt"), d)
    case("nanogpt", os.path.join(d, "ckpt.pt"), "tiny-erf")
    # bias=False, flash attention (no mask buffers), no torch.compile prefix, the directory given
    d = os.path.join(out, "nanogpt-nobias")
    os.makedirs(d)
    tw.torch_save(nanogpt_checkpoint(hp, w, 512, False, False, "", "tinytext", rng), os.path.join(d, "ckpt.pt"),
                  archive="archive")
    shutil.copy(os.path.join(models, "tiny-f32", "vocab.json"), d)
    shutil.copy(os.path.join(models, "tiny-f32", "merges.txt"), d)
    case("nanogpt-nobias", d, "tiny-erf-nobias")
    # character-level: meta.pkl where nanoGPT's sample.py finds it, data/DATASET/meta.pkl
    root = os.path.join(out, "nanogpt-char")
    os.makedirs(os.path.join(root, "out-char"))
    os.makedirs(os.path.join(root, "data", "tinychars"))
    _, wcr = read_model(os.path.join(models, "tiny-char-erf"))
    tw.torch_save(nanogpt_checkpoint(hp, wcr, len(chars), True, False, "_orig_mod.", "tinychars", rng),
                  os.path.join(root, "out-char", "ckpt.pt"))
    with open(os.path.join(root, "data", "tinychars", "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)),
                     "stoi": {c: i for i, c in enumerate(chars)}}, f)
    case("nanogpt-char", os.path.join(root, "out-char", "ckpt.pt"), "tiny-char-erf")

    # llm.c: F32 (version 3) and BF16 (version 5), padded vocabulary, its tokenizer beside
    d = os.path.join(out, "llmc")
    os.makedirs(d)
    _, wb = read_model(os.path.join(models, "tiny-bf16"))
    mm.write(os.path.join(d, "gpt2_tiny.bin"), llmc_model(hp, w, 512, False, rng))
    mm.write(os.path.join(d, "gpt2_tiny_bf16.bin"), llmc_model(hp, wb, 512, True, rng))
    mm.write(os.path.join(d, "gpt2_tokenizer.bin"), llmc_tokenizer(vocab))
    case("llmc", os.path.join(d, "gpt2_tiny.bin"), "tiny-f32")
    case("llmc-bf16", os.path.join(d, "gpt2_tiny_bf16.bin"), "tiny-bf16")

    mm.write(os.path.join(out, "cases.tsv"), "".join(f"{n}\t{p}\t{o}\n" for n, p, o in cases))
    n_bad = make_bad(out, hp, w, vocab_text, merges_text, vocab, rng)
    make_fuzz_files(out, vocab, vocab_text, merges_text, rng)
    print(f"format fixtures: {len(cases)} cases and {n_bad} hostile files in {out}")


if __name__ == "__main__":
    main()
