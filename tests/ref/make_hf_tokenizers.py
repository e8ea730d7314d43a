#!/usr/bin/python3
"""make_hf_tokenizers.py - GPT-2's tokenizer (tokenizers/gpt2) written as Hugging Face
tokenizer.json files with pre-tokenizers and normalizers the real tokenizers the tests
fetch do not cover, so that transformers.js's tokenizers (tests/ref/hf_tokenize.js) can
judge gptscope on them too:
    OUT/gpt2_bytelevel/   ByteLevel with GPT-2's pattern, <|endoftext|> an added special
                          token (GPT-2's own tokenizer.json)
    OUT/gpt2_digits/      Digits (individual_digits) then ByteLevel: SmolLM's pre-tokenizer
    OUT/gpt2_bos/         Llama 3's kind of post-processor: <|endoftext|> before every text
    OUT/gpt2_nfc/         an NFC normalizer, and added tokens for runs of 2-4 spaces that are
                          not special and matched on normalized text: GPT-NeoX's kind
Each directory also gets an empty tokenizer_config.json.

    /usr/bin/python3 tests/ref/make_hf_tokenizers.py --gpt2 tokenizers/gpt2 --out DIR
"""
import argparse
import json
import os


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpt2", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(os.path.join(a.gpt2, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(a.gpt2, "vocab.bpe"), encoding="utf-8") as f:
        merges = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#version")]
    eot = {"id": 50256, "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
           "normalized": False, "special": True}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    spaces = [{"id": 50257 + i, "content": " " * (i + 2), "single_word": False, "lstrip": False, "rstrip": False,
               "normalized": True, "special": False} for i in range(3)]
    kinds = {
        "gpt2_bytelevel": (None, byte_level, [eot]),
        "gpt2_digits": (None, {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, byte_level]}, [eot]),
        "gpt2_nfc": ({"type": "NFC"}, byte_level, [eot] + spaces),
        "gpt2_bos": (None, byte_level, [eot]),
    }
    # Llama 3's kind of post-processor: a special token before every text
    bos = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [50256], "tokens": ["<|endoftext|>"]}}}]}
    for name, (norm, pre, added) in kinds.items():
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        doc = {"version": "1.0", "added_tokens": added, "normalizer": norm, "pre_tokenizer": pre,
               "post_processor": bos if name == "gpt2_bos" else None, "decoder": {"type": "ByteLevel", "add_prefix_space": False,
                                                  "trim_offsets": True, "use_regex": True},
               "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                         "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                         "merges": merges}}
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            f.write("{}\n")
    print(f"make_hf_tokenizers: {len(kinds)} tokenizer.json files in {a.out}")


if __name__ == "__main__":
    main()
