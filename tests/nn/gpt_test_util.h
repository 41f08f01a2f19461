#pragma once
// Shared helpers of the GPT model tests (gpt_model_test.cpp, gpt_direct_test.cpp): a tiny
// configuration, its model initialised alike in every mode, AdamW, and batches of a repeating
// sequence with the id after each.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/factories.h"
#include "strata/nn/model.h"

namespace strata::testing {

inline nn::GptConfig tiny_gpt(DType dt = DType::f32) {
  nn::GptConfig c;
  c.vocab_size = 11;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.dtype = dt;
  return c;
}
inline std::unique_ptr<nn::Model> make_tiny_gpt(ops::DispatchMode mode, const std::string& backend = "reference") {
  manual_seed(21);  // GPT-2's initialisation draws from the default generator
  return nn::make_gpt(tiny_gpt(), mode, backend);
}
inline nn::OptimizerConfig gpt_adamw() {
  nn::OptimizerConfig oc;
  oc.kind = nn::OptimizerKind::adamw;
  oc.lr = 2e-2;
  oc.weight_decay = 0.1;
  return oc;
}
// `rows` windows of `len` ids of a repeating sequence (tiny_gpt's 11 ids) and the ids after each.
inline std::pair<Tensor, Tensor> gpt_batch(int64_t shift, int64_t rows = 3, int64_t len = 8) {
  std::vector<int64_t> x, y;
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t t = 0; t < len; ++t) {
      x.push_back((b + t + shift) % 11);
      y.push_back((b + t + shift + 1) % 11);
    }
  return {Tensor::from_vector(x, Shape{rows, len}), Tensor::from_vector(y, Shape{rows, len})};
}

}  // namespace strata::testing
