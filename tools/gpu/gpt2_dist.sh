#!/usr/bin/env bash
# GPT-2 small data-parallel training on a machine with two (or more) GPUs, from the repository
# root, in one device call: strata (bench/gpt2_dist, graph mode by default) on 1 and NPROC GPUs,
# then PyTorch DDP eager and compiled (bench/peers/pytorch_ddp_gpt2.py under torchrun) on 1 and
# NPROC, the frameworks' order alternated between the two rounds; then strata_gpt --nproc NPROC on
# this repository's docs for STEPS_GPT steps (the data-parallel language model run end to end).
# bf16, batch BATCH (16) x 1,024 tokens per GPU. Knobs: NPROC (2), BATCH, STEPS (10), WARMUP (3),
# MODES ("graph"), STEPS_GPT (50; 0 skips).
# Pack first:  TARGETS="gpt2_dist strata_gpt" CARRY_LIBS="turbojpeg jpeg pugixml stb" tools/gpu/pack.sh
# Results: $OUT/gpt2_dist.jsonl (one JSON line per run) and $OUT/gpt2_dist.log.
# Written before a multi-GPU machine was at hand: not yet run on one.
set -uo pipefail
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-gpt2-dist}
mkdir -p "$out"
# NVLink multicast stays off on the shared machines (their rules; KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
n=${NPROC:-2}
batch=${BATCH:-16}
steps=${STEPS:-10}
warmup=${WARMUP:-3}
jsonl=$out/gpt2_dist.jsonl
strata_runs() {
  (
    # shellcheck source=tools/gpu/env.sh
    source tools/gpu/env.sh
    use_nccl
    for mode in ${MODES:-graph}; do
      for w in 1 "$n"; do
        timeout 240 "$pkg/bin/gpt2_dist" --batch "$batch" --seq 1024 --precision bf16 --dispatch "$mode" \
          --steps "$steps" --warmup "$warmup" --nproc "$w" 2>>"$out/strata.err" | grep '^{' >>"$jsonl"
      done
    done
  )
}
torch_runs() {
  for form in eager compile; do
    for w in 1 "$n"; do
      timeout 300 torchrun --standalone --nproc_per_node "$w" bench/peers/pytorch_ddp_gpt2.py --form "$form" \
        --batch "$batch" --seq 1024 --steps "$steps" --warmup "$warmup" 2>>"$out/torch.err" | grep '^{' >>"$jsonl"
    done
  done
}
{
  nvidia-smi -L
  echo "== round 1: strata, then PyTorch ($(date -u +%H:%M:%S))"
  strata_runs
  torch_runs
  echo "== round 2: PyTorch, then strata ($(date -u +%H:%M:%S))"
  torch_runs
  strata_runs
  if [ "${STEPS_GPT:-50}" -gt 0 ]; then
    echo "== strata_gpt --nproc $n on the repository's docs ($(date -u +%H:%M:%S))"
    (
      source tools/gpu/env.sh
      use_nccl
      timeout 240 "$pkg/bin/strata_gpt" --backend cuda --data docs --suffix .md --nproc "$n" --steps "${STEPS_GPT:-50}" \
        2>&1 | tail -15
    )
  fi
  cat "$jsonl"
} 2>&1 | tee "$out/gpt2_dist.log"
