#!/usr/bin/env python3
"""The deployment table from what tools/gpu/deploy.sh left in its work folder: OUT/deploy.json (every
figure, raw) and OUT/deploy.md (the table). Nothing is assumed: a figure whose run failed or was
skipped is shown as the step's error line. Standard library, plus numpy for the output checks
(skipped, and said so, without it).

    python3 tools/gpu/deploy_table.py --work WORK --pkg .gpu --out OUT [--starts 5] [--repeat 500]
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "peers"))
import deploy_libs  # noqa: E402


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def last_json(path):
    text = read(path) or ""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return None


class Work:
    def __init__(self, work):
        self.dir = work

    def path(self, name):
        return os.path.join(self.dir, name)

    def step(self, sid):
        """{"rc", "seconds", "error"} of a step deploy.sh ran, or None where it never ran."""
        text = read(self.path(sid + ".rc"))
        if text is None:
            return None
        rc, seconds = (text.split() + ["0", "0"])[:2]
        r = {"rc": int(rc), "seconds": int(seconds)}
        if r["rc"] != 0:
            r["error"] = self.why(sid, r["rc"])
        return r

    def why(self, sid, rc):
        """The line that says why a step failed: a Python traceback's last, else the first error line."""
        if rc == 124:
            return "timed out"
        lines = [ln.strip() for ln in (read(self.path(sid + ".log")) or "").splitlines() if ln.strip()]
        if not lines:
            return f"exit status {rc}, no output"
        if rc == 125:
            return lines[0]
        if any(ln.startswith("Traceback") for ln in lines):
            return lines[-1][:200]
        # A compiler's or CMake's own error line before ninja's "FAILED: target" summary.
        for pattern in (r"error:|CMake Error|fatal", r"error|not found|No such", r"FAILED"):
            for ln in lines:
                if re.search(pattern, ln, re.I):
                    return ln[:200]
        return lines[-1][:200]


def median_of(log, pattern):
    m = re.search(pattern, read(log) or "")
    return float(m.group(1)) if m else None


def starts_of(work, form):
    """Start-to-first-result seconds of the form's fresh processes: the output's mtime less the launch
    time (the exit time where the mtime could not be read)."""
    text = read(work.path("starts.jsonl")) or ""
    runs = []
    for ln in text.splitlines():
        try:
            runs.append(json.loads(ln))
        except ValueError:  # a line deploy.sh could not complete: its process's own line was cut
            continue
    runs = [r for r in runs if r.get("form") == form]
    ok, failed, firsts, exits = [], [], [], []
    for r in runs:
        if r["rc"] != 0:
            failed.append(r)
            continue
        ok.append(r)
        t_out = r.get("t_output")
        firsts.append((t_out if t_out is not None and t_out >= r["t0"] else r["t_exit"]) - r["t0"])
        exits.append(r["t_exit"] - r["t0"])
    s = {"runs": runs, "n": len(runs), "ok": len(ok)}
    if firsts:
        s.update({"first_result_s": statistics.median(firsts), "first_result_all_s": firsts,
                  "exit_s": statistics.median(exits)})
    if failed:
        s["error"] = work.why(f"start_{form}_{failed[0]['round']}", failed[0]["rc"])
    return s


def compare(got, want):
    """max |got - want| relative to max |want|, or a reason."""
    if not (os.path.exists(got) and os.path.exists(want)):
        return None
    try:
        import numpy as np
    except ImportError:
        return "numpy missing: not compared"
    a, b = np.load(got).astype(np.float64), np.load(want).astype(np.float64)
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    return float(abs(a - b).max() / max(abs(b).max(), 1e-30))


def libs_from_ldd(work, name, own=()):
    text = read(work.path(name))
    return deploy_libs.from_ldd(text, own) if text is not None else None


