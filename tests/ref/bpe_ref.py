"""bpe_ref.py — an independent reference for GPT-2's byte-level BPE tokenizer.

Follows the semantics of OpenAI's gpt-2/src/encoder.py (Python `regex` module for the
pre-tokenization pattern, BPE by merge rank, each round merging every occurrence of the
best pair left to right). Written plainly for checking the C implementation, not for speed.

    tok = Tokenizer.load("path/to/dir")   # vocab.json + merges.txt, or encoder.json + vocab.bpe
    ids = tok.encode("Hello world")
    assert tok.decode(ids) == b"Hello world"

Needs the `regex` module (Debian: python3-regex); run it with /usr/bin/python3.
"""
import json
import os

import regex

PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

EOT = "<|endoftext|>"


def byte_alphabet():
    """GPT-2's bytes_to_unicode(): byte -> the printable character that stands for it.

    Printable Latin-1 bytes stand for themselves; the remaining 68 bytes take U+0100,
    U+0101, ... in increasing byte order."""
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table, spare = {}, 0x100
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(spare)
            spare += 1
    return table


BYTE_TO_CHAR = byte_alphabet()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def to_alphabet(data: bytes) -> str:
    return "".join(BYTE_TO_CHAR[b] for b in data)


def from_alphabet(s: str) -> bytes:
    return bytes(CHAR_TO_BYTE[c] for c in s)


class Tokenizer:
    def __init__(self, vocab, merges):
        """vocab: {alphabet string: id}; merges: [(left, right)] in rank order."""
        self.vocab = vocab
        self.inverse = {i: s for s, i in vocab.items()}
        # A merge listed twice keeps its later rank, like encoder.py's dict(zip(...)).
        self.ranks = {}
        for rank, pair in enumerate(merges):
            self.ranks[pair] = rank
        self.cache = {}
        self.eot = vocab.get(EOT, -1)

    @classmethod
    def load(cls, directory):
        vocab_path = os.path.join(directory, "vocab.json")
        merges_path = os.path.join(directory, "merges.txt")
        if not os.path.exists(vocab_path):
            vocab_path = os.path.join(directory, "encoder.json")
            merges_path = os.path.join(directory, "vocab.bpe")
        with open(vocab_path, encoding="utf-8") as f:
            vocab = json.load(f)
        merges = []
        with open(merges_path, encoding="utf-8") as f:
            for n, line in enumerate(f):
                if n == 0 and line.startswith("#version"):
                    continue
                fields = line.split()
                if not fields:
                    continue
                if len(fields) != 2:
                    raise ValueError(f"{merges_path} line {n + 1}: {line!r}")
                merges.append((fields[0], fields[1]))
        return cls(vocab, merges)

    def bpe(self, piece: str):
        """Merges one piece (a string in the byte alphabet); returns its symbols."""
        if piece in self.cache:
            return self.cache[piece]
        symbols = list(piece)
        while len(symbols) > 1:
            best, best_rank = None, None
            for pair in zip(symbols, symbols[1:]):
                r = self.ranks.get(pair)
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = pair, r
            if best is None:
                break
            merged, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    merged.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        self.cache[piece] = symbols
        return symbols

    def encode_ordinary(self, text: str):
        ids = []
        for piece in PATTERN.findall(text):
            ids.extend(self.vocab[s] for s in self.bpe(to_alphabet(piece.encode("utf-8"))))
        return ids

    def encode(self, text: str, special=False):
        """With special=True, each "<|endoftext|>" becomes the eot id and the text between
        occurrences is encoded on its own."""
        if not special or self.eot < 0:
            return self.encode_ordinary(text)
        ids = []
        for k, part in enumerate(text.split(EOT)):
            if k:
                ids.append(self.eot)
            ids.extend(self.encode_ordinary(part))
        return ids

    def decode(self, ids) -> bytes:
        return b"".join(from_alphabet(self.inverse[i]) for i in ids)


if __name__ == "__main__":
    import sys
    tok = Tokenizer.load(sys.argv[1])
    print(" ".join(map(str, tok.encode(sys.argv[2] if len(sys.argv) > 2 else sys.stdin.read()))))
