#!/usr/bin/python3
"""bpe_train_ref.py — an independent reference for gptscope's BPE trainer (gpt2_bpe_train.h).

    /usr/bin/python3 tests/ref/bpe_train_ref.py --out DIR

Writes DIR/sample.txt, a seeded mixture (about 8 KB) of English, other scripts, digits,
punctuation, odd whitespace and bytes that are not UTF-8, and for each case in CASES a
directory DIR/<name>/ with what the trainer must produce from it:
  vocab.json   {token: id}, GPT-2's byte alphabet, written as the C trainer writes it
               (json.dumps with ensure_ascii=False and no spaces, then a newline)
  merges.txt   "#version: 0.2", then "left right" per merge in order
  counts.txt   each merge's pair count when it was merged, one per line
  stats.txt    "key value" lines: vocab_size min_frequency n_merges stop stop_count
               n_tokens n_pieces n_unique_pieces
DIR/cases.txt lists the case names.

The algorithm is the plain one, written from the header's contract and not from the C:
recount every pair over every distinct piece before each merge (O(merges x text)), take
the best by (count descending, left bytes, right bytes), skip for good a pair whose
concatenation is already a token, stop at vocab_size, when the best pair left occurs
fewer than min_frequency times, or when no pair is left. Pre-tokenization is GPT-2's
pattern in Python's `regex` module; a run of bytes that is not UTF-8 is a piece of its own.

Needs the `regex` module (Debian: python3-regex); run it with /usr/bin/python3.
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe_ref  # noqa: E402  (GPT-2's pattern and byte alphabet)

import regex  # noqa: E402

EOT = "<|endoftext|>"
# name, vocab_size, min_frequency
CASES = [
    ("sample_f2", 4096, 2),   # asks for more than the text supports: stops at min_frequency
    ("sample_f1", 900, 1),    # goes deep into count-1 ties
    ("sample_small", 300, 2),  # stops at vocab_size
]

_SPLIT = regex.compile(r"[\udc80-\udcff]+|[^\udc80-\udcff]+")


def pieces(data: bytes):
    """GPT-2 pre-tokenization of arbitrary bytes: invalid UTF-8 runs are pieces of their own
    (surrogateescape marks them), valid stretches go through the pattern on their own."""
    text = data.decode("utf-8", "surrogateescape")
    out = []
    for m in _SPLIT.finditer(text):
        seg = m.group()
        if "\udc80" <= seg[0] <= "\udcff":
            out.append(seg.encode("utf-8", "surrogateescape"))
        else:
            out.extend(p.encode("utf-8") for p in bpe_ref.PATTERN.findall(seg))
    assert b"".join(out) == data
    return out


def merge_word(word, a, b):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train(data: bytes, vocab_size: int, min_frequency: int):
    """Returns (merges [(left bytes, right bytes, count)], stats dict)."""
    ps = pieces(data)
    words = {}
    for p in ps:
        w = tuple(bytes([b]) for b in p)
        words[w] = words.get(w, 0) + 1
    stats = {"vocab_size": vocab_size, "min_frequency": min_frequency,
             "n_pieces": len(ps), "n_unique_pieces": len(words),
             "stop": "vocab_size", "stop_count": 0}
    n_skipped = 0
    tokens = {bytes([b]) for b in range(256)}
    closed = set()  # pairs skipped because their concatenation was a token already
    merges = []
    while len(merges) < vocab_size - 257:
        counts = {}
        for w, c in words.items():
            for pair in zip(w, w[1:]):
                counts[pair] = counts.get(pair, 0) + c
        order = sorted((-c, a, b) for (a, b), c in counts.items() if (a, b) not in closed)
        best = None
        for negc, a, b in order:
            if a + b in tokens:
                closed.add((a, b))
                n_skipped += 1
                continue
            best = (-negc, a, b)
            break
        if best is None:
            stats["stop"] = "no_pairs"
            break
        c, a, b = best
        if c < min_frequency:
            stats["stop"], stats["stop_count"] = "min_frequency", c
            break
        merges.append((a, b, c))
        tokens.add(a + b)
        words = {merge_word(w, a, b): n for w, n in words.items()}
    stats["n_merges"] = len(merges)
    stats["n_tokens"] = sum(len(w) * c for w, c in words.items())
    if n_skipped:  # never seen when training starts from single bytes: worth a look
        print(f"bpe_train_ref: {n_skipped} pairs skipped as duplicates", file=sys.stderr)
    return merges, stats


def vocab_of(merges):
    order = bpe_ref.byte_alphabet()  # byte -> char, in byte order
    printable = [b for b in range(256) if order[b] == chr(b)]
    others = [b for b in range(256) if order[b] != chr(b)]
    vocab = {}
    for b in printable + others:
        vocab[order[b]] = len(vocab)
    for a, b, _ in merges:
        vocab[bpe_ref.to_alphabet(a + b)] = len(vocab)
    vocab[EOT] = len(vocab)
    return vocab


def sample_text(seed=20240611, size=8000) -> bytes:
    rng = random.Random(seed)
    words = ("the of and to in is that it was for on are with as his they be at one have "
             "this from or had by not but what some we can out other were all there when up "
             "use your how said an each she which do their time if will way about many then "
             "them would write like so these her long make thing see him two has look more "
             "day could go come did my sound no most number who over know water than call "
             "first people may down side been now find").split()
    odd = ["don't", "I'm", "we'll", "they've", "she'd", "it's", "O'Neil", "rock'n'roll",
           "café", "naïve", "Zürich", "résumé", "Ελλάδα", "Москва", "日本語", "中文字",
           "한국어", "עברית", "العربية", "हिन्दी", "ไทย", "😀", "👍🏽", "🇫🇷", "x²", "½", "٣٤٥",
           "१२३", "ＡＢＣ", "—", "…", "«quoted»", "\u00a0", "\u3000", "\u2003"]
    punct = [".", ",", ";", ":", "!", "?", "...", " - ", "(", ")", "\"", "'", "--", "$", "%",
             "#", "@", "&", "*", "/", "\\", "{", "}", "[", "]", "<", ">", "|", "=", "+", "~"]
    invalid = [b"\xff", b"\xfe\xfe", b"\x80", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80",
               b"\xc0\xb1", b"\xf0\x9f\x98", b"\xf4\x90\x80\x80", b"\x00", b"\x1b[0m"]
    out = bytearray()
    while len(out) < size:
        r = rng.random()
        if r < 0.55:
            w = rng.choice(words)
            if rng.random() < 0.1:
                w = w.capitalize()
            out += (" " + w).encode()
        elif r < 0.65:
            out += rng.choice([" ", ""]).encode() + rng.choice(odd).encode()
        elif r < 0.75:
            out += rng.choice(punct).encode()
        elif r < 0.83:
            out += (" " + str(rng.randrange(10 ** rng.randrange(1, 7)))).encode()
        elif r < 0.91:
            out += rng.choice(["\n", "\n\n", "  ", "\t", "\r\n", "   \n", " \n"]).encode()
        else:
            out += rng.choice(invalid)
    return bytes(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    data = sample_text()
    try:
        data.decode("utf-8")
        raise SystemExit("bpe_train_ref: the sample should hold invalid UTF-8")
    except UnicodeDecodeError:
        pass
    with open(os.path.join(args.out, "sample.txt"), "wb") as f:
        f.write(data)
    for name, vocab_size, min_frequency in CASES:
        merges, stats = train(data, vocab_size, min_frequency)
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(vocab_of(merges), ensure_ascii=False, separators=(",", ":")) + "\n")
        with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            for a, b, _ in merges:
                f.write(f"{bpe_ref.to_alphabet(a)} {bpe_ref.to_alphabet(b)}\n")
        with open(os.path.join(d, "counts.txt"), "w") as f:
            f.write("".join(f"{c}\n" for _, _, c in merges))
        with open(os.path.join(d, "stats.txt"), "w") as f:
            f.write("".join(f"{k} {v}\n" for k, v in sorted(stats.items())))
        print(f"bpe_train_ref: {name}: {stats['n_merges']} merges, stop {stats['stop']}, "
              f"{len(data)} bytes -> {stats['n_tokens']} tokens")
    with open(os.path.join(args.out, "cases.txt"), "w") as f:
        f.write("".join(name + "\n" for name, _, _ in CASES))


if __name__ == "__main__":
    main()
