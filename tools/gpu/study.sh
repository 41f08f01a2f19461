#!/usr/bin/env bash
# The abstraction-cost study (docs/study.md), one named part per device call,
# each finishing within PART_BUDGET seconds (default 450; every driver stops starting
# new measurements at its deadline and keeps what it measured). From the repo root:
#
#   tools/gpu/study.sh pack       # HERE (build machine): builds study_resnet50,
#                                 # resnet50_gpu, dispatch_overhead, gpt2_forward, gpt2_train and
#                                 # strata_codegen (sm_90) into .gpu/
#   tools/gpu/study.sh strata     # THERE: dispatch microbenchmarks (every backend, cuda
#                                 # included), per-op costs of one step, LOC count, then
#                                 # strata's sweep in every dispatch mode, and its parity run
#   tools/gpu/study.sh torch      # THERE: PyTorch eager, CUDA-graph replay, TorchScript
#   tools/gpu/study.sh compile    # THERE: torch.compile (compiles once per kind)
#   tools/gpu/study.sh jax        # THERE: JAX's jax.jit (bench/peers/study_jax.py), no parity run
#   tools/gpu/study.sh libtorch   # THERE: builds the LibTorch peer against the torch
#                                 # package's CMake files, then its sweep and parity run
#   tools/gpu/study.sh parity     # THERE: only the accuracy-parity runs of every
#                                 # implementation (strata, PyTorch's four, LibTorch), for
#                                 # redoing them alone (e.g. after a protocol change)
#   tools/gpu/study.sh gpt        # THERE: GPT-2 small, batch-1 greedy decoding (random weights):
#                                 # strata's ways (gpt2_forward --decode, GPT_PROCESSES processes),
#                                 # PyTorch's three forms and JAX's two, bf16 then fp32 while the
#                                 # budget lasts: gpt_decode_<prec>[_<i>].json, gpt_peers_<fw>_<prec>.json;
#                                 # GPT_SIZE=medium: GPT-2 medium (350M), files tagged _medium
#                                 # (its log and environment too: gpt_medium.log, env_gpt_medium.json)
#   tools/gpu/study.sh generated  # THERE: strata's ResNet-50 written out by strata_codegen --backend cuda
#                                 # (f32 NCHW, eval) at GEN_POINTS (default 1x224,8x64,32x32,32x128,256x64),
#                                 # built and timed with and without its CUDA graph (GEN_REPEAT runs, 100),
#                                 # beside strata's four modes at the same points, and LeNet-5 at batch
#                                 # GEN_LENET (1,32) and ResNet-50's training step at GEN_TRAIN (32x32)
#                                 # beside strata_codegen --time: strata_sweep.json,
#                                 # generated_sweep.json (pack strata_codegen and study_resnet50)
#   tools/gpu/study.sh gpt_train  # THERE: GPT-2 small's bf16 training step in every dispatch mode
#                                 # (gpt2_train speed, the modes alternated each round) at batch 1 x 128
#                                 # tokens and 16 x 1,024: gpt_train_b<B>_t<T>.jsonl
#
# Output goes to $OUT (default /tmp/strata-study): *_sweep.json, *_parity.json,
# dispatch_overhead.json, strata_op_costs.json, loc.json, env_<part>.json, <part>.log
# and CARD (the card's folder name, e.g. h100_80gb_hbm3). Copy them all into
# docs/results/$(cat $OUT/CARD)/study/, then, on any machine:
#   python3 tools/study/make_page.py       # CSV, plots and docs/RESULTS.md
# Knobs: GRID (seed | default | full; tools/study/grid.py), POINTS (overrides GRID),
# PART_BUDGET, MIN_REPEATS (10), MIN_SECONDS (0.6), WARMUP (3), PKG (.gpu), STRATA_IMPLS
# (strata's sweep rows, default virtual,static,direct,cudagraph; <mode>_unfused rows too,
# docs/study.md), GPT_ROUNDS (11), GPT_PROCESSES (2), GPT_NEW (256), GPT_PROMPT (128),
# GPT_PRECISIONS ("bf16 fp32"), and for a
# smoke run of the parts on a machine without a GPU, BACKEND=reference (strata's
# backend; the peers then run on the CPU), e.g.
#   PKG=build-study BACKEND=reference POINTS=2x16 MIN_REPEATS=2 MIN_SECONDS=0 \
#     tools/gpu/study.sh strata
set -uo pipefail
cd "$(dirname "$0")/../.."
part=${1:-}
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-study}
budget=${PART_BUDGET:-450}
min_rep=${MIN_REPEATS:-10}
min_s=${MIN_SECONDS:-0.6}
warmup=${WARMUP:-3}
backend=${BACKEND:-cuda}
device=cuda
[ "$backend" = cuda ] || device=cpu

