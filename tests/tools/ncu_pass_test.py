#!/usr/bin/env python3
"""tools/gpu/ncu_pass.py: on a made-up Nsight Compute raw CSV (log lines before the header,
a units row, numbers with thousands separators, three batches' input conversions) it prints
the chosen batch's kernels from its conversion to the next, values as read, and a summary by
kind; a batch the file does not hold, a metric not collected, a value that is not a number,
no CSV and no file exit non-zero with a message naming the file.

usage: ncu_pass_test.py REPO_ROOT
"""
import csv
import io
import os
import subprocess
import sys
import tempfile

from checks import expect, finish

TOOL = os.path.join(sys.argv[1], "tools", "gpu", "ncu_pass.py")


CONVERT = "void strata::elementwise_kernel<2, strata::<unnamed>::ConvertFn<float, __nv_bfloat16>>(Strided<T1>, T2)"
rows = [
    ("void setup_kernel(float *)", "2,000", "10", "0"),
    (CONVERT, "117,000", "154,000,000", "65,000,000"),  # batch 0
    ("sm90_xmma_fprop_implicit_gemm_bf16_tilesize128x64(void)", "600,000", "108,000,000", "380,000,000"),
    ("void cudnn::pooling_fw_kernel_max_nhwc<__nv_bfloat16, float, 3, 1, 0>(int)", "313,000", "411,000,000", "95,000,000"),
    (CONVERT, "116,000", "154,000,000", "65,000,000"),  # batch 1
    ("nvjet_sm90_tst_64x512_relubias_TNT", "56,000", "102,000,000", "74,000,000"),
    (CONVERT, "118,000", "154,000,000", "65,000,000"),  # batch 2 (not whole)
]
lines = ['==PROF== Connected to process 1', 'resnet50_gpu on NVIDIA H200',
         '"ID","Kernel Name","Grid Size","gpu__time_duration.sum","dram__bytes_read.sum","dram__bytes_write.sum"',
         '"","","","nsecond","byte","byte"']
for i, (name, t, rd, wr) in enumerate(rows):
    lines.append(f'"{i}","{name}","(1, 1, 1)","{t}","{rd}","{wr}"')

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "ncu.csv")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")

    def run(*args):
        p = subprocess.run([sys.executable, TOOL, path, *args], capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr

    rc, out, err = run()
    got = list(csv.DictReader(io.StringIO(out)))
    expect(rc == 0, "the first batch: exit 0", err)
    expect([r["kernel"].split("<")[0].split("(")[0] for r in got] ==
           ["void strata::elementwise_kernel", "sm90_xmma_fprop_implicit_gemm_bf16_tilesize128x64",
            "void cudnn::pooling_fw_kernel_max_nhwc"], "the first batch's three kernels, in order", out)
    expect([int(r["ns"]) for r in got] == [117000, 600000, 313000], "durations as read (separators dropped)", out)
    expect(int(got[1]["dram_write_bytes"]) == 380000000, "bytes as read", out)
    expect("3 kernels, 1.030 ms" in err, "the summary's count and total", err)
    expect("cuDNN/cuBLAS convolution or GEMM" in err and "strata::elementwise_kernel" in err,
           "kinds: libraries' GEMMs together, strata's kernels by name", err)
    rc, out, err = run("--pass", "1")
    expect(rc == 0 and "nvjet_sm90_tst_64x512_relubias_TNT" in out and "sm90_xmma" not in out,
           "--pass 1: the second batch only", out + err)
    rc, out, err = run("--pass", "2")
    expect(rc != 0 and "ncu.csv" in err and "whole batches" in err, "a batch the file does not hold: named error",
           out + err)
    with open(path, "w") as f:
        f.write("\n".join(lines[:2] + [lines[2].replace(',"dram__bytes_write.sum"', "")] + lines[3:]) + "\n")
    rc, out, err = run()
    expect(rc != 0 and "no column dram__bytes_write.sum" in err and "Traceback" not in err,
           "a metric not collected: named error", out + err)
    with open(path, "w") as f:
        f.write("\n".join(line.replace('"600,000"', '"n/a"') for line in lines) + "\n")
    rc, out, err = run()
    expect(rc != 0 and "gpu__time_duration.sum" in err and "'n/a'" in err and "Traceback" not in err,
           "a value that is not a number: named error", out + err)
    with open(path, "w") as f:
        f.write("==PROF== nothing profiled\n")
    rc, out, err = run()
    expect(rc != 0 and "no Nsight Compute raw CSV" in err and "Traceback" not in err, "no header: named error",
           out + err)
    os.remove(path)
    rc, out, err = run()
    expect(rc != 0 and "cannot read" in err and "Traceback" not in err, "a missing file: named error", out + err)

finish()
