#!/usr/bin/env python3
"""References for the command-line tests: text prompts tokenized by bpe_ref.py and
run through gpt2_ref.py, so `gptscope topk/attention/generate/eval` can be checked
end to end against an implementation that shares no code with the C engine.

usage: make_cli_fixtures.py --fixtures DIR   (after make_model_fixtures.py)

Writes DIR/cli/<model>/:
  prompt.txt          the prompt text (UTF-8, no trailing newline)
  prompt_ids.txt      its token ids
  last_logits.f32     float32 (V,): logits after the prompt
  attn.f32            float32 (L, H, T, T): attention over the prompt
  greedy.txt          20 greedy ids after the prompt (top-2 margin >= 2e-3)
  eval.txt            a text longer than the context window
  eval.json           {"tokens", "scored", "bytes", "nats_per_token", "bits_per_byte"}
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe_ref  # noqa: E402
import gpt2_ref  # noqa: E402

PROMPTS = [
    "The quick brown fox jumps over the lazy dog. It's 42 o'clock!",
    "Once upon a time, there was a small model that could count: 1, 2, 3.",
    "We'll see what the heads attend to; don't you think so?",
]

EVAL_TEXT = (
    "To be, or not to be, that is the question:\n"
    "Whether 'tis nobler in the mind to suffer\n"
    "The slings and arrows of outrageous fortune,\n"
    "Or to take arms against a sea of troubles\n"
    "And by opposing end them. To die: to sleep;\n"
    "No more; and by a sleep to say we end\n"
    "The heart-ache and the thousand natural shocks\n"
    "That flesh is heir to, 'tis a consummation\n"
    "Devoutly to be wish'd. To die, to sleep;\n"
    "To sleep: perchance to dream: ay, there's the rub;\n"
    "For in that sleep of death what dreams may come\n"
    "When we have shuffled off this mortal coil,\n"
    "Must give us pause: there's the respect\n"
    "That makes calamity of so long life.\n"
)


def log_softmax_at(logits, target):
    m = logits.max()
    return float(math.log(np.exp(logits - m).sum()) + m - logits[target])


def eval_reference(hp, params, tok, text, n_ctx=None):
    """Same definition as `gptscope eval`: every token but the first is predicted once;
    windows of n_ctx (default n_positions) advance by n_ctx // 2; bits per byte divide
    by the bytes of the predicted tokens."""
    ids = tok.encode(text)
    n, n_ctx = len(ids), n_ctx or hp["n_positions"]
    stride = max(n_ctx // 2, 1)
    nats, scored, score_from, begin = 0.0, 0, 1, 0
    while True:
        end = min(begin + n_ctx, n)
        logits, _, _ = gpt2_ref.forward(hp, params, ids[begin:end])
        for target in range(max(score_from, begin + 1), end):
            nats += log_softmax_at(logits[target - begin - 1], ids[target])
            scored += 1
        score_from = end
        if end == n:
            break
        begin += stride
    n_bytes = len(text.encode("utf-8")) - len(tok.decode(ids[:1]))
    return {"tokens": n, "scored": scored, "bytes": n_bytes,
            "nats_per_token": nats / scored, "bits_per_byte": nats / math.log(2) / n_bytes}


def write_model(fixtures, name):
    mdir = os.path.join(fixtures, "models", name)
    out = os.path.join(fixtures, "cli", name)
    os.makedirs(out, exist_ok=True)
    hp, params = gpt2_ref.load_model(mdir)
    tok = bpe_ref.Tokenizer.load(mdir)
    for prompt in PROMPTS:
        ids = tok.encode(prompt)
        new, margins = gpt2_ref.greedy(hp, params, ids, 20)
        if min(margins) >= 2e-3 and tok.eot not in new:
            break
    else:
        raise SystemExit(f"{name}: no prompt gives a safe greedy margin")
    logits, attn, _ = gpt2_ref.forward(hp, params, ids)
    with open(os.path.join(out, "prompt.txt"), "w", encoding="utf-8") as f:
        f.write(prompt)
    with open(os.path.join(out, "prompt_ids.txt"), "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")
    logits[-1].astype("<f4").tofile(os.path.join(out, "last_logits.f32"))
    attn.astype("<f4").tofile(os.path.join(out, "attn.f32"))
    with open(os.path.join(out, "greedy.txt"), "w") as f:
        f.write(" ".join(map(str, new)) + "\n")
    with open(os.path.join(out, "eval.txt"), "w", encoding="utf-8") as f:
        f.write(EVAL_TEXT)
    ev = eval_reference(hp, params, tok, EVAL_TEXT)
    assert ev["tokens"] > hp["n_positions"], "eval text must span several windows"
    with open(os.path.join(out, "eval.json"), "w") as f:
        json.dump(ev, f)
    # `eval --context 7`: windows shorter than the model's, an odd length (stride 3)
    with open(os.path.join(out, "eval_context7.json"), "w") as f:
        json.dump(eval_reference(hp, params, tok, EVAL_TEXT, 7), f)
    print(f"cli/{name}: prompt {len(ids)} tokens, greedy margin {min(margins):.4f}, "
          f"eval {ev['tokens']} tokens {ev['nats_per_token']:.4f} nats/token")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixtures", required=True)
    args = ap.parse_args()
    for name in ("tiny-f32", "tiny-bf16"):
        write_model(args.fixtures, name)


if __name__ == "__main__":
    main()
