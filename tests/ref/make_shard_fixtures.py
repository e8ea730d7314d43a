#!/usr/bin/python3
"""make_shard_fixtures.py - Hugging Face's sharded safetensors, split from fixture models.

    /usr/bin/python3 tests/ref/make_shard_fixtures.py --fixtures DIR

Run after make_model_fixtures.py and make_arch_fixtures.py (it reads
DIR/models/tiny-* and DIR/arch/models/*). A sharded model is what
transformers' save_pretrained writes above its shard size:

    model.safetensors.index.json   {"metadata": {"total_size": N},
                                    "weight_map": {"tensor name": "shard file", ...}}
    model-00001-of-0000K.safetensors ...   each an ordinary safetensors file

Written here from that definition, byte for byte from the original's tensors
(nothing decoded), with the tensors dealt out over the shards in a shuffled
order and each shard's data in another order again, so a loader that keeps
one file's order or offsets cannot pass. Writes:

    DIR/shards/<case>/...     config and tokenizer files copied, the weights sharded
    DIR/shards/cases.tsv      case, path to load, original directory, the arch
                              reference (DIR/arch/ref/NAME) or "-", the description
                              gptscope must give (its start)
    DIR/shards/bad/<case>/... hostile and broken sets, and bad/cases.tsv in
                              formats/bad's columns: case, status, path, the file
                              the message must name, keywords (" && ")
"""

import argparse
import json
import os
import random
import shutil
import struct

INDEX = "model.safetensors.index.json"


