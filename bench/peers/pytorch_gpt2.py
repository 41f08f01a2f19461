#!/usr/bin/env python3
"""GPT-2 with random weights in Hugging Face's GPT2LMHeadModel beside strata's nn::Gpt
(bench/gpt2_forward.cpp) on the same weights and tokens:

    python3 bench/peers/pytorch_gpt2.py export DIR --layers 2 --heads 4 --embd 64 --vocab 1000 --block 64 \
        --batch 2 --tokens 32
    gpt2_forward --weights DIR/weights.safetensors --ids DIR/ids.safetensors --out DIR/strata.safetensors ...
    python3 bench/peers/pytorch_gpt2.py compare DIR

export writes the weights in nanoGPT's layout (Hugging Face's Conv1D weights transposed to
[out, in], no "transformer." prefix, the tied lm_head left out) and the token ids; compare runs
the model in f32 (TF32 off) eager, prints the largest absolute difference of the logits and their
relative L2 distance, and the eager forward's median time (CUDA-synchronised) for the same shape.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def build(cfg):
    torch.manual_seed(cfg["seed"])
    config = GPT2Config(vocab_size=cfg["vocab"], n_positions=cfg["block"], n_embd=cfg["embd"], n_layer=cfg["layers"],
                        n_head=cfg["heads"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        activation_function="gelu_new", layer_norm_epsilon=1e-5)
    model = GPT2LMHeadModel(config).eval()
    # Biases and layer norms away from their initial 0 and 1, so that every parameter counts.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name or name.startswith("transformer.ln_f"):
                p.add_(0.1 * torch.randn_like(p))
    return model


def export(args):
    os.makedirs(args.dir, exist_ok=True)
    cfg = dict(vocab=args.vocab, block=args.block, embd=args.embd, layers=args.layers, heads=args.heads,
               batch=args.batch, tokens=args.tokens, seed=args.seed)
    model = build(cfg)
    weights = {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" or name.endswith(".attn.bias") or name.endswith(".attn.masked_bias"):
            continue
        key = name.removeprefix("transformer.")
        weights[key] = (t.t() if key.endswith(CONV1D) else t).contiguous().float()
    save_file(weights, os.path.join(args.dir, "weights.safetensors"))
    # The model's own state dict as transformers keeps it (lm_head shares wte's storage, which
    # safetensors does not store twice).
    own = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(own, os.path.join(args.dir, "hf.safetensors"))
    g = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(0, args.vocab, (args.batch, args.tokens), generator=g, dtype=torch.int64)
    save_file({"ids": ids}, os.path.join(args.dir, "ids.safetensors"))
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        json.dump(cfg, f)


def compare(args):
    with open(os.path.join(args.dir, "config.json")) as f:
        cfg = json.load(f)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = build(cfg).to(dev)
    ids = load_file(os.path.join(args.dir, "ids.safetensors"))["ids"].to(dev)
    with torch.no_grad():
        ref = model(ids).logits.double().cpu()
        ms = []
        for _ in range(args.repeat):
            if dev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(ids)
            if dev == "cuda":
                torch.cuda.synchronize()
            ms.append(1e3 * (time.perf_counter() - t0))
    got = load_file(os.path.join(args.dir, "strata.safetensors"))["logits"].double()
    if got.shape != ref.shape:
        sys.exit(f"shapes differ: strata {tuple(got.shape)}, PyTorch {tuple(ref.shape)}")
    diff = (got - ref).abs().max().item()
    rel = ((got - ref).norm() / ref.norm()).item()
    print(f"PyTorch {torch.__version__} {dev}: eager forward {statistics.median(ms):.3f} ms (median of {args.repeat})")
    print(f"logits {tuple(ref.shape)}: max |strata - PyTorch| = {diff:.3e}, relative L2 {rel:.3e}")
    failed = [] if rel < args.tolerance else [f"relative L2 {rel:.3e} is above {args.tolerance:g}"]
    results = load_file(os.path.join(args.dir, "strata.safetensors"))
    if "generated" in results:
        mine = results["generated"]
        prompt = ids[:1]
        n_new = mine.shape[1] - prompt.shape[1]
        with torch.no_grad():
            theirs = model.generate(prompt, max_new_tokens=n_new, do_sample=False, pad_token_id=0).cpu()
            if dev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.generate(prompt, max_new_tokens=n_new, do_sample=False, pad_token_id=0)
            if dev == "cuda":
                torch.cuda.synchronize()
            print(f"PyTorch {dev}: transformers' greedy generate, eager: "
                  f"{1e3 * (time.perf_counter() - t0) / n_new:.3f} ms per token")
        same = torch.equal(mine, theirs)
        print(f"greedy generation of {mine.shape[1] - prompt.shape[1]} tokens: "
              f"{'the same tokens' if same else 'different tokens'} as transformers' generate")
        if not same:
            failed.append(f"strata {mine.tolist()} vs transformers {theirs.tolist()}")
    if failed:
        sys.exit("; ".join(failed))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("dir")
    for name, default in (("layers", 2), ("heads", 4), ("embd", 64), ("vocab", 1000), ("block", 64), ("batch", 2),
                          ("tokens", 32), ("seed", 0)):
        e.add_argument("--" + name, type=int, default=default)
    c = sub.add_parser("compare")
    c.add_argument("dir")
    c.add_argument("--repeat", type=int, default=20)
    c.add_argument("--tolerance", type=float, default=1e-5)
    args = ap.parse_args()
    export(args) if args.cmd == "export" else compare(args)


if __name__ == "__main__":
    main()
