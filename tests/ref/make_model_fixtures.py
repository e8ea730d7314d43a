#!/usr/bin/python3
"""make_model_fixtures.py - deterministic model fixtures for the C test suite.

    /usr/bin/python3 tests/ref/make_model_fixtures.py --out DIR

Writes (see tests/ref/README.md for the exact formats):
    DIR/models/<name>/   tiny GPT-2 model directories in the Hugging Face layout
                         (config.json, model.safetensors, vocab.json, merges.txt)
    DIR/ref/<name>/      reference outputs of gpt2_ref.py for each model
                         (tokens.txt, logits.f32, attn.f32, resid.f32, greedy.txt, meta.txt)
    DIR/bad/<case>/      malformed model directories, one defect each, and
    DIR/bad/cases.tsv    name<TAB>status<TAB>file<TAB>keyword per case

Everything is derived from fixed seeds; two runs produce identical bytes.
The tokenizer is a tiny byte-level BPE in GPT-2's exact file format, trained
here on a short embedded English text.
"""

import argparse
import json
import os
import shutil
import struct
import sys
import time

import numpy as np
import regex

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_ref  # noqa: E402

# ----------------------------------------------------------------------------
# tokenizer

# GPT-2's pre-tokenization pattern (OpenAI encoder.py).
PRETOKENIZE = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

EOT = "<|endoftext|>"
N_MERGES = 250

# Training text for the tiny BPE. Written for this project. It mixes prose,
# contractions, digits, punctuation, blank lines, runs of spaces, a tab and a
# little non-ASCII so the learned merges touch every pre-token class. The bare
# capital letter "A" is kept rare on purpose: no merge may use the single-byte
# token "A" as a part (the bad-tokenizer case tok_vocab_missing_byte deletes
# that token and must have no second defect).
TRAIN_TEXT = """\
The lighthouse keeper's log, kept in a blue notebook, begins on the 3rd of March.

March 3. Wind from the north, 25 knots. The lamp was lit at 6:40 in the evening
and it burned until 7:15 the next morning. I've checked the oil twice; there's
enough for 12 more nights, maybe 14 if the weather is kind. It isn't kind.

March 4. The supply boat didn't come. The radio says it'll come on Thursday, but
they said that last week too. I'm not worried, not yet. We've got bread, beans,
tea and a tin of peaches that I'm saving for a better day.

March 5. Fog. The horn sounded every 30 seconds from 2:00 until 9:30, which is
1,020 blasts if my arithmetic is right (it usually is). The gulls hated it.
So did I.

March 6. Clear at last! I could see the mainland, the church tower and the
three white houses on the hill. The boat came at noon with 40 litres of oil,
2 sacks of flour, the post, and a new bulb for the lamp. The boatman said,
"You'll want to mend that railing before someone falls." He's right. He's
always right, which is the most annoying thing about him.

March 7. Mended the railing. Painted the door. Read three letters from home:
my sister writes that the baby walks now, that the cat has had kittens (5 of
them, all grey), and that the price of coal went up again -- to 18.50 a ton.

    Things to do this week:
    1. scrape the rust off the gallery
    2. clean the lens, inside and out
    3. write back to my sister
    4. count the stores

March 8. Storm. The waves broke over the rocks and the spray reached the
windows of the lantern room, 30 metres up. I stayed awake all night and kept
the light turning. It's the only job that matters here: the light must turn,
the light must not go out. Ships don't care who keeps it, only that it's kept.

March 9. Calm after the storm. I walked around the island at low tide and
found a wooden crate, a rope, two bottles and a boot. The crate said ORANGES
on its side, but it was empty. The rope was good; I'll use it.

March 10. The inspector's visit. He arrived at 10:05, looked at everything,
wrote in his book, and left at 11:20. He said the log was "neat and complete",
that the lens was "the cleanest on the coast", and that I should order more
paint. I didn't tell him about the railing.

March 11. Rain, then sun, then rain. I counted the stores: 9 tins of beans,
6 of soup, 4 of fish, 1 of peaches. Flour for 20 loaves. Tea for a month, if
I'm careful, and I'm never careful with tea.

March 12. The days are getting longer. The lamp was lit at 6:55 tonight, a
quarter of an hour later than on the 3rd. By June it'll be nearly 10 before
the light goes on. I like the long evenings; I don't like the short nights.

March 13. Wrote to my sister. Told her about the storm, the crate and the
inspector. Told her I'm well, which is true, and that I'm not lonely, which is
mostly true. The gulls are company of a sort. They don't talk back.

March 14. A ship passed close in the afternoon, the Northern Star, 2,400 tons,
bound south. The captain dipped his flag and I waved from the gallery. It's a
small thing, but it made the whole day better.

Notes on the lamp: the burner takes 1.5 litres an hour in winter and 1.2 in
summer. The lens turns once every 20 seconds; the clockwork must be wound every
4 hours. If the weight reaches the bottom, the lens stops, and a stopped light
is worse than no light at all, because it's a lie.

Café au lait, naïve, déjà vu: the words my sister likes to write in her
letters. She says they're "fancy". I say they're French. We're both right.
Prices at the harbour shop: bread 0.45, tea 1.20, oil 3.75, a new coat 42.00.

The end of the second week. The log has 14 entries, the stores are counted,
the railing is mended and the light is still turning. That's all anyone can
ask of a keeper, and it's all I ask of myself.
"""


