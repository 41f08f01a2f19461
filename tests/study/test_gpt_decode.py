#!/usr/bin/env python3
"""The study page's GPT-2 decoding section (tools/study/make_page.py) on a made-up card,
tests/study/fixture/gpt_card/study/ (hand-written files in gpt2_forward --json's and
bench/peers/decode_record.py's schema, each marked "fixture"): two strata processes and both
peers in bf16, one strata process and no peer in fp32. The expected figures are computed here
from the fixture's rounds, independently of the page's code, and found on the page.

    python3 tests/study/test_gpt_decode.py        # as ctest runs it
"""
import glob
import json
import os
import shutil
import statistics
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "study"))
from test_make_page import EXPECTED, generate  # noqa: E402
from paired_runs import paired  # noqa: E402

GPT_CARD = os.path.join(HERE, "fixture", "gpt_card")
STUDY = os.path.join(GPT_CARD, "study")
STATIC = "static, static cache"
DIRECT = "direct (static cache, planned steps)"
GRAPH_DIRECT = "graph (static cache, captured direct step)"


def load(name):
    with open(os.path.join(STUDY, name + ".json")) as f:
        return json.load(f)


def rounds(doc, way):
    return next(w["ms_per_token_by_round"] for w in doc["ways"] if w["way"] == way)


def eleven_round_interval(a, b):
    """Median and 95 % interval of a - b in µs for 11 rounds, by hand: n/2 -/+ 1.96 sqrt(11)/2 =
    5.5 -/+ 3.25, so the ranks floor(2.25) = 2 and ceil(8.75) = 9 of the sorted differences."""
    d = sorted(1e3 * (x - y) for x, y in zip(a, b))
    assert len(d) == 11
    return d[5], d[2], d[9]


