#!/usr/bin/env python3
"""ResNet-50 data-parallel training in PyTorch (DistributedDataParallel over NCCL), the
peer of bench/dist_resnet.cpp. Start it as users do:

    torchrun --nproc_per_node 2 bench/peers/pytorch_ddp_resnet50.py --batch 256 --steps 30

torchvision.models.resnet50(weights=None), torch.channels_last model and input, forward
and loss under torch.autocast("cuda", dtype=torch.bfloat16) (f32 weights, gradients
and optimizer), SGD momentum 0.9 lr 0.01, DDP's defaults (25 MB buckets, gradients
all-reduced during backward, buffers broadcast from rank 0), eager or (--form compile) under
torch.compile, synthetic data: one random
batch per rank (uniform in [-1.7, 1.7), random labels), as strata's benchmark.
cuDNN as in strata's policy for bf16 (benchmark False, deterministic True; TF32 does
not apply to bf16). Rank 0 prints one JSON line: img/s over all ranks from the mean
wall time of the timed steps (after `warmup` untimed ones), each step ending in a
device synchronisation, as strata's benchmark reads its loss every step.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=256, help="images per GPU")
    p.add_argument("--resolution", type=int, default=224)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--form", choices=["eager", "compile", "compile_nosplit"], default="eager",
                   help="compile: torch.compile over the DDP model (dynamo's DDPOptimizer splits its graph at the "
                        "buckets, so that their all-reduces overlap the backward); compile_nosplit: one graph "
                        "(torch._dynamo.config.optimize_ddp = False: DDP's hooks run after the compiled backward)")
    p.add_argument("--grad-exchange", choices=["f32", "bf16"], default="f32",
                   help="bf16: DDP's bf16_compress_hook (gradients all-reduced in bf16), strata's --grad-exchange bf16")
    p.add_argument("--allreduce-gib", type=float, default=0,
                   help="instead: time an all-reduce of this many GiB of f32 and print its bus bandwidth")
    a = p.parse_args()

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.manual_seed(rank)
    if a.allreduce_gib > 0:
        buf = torch.ones(int(a.allreduce_gib * 2**30) // 4, device="cuda")
        for _ in range(3):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(10):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        t = (time.perf_counter() - t0) / 10
        if rank == 0:
            # nccl-tests' bus bandwidth: what each GPU's links carry in a ring all-reduce.
            print(json.dumps({"allreduce_bytes": buf.numel() * 4, "seconds": t, "world": world,
                              "bus_gb_per_s": buf.numel() * 4 * 2 * (world - 1) / world / t / 1e9}), flush=True)
        dist.destroy_process_group()
        return

    model = torchvision.models.resnet50(weights=None).cuda().to(memory_format=torch.channels_last)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    if a.grad_exchange == "bf16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    if a.form == "compile_nosplit":
        from torch._dynamo import config as dynamo_config
        dynamo_config.optimize_ddp = False
    net = ddp if a.form == "eager" else torch.compile(ddp)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    x = (torch.rand(a.batch, 3, a.resolution, a.resolution, device="cuda") * 3.4 - 1.7).contiguous(
        memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (a.batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    seconds = torch.tensor([time.perf_counter() - t0], device="cuda", dtype=torch.float64)
    dist.all_reduce(seconds)
    mean = seconds.item() / world
    img_s = a.batch * world * a.steps / mean
    if rank == 0:
        print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                          "model": "resnet50", "world": world, "batch_per_gpu": a.batch, "resolution": a.resolution,
                          "precision": "bf16-autocast", "form": a.form, "grad_exchange": a.grad_exchange, "channels_last": True, "steps": a.steps, "warmup": a.warmup,
                          "ms_per_step": 1000 * mean / a.steps, "img_per_s": img_s, "img_per_s_per_gpu": img_s / world,
                          "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
                          "device": torch.cuda.get_device_name()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