def bytes_to_unicode():
    """GPT-2's byte -> printable unicode char table, in GPT-2's order.

    Printable latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') map to themselves
    and come first; the remaining 68 bytes, in increasing order, map to
    U+0100, U+0101, ... and follow. Ids 0..255 of the vocabulary use this order
    (in GPT-2's encoder.json, id 0 is '!' and id 188 is U+0100)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    table = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + n)
            n += 1
    return table


BYTE_ENCODER = bytes_to_unicode()


def pretokens(text):
    """text -> list of pre-tokens, each as a tuple of byte-mapped characters."""
    return [tuple(BYTE_ENCODER[b] for b in piece.encode("utf-8"))
            for piece in PRETOKENIZE.findall(text)]


def merge_word(word, a, b):
    """Replaces every non-overlapping (a, b) in word, left to right, with a+b."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train_bpe(text, n_merges):
    """Classic BPE training over GPT-2 pre-tokens.

    Repeatedly counts adjacent symbol pairs (weighted by pre-token frequency)
    and merges the most frequent; ties go to the lexicographically smallest
    pair. A pair whose concatenation is already a token is skipped, so every
    merge adds exactly one new token (as in GPT-2's own files).
    Returns (vocab {token: id}, merges [(a, b)] in rank order)."""
    words = {}
    for w in pretokens(text):
        words[w] = words.get(w, 0) + 1

    vocab = {ch: i for i, ch in enumerate(BYTE_ENCODER.values())}
    merges = []
    while len(merges) < n_merges:
        pairs = {}
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        candidates = [(-c, p) for p, c in pairs.items() if p[0] + p[1] not in vocab]
        if not candidates:
            raise RuntimeError(f"training text exhausted after {len(merges)} merges")
        _, (a, b) = min(candidates)
        merges.append((a, b))
        vocab[a + b] = len(vocab)
        words = {merge_word(w, a, b): c for w, c in words.items()}
    vocab[EOT] = len(vocab)
    return vocab, merges


def bpe_encode(text, vocab, merges):
    """GPT-2 encoding (lowest-rank pair first) - used only to sanity-check the
    trained tokenizer."""
    ranks = {m: i for i, m in enumerate(merges)}
    ids = []
    for word in pretokens(text):
        word = list(word)
        while len(word) > 1:
            pairs = [(ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(word, word[1:]))]
            r, _ = min(pairs)
            if r == 1 << 30:
                break
            a, b = merges[r]
            word = list(merge_word(tuple(word), a, b))
        ids.extend(vocab[t] for t in word)
    return ids


def bpe_decode(ids, vocab):
    inv = {v: k for k, v in vocab.items()}
    dec = {c: b for b, c in BYTE_ENCODER.items()}
    return bytes(dec[c] for i in ids for c in inv[i]).decode("utf-8")


def vocab_json(vocab):
    """Serialised like GPT-2's encoder.json: ids in order, ASCII with \\u escapes,
    ", " and ": " separators, no trailing newline."""
    return json.dumps(dict(sorted(vocab.items(), key=lambda kv: kv[1])), ensure_ascii=True)


def merges_txt(merges):
    return "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)


# ----------------------------------------------------------------------------
# safetensors writing

DTYPE_SIZE = {"F32": 4, "F16": 2, "BF16": 2}


