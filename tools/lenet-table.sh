#!/usr/bin/env bash
# Gu, Gozum & Lam's table for strata: the time to classify one image with LeNet-5, strata's
# dispatch modes on each backend beside the peers, several processes in alternating order, one
# markdown table and the raw JSON in $OUT.
#
#   tools/lenet-table.sh cpu    # here: strata's CPU backends (bench/lenet_latency), LibTorch
#                               # (bench/libtorch: libtorch_cpu_bench, where built) and PyTorch
#                               # eager on the CPU (where $PYTHON imports torch)
#   tools/lenet-table.sh gpu    # on the GPU machine, through tools/gpu/lenet.sh: strata's cuda
#                               # backend in all four modes, PyTorch (eager, CUDA graph,
#                               # torch.compile) and JAX
# Both also time strata's null backend, which computes nothing: strata's own cost per image.
#
# Steps: lenet_latency --export writes the weights, the input and the reference backend's logits
# ($OUT/io); then PROCESSES rounds of one process per program, the programs' order reversed every
# other round (strata, peers... then peers..., strata); then bench/peers/lenet_table.py. Each
# program checks its logits (lenet_latency: bitwise across modes and against the reference
# backend; the peers: against the exported logits) and exits non-zero when one differs; this
# script goes on, and exits 1 at the end when any program failed.
# On the GPU machine PyTorch's cuDNN goes first on LD_LIBRARY_PATH for strata's program only
# (tools/gpu/env.sh in a subshell), not for the Python peers, which load their own.
#
# Knobs: OUT (/tmp/strata-lenet-<cpu|gpu>), PROCESSES (3), ROUNDS (10), CALLS (30), VARIANTS
# (tensorflow,keras), THREADS (cpu: OMP_NUM_THREADS and OPENBLAS_NUM_THREADS, 2), BUILD (cpu:
# build-quick), PKG (gpu: .gpu), PYTHON (python3), TORCH_IMPLS (pytorch_lenet.py's --impls, all),
# STRATA_TIMEOUT (200), TORCH_TIMEOUT (400), JAX_TIMEOUT (200) seconds per process, DEADLINE
# (seconds from the start after which no process starts and each one still running is cut off,
# so that the table is written within a device call's 10 minutes: gpu 540, cpu none).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
where=${1:-}
case "$where" in
  cpu | gpu) ;;
  *) echo "usage: tools/lenet-table.sh cpu|gpu" >&2; exit 2 ;;
