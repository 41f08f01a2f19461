#!/usr/bin/env python3
"""The study's (batch, resolution) grids, one definition for every driver:

    python3 tools/study/grid.py default     # prints "8x64,32x32,..." for --points

  seed     the seed's table points (Levental 2020, Fig. 8-14; docs/study.md)
  default  seed + batch 8..1024 at resolution 32 + resolution 8..1024 at batch 32,
           the two lines of the seed's figures (17 points)
  full     every batch and resolution in 8, 16, ..., 1024 (64 points; several parts)
Points at least as large as one that ran out of memory are not tried by the drivers.
"""
import sys

SEED = [(8, 64), (32, 32), (32, 64), (32, 128), (32, 256), (128, 32), (256, 64), (512, 32)]
POWERS = [8, 16, 32, 64, 128, 256, 512, 1024]
# The fixed axis of the seed's two figure lines (batch sweep at this resolution,
# resolution sweep at this batch); tools/study/make_page.py plots the same lines.
SWEEP_RESOLUTION = 32
SWEEP_BATCH = 32


def grid(name):
    if name == "seed":
        pts = list(SEED)
    elif name == "default":
        pts = list(SEED) + [(b, SWEEP_RESOLUTION) for b in POWERS] + [(SWEEP_BATCH, r) for r in POWERS]
    elif name == "full":
        pts = [(b, r) for b in POWERS for r in POWERS]
    else:
        raise SystemExit(f"grid.py: unknown grid '{name}' (seed, default, full)")
    out = []
    for p in pts:
        if p not in out:
            out.append(p)
    return out


if __name__ == "__main__":
    print(",".join(f"{b}x{r}" for b, r in grid(sys.argv[1] if len(sys.argv) > 1 else "default")))
