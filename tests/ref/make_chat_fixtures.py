#!/usr/bin/python3
"""make_chat_fixtures.py - a Llama-family chat model whose greedy reply is known:
it answers "Hi" and ends its turn with ChatML's <|im_end|>, a special token that
is neither the tokenizer's <|endoftext|> nor an end id in its config, so only
the chat template says it ends a turn.

    /usr/bin/python3 tests/ref/make_chat_fixtures.py --fixtures DIR

Writes DIR/chat/turn-end/: config.json, model.safetensors, tokenizer.json,
tokenizer_config.json (ChatML template), generation_config.json.

How the reply is made: o_proj and down_proj are zero, so the final residual
is the token's own embedding and the model is a bigram table. The embeddings
of "\\n", "H" and "i" are made orthogonal, and the head's rows of "H", "i" and
<|im_end|> point along the normalised embedding of the token before them, so
that after "assistant\\n" the greedy choice is "H", then "i", then <|im_end|>
with a margin of LOGIT. The float64 reference (decoder_ref.py) confirms it.
Fixed seed: two runs write identical bytes.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_ref  # noqa: E402
import make_model_fixtures as mk  # noqa: E402

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
C, F, LOGIT = 64, 64, 20.0


def tokenizer_json(vocab):
    """Byte-level BPE without merges: one token per byte, then the specials."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    added = [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for s in SPECIALS]
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": byte_level, "post_processor": dict(byte_level, trim_offsets=False), "decoder": byte_level,
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                     "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab, "merges": []}}
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True)
    args = ap.parse_args(argv)
    b2u = mk.bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    for i, s in enumerate(SPECIALS):
        vocab[s] = 256 + i
    V = len(vocab)
    nl, H, i_, end = vocab[b2u[ord("\n")]], vocab["H"], vocab["i"], vocab["<|im_end|>"]
    eot = vocab["<|endoftext|>"]
    cfg = {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": eot,
           "eos_token_id": eot, "hidden_act": "silu", "hidden_size": C, "intermediate_size": F,
           "max_position_embeddings": 256, "mlp_bias": False, "model_type": "llama", "num_attention_heads": 4,
           "num_hidden_layers": 1, "num_key_value_heads": 2, "rms_norm_eps": 1e-05, "rope_scaling": None,
           "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float32", "vocab_size": V}
    rng = np.random.default_rng(7)
    nrm = lambda *shape: rng.normal(0, 0.3, shape).astype(np.float32)  # noqa: E731
    emb = nrm(V, C)
    q, _ = np.linalg.qr(emb[[nl, H, i_]].T.astype(np.float64))  # orthogonal, the rows' scale kept
    for k, t in enumerate((nl, H, i_)):
        emb[t] = (q[:, k] * np.linalg.norm(emb[t])).astype(np.float32)
    head = nrm(V, C) * 0.1
    for prev, nxt in ((nl, H), (H, i_), (i_, end)):
        x = emb[prev] / np.sqrt(np.mean(emb[prev].astype(np.float64) ** 2) + 1e-5)  # the final RMSNorm's output
        head[nxt] = (LOGIT * x / np.dot(x, x)).astype(np.float32)
    kv = C // 4 * 2
    w = {"model.embed_tokens.weight": emb,
         "model.layers.0.input_layernorm.weight": np.ones(C, np.float32),
         "model.layers.0.self_attn.q_proj.weight": nrm(C, C),
         "model.layers.0.self_attn.k_proj.weight": nrm(kv, C),
         "model.layers.0.self_attn.v_proj.weight": nrm(kv, C),
         "model.layers.0.self_attn.o_proj.weight": np.zeros((C, C), np.float32),
         "model.layers.0.post_attention_layernorm.weight": np.ones(C, np.float32),
         "model.layers.0.mlp.gate_proj.weight": nrm(F, C),
         "model.layers.0.mlp.up_proj.weight": nrm(F, C),
         "model.layers.0.mlp.down_proj.weight": np.zeros((C, F), np.float32),
         "model.norm.weight": np.ones(C, np.float32),
         "lm_head.weight": head}
    d = os.path.join(args.fixtures, "chat", "turn-end")
    os.makedirs(d, exist_ok=True)
    mk.write(os.path.join(d, "config.json"), json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tensors = [(n, "F32", a.shape, mk.encode_tensor(a, "F32")) for n, a in w.items()]
    mk.write(os.path.join(d, "model.safetensors"), mk.pack(*mk.layout(tensors)))
    mk.write(os.path.join(d, "tokenizer.json"), tokenizer_json(vocab))
    tcfg = {"chat_template": CHATML, "bos_token": None, "eos_token": "<|endoftext|>",
            "tokenizer_class": "PreTrainedTokenizerFast"}
    mk.write(os.path.join(d, "tokenizer_config.json"), json.dumps(tcfg, indent=2) + "\n")
    mk.write(os.path.join(d, "generation_config.json"), json.dumps({"eos_token_id": eot}, indent=2) + "\n")
    # the reference's greedy reply after a ChatML prompt must be "Hi" then <|im_end|>
    hp, params = decoder_ref.load_model(d)
    prompt = [vocab["<|im_start|>"]] + [vocab[b2u[c]] for c in b"user\nHello"] + [end, nl, vocab["<|im_start|>"]] + \
             [vocab[b2u[c]] for c in b"assistant\n"]
    ids = list(prompt)
    for want in (H, i_, end):
        z = decoder_ref.forward(hp, params, ids)[-1]
        top2 = np.sort(z)[-2:]
        if int(np.argmax(z)) != want or top2[1] - top2[0] < 5:
            sys.exit(f"make_chat_fixtures: the reference's next token is {int(np.argmax(z))}, not {want} "
                     f"(margin {top2[1] - top2[0]:.2f})")
        ids.append(want)


if __name__ == "__main__":
    main(sys.argv[1:])
