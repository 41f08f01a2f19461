#!/usr/bin/env python3
"""tools/study/make_page.py on a small fixed input (tests/study/fixture/, written by
make_fixture.py): the page matches expected_RESULTS.md, and the numbers that matter are
recomputed here from the fixture and found on the page.

    python3 tests/study/test_make_page.py            # as ctest runs it
    python3 tests/study/test_make_page.py --update   # rewrite expected_RESULTS.md
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MAKE_PAGE = os.path.join(ROOT, "tools", "study", "make_page.py")
FIXTURE = os.path.join(HERE, "fixture", "fake_card")
EXPECTED = os.path.join(HERE, "expected_RESULTS.md")


def generate(tmp, plots=False, without=(), card=FIXTURE, extra=()):
    """The page of one card (a fixture folder holding study/), less the study files named in
    `without`, plus the files in `extra`; returns it and the copied card's study folder."""
    results = os.path.join(tmp, "docs", "results")
    shutil.rmtree(results, ignore_errors=True)
    study = os.path.join(results, os.path.basename(card), "study")
    shutil.copytree(card, os.path.dirname(study))
    for name in without:  # study files left out, to see the page without them
        os.remove(os.path.join(study, name + ".json"))
    for path in extra:
        shutil.copy(path, study)
    out = os.path.join(tmp, "docs", "RESULTS.md")
    cmd = [sys.executable, MAKE_PAGE, "--results", results, "--out", out] + ([] if plots else ["--no-plots"])
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    with open(out) as f:
        return f.read(), study


def fixture(name):
    with open(os.path.join(FIXTURE, "study", name + ".json")) as f:
        return json.load(f)


def record(doc, impl, kind, b, r):
    return next(x for x in doc["records"] if (x["impl"], x["kind"], x["batch"], x["resolution"]) == (impl, kind, b, r))


