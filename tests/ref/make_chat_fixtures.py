#!/usr/bin/python3
"""make_chat_fixtures.py - chat models whose greedy reply is known: each answers
"Hi" and ends its turn.

    /usr/bin/python3 tests/ref/make_chat_fixtures.py --fixtures DIR [--hf TOKDIR]

Writes DIR/chat/turn-end/ (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json with ChatML, generation_config.json): a Llama with a
byte-level tokenizer of 259 tokens that ends its turn with <|im_end|>, a special
token that is neither its <|endoftext|> nor an end id in its config, so only the
chat template says it ends a turn.

With --hf (the fetched real tokenizers, scripts/fetch-hf-tokenizers.sh), also
DIR/chat/real/NAME/ and DIR/chat/real/NAME.gguf for each family with a real
tokenizer and its chat template (REAL below): the same reply, ended by the token
the template closes a reply with, as a Hugging Face directory (F16) and as the
GGUF file llama.cpp's converter would write (F16, the tokenizer as
make_gguf_tokenizers.py writes it); DIR/chat/real/cases.tsv lists
NAME<TAB>family<TAB>end token.

How the reply is made: the attention and MLP outputs are zero (o_proj,
down_proj and their biases), so the final residual is the token's own
embedding and the model is a bigram table. turn-end: the embeddings of "\\n",
"H" and "i" are made orthogonal, and the head's rows of "H", "i" and <|im_end|>
point along the normalised embedding of the token before them, so that after
"assistant\\n" the greedy choice is "H", then "i", then <|im_end|> with a margin
of LOGIT. The real ones: every ordinary token's embedding is one direction u
plus a little noise, the reply's tokens and the end token are orthogonal to u
and to each other, so that after any ordinary token (whatever the template's
generation prompt ends with) comes "Hi", then the end. The float64 reference
(decoder_ref.py) confirms each.
Fixed seed: two runs write identical bytes.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_ref  # noqa: E402
import gguf_write as gw  # noqa: E402
import make_arch_fixtures as arch  # noqa: E402
import make_gguf_tokenizers as gt  # noqa: E402
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


def turn_end_model(fixtures):
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
    d = os.path.join(fixtures, "chat", "turn-end")
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
    prompt = [vocab["<|im_start|>"]] + [vocab[b2u[c]] for c in b"user\nHello"] + [end, nl, vocab["<|im_start|>"]] + \
             [vocab[b2u[c]] for c in b"assistant\n"]
    check_reply(d, prompt, [H, i_, end])


# name, model_type, tokenizer directory, GGUF pre-tokenizer ("llama": SentencePiece, with
# "llama:noprefix" its add_space_prefix false, as the converter writes Gemma's),
# the template (None: tokenizer_config.json's), the token that ends a reply, config.json's eos
REAL = [("llama", "llama", "llama3", "llama-bpe", None, "<|eot_id|>", "<|end_of_text|>"),
        ("qwen2", "qwen2", "qwen2_5", "qwen2", None, "<|im_end|>", "<|endoftext|>"),
        ("qwen3", "qwen3", "qwen3", "qwen2", None, "<|im_end|>", "<|endoftext|>"),
        ("mistral", "mistral", "llama2", "llama", "mistral_v01.jinja", "</s>", "</s>"),
        ("neox", "gpt_neox", "qwen2_5", "qwen2", None, "<|im_end|>", "<|endoftext|>"),
        ("gemma3", "gemma3_text", "gemma3", "llama:noprefix", None, "<end_of_turn>", "<eos>")]
RC = 32  # hidden size: the embedding and head of a 150k vocabulary stay small


def token_ids(tok):
    ids = dict(tok["model"]["vocab"])
    ids.update({a["content"]: a["id"] for a in tok.get("added_tokens", [])})
    return ids


def real_weights(cfg, reply, end, seed):
    """random_weights with the attention and MLP outputs zero and a head that
    answers `reply` (ids) then `end` after any ordinary token (untied, but for
    Gemma)."""
    w = arch.random_weights(cfg, seed)
    rng = np.random.default_rng(seed + 1)
    C, V = cfg["hidden_size"], cfg["vocab_size"]
    for n in w:
        if n.endswith(".bias") or any(k in n for k in ("o_proj", "down_proj", "attention.dense.", "dense_4h_to_h")):
            w[n] = np.zeros_like(w[n])
    chain = list(reply) + [end]
    # zero-mean directions (a LayerNorm then scales without shifting): u, then the chain's
    basis = rng.standard_normal((C, len(chain) + 1))
    basis -= basis.mean(axis=0)
    q, _ = np.linalg.qr(basis)
    u, dirs = q[:, 0], q[:, 1:].T
    noise = rng.standard_normal((V, C)) * 0.1
    noise -= noise.mean(axis=1, keepdims=True)
    emb = np.sqrt(C) * u[None, :] + noise
    for t, d in zip(chain, dirs):
        emb[t] = np.sqrt(C) * d
    gemma = cfg["model_type"].startswith("gemma")
    if gemma:
        # llama.cpp's converter drops Gemma's lm_head (its head is the embedding): tied, so the
        # rows do both jobs, in units s of a unit u and d ⊥ u: an ordinary token s(u + noise),
        # "Hi" s(2u + d), the end 10 s d. After an ordinary token "Hi" scores 2 s sqrt(C) against
        # its own s sqrt(C); after "Hi" the end 10 s sqrt(C / 5) against "Hi"'s own s sqrt(5 C)
        assert len(reply) == 1
        s = 10 / np.sqrt(C)
        emb = s * (u[None, :] + noise * 0.2)
        emb[reply[0]] = s * (2 * u + dirs[0])
        emb[end] = s * 10 * dirs[0]
        w["model.embed_tokens.weight"] = emb.astype(np.float32)
        w.pop("lm_head.weight", None)
        w["model.norm.weight"] = np.zeros(C, np.float32)  # applied as 1 + w
        return w
    head = rng.standard_normal((V, C)) * 0.02
    # x^ = emb / rms(emb) (final norm weight 1, bias 0): about sqrt(C) u for an ordinary token
    head[chain[0]] = LOGIT * u / np.sqrt(C)
    for prev, nxt in zip(chain, chain[1:]):
        x = emb[prev] / np.sqrt(np.mean(emb[prev] ** 2))
        head[nxt] = LOGIT * x / np.dot(x, x)
    neox = cfg["model_type"] == "gpt_neox"
    w["gpt_neox.embed_in.weight" if neox else "model.embed_tokens.weight"] = emb.astype(np.float32)
    w["embed_out.weight" if neox else "lm_head.weight"] = head.astype(np.float32)
    w["gpt_neox.final_layer_norm.weight" if neox else "model.norm.weight"] = np.ones(C, np.float32)
    return w


def check_reply(d, prompt, chain):
    hp, params = decoder_ref.load_model(d)
    ids = list(prompt)
    for want in chain:
        z = decoder_ref.forward(hp, params, ids)[-1]
        top2 = np.sort(z)[-2:]
        if int(np.argmax(z)) != want or top2[1] - top2[0] < 5:
            sys.exit(f"make_chat_fixtures: {d}: the reference's next token is {int(np.argmax(z))}, not {want} "
                     f"(margin {top2[1] - top2[0]:.2f})")
        ids.append(want)


def real_model(out, name, mt, tokdir, pre, template, end_text, eos_text, seed):
    with open(os.path.join(tokdir, "tokenizer.json"), encoding="utf-8") as f:
        tok_text = f.read()
    with open(os.path.join(tokdir, "tokenizer_config.json"), encoding="utf-8") as f:
        tcfg = json.load(f)
    tok = json.loads(tok_text)
    ids = token_ids(tok)
    V = max(ids.values()) + 1
    pre, _, variant = pre.partition(":")
    spm = pre == "llama"
    reply = [ids["\u2581Hi" if spm and variant != "noprefix" else "Hi"]]
    end, eos = ids[end_text], ids[eos_text]
    if template:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates", template), encoding="utf-8") as f:
            tcfg["chat_template"] = f.read()
    build = {"llama": arch.llama_config, "mistral": arch.mistral_config, "qwen2": arch.qwen2_config,
             "qwen3": arch.qwen3_config, "gpt_neox": arch.neox_config, "gemma3_text": arch.gemma3_config}[mt]
    small = {"hidden_size": RC, "intermediate_size": 2 * RC, "num_attention_heads": 2, "num_hidden_layers": 1,
             "tie_word_embeddings": False, "bos_token_id": eos, "eos_token_id": eos, "torch_dtype": "float16"}
    if mt != "gpt_neox":
        small["num_key_value_heads"] = 1
    if mt in ("qwen3", "gemma3_text"):
        small["head_dim"] = 16
    if mt == "gemma3_text":
        small["query_pre_attn_scalar"] = 16
        small["tie_word_embeddings"] = True
    cfg = build(V, **small)
    w = real_weights(cfg, reply, end, seed)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    mk.write(os.path.join(d, "config.json"), json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tensors = [(n, "F16", a.shape, mk.encode_tensor(a, "F16")) for n, a in w.items()]
    mk.write(os.path.join(d, "model.safetensors"), mk.pack(*mk.layout(tensors)))
    mk.write(os.path.join(d, "tokenizer.json"), tok_text)
    mk.write(os.path.join(d, "tokenizer_config.json"), json.dumps(tcfg, indent=2, ensure_ascii=False) + "\n")
    mk.write(os.path.join(d, "generation_config.json"), json.dumps({"eos_token_id": eos}, indent=2) + "\n")
    prompt = [int(i) for i in np.random.default_rng(seed).integers(1000, 20000, size=5)]
    check_reply(d, prompt, reply + [end])
    # the GGUF file: the model as the converter writes it, the real tokenizer in place of the fixtures'
    g, _ = arch.convert(name, cfg, w, ["x"] * V, [], "F16")
    g.kv = [kv for kv in g.kv if not kv[0].startswith("tokenizer.")]
    if spm:
        gt.spm_kv(g, tok, tcfg, variant)
    else:
        gt.tokenizer_kv(g, tok, tcfg, pre, bool(tcfg.get("add_bos_token")))
    g.add("tokenizer.chat_template", gw.STRING, tcfg["chat_template"])
    mk.write(os.path.join(out, name + ".gguf"), g.to_bytes())
    return f"{name}\t{mt}\t{end_text}\n"


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--hf", help="the fetched Hugging Face tokenizers (a directory per model)")
    args = ap.parse_args(argv)
    if not args.hf:
        turn_end_model(args.fixtures)
        return
    out = os.path.join(args.fixtures, "chat", "real")
    os.makedirs(out, exist_ok=True)
    lines = [real_model(out, name, mt, os.path.join(args.hf, tokdir), pre, template, end, eos, 100 + i)
             for i, (name, mt, tokdir, pre, template, end, eos) in enumerate(REAL)]
    mk.write(os.path.join(out, "cases.tsv"), "".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
