#!/usr/bin/env bash
# Where a data-parallel step's extra time goes, on a machine with two GPUs, in one device call
# (docs/results/dist_2gpu.md, "Where the 2-GPU step's extra time goes"). Nsight Systems does not
# run on the lent machines, so the timeline is taken apart by experiment instead: ResNet-50 bf16
# channels-last, batch 256 per GPU, graph mode, timed as dist.sh times it, in rounds whose order
# alternates:
#   one       1 GPU
#   two       2 GPUs (NCCL's defaults, 25 MiB buckets)
#   pair      two 1-GPU runs at the same time, one per GPU, no exchange: what two busy GPUs cost
#             by themselves (power, clocks, the host's cores and memory)
#   ctas4     2 GPUs, NCCL limited to 4 thread blocks a collective (NCCL_MAX_CTAS): whether its
#             kernels, overlapped with the backward's, slow the backward down by taking its SMs
#   bucket6   2 GPUs with 6 MiB buckets: a smaller last bucket, so a shorter exchange after the
#             backward's last gradient
#   bucket200 2 GPUs with one bucket (nothing overlapped): the exchange's own time, unhidden
#   ctas16, ctas32          2 GPUs, NCCL held at 16 or 32 thread blocks a collective
#   bucket200ctas32         one bucket with 32 blocks: how fast the exchange can go unhidden
#   prio      2 GPUs, the collectives' stream at the highest priority (--comm-high-priority)
#   timeline_bucket200      the timeline with one bucket (no exchange during the backward)
#   timeline_staged         the timeline with the gradients staged by copies (--no-grad-views)
#   timeline_one            1 GPU in direct mode, one step timed (--timeline): where its backward ends
#   indep     2 ranks of one NCCL group training alone (--no-exchange): the group's own cost
#   bf16x     2 GPUs, the gradients exchanged in bf16 (--grad-exchange bf16): half the bytes
#   timeline_bf16x          the timeline below with the bf16 exchange
#   timeline  2 GPUs in direct mode, then one step with its collectives timed (--timeline): each
#             rank's JSON line says when each bucket was ready, its all-reduce's start and end
# then PyTorch DDP on 1 and 2 GPUs, eager and under torch.compile (FORMS: eager, compile, and
# compile_nosplit, torch.compile without DDPOptimizer's graph split at the buckets; a form ending in
# _bf16x registers DDP's bf16_compress_hook), the peer in the same call.
#   TARGETS="dist_resnet" tools/gpu/pack.sh       # here
#   OUT=$OUT tools/gpu/dist_scaling.sh            # there (carry .gpu)
# Knobs: ROUNDS (2), STEPS (30), WARMUP (5), VARIANTS (the list above), FORMS ("eager compile"),
# BUDGET (seconds after which no new run starts, default 520).
# Results: $OUT/scaling.jsonl (one JSON line a run, "variant" and "round" added) and scaling.log.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-dist-scaling}
mkdir -p "$out"
orig_ld=${LD_LIBRARY_PATH:-}
# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
use_nccl
prog=$pkg/bin/dist_resnet
rounds=${ROUNDS:-2}
steps=${STEPS:-30}
warmup=${WARMUP:-5}
budget=${BUDGET:-520}
read -ra variants <<<"${VARIANTS:-one two pair ctas4 bucket6 bucket200}"
jsonl=$out/scaling.jsonl
log=$out/scaling.log
: >"$jsonl"
base=(--model resnet50 --batch 256 --precision bf16 --channels-last --dispatch graph)
common=("${base[@]}" --steps "$steps" --warmup "$warmup")

# tag VARIANT ROUND: rank 0's JSON lines on stdin, with the variant and round added, to $jsonl.
tag() {
  python3 -c '
import json, sys
v, r = sys.argv[1], int(sys.argv[2])
for line in sys.stdin:
    if line.startswith("{"):
        d = json.loads(line); d["variant"] = v; d["round"] = r; print(json.dumps(d), flush=True)
' "$1" "$2" | tee -a "$jsonl"
}

# timeline VARIANT ROUND NPROC [ARGS...]: direct mode (a captured step records no timeline), then one
# step timed (--timeline); the output kept in $out/VARIANT_ROUND.txt.
timeline() {
  local v=$1 r=$2 n=$3
  shift 3
  "$prog" "${base[@]/graph/direct}" --steps "$steps" --warmup "$warmup" --nproc "$n" --timeline "$@" 2>&1 |
    tee "$out/${v}_$r.txt" | tag "$v" "$r"
}

