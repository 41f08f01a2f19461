#!/usr/bin/env python3
"""tools/gpu/ncu_steps_compare.py: two made-up Nsight Compute raw CSVs (one gzip-compressed) of
three training steps, B with one kernel slower and an NCCL kernel more: it cuts both into the
steps between the optimizer's runs, leaves NCCL's kernels out of the comparison (reported apart),
and prints the totals, the ratio by kind and the kernel that grew; steps that run other kernels
are named and not compared; no whole step and no file exit non-zero with a message.

usage: ncu_steps_compare_test.py REPO_ROOT
"""
import gzip
import os
import subprocess
import sys
import tempfile

from checks import expect, finish

TOOL = os.path.join(sys.argv[1], "tools", "gpu", "ncu_steps_compare.py")
CONV = "sm90_xmma_fprop_implicit_gemm_bf16(void)"
APPLY = "void strata::<unnamed>::bn_apply_inner_kernel<__nv_bfloat16, 8, 0>(T1)"
SGD = "void strata::<unnamed>::multi_tensor_kernel<strata::<unnamed>::SgdTensor>(T1)"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)"


def csv_text(kernels):
    lines = ['==PROF== Connected to process 1',
             '"ID","Kernel Name","gpu__time_duration.sum"', '"","","nsecond"']
    lines += [f'"{i}","{n}","{t:,}"' for i, (n, t) in enumerate(kernels)]
    return "\n".join(lines) + "\n"


def steps(apply_ns, nccl=False):
    one = [(CONV, 600000), (APPLY, apply_ns)] + ([(NCCL, 500000)] if nccl else []) + [(SGD, 50000), (SGD, 40000)]
    return [("void setup_kernel(float *)", 1000)] + one * 3


with tempfile.TemporaryDirectory() as d:
    a, b = os.path.join(d, "alone.csv"), os.path.join(d, "rank1.csv.gz")
    with open(a, "w") as f:
        f.write(csv_text(steps(200000)))
    with gzip.open(b, "wt") as f:
        f.write(csv_text(steps(210000, nccl=True)))

    def run(*args):
        p = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr

    rc, out, err = run(a, b)
    expect(rc == 0, "two logs: exit 0", out + err)
    expect(out.count("step ") == 2 and "step 2" not in out, "two whole steps (between three optimizer runs)", out)
    expect("step 0: 4 kernels, A 0.890 ms, B 0.900 ms (1.0112x); NCCL 0.500 ms" in out,
           "a step's totals without NCCL, NCCL apart", out)
    expect("batch norm apply" in out and "1.0500x" in out, "the ratio by kind", out)
    expect("+ 10.0 us    200.0 ->   210.0" in out and "bn_apply_inner_kernel" in out, "the kernel that grew", out)

    with open(a, "w") as f:
        f.write(csv_text(steps(200000) + [(CONV, 1), (SGD, 1)]))
    with gzip.open(b, "wt") as f:
        f.write(csv_text(steps(210000) + [(APPLY, 1), (SGD, 1)]))
    rc, out, err = run(a, b)
    expect(rc == 0 and "step 2: the kernels differ" in out and "not compared" in out,
           "a step that runs other kernels: named, not compared", out + err)

    with open(a, "w") as f:
        f.write(csv_text([(CONV, 1), (SGD, 1)]))
    rc, out, err = run(a, b)
    expect(rc != 0 and "no whole step" in err and "Traceback" not in err, "no whole step: named error", out + err)
    rc, out, err = run(os.path.join(d, "missing.csv"), b)
    expect(rc != 0 and "cannot read" in err and "missing.csv" in err and "Traceback" not in err,
           "a missing file: named error", out + err)

finish()
