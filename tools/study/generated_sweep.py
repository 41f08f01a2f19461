#!/usr/bin/env python3
"""The study's "generated" rows (docs/study.md): strata's ResNet-50 (and LeNet-5) written out by
strata_codegen as a program with no strata in it, measured at the study's points beside strata's own modes.

For each <batch>x<resolution> point: `strata_codegen --backend cuda --model resnet50 --stem imagenet
--classes 1000` records direct mode's prediction (f32 NCHW, batch norm folded, as the study's sweep
builds its ResNet-50; LeNet-5, TensorFlow's variant, at --lenet-batches) and writes the project;
CMake builds it against the CUDA runtime, cuBLAS and cuDNN; `model_run` must reproduce strata's output
for the check input byte for byte, with and without its CUDA graph; then `model_run ... REPEAT` times it
both ways. The record of each form carries the study sweep's fields (tools/study/study_data.py reads
them as it reads strata_sweep.json):
  impl         generated (plain calls) or generated_cudagraph (the calls captured at load)
  device_ms    CUDA events around one forward on a resident input (median of REPEAT)
  host_ms      the host's time to enqueue that forward
  wall_ms      enqueue and wait
  io_ms        one run with the input copied in and the output copied out
  strata_io_ms the same figure for strata's own predict in direct and graph mode (strata_codegen --time)
  (train records: one training step with the batch in and the loss out, model_train --time and
  strata_codegen --train --time; their `bitwise` is model_train's first losses against strata's)
  model        resnet50 or lenet (the study's tables are ResNet-50's; LeNet's rows are listed apart)
  peak_bytes   the program's own device buffers: its arena (direct mode's plan) and its weights
               (cuDNN's and cuBLAS's workspaces not counted)
  bitwise      model_run's output is strata's direct-mode output, byte for byte
  program_bytes, program_sections   model_run's size on disk and its largest sections (size -A)

    python3 tools/study/generated_sweep.py --pkg .gpu --points 1x224,32x224 --lenet-batches 1,32 --repeat 200 \
        --json OUT.json
"""
import argparse
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import time

RESIDENT = re.compile(r"time per forward, input resident: host ([0-9.]+) ms, device ([0-9.]+) ms, "
                      r"wall ([0-9.]+) ms median over (\d+)")
IO = re.compile(r"time per run: ([0-9.]+) ms median")
STRATA_IO = re.compile(r"strata's (\w+) mode on cuda(?:, training step)?: ([0-9.]+) ms median")
STEP = re.compile(r"time per step: ([0-9.]+) ms median")
LOSS = re.compile(r"^step \d+ loss .*$", re.M)
GEN = re.compile(r"(\d+) calls, arena (\d+) bytes, (?:weights|state) (\d+) bytes, "
                 r"(\d+) lines of code \(model\.cpp (\d+)\)")


