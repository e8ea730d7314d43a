#!/usr/bin/python3
"""microscope_check.py - the microscope's CLI outputs against the numpy reference.

    microscope_check.py CHECK MODEL_DIR FILE [FILE2] [--ablate SPEC] [--prompt-hex HEX] [--text FILE]

CHECK and what it reads:
    heads    FILE = `heads --json`: every head's scores vs gpt2_ref.head_scores
    lens     FILE = `lens --json`: each layer's top-k and the prediction's rank and
             probability vs gpt2_ref.lens; the last layer vs the forward logits
    topk     FILE = `topk --json`: the probabilities after the prompt (--prompt-hex)
    eval     FILE = `eval --json` of the text in --text (one window)
    csv      FILE = an --export .csv, FILE2 the same table's JSON (attention, heads,
             lens or history, told apart by the CSV's header)
    svg      FILE = `attention --svg`, FILE2 = `attention --json`: labels, title, scale, colours
    png      FILE = `attention --png`, FILE2 = the SVG of the same matrix: size, pixels
--ablate: the heads ablated (L.H or L.*, comma-separated), parsed here on its own.
Prints the largest differences found; exits 1 on a failed check.
Probabilities and scores must agree within 1e-4.
"""
import csv
import io
import json
import math
import os
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import gpt2_ref  # noqa: E402

TOL = 1e-4
VIRIDIS = [0x440154, 0x482475, 0x414487, 0x355f8d, 0x2a788e, 0x21918c,
           0x22a884, 0x44bf70, 0x7ad151, 0xbddf26, 0xfde725]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def ablation(spec, hp):
    out = []
    for item in (spec.split(",") if spec else []):
        layer, head = item.split(".")
        heads = range(hp["n_head"]) if head == "*" else [int(head)]
        out += [(int(layer), h) for h in heads]
    return out


def softmax(v):
    e = np.exp(v - v.max())
    return e / e.sum()


def token_bytes(doc, i):
    tb = doc.get("tokens_bytes")
    return bytes(tb[i]) if tb and tb[i] is not None else doc["tokens"][i].encode()


def text_bytes(obj, key):
    return bytes(obj[key + "_bytes"]) if key + "_bytes" in obj else obj[key].encode()


def escaped(b):
    """bytes as gptscope's messages show them: \\n \\t \\r, \\xNN for other control bytes
    and for bytes that are not valid UTF-8, the rest as text"""
    out, i = [], 0
    while i < len(b):
        for n in (4, 3, 2, 1):
            try:
                ch = b[i:i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(ch) == 1:
                break
        else:
            out.append("\\x%02x" % b[i])
            i += 1
            continue
        c = ord(ch)
        if ch in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch])
        elif c < 0x20 or c == 0x7F:
            out.append("\\x%02x" % c)
        else:
            out.append(ch)
        i += n
    return "".join(out)


def ranked(p, k):
    """indices of the k largest, ties by index (the C order)"""
    return sorted(range(len(p)), key=lambda i: (-p[i], i))[:k]


def check_candidates(top, probs, logits, what):
    """top: [{"id", "prob", "logit"}] vs a reference distribution; returns the largest prob difference."""
    worst = 0.0
    ref = ranked(probs, len(top))
    for i, c in enumerate(top):
        d = abs(c["prob"] - probs[c["id"]])
        worst = max(worst, d)
        check(d < TOL, "%s: candidate %d (id %d) prob %.6g, reference %.6g" % (what, i, c["id"], c["prob"], probs[c["id"]]))
        check(abs(c["logit"] - logits[c["id"]]) < 1e-3 * max(1, abs(logits[c["id"]])), "%s: logit of id %d" % (what, c["id"]))
        # the same token, or a near-tie with it
        check(c["id"] == ref[i] or abs(probs[ref[i]] - probs[c["id"]]) < TOL, "%s: rank %d is id %d, reference id %d" % (what, i + 1, c["id"], ref[i]))
    return worst


def do_heads(model, doc, opts):
    hp, params = gpt2_ref.load_model(model)
    ab = ablation(opts.get("ablate"), hp)
    if not doc:
        return
    # the ids come from `lens`/`attention`-style documents; heads gives them through --ids
    ids = [int(x) for x in opts["ids"].split(",")]
    _, attn, _ = gpt2_ref.forward(hp, params, ids, ablate=ab)
    check(len(doc) == hp["n_layer"] * hp["n_head"], "heads: %d rows for %d heads" % (len(doc), hp["n_layer"] * hp["n_head"]))
    worst = 0.0
    names = ["prev_token", "first_token", "self", "entropy", "induction"]
    for row in doc:
        ref = gpt2_ref.head_scores(attn[row["layer"], row["head"]], ids)
        check(row["ablated"] == ((row["layer"], row["head"]) in ab), "heads: ablated flag of %d.%d" % (row["layer"], row["head"]))
        check(row["n_induction"] == ref[5], "heads %d.%d: n_induction" % (row["layer"], row["head"]))
        for name, r in zip(names, ref[:5]):
            v = row[name]
            if math.isnan(r):
                check(v is None, "heads %d.%d %s: %r, reference undefined" % (row["layer"], row["head"], name, v))
                continue
            d = abs(v - r) if v is not None else math.inf
            worst = max(worst, d)
            check(d < TOL, "heads %d.%d %s: %r, reference %.6g" % (row["layer"], row["head"], name, v, r))
    print("heads: %d heads over %d tokens, largest score difference %.3g" % (len(doc), len(ids), worst))