def build(args):
    w = Work(args.work)
    pkg_lib = os.path.abspath(os.path.join(args.pkg, "lib"))
    steps = {os.path.basename(p)[:-3]: w.step(os.path.basename(p)[:-3])
             for p in sorted(glob.glob(w.path("*.rc")))}
    compile_info = last_json(w.path("aoti_compile.log")) or {}
    py = last_json(w.path("time_aoti_python.log")) or {}
    cpp = last_json(w.path("time_aoti_cpp.log")) or {}
    gen_dir = w.path("gen")
    runner = w.path(os.path.join("aoti_runner_build", "aoti_runner"))
    strata_bin = os.path.join(args.pkg, "bin", "strata_codegen")

    def failed(*sids):
        for sid in sids:
            s = steps.get(sid)
            if s is None:
                return f"{sid}: not run"
            if s["rc"] != 0:
                return f"{sid}: {s['error']}"
        return None

    rows = []
    # (1) the generated program.
    mr_err = failed("gen", "gen_build")
    mr_libs = None
    if os.path.exists(w.path("time_model_run.libs.json")):
        mr_libs = json.loads(read(w.path("time_model_run.libs.json")) or "null")
    bitwise = (read(w.path("bitwise.txt")) or "").strip() or None
    gen_line = next((ln for ln in (read(w.path("gen.log")) or "").splitlines() if " calls, " in ln), None)
    base_mr = {
        "code_bytes": size(os.path.join(gen_dir, "build", "model_run")),
        "code_how": "model_run (the model's static library linked in)",
        "weights_bytes": size(os.path.join(gen_dir, "weights.bin")),
        "libs_ldd": libs_from_ldd(w, "ldd_model_run.txt"),
        "libs_mapped": mr_libs,
        "start": starts_of(w, "model_run"),
        "check": None if bitwise is None else f"bitwise equal to strata's output: {bitwise}",
        "generated": gen_line,
    }

    def forward_times(log):
        """model_run's host, device and wall ms of the forward alone on a resident input (None where it
        did not print them: a program generated before it did)."""
        head = r"time per forward, input resident: host "
        return {"host_ms": median_of(log, head + r"([0-9.]+) ms"),
                "device_ms": median_of(log, head + r"[0-9.]+ ms, device ([0-9.]+) ms"),
                "wall_ms": median_of(log, head + r"[0-9.]+ ms, device [0-9.]+ ms, wall ([0-9.]+) ms")}

    rows.append(dict(base_mr, form="strata_codegen's program: model_run, CUDA graph", error=mr_err or failed(
        "time_model_run"), io_wall_ms=median_of(w.path("time_model_run.log"), r"time per run: ([0-9.]+) ms median"),
        **forward_times(w.path("time_model_run.log"))))
    rows.append({"form": "strata_codegen's program: model_run --no-graph", "same_as": rows[0]["form"],
                 "error": mr_err or failed("time_model_run_nograph"),
                 "io_wall_ms": median_of(w.path("time_model_run_nograph.log"), r"time per run: ([0-9.]+) ms median"),
                 **forward_times(w.path("time_model_run_nograph.log"))})
    # (2) strata itself, timed by strata_codegen --time (strata_infer takes no random weights nor .npy).
    st_libs = None
    if os.path.exists(w.path("time_strata.libs.json")):
        st_libs = json.loads(read(w.path("time_strata.libs.json")) or "null")
    st_ldd = libs_from_ldd(w, "ldd_strata.txt", [pkg_lib])
    own = (st_ldd or {}).get("own_bytes")
    strata_code = size(strata_bin)
    for mode in ("direct", "graph"):
        rows.append({
            "form": f"strata, {mode} mode (strata_codegen --time)",
            "code_bytes": None if strata_code is None else strata_code + (own or 0),
            "code_how": "strata_codegen and the strata libraries it links",
            "weights_bytes": None, "weights_how": "none on disk: initialised in the process (seed 3)",
            "libs_ldd": st_ldd, "libs_mapped": st_libs,
            "start_how": "not measured: strata_infer reads a strata_train checkpoint and an image, not random "
                         "weights and an .npy; strata_codegen records and writes a project before its first result",
            "error": failed("time_strata"),
            "io_wall_ms": median_of(w.path("time_strata.log"), rf"strata's {mode} mode on cuda: ([0-9.]+) ms median"),
        })
    # (3) AOTInductor.
    code_pt2 = compile_info.get("code_bytes")
    comp_err = failed("aoti_compile")
    ref = w.path("aoti_expected.npy")
    for form, info, label, extra_err in (
            ("aoti_python", py, "AOTInductor .pt2 from Python (aoti_load_package)", None),
            ("aoti_cpp", cpp, "AOTInductor .pt2 from C++ (aoti_runner, LibTorch)", failed("runner_build"))):
        code = code_pt2
        how = compile_info.get("code_bytes_how", "")
        if form == "aoti_cpp":
            rb = size(runner)
            code = None if code is None or rb is None else code + rb
            how = "aoti_runner + " + how
        libs = info.get("libs")
        rows.append({
            "form": label, "code_bytes": code, "code_how": how,
            "weights_bytes": compile_info.get("weights_bytes"),
            "weights_how": "inside the package's .so" if compile_info.get("package_constants_in_so") else None,
            "libs_ldd": libs_from_ldd(w, "ldd_aoti_cpp.txt") if form == "aoti_cpp" else None,
            "libs_mapped": libs,
            "start": starts_of(w, form),
            "error": comp_err or extra_err or failed("time_" + form),
            "host_ms": (info.get("host_ms") or {}).get("median"),
            "device_ms": (info.get("device_ms") or {}).get("median"),
            "wall_ms": (info.get("wall_ms") or {}).get("median"),
            "io_wall_ms": (info.get("io_wall_ms") or {}).get("median"),
            "load_s": info.get("load_s"),
            # The timed run's first result, else the first fresh start's.
            "check_rel_diff_vs_eager": compare(w.path(f"time_{form}.npy"), ref) if os.path.exists(
                w.path(f"time_{form}.npy")) else compare(w.path(f"start_{form}_0.npy"), ref),
            "self": info,
        })
    builds = {
        "gen": "strata_codegen: record on the GPU and write the project (--check)",
        "gen_build": "the generated project: CMake + Ninja (nvcc, g++)",
        "aoti_compile": "AOTInductor: torch.export + aoti_compile_and_package (two builds beside it)",
        "runner_build": "aoti_runner: CMake + Ninja against the pip package's LibTorch",
    }
    return {"env": (read(w.path("env.txt")) or "").strip().splitlines(), "starts": args.starts,
            "repeat": args.repeat, "steps": steps, "builds": builds, "aoti_compile": compile_info, "rows": rows}


