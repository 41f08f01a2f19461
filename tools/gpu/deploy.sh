#!/usr/bin/env bash
# The deployment table (docs/codegen.md, "Deployment beside AOTInductor"), one device call: ResNet-50,
# batch 1, 3x224x224, f32, shipped three ways and measured alike:
#   (1) strata's generated program: strata_codegen --backend cuda writes the project (--check: strata's
#       own output for its check input), CMake builds model_run (CUDA runtime, cuBLAS, PyTorch's cuDNN);
#   (2) strata itself: strata_infer takes only a strata_train checkpoint and an image (no random
#       weights, no .npy), so strata's numbers are strata_codegen --time's: its own predict in direct and
#       graph mode, input copied in and output out, in the process that generated the program;
#   (3) PyTorch AOTInductor: torchvision's resnet50 (random weights, TF32 off) compiled by
#       bench/peers/aoti_resnet50.py compile into a .pt2 package, run (a) from Python
#       (aoti_resnet50.py run: torch._inductor.aoti_load_package) and (b) from C++
#       (bench/peers/aoti_runner, built here against the LibTorch inside the pip torch package).
# Per form: code and weights on disk, the shared libraries it loads (ldd's list for binaries; the
# distinct .so files mapped by the running process once its first result is written, which also
# counts what is dlopen'd: cuDNN's engine libraries, libcuda, PyTorch's extensions), the time from
# process start to the first result written (the output file's mtime; median of STARTS fresh
# processes, the forms' order rotated and reversed from one start to the next, each paying CUDA and
# cuDNN initialisation; the page cache is warm after the first), and per-inference times (median of
# REPEAT runs after warm-up: model_run's REPEAT mode; the AOTI forms time run() with CUDA events and a
# host clock, and the same run with the input copied in and the output out, as model_run does).
#   TARGETS="strata_codegen" tools/gpu/pack.sh       # here
#   OUT=$OUT tools/gpu/deploy.sh                      # there (carry .gpu)
#   STARTS    fresh processes per form for the start-up time (default 5)
#   REPEAT    timed runs per form (default 500)
#   START_TIMEOUT  seconds a fresh process may take to its first result (default 20); a form that
#             runs past it is not started again
#   BUDGET_S  the whole script's wall-clock budget in seconds (default 390: under 7 minutes with the
#             last step's kill grace); every step runs under `timeout`, capped by what is left, and a
#             step with no time left is recorded as skipped
# Writes $OUT (default /tmp/strata-deploy): deploy.md (the table), deploy.json (everything measured,
# raw; both by tools/gpu/deploy_table.py), deploy.log. Builds and intermediates live in WORK (default: a fresh temporary folder, kept and
# named in deploy.log). A form that fails (a build, a compile, a run) is recorded with its error line
# and the rest go on; exit status 1 if any step failed, 0 otherwise.
# strata's programs run with tools/gpu/env.sh's LD_LIBRARY_PATH (PyTorch's cuDNN first: the system
# one is older than the headers strata is built with); Python and the LibTorch runner run with the
# LD_LIBRARY_PATH this script was started with, so that PyTorch loads its own libraries as a user's
# install does.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-/tmp/strata-deploy}
pkg=${pkg:-.gpu}
starts=${STARTS:-5}
repeat=${REPEAT:-500}
budget=${BUDGET_S:-390}
start_cap=${START_TIMEOUT:-20}  # seconds one fresh process may take to its first result
gave_up=()
deadline=$((SECONDS + budget))
work=${WORK:-$(mktemp -d /tmp/strata-deploy-work.XXXXXX)}
mkdir -p "$out" "$work"
log="$out/deploy.log"
: >"$log"
say() { echo "$*" | tee -a "$log"; }

orig_ld=${LD_LIBRARY_PATH:-}
# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
strata_ld=$LD_LIBRARY_PATH
export LD_LIBRARY_PATH=$orig_ld
# `env` execs the program, so that $! of a backgrounded run is the program's own pid.
S=(env "LD_LIBRARY_PATH=$strata_ld")
# Python's fault handler: a crash in a Python form prints the stack it happened in to the step's log.
P=(env "LD_LIBRARY_PATH=$orig_ld" PYTHONFAULTHANDLER=1)
cudnn_root=$(dirname "$cudnn_lib")
peers=bench/peers
gen=$work/gen
runner=$work/aoti_runner_build/aoti_runner
pt2=$work/resnet50.pt2
input=$work/input.npy
model_args=(--backend cuda --model resnet50 --seed 3 --input "1,3,224,224")

