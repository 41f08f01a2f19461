#!/usr/bin/env bash
# The cuda emitter's training step on the GPU machine (docs/codegen.md, "The cuda emitter"), one
# device call: strata_codegen --backend cuda --train --check records each case's training step
# on strata's cuda backend (direct mode) and writes it out with strata's losses and state after
# CHECK_STEPS more steps; the projects are built with CMake (CUDA runtime, cuBLAS, cuDNN: nothing
# of strata), side by side, then model_train runs those steps with and without its CUDA graph, and
# its printed losses and written state are compared byte for byte with strata's (check/losses.txt,
# check/expected_weights.bin); its refusal of labels out of range is checked too.
#   TARGETS="strata_codegen" CARRY_LIBS="jpeg turbojpeg stb pugixml" tools/gpu/pack.sh   # here
#   OUT=$OUT tools/gpu/codegen_cuda_train.sh        # there (carry .gpu)
#   CASES        space-separated model:N,C,H,W (lenet, lenet_keras, resnet18, resnet50; ResNet's stem
#                follows the size: the small-input stem at 32x32, the ImageNet stem with its
#                space-to-depth and max pooling at 224x224); default: LeNet-5, both variants, at
#                batch 2 and 32, and ResNet-18/50 at 2x3x32x32 and ResNet-50 at 2x3x224x224
#   CHECK_STEPS  strata's steps to compare (default 3)
#   STEP_TIMEOUT seconds each generation, build or run may take (default 240)
# Writes $OUT (default /tmp/strata-codegen-cuda-train): codegen_cuda_train.log, summary.md and a
# folder per case (gen.log, build.log, the runs' outputs). Exit status 1 if a case fails; a case
# refused by name is listed, not a failure.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-/tmp/strata-codegen-cuda-train}
pkg=${pkg:-.gpu}
steps=${CHECK_STEPS:-3}
limit=${STEP_TIMEOUT:-240}
cases=${CASES:-"lenet:2,1,28,28 lenet:32,1,28,28 lenet_keras:2,1,28,28 lenet_keras:32,1,28,28
  resnet18:2,3,32,32 resnet50:2,3,32,32 resnet50:2,3,224,224"}
mkdir -p "$out"
log="$out/codegen_cuda_train.log"
: >"$log"
# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
cudnn_root=$(dirname "$cudnn_lib")
say() { echo "$*" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1 | tee -a "$log"
say "cuDNN for strata and the generated programs: $cudnn_root; $steps steps compared; ${limit}s a step at most"
if [ ! -x "$pkg/bin/strata_codegen" ]; then
  say "no $pkg/bin/strata_codegen: pack it first (TARGETS=\"strata_codegen\" tools/gpu/pack.sh) and carry $pkg"
  exit 1
fi
summary="$out/summary.md"
{
  echo "| case | calls | losses (graph) | state (graph) | losses (no graph) | state (no graph) | labels refused |"
  echo "| --- | ---: | --- | --- | --- | --- | --- |"
} >"$summary"
failed=0
row() { echo "| $* |" >>"$summary"; }
name_of() { local shape=${1#*:}; echo "${1%%:*}_${shape//,/x}"; }
# 1. Record and write out each case on the GPU, one at a time.
ready=()
for c in $cases; do
  model=${c%%:*}
  name=$(name_of "$c")
  dir="$out/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  args=(--model "${model%_keras}" --seed 3 --input "${c#*:}" --train --check-steps "$steps")
  [ "$model" = lenet_keras ] && args+=(--lenet-variant keras)
  if ! timeout "$limit" "$pkg/bin/strata_codegen" --backend cuda "${args[@]}" --out "$dir/project" --check \
      >"$dir/gen.log" 2>&1; then
    why=$(tail -1 "$dir/gen.log")
    if grep -q "not supported by the cuda emitter\|emitter does not support\|the cuda emitter writes out" \
        "$dir/gen.log"; then
      say "$name: refused by strata_codegen: $why"
      row "$name | refused: $(echo "$why" | cut -c1-160) | | | | |"
    else
      say "$name: strata_codegen FAILED (status or timeout): $why"
      row "$name | FAILED: $(echo "$why" | cut -c1-160) | | | | |"
      failed=1
    fi
    continue
  fi
  say "$(grep '^strata_codegen: ' "$dir/gen.log" | head -1)"
  ready+=("$c")
done
# 2. Build the projects side by side (each one's compilers are mostly single-threaded).
for c in "${ready[@]}"; do
  p="$out/$(name_of "$c")/project"
  { timeout "$limit" cmake -S "$p" -B "$p/build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DCUDNN_ROOT="$cudnn_root" && timeout "$limit" cmake --build "$p/build"; } >"$out/$(name_of "$c")/build.log" 2>&1 &
done
wait
# 3. Run each program against strata's losses and state.
for c in "${ready[@]}"; do
  name=$(name_of "$c")
  dir="$out/$name"
  p="$dir/project"
  calls=$(sed -n 's/.*: \([0-9]*\) calls.*/\1/p' "$dir/gen.log" | head -1)
  if [ ! -x "$p/build/model_train" ]; then
    say "$name: the generated project does not build (see $dir/build.log): $(grep -m1 -i error "$dir/build.log")"
    row "$name | $calls | does not build | | | |"
    failed=1
    continue
  fi
  say "$name: model_train $(stat -c %s "$p/build/model_train") bytes; kernels.cu $(wc -l <"$p/kernels.cu") lines"
  if ldd "$p/build/model_train" | grep -q strata; then
    say "$name: model_train links a strata library: $(ldd "$p/build/model_train" | grep strata | head -1)"
    failed=1
  fi
  verdict=()
  for form in graph no-graph; do
    flag=()
    [ "$form" = no-graph ] && flag=(--no-graph)
    if ! timeout "$limit" "$p/build/model_train" "$p/weights.bin" "$p/check/input.npy" "$p/check/labels.npy" \
        "$steps" "$dir/trained_$form.bin" "${flag[@]}" >"$dir/losses_$form.txt" 2>"$dir/run_$form.log"; then
      verdict+=("fails: $(tail -1 "$dir/run_$form.log" | cut -c1-100)" "")
      failed=1
      continue
    fi
    if cmp -s "$dir/losses_$form.txt" "$p/check/losses.txt"; then
      verdict+=("yes")
    else
      verdict+=("NO: $(paste -d' ' "$dir/losses_$form.txt" "$p/check/losses.txt" | head -1 | cut -c1-100)")
      failed=1
    fi
    if cmp -s "$dir/trained_$form.bin" "$p/check/expected_weights.bin"; then
      verdict+=("yes")
    else
      verdict+=("NO ($(cmp "$dir/trained_$form.bin" "$p/check/expected_weights.bin" 2>&1 | head -1 | cut -c1-80))")
      # Which of the state's tensors differ, by the places model.cpp's header lists ("w + 64: fc.bias (...)").
      python3 - "$p/model.cpp" "$dir/trained_$form.bin" "$p/check/expected_weights.bin" >"$dir/state_diff_$form.txt" \
        2>&1 <<'PY'
import re, sys
spans = [(int(m[0]), m[1], int(m[2])) for m in re.findall(r"^//   w \+ (\d+): (.*) \((\d+) bytes\)$",
                                                           open(sys.argv[1]).read(), re.M)]
a, b = open(sys.argv[2], "rb").read()[24:], open(sys.argv[3], "rb").read()[24:]
bad = [name for off, name, n in spans if a[off:off + n] != b[off:off + n]]
print(f"{len(bad)} of {len(spans)} tensors differ: " + ", ".join(bad[:12]))
PY
      say "$name ($form): $(head -1 "$dir/state_diff_$form.txt")"
      failed=1
    fi
  done
  # Labels out of range are named, not trained on.
  refused=no
  if ! timeout "$limit" "$p/build/model_train" "$p/weights.bin" "$p/check/input.npy" \
      "$p/check/labels_out_of_range.npy" 1 "$dir/refused.bin" >/dev/null 2>"$dir/refused.log" &&
     grep -q "labels_out_of_range.npy: label .* out of range" "$dir/refused.log"; then
    refused=yes
  else
    failed=1
  fi
  say "$name: losses/state with the graph: ${verdict[0]} / ${verdict[1]}; without: ${verdict[2]} / ${verdict[3]}; \
labels out of range refused: $refused"
  row "$name | $calls | ${verdict[0]} | ${verdict[1]} | ${verdict[2]} | ${verdict[3]} | $refused"
done
tee -a "$log" <"$summary"
exit $failed
