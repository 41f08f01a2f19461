#!/usr/bin/env python3
"""torchvision's ResNet-50 as TorchScript, for libtorch_cpu_bench --torchscript DIR: the form a
LibTorch user deploys on the CPU (the C++ side loads it, freezes it and runs
torch::jit::optimize_for_inference). Writes DIR/resnet50_f32.pt and DIR/resnet50_bf16.pt, traced in
eval mode on one 224x224 image (the traced graph serves any batch). Random weights (seed 0): the
benchmark times the network, it compares no outputs for ResNet-50.

    python3 bench/libtorch/export_torchscript.py DIR     # Debian's python3-torch and python3-torchvision
"""
import os
import sys

import torch
import torchvision


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: export_torchscript.py DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = torchvision.models.resnet50().eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        for name, dtype in (("resnet50_f32.pt", torch.float32), ("resnet50_bf16.pt", torch.bfloat16)):
            traced = torch.jit.trace(model.to(dtype), x.to(dtype))
            traced.save(os.path.join(out, name))
            print(f"wrote {os.path.join(out, name)} (torch {torch.__version__}, torchvision {torchvision.__version__})")


if __name__ == "__main__":
    main()