class MakePage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="study_page_")
        cls.page, cls.study = generate(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def line_with(self, *parts):
        hits = [ln for ln in self.page.split("\n") if all(p in ln for p in parts)]
        self.assertTrue(hits, f"no line with {parts}")
        return hits[0]

    def test_layer_costs_say_what_they_resolve(self):
        # Paired differences: a layer whose intervals span 0 is "within noise", the others
        # give each op's median and interval; graph replay adds the launch row.
        self.assertIn("within noise (±110)", self.line_with("virtual call (virtual − static)", "within noise"))
        self.assertIn("relu64 500 [410, 580]", self.line_with("front end: checks"))
        self.assertIn("4600 [4480, 4860]", self.line_with("launch (direct − graph replay)"))

    def test_matches_expected_page(self):
        with open(EXPECTED) as f:
            self.assertEqual(self.page, f.read(), "page differs from tests/study/expected_RESULTS.md "
                                                  "(run test_make_page.py --update after checking the change)")

    def test_seed_table(self):
        # The seed's values come from tools/study/data; its PyTorch / cuDNN ratio is computed.
        row = self.line_with("| 8 × 64 | 3.15 |")
        self.assertIn("| 5.03× |", row)  # 3.15393 / 0.627056
        eager = record(fixture("torch_sweep"), "pytorch_eager", "eval", 8, 64)["ms_per_sample"]
        direct = record(fixture("strata_sweep"), "strata_direct", "eval", 8, 64)["ms_per_sample"]
        self.assertIn(f"| {eager / direct:.2f}× |", row)

    def test_peer_reasons(self):
        # CUDA graphs enqueue in 0.05 ms: strata's best mode is the host-bound side.
        s = record(fixture("strata_sweep"), "strata_direct", "eval", 8, 32)
        g = record(fixture("torch_sweep"), "pytorch_cudagraph", "eval", 8, 32)
        q = s["device_ms"]["median"] / g["device_ms"]["median"]
        self.assertIn(f"{q:.2f}× strata host-bound (enqueue 3.50 of 3.55 ms)", self.line_with("| 8 × 32 | direct"))
        # Device-bound where compute dominates.
        self.assertIn("device time (kernels: 13.5 vs 10.3 ms)", self.line_with("| 32 × 64 | virtual"))

    def test_dispatch_layers_without_paired_differences(self):
        # Means of separately measured paths: (2210 - 2200) ns per call x 174 calls / 4.05 ms step = 0.043 %
        tmp = tempfile.mkdtemp(prefix="study_page_")
        try:
            page, _ = generate(tmp, without=("dispatch_paired",))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        row = next(ln for ln in page.split("\n") if "virtual call (virtual − static)" in ln)
        self.assertIn("| 10.0 | 0.043 % |", row)
        self.assertIn("| 199 |", next(ln for ln in page.split("\n") if "front end: checks" in ln))

    def test_generated_rows(self):
        # A generated program beside the mode it was recorded from: its device time, the ratio and the
        # difference; a program that does not reproduce strata's output is listed as not measured.
        tmp = tempfile.mkdtemp(prefix="study_page_")
        try:
            path = os.path.join(tmp, "generated_sweep.json")
            base = {"framework": "strata_codegen (cuDNN, cuBLAS)", "kind": "eval", "batch": 8, "resolution": 64,
                    "calls": 58, "code_lines": 1822, "model_lines": 1122, "program_bytes": 1900000}
            with open(path, "w") as f:
                json.dump({"framework": "strata_codegen", "elapsed_s": 60,
                           "protocol": {"warmup": 1, "min_repeats": 100, "max_repeats": 100, "min_seconds": 0},
                           "records": [
                    dict(base, impl="generated", status="ok", bitwise=True, device_ms={"median": 3.40},
                         host_ms={"median": 2.9}, wall_ms={"median": 3.45}, ms_per_sample=0.425,
                         peak_bytes=2 ** 27),
                    dict(base, impl="generated_cudagraph", status="error", bitwise=False,
                         note="model_run's output is not strata's direct-mode output bit for bit"),
                    dict(base, impl="generated", model="lenet", batch=1, resolution=28, status="ok", bitwise=True,
                         device_ms={"median": 0.05}, host_ms={"median": 0.03}, io_ms={"median": 0.106},
                         strata_io_ms={"direct": 0.103, "graph": 0.062}, calls=10, code_lines=1216,
                         model_lines=516, program_bytes=1000000),
                    dict(base, impl="generated", kind="train", batch=32, resolution=32, status="ok", bitwise=True,
                         device_ms=None, io_ms={"median": 11.0}, strata_io_ms={"direct": 12.0, "graph": 10.0}),
                    dict(base, impl="generated_cudagraph", kind="train", batch=32, resolution=32, status="ok",
                         bitwise=True, device_ms=None, io_ms={"median": 9.0}),
                    dict(base, impl="generated_cudagraph", model="lenet", batch=1, resolution=28, status="ok",
                         bitwise=True, device_ms={"median": 0.04}, host_ms={"median": 0.01},
                         io_ms={"median": 0.060}, calls=10, code_lines=1216, model_lines=516,
                         program_bytes=1000000)]}, f)
            page, _ = generate(tmp, extra=(path,))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        row = next(ln for ln in page.split("\n") if ln.startswith("| eval | 8 × 64 | direct |"))
        direct = record(fixture("strata_sweep"), "strata_direct", "eval", 8, 64)
        self.assertIn(f"| {direct['device_ms']['median']:.2f} | 3.40 | {3.40 / direct['device_ms']['median']:.2f}× |",
                      row)
        self.assertIn("| 128 | yes |", row)
        cost = next(ln for ln in page.split("\n") if "| direct − generated |" in ln)
        self.assertIn(f"| {1e3 * (direct['device_ms']['median'] - 3.40):.0f} |", cost)
        self.assertIn("resnet50 8 × 64: 58 calls, 1822 lines (1122 in `model.cpp`), `model_run` 1.90 MB", page)
        # LeNet-5's rows: listed with the input-in, output-out figures, never in the ResNet-50 tables.
        self.assertIn("| eval | lenet | 1 × 28 | 0.103 | 0.106 | 1.03× | 0.062 | 0.06 | 0.97× |", page)
        # A training step: in the input-in, output-out table only.
        self.assertIn("| train | resnet50 | 32 × 32 | 12.0 | 11.0 | 0.92× | 10.0 | 9.00 | 0.90× |", page)
        self.assertNotIn("| train | 32 × 32 | direct |", page)
        self.assertIn("lenet 1 × 28: 10 calls, 1216 lines (516 in `model.cpp`), `model_run` 1.00 MB; resnet50", page)
        self.assertIn("- `generated_sweep.json` (strata_codegen): warm-up 1, at least 100 timed steps", page)
        self.assertNotIn("| eval | 1 × 28 |", page)
        self.assertIn("Not measured: generated_cudagraph eval 8 × 64: error (model_run's output is not strata's",
                      page)
        self.assertNotIn("Generated code", self.page)  # the fixture alone has no generated rows

    def test_parity_and_status(self):
        self.assertIn("losses bitwise equal to strata_static, strata_direct", self.line_with("| strata_virtual | 12 |"))
        self.assertIn("| 0.001 | 0.001 |", self.line_with("| strata_virtual | 12 |"))
        self.assertIn("| strata_cudagraph | 0 | 0 | 0 | 8 | 0 | – |", self.page)
        self.assertIn("| strata_direct | 7 | 1 | 0 | 0 | 0 | – |", self.page)
        self.assertIn("| torch_compile | 8 | 0 | 0 | 0 | 0 | 30.0 / 30.0 |", self.page)
        self.assertIn("| strata_direct | 363 |", self.page)

    def test_copies(self):
        self.assertIn("| 32 × 64 | strata | 1.57 | 0.262 | 0.0655 | 6.00 | 24.0 | 4.00× |", self.page)
        self.assertIn("Here PyTorch eager sends 1.00×–1.00× strata's bytes per batch.", self.page)

    def test_csv(self):
        with open(os.path.join(self.study, "points.csv")) as f:
            lines = f.read().strip().split("\n")
        n = sum(len(fixture(s)["records"]) for s in ("strata_sweep", "torch_sweep", "compile_sweep", "libtorch_sweep"))
        self.assertEqual(len(lines), n + 1)
        self.assertTrue(lines[0].startswith("impl,framework,kind,batch,resolution,status"))

    def test_deterministic(self):
        again, _ = generate(self.tmp)
        self.assertEqual(self.page, again)

    @unittest.skipUnless(shutil.which("gnuplot"), "gnuplot not installed")
    def test_plots(self):
        page, study = generate(tempfile.mkdtemp(prefix="study_plots_", dir=self.tmp), plots=True)
        pngs = sorted(os.listdir(os.path.join(study, "plots")))
        self.assertEqual(len(pngs), 8)
        for p in pngs:
            with open(os.path.join(study, "plots", p), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertIn(f"plots/{p})", page)


class PairedRuns(unittest.TestCase):
    """tools/study/paired_runs.py's aggregation of several processes' paired rows."""

    def test_median_over_processes_and_the_union_of_intervals(self):
        sys.path.insert(0, os.path.join(ROOT, "tools", "study"))
        from paired_runs import aggregate

        def row(med, lo, hi, layer="front end (static − direct plan)"):
            return {"op": "relu64", "backend": "cuda", "layer": layer, "median_ns": med, "lo_ns": lo, "hi_ns": hi,
                    "rounds": 21}
        runs = [[row(276, 274, 279), row(5, -3, 9, "virtual call (virtual − static)")],
                [row(122, 120, 123), row(7, 2, 11, "virtual call (virtual − static)")],
                [row(130, 128, 131), row(6, 1, 8, "virtual call (virtual − static)")]]
        front, virtual = aggregate(runs)
        self.assertEqual(front["layer"], "front end (static − direct plan)")  # first seen, first out
        self.assertEqual(front["median_ns"], 130)
        self.assertEqual((front["lo_ns"], front["hi_ns"]), (120, 279))
        self.assertEqual(front["process_median_ns"], [276, 122, 130])
        self.assertEqual(front["processes"], 3)
        self.assertEqual(virtual["median_ns"], 6)
        self.assertEqual((virtual["lo_ns"], virtual["hi_ns"]), (-3, 11))  # one process reaches 0: unresolved


if __name__ == "__main__":
    if "--update" in sys.argv:
        tmp = tempfile.mkdtemp()
        page, _ = generate(tmp)
        with open(EXPECTED, "w") as f:
            f.write(page)
        shutil.rmtree(tmp)
        print(f"wrote {EXPECTED}")
        sys.exit(0)
    unittest.main()
