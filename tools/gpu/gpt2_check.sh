#!/usr/bin/env bash
# GPT-2 (nn::Gpt, the tape-mode composition) against Hugging Face GPT2LMHeadModel on the GPU
# machine, on random weights: a small model and GPT-2 small (124M), f32, logits compared and
# the eager forward timed on both sides, both also against the same model in float64; GPT-2 small from transformers' own state dict (Conv1D
# layout), with 24 greedy tokens against transformers' generate; then the decoding study (GPT-2
# small, batch 1, prompt 128, DECODE new tokens, greedy) in fp32 and bf16: strata's ways of decoding,
# PyTorch's three forms and JAX's two (bench/peers/jax_gpt2.py; JAX=0 skips), in the same call. Run from the repository root with .gpu/ packed by
#   TARGETS="gpt2_forward" tools/gpu/pack.sh
# Logs and ids go to $OUT (or /tmp/strata-gpu); strata's decoding figures to $OUT/gpt_decode_<precision>.json.
set -u
OUT=${OUT:-/tmp/strata-gpu}
D=$OUT/gpt
P=bench/peers/pytorch_gpt2.py
python3 $P export $D/small --layers 2 --heads 4 --embd 64 --vocab 1000 --block 64 --batch 2 --tokens 32 || exit 1
python3 $P export $D/g124 --layers 12 --heads 12 --embd 768 --vocab 50257 --block 1024 --batch 1 --tokens 128 || exit 1
(
  source tools/gpu/env.sh >/dev/null 2>&1
  .gpu/bin/gpt2_forward --weights $D/small/weights.safetensors --ids $D/small/ids.safetensors --out $D/small/strata.safetensors --layers 2 --heads 4 --embd 64 --vocab 1000 --block 64 --backend cuda
  .gpu/bin/gpt2_forward --hf --generate 24 --weights $D/g124/hf.safetensors --ids $D/g124/ids.safetensors --out $D/g124/strata.safetensors --layers 12 --heads 12 --embd 768 --vocab 50257 --block 1024 --backend cuda
)
python3 $P compare $D/small
python3 $P compare $D/g124 --tolerance 1e-4
DECODE=${DECODE:-256}  # 0: the parity checks only
[ "$DECODE" -gt 0 ] || PRECISIONS=""
for prec in ${PRECISIONS-fp32 bf16}; do
  (
    source tools/gpu/env.sh >/dev/null 2>&1
    .gpu/bin/gpt2_forward --hf --decode $DECODE --rounds 3 --precision $prec --repeat 3 --json $OUT/gpt_decode_$prec.json --weights $D/g124/hf.safetensors --ids $D/g124/ids.safetensors --out $D/g124/strata_$prec.safetensors --layers 12 --heads 12 --embd 768 --vocab 50257 --block 1024 --backend cuda
  )
  python3 $P decode $D/g124 --new $DECODE --rounds 3 --precision $prec
  # JAX beside them (JAX=0 skips): a jitted step per token and the whole generation as one jit.
  if [ "${JAX:-1}" != 0 ] && python3 -c "import jax" 2>/dev/null; then
    python3 bench/peers/jax_gpt2.py decode $D/g124 --new $DECODE --rounds 3 --precision $prec \
      --check-logits $D/g124/strata.safetensors
  fi
done
rm -f $D/*/weights.safetensors $D/*/hf.safetensors $D/*/strata*.safetensors
