#!/usr/bin/env bash
# The cuda emitter on the GPU machine (docs/codegen.md, "The cuda emitter"), one device call:
# strata_codegen --backend cuda records each case's prediction on strata's cuda backend and
# writes it out; each project is built with CMake there (CUDA runtime, cuBLAS, PyTorch's cuDNN:
# nothing of strata), model_run runs strata's check input and its output is compared byte for
# byte with strata's own direct-mode output (check/expected.npy), with and without the CUDA
# graph; then model_run is timed with and without the graph beside strata's direct and graph
# modes (strata_codegen --time: predict with the input in and the output out, as model_run).
#   TARGETS="strata_codegen" CARRY_LIBS="jpeg turbojpeg stb pugixml" tools/gpu/pack.sh   # here
#   OUT=$OUT tools/gpu/codegen_cuda.sh                                                  # there (carry .gpu)
#   CASES   space-separated model:N,C,H,W (model: lenet, lenet_keras, resnet18, resnet50); default:
#           LeNet-5 (both variants) and ResNet-18/50 (small-input stem) at batch 1 and 32, and
#           ResNet-50 at 224x224 (the ImageNet stem: space-to-depth, max pooling). A GPT:
#           gpt:L,H,E,V,K:B,T (layers, heads, width, vocabulary, block; batch and tokens), e.g.
#           gpt:2,2,64,100,16:2,8 (the tests' GPT) or gpt:12,12,768,50257,1024:1,32 (GPT-2 small's
#           shape at 32 tokens); its input is token ids, its output the logits.
#   REPEAT  timed runs of each (default 200; 0: no timing)
# Writes $OUT (default /tmp/strata-codegen-cuda): codegen_cuda.log, summary.md, and a folder per
# case (the project, its build, gen.log, build.log, run logs). Exit status: 1 if a case fails
# (strata_codegen fails, a project does not build or run, or its output is not strata's bit for
# bit); a case refused by name (an op the emitter does not write out) is listed, not a failure.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-/tmp/strata-codegen-cuda}
pkg=${pkg:-.gpu}
repeat=${REPEAT:-200}
cases=${CASES:-"lenet:1,1,28,28 lenet:32,1,28,28 lenet_keras:1,1,28,28 lenet_keras:32,1,28,28
  resnet18:1,3,32,32 resnet18:32,3,32,32 resnet50:1,3,32,32 resnet50:32,3,32,32 resnet50:1,3,224,224"}
mkdir -p "$out"
log="$out/codegen_cuda.log"
: >"$log"
# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
cudnn_root=$(dirname "$cudnn_lib")
say() { echo "$*" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1 | tee -a "$log"
say "cuDNN for strata and the generated programs: $cudnn_root"
summary="$out/summary.md"
{
  echo "| case | calls | bitwise (graph) | bitwise (no graph) | model_run graph | model_run no graph | strata direct |" \
    "strata graph |"
  echo "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |"
} >"$summary"
failed=0
median() { sed -n 's/.*: \([0-9.]*\) ms median.*/\1/p' "$1" | head -1; }
for c in $cases; do
  model=${c%%:*}
  shape=${c##*:}
  name="${model}_${shape//,/x}"
  args=(--model "${model%_keras}" --seed 3 --input "$shape")
  [ "$model" = lenet_keras ] && args+=(--lenet-variant keras)
  if [ "$model" = gpt ]; then
    IFS=, read -r layers heads embd vocab block <<<"$(echo "$c" | cut -d: -f2)"
    args+=(--layers "$layers" --heads "$heads" --embd "$embd" --vocab "$vocab" --block "$block")
    name="gpt_${layers}x${heads}x${embd}x${vocab}_${shape//,/x}"
  fi
  dir="$out/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  timing=()
  [ "$repeat" -gt 0 ] && timing=(--time "$repeat")
  if ! "$pkg/bin/strata_codegen" --backend cuda "${args[@]}" --out "$dir/project" --check "${timing[@]}" \
      >"$dir/gen.log" 2>&1; then
    why=$(tail -1 "$dir/gen.log")
    # An op or choice the emitter does not write out is named and refused by design; anything else fails.
    refusal="emitter does not support\|not supported by the cuda emitter\|the cuda emitter writes out"
    if grep -q "$refusal" "$dir/gen.log"; then
      say "$name: refused by strata_codegen: $why"
      echo "| $name | refused: $(echo "$why" | cut -c1-160) | | | | | | |" >>"$summary"
    else
      say "$name: strata_codegen FAILED: $why"
      echo "| $name | FAILED: $(echo "$why" | cut -c1-160) | | | | | | |" >>"$summary"
      failed=1
    fi
    continue
  fi
  say "$(grep '^strata_codegen: [^s]' "$dir/gen.log" | head -1)"
  calls=$(sed -n 's/.*: \([0-9]*\) calls.*/\1/p' "$dir/gen.log" | head -1)
  p="$dir/project"
  if ! { cmake -S "$p" -B "$p/build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCUDNN_ROOT="$cudnn_root" &&
         cmake --build "$p/build"; } >"$dir/build.log" 2>&1; then
    say "$name: the generated project does not build (see $dir/build.log): $(grep -m1 -i error "$dir/build.log")"
    echo "| $name | $calls | does not build | | | | | |" >>"$summary"
    failed=1
    continue
  fi
  say "$name: model_run $(stat -c %s "$p/build/model_run") bytes ($(size -A "$p/build/model_run" |
    awk '$1 == ".nv_fatbin" || $1 == ".text" {printf "%s %s ", $1, $2}')); kernels.cu $(wc -l <"$p/kernels.cu") lines"
  # The onednn programs' checks, which model_run here shares: strata's output byte for byte (with the
  # graph, again after REPEAT runs), no strata library linked, a bad input or weights file named.
  if ! cmake -DOUT="$p" -DLIBRARY=libcudnn -P tests/codegen/check_generated.cmake >"$dir/check.log" 2>&1; then
    say "$name: tests/codegen/check_generated.cmake fails: $(grep -m1 -A2 'Error' "$dir/check.log" | tail -1)"
    failed=1
  fi
  verdict=()
  for form in graph no-graph; do
    flag=()
    [ "$form" = no-graph ] && flag=(--no-graph)
    o="$dir/output_$form.npy"
    if ! "$p/build/model_run" "$p/weights.bin" "$p/check/input.npy" "$o" "${flag[@]}" >"$dir/run_$form.log" 2>&1; then
      verdict+=("fails: $(tail -1 "$dir/run_$form.log" | cut -c1-120)")
      failed=1
    elif cmp -s "$o" "$p/check/expected.npy"; then
      verdict+=("yes")
    else
      diff=$(python3 -c "import numpy as n; a=n.load('$o'); b=n.load('$p/check/expected.npy'); \
print('max |diff| %g' % abs(a.astype('f8')-b).max())" 2>&1)
      verdict+=("NO ($diff)")
      failed=1
    fi
  done
  say "$name: bitwise with the graph: ${verdict[0]}; without: ${verdict[1]}"
  tg="" tn="" sd="" sg=""
  if [ "$repeat" -gt 0 ]; then
    "$p/build/model_run" "$p/weights.bin" "$p/check/input.npy" "$dir/timed.npy" "$repeat" >"$dir/time_graph.log" 2>&1
    "$p/build/model_run" "$p/weights.bin" "$p/check/input.npy" "$dir/timed.npy" "$repeat" --no-graph \
      >"$dir/time_no-graph.log" 2>&1
    tg=$(median "$dir/time_graph.log")
    tn=$(median "$dir/time_no-graph.log")
    sd=$(grep "strata's direct mode" "$dir/gen.log" | sed -n 's/.*: \([0-9.]*\) ms median.*/\1/p')
    sg=$(grep "strata's graph mode" "$dir/gen.log" | sed -n 's/.*: \([0-9.]*\) ms median.*/\1/p')
    say "$name: median ms: model_run graph $tg, no graph $tn; strata direct $sd, graph $sg"
    # The forward alone on the resident input (model_run's second timing line): host and device apart.
    for form in graph no-graph; do
      say "$name: model_run $form, $(grep -o 'input resident: .*' "$dir/time_$form.log" | cut -c18-)"
    done
  fi
  echo "| $name | $calls | ${verdict[0]} | ${verdict[1]} | $tg | $tn | $sd | $sg |" >>"$summary"
done
tee -a "$log" <"$summary"
exit $failed
