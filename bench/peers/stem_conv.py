#!/usr/bin/env python3
"""ResNet-50's stem convolution in cuDNN through PyTorch: where its time goes and what
the input's layout could save.

    python3 bench/peers/stem_conv.py --json stem.json

The 7x7 stride-2 convolution of 3 input channels (bf16, channels-last, batch 256 at
224 x 224) runs cuDNN's kernels at a small fraction of the card's rate. Timed, median of
30 after 5 untimed, with cudnn.benchmark off and on:
  cin<C>      the input padded with zero channels to C = 3, 4, 8
  s2d<C>      the same convolution as a 4x4 stride-1 one over the input's 2x2
              space-to-depth (12 channels, padded to C = 12 or 16), the weight rearranged
              likewise (padded to 8x8): the convolution alone, and the rearrangement of the
              input by PyTorch's pad/permute/pad (several kernels; one kernel would write
              the 16-channel tensor once); max relative difference to the 7x7 result in f32
  *_wgrad     the weight gradient (a training step's stem computes no input gradient)
"""
import argparse
import json

import torch
import torch.nn.functional as F

from cuda_events import median_ms as timed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    n = a.batch
    cl = torch.channels_last
    x = torch.randn(n, 3, 224, 224, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=cl)
    w = torch.randn(64, 3, 7, 7, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=cl)

    def s2d_input(cpad):
        y = F.pad(x, (3, 3, 3, 3)).view(n, 3, 115, 2, 115, 2).permute(0, 3, 5, 1, 2, 4).reshape(n, 12, 115, 115)
        return F.pad(y, (0, 0, 0, 0, 0, cpad - 12)).contiguous(memory_format=cl)

    def s2d_weight(cpad):
        v = F.pad(w, (0, 1, 0, 1)).view(64, 3, 4, 2, 4, 2).permute(0, 3, 5, 1, 2, 4).reshape(64, 12, 4, 4)
        return F.pad(v, (0, 0, 0, 0, 0, cpad - 12)).contiguous(memory_format=cl)

    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "batch": n}
    ref = F.conv2d(x.float(), w.float(), stride=2, padding=3)
    y7 = F.conv2d(x, w, stride=2, padding=3)
    dy = torch.randn_like(y7)
    wgrad = torch.ops.aten.convolution_backward
    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        sfx = f"_benchmark{int(bench)}"
        for cin in (3, 4, 8):
            xi = F.pad(x, (0, 0, 0, 0, 0, cin - 3)).contiguous(memory_format=cl)
            wi = F.pad(w, (0, 0, 0, 0, 0, cin - 3)).contiguous(memory_format=cl)
            out[f"cin{cin}" + sfx] = timed(lambda: F.conv2d(xi, wi, stride=2, padding=3))
        out["cin3_wgrad" + sfx] = timed(
            lambda: wgrad(dy, x, w, None, [2, 2], [3, 3], [1, 1], False, [0, 0], 1, [False, True, False]))
        for cpad in (12, 16):
            xs, ws = s2d_input(cpad), s2d_weight(cpad)
            out[f"s2d{cpad}_maxrel"] = ((F.conv2d(xs, ws).float() - ref).abs().max() / ref.abs().max()).item()
            out[f"s2d{cpad}" + sfx] = timed(lambda: F.conv2d(xs, ws))
            out[f"s2d{cpad}_rearrange" + sfx] = timed(lambda: s2d_input(cpad))
            out[f"s2d{cpad}_wgrad" + sfx] = timed(
                lambda: wgrad(dy, xs, ws, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [False, True, False]))
    print(json.dumps(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
