#!/usr/bin/env bash
# GPT training on the GPU machine beside PyTorch, in one call:
#  1. the loss-curve parity: a tiny GPT-2 (2 layers, 4 heads, 128 wide, vocabulary 512) trained
#     STEPS steps (default 200) with AdamW from the same initial weights on the same batches, f32
#     with TF32 off, by PyTorch (transformers' GPT2LMHeadModel) and by strata in all four dispatch
#     modes (which must agree bitwise); every step's loss within 1 % of PyTorch's;
#  2. training speed: GPT-2 small, bf16, T=1024, at each batch in BATCHES (default "16"): strata
#     (MODES, default graph) and PyTorch eager and torch.compile (FORMS), alternated over rounds,
#     the same learning rate on both sides; PROFILE=1 adds one strata step with every op timed alone.
#     JAX's jitted step beside them (bench/peers/jax_gpt2.py train; JAX=0 skips). CURVE=0 skips the curve; ATTENTION="cudnn gemm" times strata with cuDNN's fused attention
#     and again with the cuBLAS GEMM path (--no-cudnn-attention).
# Run from the repository root with .gpu/ packed by
#   TARGETS="gpt2_train" tools/gpu/pack.sh
# Logs and files go to $OUT (or /tmp/strata-gpu).
set -u
OUT=${OUT:-/tmp/strata-gpu}
D=$OUT/gpt_train
P=bench/peers/pytorch_gpt2_train.py
STEPS=${STEPS:-200}
status=0
if [ "${CURVE:-1}" != 0 ]; then
python3 $P curve $D/curve --steps "$STEPS" || exit 1
(
  source tools/gpu/env.sh >/dev/null 2>&1
  .gpu/bin/gpt2_train curve --weights $D/curve/weights.safetensors --data $D/curve/batches.safetensors \
    --out $D/curve/strata.json --layers 2 --heads 4 --embd 128 --vocab 512 --block 64 --backend cuda --modes all
) || status=1
python3 $P compare $D/curve || status=1
fi
for b in ${BATCHES:-16}; do
  for attention in ${ATTENTION:-cudnn}; do
    (
      source tools/gpu/env.sh >/dev/null 2>&1
      flag=""
      [ "$attention" = gemm ] && flag=--no-cudnn-attention
      .gpu/bin/gpt2_train speed --backend cuda --batch "$b" --seq 1024 --precision bf16 --modes "${MODES:-graph}" \
        --steps "${SPEED_STEPS:-10}" --rounds 3 --lr 6e-4 ${PROFILE:+--profile} $flag
    ) || status=1
  done
  python3 $P speed --batch "$b" --seq 1024 --forms "${FORMS:-eager,compile}" --steps "${SPEED_STEPS:-10}" --rounds 3 --lr 6e-4 || status=1
  if [ "${JAX:-1}" != 0 ] && python3 -c "import jax" 2>/dev/null; then
    python3 bench/peers/jax_gpt2.py train --batch "$b" --seq 1024 --steps "${SPEED_STEPS:-10}" --rounds 3 --lr 6e-4 || status=1
  fi
done
rm -f $D/curve/weights.safetensors $D/curve/batches.safetensors
exit $status
