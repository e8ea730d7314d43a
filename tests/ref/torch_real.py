#!/usr/bin/python3
"""torch_real.py - checkpoints written by PyTorch itself (torch.save), and the
logits PyTorch computes for them: the check that gptscope reads what real
PyTorch writes, not only what tests/ref/torch_writer.py imitates.

    /usr/bin/python3 tests/ref/torch_real.py --fixtures DIR

Needs Debian's python3-torch; without it, prints why and writes nothing (the
C test then skips). Writes DIR/torch_real/:
    cases.tsv                 name<TAB>model path<TAB>ids file<TAB>logits file<TAB>V
    nanogpt-char/out/ckpt.pt  nanoGPT's train.py checkpoint of a character-level
                              model (bias=False, its default), with
                              nanogpt-char/data/shakespeare_char/meta.pkl as
                              nanoGPT's prepare.py writes it
    nanogpt-bpe/ckpt.pt       GPT-2's BPE, bias=True, the vocabulary padded to
                              50304, names prefixed "_orig_mod." (torch.compile),
                              no tokenizer beside it (nanoGPT's default)
    llmc-bpe/gpt2_124M.bin    llm.c's F32 format, tanh GELU, GPT-2's vocabulary
                              padded to 50304, no gpt2_tokenizer.bin beside it
    hf-bin/pytorch_model.bin  a Hugging Face GPT2LMHeadModel state dict (Conv1D
                              weights (in, out), tanh GELU, the attention mask
                              buffers), config.json, vocab.json, merges.txt
    NAME.ids, NAME.f32        token ids and PyTorch's (T, V) float32 logits

The model below is GPT-2 as nanoGPT's model.py defines it (written here from
that definition): pre-LayerNorm blocks, causal attention, a 4x MLP with GELU
(exact erf for nanoGPT, tanh for Hugging Face's gelu_new), the head tied to the
token embedding. Seeds are fixed; the weights are random.
"""

import argparse
import json
import math
import os
import pickle
import shutil
import sys

try:
    import numpy
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("torch_real.py: python3-torch is not installed: no real-PyTorch fixtures (the test skips)")
    sys.exit(0)


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (nanoGPT's: PyTorch 1.13's has none)."""

    def __init__(self, n, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class Block(nn.Module):
    def __init__(self, C, H, P, bias, gelu):
        super().__init__()
        self.H = H
        self.ln_1 = LayerNorm(C, bias)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(C, 3 * C, bias=bias)
        self.attn.c_proj = nn.Linear(C, C, bias=bias)
        self.attn.register_buffer("bias", torch.tril(torch.ones(P, P)).view(1, 1, P, P))
        self.ln_2 = LayerNorm(C, bias)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(C, 4 * C, bias=bias)
        self.mlp.c_proj = nn.Linear(4 * C, C, bias=bias)
        self.gelu = nn.GELU(approximate=gelu)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.H)
        att = att.masked_fill(self.attn.bias[:, :, :T, :T] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn.c_proj(y)
        return x + self.mlp.c_proj(self.gelu(self.mlp.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, L, H, C, P, V, bias, gelu="none"):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(V, C)
        self.transformer.wpe = nn.Embedding(P, C)
        self.transformer.h = nn.ModuleList([Block(C, H, P, bias, gelu) for _ in range(L)])
        self.transformer.ln_f = LayerNorm(C, bias)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, one storage
        for name, p in self.named_parameters():  # random, and biases and gains too
            with torch.no_grad():
                p.copy_(torch.randn_like(p) * (0.3 if p.dim() == 1 else 0.08) + (1.0 if "ln" in name and "weight" in name else 0.0))

    def forward(self, ids):
        t = self.transformer
        x = t.wte(ids) + t.wpe(torch.arange(ids.shape[1]))
        for b in t.h:
            x = b(x)
        return self.lm_head(t.ln_f(x))


def logits_of(model, ids, V):
    with torch.no_grad():
        return model(torch.tensor([ids]))[0, :, :V].contiguous().numpy().astype("<f4")


def checkpoint(model, args, dataset):
    """What nanoGPT's train.py saves, after one real AdamW step."""
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95))
    model.zero_grad()
    model(torch.tensor([[1, 2, 3]])).sum().backward()
    with torch.no_grad():
        saved = {k: v.clone() for k, v in model.state_dict().items()}
    opt.step()
    model.load_state_dict(saved)  # the weights the logits are computed on
    config = {"out_dir": "out", "dataset": dataset, "init_from": "scratch", "batch_size": 12, "compile": True}
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "model_args": args, "iter_num": 5000,
            "best_val_loss": torch.tensor(1.4697), "config": config}