def run(cmd, log, timeout, **kw):
    """Runs cmd, its output appended to log; returns (exit status, output)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, **kw)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc = 124
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{out}\n(exit {rc})\n")
    return rc, out


def sections(exe):
    """The program's largest sections by size in bytes (`size -A`), where binutils is there."""
    try:
        out = subprocess.run(["size", "-A", exe], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    rows = [ln.split() for ln in out.splitlines() if ln.startswith(".")]
    return dict(sorted(((r[0], int(r[1])) for r in rows if len(r) >= 2 and r[1].isdigit()),
                       key=lambda kv: -kv[1])[:6])


def last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def point(args, model, b, r, work, kind="eval"):
    """The two records (plain calls, graph) of one point of `model` and `kind` (eval: the prediction;
    train: the training step), or one error record per form."""
    name = f"{model}_{kind}_{b}x{r}"
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    log = os.path.join(d, "steps.log")
    base = {"framework": "strata_codegen (cuDNN, cuBLAS)", "model": model, "kind": kind, "batch": b,
            "resolution": r, "dtype": "f32", "layout": "NCHW"}
    forms = [("generated", ["--no-graph"]), ("generated_cudagraph", [])]

    def failed(why):
        print(f"{name}: {why}", flush=True)
        return [dict(base, impl=impl, status="error", note=why) for impl, _ in forms]

    proj = os.path.join(d, "project")
    t0 = time.monotonic()
    shape = (["--model", "resnet50", "--stem", "imagenet", "--classes", "1000", "--input", f"{b},3,{r},{r}"]
             if model == "resnet50" else ["--model", "lenet", "--input", f"{b},1,{r},{r}"])
    train = ["--train"] if kind == "train" else []
    rc, out = run([os.path.join(args.pkg, "bin", "strata_codegen"), "--backend", "cuda", "--seed", "3"] + shape +
                  train + ["--out", proj, "--check", "--time", str(args.repeat)], log, args.step_timeout)
    if rc != 0:
        return failed(f"strata_codegen: {last_line(out)}")
    gen = GEN.search(out)
    if not gen:
        return failed("strata_codegen printed no summary line")
    calls, arena, weights, lines, model_lines = (int(x) for x in gen.groups())
    strata_io = {mode: float(ms) for mode, ms in STRATA_IO.findall(out)}
    setup_s = time.monotonic() - t0
    cfg = ["cmake", "-S", proj, "-B", os.path.join(proj, "build"), "-DCMAKE_CUDA_ARCHITECTURES=90"]
    if shutil.which("ninja"):
        cfg += ["-G", "Ninja"]
    if args.cudnn_root:
        cfg.append(f"-DCUDNN_ROOT={args.cudnn_root}")
    rc, out = run(cfg, log, args.step_timeout)
    if rc == 0:
        rc, out = run(["cmake", "--build", os.path.join(proj, "build"), "-j", str(os.cpu_count() or 4)], log,
                      args.step_timeout)
    if rc != 0:
        return failed(f"the generated project does not build: {last_line(out)}")
    build_s = time.monotonic() - t0 - setup_s
    exe = os.path.join(proj, "build", "model_train" if kind == "train" else "model_run")
    common = dict(base, calls=calls, code_lines=lines, model_lines=model_lines, arena_bytes=arena,
                  peak_bytes=arena + weights, setup_s=setup_s, build_s=build_s, strata_io_ms=strata_io,
                  program_bytes=os.path.getsize(exe), program_sections=sections(exe))
    common["state_bytes" if kind == "train" else "weight_bytes"] = weights
    measure = train_record if kind == "train" else eval_record
    recs = [measure(args, proj, exe, flag, log, dict(common, impl=impl), name) for impl, flag in forms]
    shutil.rmtree(os.path.join(proj, "build"), ignore_errors=True)
    for big in ("weights.bin", "trained.bin"):
        if os.path.exists(os.path.join(proj, big)):
            os.remove(os.path.join(proj, big))
    return recs


def eval_record(args, proj, exe, flag, log, rec, name):
    """model_run on strata's check input with REPEAT: its output must be strata's (check/expected.npy)
    byte for byte; the forward's device, host and wall time on a resident input, and a run with the
    input in and the output out."""
    y = os.path.join(proj, f"output_{rec['impl']}.npy")
    rc, out = run([exe, os.path.join(proj, "weights.bin"), os.path.join(proj, "check", "input.npy"), y,
                   str(args.repeat)] + flag, log, args.step_timeout)
    m, io = RESIDENT.search(out), IO.search(out)
    if rc != 0 or not m or not io:
        return dict(rec, status="error", note=f"model_run: {last_line(out)}")
    bitwise = filecmp.cmp(y, os.path.join(proj, "check", "expected.npy"), shallow=False)
    host, dev, wall, n = float(m.group(1)), float(m.group(2)), float(m.group(3)), int(m.group(4))
    b = rec["batch"]
    rec.update(status="ok" if bitwise else "error", repeats=n, bitwise=bitwise,
               device_ms={"median": dev}, host_ms={"median": host}, wall_ms={"median": wall},
               io_ms={"median": float(io.group(1))}, ms_per_sample=dev / b, img_per_s=b * 1000.0 / dev)
    if not bitwise:
        rec["note"] = "model_run's output is not strata's direct-mode output bit for bit"
    print(f"{name} {rec['impl']}: device {dev:.4f} ms, host {host:.4f} ms, wall {wall:.4f} ms, input in and out "
          f"{float(io.group(1)):.3f} ms; bitwise {'yes' if bitwise else 'NO'}", flush=True)
    return rec


def train_record(args, proj, exe, flag, log, rec, name):
    """model_train on the check batch for 1 + REPEAT steps with --time: its first losses must be
    strata's (check/losses.txt) byte for byte; the median step, the batch in and the loss out."""
    chk = os.path.join(proj, "check")
    rc, out = run([exe, os.path.join(proj, "weights.bin"), os.path.join(chk, "input.npy"),
                   os.path.join(chk, "labels.npy"), str(args.repeat + 1), os.path.join(proj, "trained.bin"),
                   "--time"] + flag, log, args.step_timeout)
    step = STEP.search(out)
    if rc != 0 or not step:
        return dict(rec, status="error", note=f"model_train: {last_line(out)}")
    with open(os.path.join(chk, "losses.txt")) as f:
        expected = f.read().split("\n")
    expected = [ln for ln in expected if ln]
    got = LOSS.findall(out)[:len(expected)]
    bitwise = got == expected
    ms = float(step.group(1))
    rec.update(status="ok" if bitwise else "error", repeats=args.repeat, bitwise=bitwise, io_ms={"median": ms},
               ms_per_sample=None)
    if not bitwise:
        rec["note"] = "model_train's losses are not strata's bit for bit"
    print(f"{name} {rec['impl']}: a step with the batch in and the loss out {ms:.3f} ms; losses bitwise "
          f"{'yes' if bitwise else 'NO'}", flush=True)
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pkg", default=".gpu", help="the packed build (bin/strata_codegen)")
    ap.add_argument("--points", default="", help="ResNet-50's prediction at these <batch>x<resolution>,...")
    ap.add_argument("--lenet-batches", default="", help="LeNet-5 (28x28) at these batch sizes too: 1,32")
    ap.add_argument("--train-points", default="", help="ResNet-50's training step at these <batch>x<resolution>")
    ap.add_argument("--repeat", type=int, default=200, help="timed runs of each form")
    ap.add_argument("--cudnn-root", default="", help="the cuDNN the programs build against (CUDNN_ROOT)")
    ap.add_argument("--work", default="/tmp/strata-generated", help="folder for the projects")
    ap.add_argument("--deadline", type=float, default=1e9, help="start no point after this many seconds")
    ap.add_argument("--step-timeout", type=float, default=240, help="seconds for one generation, build or run")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    pts = []
    for p in (x for x in args.points.split(",") if x):
        b, r = p.split("x")
        pts.append(("resnet50", int(b), int(r), "eval"))
    pts += [("lenet", int(b), 28, "eval") for b in args.lenet_batches.split(",") if b]
    for p in (x for x in args.train_points.split(",") if x):
        b, r = p.split("x")
        pts.append(("resnet50", int(b), int(r), "train"))
    t0 = time.monotonic()
    # model_run: one untimed run, then REPEAT timed ones of each figure.
    doc = {"part": "generated", "framework": "strata_codegen", "records": [],
           "protocol": {"warmup": 1, "min_repeats": args.repeat, "max_repeats": args.repeat, "min_seconds": 0},
           "settings": {"backend": "cuda", "dtype": "f32", "layout": "NCHW", "allow_tf32": False}}
    for model, b, r, kind in pts:
        if time.monotonic() - t0 > args.deadline:
            doc["records"] += [{"impl": i, "framework": "strata_codegen (cuDNN, cuBLAS)", "model": model,
                                "kind": kind, "batch": b, "resolution": r, "status": "skipped", "note": "deadline"}
                               for i in ("generated", "generated_cudagraph")]
            continue
        doc["records"] += point(args, model, b, r, args.work, kind)
        doc["elapsed_s"] = time.monotonic() - t0
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    bad = [r for r in doc["records"] if r["status"] == "error"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
