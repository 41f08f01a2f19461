#!/usr/bin/env python3
"""GPT-2 small data-parallel training in PyTorch (DistributedDataParallel over NCCL), the peer of
bench/gpt2_dist.cpp. Start it as users do:

    torchrun --standalone --nproc_per_node 2 bench/peers/pytorch_ddp_gpt2.py --form compile

transformers' GPT2LMHeadModel (random weights, SDPA attention, no dropout), forward and loss
under torch.autocast("cuda", dtype=torch.bfloat16) (f32 weights, gradients and optimizer), the
loss in f32 as autocast computes cross-entropy, fused AdamW (lr 6e-4, weight decay 0.1), DDP's
defaults (25 MB buckets, gradients all-reduced during the backward); --form compile wraps the DDP
model in torch.compile (inductor's DDP graph splitting at the buckets). Each rank trains on random
tokens of its own, as strata's benchmark. Rank 0 prints one JSON line: tokens/s over all ranks
from the mean wall time of the timed steps (after --warmup untimed ones), each rank synchronised
at the end. Written before a multi-GPU machine was at hand: not yet run on one.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


def main():
    p = argparse.ArgumentParser()
    for name, default in (("layers", 12), ("heads", 12), ("embd", 768), ("vocab", 50257), ("batch", 16),
                          ("seq", 1024), ("steps", 10), ("warmup", 3)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--form", choices=["eager", "compile"], default="eager")
    p.add_argument("--lr", type=float, default=6e-4)
    a = p.parse_args()

    from transformers import GPT2Config, GPT2LMHeadModel
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    config = GPT2Config(vocab_size=a.vocab, n_positions=max(1024, a.seq), n_embd=a.embd, n_layer=a.layers,
                        n_head=a.heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        activation_function="gelu_new", attn_implementation="sdpa")
    torch.manual_seed(0)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)
    model = GPT2LMHeadModel(config).cuda().train()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.AdamW(ddp.parameters(), lr=a.lr, weight_decay=0.1, fused=True)
    g = torch.Generator(device="cuda").manual_seed(1000 + rank)
    x = torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda", generator=g)
    y = torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda", generator=g)
    net = torch.compile(ddp) if a.form == "compile" else ddp

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = net(x).logits
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    torch.cuda.reset_peak_memory_stats()
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    seconds = torch.tensor([time.perf_counter() - t0, loss.item()], device="cuda", dtype=torch.float64)
    dist.all_reduce(seconds)
    mean = seconds[0].item() / world
    tok = a.batch * a.seq * world * a.steps / mean
    C, L = a.embd, a.layers
    flops_per_token = 6 * (L * 12 * C * C + a.vocab * C) + 6 * L * C * a.seq
    if rank == 0:
        print(json.dumps(dict(framework=f"PyTorch {torch.__version__}", mode=f"DDP {a.form}", world=world,
                              precision="bf16 autocast", batch_per_gpu=a.batch, seq=a.seq, steps=a.steps,
                              warmup=a.warmup, ms_per_step=1e3 * mean / a.steps, tokens_per_s=tok,
                              tokens_per_s_per_gpu=tok / world, tflops_per_gpu=tok / world * flops_per_token / 1e12,
                              peak_mib_rank0=torch.cuda.max_memory_allocated() / 2**20,
                              last_loss_mean=seconds[1].item() / world)), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
