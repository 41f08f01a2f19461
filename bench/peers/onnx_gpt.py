#!/usr/bin/env python3
"""A GPT through ONNX between strata and other runtimes: the Python side of
tools/gpu/onnx_gpt.sh and of the onnx_gpt_numpy test (tests/onnx).

    # onnxruntime (CPU provider, and CUDA with TF32 off when installed) on a GPT strata
    # exported, against strata's logits in the io file (strata_export --io)
    python3 bench/peers/onnx_gpt.py ort --onnx gpt.onnx --io gpt_io.safetensors
    # the same graph evaluated op by op in float64 with numpy (needs only numpy and onnx)
    python3 bench/peers/onnx_gpt.py numpy --onnx gpt.onnx --io gpt_io.safetensors
    # every "output*" tensor strata_onnx_run wrote, against the io file's logits
    python3 bench/peers/onnx_gpt.py compare --io gpt_io.safetensors --got out.safetensors

Each prints one JSON object per comparison: the max abs and relative L2 difference of the
logits [batch, sequence, vocab] and how many of the batch x sequence rows agree on their
argmax; it passes at a relative L2 difference of at most --tolerance (1e-4) with every
argmax equal. Only numpy is needed to read and write the safetensors files.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from safetensors_np import read as load_safetensors  # noqa: E402


def compare(got, want, tolerance):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return {"status": "FAIL", "note": f"shape {list(got.shape)} where strata's logits are {list(want.shape)}"}
    diff = got - want
    rows = int(np.prod(want.shape[:-1]))
    r = {"rel_l2": float(np.linalg.norm(diff) / max(np.linalg.norm(want), 1e-300)),
         "max_abs": float(np.abs(diff).max()), "ref_max_abs": float(np.abs(want).max()),
         "argmax_agree": int((got.reshape(rows, -1).argmax(1) == want.reshape(rows, -1).argmax(1)).sum()),
         "rows": rows, "bitwise": bool(np.array_equal(got, want))}
    ok = math.isfinite(r["rel_l2"]) and r["rel_l2"] <= tolerance and r["argmax_agree"] == rows
    r["status"] = "pass" if ok else "FAIL"
    return r


# ---- the ONNX ops of strata's GPT graph, in float64 ------------------------------------
def _attrs(node):
    import onnx.helper
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _layer_norm(x, w, b, axis=-1, epsilon=1e-5):
    mean = x.mean(axis=axis, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axis, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * w + b


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _reshape(x, shape):
    shape = [x.shape[i] if d == 0 else int(d) for i, d in enumerate(shape)]
    return x.reshape(shape)


def _split(x, sizes, axis=0):
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


_OPS = {
    "Shape": lambda x: np.array(x.shape, np.int64),
    "Gather": lambda x, i, axis=0: np.take(x, i, axis=axis),
    "Range": lambda start, limit, delta: np.arange(start, limit, delta, dtype=np.int64),
    "Unsqueeze": lambda x, axes: np.expand_dims(x, tuple(int(a) for a in axes)),
    "GreaterOrEqual": lambda a, b: a >= b,
    "Add": lambda a, b: a + b,
    "Mul": lambda a, b: a * b,
    "Tanh": np.tanh,
    "MatMul": np.matmul,
    "Transpose": lambda x, perm: np.transpose(x, perm),
    "Reshape": _reshape,
    "Split": _split,
    "Where": np.where,
    "Softmax": _softmax,
    "LayerNormalization": _layer_norm,
}


def run_numpy_graph(path, ids):
    import onnx
    import onnx.numpy_helper
    model = onnx.load(path)
    g = model.graph
    values = {}
    for t in g.initializer:
        a = onnx.numpy_helper.to_array(t)
        values[t.name] = a.astype(np.float64) if a.dtype == np.float32 else a
    values[g.input[0].name] = ids.astype(np.int64)
    for node in g.node:
        if node.op_type not in _OPS:
            raise ValueError(f"node {node.name}: op {node.op_type} is not one of strata's GPT graph")
        out = _OPS[node.op_type](*[values[i] for i in node.input], **_attrs(node))
        outs = out if isinstance(out, list) else [out]
        for name, v in zip(node.output, outs):
            values[name] = v
    return values[g.output[0].name]


def run_ort(args):
    import onnxruntime as ort
    from ort_providers import ort_sessions
    io = load_safetensors(args.io)
    results = []
    for name, sess in ort_sessions(args.onnx):
        r = {"step": f"{args.what} -> onnxruntime ({name})", "onnx": os.path.basename(args.onnx),
             "onnxruntime": ort.__version__}
        try:
            if isinstance(sess, Exception):
                raise sess
            r["provider"] = sess.get_providers()[0]
            (y,) = sess.run(None, {sess.get_inputs()[0].name: io["input"].astype(np.int64)})
            r.update(compare(y, io["logits"], args.tolerance))
        except Exception as e:  # noqa: BLE001 - reported; the exit status says it
            r.update({"status": "error", "note": f"{type(e).__name__}: {e}"})
        results.append(r)
    return results


def run_numpy(args):
    io = load_safetensors(args.io)
    r = {"step": f"{args.what} -> numpy float64 evaluation of the ONNX graph", "onnx": os.path.basename(args.onnx)}
    r.update(compare(run_numpy_graph(args.onnx, io["input"]), io["logits"], args.tolerance))
    return [r]


def compare_outputs(args):
    io = load_safetensors(args.io)
    got = load_safetensors(args.got)
    results = []
    for name in sorted(k for k in got if k.startswith("output")):
        r = {"step": f"{args.what} ({name})"}
        r.update(compare(got[name], io["logits"], args.tolerance))
        results.append(r)
    if not results:
        results.append({"step": args.what, "status": "error", "note": f"{args.got} holds no output*"})
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["ort", "numpy", "compare"])
    ap.add_argument("--onnx", default="")
    ap.add_argument("--io", required=True)
    ap.add_argument("--got", default="")
    ap.add_argument("--what", default="strata GPT export")
    ap.add_argument("--json", default="")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()
    steps = {"ort": run_ort, "numpy": run_numpy, "compare": compare_outputs}
    try:
        results = steps[args.step](args)
    except Exception as e:  # noqa: BLE001 - reported; the exit status says it
        results = [{"step": args.step, "status": "error", "note": f"{type(e).__name__}: {e}"}]
    for r in results:
        print(json.dumps(r))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
    return 0 if all(r["status"] == "pass" for r in results) else 2


if __name__ == "__main__":
    sys.exit(main())
