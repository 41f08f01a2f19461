#!/usr/bin/env python3
"""ResNet-50's stride-1 1x1 convolutions in cuDNN against the same products as cuBLAS GEMMs,
through PyTorch: whether a GEMM path for them would pay.

    python3 bench/peers/conv1x1_gemm.py --json conv1x1.json

On a channels-last tensor a stride-1 1x1 convolution is the GEMM [N*H*W, C] x [C, K]. For
each such convolution of a torchvision ResNet-50 at 224 x 224 (bf16, batch 256, with how
many times the network runs it), median ms of 30 after 5 untimed:
  conv        F.conv2d with bias, cudnn.benchmark on (its fastest engine), then ReLU
  conv_fused  the same through F.conv2d alone (no bias, no ReLU): the convolution's own time
  gemm        torch._addmm_activation(bias, x, w^T): cuBLASLt's GEMM with the bias and ReLU
              in its epilogue
  gemm_res    torch.addmm(z, x, w^T) then ReLU: a residual block's last 1x1 with its add
"""
import argparse
import json

import torch
import torch.nn.functional as F

from cuda_events import median_ms as timed

# (C, K, H, count): ResNet-50's stride-1 1x1 convolutions at 224 x 224.
SHAPES = [
    (64, 64, 56, 1), (64, 256, 56, 4), (256, 64, 56, 2),
    (256, 128, 56, 1), (128, 512, 28, 4), (512, 128, 28, 3),
    (512, 256, 28, 1), (256, 1024, 14, 6), (1024, 256, 14, 5),
    (1024, 512, 14, 1), (512, 2048, 7, 3), (2048, 512, 7, 2),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    n, bf, cl = a.batch, torch.bfloat16, torch.channels_last
    rows, totals = [], {"conv": 0.0, "conv_alone": 0.0, "gemm": 0.0, "gemm_res": 0.0}
    for c, k, h, count in SHAPES:
        x = torch.randn(n, c, h, h, device="cuda", dtype=bf).contiguous(memory_format=cl)
        w = torch.randn(k, c, 1, 1, device="cuda", dtype=bf).contiguous(memory_format=cl) * 0.05
        b = torch.randn(k, device="cuda", dtype=bf)
        z = torch.randn(n, k, h, h, device="cuda", dtype=bf).contiguous(memory_format=cl)
        x2 = x.permute(0, 2, 3, 1).reshape(-1, c)  # a view: channels-last is [N*H*W, C] row-major
        wt = w.view(k, c).t()
        z2 = z.permute(0, 2, 3, 1).reshape(-1, k)
        r = {"C": c, "K": k, "H": h, "count": count}
        r["conv"] = timed(lambda: F.relu(F.conv2d(x, w, b)))
        r["conv_alone"] = timed(lambda: F.conv2d(x, w))
        r["gemm"] = timed(lambda: torch._addmm_activation(b, x2, wt))
        r["gemm_res"] = timed(lambda: F.relu(torch.addmm(z2, x2, wt)))
        ref = F.relu(F.conv2d(x.float(), w.float(), b.float())).permute(0, 2, 3, 1).reshape(-1, k)
        got = torch._addmm_activation(b, x2, wt).float()
        r["gemm_max_rel_diff"] = ((got - ref).abs().max() / ref.abs().max()).item()
        for key in totals:
            totals[key] += r[key] * count
        rows.append(r)
        print(f"C{c:5d} K{k:5d} {h:3d}^2 x{count}: conv+relu {r['conv']:.3f}  conv {r['conv_alone']:.3f}  "
              f"gemm+bias+relu {r['gemm']:.3f}  gemm+z, relu {r['gemm_res']:.3f} ms", flush=True)
    print("weighted totals (ms per network):", {k: round(v, 3) for k, v in totals.items()})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "batch": n,
                       "cudnn": torch.backends.cudnn.version(), "rows": rows, "totals": totals}, f, indent=1)


if __name__ == "__main__":
    main()