# The seconds a step may take: what it asks for, capped by the budget left (15 s kept for the kill
# grace and the table).
allowed() {
  local want=$1 left=$((deadline - SECONDS - 15))
  [ "$left" -lt "$want" ] && want=$left
  [ "$want" -lt 0 ] && want=0
  echo "$want"
}
# step ID SECONDS COMMAND...: COMMAND under timeout, its output in $work/ID.log; "rc seconds" in
# $work/ID.rc (rc 124: timed out; 125: not run, the budget is spent); returns rc.
# failed_tail ID RC: a failed step's last log lines, into the log that comes back.
failed_tail() {
  [ "$2" = 0 ] || [ ! -s "$work/$1.log" ] || tail -n 25 "$work/$1.log" | sed 's/^/  | /' | tee -a "$log"
}
step() {
  local id=$1 t rc t0=$SECONDS
  t=$(allowed "$2")
  shift 2
  if [ "$t" -le 0 ]; then
    echo "skipped: the ${budget} s budget is spent" >"$work/$id.log"
    echo "125 0" >"$work/$id.rc"
    say "$id: skipped (budget spent)"
    return 125
  fi
  timeout -k 5 "$t" "$@" >"$work/$id.log" 2>&1
  rc=$?
  echo "$rc $((SECONDS - t0))" >"$work/$id.rc"
  say "$id: rc=$rc in $((SECONDS - t0)) s$([ "$rc" = 124 ] && echo " (timed out after $t s)")"
  failed_tail "$id" "$rc"
  return "$rc"
}
# sampled ID SECONDS TRIGGER COMMAND...: step's contract, the command in the background; once TRIGGER
# (the first result's file) is written, the distinct .so files the process maps go to $work/ID.libs.json.
sampled() {
  local id=$1 t pid rc t0=$SECONDS trigger=$3
  t=$(allowed "$2")
  shift 3
  rm -f "$trigger"
  if [ "$t" -le 0 ]; then
    echo "skipped: the ${budget} s budget is spent" >"$work/$id.log"
    echo "125 0" >"$work/$id.rc"
    say "$id: skipped (budget spent)"
    return 125
  fi
  "$@" >"$work/$id.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [ ! -s "$trigger" ] && [ $((SECONDS - t0)) -lt "$t" ]; do sleep 0.05; done
  if [ -s "$trigger" ] && kill -0 "$pid" 2>/dev/null; then
    python3 "$peers/deploy_libs.py" maps "$pid" --own "$PWD/$pkg/lib" >"$work/$id.libs.json" 2>/dev/null
  fi
  while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "$t" ]; do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    wait "$pid"
    rc=124
  else
    wait "$pid"
    rc=$?
  fi
  echo "$rc $((SECONDS - t0))" >"$work/$id.rc"
  say "$id: rc=$rc in $((SECONDS - t0)) s$([ "$rc" = 124 ] && echo " (timed out after $t s)")"
  failed_tail "$id" "$rc"
  return "$rc"
}
{
  echo "== deploy.sh $(date -u +%Y-%m-%dT%H:%M:%SZ), work folder $work, budget ${budget} s"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1
  echo "cores: $(nproc); cuDNN for strata's programs: $cudnn_root"
  "${P[@]}" python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', \
torchvision.__version__, 'CUDA', torch.version.cuda, 'cuDNN', torch.backends.cudnn.version())" 2>&1 | tail -1
} | tee -a "$log" >"$work/env.txt"

# One input for every form: float32, C order, the generated shape.
"${P[@]}" python3 -c "import numpy as np; np.save('$input', \
np.random.default_rng(1).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32))" || say "input: numpy failed"