def read_raw(path):
    """{name: (dtype, shape, bytes)} of a safetensors file: u64 little-endian
    header length, the JSON header, the data section its offsets point into."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name != "__metadata__":
            b, e = info["data_offsets"]
            out[name] = (info["dtype"], info["shape"], data[b:e])
    return out


def pack_raw(tensors):
    """A safetensors file of [(name, dtype, shape, bytes)] in that data order;
    the header padded with spaces to a multiple of 8."""
    header, chunks, pos = {"__metadata__": {"format": "pt"}}, [], 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [pos, pos + len(raw)]}
        chunks.append(raw)
        pos += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(chunks)


SIZE = {"F64": 8, "F32": 4, "I64": 8, "F16": 2, "BF16": 2}


def reverse_elements(dtype, raw):
    """The same values in the opposite order: other weights, still finite."""
    es = SIZE[dtype]
    return b"".join(raw[i:i + es] for i in range(len(raw) - es, -1, -es))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def shard_name(k, n):
    return f"model-{k + 1:05d}-of-{n:05d}.safetensors"


def copy_beside(src, dst):
    """Every file of src but its weights into dst."""
    os.makedirs(dst, exist_ok=True)
    for f in sorted(os.listdir(src)):
        if f != "model.safetensors" and os.path.isfile(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))


def split(tensors, n, rng):
    """{shard file: [(name, dtype, shape, bytes)]}: the names shuffled and dealt
    round-robin; each shard's data widest elements first (so every tensor stays
    aligned to its element), otherwise in the shuffled order."""
    names = sorted(tensors)
    rng.shuffle(names)
    shards = {shard_name(k, n): [] for k in range(n)}
    for i, name in enumerate(names):
        shards[shard_name(i % n, n)].append((name,) + tuple(tensors[name]))
    for s in shards.values():
        s.sort(key=lambda t: -SIZE[t[1]])  # stable: the shuffle stays within a width
    return shards


def index_json(shards, listed=None, rng=None):
    """The index of shards (weight_map in a shuffled order: a reader must not
    rely on transformers' sorted one); listed: {name: file} to write instead."""
    wm = listed if listed is not None else {t[0]: f for f, ts in shards.items() for t in ts}
    items = list(wm.items())
    if rng:
        rng.shuffle(items)
    total = sum(len(t[3]) for ts in shards.values() for t in ts)
    return json.dumps({"metadata": {"total_size": total}, "weight_map": dict(items)}, indent=2) + "\n"


def write_set(d, shards, index_text=None, rng=None):
    for f, ts in shards.items():
        write(os.path.join(d, f), pack_raw(ts))
    write(os.path.join(d, INDEX), index_text if index_text is not None else index_json(shards, rng=rng))


def describe(n):
    return f"Hugging Face safetensors ({n} shards, {INDEX})"


def make_good(fx, out, rng):
    """The sharded copies of fixture models, and their cases.tsv."""
    rows = []
    # case, original, shards, arch reference
    for case, orig, n, ref in (("gpt2-3", "models/tiny-f32", 3, "-"),
                               ("gpt2-prefix-2", "models/tiny-prefix-lmhead", 2, "-"),
                               ("llama-gqa-3", "arch/models/llama-gqa", 3, "llama-gqa"),
                               ("neox-2", "arch/models/neox", 2, "neox")):
        d = os.path.join(out, case)
        copy_beside(os.path.join(fx, orig), d)
        write_set(d, split(read_raw(os.path.join(fx, orig, "model.safetensors")), n, rng), rng=rng)
        rows.append((case, f"shards/{case}", orig, ref, describe(n)))
    # the index named directly, BF16 weights
    d = os.path.join(out, "gpt2-bf16")
    copy_beside(os.path.join(fx, "models/tiny-bf16"), d)
    write_set(d, split(read_raw(os.path.join(fx, "models/tiny-bf16/model.safetensors")), 2, rng), rng=rng)
    rows.append(("gpt2-bf16-index", f"shards/gpt2-bf16/{INDEX}", "models/tiny-bf16", "-", describe(2)))
    # a tensor a shard holds and the index does not list: ignored. An lm_head.weight,
    # which a GPT-2 without tie_word_embeddings would use if the loader saw it.
    t = read_raw(os.path.join(fx, "models/tiny-f32/model.safetensors"))
    shards = split(t, 2, rng)
    listed = {x[0]: f for f, ts in shards.items() for x in ts}
    dt, shape, raw = t["wte.weight"]
    shards[shard_name(1, 2)].append(("lm_head.weight", dt, shape, reverse_elements(dt, raw)))
    d = os.path.join(out, "gpt2-unlisted")
    copy_beside(os.path.join(fx, "models/tiny-f32"), d)
    write_set(d, shards, index_json(shards, listed, rng))
    rows.append(("gpt2-unlisted", "shards/gpt2-unlisted", "models/tiny-f32", "-", describe(2)))
    # model.safetensors beside an index whose shards hold other weights: the single file is read
    shards = split({k: (dt_, sh, reverse_elements(dt_, r)) for k, (dt_, sh, r) in t.items()}, 2, rng)
    d = os.path.join(out, "gpt2-both")
    copy_beside(os.path.join(fx, "models/tiny-f32"), d)
    shutil.copy(os.path.join(fx, "models/tiny-f32/model.safetensors"), os.path.join(d, "model.safetensors"))
    write_set(d, shards, rng=rng)
    rows.append(("gpt2-both", "shards/gpt2-both", "models/tiny-f32", "-", "Hugging Face safetensors (model.safetensors)"))
    write(os.path.join(out, "cases.tsv"), "".join("\t".join(r) + "\n" for r in rows))


def make_bad(fx, out, rng):
    """Hostile and broken sets over tiny-f32 in two shards."""
    bad = os.path.join(out, "bad")
    orig = os.path.join(fx, "models/tiny-f32")
    t = read_raw(os.path.join(orig, "model.safetensors"))
    s1, s2 = shard_name(0, 2), shard_name(1, 2)
    rows = []

    def put(case, status, keyword, shards=None, index=None, names=None, load=INDEX, extra=None):
        """A directory: tiny-f32's files, shards (default: a fresh split), the
        index text (default: theirs). The message must name `names` (default: the index)."""
        d = os.path.join(bad, case)
        copy_beside(orig, d)
        shards = shards if shards is not None else split(t, 2, rng)
        for f, ts in shards.items():
            write(os.path.join(d, f), pack_raw(ts))
        write(os.path.join(d, load), index if index is not None else index_json(shards))
        for f, data in (extra or {}).items():
            write(os.path.join(d, f), data)
        rows.append((case, status, f"shards/bad/{case}", names or load, keyword))

    def wm(mapping):
        return json.dumps({"metadata": {"total_size": 0}, "weight_map": mapping})

    good = split(t, 2, rng)
    listed = {x[0]: f for f, ts in good.items() for x in ts}
    # the index itself
    put("idx_not_json", "format", "not valid JSON", index=index_json(good)[:-40])
    put("idx_empty", "format", "empty", index="")
    put("idx_array", "format", "expected a JSON object, found an array", index="[1, 2]\n")
    put("idx_no_weight_map", "format", "weight_map: missing", index=json.dumps({"metadata": {"total_size": 1}}))
    put("idx_weight_map_list", "format", "weight_map: expected an object && found an array",
        index=json.dumps({"weight_map": [s1, s2]}))
    put("idx_weight_map_empty", "format", "weight_map lists no tensors", index=wm({}))
    put("idx_value_number", "format", "weight_map[\"wte.weight\"]: expected a shard file name (a string), found a number",
        index=wm(dict(listed, **{"wte.weight": 1})))
    put("idx_key_twice", "format", "\"ln_f.bias\" appears twice",
        index='{"weight_map": {"ln_f.bias": "%s", "ln_f.bias": "%s"}}' % (s1, s2))
    # shard names that reach outside the directory, or are no file name
    sub = {"sub/" + s1: pack_raw(good[s1])}  # the file is there: refused for its name, not its absence
    put("shard_dir_part", "format", "\"sub/%s\" has a directory part" % s1,
        index=wm({k: ("sub/" + s1 if v == s1 else v) for k, v in listed.items()}), extra=sub)
    put("shard_dotdot", "format", "\"../%s\" has a directory part" % s1,
        index=wm({k: ("../" + s1 if v == s1 else v) for k, v in listed.items()}))
    put("shard_dotdot_bare", "format", "\"..\" is not a file name",
        index=wm(dict(listed, **{"wte.weight": ".."})))
    put("shard_absolute", "format", "\"/etc/passwd\" is an absolute path",
        index=wm(dict(listed, **{"wte.weight": "/etc/passwd"})))
    put("shard_control", "format", "has a control character && model\\x1b[2J.safetensors",
        index=wm(dict(listed, **{"wte.weight": "model\x1b[2J.safetensors"})))
    put("shard_name_empty", "format", "weight_map[\"wte.weight\"]: the shard \"\" is empty",
        index=wm(dict(listed, **{"wte.weight": ""})))
    # shards that do not match the index
    n2 = sum(1 for v in listed.values() if v == s2)
    d = os.path.join(bad, "shard_missing")
    put("shard_missing", "io", f"{s2}: no such shard && {INDEX} lists {n2} tensors in it", shards=good, names=s2)
    os.remove(os.path.join(d, s2))
    moved = dict(listed)
    name = next(k for k, v in sorted(listed.items()) if v == s2)
    moved[name] = s1  # the index says shard 1; shard 2 holds it
    put("tensor_wrong_shard", "format",
        f"tensor '{name}' is listed in {s1}, but that shard does not hold it ({s2} does)", shards=good,
        index=wm(moved))
    put("tensor_in_no_shard", "format", f"tensor 'h.9.ln_1.weight' is in no shard (the index lists it in {s2})",
        shards=good, index=wm(dict(listed, **{"h.9.ln_1.weight": s2})))
    twice = {f: list(ts) for f, ts in good.items()}
    home = listed["ln_f.weight"]
    twice[s2 if home == s1 else s1].append(next(x for x in good[home] if x[0] == "ln_f.weight"))
    put("tensor_two_shards", "format", f"tensor 'ln_f.weight' is in two shards, {s1} and {s2}", shards=twice,
        index=wm(listed))
    # a shard that is no safetensors file: st_open's own messages, naming the shard
    put("shard_truncated", "format", "outside the data section && file truncated?", shards=good, names=s2)
    with open(os.path.join(bad, "shard_truncated", s2), "r+b") as f:
        f.truncate(os.path.getsize(os.path.join(bad, "shard_truncated", s2)) - 100)
    put("shard_not_json", "format", "header is not valid JSON", shards=good, names=s2)
    p = os.path.join(bad, "shard_not_json", s2)
    blob = bytearray(open(p, "rb").read())
    blob[8] = ord("[")
    write(p, bytes(blob))
    put("shard_empty", "format", "file is 0 bytes", shards=good, names=s1)
    write(os.path.join(bad, "shard_empty", s1), b"")
    # the index leaves out a tensor a shard holds: the model lacks it
    put("idx_omits", "format", "missing tensor 'h.1.mlp.c_fc.weight'", shards=good,
        index=wm({k: v for k, v in listed.items() if k != "h.1.mlp.c_fc.weight"}))
    # a sharded PyTorch checkpoint: refused, pointing at the safetensors files
    torch_wm = {k: "pytorch_model-00001-of-00002.bin" for k in listed}
    put("torch_sharded", "format", "sharded PyTorch checkpoint && model.safetensors.index.json", shards={},
        index=wm(torch_wm), load="pytorch_model.bin.index.json")
    write(os.path.join(bad, "cases.tsv"), "".join("\t".join(r) + "\n" for r in rows))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", required=True)
    a = ap.parse_args()
    out = os.path.join(a.fixtures, "shards")
    shutil.rmtree(out, ignore_errors=True)
    rng = random.Random(20240611)
    make_good(a.fixtures, out, rng)
    make_bad(a.fixtures, out, rng)


if __name__ == "__main__":
    main()
