"""CUDA helpers shared by bench/peers: a device-time median (the kernel experiments stem_conv.py and
conv1x1_gemm.py) and PyTorch's recipe for capturing a call into a CUDA graph (pytorch_lenet.py,
resnet50_infer_forms.py)."""
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


def capture(f, warmup=3):
    """f() captured into a CUDA graph by PyTorch's recipe: `warmup` calls on a side stream first (so that
    libraries make their handles and workspaces outside the capture), then one call captured. Returns
    (graph, output): graph.replay() runs it again, writing the same output tensor."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            f()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = f()
    return graph, out
