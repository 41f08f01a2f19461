#!/usr/bin/env python3
"""ONNX's own Python checker on what strata_export writes, and strata_onnx_run on it.

    check_with_python_onnx.py STRATA_EXPORT STRATA_ONNX_RUN WORK_DIR

Exports LeNet (both variants), ResNet-18 and a ResNet-50 (narrow, ImageNet stem) with
batch norm kept and folded; each file must pass onnx.checker.check_model(full_check=True)
and strict shape inference with type checks, have opset 17, one input [batch, C, S, S]
named "input" and initializers named as a state dict (no num_batches_tracked). Each is then
imported and run by strata_onnx_run in every dispatch mode on a random batch of 3: the
outputs must be finite, [3, classes] and bitwise equal across the modes. Each file is then
saved again by onnx.save_model with its initializers of 1 KiB or more in an external data
file beside it (ONNX's own writer of external data): strata_onnx_run must compute bitwise
the same outputs from it.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import shape_inference

# The numpy safetensors reader and writer the benchmark peers use.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "peers"))
import safetensors_np  # noqa: E402

MODELS = [
    ("lenet", ["--model", "lenet"], 1, 28, 10),
    ("lenet_keras", ["--model", "lenet", "--lenet-variant", "keras"], 1, 28, 10),
    ("resnet18", ["--model", "resnet18", "--classes", "10", "--image-size", "32", "--base-channels", "16"], 3, 32, 10),
    ("resnet50", ["--model", "resnet50", "--classes", "7", "--image-size", "72", "--base-channels", "8"], 3, 72, 7),
]


def write_safetensors(path, tensors):
    safetensors_np.write(path, {k: np.asarray(a, dtype="<f4") for k, a in tensors.items()})


def read_safetensors(path):
    out = safetensors_np.read(path)
    for name, a in out.items():
        assert a.dtype == np.float32, (name, a.dtype)
    return out


def check(path, channels, side):
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    assert [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] == [17], m.opset_import
    (inp,) = m.graph.input
    dims = [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim]
    assert inp.name == "input" and dims == ["batch", channels, side, side], (inp.name, dims)
    names = [t.name for t in m.graph.initializer]
    assert names and not any(n.endswith("num_batches_tracked") for n in names), names[:5]
    assert all(n.endswith((".weight", ".bias", ".running_mean", ".running_var")) for n in names), names
    return len(m.graph.node), len(names)


def main():
    export, run, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    failures = 0
    for name, args, channels, side, classes in MODELS:
        for fold in (False, True):
            path = os.path.join(work, f"{name}{'_folded' if fold else ''}.onnx")
            subprocess.run([export, *args, "--out", path] + (["--fold-bn"] if fold else []), check=True,
                           stdout=subprocess.DEVNULL)
            try:
                nodes, inits = check(path, channels, side)
                io = os.path.join(work, f"{name}_io.safetensors")
                out = os.path.join(work, f"{name}_out.safetensors")
                write_safetensors(io, {"input": rng.uniform(-1, 1, (3, channels, side, side)).astype(np.float32)})
                subprocess.run([run, "--onnx", path, "--input", io, "--output", out, "--backend", "reference",
                                "--dispatch", "all"], check=True, stdout=subprocess.DEVNULL)
                y = read_safetensors(out)
                ys = [y["output." + m] for m in ("virtual", "static", "direct")]
                assert ys[0].shape == (3, classes), ys[0].shape
                assert np.isfinite(ys[0]).all()
                assert all(np.array_equal(ys[0], o) for o in ys[1:]), "dispatch modes disagree"
                # The same model with ONNX's external data, in a folder of its own.
                ext_dir = os.path.join(work, "external", os.path.basename(path)[:-5])
                os.makedirs(ext_dir, exist_ok=True)
                ext = os.path.join(ext_dir, "model.onnx")
                onnx.save_model(onnx.load(path), ext, save_as_external_data=True, all_tensors_to_one_file=True,
                                location="model.onnx.data", size_threshold=1024)
                kept = [t.name for t in onnx.load(ext, load_external_data=False).graph.initializer
                        if t.data_location == onnx.TensorProto.EXTERNAL]
                assert kept, "no initializer went to the external file"
                ext_out = os.path.join(work, f"{name}_external_out.safetensors")
                subprocess.run([run, "--onnx", ext, "--input", io, "--output", ext_out, "--backend", "reference",
                                "--dispatch", "direct"], check=True, stdout=subprocess.DEVNULL)
                assert np.array_equal(read_safetensors(ext_out)["output"], ys[0]), "external data changed the output"
                print(f"ok   {os.path.basename(path)}: {nodes} nodes, {inits} initializers; onnx.checker, strict "
                      f"shape inference, strata_onnx_run in 3 modes; {len(kept)} initializers as external data")
            except Exception as e:  # report every model, then fail
                failures += 1
                print(f"FAIL {os.path.basename(path)}: {type(e).__name__}: {e}")
    print(f"onnx {onnx.__version__}: {len(MODELS) * 2 - failures}/{len(MODELS) * 2} models pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
