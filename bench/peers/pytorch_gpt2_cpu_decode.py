#!/usr/bin/env python3
"""Greedy decoding of GPT-2 at batch 1 on the CPU in plain PyTorch (bench/peers/nanogpt_torch.py,
so Debian's python3-torch suffices), beside strata's bench/gpt2_forward --decode on the same
weights and prompt:

    python3 bench/peers/pytorch_gpt2_cpu_decode.py export DIR [--layers 12 --heads 12 --embd 768 ...]
    gpt2_forward --weights DIR/weights.safetensors --ids DIR/ids.safetensors --out DIR/strata.safetensors \\
        --decode 32 --rounds 3 --backend onednn ...
    python3 bench/peers/pytorch_gpt2_cpu_decode.py time DIR --new 32 --rounds 3

export writes random GPT-2 weights (GPT-2's initialisation, seeded) in strata's names and a prompt
of --tokens ids; time decodes --new tokens after the prompt with a key/value cache (eager, the
prompt's step included, as strata's study times it) --rounds times and prints the median and range
per token, and the generated tokens' ids so that they can be compared with strata's.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_torch import NanoGpt, greedy, save_safetensors  # noqa: E402


def model_of(cfg):
    return NanoGpt(cfg["vocab"], cfg["block"], cfg["layers"], cfg["heads"], cfg["embd"]).init_gpt2(cfg["seed"]).eval()


def export(args):
    os.makedirs(args.dir, exist_ok=True)
    cfg = dict(vocab=args.vocab, block=args.block, embd=args.embd, layers=args.layers, heads=args.heads,
               tokens=args.tokens, seed=args.seed)
    save_safetensors(model_of(cfg).weights(), os.path.join(args.dir, "weights.safetensors"))
    g = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(0, args.vocab, (1, args.tokens), generator=g, dtype=torch.int64)
    save_safetensors({"ids": ids}, os.path.join(args.dir, "ids.safetensors"))
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        json.dump(cfg, f)


def time_decode(args):
    with open(os.path.join(args.dir, "config.json")) as f:
        cfg = json.load(f)
    model = model_of(cfg)
    g = torch.Generator().manual_seed(cfg["seed"] + 1)
    prompt = torch.randint(0, cfg["vocab"], (1, cfg["tokens"]), generator=g, dtype=torch.int64)
    tokens = greedy(model, prompt, args.new)  # warm-up
    ms = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        got = greedy(model, prompt, args.new)
        ms.append(1e3 * (time.perf_counter() - t0) / args.new)
        assert torch.equal(got, tokens)
    ms.sort()
    med = statistics.median(ms)
    print(f"PyTorch {torch.__version__} cpu ({torch.get_num_threads()} threads) decode, eager with a cache: "
          f"{args.new} tokens after {cfg['tokens']}, {med:.2f} ms per token ({1e3 / med:.1f} tokens/s), "
          f"range {ms[0]:.2f}-{ms[-1]:.2f} over {args.rounds} rounds")
    print("PyTorch tokens:", tokens[0, cfg["tokens"]:].tolist())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("dir")
    for name, default in (("layers", 12), ("heads", 12), ("embd", 768), ("vocab", 50257), ("block", 1024),
                          ("tokens", 128), ("seed", 3)):
        e.add_argument(f"--{name}", type=int, default=default)
    t = sub.add_parser("time")
    t.add_argument("dir")
    t.add_argument("--new", type=int, default=32)
    t.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    {"export": export, "time": time_decode}[args.cmd](args)


if __name__ == "__main__":
    main()