def f32_to_bf16_bits(x):
    """float32 array -> uint16 bfloat16 bit patterns, round to nearest even."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def encode_tensor(arr, dtype):
    """float32 array -> little-endian bytes in the storage dtype."""
    arr = np.asarray(arr, dtype=np.float32)
    if dtype == "F32":
        return arr.astype("<f4").tobytes()
    if dtype == "F16":
        return arr.astype("<f2").tobytes()
    if dtype == "BF16":
        return f32_to_bf16_bits(arr).astype("<u2").tobytes()
    raise ValueError(dtype)


def layout(tensors):
    """tensors: list of (name, dtype, shape, bytes) in data order.
    Returns (header dict, data bytes); the header lists "__metadata__" first,
    then the tensors sorted by name, so the header order differs from the
    data order and a loader must go by data_offsets."""
    offsets, chunks, pos = {}, [], 0
    for name, dtype, shape, raw in tensors:
        assert pos % DTYPE_SIZE[dtype] == 0, f"{name} would be misaligned"
        offsets[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [pos, pos + len(raw)]}
        chunks.append(raw)
        pos += len(raw)
    header = {"__metadata__": {"format": "pt"}}
    for name in sorted(offsets):
        header[name] = offsets[name]
    return header, b"".join(chunks)


def pack(header, data, header_bytes=None):
    """u64 header length + header JSON padded with spaces to a multiple of 8
    (so the data section is 8-byte aligned, as the safetensors library does)
    + data. header_bytes, when given, replaces the JSON text verbatim."""
    h = header_bytes if header_bytes is not None else json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


# ----------------------------------------------------------------------------
# models

TINY = dict(n_layer=2, n_head=4, n_embd=64, n_positions=64, eps=1e-5)
# The second model uses a larger epsilon so that a C side ignoring
# layer_norm_epsilon from config.json is caught.
PREFIX = dict(n_layer=3, n_head=2, n_embd=32, n_positions=64, eps=1e-3)
# Heads 64 wide, as in every GPT-2 (the tiny models' are 16): q, k and v of
# a head are then exactly one 64-column panel each of the packed c_attn.
HEAD64 = dict(n_layer=2, n_head=2, n_embd=128, n_positions=64, eps=1e-5)

MODELS = [
    # name, hparams, dtype, weight seed, token seed, prefixed names + untied lm_head
    # (the three tiny models share weights before rounding, and their tokens)
    ("tiny-f32", TINY, "F32", 1234, 100, False),
    ("tiny-f16", TINY, "F16", 1234, 100, False),
    ("tiny-bf16", TINY, "BF16", 1234, 100, False),
    ("tiny-prefix-lmhead", PREFIX, "F32", 4321, 200, True),
    # F32 weights already on gptscope's 8-bit grid (snap_q8): quantizing them
    # at load (gpt2_model_quantize) changes nothing but rounding, so the Q8
    # kernels must match the reference as closely as F32 does
    ("tiny-q8grid", TINY, "F32", 1234, 100, False),
    ("tiny-prefix-q8grid", PREFIX, "F32", 4321, 200, True),
    ("tiny-head64", HEAD64, "F32", 5678, 300, False),
]


def snap_q8(w):
    """Rounds each weight matrix to symmetric 8-bit absmax steps as
    gpt2_model_quantize makes them: a Conv1D weight (K, N) per column,
    wte and lm_head (V, C) per row; the small vectors stay as they are."""
    out = dict(w)
    for k, v in w.items():
        if k.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight")):
            axis = 0
        elif k in ("wte.weight", "lm_head.weight"):
            axis = 1
        else:
            continue
        s = (np.abs(v).max(axis=axis, keepdims=True) / np.float32(127)).astype(np.float32)
        out[k] = (np.rint(v / s) * s).astype(np.float32)
    return out


def random_weights(hp, V, seed, untied):
    """float32 weights, {short name: array}, scaled for lively activations:
    attention scores with a standard deviation of about 2 (far from uniform)
    and logits spread over several units. Position embeddings and the blocks'
    output projections are large enough that the residual stream is not
    dominated by the token's own embedding; otherwise, with tied embeddings,
    greedy decoding just repeats the last token."""
    rng = np.random.default_rng(seed)
    C, L, P = hp["n_embd"], hp["n_layer"], hp["n_positions"]
    nrm = lambda std, *shape: (rng.standard_normal(shape) * std).astype(np.float32)
    w = {"wte.weight": nrm(0.35, V, C), "wpe.weight": nrm(0.5, P, C)}
    for l in range(L):
        p = f"h.{l}."
        w[p + "ln_1.weight"] = 1 + nrm(0.1, C)
        w[p + "ln_1.bias"] = nrm(0.05, C)
        w[p + "attn.c_attn.weight"] = nrm(1.5 / np.sqrt(C), C, 3 * C)
        w[p + "attn.c_attn.bias"] = nrm(0.05, 3 * C)
        w[p + "attn.c_proj.weight"] = nrm(1.0 / np.sqrt(C), C, C)
        w[p + "attn.c_proj.bias"] = nrm(0.02, C)
        w[p + "ln_2.weight"] = 1 + nrm(0.1, C)
        w[p + "ln_2.bias"] = nrm(0.05, C)
        w[p + "mlp.c_fc.weight"] = nrm(1.0 / np.sqrt(C), C, 4 * C)
        w[p + "mlp.c_fc.bias"] = nrm(0.05, 4 * C)
        w[p + "mlp.c_proj.weight"] = nrm(1.5 / np.sqrt(4 * C), 4 * C, C)
        w[p + "mlp.c_proj.bias"] = nrm(0.02, C)
    w["ln_f.weight"] = 1 + nrm(0.1, C)
    w["ln_f.bias"] = nrm(0.05, C)
    if untied:
        w["lm_head.weight"] = nrm(0.5, V, C)
    return w


def model_tensors(hp, weights, dtype, prefixed):
    """(name, dtype, shape, bytes) list in data order: the model's own order
    (wte, wpe, block by block, ln_f, lm_head), which differs from the header's
    sorted order. HF's attention buffers are added after each ln_1:
    h.N.attn.bias, a (1,1,P,P) F32 lower-triangular mask (F32 even in the
    F16/BF16 models), and for prefixed models h.N.attn.masked_bias, an F32
    scalar (shape [], 4 bytes) holding -1e4. The loader must ignore both."""
    P = hp["n_positions"]
    pre = "transformer." if prefixed else ""
    mask = np.tril(np.ones((P, P), dtype=np.float32)).reshape(1, 1, P, P)
    out = []
    for name, arr in weights.items():
        full = name if (not prefixed or name == "lm_head.weight") else pre + name
        out.append((full, dtype, arr.shape, encode_tensor(arr, dtype)))
        if name.endswith(".ln_1.bias"):
            l = name.split(".")[1]
            out.append((f"{pre}h.{l}.attn.bias", "F32", mask.shape, encode_tensor(mask, "F32")))
            if prefixed:
                out.append((f"{pre}h.{l}.attn.masked_bias", "F32", (),
                            encode_tensor(np.float32(-1e4), "F32")))
    return out


def config_json(hp, V, dtype):
    """A config.json like the ones transformers writes, extra keys included."""
    cfg = {
        "activation_function": "gelu_new",
        "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.1,
        "bos_token_id": V - 1,
        "embd_pdrop": 0.1,
        "eos_token_id": V - 1,
        "initializer_range": 0.02,
        "layer_norm_epsilon": hp["eps"],
        "model_type": "gpt2",
        "n_ctx": hp["n_positions"],
        "n_embd": hp["n_embd"],
        "n_head": hp["n_head"],
        "n_inner": None,
        "n_layer": hp["n_layer"],
        "n_positions": hp["n_positions"],
        "resid_pdrop": 0.1,
        "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
        "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype],
        "vocab_size": V,
    }
    return json.dumps(cfg, indent=2) + "\n"


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


# ----------------------------------------------------------------------------
# reference outputs

T_REF = 24        # tokens in the logits/attn/resid fixture
PROMPT_LEN = 8    # greedy prompt length
N_GREEDY = 50     # greedy steps
MIN_MARGIN = 2e-3  # smallest acceptable top-1/top-2 logit gap at a greedy step
MIN_DISTINCT = 10  # distinct ids the greedy continuation must contain


def write_scores(path, attn, ids):
    """One line per head: layer head prev first self entropy induction n_induction."""
    lines = []
    for l in range(attn.shape[0]):
        for h in range(attn.shape[1]):
            s = gpt2_ref.head_scores(attn[l, h], ids)
            lines.append(f"{l} {h} " + " ".join(repr(float(v)) for v in s[:5]) + f" {s[5]}")
    write(path, "\n".join(lines) + "\n")


def write_microscope(hp, params, ref_dir, ids, resid, attn, seed):
    """The microscope's references: zero-ablated logits, the logit lens, and
    head scores on the reference tokens and on a random sequence repeated
    twice (where induction is defined)."""
    L, H, V = hp["n_layer"], hp["n_head"], hp["vocab_size"]
    ablate = sorted({(0, H - 1), (L - 1, 0)})
    logits_ab, _, _ = gpt2_ref.forward(hp, params, ids, ablate=ablate)
    write(os.path.join(ref_dir, "ablate.txt"), " ".join(f"{l}.{h}" for l, h in ablate) + "\n")
    write(os.path.join(ref_dir, "logits_ablated.f32"), logits_ab.astype("<f4").tobytes())
    write(os.path.join(ref_dir, "lens.f32"), gpt2_ref.lens(hp, params, resid).astype("<f4").tobytes())
    write_scores(os.path.join(ref_dir, "heads.txt"), attn, ids)
    half = [int(i) for i in np.random.default_rng(seed + 7).integers(0, V - 1, size=10)]
    rep = half + half
    _, attn_rep, _ = gpt2_ref.forward(hp, params, rep)
    write(os.path.join(ref_dir, "tokens_rep.txt"), " ".join(map(str, rep)) + "\n")
    write_scores(os.path.join(ref_dir, "heads_rep.txt"), attn_rep, rep)


def write_reference(model_dir, ref_dir, seed, eot):
    """Runs gpt2_ref on the model as stored on disk (so F16/BF16 rounding is
    included) and writes the reference files. Returns (min greedy margin, logits)."""
    hp, params = gpt2_ref.load_model(model_dir)
    V = hp["vocab_size"]
    rng = np.random.default_rng(seed)
    ids = [int(i) for i in rng.integers(0, V, size=T_REF * 2) if i != eot][:T_REF]
    logits, attn, resid = gpt2_ref.forward(hp, params, ids)

    write(os.path.join(ref_dir, "tokens.txt"), " ".join(map(str, ids)) + "\n")
    write(os.path.join(ref_dir, "logits.f32"), logits.astype("<f4").tobytes())
    write(os.path.join(ref_dir, "attn.f32"), attn.astype("<f4").tobytes())
    write(os.path.join(ref_dir, "resid.f32"), resid.astype("<f4").tobytes())
    write(os.path.join(ref_dir, "meta.txt"),
          f"{hp['n_layer']} {hp['n_head']} {hp['n_embd']} {hp['n_positions']} {V} {T_REF}\n")
    write_microscope(hp, params, ref_dir, ids, resid, attn, seed)

    # Greedy: retry prompt seeds until no step has a near-tie (the C engine
    # runs in float32 and may legitimately flip a tie), <|endoftext|> is
    # never produced (so a decoder that stops there still emits 50 ids), and
    # the continuation is not stuck repeating one token.
    for attempt in range(100):
        prng = np.random.default_rng(seed * 1000 + attempt)
        prompt = [int(i) for i in prng.integers(0, V - 1, size=PROMPT_LEN)]  # V-1 is EOT
        gen, margins = gpt2_ref.greedy(hp, params, prompt, N_GREEDY)
        if min(margins) >= MIN_MARGIN and eot not in gen and len(set(gen)) >= MIN_DISTINCT:
            break
    else:
        raise RuntimeError(f"{model_dir}: no usable greedy prompt in 100 tries")
    write(os.path.join(ref_dir, "greedy.txt"),
          " ".join(map(str, prompt)) + "\n" + " ".join(map(str, gen)) + "\n")
    return min(margins), attempt, len(set(gen)), logits


# ----------------------------------------------------------------------------
# malformed model directories

# name, status, file the message must name, keywords the message must contain (joined by " && ")
BAD_CASES = [
    ("st_empty", "format", "model.safetensors", "0 bytes"),
    ("st_short", "format", "model.safetensors", "8-byte header"),
    ("st_header_beyond_file", "format", "model.safetensors", "header length"),
    ("st_header_not_json", "format", "model.safetensors", "JSON"),
    ("st_header_not_object", "format", "model.safetensors", "JSON object"),
    ("st_offsets_outside", "format", "model.safetensors", "outside the data section"),
    ("st_truncated_data", "format", "model.safetensors", "outside the data section"),
    ("st_overlap", "format", "model.safetensors", "overlap"),
    ("st_wrong_size", "format", "model.safetensors", "bytes"),
    ("st_unknown_dtype", "format", "model.safetensors", "dtype"),
    ("st_bad_offsets", "format", "model.safetensors", "data_offsets"),
    ("st_bad_offsets_string", "format", "model.safetensors", "data_offsets"),
    ("st_bad_offsets_reversed", "format", "model.safetensors", "data_offsets"),
    ("st_bad_shape", "format", "model.safetensors", "shape"),
    ("st_missing_tensor", "format", "model.safetensors", "missing tensor"),
    ("st_shape_mismatch", "config", "model.safetensors", "shape"),
    ("cfg_missing", "io", "config.json", "config.json"),
    ("cfg_not_json", "config", "config.json", "JSON"),
    ("cfg_missing_key", "config", "config.json", "n_layer"),
    ("cfg_not_divisible", "config", "config.json", "divisible"),
    ("cfg_bad_value", "config", "config.json", "n_layer"),
    ("tok_missing_vocab", "io", "vocab.json", "vocab.json"),
    ("tok_empty_vocab", "tokenizer", "vocab.json", "empty"),
    ("tok_invalid_vocab", "tokenizer", "vocab.json", "JSON"),
    ("tok_vocab_not_int", "tokenizer", "vocab.json", "integer"),
    ("tok_missing_merges", "io", "merges.txt", "merges.txt"),
    ("tok_empty_merges", "tokenizer", "merges.txt", "empty"),
    ("tok_merge_unknown", "tokenizer", "merges.txt", "not in the vocabulary"),
    ("tok_merge_bad_line", "tokenizer", "merges.txt", "line"),
    ("tok_vocab_missing_byte", "tokenizer", "vocab.json", "byte"),
    ("tok_vocab_too_big", "config", "vocab.json", "vocab"),
    # found by fuzzing (tests/fuzz): each was accepted, hung or crashed before
    ("st_overlap_behind_empty", "format", "model.safetensors", "overlap"),
    ("st_nul_in_name", "format", "model.safetensors", "NUL"),
    ("st_header_trailing", "format", "model.safetensors", "after its JSON"),
    ("cfg_huge_sizes", "config", "model.safetensors", "shape"),
    ("cfg_eps_underflow", "config", "config.json", "layer_norm_epsilon"),
    ("cfg_trailing", "config", "config.json", "JSON"),
    ("cfg_model_type_ctrl", "config", "config.json", "model_type"),
    ("tok_vocab_nul", "tokenizer", "vocab.json", "NUL"),
    ("tok_vocab_trailing", "tokenizer", "vocab.json", "JSON"),
    ("tok_merge_ctrl", "tokenizer", "merges.txt", "not in the vocabulary"),
    # messages that said the wrong thing: "is not a non-negative integer", "must be [begin, end]"
    ("st_shape_huge", "format", "model.safetensors", "shape[0] = 4611686018427387904 is too large: at most 2^53"),
    ("st_offsets_huge", "format", "model.safetensors",
     "data_offsets[1] = 1152921504606846976 is too large: at most 2^53 && past the end of the data section"),
]


def make_bad_cases(bad_dir, hp, weights, vocab, merges):
    """Each case is a copy of a valid tiny F32 model with exactly one defect."""
    V = len(vocab)
    tensors = model_tensors(hp, weights, "F32", prefixed=False)
    header, data = layout(tensors)
    good_st = pack(header, data)
    good = {
        "config.json": config_json(hp, V, "F32"),
        "model.safetensors": good_st,
        "vocab.json": vocab_json(vocab),
        "merges.txt": merges_txt(merges),
    }
    D = len(data)

    def st_with(hdr, dat=None, header_bytes=None):
        return pack(hdr, data if dat is None else dat, header_bytes)

    def hcopy():
        return json.loads(json.dumps(header))

    def shift_after(hdr, pos, delta):
        """Moves every tensor whose data begins at or after pos by delta bytes."""
        for name, info in hdr.items():
            if name != "__metadata__" and info["data_offsets"][0] >= pos:
                info["data_offsets"] = [info["data_offsets"][0] + delta, info["data_offsets"][1] + delta]

    files = {}  # case -> {file name: bytes/str, or None to delete}

    files["st_empty"] = {"model.safetensors": b""}
    files["st_short"] = {"model.safetensors": good_st[:5]}
    files["st_header_beyond_file"] = {
        "model.safetensors": struct.pack("<Q", len(good_st) + 1000) + good_st[8:]}
    files["st_header_not_json"] = {"model.safetensors": st_with(None, header_bytes=b'{"wte.weight": [')}
    files["st_header_not_object"] = {"model.safetensors": st_with(None, header_bytes=b"[1,2,3]")}

    # wpe.weight's bytes are cut out and it is re-pointed at [D', D'+16384):
    # it begins exactly at the end of the (now shorter) data section and ends
    # past it. Size still right, no gap, no overlap; it is not the last tensor
    # in data order, so this differs from st_truncated_data.
    h = hcopy()
    b, e = h["wpe.weight"]["data_offsets"]
    assert e < D
    d = data[:b] + data[e:]
    shift_after(h, e, -(e - b))
    h["wpe.weight"]["data_offsets"] = [len(d), len(d) + (e - b)]
    files["st_offsets_outside"] = {"model.safetensors": st_with(h, d)}

    last = max((i["data_offsets"][1], n) for n, i in header.items() if n != "__metadata__")
    assert last[0] == D and D - 100 >= header[last[1]]["data_offsets"][0]
    files["st_truncated_data"] = {"model.safetensors": good_st[:-100]}

    # h.0.ln_1.bias starts 128 bytes inside h.0.ln_1.weight (the tensor stored
    # just before it); 128 bytes are removed so no gap appears and both
    # tensors keep their correct 256-byte size.
    h = hcopy()
    a_b, a_e = h["h.0.ln_1.weight"]["data_offsets"]
    b_b, _ = h["h.0.ln_1.bias"]["data_offsets"]
    assert a_e == b_b and a_e - a_b > 128
    d = data[:b_b] + data[b_b + 128:]
    shift_after(h, b_b, -128)
    files["st_overlap"] = {"model.safetensors": st_with(h, d)}

    # ln_f.bias spans 260 bytes for shape [64] F32 (256); 4 bytes are inserted
    # so the file stays gap-free and later tensors stay aligned.
    h = hcopy()
    b, e = h["ln_f.bias"]["data_offsets"]
    d = data[:e] + b"\0\0\0\0" + data[e:]
    shift_after(h, e, 4)
    h["ln_f.bias"]["data_offsets"] = [b, e + 4]
    files["st_wrong_size"] = {"model.safetensors": st_with(h, d)}

    h = hcopy()
    h["ln_f.bias"]["dtype"] = "Q4_0"
    files["st_unknown_dtype"] = {"model.safetensors": st_with(h)}

    for case, offs in [("st_bad_offsets", [-5, 10]),
                       ("st_bad_offsets_string", ["a", 3]),
                       ("st_bad_offsets_reversed", None)]:
        h = hcopy()
        b, e = h["ln_f.bias"]["data_offsets"]
        h["ln_f.bias"]["data_offsets"] = offs if offs is not None else [e, b]
        files[case] = {"model.safetensors": st_with(h)}

    h = hcopy()
    h["wpe.weight"]["shape"] = ["x", hp["n_embd"]]
    files["st_bad_shape"] = {"model.safetensors": st_with(h)}

    h = hcopy()
    b, e = h.pop("h.1.mlp.c_fc.weight")["data_offsets"]
    d = data[:b] + data[e:]
    shift_after(h, e, -(e - b))
    files["st_missing_tensor"] = {"model.safetensors": st_with(h, d)}

    w2 = dict(weights)
    w2["wte.weight"] = np.ascontiguousarray(weights["wte.weight"][:, :48])
    files["st_shape_mismatch"] = {
        "model.safetensors": pack(*layout(model_tensors(hp, w2, "F32", prefixed=False)))}

    cfg = json.loads(good["config.json"])

    def cfg_with(**kv):
        c = dict(cfg)
        for k, v in kv.items():
            if v is None:
                del c[k]
            else:
                c[k] = v
        return json.dumps(c, indent=2) + "\n"

    files["cfg_missing"] = {"config.json": None}
    files["cfg_not_json"] = {"config.json": '{"n_layer": 2,'}
    files["cfg_missing_key"] = {"config.json": cfg_with(n_layer=None)}
    files["cfg_not_divisible"] = {"config.json": cfg_with(n_head=5)}
    files["cfg_bad_value"] = {"config.json": cfg_with(n_layer=0)}

    inv = {i: t for t, i in vocab.items()}
    mlines = good["merges.txt"].splitlines(keepends=True)

    def vocab_with(change):
        v = dict(vocab)
        change(v)
        return json.dumps(v, ensure_ascii=True)

    files["tok_missing_vocab"] = {"vocab.json": None}
    files["tok_empty_vocab"] = {"vocab.json": b""}
    files["tok_invalid_vocab"] = {"vocab.json": '{"a": 1, "b": }'}
    files["tok_vocab_not_int"] = {"vocab.json": vocab_with(lambda v: v.__setitem__(inv[300], "x"))}
    files["tok_missing_merges"] = {"merges.txt": None}
    files["tok_empty_merges"] = {"merges.txt": b""}
    assert not {"qz", "xy", "qzxy"} & set(vocab)
    files["tok_merge_unknown"] = {"merges.txt": good["merges.txt"] + "qz xy\n"}
    # line 12 of the file becomes a single field (a real token, no space)
    files["tok_merge_bad_line"] = {"merges.txt": "".join(
        mlines[:11] + [mlines[11].replace(" ", "")] + mlines[12:])}
    # no merge may have the single-byte token "A" as one of its two parts
    assert all("A" not in pair for pair in merges), "a merge uses the byte token 'A'"
    files["tok_vocab_missing_byte"] = {"vocab.json": vocab_with(lambda v: v.pop("A"))}
    assert "zqzqzq" not in vocab
    files["tok_vocab_too_big"] = {"vocab.json": vocab_with(lambda v: v.__setitem__("zqzqzq", V + 10))}

    # An empty tensor between two overlapping ones once hid the overlap.
    h = hcopy()
    b, e = h["ln_f.bias"]["data_offsets"]
    h["extra.empty"] = {"dtype": "F32", "shape": [0], "data_offsets": [b + 4, b + 4]}
    h["extra.scalar"] = {"dtype": "F32", "shape": [1], "data_offsets": [b + 8, b + 12]}
    files["st_overlap_behind_empty"] = {"model.safetensors": st_with(h)}
    h = hcopy()
    h["wte.weight\u0000x"] = h.pop("wte.weight")
    files["st_nul_in_name"] = {"model.safetensors": st_with(h)}
    files["st_header_trailing"] = {"model.safetensors": st_with(
        None, header_bytes=json.dumps(header, separators=(",", ":")).encode() + b" x")}
    files["cfg_huge_sizes"] = {"config.json": json.dumps({
        "model_type": "gpt2", "n_layer": 1000, "n_head": 4096, "n_embd": 65536,
        "n_positions": 1048576, "vocab_size": V, "n_inner": 1048576})}
    files["cfg_eps_underflow"] = {"config.json": cfg_with(layer_norm_epsilon=1e-300)}
    files["cfg_trailing"] = {"config.json": cfg_with() + " x"}
    files["cfg_model_type_ctrl"] = {"config.json": cfg_with(model_type="gpt2\n\u001b[2J")}
    files["tok_vocab_nul"] = {"vocab.json": vocab_with(lambda v: v.__setitem__("zq\u0000zq", V))}
    files["tok_vocab_trailing"] = {"vocab.json": vocab_with(lambda v: None) + "x"}
    files["tok_merge_ctrl"] = {"merges.txt": good["merges.txt"] + "\x1b[31mred x\n"}
    h = hcopy()
    h["wpe.weight"]["shape"] = [2 ** 62, 4]
    files["st_shape_huge"] = {"model.safetensors": st_with(h)}
    h = hcopy()
    h["ln_f.bias"]["data_offsets"] = [h["ln_f.bias"]["data_offsets"][0], 2 ** 60]
    files["st_offsets_huge"] = {"model.safetensors": st_with(h)}

    assert [c[0] for c in BAD_CASES] == list(files), "case list and builders disagree"
    for case, changes in files.items():
        cdir = os.path.join(bad_dir, case)
        for fname, content in good.items():
            new = changes.get(fname, content)
            if new is not None:
                write(os.path.join(cdir, fname), new)
        os.makedirs(cdir, exist_ok=True)
    write(os.path.join(bad_dir, "cases.tsv"), "".join("\t".join(c) + "\n" for c in BAD_CASES))


# ----------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="fixture directory")
    args = ap.parse_args()
    t0 = time.time()
    for sub in ("models", "ref", "bad", "nonfinite"):  # only the subdirectories this script owns
        shutil.rmtree(os.path.join(args.out, sub), ignore_errors=True)

    vocab, merges = train_bpe(TRAIN_TEXT, N_MERGES)
    V = len(vocab)
    eot = vocab[EOT]
    assert V == 256 + N_MERGES + 1 and eot == V - 1
    assert bpe_decode(bpe_encode(TRAIN_TEXT, vocab, merges), vocab) == TRAIN_TEXT
    n_train = len(bpe_encode(TRAIN_TEXT, vocab, merges))
    print(f"tokenizer: {V} tokens, {len(merges)} merges; training text "
          f"{len(TRAIN_TEXT.encode())} bytes -> {n_train} tokens")

    ref_logits = {}
    for name, hp, dtype, wseed, tseed, prefixed in MODELS:
        weights = random_weights(hp, V, wseed, untied=prefixed)
        if name.endswith("q8grid"):
            weights = snap_q8(weights)
        mdir = os.path.join(args.out, "models", name)
        write(os.path.join(mdir, "config.json"), config_json(hp, V, dtype))
        write(os.path.join(mdir, "model.safetensors"),
              pack(*layout(model_tensors(hp, weights, dtype, prefixed))))
        if dtype == "F32":  # the reference's own reader gives back the exact weights
            back = gpt2_ref.read_safetensors(os.path.join(mdir, "model.safetensors"))
            for k, v in weights.items():
                k2 = k if (not prefixed or k == "lm_head.weight") else "transformer." + k
                assert np.array_equal(back[k2], v), k2
        write(os.path.join(mdir, "vocab.json"), vocab_json(vocab))
        write(os.path.join(mdir, "merges.txt"), merges_txt(merges))
        margin, attempt, distinct, logits = write_reference(mdir, os.path.join(args.out, "ref", name),
                                                  seed=tseed, eot=eot)
        ref_logits[name] = logits
        print(f"{name}: logits std {logits.std():.2f}, greedy min margin {margin:.4g} "
              f"(prompt attempt {attempt}, {distinct} distinct ids)")
        if name == "tiny-f32":
            make_bad_cases(os.path.join(args.out, "bad"), hp, weights, vocab, merges)

    # A draft-only model with a smaller window than its targets: tiny-f32's
    # tokenizer and weights, 24 positions (no reference files: it only drafts).
    short = dict(TINY, n_positions=24)
    weights = random_weights(TINY, V, 1234, untied=False)
    weights["wpe.weight"] = weights["wpe.weight"][:24]
    mdir = os.path.join(args.out, "models", "tiny-short")
    write(os.path.join(mdir, "config.json"), config_json(short, V, "F32"))
    write(os.path.join(mdir, "model.safetensors"), pack(*layout(model_tensors(short, weights, "F32", False))))
    write(os.path.join(mdir, "vocab.json"), vocab_json(vocab))
    write(os.path.join(mdir, "merges.txt"), merges_txt(merges))

    # Weights that are not finite: NaN in one element of a block matrix (only
    # the logits can tell), and +Inf in a bias (checked at load).
    for case, tensor, idx, value in [("nan-matrix", "h.1.mlp.c_fc.weight", (3, 5), np.nan),
                                     ("inf-bias", "h.0.attn.c_attn.bias", (7,), np.inf)]:
        weights = random_weights(TINY, V, 1234, untied=False)
        weights[tensor] = weights[tensor].copy()
        weights[tensor][idx] = value
        mdir = os.path.join(args.out, "nonfinite", case)
        write(os.path.join(mdir, "config.json"), config_json(TINY, V, "F32"))
        write(os.path.join(mdir, "model.safetensors"), pack(*layout(model_tensors(TINY, weights, "F32", False))))
        write(os.path.join(mdir, "vocab.json"), vocab_json(vocab))
        write(os.path.join(mdir, "merges.txt"), merges_txt(merges))

    # The three tiny models share weights (up to rounding) and tokens.
    for name in ("tiny-f16", "tiny-bf16"):
        diff = np.abs(ref_logits[name] - ref_logits["tiny-f32"]).max()
        print(f"{name}: max |logits - tiny-f32 logits| = {diff:.3g}")
    print(f"fixtures written to {args.out} in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
