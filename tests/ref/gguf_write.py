#!/usr/bin/python3
"""gguf_write.py - an independent GGUF writer, quantizer and dequantizer (numpy),
written from the GGUF specification (ggml's docs/gguf.md and its block layouts),
and the GGUF fixtures of the C tests.

    /usr/bin/python3 tests/ref/gguf_write.py --fixtures DIR [--tokenizer .cache/gpt2-tokenizer]

Reads DIR/models/tiny-* (make_model_fixtures.py) and writes DIR/gguf/:
    models/tiny-k256/     a Hugging Face model directory with n_embd 256 (the
                          K-quants need rows of 256), F32, its reference outputs
    NAME.gguf             a fixture model converted to GGUF (cases.tsv lists
                          them: name, source model, type, version)
    ref/NAME/logits_deq.f32  (T, V) logits of gpt2_ref.forward on the weights as
                          this file's dequantizer decodes them (float64 -> f32)
    ref/NAME/logits_src.f32  (T, V) logits on the source model's weights
    ref/NAME/meta.txt     T V max|deq - src|
    ref/NAME/decoded.safetensors  every tensor as this file's dequantizer
                          decodes it, F32 in Hugging Face names and layout (what
                          `gptscope convert` must write, bit for bit)
    blocks/TYPE.bin, TYPE.f32   random blocks of every block format and their
                          dequantized values (the C dequantizer must match them
                          bit for bit)
    quant/TYPE.in.f32, TYPE.bin  rows the C quantizer must turn into exactly
                          these blocks (Q8_0, Q4_0, Q4_K)
    gpt2tok.gguf          a one-layer model carrying GPT-2's whole tokenizer
                          (with --tokenizer)
    bad/NAME.gguf, bad/cases.tsv  hostile files, one defect each: name<TAB>keyword

Everything comes from fixed seeds: two runs write identical bytes.

Formats (all little-endian, "half" is IEEE fp16):
    header   "GGUF", u32 version (2, 3), u64 tensor count, u64 metadata count
    metadata key (u64 length + bytes), u32 value type, value; an array is u32
             element type, u64 count, elements; a string u64 length + bytes
    tensors  name, u32 n_dims, u64 ne[n_dims] (fastest first), u32 type, u64
             offset into the data section (a multiple of general.alignment, 32)
    data     starts at the next multiple of the alignment after the infos
Block formats: see BLOCKS below (bytes per block of 32 or 256 weights).
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_ref  # noqa: E402

F32 = np.float32

# GGUF metadata value types
U8, I8, U16, I16, U32, I32, FLOAT32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", FLOAT32: "<f",
              BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}

# GGML tensor types: id, elements per block, bytes per block
TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "BF16": (30, 1, 2), "Q8_0": (8, 32, 34),
         "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24),
         "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210)}
BLOCK_TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]


# ----------------------------------------------------------------------------
# fp16 / bf16

def half_bytes(x):
    """float32 array (n,) -> (n, 2) uint8, rounded to nearest even."""
    return np.asarray(x, dtype=F32).astype("<f2").view(np.uint8).reshape(-1, 2)


def half_value(b):
    """(n, 2) uint8 -> float32 (n,)."""
    return np.ascontiguousarray(b).view("<f2").astype(F32).reshape(-1)


def bf16_bits(x):
    """float32 -> bf16 bit patterns (uint16), round to nearest even."""
    u = np.asarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def round_away(v):
    """C's roundf: halves away from zero, exactly (as ggml's Q8_0)."""
    a = np.abs(v)
    f = np.floor(a)
    return np.sign(v) * (f + np.floor(F32(2) * (a - f)))


# ----------------------------------------------------------------------------
# bit packing helpers

def nibbles(q):
    """(n, 32) codes 0..15 -> (n, 16) bytes: code j low nibble, j + 16 high."""
    q = q.astype(np.uint8)
    return q[:, :16] | (q[:, 16:] << 4)


def bits32(q):
    """(n, 32) codes -> (n, 4) bytes: bit 4 of code j is bit j of a u32."""
    hb = ((q.astype(np.uint32) >> 4) & 1) << np.arange(32, dtype=np.uint32)
    return hb.sum(axis=1, dtype=np.uint32).astype("<u4").view(np.uint8).reshape(-1, 4)


def unbits32(b):
    """(n, 4) bytes -> (n, 32) high bits (0 or 16)."""
    u = np.ascontiguousarray(b).view("<u4").reshape(-1, 1)
    return (((u >> np.arange(32, dtype=np.uint32)) & 1) << 4).astype(np.int32)


def unnibbles(b):
    """(n, 16) bytes -> (n, 32) codes."""
    return np.concatenate([b & 15, b >> 4], axis=1).astype(np.int32)


def k_pack_scales(sc, mn):
    """(n, 8) 6-bit scales and minimums -> (n, 12) bytes (the K-quants' packing)."""
    sc = sc.astype(np.uint8)
    mn = mn.astype(np.uint8)
    s = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    s[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    s[:, 4:8] = mn[:, 0:4] | ((mn[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:8] & 15) | ((mn[:, 4:8] & 15) << 4)
    return s


def k_unpack_scales(s):
    """(n, 12) bytes -> (sc, mn), each (n, 8): for j < 4, sc = s[j] & 63 and
    mn = s[j + 4] & 63; for j >= 4, sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4
    and mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4."""
    s = s.astype(np.int32)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc, mn


# ----------------------------------------------------------------------------
# dequantizing: (n_blocks, block bytes) uint8 -> (n_blocks, 32 or 256) float32,
# each formula in float32 in the order written (x = d * q, then + m or - dm)

def deq_q8_0(b):
    d = half_value(b[:, 0:2]).reshape(-1, 1)
    return b[:, 2:34].view(np.int8).astype(F32) * d


def deq_q4_0(b):
    d = half_value(b[:, 0:2]).reshape(-1, 1)
    return d * (unnibbles(b[:, 2:18]) - 8).astype(F32)


def deq_q4_1(b):
    d, m = half_value(b[:, 0:2]).reshape(-1, 1), half_value(b[:, 2:4]).reshape(-1, 1)
    return d * unnibbles(b[:, 4:20]).astype(F32) + m


def deq_q5_0(b):
    d = half_value(b[:, 0:2]).reshape(-1, 1)
    q = unnibbles(b[:, 6:22]) | unbits32(b[:, 2:6])
    return d * (q - 16).astype(F32)


def deq_q5_1(b):
    d, m = half_value(b[:, 0:2]).reshape(-1, 1), half_value(b[:, 2:4]).reshape(-1, 1)
    q = unnibbles(b[:, 8:24]) | unbits32(b[:, 4:8])
    return d * q.astype(F32) + m


def k_codes(qs, qh=None):
    """qs (n, 128), qh (n, 32) or None -> (n, 8, 32) codes: chunk c of 32 bytes
    gives sub-block 2c (low nibbles) and 2c + 1 (high); sub-block s adds bit s
    of qh[l] as bit 4."""
    n = qs.shape[0]
    c = qs.reshape(n, 4, 1, 32).astype(np.int32)
    q = ((c >> np.array([0, 4]).reshape(1, 1, 2, 1)) & 15).reshape(n, 8, 32)
    if qh is not None:
        h = qh.reshape(n, 1, 32).astype(np.int32)
        q = q | (((h >> np.arange(8).reshape(1, 8, 1)) & 1) << 4)
    return q


def deq_k(b, five):
    n = b.shape[0]
    d, dmin = half_value(b[:, 0:2]).reshape(n, 1, 1), half_value(b[:, 2:4]).reshape(n, 1, 1)
    sc, mn = k_unpack_scales(b[:, 4:16])
    q = k_codes(b[:, 48:176], b[:, 16:48]) if five else k_codes(b[:, 16:144])
    ds = d * sc.astype(F32).reshape(n, 8, 1)
    dm = dmin * mn.astype(F32).reshape(n, 8, 1)
    return (ds * q.astype(F32) - dm).reshape(n, 256)


def q6_codes(b):
    """(n, 210) -> (n, 256) codes 0..63: half h (128 weights) from ql[64h..],
    qh[32h..]: l, l+32, l+64, l+96 take ql[l] low, ql[l+32] low, ql[l] high,
    ql[l+32] high nibbles and bits 0-1, 2-3, 4-5, 6-7 of qh[l]."""
    n = b.shape[0]
    out = np.zeros((n, 2, 4, 32), dtype=np.int32)
    for h in range(2):
        L = b[:, 64 * h:64 * h + 64].astype(np.int32)
        H = b[:, 128 + 32 * h:128 + 32 * h + 32].astype(np.int32)
        out[:, h, 0] = (L[:, :32] & 15) | ((H & 3) << 4)
        out[:, h, 1] = (L[:, 32:] & 15) | (((H >> 2) & 3) << 4)
        out[:, h, 2] = (L[:, :32] >> 4) | (((H >> 4) & 3) << 4)
        out[:, h, 3] = (L[:, 32:] >> 4) | (((H >> 6) & 3) << 4)
    return out.reshape(n, 256)


def deq_q6_k(b):
    n = b.shape[0]
    d = half_value(b[:, 208:210]).reshape(n, 1)
    sc = b[:, 192:208].view(np.int8).astype(F32)                     # (n, 16)
    ds = (d * sc).reshape(n, 16, 1)
    q = (q6_codes(b) - 32).astype(F32).reshape(n, 16, 16)
    return (ds * q).reshape(n, 256)


DEQUANT = {"Q8_0": deq_q8_0, "Q4_0": deq_q4_0, "Q4_1": deq_q4_1, "Q5_0": deq_q5_0,
           "Q5_1": deq_q5_1, "Q4_K": lambda b: deq_k(b, False), "Q5_K": lambda b: deq_k(b, True),
           "Q6_K": deq_q6_k}


# ----------------------------------------------------------------------------
# quantizing: (n_blocks, 32 or 256) float32 -> (n_blocks, block bytes) uint8

def inv(d):
    """1 / d, 0 where d is 0 (float32)."""
    with np.errstate(divide="ignore"):
        return np.where(d == 0, F32(0), F32(1) / np.where(d == 0, F32(1), d)).astype(F32)


def q_q8_0(x):
    """ggml's reference: d = max|x| / 127, q = roundf(x / d) (by 1/d)."""
    d = (np.abs(x).max(axis=1) / F32(127)).astype(F32)
    q = round_away(x * inv(d).reshape(-1, 1)).astype(np.int8)
    return np.concatenate([half_bytes(d), q.view(np.uint8)], axis=1)


def signed_extreme(x):
    """Per row, the value of largest magnitude (the first such)."""
    return np.take_along_axis(x, np.abs(x).argmax(axis=1).reshape(-1, 1), axis=1).reshape(-1)


def q_q4_0(x):
    """ggml's reference: d = extreme / -8, q = min(15, trunc(x / d + 8.5))."""
    d = (signed_extreme(x) / F32(-8)).astype(F32)
    q = np.minimum(F32(15), np.trunc(x * inv(d).reshape(-1, 1) + F32(8.5)))
    return np.concatenate([half_bytes(d), nibbles(q)], axis=1)


def q_q5_0(x):
    d = (signed_extreme(x) / F32(-16)).astype(F32)
    q = np.minimum(F32(31), np.trunc(x * inv(d).reshape(-1, 1) + F32(16.5))).astype(np.int32)
    return np.concatenate([half_bytes(d), bits32(q), nibbles(q & 15)], axis=1)


def q_q41_q51(x, levels):
    lo, hi = x.min(axis=1), x.max(axis=1)
    d = ((hi - lo) / F32(levels)).astype(F32)
    q = np.minimum(F32(levels), np.trunc((x - lo.reshape(-1, 1)) * inv(d).reshape(-1, 1) + F32(0.5)))
    q = q.astype(np.int32)
    if levels == 15:
        return np.concatenate([half_bytes(d), half_bytes(lo), nibbles(q)], axis=1)
    return np.concatenate([half_bytes(d), half_bytes(lo), bits32(q), nibbles(q & 15)], axis=1)


def code_in(v, hi):
    """rint(v) clamped to [0, hi] (as quant.c's code_in)."""
    return np.clip(np.rint(v), 0, hi).astype(np.int32)


def k_try(s, d, dmin, sc, mn, levels):
    """Sub-blocks s (n, 8, 32) with codes sc, mn (n, 8): their codes and the
    squared error summed in order (float32, as quant.c's q4k_try)."""
    n = s.shape[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        ds = (d * sc.astype(F32)).reshape(n, 8, 1)
        dm = (dmin * mn.astype(F32)).reshape(n, 8, 1)
        q = np.where(ds > 0, code_in((s + dm) / np.where(ds > 0, ds, F32(1)), levels), 0)
    e = (ds * q.astype(F32) - dm - s).astype(F32)
    return q, np.cumsum(e * e, axis=2, dtype=F32)[:, :, -1]


K_MOVES = [(0, 0), (-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)]


def q_k(x, levels):
    """Q4_K (levels 15) / Q5_K (31), as quant.c's quant_q4_k: sub-block s spans
    [lo, hi] with lo = min(0, min x); step = (hi - lo) / levels; d, dmin = the
    largest step and -lo over 63, as fp16; 6-bit codes rint(step / d) and
    rint(-lo / dmin), each moved by -1, 0 or +1 to the pair of the nine with
    the least squared error (the unmoved first, ties to the earlier); each
    weight the code nearest (x + dmin mn) / (d sc)."""
    n = x.shape[0]
    s = x.reshape(n, 8, 32)
    lo = np.minimum(F32(0), s.min(axis=2))
    hi = s[:, :, 0].copy()
    hi = np.maximum(hi, s.max(axis=2))
    step = ((hi - lo) / F32(levels)).astype(F32)
    neg = (F32(0) - lo).astype(F32)
    dh = half_bytes((step.max(axis=1) / F32(63)).astype(F32))
    mh = half_bytes((neg.max(axis=1) / F32(63)).astype(F32))
    d, dmin = half_value(dh).reshape(n, 1), half_value(mh).reshape(n, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc0 = np.where(d > 0, code_in(step / np.where(d > 0, d, F32(1)), 63), 0)
        mn0 = np.where(dmin > 0, code_in(neg / np.where(dmin > 0, dmin, F32(1)), 63), 0)
    q, least = k_try(s, d, dmin, sc0, mn0, levels)
    sc, mn = sc0.copy(), mn0.copy()
    for a, b in K_MOVES[1:]:
        c, m = sc0 + a, mn0 + b
        ok = (c >= 0) & (c <= 63) & (m >= 0) & (m <= 63)
        qc, err = k_try(s, d, dmin, np.clip(c, 0, 63), np.clip(m, 0, 63), levels)
        better = ok & (err < least)
        least = np.where(better, err, least)
        sc, mn = np.where(better, c, sc), np.where(better, m, mn)
        q = np.where(better[:, :, None], qc, q)
    lows = q & 15                                                      # (n, 8, 32)
    qs = (lows[:, 0::2, :] | (lows[:, 1::2, :] << 4)).astype(np.uint8).reshape(n, 128)
    head = np.concatenate([dh, mh, k_pack_scales(sc, mn)], axis=1)
    if levels == 15:
        return np.concatenate([head, qs], axis=1)
    qh = (((q >> 4) & 1) << np.arange(8).reshape(1, 8, 1)).sum(axis=1).astype(np.uint8)  # (n, 32)
    return np.concatenate([head, qh, qs], axis=1)


def q_q6_k(x):
    """Per sub-block of 16: step = max|x| / 31; d = the largest step / 127
    (fp16); 8-bit scale rint(step / d); q = rint(x / (d sc)) + 32 in [0, 63]."""
    n = x.shape[0]
    s = x.reshape(n, 16, 16)
    step = (np.abs(s).max(axis=2) / F32(31)).astype(F32)
    dh = half_bytes((step.max(axis=1) / F32(127)).astype(F32))
    d = half_value(dh).reshape(n, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d > 0, np.clip(np.rint(step / np.where(d > 0, d, F32(1))), 0, 127), 0).astype(np.int32)
        ds = (d * sc.astype(F32)).reshape(n, 16, 1)
        q = np.where(ds > 0, np.clip(np.rint(s / np.where(ds > 0, ds, F32(1))) + 32, 0, 63), 32).astype(np.int32)
    q = q.reshape(n, 2, 4, 32)
    ql = np.zeros((n, 2, 64), dtype=np.uint8)
    qh = np.zeros((n, 2, 32), dtype=np.uint8)
    ql[:, :, :32] = (q[:, :, 0] & 15) | ((q[:, :, 2] & 15) << 4)
    ql[:, :, 32:] = (q[:, :, 1] & 15) | ((q[:, :, 3] & 15) << 4)
    qh[:] = (q[:, :, 0] >> 4) | ((q[:, :, 1] >> 4) << 2) | ((q[:, :, 2] >> 4) << 4) | ((q[:, :, 3] >> 4) << 6)
    return np.concatenate([ql.reshape(n, 128), qh.reshape(n, 64), sc.astype(np.int8).view(np.uint8), dh], axis=1)


QUANT = {"Q8_0": q_q8_0, "Q4_0": q_q4_0, "Q4_1": lambda x: q_q41_q51(x, 15), "Q5_0": q_q5_0,
         "Q5_1": lambda x: q_q41_q51(x, 31), "Q4_K": lambda x: q_k(x, 15), "Q5_K": lambda x: q_k(x, 31),
         "Q6_K": q_q6_k}


def encode_tensor(a, typ):
    """A 2-D float32 array (rows, cols) (or 1-D) -> bytes of GGML type typ."""
    a = np.ascontiguousarray(a, dtype=F32)
    if typ == "F32":
        return a.astype("<f4").tobytes()
    if typ == "F16":
        return a.astype("<f2").tobytes()
    if typ == "BF16":
        return bf16_bits(a).astype("<u2").tobytes()
    _, block, nbytes = TYPES[typ]
    blocks = QUANT[typ](a.reshape(-1, block))
    assert blocks.shape[1] == nbytes, (typ, blocks.shape)
    return blocks.astype(np.uint8).tobytes()


def decode_tensor(raw, typ, shape):
    """bytes -> float32 array of shape (the numpy shape, rows last-fastest)."""
    if typ == "F32":
        return np.frombuffer(raw, dtype="<f4").astype(F32).reshape(shape)
    if typ == "F16":
        return np.frombuffer(raw, dtype="<f2").astype(F32).reshape(shape)
    if typ == "BF16":
        return gpt2_ref.bf16_bits_to_f32(np.frombuffer(raw, dtype="<u2")).reshape(shape)
    _, block, nbytes = TYPES[typ]
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, nbytes)
    return DEQUANT[typ](b).astype(F32).reshape(shape)


# ----------------------------------------------------------------------------
# the file

def gguf_string(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, value):
    if vtype == STRING:
        return gguf_string(value)
    if vtype == ARRAY:
        etype, items = value
        return struct.pack("<IQ", etype, len(items)) + b"".join(gguf_value(etype, v) for v in items)
    return struct.pack(SCALAR_FMT[vtype], value)


class Gguf:
    """kv: [key, type, encoded value]; tensors: dicts with name, ne, type,
    data; fields may be edited before to_bytes (the hostile cases do)."""

    def __init__(self, version=3, alignment=32):
        self.version, self.alignment = version, alignment
        self.kv, self.tensors = [], []
        self.n_tensors = self.n_kv = None     # None: the real counts

    def add(self, key, vtype, value):
        self.kv.append([key, vtype, gguf_value(vtype, value)])

    def add_tensor(self, name, ne, typ, data):
        self.tensors.append({"name": name, "ne": list(ne), "type": TYPES[typ][0], "data": data,
                             "offset": None})

    def to_bytes(self):
        out = bytearray(b"GGUF" + struct.pack("<I", self.version))
        out += struct.pack("<QQ", len(self.tensors) if self.n_tensors is None else self.n_tensors,
                           len(self.kv) if self.n_kv is None else self.n_kv)
        for key, vtype, raw in self.kv:
            out += gguf_string(key) + struct.pack("<I", vtype) + raw
        offset, offsets = 0, []
        for t in self.tensors:
            o = offset if t["offset"] is None else t["offset"]
            offsets.append(o)
            offset = -(-(o + len(t["data"])) // self.alignment) * self.alignment
        for t, o in zip(self.tensors, offsets):
            out += gguf_string(t["name"]) + struct.pack("<I", len(t["ne"]))
            out += b"".join(struct.pack("<Q", n) for n in t["ne"])
            out += struct.pack("<IQ", t["type"], o)
        out += bytes(-len(out) % self.alignment)
        base = len(out)
        for t, o in zip(self.tensors, offsets):
            if base + o > len(out) + (1 << 20):       # a hostile offset: no data there
                continue
            if base + o > len(out):
                out += bytes(base + o - len(out))
            end = base + o + len(t["data"])
            if end > len(out):
                out += bytes(end - len(out))
            out[base + o:end] = t["data"]
        out += bytes(-len(out) % self.alignment)
        return bytes(out)


# ----------------------------------------------------------------------------
# models

def read_hf(model_dir):
    """(config dict, {name without 'transformer.': float32 array}, tokens, merges)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    raw = gpt2_ref.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    t = {(k[len("transformer."):] if k.startswith("transformer.") else k): v for k, v in raw.items()}
    with open(os.path.join(model_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    tokens = [None] * (max(vocab.values()) + 1)
    for s, i in vocab.items():
        tokens[i] = s
    with open(os.path.join(model_dir, "merges.txt"), encoding="utf-8") as f:
        merges = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#version")]
    return cfg, t, tokens, merges


BLOCK_MAP = [("ln_1", "attn_norm", False), ("attn.c_attn", "attn_qkv", True), ("attn.c_proj", "attn_output", True),
             ("ln_2", "ffn_norm", False), ("mlp.c_fc", "ffn_up", True), ("mlp.c_proj", "ffn_down", True)]


def matrix_type(scheme, gguf_name, cols):
    """The GGML type of a 2-D tensor with rows of `cols` under a scheme: one
    type for every matrix, or Q4_K_M's / Q5_K_M's mix (Q6_K for the embedding
    and ffn_down, Q4_K / Q5_K elsewhere). Rows a block cannot divide fall back
    to Q8_0."""
    if scheme in ("Q4_K_M", "Q5_K_M"):
        typ = "Q6_K" if gguf_name in ("token_embd.weight", "output.weight") or "ffn_down" in gguf_name else scheme[:4]
    else:
        typ = scheme
    return typ if cols % TYPES[typ][1] == 0 else "Q8_0"


def convert(model_dir, scheme, version=3, pos_type="F32", output_copy=False):
    """A HF GPT-2 directory -> (Gguf, {hf name: float32 array as decoded},
    config, the bytes one decoded token reads). output_copy: a tied model's
    head written again as output.weight, as llama.cpp's converter does."""
    cfg, t, tokens, merges = read_hf(model_dir)
    C, L = cfg["n_embd"], cfg["n_layer"]
    g = Gguf(version)
    g.add("general.architecture", STRING, "gpt2")
    g.add("general.name", STRING, os.path.basename(model_dir.rstrip("/")))
    g.add("gpt2.block_count", U32, L)
    g.add("gpt2.context_length", U32, cfg.get("n_positions", cfg.get("n_ctx")))
    g.add("gpt2.embedding_length", U32, C)
    g.add("gpt2.feed_forward_length", U32, 4 * C)
    g.add("gpt2.attention.head_count", U32, cfg["n_head"])
    g.add("gpt2.attention.layer_norm_epsilon", FLOAT32, float(cfg.get("layer_norm_epsilon", 1e-5)))
    g.add("general.file_type", U32, 1)
    g.add("tokenizer.ggml.model", STRING, "gpt2")
    g.add("tokenizer.ggml.tokens", ARRAY, (STRING, tokens))
    g.add("tokenizer.ggml.token_type", ARRAY, (I32, [3 if s == "<|endoftext|>" else 1 for s in tokens]))
    g.add("tokenizer.ggml.merges", ARRAY, (STRING, merges))
    if "<|endoftext|>" in tokens:
        g.add("tokenizer.ggml.bos_token_id", U32, tokens.index("<|endoftext|>"))
        g.add("tokenizer.ggml.eos_token_id", U32, tokens.index("<|endoftext|>"))
    decoded, stored = {}, {}

    def put(gguf_name, hf_name, transpose, typ=None):
        a = t[hf_name]
        a = a.T if transpose else a                      # numpy (rows, cols): ne = [cols, rows]
        if typ is None:
            typ = "F32" if a.ndim == 1 else matrix_type(scheme, gguf_name, a.shape[-1])
        raw = encode_tensor(a, typ)
        g.add_tensor(gguf_name, list(reversed(a.shape)), typ, raw)
        back = decode_tensor(raw, typ, a.shape)
        decoded[hf_name] = back.T if transpose else back
        stored[gguf_name] = (a.shape, len(raw))

    put("token_embd.weight", "wte.weight", False)
    put("position_embd.weight", "wpe.weight", False, pos_type)
    for l in range(L):
        for hf, gg, is_w in BLOCK_MAP:
            put(f"blk.{l}.{gg}.weight", f"h.{l}.{hf}.weight", is_w)
            put(f"blk.{l}.{gg}.bias", f"h.{l}.{hf}.bias", False)
    put("output_norm.weight", "ln_f.weight", False)
    put("output_norm.bias", "ln_f.bias", False)
    if output_copy:
        t["lm_head.weight"] = t["wte.weight"]
    if "lm_head.weight" in t:
        put("output.weight", "lm_head.weight", False)
    return g, decoded, cfg, token_bytes(stored)


def token_bytes(stored):
    """What a decoded token reads: every block matrix and the head as stored
    (a block format's scales included); the embedding whole when it is the
    head, else one of its rows; one row of the position table; the vectors
    as float32 (the engine converts them)."""
    total = 0
    for name, (shape, nbytes) in stored.items():
        if name == "position_embd.weight":
            total += 4 * shape[1]
        elif name == "token_embd.weight":
            total += nbytes // shape[0] if "output.weight" in stored else nbytes
        elif len(shape) == 1:
            total += 4 * shape[0]
        else:
            total += nbytes
    return total


def ref_params(cfg, w):
    """gpt2_ref's (hparams, params) from HF-named float arrays."""
    C, L = cfg["n_embd"], cfg["n_layer"]
    hp = {"n_layer": L, "n_head": cfg["n_head"], "n_embd": C, "n_positions": cfg.get("n_positions", cfg.get("n_ctx")),
          "vocab_size": cfg["vocab_size"], "eps": float(cfg.get("layer_norm_epsilon", 1e-5))}
    f = {k: v.astype(np.float64) for k, v in w.items()}
    lin = lambda p: {"w": f[p + ".weight"], "b": f[p + ".bias"]}
    norm = lambda p: {"g": f[p + ".weight"], "b": f[p + ".bias"]}
    params = {"wte": f["wte.weight"], "wpe": f["wpe.weight"], "ln_f": norm("ln_f"), "blocks": []}
    params["lm_head"] = f.get("lm_head.weight", params["wte"])
    for l in range(L):
        p = f"h.{l}."
        params["blocks"].append({"ln_1": norm(p + "ln_1"), "ln_2": norm(p + "ln_2"),
                                 "attn": {"c_attn": lin(p + "attn.c_attn"), "c_proj": lin(p + "attn.c_proj")},
                                 "mlp": {"c_fc": lin(p + "mlp.c_fc"), "c_proj": lin(p + "mlp.c_proj")}})
    return hp, params


def write_safetensors(path, tensors):
    """{name: float32 array} -> a safetensors file (F32)."""
    header, data = {}, bytearray()
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def make_k256(fixtures, out_dir):
    """A model with n_embd 256 (4 heads, 2 layers, 64 positions) on the tiny
    tokenizer: random weights (seed 256), std 0.02 for matrices (0.2 for the
    position embedding), layer norms near 1."""
    src = os.path.join(fixtures, "models", "tiny-f32")
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(256)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    C, L, V, P = 256, 2, cfg["vocab_size"], 64
    cfg.update({"n_embd": C, "n_layer": L, "n_head": 4, "n_positions": P, "n_ctx": P})
    w = {"wte.weight": rng.normal(0, 0.1, (V, C)), "wpe.weight": rng.normal(0, 0.2, (P, C)),
         "ln_f.weight": 1 + rng.normal(0, 0.05, C), "ln_f.bias": rng.normal(0, 0.05, C)}
    for l in range(L):
        p = f"h.{l}."
        for n, (i, o) in {"attn.c_attn": (C, 3 * C), "attn.c_proj": (C, C), "mlp.c_fc": (C, 4 * C),
                          "mlp.c_proj": (4 * C, C)}.items():
            w[p + n + ".weight"] = rng.normal(0, 0.06, (i, o))
            w[p + n + ".bias"] = rng.normal(0, 0.02, o)
        for n in ("ln_1", "ln_2"):
            w[p + n + ".weight"] = 1 + rng.normal(0, 0.05, C)
            w[p + n + ".bias"] = rng.normal(0, 0.05, C)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), {k: v.astype(F32) for k, v in w.items()})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for name in ("vocab.json", "merges.txt"):
        with open(os.path.join(src, name), "rb") as a, open(os.path.join(out_dir, name), "wb") as b:
            b.write(a.read())


# (name, source model, scheme, version)
MODEL_CASES = [
    ("tiny-f32.f32", "tiny-f32", "F32", 3), ("tiny-f16.f16", "tiny-f16", "F16", 3),
    ("tiny-f32.f16", "tiny-f32", "F16", 3),  # F16 matrices, F32 norms and biases not exact in F16
    ("tiny-bf16.bf16", "tiny-bf16", "BF16", 2), ("tiny-f32.q8_0", "tiny-f32", "Q8_0", 3),
    ("tiny-f32.q4_0", "tiny-f32", "Q4_0", 3), ("tiny-f32.q4_1", "tiny-f32", "Q4_1", 3),
    ("tiny-f32.q5_0", "tiny-f32", "Q5_0", 3), ("tiny-f32.q5_1", "tiny-f32", "Q5_1", 2),
    ("tiny-prefix-lmhead.q8_0", "tiny-prefix-lmhead", "Q8_0", 2),
    ("tiny-k256.f32", "tiny-k256", "F32", 3), ("tiny-k256.q8_0", "tiny-k256", "Q8_0", 3),
    ("tiny-k256.q4_0", "tiny-k256", "Q4_0", 3), ("tiny-k256.q4_k", "tiny-k256", "Q4_K", 3),
    ("tiny-k256.q5_k", "tiny-k256", "Q5_K", 3), ("tiny-k256.q6_k", "tiny-k256", "Q6_K", 3),
    ("tiny-k256.q4_k_m", "tiny-k256", "Q4_K_M", 3), ("tiny-k256.q5_k_m", "tiny-k256", "Q5_K_M", 2),
    # a tied model with its head written again as output.weight, as llama.cpp's converter writes GPT-2
    ("tiny-f32.f32-output", "tiny-f32", "F32", 3), ("tiny-k256.q4_k_m-output", "tiny-k256", "Q4_K_M", 3),
]


def tokens_of(fixtures):
    with open(os.path.join(fixtures, "ref", "tiny-f32", "tokens.txt")) as f:
        return [int(v) for v in f.read().split()]


def write_models(fixtures, out):
    models = {n: os.path.join(fixtures, "models", n) for n in ("tiny-f32", "tiny-f16", "tiny-bf16", "tiny-prefix-lmhead")}
    models["tiny-k256"] = os.path.join(out, "models", "tiny-k256")
    make_k256(fixtures, models["tiny-k256"])
    ids = tokens_of(fixtures)
    lines, src_logits = [], {}
    for name, src, scheme, version in MODEL_CASES:
        g, decoded, cfg, nbytes = convert(models[src], scheme, version, output_copy=name.endswith("-output"))
        with open(os.path.join(out, name + ".gguf"), "wb") as f:
            f.write(g.to_bytes())
        if src not in src_logits:
            _, t, _, _ = read_hf(models[src])
            src_logits[src] = gpt2_ref.forward(*ref_params(cfg, t), ids)[0]
        deq = gpt2_ref.forward(*ref_params(cfg, decoded), ids)[0]
        d = os.path.join(out, "ref", name)
        os.makedirs(d, exist_ok=True)
        deq.astype("<f4").tofile(os.path.join(d, "logits_deq.f32"))
        write_safetensors(os.path.join(d, "decoded.safetensors"), {k: v.astype(F32) for k, v in decoded.items()})
        src_logits[src].astype("<f4").tofile(os.path.join(d, "logits_src.f32"))
        err = float(np.abs(deq - src_logits[src]).max())
        with open(os.path.join(d, "meta.txt"), "w") as f:
            f.write(f"{len(ids)} {cfg['vocab_size']} {err:.6g}\n")
        with open(os.path.join(d, "token_bytes.txt"), "w") as f:
            f.write(f"{nbytes}\n")
        lines.append(f"{name}\t{src}\t{scheme}\t{version}\t{err:.6g}")
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.write("# name\tsource\ttype\tversion\tmax |logit(deq) - logit(src)|\n" + "\n".join(lines) + "\n")
    with open(os.path.join(out, "tokens.txt"), "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")


# ----------------------------------------------------------------------------
# block fixtures

def random_blocks(typ, n, rng):
    """n blocks of random bytes whose fp16 scales are finite: zero, subnormal,
    negative and ordinary values."""
    _, block, nbytes = TYPES[typ]
    b = rng.integers(0, 256, (n, nbytes), dtype=np.uint8)
    scales = rng.choice([0.0, 6e-8, -1e-5, 1e-3, -0.03, 0.25, 1.5, -7.0], size=(n, 2)) * rng.uniform(0.5, 1.0, (n, 2))
    pos = {"Q6_K": [208]}.get(typ, [0, 2] if typ in ("Q4_1", "Q5_1", "Q4_K", "Q5_K") else [0])
    for k, p in enumerate(pos):
        b[:, p:p + 2] = half_bytes(scales[:, k].astype(F32))
    return b


def write_blocks(out):
    rng = np.random.default_rng(1618)
    os.makedirs(os.path.join(out, "blocks"), exist_ok=True)
    os.makedirs(os.path.join(out, "quant"), exist_ok=True)
    for typ in BLOCK_TYPES:
        b = random_blocks(typ, 64, rng)
        b.tofile(os.path.join(out, "blocks", typ + ".bin"))
        DEQUANT[typ](b).astype("<f4").tofile(os.path.join(out, "blocks", typ + ".f32"))
    for typ in ("Q8_0", "Q4_0", "Q4_K"):
        x = rng.normal(0, 0.05, (8, 512)).astype(F32)
        x[1] = 0                                            # all zero
        x[2] = 0.125                                        # constant
        x[3, 7] = 3.0                                       # one outlier
        x[4] = -np.abs(x[4])                                # negative only
        x[5] = np.abs(x[5]) + 0.5                           # positive, away from 0
        x[6, :256] *= 1e-6                                  # tiny values (subnormal fp16 scales)
        x.astype("<f4").tofile(os.path.join(out, "quant", typ + ".in.f32"))
        QUANT[typ](x.reshape(-1, TYPES[typ][1])).astype(np.uint8).tofile(os.path.join(out, "quant", typ + ".bin"))


# ----------------------------------------------------------------------------
# GPT-2's tokenizer in a GGUF file

def write_gpt2_tokenizer(tok_dir, out):
    with open(os.path.join(tok_dir, "encoder.json"), encoding="utf-8") as f:
        enc = json.load(f)
    tokens = [None] * (max(enc.values()) + 1)
    for s, i in enc.items():
        tokens[i] = s
    with open(os.path.join(tok_dir, "vocab.bpe"), encoding="utf-8") as f:
        merges = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#version")]
    V, C = len(tokens), 32
    rng = np.random.default_rng(50257)
    g = Gguf(3)
    for key, vt, val in [("general.architecture", STRING, "gpt2"), ("gpt2.block_count", U32, 1),
                         ("gpt2.context_length", U32, 16), ("gpt2.embedding_length", U32, C),
                         ("gpt2.feed_forward_length", U32, 4 * C), ("gpt2.attention.head_count", U32, 1),
                         ("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
                         ("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
                         ("tokenizer.ggml.eos_token_id", U32, enc["<|endoftext|>"])]:
        g.add(key, vt, val)
    shapes = {"token_embd.weight": (V, C), "position_embd.weight": (16, C), "output_norm.weight": (C,),
              "output_norm.bias": (C,)}
    for gg, n in [("attn_norm", C), ("ffn_norm", C)]:
        shapes[f"blk.0.{gg}.weight"] = (n,)
        shapes[f"blk.0.{gg}.bias"] = (n,)
    for gg, (o, i) in [("attn_qkv", (3 * C, C)), ("attn_output", (C, C)), ("ffn_up", (4 * C, C)),
                       ("ffn_down", (C, 4 * C))]:
        shapes[f"blk.0.{gg}.weight"] = (o, i)
        shapes[f"blk.0.{gg}.bias"] = (o,)
    for name, shape in shapes.items():
        a = rng.normal(0, 0.02, shape).astype(F32)
        typ = "Q8_0" if len(shape) == 2 else "F32"
        g.add_tensor(name, list(reversed(shape)), typ, encode_tensor(a, typ))
    with open(os.path.join(out, "gpt2tok.gguf"), "wb") as f:
        f.write(g.to_bytes())


# ----------------------------------------------------------------------------
# hostile files: the Q8_0 tiny-f32 file, one defect each

def set_kv(g, key, vtype, value):
    for e in g.kv:
        if e[0] == key:
            e[1], e[2] = vtype, gguf_value(vtype, value)
            return
    raise KeyError(key)


def drop_kv(g, key):
    g.kv = [e for e in g.kv if e[0] != key]


def tensor(g, name):
    return next(t for t in g.tensors if t["name"] == name)


def bad_cases(good):
    """(name, keyword, function of a fresh Gguf -> bytes)."""
    def edit(f):
        def run(g):
            f(g)
            return g.to_bytes()
        return run

    def raw(f):
        return lambda g: f(bytearray(g.to_bytes()))

    whole = good.to_bytes()
    key0 = 24 + 8                                  # the first key's bytes
    return [
        ("empty", "(the file is empty)", lambda g: b""),
        ("short", "truncated", lambda g: whole[:20]),
        ("cut_in_metadata", "truncated", lambda g: whole[:200]),
        ("cut_in_tensor_infos", "truncated", lambda g: whole[:whole.index(b"blk.1.ffn_up.weight") + 5]),
        ("cut_in_data", "outside the data section", lambda g: whole[:len(whole) - 4096]),
        ("bad_magic", "starts with 47 47 55 47", raw(lambda b: bytes(b"GGUG" + b[4:]))),
        ("version1", "version 1", edit(lambda g: setattr(g, "version", 1))),
        ("version4", "version 4", edit(lambda g: setattr(g, "version", 4))),
        ("big_endian", "big-endian", edit(lambda g: setattr(g, "version", 3 << 24))),
        ("huge_tensor_count", "tensor count", edit(lambda g: setattr(g, "n_tensors", 1 << 40))),
        ("huge_kv_count", "metadata count", edit(lambda g: setattr(g, "n_kv", (1 << 64) - 1))),
        ("huge_key_length", "over the limit", raw(lambda b: bytes(b[:24] + struct.pack("<Q", 1 << 62) + b[32:]))),
        ("key_past_end", "truncated", raw(lambda b: bytes(b[:24] + struct.pack("<Q", 5000) + b[32:100]))),
        ("key_not_ascii", "printable ASCII", raw(lambda b: bytes(b[:key0] + b"\xff" + b[key0 + 1:]))),
        ("empty_key", "empty key", edit(lambda g: g.kv.insert(0, ["", U32, gguf_value(U32, 1)]))),
        ("duplicate_key", "appears twice", edit(lambda g: g.kv.append(list(g.kv[0])))),
        ("unknown_value_type", "value type 13", edit(lambda g: g.kv.insert(0, ["x.y", 13, b""]))),
        ("nested_array", "nested arrays", edit(lambda g: g.kv.insert(0, ["x.y", ARRAY, struct.pack("<IQ", ARRAY, 1)]))),
        ("array_type_bad", "no such type", edit(lambda g: g.kv.insert(0, ["x.y", ARRAY, struct.pack("<IQ", 77, 1)]))),
        ("huge_array", "more than the", edit(lambda g: g.kv.insert(0, ["x.y", ARRAY, struct.pack("<IQ", U32, 1 << 60)]))),
        ("huge_string_in_array", "truncated",
         edit(lambda g: g.kv.insert(0, ["x.y", ARRAY, struct.pack("<IQQ", STRING, 1, 1 << 50)]))),
        ("huge_string_value", "truncated", edit(lambda g: g.kv.insert(0, ["x.y", STRING, struct.pack("<Q", (1 << 64) - 1)]))),
        ("alignment_zero", "power of two", edit(lambda g: g.add("general.alignment", U32, 0))),
        ("alignment_odd", "power of two", edit(lambda g: g.add("general.alignment", U32, 48))),
        ("alignment_type", "expected a uint32", edit(lambda g: g.add("general.alignment", U64, 32))),
        ("n_dims_5", "dimensions", edit(lambda g: tensor(g, "output_norm.bias").update(ne=[64, 1, 1, 1, 1]))),
        ("n_dims_0", "dimensions", edit(lambda g: tensor(g, "output_norm.bias").update(ne=[]))),
        ("dim_zero", "dimension 0 is 0", edit(lambda g: tensor(g, "output_norm.bias").update(ne=[0]))),
        ("shape_overflow", "overflows", edit(lambda g: tensor(g, "output_norm.bias").update(ne=[1 << 32, 1 << 32, 4]))),
        ("type_q2_k", "Q2_K", edit(lambda g: tensor(g, "token_embd.weight").update(type=10))),
        ("type_unknown", "not a GGUF tensor type", edit(lambda g: tensor(g, "token_embd.weight").update(type=1234))),
        ("rows_not_blocks", "not a multiple of the", edit(lambda g: tensor(g, "token_embd.weight").update(ne=[48, 676]))),
        ("offset_misaligned", "not a multiple of the alignment", edit(lambda g: tensor(g, "output_norm.bias").update(offset=4))),
        ("offset_outside", "outside the data section", edit(lambda g: tensor(g, "output_norm.bias").update(offset=1 << 40))),
        ("offset_wraps", "outside the data section",
         edit(lambda g: tensor(g, "output_norm.bias").update(offset=(1 << 64) - 32))),
        ("overlap", "overlap", edit(lambda g: tensor(g, "output_norm.bias").update(offset=0))),
        ("duplicate_tensor", "appears twice", edit(lambda g: g.tensors.append(dict(tensor(g, "output_norm.bias"))))),
        ("name_too_long", "over the limit", edit(lambda g: tensor(g, "output_norm.bias").update(name="x" * 300))),
        ("name_nul", "NUL", edit(lambda g: tensor(g, "output_norm.bias").update(name="output_norm\0bias"))),
        ("arch_phi3", "expected \"gpt2\"", edit(lambda g: set_kv(g, "general.architecture", STRING, "phi3"))),
        ("arch_missing", "general.architecture' is missing", edit(lambda g: drop_kv(g, "general.architecture"))),
        ("arch_not_string", "expected a string", edit(lambda g: set_kv(g, "general.architecture", U32, 2))),
        ("block_count_missing", "gpt2.block_count' is missing", edit(lambda g: drop_kv(g, "gpt2.block_count"))),
        ("block_count_zero", "gpt2.block_count' is 0", edit(lambda g: set_kv(g, "gpt2.block_count", U32, 0))),
        ("block_count_string", "expected an integer", edit(lambda g: set_kv(g, "gpt2.block_count", STRING, "2"))),
        ("heads_not_divisible", "not divisible", edit(lambda g: set_kv(g, "gpt2.attention.head_count", U32, 5))),
        ("eps_negative", "layer_norm_epsilon", edit(lambda g: set_kv(g, "gpt2.attention.layer_norm_epsilon", FLOAT32, -1.0))),
        ("embd_mismatch", "expected (507, 32) from the metadata",
         edit(lambda g: set_kv(g, "gpt2.embedding_length", U32, 32))),
        ("missing_tensor", "missing tensor 'h.1.mlp.c_fc.weight'",
         edit(lambda g: g.tensors.remove(tensor(g, "blk.1.ffn_up.weight")))),
        ("missing_token_embd", "token_embd.weight", edit(lambda g: g.tensors.remove(tensor(g, "token_embd.weight")))),
        ("bias_as_q8_0_matrix", "has shape", edit(lambda g: tensor(g, "blk.0.attn_qkv.bias").update(ne=[64, 3]))),
        ("tokens_missing", "tokenizer.ggml.tokens' is missing", edit(lambda g: drop_kv(g, "tokenizer.ggml.tokens"))),
        ("tokens_not_strings", "array of int32", edit(lambda g: set_kv(g, "tokenizer.ggml.tokens", ARRAY, (I32, [1, 2])))),
        ("tokenizer_llama", "no byte token <0x00>", edit(lambda g: set_kv(g, "tokenizer.ggml.model", STRING, "llama"))),
        ("token_outside_alphabet", "byte alphabet",
         edit(lambda g: set_kv(g, "tokenizer.ggml.tokens", ARRAY, (STRING, ["\t"] + good_tokens[1:])))),
        ("merge_unknown", "not in the vocabulary",
         edit(lambda g: set_kv(g, "tokenizer.ggml.merges", ARRAY, (STRING, ["qz xy"])))),
        ("merge_newline", "newline", edit(lambda g: set_kv(g, "tokenizer.ggml.merges", ARRAY, (STRING, ["a\nb"])))),
        ("eos_out_of_range", "eos_token_id' is 9999", edit(lambda g: set_kv(g, "tokenizer.ggml.eos_token_id", U32, 9999))),
        ("more_tokens_than_rows", "only 507 rows",
         edit(lambda g: set_kv(g, "tokenizer.ggml.tokens", ARRAY, (STRING, good_tokens + ["zqzq"])))),
    ]


good_tokens = []


def write_bad(fixtures, out):
    global good_tokens
    src = os.path.join(fixtures, "models", "tiny-f32")
    _, _, good_tokens, _ = read_hf(src)
    d = os.path.join(out, "bad")
    os.makedirs(d, exist_ok=True)
    lines = []
    for name, keyword, make in bad_cases(convert(src, "Q8_0")[0]):
        with open(os.path.join(d, name + ".gguf"), "wb") as f:
            f.write(make(convert(src, "Q8_0")[0]))
        lines.append(f"{name}\t{keyword}")
    with open(os.path.join(d, "cases.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--tokenizer", help="GPT-2's encoder.json + vocab.bpe (for gpt2tok.gguf)")
    args = ap.parse_args(argv)
    out = os.path.join(args.fixtures, "gguf")
    os.makedirs(out, exist_ok=True)
    write_blocks(out)
    write_models(args.fixtures, out)
    write_bad(args.fixtures, out)
    if args.tokenizer:
        write_gpt2_tokenizer(args.tokenizer, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
