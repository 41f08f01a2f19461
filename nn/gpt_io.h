#pragma once
// GPT-2 checkpoints as Hugging Face's transformers writes them (GPT2LMHeadModel's state dict in
// safetensors: names under "transformer.", the attention and MLP projections stored as Conv1D
// weights [in, out], the transpose of a Linear's), loaded strictly into nn::Gpt.
#include "strata/nn/layers/transformer.h"
#include "strata/nn/safetensors.h"

namespace strata::nn {

// Every parameter of m from `contents`: "transformer.<name>" (Conv1D weights transposed), the
// tied "lm_head.weight" checked equal to wte's when present, the attention's mask buffers
// (".attn.bias", ".attn.masked_bias") skipped. A missing tensor, one of other sizes, or a name
// that is none of these is a strata::Error naming it (`source` names the file in messages).
template <class P>
void load_hf_gpt2(Gpt<P>& m, const safetensors::Contents& contents, const std::string& source);

}  // namespace strata::nn