# --- Phase 1, in parallel: the GPU-side generation and the three builds. strata records its cuDNN
# engines by heuristics (benchmark off), so the AOTI compile beside it does not change its choices;
# the compile time is taken while the two builds share the cores (deploy.md says so).
# shellcheck disable=SC2016 # the bash -c scripts take their arguments as $1...
(
  step gen 180 "${S[@]}" "$pkg/bin/strata_codegen" "${model_args[@]}" --out "$gen" --check &&
    step gen_build 200 bash -c 'cmake -S "$1" -B "$1/build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DCUDNN_ROOT="$2" && cmake --build "$1/build"' _ "$gen" "$cudnn_root"
) &
gen_pid=$!
# Inductor's and Triton's caches in the work folder: the compile is a cold one on every run of this
# script, not one served by a previous run's cache.
step aoti_compile 280 "${P[@]}" TORCHINDUCTOR_CACHE_DIR="$work/inductor_cache" TRITON_CACHE_DIR="$work/triton_cache" \
  python3 "$peers/aoti_resnet50.py" compile "$pt2" --input "$input" --expected "$work/aoti_expected.npy" \
  --json "$work/aoti_compile.json" &
compile_pid=$!
(
  # The pip package's LibTorch. cuDNN (the pip package's, which torch loads) is named for the Caffe2
  # configs that look for it; TORCH_CUDA_ARCH_LIST spares them detecting the GPU's architecture.
  prefix=$("${P[@]}" python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  cudnn_so=$(compgen -G "$cudnn_root/lib/libcudnn.so*" | head -1)
  # shellcheck disable=SC2016 # the bash -c script takes its arguments as $1...
  step runner_build 200 env TORCH_CUDA_ARCH_LIST=9.0 bash -c 'cmake -S "$1" -B "$2" -G Ninja \
    -DCMAKE_PREFIX_PATH="$3" -DCUDNN_ROOT="$4" -DCUDNN_INCLUDE_PATH="$4/include" -DCUDNN_LIBRARY_PATH="$5" &&
    cmake --build "$2"' _ "$peers/aoti_runner" "$(dirname "$runner")" "$prefix" "$cudnn_root" "$cudnn_so"
) &
runner_pid=$!
wait "$gen_pid" "$compile_pid" "$runner_pid"

have_model_run=0 have_python=0 have_cpp=0
[ -x "$gen/build/model_run" ] && have_model_run=1
[ -s "$pt2" ] && have_python=1
[ -s "$pt2" ] && [ -x "$runner" ] && have_cpp=1
say "ready: model_run $have_model_run, AOTI package $have_python, aoti_runner $have_cpp"
# What the program's bytes are (machine code, the kernels' fat binary, tables), and the objects' sizes.
if [ "$have_model_run" = 1 ]; then
  { size -A "$gen/build/model_run"; ls -l "$gen"/build/*.a "$gen"/build/CMakeFiles/*/*.o 2>/dev/null; } \
    >"$work/size_model_run.txt" 2>&1
  sed 's/^/size: /' "$work/size_model_run.txt" >>"$log"
fi

# model_run against strata's own output for the check input, byte for byte (codegen_cuda.sh's check).
if [ "$have_model_run" = 1 ] &&
  step bitwise 60 "${S[@]}" "$gen/build/model_run" "$gen/weights.bin" "$gen/check/input.npy" "$work/check_out.npy"; then
  if cmp -s "$work/check_out.npy" "$gen/check/expected.npy"; then echo yes; else echo NO; fi >"$work/bitwise.txt"
fi

# --- Phase 2: fresh processes, time to the first result.
# form_cmd FORM OUTPUT: sets cmd to the form's command line writing OUTPUT.
form_cmd() {
  case $1 in
    model_run) cmd=("${S[@]}" "$gen/build/model_run" "$gen/weights.bin" "$input" "$2") ;;
    aoti_python) cmd=("${P[@]}" python3 "$peers/aoti_resnet50.py" run "$pt2" "$input" "$2" --stack-after 8) ;;
    aoti_cpp) cmd=("${P[@]}" "$runner" "$pt2" "$input" "$2") ;;
  esac
}
forms=()
[ "$have_model_run" = 1 ] && forms+=(model_run)
[ "$have_python" = 1 ] && forms+=(aoti_python)
[ "$have_cpp" = 1 ] && forms+=(aoti_cpp)
: >"$work/starts.jsonl"
n=${#forms[@]}
for ((r = 0; r < starts && n > 0; r++)); do
  order=()
  for ((i = 0; i < n; i++)); do order+=("${forms[$(((r / 2 + i) % n))]}"); done
  if ((r % 2)); then  # every other start reversed: each form goes first, middle and last
    rev=()
    for ((i = n - 1; i >= 0; i--)); do rev+=("${order[$i]}"); done
    order=("${rev[@]}")
  fi
  for ((i = 0; i < n; i++)); do
    f=${order[$i]}
    o=$work/start_${f}_$r.npy
    rm -f "$o"
    if [[ " ${gave_up[*]} " == *" $f "* ]]; then
      say "start $r $f: skipped (an earlier start ran past ${start_cap} s)"
      continue
    fi
    t=$(allowed "$start_cap")
    if [ "$t" -le 0 ]; then
      say "start $r $f: skipped (budget spent)"
      continue
    fi
    form_cmd "$f" "$o"
    t0=$EPOCHREALTIME
    timeout -k 5 "$t" "${cmd[@]}" >"$work/start_${f}_$r.log" 2>&1
    rc=$?
    t1=$EPOCHREALTIME
    # A start that runs out its time is not repeated: the first run spent its whole budget on
    # three 60-second starts of the Python form.
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then gave_up+=("$f"); fi
    mt=$(stat -c %.9Y "$o" 2>/dev/null || echo null)
    self=$(grep '^{' "$work/start_${f}_$r.log" | tail -1)
    echo "{\"form\": \"$f\", \"round\": $r, \"position\": $i, \"rc\": $rc, \"t0\": $t0, \"t_exit\": $t1," \
      "\"t_output\": $mt, \"self\": ${self:-null}}" >>"$work/starts.jsonl"
    say "start $r $f: rc=$rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') s to exit"
    failed_tail "start_${f}_$r" "$rc"
  done
done

# --- Phase 3: per-inference times, one process per form, and the libraries each maps.
if [ "$have_model_run" = 1 ]; then
  sampled time_model_run 90 "$work/time_model_run.npy" "${S[@]}" "$gen/build/model_run" "$gen/weights.bin" "$input" \
    "$work/time_model_run.npy" "$repeat"
  step time_model_run_nograph 90 "${S[@]}" "$gen/build/model_run" "$gen/weights.bin" "$input" \
    "$work/time_model_run_nograph.npy" "$repeat" --no-graph
  "${S[@]}" ldd "$gen/build/model_run" >"$work/ldd_model_run.txt" 2>&1
fi
[ "$have_python" = 1 ] && step time_aoti_python 120 "${P[@]}" python3 "$peers/aoti_resnet50.py" run "$pt2" "$input" \
  "$work/time_aoti_python.npy" --repeat "$repeat" --stack-after 30
if [ "$have_cpp" = 1 ]; then
  step time_aoti_cpp 120 "${P[@]}" "$runner" "$pt2" "$input" "$work/time_aoti_cpp.npy" --repeat "$repeat"
  "${P[@]}" ldd "$runner" >"$work/ldd_aoti_cpp.txt" 2>&1
fi
# strata itself, last: it records the model again (its --time runs follow the generation).
sampled time_strata 150 "$work/gen_time/check/expected.npy" "${S[@]}" "$pkg/bin/strata_codegen" "${model_args[@]}" \
  --out "$work/gen_time" --check --time "$repeat"
"${S[@]}" ldd "$pkg/bin/strata_codegen" >"$work/ldd_strata.txt" 2>&1

python3 tools/gpu/deploy_table.py --work "$work" --pkg "$pkg" --out "$out" --starts "$starts" --repeat "$repeat" \
  2>&1 | tee -a "$log"
status=0
for f in "$work"/*.rc; do
  [ "$(cut -d' ' -f1 "$f")" = 0 ] || status=1
done
[ -s "$work/bitwise.txt" ] && [ "$(cat "$work/bitwise.txt")" != yes ] && status=1
say "deploy: status $status in $SECONDS s; work folder $work"
exit $status
