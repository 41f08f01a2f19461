#!/usr/bin/env bash
# GPT-2 small training speed in one device call, as docs/results/gpt_training.md quotes it: strata
# (graph mode), then PyTorch's torch.compile, then strata again (the frameworks' order alternated),
# bf16, batch BATCH (16) x 1,024 tokens, three rounds of ten steps each; then the step's kernels by
# kind (ncu over one warm-up and one timed direct-mode step: direct mode runs the kernels graph
# mode captures; NCU=0 skips). TESTS, a gtest filter, runs those cuda tests first (e.g.
# TESTS='*LayerNorm*:*CrossEntropy*:*Gpt*' after a kernel change).
# Pack first:  TARGETS="gpt2_train test_cuda_backend" tools/gpu/pack.sh
# Results: $OUT/gpt2_speed/ (speed JSON lines, torch.txt, ncu.csv.gz, ncu_table.txt, tests.txt).
set -u
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-gpu}/gpt2_speed
mkdir -p "$out"
batch=${BATCH:-16}
strata_speed() {
  (
    # shellcheck source=tools/gpu/env.sh
    source tools/gpu/env.sh
    timeout 120 "$pkg/bin/gpt2_train" speed --backend cuda --batch "$batch" --seq 1024 --precision bf16 \
      --modes graph --steps 10 --rounds 3 --lr 6e-4 2>&1 | grep '^{' | tee -a "$out/strata.jsonl"
  )
}
if [ -n "${TESTS:-}" ]; then
  (
    source tools/gpu/env.sh
    timeout 300 "$pkg/bin/test_cuda_backend" --gtest_brief=1 --gtest_filter="$TESTS" >"$out/tests.txt" 2>&1
    echo "rc=$?" >>"$out/tests.txt"
  )
  tail -3 "$out/tests.txt"
fi
strata_speed
timeout 200 python3 bench/peers/pytorch_gpt2_train.py speed --batch "$batch" --seq 1024 --forms compile --steps 10 \
  --rounds 3 --lr 6e-4 >"$out/torch.txt" 2>&1
grep '^{' "$out/torch.txt" | tail -1
strata_speed
if [ "${NCU:-1}" != 0 ]; then
  (
    source tools/gpu/env.sh
    timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
      "$pkg/bin/gpt2_train" speed --backend cuda --batch "$batch" --seq 1024 --precision bf16 --modes direct \
      --steps 1 --rounds 1 --warmup 1 --lr 6e-4 >"$out/ncu.csv" 2>"$out/ncu.err"
  )
  python3 tools/gpu/ncu_kernels.py "$out/ncu.csv" --steps 2 | tee "$out/ncu_table.txt" | head -16
  gzip -f "$out/ncu.csv"
fi