run_variant() {
  local v=$1 r=$2
  echo "-- $v, round $r ($(date -u +%H:%M:%S), ${SECONDS} s)"
  case $v in
    one) "$prog" "${common[@]}" --nproc 1 2>&1 | tag one "$r" ;;
    two) "$prog" "${common[@]}" --nproc 2 2>&1 | tag two "$r" ;;
    pair)
      CUDA_VISIBLE_DEVICES=0 "$prog" "${common[@]}" --nproc 1 >"$out/pair0.txt" 2>&1 &
      local p0=$!
      CUDA_VISIBLE_DEVICES=1 "$prog" "${common[@]}" --nproc 1 >"$out/pair1.txt" 2>&1
      wait "$p0"
      tag pair_gpu0 "$r" <"$out/pair0.txt"
      tag pair_gpu1 "$r" <"$out/pair1.txt" ;;
    ctas4) NCCL_MAX_CTAS=4 NCCL_MAX_NCHANNELS=4 "$prog" "${common[@]}" --nproc 2 2>&1 | tag ctas4 "$r" ;;
    bucket6) "$prog" "${common[@]}" --nproc 2 --bucket-mb 6 2>&1 | tag bucket6 "$r" ;;
    bucket200) "$prog" "${common[@]}" --nproc 2 --bucket-mb 200 2>&1 | tag bucket200 "$r" ;;
    timeline) timeline "$v" "$r" 2 ;;
    timeline_bucket200) timeline "$v" "$r" 2 --bucket-mb 200 ;;
    timeline_staged) timeline "$v" "$r" 2 --no-grad-views ;;
    timeline_one) timeline "$v" "$r" 1 ;;
    prio) "$prog" "${common[@]}" --nproc 2 --comm-high-priority 2>&1 | tag prio "$r" ;;
    indep) "$prog" "${common[@]}" --nproc 2 --no-exchange 2>&1 | tag indep "$r" ;;
    bf16x) "$prog" "${common[@]}" --nproc 2 --grad-exchange bf16 2>&1 | tag bf16x "$r" ;;
    timeline_bf16x) timeline "$v" "$r" 2 --grad-exchange bf16 ;;
    ctas16) NCCL_MIN_CTAS=16 NCCL_MAX_CTAS=16 "$prog" "${common[@]}" --nproc 2 2>&1 | tag ctas16 "$r" ;;
    ctas32) NCCL_MIN_CTAS=32 NCCL_MAX_CTAS=32 "$prog" "${common[@]}" --nproc 2 2>&1 | tag ctas32 "$r" ;;
    bucket200ctas32)
      NCCL_MIN_CTAS=32 NCCL_MAX_CTAS=32 "$prog" "${common[@]}" --nproc 2 --bucket-mb 200 2>&1 | tag bucket200ctas32 "$r" ;;
    *) echo "dist_scaling: unknown variant '$v'" >&2; return 2 ;;
  esac
}

{
  echo "== dist_scaling.sh $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi -L
  nvidia-smi topo -m 2>/dev/null | head -4
  nvidia-smi --query-gpu=index,power.limit,clocks.max.sm,temperature.gpu --format=csv 2>&1
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  # NCCL's channel count for this pair, from one short run.
  NCCL_DEBUG=INFO "$prog" "${base[@]}" --steps 2 --warmup 1 --nproc 2 >"$out/nccl_info.txt" 2>&1
  grep -i -E "channels|Channel 00|nRanks" "$out/nccl_info.txt" | head -8
  for ((r = 1; r <= rounds; r++)); do
    order=("${variants[@]}")
    if ((r % 2 == 0)); then
      order=()
      for ((i = ${#variants[@]} - 1; i >= 0; i--)); do order+=("${variants[$i]}"); done
    fi
    for v in "${order[@]}"; do
      if ((SECONDS > budget)); then echo "-- $v, round $r: skipped (past ${budget} s)"; continue; fi
      run_variant "$v" "$r"
    done
  done
  for form in ${FORMS:-eager compile}; do
    [ "$form" = none ] && continue
    exchange=f32
    [[ $form == *_bf16x ]] && exchange=bf16
    for n in 1 2; do
      [ "$exchange" = bf16 ] && ((n == 1)) && continue  # one GPU exchanges nothing
      if ((SECONDS > budget)); then echo "-- pytorch $form $n: skipped (past ${budget} s)"; continue; fi
      echo "-- pytorch DDP $form, $n GPU(s) ($(date -u +%H:%M:%S), ${SECONDS} s)"
      LD_LIBRARY_PATH=$orig_ld torchrun --standalone --nproc_per_node "$n" bench/peers/pytorch_ddp_resnet50.py \
        --form "${form%_bf16x}" --grad-exchange "$exchange" --batch 256 --steps "$steps" --warmup "$warmup" 2>>"$out/torch.err" | tag "pytorch_$form" 1
    done
  done
  echo "== summary"
  python3 - "$jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for d in rows:
    if "timeline" in d:  # --timeline's lines: one step of one rank, its collectives' times
        print(f"{d['variant']}, rank {d['rank']}, round {d['round']} ({d['dispatch']}, {d['buckets']} buckets), ms from the step's start:")
        for e in d["timeline"]:
            if e["bytes"]:
                print(f"  {e['what']:<16} {e['bytes'] / 2**20:7.1f} MiB  ready {e['ready_ms']:7.2f}  "
                      f"start {e['start_ms']:7.2f}  end {e['end_ms']:7.2f}")
            else:
                print(f"  {e['what']:<16} {'':11}  at {e['ready_ms']:7.2f}")
        continue
    by.setdefault(d["variant"], []).append(d)
one = statistics.median(d["ms_per_step"] for d in by.get("one", [{"ms_per_step": float("nan")}]))
print(f"{'variant':<16} {'runs':>4} {'ms/step (each)':<24} {'img/s':>10} {'vs 1 GPU, ms':>13}")
for v, ds in by.items():
    ms = [d["ms_per_step"] for d in ds]
    img = statistics.median(d["img_per_s"] for d in ds)
    print(f"{v:<16} {len(ds):>4} {' '.join(f'{m:.2f}' for m in ms):<24} {img:>10.1f} {statistics.median(ms) - one:>+13.2f}")
PY
} 2>&1 | tee "$log"
