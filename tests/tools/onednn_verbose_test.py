#!/usr/bin/env python3
"""bench/libtorch/onednn_verbose.py: on made-up ONEDNN_VERBOSE output (create lines, other log
lines, four forwards of a four-primitive network with the first one slower) it prints the
per-position medians' total without the skipped forwards, the kinds with their GFLOP and
GFLOP/s, and with --calls each convolution's rate; a log with no forward, a time that is not a
number and a missing file exit non-zero with a message naming the file.

usage: onednn_verbose_test.py REPO_ROOT
"""
import os
import subprocess
import sys
import tempfile

from checks import expect, finish

TOOL = os.path.join(sys.argv[1], "bench", "libtorch", "onednn_verbose.py")

STEM = "mb1_ic3oc64_ih224oh112kh7sh2dh0ph3_iw224ow112kw7sw2dw0pw3"  # 0.236 GFLOP
ONE = "mb1_ic64oc256_ih56oh56kh1sh1dh0ph0_iw56ow56kw1sw1dw0pw0"  # 0.103 GFLOP
WINO = "mb1_ic64oc64_ih56oh56kh3sh1dh0ph1_iw56ow56kw3sw1dw0pw1"  # 0.231 GFLOP


def forward(scale):
    return [
        f"onednn_verbose,exec,cpu,convolution,brgconv:avx512_core,forward_inference,src,,alg,{STEM},{1.0 * scale}",
        f"onednn_verbose,exec,cpu,convolution,brgconv_1x1:avx512_core,forward_inference,src,,alg,{ONE},{0.5 * scale}",
        "onednn_verbose,exec,cpu,reorder,jit:uni,undef,src dst,,,1x64x56x56,0.1",
        f"onednn_verbose,exec,cpu,convolution,jit_fp32_wino_2x3:avx512_core,forward_inference,src,,alg,{WINO},"
        f"{0.6 * scale}",
    ]


lines = ["onednn_verbose,info,oneDNN v2.6.3", "onednn_verbose,create:cache_miss,cpu,convolution,x,1.0",
         "## resnet50_infer_b1_224"]
lines += forward(10) + forward(1) + forward(1) + forward(1)

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "verbose.log")

    def write(ls):
        with open(path, "w") as f:
            f.write("\n".join(ls) + "\n")

    def run(*args):
        p = subprocess.run([sys.executable, TOOL, path, *args], capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr

    write(lines)
    rc, out, err = run("--skip", "1")
    expect(rc == 0, "exit 0", err)
    expect("3 forwards of 4 primitives" in out and "total 2.20 ms" in out,
           "the slow first forward skipped: 3 forwards, 2.20 ms", out)
    expect(any(line.split()[:3] == ["1", "0.50", "0.103"] and "convolution 1x1" in line for line in out.splitlines()),
           "the 1x1 convolution: 1 call, 0.50 ms, 0.103 GFLOP", out)
    expect("205.5  convolution 1x1" in out, "its rate: 0.103 GFLOP in 0.5 ms", out)
    expect("Winograd (jit_fp32_wino_2x3)" in out and "convolution stem" in out and "reorder jit" in out,
           "kinds named: Winograd with its kernel, the stem, reorders", out)
    rc, out, err = run("--skip", "0")
    expect(rc == 0 and "4 forwards" in out, "--skip 0 keeps the slow one (median unchanged)", out + err)
    rc, out, err = run("--calls")
    expect(rc == 0 and "385.4 GFLOP/s  jit_fp32_wino_2x3" in out, "--calls: the Winograd call at 385.4 GFLOP/s",
           out + err)
    write(lines[:3])
    rc, out, err = run()
    expect(rc != 0 and "verbose.log" in err and "ONEDNN_VERBOSE=1" in err and "Traceback" not in err,
           "no forward: named error", out + err)
    write(lines[:4] + [lines[4].rsplit(",", 1)[0] + ",fast"])
    rc, out, err = run()
    expect(rc != 0 and "verbose.log:5" in err and "'fast'" in err and "Traceback" not in err,
           "a time that is not a number: named error with the line", out + err)
    os.remove(path)
    rc, out, err = run()
    expect(rc != 0 and "cannot read" in err and "Traceback" not in err, "a missing file: named error", out + err)

finish()