def nanogpt_char(out):
    torch.manual_seed(1)
    chars = sorted(set("First Citizen:\nBefore we proceed any further, hear me speak.\nAll: Speak, speak!\n3&$-?'"))
    V = len(chars)
    args = dict(n_layer=2, n_head=2, n_embd=16, block_size=32, bias=False, vocab_size=V, dropout=0.0)
    m = GPT(2, 2, 16, 32, V, bias=False)
    d = os.path.join(out, "nanogpt-char")
    os.makedirs(os.path.join(d, "out"), exist_ok=True)
    os.makedirs(os.path.join(d, "data", "shakespeare_char"), exist_ok=True)
    torch.save(checkpoint(m, args, "shakespeare_char"), os.path.join(d, "out", "ckpt.pt"))
    meta = {"vocab_size": V, "itos": {i: c for i, c in enumerate(chars)}, "stoi": {c: i for i, c in enumerate(chars)}}
    with open(os.path.join(d, "data", "shakespeare_char", "meta.pkl"), "wb") as f:
        pickle.dump(meta, f)
    text = "Before we speak, All: hear me!"
    return "nanogpt-char", os.path.join(d, "out", "ckpt.pt"), [chars.index(c) for c in text], logits_of(m, [chars.index(c) for c in text], V), V


def nanogpt_bpe(out):
    torch.manual_seed(2)
    args = dict(n_layer=2, n_head=4, n_embd=32, block_size=64, bias=True, vocab_size=50304, dropout=0.0)
    m = GPT(2, 4, 32, 64, 50304, bias=True)
    d = os.path.join(out, "nanogpt-bpe")
    os.makedirs(d, exist_ok=True)
    ck = checkpoint(m, args, "openwebtext")
    ck["model"] = {"_orig_mod." + k: v for k, v in ck["model"].items()}  # a torch.compile'd model's names
    torch.save(ck, os.path.join(d, "ckpt.pt"))  # no tokenizer beside it: nanoGPT then uses GPT-2's BPE
    return "nanogpt-bpe", os.path.join(d, "ckpt.pt"), BPE_IDS, logits_of(m, BPE_IDS, 50257), 50257


BPE_IDS = [15496, 11, 995, 0, 314, 716, 257, 1332, 13, 50256, 383, 2068]  # GPT-2 ids; the last two follow <|endoftext|>
LLMC_ORDER = ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
              "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
              "mlp.c_proj.bias")


def llmc_bpe(out):
    """The same kind of model as llm.c's train_gpt2.py writes gpt2_124M.bin
    (version 3, F32): a 256-int header (magic, version, maxT, V, L, H, C,
    padded V), then wte (Vp, C), wpe, each layer parameter stacked over the
    layers (Linear weights (out, in)), ln_f; no gpt2_tokenizer.bin beside it."""
    torch.manual_seed(4)
    L, H, C, P, V, Vp = 2, 4, 32, 64, 50257, 50304
    m = GPT(L, H, C, P, Vp, bias=True, gelu="tanh")  # llm.c's GELU is the tanh form
    sd = {k: v.detach().numpy().astype("<f4") for k, v in m.state_dict().items()}
    header = [20240326, 3, P, V, L, H, C, Vp] + [0] * 248
    parts = [sd["transformer.wte.weight"], sd["transformer.wpe.weight"]]
    parts += [numpy.stack([sd[f"transformer.h.{l}.{n}"] for l in range(L)]) for n in LLMC_ORDER]
    parts += [sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]]
    d = os.path.join(out, "llmc-bpe")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "gpt2_124M.bin"), "wb") as f:
        f.write(numpy.array(header, "<i4").tobytes() + b"".join(numpy.ascontiguousarray(p).tobytes() for p in parts))
    return "llmc-bpe", os.path.join(d, "gpt2_124M.bin"), BPE_IDS, logits_of(m, BPE_IDS, V), V


def hf_bin(out, fixtures):
    torch.manual_seed(3)
    src = os.path.join(fixtures, "models", "tiny-f32")
    with open(os.path.join(src, "config.json")) as f:
        V = json.load(f)["vocab_size"]
    m = GPT(2, 2, 24, 16, V, bias=True, gelu="tanh")
    d = os.path.join(out, "hf-bin")
    os.makedirs(d, exist_ok=True)
    sd = {}
    for k, v in m.state_dict().items():  # Conv1D weights are (in, out); HF keeps masked_bias too
        conv = k.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight"))
        sd[k] = v.t().contiguous() if conv else v
        if k.endswith("attn.bias"):
            sd[k.replace("attn.bias", "attn.masked_bias")] = torch.tensor(-1e4)
    torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    cfg = {"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 24, "n_positions": 16, "vocab_size": V,
           "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(src, name), os.path.join(d, name))
    ids = [i % V for i in (5, 17, 200, 3, 99, 41, 7, 250, 1, 64)]
    return "hf-bin", d, ids, logits_of(m, ids, V), V


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", required=True)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = os.path.join(args.fixtures, "torch_real")
    os.makedirs(out, exist_ok=True)
    lines = []
    for name, path, ids, logits, V in (nanogpt_char(out), nanogpt_bpe(out), llmc_bpe(out), hf_bin(out, args.fixtures)):
        with open(os.path.join(out, name + ".ids"), "w") as f:
            f.write(" ".join(map(str, ids)) + "\n")
        logits.tofile(os.path.join(out, name + ".f32"))
        lines.append(f"{name}\t{path}\t{name}.ids\t{name}.f32\t{V}")
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"torch_real.py: {len(lines)} checkpoints written by torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
