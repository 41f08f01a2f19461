#!/usr/bin/env python3
"""ResNet-50 through ONNX between strata, onnxruntime and PyTorch: the Python side of
tools/gpu/onnx.sh (which says the order of the steps).

    # onnxruntime on a model strata exported; compared with strata's logits in the io file
    python3 bench/peers/onnx_resnet50.py ort --onnx strata_r50.onnx --io strata_io.safetensors
    # torchvision's ResNet-50 through torch.onnx.export; its input and PyTorch's logits
    python3 bench/peers/onnx_resnet50.py torch-export --onnx tv_r50.onnx --io tv_io.safetensors
    # the same through the dynamo exporter (PyTorch 2.9+'s default): tv_r50.onnx + tv_r50.onnx.data
    python3 bench/peers/onnx_resnet50.py torch-export --dynamo --onnx tv_r50.onnx --io tv_io.safetensors
    # every "output*" tensor strata_onnx_run wrote, against the io file's logits
    python3 bench/peers/onnx_resnet50.py compare --io tv_io.safetensors --got tv_strata.safetensors

Each prints one JSON object per comparison (relative L2 error of the logits, max abs
error, argmax agreement) and passes when the relative error is at most --tolerance (1e-4)
and every argmax agrees. PyTorch runs in eval mode, f32, TF32 off (strata's default), on
the GPU when there is one; onnxruntime on its CPU provider and, when installed, its CUDA
provider with TF32 off. Files go through interop_resnet50.py's safetensors reader/writer.
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_resnet50 import compare, load_file, random_resnet50, save_file, setup  # noqa: E402


def verdict(r, tolerance):
    ok = math.isfinite(r["rel_l2"]) and r["rel_l2"] <= tolerance and r["argmax_agree"] == r["rows"]
    r["status"] = "pass" if ok else "FAIL"
    return r


def run_ort(args, _device):
    import onnxruntime as ort
    from ort_providers import ort_sessions
    io = load_file(args.io)
    x = io["input"].numpy()
    results = []
    for name, sess in ort_sessions(args.onnx):
        r = {"step": f"strata export -> onnxruntime ({name})", "onnx": os.path.basename(args.onnx),
             "onnxruntime": ort.__version__}
        try:
            if isinstance(sess, Exception):
                raise sess
            r["provider"] = sess.get_providers()[0]
            (y,) = sess.run(None, {sess.get_inputs()[0].name: x})
            r.update(compare(torch.from_numpy(y), io["logits"]))
            verdict(r, args.tolerance)
        except Exception as e:  # noqa: BLE001 - reported; the exit status says it
            r.update({"status": "error", "note": f"{type(e).__name__}: {e}"})
        results.append(r)
    return results


def torch_export(args, device):
    import onnx
    model = random_resnet50(args.seed).eval()
    x = torch.empty(args.batch, 3, 224, 224).uniform_(-2.0, 2.0)
    r = {"step": f"torchvision -> torch.onnx.export{'(dynamo=True)' if args.dynamo else ''}",
         "onnx": os.path.basename(args.onnx)}
    common = dict(input_names=["input"], output_names=["output"],
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    if args.dynamo:  # PyTorch 2.9+'s default exporter as users call it: names, shapes and external data its own
        torch.onnx.export(model, (x,), args.onnx, dynamo=True, external_data=True)
        r["exporter"] = "dynamo (external data)"
    else:
        try:  # the TorchScript exporter (Conv+BatchNorm folded, Flatten, Gemm), opset 17
            torch.onnx.export(model, (x,), args.onnx, opset_version=17, dynamo=False, **common)
            r["exporter"] = "torchscript, opset 17"
        except Exception as e:  # noqa: BLE001 - PyTorch without it: the dynamo exporter
            r["torchscript_exporter"] = f"{type(e).__name__}: {e}"[:300]
            prog = torch.onnx.export(model, (x,), dynamo=True, dynamic_shapes=({0: torch.export.Dim("batch")},),
                                     input_names=["input"], output_names=["output"])
            prog.save(args.onnx, external_data=False)
            r["exporter"] = "dynamo"
    m = onnx.load(args.onnx, load_external_data=False)
    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    external = [t for t in m.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    files = sorted({e.value for t in external for e in t.external_data if e.key == "location"})
    r.update({"opset": [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")], "ir": m.ir_version,
              "ops": ops, "initializers": len(m.graph.initializer), "external_initializers": len(external),
              "external_files": files, "conv_with_bias": sum(1 for n in m.graph.node
                                                            if n.op_type == "Conv" and len(n.input) > 2 and n.input[2]),
              "onnx": onnx.__version__})
    model = model.to(device)
    with torch.no_grad():
        logits = model(x.to(device)).cpu()
    save_file({"input": x, "logits": logits}, args.io, metadata={"format": "pt"})
    r.update({"device": str(device), "status": "ok"})
    return [r]


def compare_outputs(args, _device):
    io = load_file(args.io)
    got = load_file(args.got)
    results = []
    for name in sorted(k for k in got if k.startswith("output")):
        r = {"step": f"{args.what} ({name})"}
        r.update(compare(got[name], io["logits"]))
        r["bitwise"] = bool(torch.equal(got[name].float(), io["logits"].float()))
        results.append(verdict(r, args.tolerance))
    if not results:
        results.append({"step": args.what, "status": "error", "note": f"{args.got} holds no output*"})
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["ort", "torch-export", "compare"])
    ap.add_argument("--onnx", default="")
    ap.add_argument("--io", required=True)
    ap.add_argument("--got", default="")
    ap.add_argument("--what", default="strata_onnx_run")
    ap.add_argument("--json", default="")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--dynamo", action="store_true",
                    help="torch-export: the dynamo exporter (torch.onnx.export(dynamo=True), external data, fixed batch)")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()
    device = setup(args.device)
    steps = {"ort": run_ort, "torch-export": torch_export, "compare": compare_outputs}
    try:
        results = steps[args.step](args, device)
    except Exception as e:  # noqa: BLE001 - reported; the exit status says it
        results = [{"step": args.step, "status": "error", "note": f"{type(e).__name__}: {e}"}]
    for r in results:
        r["torch"] = torch.__version__
        print(json.dumps(r))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
    return 0 if all(r["status"] in ("ok", "pass") for r in results) else 2


if __name__ == "__main__":
    sys.exit(main())
