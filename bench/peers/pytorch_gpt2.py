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
relative L2 distance, both sides' relative L2 distance to the same model computed in float64
(strata's must be within 1e-6), and the eager forward's median time (CUDA-synchronised).

    python3 bench/peers/pytorch_gpt2.py decode DIR --new 256 --rounds 3 [--precision bf16] [--json FILE]

decode times greedy decoding of --new tokens after the first row of DIR's ids, per token (the
prompt's step included), in PyTorch's three forms: transformers' generate (eager, its dynamic
cache), a plain loop over a nanoGPT-style forward with a static key/value cache (eager), and the
same loop with the one-token step compiled by torch.compile(mode="reduce-overhead") (CUDA graphs;
the prompt's step stays eager). The order alternates over rounds; the medians and ranges are
printed, and whether each form's tokens equal generate's; --json FILE also writes every round's
figures (bench/peers/decode_record.py), for the study's page.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_record  # noqa: E402

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


def nanogpt_weights(model):
    """The model's parameters in nanoGPT's layout (strata's names): Conv1D weights transposed to
    [out, in], no "transformer." prefix, the tied lm_head left out."""
    weights = {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" or name.endswith(".attn.bias") or name.endswith(".attn.masked_bias"):
            continue
        key = name.removeprefix("transformer.")
        weights[key] = (t.t() if key.endswith(CONV1D) else t).contiguous().float()
    return weights


def export(args):
    os.makedirs(args.dir, exist_ok=True)
    cfg = dict(vocab=args.vocab, block=args.block, embd=args.embd, layers=args.layers, heads=args.heads,
               batch=args.batch, tokens=args.tokens, seed=args.seed)
    model = build(cfg)
    save_file(nanogpt_weights(model), os.path.join(args.dir, "weights.safetensors"))
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
        # The float64 reference: the same weights and tokens computed in double.
        ref64 = build(cfg).to(dev).double()(ids).logits.cpu()
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
    rel64 = ((got - ref64).norm() / ref64.norm()).item()
    torch_rel64 = ((ref - ref64).norm() / ref64.norm()).item()
    print(f"against float64: strata f32 relative L2 {rel64:.3e}, PyTorch f32 {torch_rel64:.3e}")
    failed = [] if rel < args.tolerance else [f"relative L2 {rel:.3e} is above {args.tolerance:g}"]
    if rel64 > 1e-6:
        failed.append(f"strata's logits are {rel64:.3e} from float64's (relative L2), above 1e-6")
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


class StaticCacheGpt(torch.nn.Module):
    """GPT-2's forward (nanoGPT's, with GPT2LMHeadModel's weights) over a static key/value cache:
    the new tokens' keys and values are written at their positions (index_copy_), and attention
    masks the positions not yet written, so a one-token step has the same shapes at every
    position (what torch.compile's CUDA graphs need; gpt-fast decodes this way)."""

    def __init__(self, hf, batch, capacity):
        super().__init__()
        c = hf.config
        self.n_layer, self.n_head, self.n_embd = c.n_layer, c.n_head, c.n_embd
        self.eps = c.layer_norm_epsilon
        self.hf = hf.transformer
        head = c.n_embd // c.n_head
        dt = hf.transformer.wte.weight.dtype
        dev = hf.transformer.wte.weight.device
        self.register_buffer("k", torch.zeros(c.n_layer, batch, c.n_head, capacity, head, dtype=dt, device=dev))
        self.register_buffer("v", torch.zeros(c.n_layer, batch, c.n_head, capacity, head, dtype=dt, device=dev))
        self.register_buffer("key_pos", torch.arange(capacity, device=dev))

    def forward(self, ids, pos):  # ids [B, T], pos i64 [T] on the device
        t = self.hf
        B, T = ids.shape
        C, H = self.n_embd, self.n_head
        x = t.wte(ids) + t.wpe(pos)
        mask = self.key_pos[None, :] <= pos[:, None]  # [T, capacity]: the keys written so far, causal
        for i, blk in enumerate(t.h):
            h = torch.nn.functional.layer_norm(x, (C,), blk.ln_1.weight, blk.ln_1.bias, self.eps)
            qkv = torch.addmm(blk.attn.c_attn.bias, h.view(-1, C), blk.attn.c_attn.weight).view(B, T, 3, H, C // H)
            q, k, v = (qkv[:, :, j].transpose(1, 2) for j in range(3))
            self.k[i].index_copy_(2, pos, k)
            self.v[i].index_copy_(2, pos, v)
            y = torch.nn.functional.scaled_dot_product_attention(q, self.k[i], self.v[i], attn_mask=mask)
            y = torch.addmm(blk.attn.c_proj.bias, y.transpose(1, 2).reshape(-1, C), blk.attn.c_proj.weight)
            x = x + y.view(B, T, C)
            h = torch.nn.functional.layer_norm(x, (C,), blk.ln_2.weight, blk.ln_2.bias, self.eps)
            m = torch.nn.functional.gelu(torch.addmm(blk.mlp.c_fc.bias, h.view(-1, C), blk.mlp.c_fc.weight),
                                         approximate="tanh")
            x = x + torch.addmm(blk.mlp.c_proj.bias, m, blk.mlp.c_proj.weight).view(B, T, C)
        x = torch.nn.functional.layer_norm(x, (C,), t.ln_f.weight, t.ln_f.bias, self.eps)
        return x[:, -1:] @ t.wte.weight.t()  # the last position's logits [B, 1, vocab]


def static_loop(model, prompt, n_new, step):
    """Greedy tokens after prompt: the prompt's step eager, then `step` per token; the tokens stay
    on the device (cloned: a CUDA-graph step's outputs are overwritten by its next replay)."""
    dev = prompt.device
    model.k.zero_()
    model.v.zero_()
    T0 = prompt.shape[1]
    tok = model(prompt, torch.arange(T0, device=dev))[:, -1].argmax(-1, keepdim=True)
    out = [tok]
    pos = torch.tensor([T0], device=dev)
    for _ in range(n_new - 1):
        if hasattr(torch.compiler, "cudagraph_mark_step_begin"):
            torch.compiler.cudagraph_mark_step_begin()
        tok = step(tok, pos)[:, -1].argmax(-1, keepdim=True).clone()
        pos = pos + 1
        out.append(tok)
    return torch.cat([prompt] + out, dim=1)


def kernel_table(static, compiled, prompt, path, steps=32):
    """The compiled loop's kernels per one-token step, from torch.profiler's CUDA activity over
    `steps` steps after the prompt (the CUDA graph's kernels are traced one by one): name,
    launches per step, device microseconds per step; written to `path`."""
    from torch.profiler import ProfilerActivity, profile
    static_loop(static, prompt, 2, compiled)  # the cache holds the prompt; the step's graph is captured
    tok = prompt[:, -1:]
    pos = torch.tensor([prompt.shape[1]], device=prompt.device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            torch.compiler.cudagraph_mark_step_begin()
            tok = compiled(tok, pos)[:, -1].argmax(-1, keepdim=True).clone()
            pos = pos + 1
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None)
        if us is None:
            us = e.cuda_time_total
        if us > 0:
            rows.append((us / steps, e.count / steps, e.key))
    rows.sort(reverse=True)
    with open(path, "w") as f:
        f.write(f"# torch.compile reduce-overhead decode step, {steps} steps profiled; per step: "
                f"{sum(r[1] for r in rows):.1f} kernels, {sum(r[0] for r in rows):.1f} us\n")
        f.write("us_per_step\tkernels_per_step\tname\n")
        for us, n, name in rows:
            f.write(f"{us:.2f}\t{n:.2f}\t{name[:160]}\n")


def decode(args):
    with open(os.path.join(args.dir, "config.json")) as f:
        cfg = json.load(f)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda"
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    model = build(cfg).to(dev, dtype)
    prompt = load_file(os.path.join(args.dir, "ids.safetensors"))["ids"][:1].to(dev)
    n = args.new
    static = StaticCacheGpt(model, 1, prompt.shape[1] + n).eval()
    compiled = torch.compile(static, mode="reduce-overhead", fullgraph=True)
    forms = {
        "transformers generate, eager": lambda: model.generate(prompt, max_new_tokens=n, min_new_tokens=n,
                                                                 do_sample=False, pad_token_id=0),
        "static-cache loop, eager": lambda: static_loop(static, prompt, n, static),
        "static-cache loop, torch.compile reduce-overhead": lambda: static_loop(static, prompt, n, compiled),
    }
    times = {k: [] for k in forms}
    tokens = {}
    with torch.no_grad():
        for name, f in forms.items():  # warm-up (compilation, CUDA graph capture)
            tokens[name] = f().cpu()
            f()
        names = list(forms)
        for r in range(args.rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                forms[name]()
                torch.cuda.synchronize()
                times[name].append(1e3 * (time.perf_counter() - t0) / n)
    ref = tokens[names[0]]
    same = {name: torch.equal(tokens[name], ref) for name in names}
    for name in names:
        ms = sorted(times[name])
        print(f"PyTorch {torch.__version__} decode {name} ({args.precision}): {n} tokens after {prompt.shape[1]}, "
              f"{statistics.median(ms):.4f} ms per token ({1e3 / statistics.median(ms):.0f} tokens/s), "
              f"range {ms[0]:.4f}-{ms[-1]:.4f} over {args.rounds} rounds; "
              f"{'the same tokens as' if same[name] else 'OTHER tokens than'} generate")
    if args.kernels:
        with torch.no_grad():
            kernel_table(static, compiled, prompt, args.kernels)
    if args.json:
        decode_record.write(args.json, f"PyTorch {torch.__version__}, transformers {transformers.__version__}",
                            torch.cuda.get_device_name(), args.precision, cfg, n, prompt.shape[1], args.rounds, times,
                            same)


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
    dc = sub.add_parser("decode")
    dc.add_argument("dir")
    dc.add_argument("--new", type=int, default=256)
    dc.add_argument("--rounds", type=int, default=3)
    dc.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    dc.add_argument("--kernels", help="also write the compiled loop's kernels per step here (torch.profiler)")
    dc.add_argument("--json", help="also write every round's figures here (bench/peers/decode_record.py)")
    args = ap.parse_args()
    {"export": export, "compare": compare, "decode": decode}[args.cmd](args)


if __name__ == "__main__":
    main()
