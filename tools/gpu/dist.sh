#!/usr/bin/env bash
# Data-parallel runs on a machine with two GPUs, from the repository root, in one
# device call: the 2-GPU checks (tests/dist/*.sh), then ResNet-50 bf16 channels-last
# batch 256 per GPU through strata on 1 and 2 GPUs and PyTorch DDP (torchrun) on 1 and 2, and
# strata on 2 GPUs with the gradients staged by copies (--no-grad-views) beside the bucket views.
# Meant to take under 8 minutes on 2 H100s (each section prints its start time). Knobs:
# MODES (the checks' dispatch modes, default "direct graph": graph mode's runs are also checked
# bitwise against direct mode's), BENCH_MODES ("direct graph"),
# STEPS (30), WARMUP (5).
# Pack first:  TARGETS="dist_resnet test_dist test_dist_buckets" tools/gpu/pack.sh
# (the scripts this one runs are taken from $PKG when copied there, else from the tree).
# Results: $OUT/dist.jsonl (one JSON line per throughput run) and $OUT/dist.log.
set -uo pipefail
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-dist}
checks=/tmp/strata-dist-checks  # the checks' records, packed into $OUT/checks.tgz (few files come back)
mkdir -p "$out" "$checks"
# shellcheck source=tools/gpu/env.sh
. "$(dirname "$0")/env.sh" 2>/dev/null || . "$pkg/env.sh"
use_nccl
pick() { if [ -f "$pkg/$(basename "$1")" ]; then echo "$pkg/$(basename "$1")"; else echo "$1"; fi; }
prog=$pkg/bin/dist_resnet
steps=${STEPS:-30}
warmup=${WARMUP:-5}
{
  nvidia-smi -L
  nvidia-smi topo -m 2>/dev/null | head -5
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  echo "== CPU tests of dist/ on this machine"
  for t in test_dist test_dist_buckets; do "$pkg/bin/$t" --gtest_brief=1 2>&1 | tail -2; done
  echo "== 2 GPUs vs 1 GPU (ResNet-18) ($(date -u +%H:%M:%S))"
  DIST_CHECK_DIR=$checks bash "$(pick tests/dist/two_gpus_match_one.sh)" "$prog" ${MODES:-direct graph}
  echo "== a dead or frozen rank ($(date -u +%H:%M:%S))"
  for mode in ${MODES:-direct graph}; do DIST_CHECK_DIR=$checks bash "$(pick tests/dist/kill_one_rank.sh)" "$prog" "$mode"; done
  echo "== ResNet-50 bf16 channels-last, batch 256 per GPU ($(date -u +%H:%M:%S))"
  for mode in ${BENCH_MODES:-direct graph}; do
    for n in 1 2; do
      "$prog" --model resnet50 --batch 256 --precision bf16 --channels-last --dispatch "$mode" --steps "$steps" \
        --warmup "$warmup" --nproc "$n" | tee -a "$out/strata_bench.log" | grep '^{' >>"$out/dist.jsonl"
    done
  done
  # The former path (gradients copied into the buckets and back) on the same machine.
  "$prog" --model resnet50 --batch 256 --precision bf16 --channels-last --dispatch direct --steps "$steps" \
    --warmup "$warmup" --nproc 2 --no-grad-views | tee -a "$out/strata_bench.log" | grep '^{' >>"$out/dist.jsonl"
  for n in 1 2; do
    torchrun --standalone --nproc_per_node "$n" "$(pick bench/peers/pytorch_ddp_resnet50.py)" --batch 256 \
      --steps "$steps" --warmup "$warmup" 2>>"$out/torch.err" | grep '^{' >>"$out/dist.jsonl"
  done
  torchrun --standalone --nproc_per_node 2 "$(pick bench/peers/pytorch_ddp_resnet50.py)" --allreduce-gib 1 \
    2>>"$out/torch.err" | grep '^{' >>"$out/dist.jsonl"
  cat "$out/dist.jsonl"
} 2>&1 | tee "$out/dist.log"
tar czf "$out/checks.tgz" -C "$(dirname "$checks")" "$(basename "$checks")"