esac
out=${OUT:-/tmp/strata-lenet-$where}
procs=${PROCESSES:-3}
variants=${VARIANTS:-tensorflow,keras}
python=${PYTHON:-python3}
timing=(--rounds "${ROUNDS:-10}" --calls "${CALLS:-30}")
mkdir -p "$out"
rm -f "$out"/*.json "$out"/io/*.safetensors
log=$out/lenet.log
: >"$log"
export PYTHONUNBUFFERED=1
say() { echo "== $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$log"; }
start=$(date +%s)
[ "$where" = gpu ] && deadline=${DEADLINE:-540} || deadline=${DEADLINE:-1000000}
# A process's time limit: its own, or what is left before the deadline when that is less.
limit() {
  local left=$((deadline - ($(date +%s) - start)))
  [ "$left" -lt 1 ] && left=1 # timeout 0 would mean no limit at all
  echo $((left < $1 ? left : $1))
}

if [ "$where" = gpu ]; then
  pkg=${PKG:-.gpu}
  bin=$pkg/bin
  strata() {
    (
      # shellcheck source=tools/gpu/env.sh
      source tools/gpu/env.sh >/dev/null 2>&1
      timeout "$(limit "${STRATA_TIMEOUT:-200}")" "$bin/lenet_latency" "$@"
    )
  }
  strata_args=(--backends "cuda,null")
  peers=(pytorch jax)
  torch_device=cuda
  say "device"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu --format=csv 2>&1 |
    tee -a "$log"
else
  bin=${BUILD:-build-quick}/bin
  export OMP_NUM_THREADS=${THREADS:-2} OPENBLAS_NUM_THREADS=${THREADS:-2}
  strata() { timeout "$(limit "${STRATA_TIMEOUT:-200}")" "$bin/lenet_latency" "$@"; }
  strata_args=(--null)
  peers=()
  torch_device=cpu
  [ -x "$bin/libtorch_cpu_bench" ] && peers+=(libtorch)
  if "$python" -c "import torch" 2>/dev/null; then peers+=(pytorch); else say "no PyTorch for $python: skipped"; fi
  say "machine: $(nproc --all) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
fi
[ -x "$bin/lenet_latency" ] || { echo "lenet-table: $bin/lenet_latency is not built" >&2; exit 1; }

say "weights, input and reference logits"
strata --export "$out/io" --variants "$variants" 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "lenet-table: export failed" >&2; exit 1; }
io=("$out"/io/lenet_*.safetensors)

failed=0
run() {  # program, process number
  local rc
  case $1 in
    strata)
      strata "${strata_args[@]}" --variants "$variants" "${timing[@]}" --json "$out/strata_p$2.json" 2>&1 |
        tee -a "$log"
      rc=${PIPESTATUS[0]} ;;
    pytorch)
      timeout "$(limit "${TORCH_TIMEOUT:-400}")" "$python" bench/peers/pytorch_lenet.py --io "${io[@]}" --device "$torch_device" \
        --impls "${TORCH_IMPLS:-eager,cudagraph,compile,compile_ro,compile_freezing,compile_ro_freezing}" \
        "${timing[@]}" --json "$out/pytorch_p$2.json" 2>&1 | tee -a "$log"
      rc=${PIPESTATUS[0]} ;;
    jax)
      timeout "$(limit "${JAX_TIMEOUT:-200}")" "$python" bench/peers/jax_lenet.py --io "${io[@]}" "${timing[@]}" \
        --json "$out/jax_p$2.json" 2>&1 | tee -a "$log"
      rc=${PIPESTATUS[0]} ;;
    libtorch)
      timeout "$(limit "${STRATA_TIMEOUT:-200}")" "$bin/libtorch_cpu_bench" --workloads lenet_infer_b1_28,lenet_keras_infer_b1_28 \
        --json "$out/libtorch_p$2.json" 2>&1 | tee -a "$log"
      rc=${PIPESTATUS[0]} ;;
  esac
  echo "$1 (process $2): rc=$rc" | tee -a "$log"
  [ "$rc" -eq 0 ] || failed=1
}

programs=(strata "${peers[@]}")
for p in $(seq 1 "$procs"); do
  order=("${programs[@]}")
  if [ $((p % 2)) -eq 0 ]; then
    order=()
    for ((i = ${#programs[@]} - 1; i >= 0; i--)); do order+=("${programs[i]}"); done
  fi
  for prog in "${order[@]}"; do
    if [ $(($(date +%s) - start)) -ge "$deadline" ]; then
      say "deadline of ${deadline}s reached: process $p of $procs: $prog not run"
      failed=1
      continue
    fi
    say "process $p of $procs: $prog"
    run "$prog" "$p"
  done
done

say "table"
notes=("command: tools/lenet-table.sh $where (PROCESSES=$procs ROUNDS=${ROUNDS:-10} CALLS=${CALLS:-30})")
[ "$where" = cpu ] && notes+=("threads: OMP_NUM_THREADS=$OMP_NUM_THREADS OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS")
note_args=()
for n in "${notes[@]}"; do note_args+=(--note "$n"); done
"$python" bench/peers/lenet_table.py "$out"/*_p[0-9]*.json --markdown "$out/table.md" "${note_args[@]}" 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed=1
echo "lenet-table: $out/table.md, raw JSON and lenet.log beside it$([ $failed -ne 0 ] && echo '; SOME PROGRAM OR CHECK FAILED (see lenet.log)')"
exit $failed
