#pragma once
// What the GPT-2 benchmarks share (gpt2_train, gpt2_dist): the model as a precision asks for it
// and PyTorch's AdamW as the peers run it.
#include <memory>
#include <string>

#include "strata/nn/model.h"
#include "strata/ops/dispatch.h"

namespace strata::bench {

// AdamW with a constant learning rate and decoupled weight decay on every parameter.
inline nn::OptimizerConfig gpt_adamw(double lr, double weight_decay) {
  nn::OptimizerConfig oc;
  oc.kind = nn::OptimizerKind::adamw;
  oc.lr = lr;
  oc.weight_decay = weight_decay;
  return oc;
}

// GPT `c` in `mode` on `backend`; precision "fp32", or "bf16"/"fp16": that compute dtype over f32
// master weights. The loss is read once per step: no copy of the planned results.
inline std::unique_ptr<nn::Model> make_gpt_model(nn::GptConfig c, const std::string& precision,
                                                 ops::DispatchMode mode, const std::string& backend) {
  nn::ModelOptions mo;
  mo.borrowed_results = true;
  if (const DType dt = nn::parse_precision(precision).value_or(DType::f32); dt != DType::f32) {
    c.compute_dtype = dt;
    mo.compute_dtype = dt;
  }
  return nn::make_gpt(c, mode, backend, mo);
}

}  // namespace strata::bench