def do_lens(model, doc, opts):
    hp, params = gpt2_ref.load_model(model)
    ab = ablation(opts.get("ablate"), hp)
    ids, pos = doc["ids"], doc["pos"]
    logits, _, resid = gpt2_ref.forward(hp, params, ids, ablate=ab)
    lens = gpt2_ref.lens(hp, params, resid)  # (L, T, V)
    check(len(doc["layers"]) == hp["n_layer"], "lens: %d layers" % len(doc["layers"]))
    check(sorted(map(tuple, doc["ablated"])) == sorted(ab), "lens: ablated %r, asked %r" % (doc["ablated"], ab))
    final = softmax(logits[pos])
    pred = ranked(final, 1)[0]
    check(doc["predicted"]["id"] == pred or abs(final[pred] - final[doc["predicted"]["id"]]) < TOL, "lens: predicted id")
    worst = 0.0
    for row in doc["layers"]:
        l = row["layer"]
        p = softmax(lens[l, pos])
        worst = max(worst, check_candidates(row["top"], p, lens[l, pos], "lens layer %d" % l))
        pid = doc["predicted"]["id"]
        rank = 1 + sum(1 for i in range(len(p)) if p[i] > p[pid] or (p[i] == p[pid] and i < pid))
        d = abs(row["predicted_prob"] - p[pid])
        worst = max(worst, d)
        check(d < TOL, "lens layer %d: predicted_prob %.6g, reference %.6g" % (l, row["predicted_prob"], p[pid]))
        near = sum(1 for i in range(len(p)) if abs(p[i] - p[pid]) < 1e-6)
        check(abs(row["predicted_rank"] - rank) < near + 1, "lens layer %d: predicted_rank %d, reference %d" % (l, row["predicted_rank"], rank))
    # the last layer is the model's real next-token distribution
    last = doc["layers"][-1]["top"]
    worst = max(worst, check_candidates(last, final, logits[pos], "lens last layer vs forward logits"))
    print("lens: %d layers at position %d of %d, largest probability difference %.3g" % (len(doc["layers"]), pos, len(ids), worst))


def do_topk(model, doc, opts):
    hp, params = gpt2_ref.load_model(model)
    ids = [int(x) for x in opts["ids"].split(",")]
    logits, _, _ = gpt2_ref.forward(hp, params, ids, ablate=ablation(opts.get("ablate"), hp))
    worst = check_candidates(doc, softmax(logits[-1]), logits[-1], "topk")
    print("topk: %d candidates, largest probability difference %.3g" % (len(doc), worst))


def do_eval(model, doc, opts):
    hp, params = gpt2_ref.load_model(model)
    ids = [int(x) for x in opts["ids"].split(",")]
    logits, _, _ = gpt2_ref.forward(hp, params, ids, ablate=ablation(opts.get("ablate"), hp))
    nats = np.mean([-math.log(softmax(logits[t])[ids[t + 1]]) for t in range(len(ids) - 1)])
    d = abs(doc["nats_per_token"] - nats)
    check(d < TOL, "eval: nats_per_token %.6g, reference %.6g" % (doc["nats_per_token"], nats))
    print("eval: %d tokens, nats/token %.6f vs reference %.6f (difference %.3g)" % (len(ids), doc["nats_per_token"], nats, d))


def read_csv(path):
    """rows of byte strings: the file's exact bytes, RFC 4180 quoting undone"""
    with open(path, "rb") as f:
        data = f.read()
    check(data.endswith(b"\r\n"), "csv: rows end in CRLF")
    rows = list(csv.reader(io.StringIO(data.decode("latin-1"), newline=""), strict=True))
    return [[c.encode("latin-1") for c in r] for r in rows]


def num(cell):
    return None if cell == b"" else float(cell)


def close(a, b, tol=1e-6):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= tol * max(1.0, abs(b))


