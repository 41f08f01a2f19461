#!/usr/bin/env bash
# GPT on two GPUs against one: a small GPT (2 layers, 128 wide, vocabulary 512, 64 tokens) trained
# with AdamW in fp32 by 2 ranks of batch B (gradients averaged in buckets over NCCL) must match
#  (a) one GPU with the doubled batch 2B on the same tokens (layer norm has no batch statistics, so
#      the arithmetic is the same up to the order of float sums): every step's loss and every
#      parameter's L1 norm within 1e-3 relative;
#  (b) itself across ranks: every rank's parameters the same bits as rank 0's after the last step;
#  (c) 2 ranks that stage the gradients by copies (--no-grad-views): exactly;
#  and, when direct and graph modes are both given, graph mode's 2-GPU runs (the step and its
#  all-reduces captured in one CUDA graph) must match direct mode's exactly.
# Usage: gpt_two_gpus_match_one.sh <gpt2_dist> [dispatch...]   (exit 77: fewer than 2 GPUs)
set -euo pipefail
prog=$1
shift
modes=${*:-direct}
# shellcheck source=tests/dist/two_gpus.sh
. "$(dirname "$0")/two_gpus.sh"
common="--layers 2 --heads 4 --embd 128 --vocab 512 --block 64 --seq 64 --precision fp32 --lr 1e-3 --steps 5 --warmup 1"
rc=0
for mode in $modes; do
  # shellcheck disable=SC2086
  "$prog" $common --dispatch "$mode" --batch 8 --nproc 2 --record "$out/two_$mode.json"
  # shellcheck disable=SC2086
  "$prog" $common --dispatch "$mode" --batch 8 --nproc 2 --no-grad-views --record "$out/staged_$mode.json"
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} "$prog" $common --dispatch "$mode" --batch 16 \
    --record "$out/one_$mode.json"
  python3 - "$out" "$mode" <<'PY' || rc=1
import json, sys
from run_checks import Checks, rel
out, mode = sys.argv[1], sys.argv[2]
two, staged, one = (json.load(open(f"{out}/{n}_{mode}.json")) for n in ("two", "staged", "one"))
c = Checks(mode)
check = c.check
for run, d in (("bucket views", two), ("staged", staged)):
    c.require(f"2 GPUs ({run}): every rank's parameters the same bits as rank 0's", d["replicas_identical"])
check("2 GPUs, gradients as bucket views vs staged by copies, step losses and parameter checksums",
      max([rel(a, b) for a, b in zip(two["losses"], staged["losses"])] +
          [rel(x, y) for k in two["params"] for x, y in zip(two["params"][k], staged["params"][k])]), 0.0)
check("2 GPUs (batch 8 each) vs 1 GPU (batch 16), step losses",
      max(rel(a, b) for a, b in zip(two["losses"], one["losses"])), 1e-3)
check("2 GPUs (batch 8 each) vs 1 GPU (batch 16), parameters' L1 norms",
      max(rel(two["params"][k][1], one["params"][k][1]) for k in two["params"]), 1e-3)
print(f"{mode}: losses 2 GPUs", " ".join(f"{x:.6f}" for x in two["losses"]))
print(f"{mode}: losses 1 GPU ", " ".join(f"{x:.6f}" for x in one["losses"]))
sys.exit(0 if c.ok else 1)
PY
done
if [[ " $modes " == *" direct "* && " $modes " == *" graph "* ]]; then
  python3 - "$out" <<'PY' || rc=1
import json, sys
out = sys.argv[1]
ok = True
for run in ("two", "staged"):
    d, g = (json.load(open(f"{out}/{run}_{m}.json")) for m in ("direct", "graph"))
    same = d["losses"] == g["losses"] and d["params"] == g["params"]
    ok = ok and same
    print(f"graph vs direct, GPT on 2 GPUs ({run}): step losses and parameter checksums",
          "bitwise equal" if same else "DIFFER: FAIL")
sys.exit(0 if ok else 1)
PY
fi
exit $rc