if [ "$part" = pack ]; then
  # The Debian build's libbenchmark is not on the GPU machine: carry it in lib/.
  BUILD_DIR=${BUILD_DIR:-build-study} TARGETS="study_resnet50 resnet50_gpu dispatch_overhead gpt2_forward gpt2_train strata_codegen" \
    tools/gpu/pack.sh || exit 1
  cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian .gpu/lib/
  {
    echo "commit $(git rev-parse HEAD 2>/dev/null)"
    echo "uncommitted_files $(git status --porcelain 2>/dev/null | wc -l)"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  } >.gpu/STUDY_BUILD
  cat .gpu/STUDY_BUILD
  exit 0
fi
case "$part" in
  strata | torch | compile | libtorch | parity | jax | gpt | gpt_train | generated) ;;
  *)
    sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac

mkdir -p "$out"
# GPT-2 medium's run of the gpt part keeps its own log and environment beside small's.
run=$part
[ "$part" = gpt ] && [ "${GPT_SIZE:-small}" = medium ] && run=gpt_medium
log="$out/$run.log"
: >"$log"
export PYTHONUNBUFFERED=1
# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
points=${POINTS:-$(python3 tools/study/grid.py "${GRID:-default}")}
t0=$(date +%s)
left() { echo $((budget - ($(date +%s) - t0))); }
say() { echo "== $* ($(($(date +%s) - t0)) s)" | tee -a "$log"; }
common=(--min-repeats "$min_rep" --min-seconds "$min_s" --warmup "$warmup")

# What ran where: the card, driver, clocks, versions, the build, the grid.
python3 - "$out/env_$run.json" "$part" "$points" "$pkg" <<'PY' 2>&1 | tee -a "$log"
import json, os, platform, re, subprocess, sys
path, part, points, pkg = sys.argv[1:5]
env = {"part": part, "points": points, "host": platform.node(), "python": platform.python_version()}
try:
    q = "name,driver_version,memory.total,clocks.max.sm,power.limit,pci.bus_id"
    row = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True,
                         text=True, timeout=20).stdout.strip().splitlines()[0]
    env["gpu"] = dict(zip(q.split(","), [x.strip() for x in row.split(",")]))
except Exception as e:  # noqa: BLE001
    env["gpu"] = {"error": str(e)}
for mod in ("torch", "torchvision"):
    try:
        env[mod] = __import__(mod).__version__
    except Exception as e:  # noqa: BLE001
        env[mod] = f"not importable: {e}"
try:
    env["build"] = open(os.path.join(pkg, "STUDY_BUILD")).read().split("\n")
except OSError:
    env["build"] = None
name = env["gpu"].get("name", "unknown")
card = re.sub(r"[^a-z0-9]+", "_", re.sub(r"^nvidia\s+", "", name.lower())).strip("_")
env["card"] = card
open(os.path.join(os.path.dirname(path), "CARD"), "w").write(card + "\n")
json.dump(env, open(path, "w"), indent=1)
print(f"card {card}: {env['gpu']}")
PY

# The LibTorch peer, built against the torch package's CMake files (g++ fallback).
bdir=${LIBTORCH_BUILD_DIR:-build-libtorch}
torch_lib=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)
build_libtorch() {
  say "build the LibTorch peer (torch's CMake files)"
  local prefix gen=()
  prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  command -v ninja >/dev/null && gen=(-G Ninja)
  if ! { cmake -S bench/study/libtorch -B "$bdir" "${gen[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
           -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build "$bdir" -j "$(nproc)"; } >"$out/libtorch_build.log" 2>&1; then
    tail -30 "$out/libtorch_build.log" | tee -a "$log"
    say "cmake build failed: trying g++ with torch.utils.cpp_extension's paths"
    bash tools/study/build_libtorch_gxx.sh "$bdir" >>"$out/libtorch_build.log" 2>&1 || {
      tail -30 "$out/libtorch_build.log" | tee -a "$log"
      return 1
    }
  fi
}

