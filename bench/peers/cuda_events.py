"""Timing helper shared by the kernel experiments of bench/peers (stem_conv.py, conv1x1_gemm.py)."""
import torch


def median_ms(f, n=30, warmup=5):
    """Median device time of f() in ms over n runs after `warmup` untimed ones, by CUDA events."""
    for _ in range(warmup):
        f()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]
