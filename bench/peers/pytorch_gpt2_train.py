#!/usr/bin/env python3
"""GPT-2 training in PyTorch beside strata's (bench/gpt2_train.cpp), same machine, same call.

    python3 bench/peers/pytorch_gpt2_train.py curve DIR --steps 200 [--layers 2 --heads 4 ...]
    gpt2_train curve --weights DIR/weights.safetensors --data DIR/batches.safetensors --out DIR/strata.json ...
    python3 bench/peers/pytorch_gpt2_train.py compare DIR

curve builds GPT-2 in plain PyTorch (bench/peers/nanogpt_torch.py: nanoGPT's structure and
strata's names, so it runs with Debian's python3-torch too) with random weights, no dropout,
writes its initial weights and --steps batches of token windows drawn from a
seeded Markov chain (each token has a few likely successors, so there is something to learn),
then trains it with torch.optim.AdamW (constant lr, decoupled weight decay on every parameter,
no clipping) one step per batch in f32 (TF32 off) on the GPU if there is one, else the CPU, and
writes every step's loss. compare reads
strata's losses (every dispatch mode it ran) and fails unless each step's loss is within
--tolerance (relative, 1 % by default) of PyTorch's.

    python3 bench/peers/pytorch_gpt2_train.py speed --batch 16 --seq 1024 [--forms eager,compile]

speed trains GPT-2 small (124M) on random tokens in bf16 autocast with SDPA attention and fused
AdamW, eager and torch.compile, over --rounds rounds alternating the order, and prints one JSON
line per form: median ms per step, tokens/s, TFLOP/s by nanoGPT's count, peak memory.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_torch import NanoGpt, save_safetensors  # noqa: E402


def markov_batches(vocab, steps, batch, seq, seed):
    """[steps, batch, seq + 1] token ids: each token followed by one of 4 successors of its own."""
    g = torch.Generator().manual_seed(seed)
    succ = torch.randint(0, vocab, (vocab, 4), generator=g)
    out = torch.empty(steps * batch, seq + 1, dtype=torch.int64)
    out[:, 0] = torch.randint(0, vocab, (steps * batch,), generator=g)
    for t in range(seq):
        pick = torch.randint(0, 4, (steps * batch,), generator=g)
        out[:, t + 1] = succ[out[:, t], pick]
    return out.view(steps, batch, seq + 1)


def curve(args):
    os.makedirs(args.dir, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device:
        dev = args.device
    cfg = dict(vocab=args.vocab, block=args.block, embd=args.embd, layers=args.layers, heads=args.heads, seed=args.seed)
    model = NanoGpt(args.vocab, args.block, args.layers, args.heads, args.embd).init_gpt2(args.seed).to(dev).train()
    save_safetensors(model.weights(), os.path.join(args.dir, "weights.safetensors"))
    data = markov_batches(args.vocab, args.steps, args.batch, args.seq, args.seed + 1)
    save_safetensors({"tokens": data}, os.path.join(args.dir, "batches.safetensors"))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=args.weight_decay, foreach=False)
    losses = []
    for s in range(args.steps):
        b = data[s].to(dev)
        logits = model(b[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), b[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    cfg.update(steps=args.steps, batch=args.batch, seq=args.seq, lr=args.lr, weight_decay=args.weight_decay,
               torch=torch.__version__, device=dev, losses=losses)
    with open(os.path.join(args.dir, "pytorch.json"), "w") as f:
        json.dump(cfg, f)
    print(f"PyTorch {torch.__version__} {dev}: loss {losses[0]:.6f} -> {losses[-1]:.6f} over {args.steps} steps")


def compare(args):
    with open(os.path.join(args.dir, "pytorch.json")) as f:
        theirs = json.load(f)["losses"]
    with open(os.path.join(args.dir, "strata.json")) as f:
        mine = json.load(f)["modes"]
    failed = []
    for mode, losses in mine.items():
        if len(losses) != len(theirs):
            failed.append(f"{mode}: {len(losses)} steps, PyTorch {len(theirs)}")
            continue
        rel = [abs(a - b) / abs(b) for a, b in zip(losses, theirs)]
        worst = max(range(len(rel)), key=rel.__getitem__)
        print(f"strata {mode} vs PyTorch over {len(rel)} steps: largest relative difference {rel[worst]:.2e} "
              f"at step {worst} ({losses[worst]:.6f} vs {theirs[worst]:.6f}); final {losses[-1]:.6f} vs {theirs[-1]:.6f}")
        if rel[worst] > args.tolerance:
            failed.append(f"{mode}: step {worst} differs by {rel[worst]:.2e} > {args.tolerance:g}")
    if failed:
        sys.exit("; ".join(failed))


def speed(args):
    from transformers import GPT2Config, GPT2LMHeadModel
    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    config = GPT2Config(vocab_size=args.vocab, n_positions=1024, n_embd=args.embd, n_layer=args.layers,
                        n_head=args.heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        activation_function="gelu_new", attn_implementation="sdpa")
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randint(0, args.vocab, (args.batch, args.seq), device=dev, generator=g)
    y = torch.randint(0, args.vocab, (args.batch, args.seq), device=dev, generator=g)
    C, L = args.embd, args.layers
    flops_per_token = 6 * (L * 12 * C * C + args.vocab * C) + 6 * L * C * args.seq
    runs = []
    for form in args.forms.split(","):
        # Each form's peak counts what it allocates itself, not the forms before it.
        held_before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        torch.manual_seed(0)
        model = GPT2LMHeadModel(config).to(dev).train()
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, fused=True)

        def step(model=model, opt=opt):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x).logits
                loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss

        fn = torch.compile(step) if form == "compile" else step
        for _ in range(args.warmup):
            fn()
        torch.cuda.synchronize()
        runs.append(dict(form=form, fn=fn, ms=[], peak=torch.cuda.max_memory_allocated() - held_before))
    for r in range(args.rounds):
        for run in (runs if r % 2 == 0 else runs[::-1]):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                loss = run["fn"]()
            torch.cuda.synchronize()
            run["ms"].append(1e3 * (time.perf_counter() - t0) / args.steps)
            run["loss"] = loss.item()
    for run in runs:
        med = statistics.median(run["ms"])
        tok = args.batch * args.seq * 1e3 / med
        print(json.dumps(dict(framework=f"PyTorch {torch.__version__}", mode=run["form"], precision="bf16 autocast",
                              batch=args.batch, seq=args.seq, ms_per_step=med, ms_range=[min(run["ms"]), max(run["ms"])],
                              tokens_per_s=tok, tflops=tok * flops_per_token / 1e12, peak_mib=run["peak"] / 2**20,
                              last_loss=run["loss"], rounds=args.rounds, steps_per_round=args.steps)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("curve")
    c.add_argument("dir")
    for name, default in (("layers", 2), ("heads", 4), ("embd", 128), ("vocab", 512), ("block", 64), ("steps", 200),
                          ("batch", 8), ("seq", 64), ("seed", 7)):
        c.add_argument(f"--{name}", type=int, default=default)
    c.add_argument("--lr", type=float, default=1e-3)
    c.add_argument("--weight-decay", type=float, default=0.1)
    c.add_argument("--device", default="", help="cpu or cuda (default: cuda if there is one)")
    k = sub.add_parser("compare")
    k.add_argument("dir")
    k.add_argument("--tolerance", type=float, default=0.01)
    s = sub.add_parser("speed")
    for name, default in (("layers", 12), ("heads", 12), ("embd", 768), ("vocab", 50257), ("batch", 16), ("seq", 1024),
                          ("steps", 10), ("rounds", 3), ("warmup", 3)):
        s.add_argument(f"--{name}", type=int, default=default)
    s.add_argument("--forms", default="eager,compile")
    s.add_argument("--lr", type=float, default=6e-4, help="AdamW's learning rate (gpt2_train speed's --lr)")
    args = ap.parse_args()
    {"curve": curve, "compare": compare, "speed": speed}[args.cmd](args)


if __name__ == "__main__":
    main()
