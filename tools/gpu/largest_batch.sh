#!/usr/bin/env bash
# ResNet-50 inference img/s against the batch, up to the largest batch that fits, on the GPU
# machine in one device call: resnet50_gpu in graph mode, bf16 channels-last 224² (the default;
# PRECISION=f32 for f32), one fresh process per batch (a failed allocation ends only that
# process), batches doubling from 256 until one fails, then halving the gap to the last that ran
# until it is under STEP images; PyTorch's strongest inference form at large batches (the whole
# model in bf16 channels-last under torch.compile with inductor's freezing: resnet50_infer_forms.py,
# FORMS) at the first batch and at the largest strata ran, in the same call (each a compilation).
#   TARGETS="resnet50_gpu" tools/gpu/pack.sh      # here
#   OUT=$OUT tools/gpu/largest_batch.sh            # there (carry .gpu)
# Knobs: START (256), LIMIT (the largest batch tried, 65536), STEP (256), FORMS (PyTorch's,
# comma-separated, default "compile_freezing"; "none" for none), BUDGET (seconds after which nothing
# new starts, 480).
# Writes $OUT/largest_batch.log, $OUT/strata.jsonl (one line per batch tried: batch, status,
# img/s, peak MiB, the error line when it failed) and $OUT/pytorch_b<batch>.json.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-largest-batch}
mkdir -p "$out"
orig_ld=${LD_LIBRARY_PATH:-}
# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
PRECISION=${PRECISION:-bf16}
suffix=$([ "$PRECISION" = bf16 ] && echo _nhwc_bf16 || echo _nhwc)
start=${START:-256}
limit=${LIMIT:-65536}
step=${STEP:-256}
budget=${BUDGET:-480}
log=$out/largest_batch.log
jsonl=$out/strata.jsonl
: >"$jsonl"

# try BATCH: one resnet50_gpu process; appends its line to $jsonl; status 0 when it ran.
try() {
  local b=$1 cfg="infer_b$1_224$suffix" j="$out/strata_b$1.json"
  timeout 150 "$pkg/bin/resnet50_gpu" --mode graph --config "$cfg" --iters 20 --warmup 3 --max-seconds 3 \
    --json "$j" >"$out/strata_b$b.txt" 2>&1
  python3 - "$j" "$b" "$out/strata_b$b.txt" <<'PY' | tee -a "$jsonl"
import json, sys
path, batch, text = sys.argv[1], int(sys.argv[2]), sys.argv[3]
line = {"batch": batch, "status": "error"}
try:
    r = json.load(open(path))
    r = r[0] if isinstance(r, list) else r.get("results", [r])[0]
    line["status"] = r.get("status", "error")
    if line["status"] == "ok":
        line.update(img_per_s=r["img_per_s"], device_ms=r.get("device_ms"), peak_mib=r["peak_bytes"] / 2**20)
    else:
        line["error"] = str(r.get("error") or r.get("note", ""))[:300]
except Exception:  # no JSON: the process died; its last line says why
    lines = [l.strip() for l in open(text, errors="replace") if l.strip()]
    line["error"] = (lines[-1] if lines else "no output")[:300]
print(json.dumps(line), flush=True)
PY
  tail -1 "$jsonl" | grep -q '"status": "ok"'
}

{
  echo "== largest_batch.sh $(date -u +%Y-%m-%dT%H:%M:%SZ), ResNet-50 inference${suffix}, graph mode"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  ok=0 bad=0 b=$start
  while ((b <= limit)) && ((SECONDS < budget)); do
    if try "$b"; then ok=$b; b=$((b * 2)); else bad=$b; break; fi
  done
  while ((bad > 0)) && ((bad - ok > step)) && ((SECONDS < budget)); do
    b=$(((ok + bad) / 2 / step * step))
    ((b <= ok)) && break
    if try "$b"; then ok=$b; else bad=$b; fi
  done
  echo "largest batch that ran: $ok$([ "$bad" -gt 0 ] && echo " (failed at $bad)")"
  forms=${FORMS:-compile_freezing}
  if [ "$forms" != none ]; then
    for b in $(printf '%s\n' "$start" "$ok" | sort -un | grep -v '^0$'); do
      ((SECONDS < budget)) || break
      [ "$PRECISION" = f32 ] && bf16= || bf16=--bf16
      LD_LIBRARY_PATH=$orig_ld timeout 300 python3 bench/peers/resnet50_infer_forms.py --batch "$b" $bf16 \
        --forms "$forms" --iters 20 --warmup 3 --json "$out/pytorch_b$b.json" >"$out/pytorch_b$b.txt" 2>&1
      tail -2 "$out/pytorch_b$b.txt" | cut -c1-400
    done
  fi
} 2>&1 | tee "$log"