class GptOnlyCard(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="study_gpt_")
        cls.page, _ = generate(cls.tmp, card=GPT_CARD)
        start = cls.page.index("**fp32**")
        cls.bf16, cls.fp32 = cls.page[:start], cls.page[start:]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @staticmethod
    def line(text, *parts):
        return next((ln for ln in text.split("\n") if all(p in ln for p in parts)), "")

    def test_only_the_gpt_section(self):
        self.assertIn("### GPT-2, batch-1 decoding", self.page)
        self.assertNotIn("The paper's table beside ours", self.page)  # no ResNet-50 sweep on this card
        self.assertNotIn("What ran, and what did not", self.page)

    def test_one_process_difference_by_hand(self):
        # fp32, static cache - direct: differences 87 87 88 89 90 91 91 92 92 93 93 µs sorted.
        doc = load("gpt_decode_fp32")
        med, lo, hi = eleven_round_interval(rounds(doc, STATIC), rounds(doc, DIRECT))
        self.assertAlmostEqual(med, 91, places=6)
        self.assertAlmostEqual(lo, 88, places=6)
        self.assertAlmostEqual(hi, 93, places=6)
        row = self.line(self.fp32, "| front end: checks")
        self.assertIn("| 91.0 [88.0, 93.0] |", row)
        self.assertIn("| 5.03 % |", row)  # of the static cache's median, 1.810 ms

    def test_paired_matches_the_hand_rule(self):
        doc = load("gpt_decode_fp32")
        a, b = rounds(doc, DIRECT), rounds(doc, GRAPH_DIRECT)
        got = paired([1e3 * (x - y) for x, y in zip(a, b)])
        for g, want in zip(got, eleven_round_interval(a, b)):
            self.assertAlmostEqual(g, want, places=9)

    def test_two_processes_median_of_medians_and_union(self):
        # bf16, static cache - direct: process 1 gives 90 [83, 96], process 2 85 [84, 87].
        meds, los, his = zip(*(eleven_round_interval(rounds(d, STATIC), rounds(d, DIRECT))
                               for d in (load("gpt_decode_bf16"), load("gpt_decode_bf16_2"))))
        self.assertEqual([round(m, 6) for m in meds], [90, 85])
        want = (f"| {statistics.median(meds):.1f} ({min(meds):.1f}–{max(meds):.1f}) "
                f"[{min(los):.1f}, {max(his):.1f}] |")
        self.assertEqual(want, "| 87.5 (85.0–90.0) [83.0, 96.0] |")
        self.assertIn(want, self.line(self.bf16, "| front end: checks"))

    def test_within_noise(self):
        # The virtual call's intervals, [-3, 4] and [-2, 4] µs, both reach 0.
        row = self.line(self.bf16, "| virtual call |")
        self.assertIn("| within noise (±4.00) | – |", row)

    def test_rates_against_pytorch(self):
        torch = {f["form"]: f for f in load("gpt_peers_torch_bf16")["forms"]}
        generate_ms = torch["transformers generate, eager"]["ms_per_token_median"]
        compiled_ms = torch["static-cache loop, torch.compile reduce-overhead"]["ms_per_token_median"]
        graph_ms = statistics.median(sorted(rounds(load(n), GRAPH_DIRECT))[5]
                                     for n in ("gpt_decode_bf16", "gpt_decode_bf16_2"))
        self.assertAlmostEqual(graph_ms, 0.746, places=9)
        row = self.line(self.bf16, f"| strata {GRAPH_DIRECT} |")
        rates = f"| {1e3 / graph_ms:.0f} | {generate_ms / graph_ms:.2f}× | {compiled_ms / graph_ms:.2f}× | yes |"
        self.assertIn(rates, row)
        self.assertIn("| 1340 | 9.69× | 0.82× |", row)
        # fp32 has no peer file: no ratios, and no weights' seed to name.
        self.assertIn("| – | – | yes |", self.line(self.fp32, f"| strata {GRAPH_DIRECT} |"))
        self.assertIn("weights not recorded", self.fp32)
        self.assertIn("random weights (bench/peers/pytorch_gpt2.py export, seed 0)", self.bf16)

    def test_peers_listed_pytorch_first_and_their_tokens(self):
        torch_at = self.bf16.index("| PyTorch 2.5.1, transformers 4.46.3: transformers generate, eager |")
        self.assertLess(torch_at, self.bf16.index("| JAX 0.4.35: jit scan |"))
        self.assertTrue(self.line(self.bf16, "torch.compile reduce-overhead |").endswith("| no |"))
        self.assertIn("| 0.624 | 0.622–0.627 | 11 | 1603 |", self.line(self.bf16, "| JAX 0.4.35: jit scan |"))


    def test_host_and_device_apart(self):
        # bf16 virtual: process medians 0.91 and 0.97 ms (host), 0.47 and 0.50 (device); the range of
        # all six rounds. Two processes: the median of the medians.
        row = next(ln for ln in self.bf16.split("\n") if ln.startswith("| virtual |"))
        self.assertEqual(row, "| virtual | 0.94 (0.9–0.99) | 0.485 (0.46–0.51) | host | 1.94× |")
        row = next(ln for ln in self.bf16.split("\n") if ln.startswith("| graph |"))
        self.assertEqual(row, "| graph | 0.012 (0.01–0.014) | 0.425 (0.4–0.45) | device | 0.03× |")
        self.assertIn("4 steps a round enqueued while the stream is held", self.bf16)
        self.assertNotIn("waited for the held stream", self.bf16)
        # fp32: one process that waited twice: said.
        self.assertIn("**2 round(s) waited for the held stream**", self.fp32)
        self.assertIn("| direct | 0.3 (0.2–0.4) | 0.9 (0.8–1.00) | device |", self.fp32)


    def test_a_second_model_size_has_its_own_block(self):
        # gpt_decode_bf16_medium.json: GPT-2 medium's 24 layers, no peer; after small's bf16 block.
        at = self.page.index("**bf16, 24 layers**: GPT-2 (24 layers, 16 heads, width 1024")
        self.assertLess(self.page.index("**bf16**: GPT-2 (12 layers"), at)
        self.assertIn(f"| strata {GRAPH_DIRECT} | 0.9 | 0.8–1.00 | 3 | 1111 | – | – | yes |", self.page[at:])

    def test_training_in_every_mode(self):
        # gpt_train_b1_t128.jsonl: virtual 6.0, direct 5.0, graph 4.0 ms a step.
        self.assertIn("### GPT-2 small, a training step in every mode", self.page)
        rows = [ln for ln in self.page.split("\n") if ln.startswith("| virtual |") or ln.startswith("| direct |")]
        self.assertIn("| virtual | 6.00 | 5.50–6.50 | 5 × 20 | 21,333 | 2200 | 1.50× |", rows)
        self.assertIn("| direct | 5.00 | 4.90–5.10 | 5 × 20 | 25,600 | 2368 | 1.25× |", rows)
        self.assertIn("**batch 1 × 128 tokens**", self.page)


class GptBesideResNet(unittest.TestCase):
    def test_resnet_page_unchanged_and_the_section_after_it(self):
        tmp = tempfile.mkdtemp(prefix="study_gpt_")
        try:
            plain, _ = generate(tmp)
            page, _ = generate(tmp, extra=sorted(glob.glob(os.path.join(STUDY, "*.json"))))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        with open(EXPECTED) as f:
            self.assertEqual(plain, f.read())
        self.assertNotIn("GPT-2", plain)
        head, sep, tail = page.partition("\n### GPT-2, batch-1 decoding\n")
        self.assertTrue(sep)
        def but_raw_data(text):  # the list of raw files names the GPT files too
            return [ln for ln in text.rstrip("\n").split("\n") if not ln.startswith("Raw data: ")]
        self.assertEqual(but_raw_data(head), but_raw_data(plain), "the ResNet-50 sections changed beside GPT files")
        self.assertIn("**bf16**", tail)

    def test_peers_without_strata(self):
        tmp = tempfile.mkdtemp(prefix="study_gpt_")
        try:
            page, _ = generate(tmp, card=GPT_CARD, without=("gpt_decode_bf16", "gpt_decode_bf16_2", "gpt_decode_fp32"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertIn("| JAX 0.4.35: jit scan |", page)
        self.assertNotIn("What each layer costs per token", page)


if __name__ == "__main__":
    unittest.main()