# One step of the gpt part, named $1: the command after it, within what is left of the budget (plus
# 30 s to finish); started only while some budget is left, as the other parts' drivers do.
gpt_step() {
  local what=$1
  shift
  if [ "$(left)" -le 0 ]; then
    say "skipped, the budget is spent: $what"
    return 0
  fi
  say "$what"
  timeout $(($(left) + 30)) "$@" 2>&1 | tee -a "$log"
  return "${PIPESTATUS[0]}"
}

# GPT-2 small decoding at batch 1 in one precision: strata's ways in GPT_PROCESSES processes (one file
# each), then PyTorch's forms and JAX's (they decode on CUDA only). Expects $g (the exported model),
# $gpt_model, $gpt_new, $gpt_rounds.
gpt_precision() {
  local prec=$1 i f check=()
  for i in $(seq 1 "${GPT_PROCESSES:-2}"); do
    f="$out/gpt_decode_$prec$gpt_tag.json"
    [ "$i" -gt 1 ] && f="$out/gpt_decode_$prec${gpt_tag}_$i.json"
    gpt_step "strata $prec, process $i: gpt2_forward --decode" "$pkg/bin/gpt2_forward" --hf --backend "$backend" \
      "${gpt_model[@]}" --precision "$prec" --decode "$gpt_new" --rounds "$gpt_rounds" --repeat 1 --json "$f" \
      --weights "$g/hf.safetensors" --ids "$g/ids.safetensors" --out "$g/strata_$prec.safetensors" || rc=1
  done
  if [ "$device" != cuda ]; then
    say "no peers: they decode on CUDA only"
    return
  fi
  gpt_step "PyTorch $prec: generate, eager static-cache loop, compiled loop" python3 bench/peers/pytorch_gpt2.py \
    decode "$g" --new "$gpt_new" --rounds "$gpt_rounds" --precision "$prec" --json "$out/gpt_peers_torch_$prec$gpt_tag.json" \
    || rc=1
  if ! python3 -c "import jax" 2>/dev/null; then
    say "JAX not importable: no JAX rows"
    return
  fi
  # strata's f32 prompt logits, where this call wrote them, for JAX's check of its own.
  [ "$prec" = fp32 ] && [ -f "$g/strata_fp32.safetensors" ] && check=(--check-logits "$g/strata_fp32.safetensors")
  gpt_step "JAX $prec: a jitted step per token, the whole generation as one jit" python3 bench/peers/jax_gpt2.py \
    decode "$g" --new "$gpt_new" --rounds "$gpt_rounds" --precision "$prec" ${check[@]+"${check[@]}"} \
    --json "$out/gpt_peers_jax_$prec$gpt_tag.json" || rc=1
}

