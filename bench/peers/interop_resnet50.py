#!/usr/bin/env python3
"""ResNet-50 checkpoints between strata and torchvision: the PyTorch side of
bench/export_resnet50.cpp (tools/gpu/bench.sh runs the round trip).

    # strata -> torchvision: strict load, then the same logits on the same input
    python3 bench/peers/interop_resnet50.py check-strata --weights strata_w.safetensors --io strata_io.safetensors
    # torchvision -> strata: write torchvision's state dict, an input and its logits
    python3 bench/peers/interop_resnet50.py export --weights tv_w.safetensors --io tv_io.safetensors

Files are read and written with safetensors.torch (load_file/save_file) when the
package is importable, else by this script's own reader and writer of the format
(8-byte little-endian header length, JSON header, raw data). Logits are computed in
eval mode, f32, with TF32 off for cuDNN conv and matmul (strata's default), on the
GPU when there is one.
"""
import argparse
import json
import math
import struct
import sys

import torch
import torchvision

try:
    import safetensors.torch as st
except ImportError:  # the format by hand
    st = None

_DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
           "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8}


def load_file(path):
    if st is not None:
        return st.load_file(path)
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[base + b:base + end]), dtype=_DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return out


def save_file(tensors, path, metadata=None):
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    if st is not None:
        return st.save_file(tensors, path, metadata=metadata)
    codes = {v: k for k, v in _DTYPES.items()}
    header, blobs, off = {}, [], 0
    for k, v in tensors.items():
        raw = v.reshape(-1).view(torch.uint8).numpy().tobytes() if v.numel() else b""
        header[k] = {"dtype": codes[v.dtype], "shape": list(v.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def setup(device):
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    return torch.device(device if device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))


def compare(got, want):
    got, want = got.double().cpu(), want.double().cpu()
    rel = (got - want).norm().item() / max(want.norm().item(), 1e-300)
    return {"rel_l2": rel, "max_abs": (got - want).abs().max().item(), "ref_max_abs": want.abs().max().item(),
            "argmax_agree": int((got.argmax(1) == want.argmax(1)).sum().item()), "rows": int(got.shape[0])}


def check_strata(args, device):
    sd = load_file(args.weights)
    model = torchvision.models.resnet50(weights=None)
    own = model.state_dict()
    r = {"step": "strata -> torchvision", "reader": "safetensors.torch" if st else "by hand",
         "entries": len(sd), "torchvision_entries": len(own),
         "missing": sorted(set(own) - set(sd)), "unexpected": sorted(set(sd) - set(own)),
         "dtype_mismatch": sorted(k for k in sd if k in own and sd[k].dtype != own[k].dtype)}
    model.load_state_dict(sd, strict=True)  # raises on any missing, unexpected or mis-shaped key
    r["load_state_dict_strict"] = "ok"
    io = load_file(args.io)
    model = model.to(device).eval()
    with torch.no_grad():
        logits = model(io["input"].to(device))
    r.update(compare(logits, io["logits"]))
    r["status"] = "pass" if (math.isfinite(r["rel_l2"]) and r["rel_l2"] <= args.tolerance
                             and r["argmax_agree"] == r["rows"]) else "FAIL"
    return r


def random_resnet50(seed):
    """torchvision's ResNet-50 (seeded init) with random BatchNorm affine parameters and
    running statistics, so eval mode is no identity; and a seeded input source."""
    torch.manual_seed(seed)
    model = torchvision.models.resnet50(weights=None)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.num_batches_tracked.fill_(7)
    return model


def export(args, device):
    model = random_resnet50(args.seed)
    save_file(model.state_dict(), args.weights, metadata={"format": "pt"})
    x = torch.empty(args.batch, 3, 224, 224).uniform_(-2.0, 2.0)
    model = model.to(device).eval()
    with torch.no_grad():
        logits = model(x.to(device)).cpu()
    save_file({"input": x, "logits": logits}, args.io, metadata={"format": "pt"})
    return {"step": "torchvision export", "writer": "safetensors.torch" if st else "by hand",
            "entries": len(model.state_dict()), "device": str(device), "status": "ok"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["check-strata", "export"])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--io", required=True)
    ap.add_argument("--json", default="")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()
    device = setup(args.device)
    try:
        r = check_strata(args, device) if args.step == "check-strata" else export(args, device)
    except Exception as e:  # noqa: BLE001 - reported, exit status says it
        r = {"step": args.step, "status": "error", "note": f"{type(e).__name__}: {e}"}
    r["torch"], r["torchvision"] = torch.__version__, torchvision.__version__
    print(json.dumps(r))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1)
            f.write("\n")
    return 0 if r["status"] in ("ok", "pass") else 2


if __name__ == "__main__":
    sys.exit(main())