def mb(b):
    return "" if b is None else f"{b / 1e6:.1f} MB"


def cell(v, fmt):
    return "" if v is None else fmt.format(v)


def libs_cell(libs):
    if not libs:
        return ""
    s = f"{libs['bytes'] / 1e6:.0f} MB ({libs['count']})"
    if libs.get("not_found"):
        s += f", not found: {' '.join(libs['not_found'])}"
    return s


def md(t):
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    out = ["# Deployment table: ResNet-50, batch 1, 3x224x224, f32", ""]
    out += [f"{ln}  " for ln in t["env"]] + [""]
    out.append("| form | code on disk | weights on disk | shared libraries (ldd) | shared libraries (mapped) "
               f"| start → first result (median of {t['starts']}) | host ms | device ms | wall ms "
               "| wall ms, input in and output out | check |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in t["rows"]:
        if r.get("same_as"):
            vals = ["as above"] * 5 + ["", "", ""]
        else:
            st = r.get("start") or {}
            start = cell(st.get("first_result_s"), "{:.2f} s")
            if start and st.get("ok") != st.get("n"):
                start += f" ({st['ok']} of {st['n']} ran)"
            if not start:
                start = "n/a" if r.get("start_how") else (st.get("error") or "")
            weights = mb(r.get("weights_bytes")) or ("none" if r.get("weights_how") else "")
            vals = [mb(r.get("code_bytes")), weights, libs_cell(r.get("libs_ldd")) or "n/a",
                    libs_cell(r.get("libs_mapped")), start,
                    cell(r.get("host_ms"), "{:.3f}"), cell(r.get("device_ms"), "{:.3f}"),
                    cell(r.get("wall_ms"), "{:.3f}")]
        check = r.get("check") or ""
        if r.get("check_rel_diff_vs_eager") is not None:
            d = r["check_rel_diff_vs_eager"]
            check = f"max diff vs eager PyTorch {d:.2e} of max" if isinstance(d, float) else str(d)
        io = cell(r.get("io_wall_ms"), "{:.3f}")
        if r.get("error"):
            io = io or ""
            check = (check + "; " if check else "") + "FAILED: " + r["error"]
        out.append("| " + " | ".join(esc(v) for v in [r["form"]] + vals + [io, check]) + " |")
    out += ["", "| build step | seconds | status |", "| --- | ---: | --- |"]
    for sid, what in t["builds"].items():
        s = t["steps"].get(sid)
        status = "not run" if s is None else ("ok" if s["rc"] == 0 else s.get("error", f"rc {s['rc']}"))
        out.append(f"| {esc(what)} | {'' if s is None else s['seconds']} | {esc(status)} |")
    c = t["aoti_compile"]
    if c.get("compile_s") is not None:
        out.append("")
        out.append(f"AOTInductor compile: export {c['export_s']:.1f} s, aoti_compile_and_package {c['compile_s']:.1f} s, "
                   f"the whole process {c['total_s']:.1f} s (torch {c.get('torch')}); package {mb(c.get('package_bytes'))}, "
                   f"its weights {mb(c.get('weights_bytes'))} ({c.get('code_bytes_how')}).")
    out += ["", "Notes:",
            "- start → first result: launch to the output file's mtime, fresh processes with the forms' order "
            "rotated; includes CUDA and cuDNN initialisation (and Python's imports); the page cache is warm.",
            f"- per-inference times: medians of {t['repeat']} runs after warm-up. model_run prints one figure, "
            "a run with the input copied in and the output out; strata_codegen --time likewise. host: a host clock "
            "around AOTI's run() (it does not synchronise); device: CUDA events around it; wall: run() and the "
            "synchronisation.",
            "- shared libraries: the sum of the distinct .so files' sizes (count in brackets), from ldd (what the "
            "dynamic linker loads at start) and from the running process's /proc/PID/maps after its first result "
            "(also what it dlopens); the program's own code (strata's libraries, the AOTI model's .so) is counted "
            "under code, not here."]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--pkg", default=".gpu")
    ap.add_argument("--out", required=True)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=500)
    args = ap.parse_args()
    t = build(args)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "deploy.json"), "w") as f:
        json.dump(t, f, indent=1)
        f.write("\n")
    text = md(t)
    with open(os.path.join(args.out, "deploy.md"), "w") as f:
        f.write(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