rc=0
case "$part" in
  strata)
    say "dispatch microbenchmarks (every backend built)"
    timeout 150 "$pkg/bin/dispatch_overhead" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      --benchmark_min_time=0.1 --benchmark_format=json --benchmark_out="$out/dispatch_overhead.json" \
      --benchmark_out_format=json >>"$log" 2>&1 || rc=1
    say "each layer's cost as paired, interleaved differences, in PAIRED_RUNS processes (median, range, intervals)"
    timeout 200 python3 tools/study/paired_runs.py --bin "$pkg/bin/dispatch_overhead" --runs "${PAIRED_RUNS:-5}" \
      --json "$out/dispatch_paired.json" 2>&1 | tee -a "$log"
    say "per-op costs of one step (device idle vs busy)"
    timeout 120 "$pkg/bin/study_resnet50" op-costs --backend "$backend" --point "${OP_POINT:-32x64}" --json "$out/strata_op_costs.json" 2>&1 | tee -a "$log"
    say "lines of code"
    python3 tools/study/count_loc.py --json "$out/loc.json" 2>&1 | tee -a "$log"
    say "strata sweep"
    timeout $(($(left) + 60)) "$pkg/bin/study_resnet50" sweep --backend "$backend" --points "$points" "${common[@]}" \
      ${STRATA_IMPLS:+--impls "$STRATA_IMPLS"} \
      --deadline $(($(left) - 60)) --json "$out/strata_sweep.json" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    say "strata parity"
    "$pkg/bin/study_resnet50" parity-data --out "$out/parity" ${PARITY_DATA_ARGS:-} >>"$log" 2>&1
    timeout $(($(left) + 30)) "$pkg/bin/study_resnet50" parity --backend "$backend" --data "$out/parity" \
      ${PARITY_ARGS:-} --json "$out/strata_parity.json" 2>&1 | tee -a "$log"
    rm -rf "$out/parity"
    ;;
  torch | compile)
    impls=eager,cudagraph,torchscript
    [ "$part" = compile ] && impls=compile
    say "parity data"
    "$pkg/bin/study_resnet50" parity-data --out "$out/parity" ${PARITY_DATA_ARGS:-} >>"$log" 2>&1
    say "PyTorch: $impls"
    timeout $(($(left) + 30)) python3 bench/peers/study_torch.py sweep --device "$device" --impls "$impls" \
      --points "$points" "${common[@]}" ${PARITY_ARGS:-} --deadline $(($(left) - 50)) --json "$out/${part}_sweep.json" \
      --parity-data "$out/parity" --parity-json "$out/${part}_parity.json" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    rm -rf "$out/parity"
    ;;
  jax)
    say "JAX: jax.jit"
    timeout $(($(left) + 30)) python3 bench/peers/study_jax.py sweep --device "$device" --points "$points" \
      "${common[@]}" --deadline $(($(left) - 50)) --json "$out/jax_sweep.json" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    ;;
  parity)
    say "parity data"
    "$pkg/bin/study_resnet50" parity-data --out "$out/parity" ${PARITY_DATA_ARGS:-} >>"$log" 2>&1
    python3 bench/peers/study_torch.py convert --data "$out/parity" >>"$log" 2>&1
    say "strata parity"
    timeout $(($(left) + 30)) "$pkg/bin/study_resnet50" parity --backend "$backend" --data "$out/parity" \
      ${PARITY_ARGS:-} --json "$out/strata_parity.json" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    say "PyTorch parity: eager, cudagraph, torchscript"
    timeout $(($(left) + 30)) python3 bench/peers/study_torch.py parity --device "$device" \
      --impls eager,cudagraph,torchscript ${PARITY_ARGS:-} --data "$out/parity" --json "$out/torch_parity.json" \
      2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    say "PyTorch parity: eager on the host CPU (how far rounding alone moves the losses)"
    timeout $(($(left) + 30)) python3 bench/peers/study_torch.py parity --device cpu --impls eager \
      ${PARITY_ARGS:-} --data "$out/parity" --json "$out/torch_cpu_parity.json" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    say "PyTorch parity: compile"
    timeout $(($(left) + 30)) python3 bench/peers/study_torch.py parity --device "$device" --impls compile \
      ${PARITY_ARGS:-} --data "$out/parity" --json "$out/compile_parity.json" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    say "LibTorch parity"
    build_libtorch || exit 1
    LD_LIBRARY_PATH="$torch_lib:$LD_LIBRARY_PATH" timeout $(($(left) + 20)) "$bdir/study_libtorch" parity \
      --device "$device" --data "$out/parity" ${PARITY_ARGS:-} --json "$out/libtorch_parity.json" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    rm -rf "$out/parity"
    ;;
  gpt)
    # Random weights: no checkpoint reaches the GPU machine. The PyTorch peer's export writes
    # transformers' own state dict (seed 0), which gpt2_forward --hf and both peers load.
    g="$out/gpt"
    case "${GPT_SIZE:-small}" in  # GPT-2 small (124M) or medium (350M); medium's files are tagged
      small) gpt_model=(--layers 12 --heads 12 --embd 768 --vocab 50257 --block 1024) gpt_tag="" ;;
      medium) gpt_model=(--layers 24 --heads 16 --embd 1024 --vocab 50257 --block 1024) gpt_tag="_medium" ;;
      *) say "GPT_SIZE must be small or medium, got ${GPT_SIZE}"; exit 2 ;;
    esac
    gpt_new=${GPT_NEW:-256}
    gpt_rounds=${GPT_ROUNDS:-11}
    say "GPT-2 ${GPT_SIZE:-small}, random weights (bench/peers/pytorch_gpt2.py export, seed 0), a ${GPT_PROMPT:-128}-token prompt"
    python3 bench/peers/pytorch_gpt2.py export "$g" "${gpt_model[@]}" --batch 1 --tokens "${GPT_PROMPT:-128}" \
      >>"$log" 2>&1 || exit 1
    took=0
    for prec in ${GPT_PRECISIONS:-bf16 fp32}; do
      # A precision is started only if what is left covers what the last one took.
      if [ "$(left)" -lt "$took" ]; then
        say "$prec skipped: $(left) s left, the last precision took $took s"
        continue
      fi
      p0=$(date +%s)
      gpt_precision "$prec"
      took=$(($(date +%s) - p0))
    done
    rm -rf "$g"
    ;;
  gpt_train)
    # Random tokens and initial weights (gpt2_train's own); the timed steps' medians and ranges.
    for shape in ${GPT_TRAIN_SHAPES:-1x128x5x20 16x1024x3x10}; do
      IFS=x read -r b t r n <<<"$shape"
      f="$out/gpt_train_b${b}_t${t}.jsonl"
      say "strata: GPT-2 small bf16 training, batch $b x $t tokens, every mode, $r rounds of $n steps"
      timeout $(($(left) + 10)) "$pkg/bin/gpt2_train" speed --backend "$backend" --batch "$b" --seq "$t" \
        --precision bf16 --modes all --steps "$n" --rounds "$r" --lr 6e-4 2>>"$log" | grep '^{' >"$f"
      [ -s "$f" ] || rc=1
    done
    ;;
  generated)
    # strata's ResNet-50 written out by strata_codegen (no strata in the program) beside strata's four
    # modes at the same points, eval, in one call: strata_sweep.json and generated_sweep.json.
    gen_points=${GEN_POINTS:-1x224,8x64,32x32,32x128,256x64}
    say "strata sweep at the generated points (eval, every mode)"
    timeout $(($(left) + 30)) "$pkg/bin/study_resnet50" sweep --backend "$backend" --points "$gen_points" --kinds eval \
      "${common[@]}" --deadline $(($(left) / 3)) --json "$out/strata_sweep.json" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    say "generated programs: strata_codegen, CMake, model_run with and without its CUDA graph"
    timeout $(($(left) + 30)) python3 tools/study/generated_sweep.py --pkg "$pkg" --points "$gen_points" \
      --lenet-batches "${GEN_LENET:-1,32}" --train-points "${GEN_TRAIN:-32x32}" --repeat "${GEN_REPEAT:-100}" --cudnn-root "$(dirname "$cudnn_lib")" --work "$out/generated" \
      --deadline $(($(left) - 60)) --json "$out/generated_sweep.json" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    rm -rf "$out/generated"
    ;;
  libtorch)
    build_libtorch || exit 1
    say "parity data"
    "$pkg/bin/study_resnet50" parity-data --out "$out/parity" ${PARITY_DATA_ARGS:-} >>"$log" 2>&1
    python3 bench/peers/study_torch.py convert --data "$out/parity" >>"$log" 2>&1
    say "LibTorch sweep"
    LD_LIBRARY_PATH="$torch_lib:$LD_LIBRARY_PATH" timeout $(($(left) + 30)) "$bdir/study_libtorch" sweep \
      --device "$device" --points "$points" "${common[@]}" --deadline $(($(left) - 40)) --json "$out/libtorch_sweep.json" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    say "LibTorch parity"
    LD_LIBRARY_PATH="$torch_lib:$LD_LIBRARY_PATH" timeout $(($(left) + 20)) "$bdir/study_libtorch" parity \
      --device "$device" --data "$out/parity" ${PARITY_ARGS:-} --json "$out/libtorch_parity.json" 2>&1 | tee -a "$log"
    rm -rf "$out/parity"
    ;;
esac
say "done: $part (rc=$rc); files in $out; copy them to docs/results/$(cat "$out/CARD" 2>/dev/null)/study/"
ls -la "$out" | tee -a "$log"
exit $rc