def csv_attention(rows, doc):
    T = len(doc["ids"])
    check(len(rows) == T + 1, "csv attention: %d rows for %d tokens" % (len(rows), T))
    for j in range(T):
        check(rows[0][2 + j] == b"%d:" % j + token_bytes(doc, j), "csv attention: key %d's header %r" % (j, rows[0][2 + j]))
    for i in range(T):
        check(rows[1 + i][1] == token_bytes(doc, i), "csv attention: query %d's token" % i)
        for j in range(T):
            check(close(num(rows[1 + i][2 + j]), doc["weights"][i][j]), "csv attention: cell %d,%d" % (i, j))


def csv_heads(rows, doc):
    check(len(rows) == len(doc) + 1, "csv heads: rows")
    for r, d in zip(rows[1:], doc):
        got = [num(c) for c in r]
        want = [d["layer"], d["head"], d["prev_token"], d["first_token"], d["self"], d["entropy"], d["induction"],
                d["n_induction"], int(d["ablated"])]
        check(all(close(a, b) for a, b in zip(got, want)), "csv heads: %r vs %r" % (got, want))


def csv_candidates(rows, groups, lead, what):
    """groups: [(lead cells, top list, marked candidate or None)] in order"""
    at = 1
    for cells, top, marked in groups:
        expect = [(c, c["id"] == (marked or {}).get("id")) for c in top]
        if marked and not any(m for _, m in expect):
            expect.append((marked, True))
        for rank, (c, mark) in enumerate(expect):
            r = rows[at]
            at += 1
            check(r[:lead] == cells, "%s: row %d leads with %r, expected %r" % (what, at, r[:lead], cells))
            check(int(r[lead + 1]) == c["id"] and r[lead + 2] == text_bytes(c, "token"), "%s: row %d token" % (what, at))
            check(close(num(r[lead + 3]), c["logit"]) and close(num(r[lead + 4]), c["prob"]), "%s: row %d numbers" % (what, at))
            check(int(r[lead]) == c.get("rank", rank + 1) and int(r[lead + 5]) == int(mark), "%s: row %d rank/mark" % (what, at))
    check(at == len(rows), "%s: %d rows, expected %d" % (what, len(rows), at))


def csv_lens(rows, doc):
    pred = doc["predicted"]["id"]
    groups = [([b"%d" % r["layer"]], r["top"], {"id": pred, "token": doc["predicted"]["token"], "rank": r["predicted_rank"],
               "prob": r["predicted_prob"], "logit": r["predicted_logit"], **({"token_bytes": doc["predicted"]["token_bytes"]}
               if "token_bytes" in doc["predicted"] else {})}) for r in doc["layers"]]
    csv_candidates(rows, groups, 1, "csv lens")


def csv_history(rows, doc):
    groups = [([b"%d" % p["pos"], token_bytes(doc, p["pos"])], p["top"], p["next"]) for p in doc["positions"]]
    csv_candidates(rows, groups, 2, "csv history")


def check_ablated(text, pairs, what):
    """text (bytes) names exactly the heads of pairs ([[l, h], ...]): L.H each, L.* for all of a layer's"""
    want = set(map(tuple, pairs))
    for item in text.split():
        layer, head = item.split(b".")
        if head == b"*":
            whole = {p for p in want if p[0] == int(layer)}
            check(whole, "%s: %r names a layer the JSON has none of" % (what, item))
            want -= whole
        else:
            check((int(layer), int(head)) in want, "%s: %r is not in the JSON's ablated" % (what, item))
            want.discard((int(layer), int(head)))
    check(not want, "%s: ablated %r missing from %r" % (what, sorted(want), text))


def csv_ablated(rows, doc, what):
    """the last column names the JSON's ablated heads on every row"""
    check(rows[0][-1] == b"ablated", "%s: the last column is %r, expected ablated" % (what, rows[0][-1]))
    for r in rows[1:]:
        check_ablated(r[-1], doc["ablated"], what)


def do_csv(path, json_path):
    rows = read_csv(path)
    with open(json_path, "rb") as f:
        doc = json.loads(f.read().decode())
    head = rows[0]
    kinds = {b"query_pos": csv_attention, b"layer": csv_heads if b"prev_token" in head else csv_lens, b"pos": csv_history}
    kinds[head[0]](rows, doc)
    if head[0] != b"layer" or b"prev_token" not in head:
        csv_ablated(rows, doc, "csv " + head[0].decode())
    print("csv: %d rows checked against the JSON (%s)" % (len(rows), head[0].decode()))


def viridis(t):
    t = 0.0 if not t > 0 else min(t, 1.0)
    i = min(int(t * 10), 9)
    f = t * 10 - i
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    return tuple(round(((a >> s) & 255) + (((b >> s) & 255) - ((a >> s) & 255)) * f) for s in (16, 8, 0))


def rgb_of(fill):
    return tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))


def label(b):
    """the visible label of a token: tests use tokens of printable ASCII and spaces"""
    return b.decode().replace(" ", "\u00b7").replace("\n", "\u21b5") or "\u2205"


def svg_cells(root):
    ns = "{http://www.w3.org/2000/svg}"
    return {(int(r.get("data-q")), int(r.get("data-k"))): r for r in root.iter(ns + "rect") if r.get("data-q") is not None}


def do_svg(path, json_path):
    root = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    with open(json_path, "rb") as f:
        doc = json.loads(f.read().decode())
    texts = [t.text or "" for t in root.iter(ns + "text")]
    T = len(doc["ids"])
    title = "%s: layer %d, %s" % (escaped(text_bytes(doc, "model")), doc["layer"],
                                  "head %d" % doc["head"] if doc["head"] is not None else "mean")
    check(any(t.startswith(title) for t in texts), "svg: no title %r in %r" % (title, texts[:3]))
    full = ([t for t in texts if t.startswith(title)] + [""])[0]
    if doc["ablated"]:  # the title names the ablation: "...; ablated 0.1 1.*"
        check("; ablated " in full, "svg: the title %r does not name the ablation" % full)
        check_ablated(full.split("; ablated ")[1].encode(), doc["ablated"], "svg title")
    else:
        check("ablated" not in full, "svg: the title %r names an ablation" % full)
    for i in range(T):
        check(texts.count(label(token_bytes(doc, i))) >= 2, "svg: label %r of token %d not on both axes" % (label(token_bytes(doc, i)), i))
    for tick in ("0", "0.25", "0.5", "0.75", "1"):
        check(tick in texts, "svg: colour scale tick %s missing" % tick)
    check("attention weight" in texts, "svg: the scale's name")
    cells = svg_cells(root)
    check(len(cells) == T * T, "svg: %d cells for %d tokens" % (len(cells), T))
    worst = 0
    for (q, k), r in cells.items():
        want = viridis(doc["weights"][q][k]) if k <= q else (0xee, 0xee, 0xee)
        d = max(abs(a - b) for a, b in zip(rgb_of(r.get("fill")), want))
        worst = max(worst, d)
        check(d <= 1, "svg: cell %d,%d is %s, expected %r" % (q, k, r.get("fill"), want))
    print("svg: title, %d labels on each axis, 5 ticks, %d cells (largest colour difference %d)" % (T, len(cells), worst))


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG, non-interlaced"""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "png: signature")
    at, idat, w = 8, b"", 0
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            check(depth == 8 and ctype in (2, 6) and interlace == 0, "png: 8-bit RGB(A), not interlaced")
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    bpp = 4 if ctype == 6 else 3
    raw, stride, prev, rows = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        ft, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a, b = line[i - bpp] if i >= bpp else 0, prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            pred = [0, a, b, (a + b) // 2, a + b - c][ft]
            if ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[i] = (line[i] + pred) & 255
        rows.append(line)
        prev = line
    return w, h, [[tuple(r[x * bpp:x * bpp + 3]) for x in range(w)] for r in rows]


def do_png(path, svg_path):
    root = ET.parse(svg_path).getroot()
    sw, sh = float(root.get("width")), float(root.get("height"))
    w, h, px = png_pixels(path)
    check((w, h) == (2 * round(sw), 2 * round(sh)), "png: %dx%d, expected twice the SVG's %gx%g" % (w, h, sw, sh))
    worst, n = 0, 0
    for (q, k), r in svg_cells(root).items():
        x = 2 * (float(r.get("x")) + float(r.get("width")) / 2)
        y = 2 * (float(r.get("y")) + float(r.get("height")) / 2)
        d = max(abs(a - b) for a, b in zip(px[int(y)][int(x)], rgb_of(r.get("fill"))))
        worst, n = max(worst, d), n + 1
        check(d <= 2, "png: cell %d,%d's centre is %r, the SVG says %s" % (q, k, px[int(y)][int(x)], r.get("fill")))
    print("png: %dx%d, %d cell centres match the SVG's colours (largest difference %d)" % (w, h, n, worst))


def main(argv):
    kind, model, path = argv[0], argv[1], argv[2]
    rest = argv[3:]
    other = rest.pop(0) if rest and not rest[0].startswith("--") else None
    opts = {rest[i][2:]: rest[i + 1] for i in range(0, len(rest), 2)}
    if kind in ("heads", "lens", "topk", "eval"):
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode())
        {"heads": do_heads, "lens": do_lens, "topk": do_topk, "eval": do_eval}[kind](model, doc, opts)
    elif kind == "csv":
        do_csv(path, other)
    elif kind == "svg":
        do_svg(path, other)
    elif kind == "png":
        do_png(path, other)
    for f in failures[:20]:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
