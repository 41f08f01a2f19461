#pragma once
// The model of the checkpoint-kill test, shared by the writer process and the test:
// two 512x512 linear layers, about 2 MB of checkpoint, so a save takes long enough
// (serialise, write, fsync, rename) for random kills to land inside it.
// kill_test_fill(m, k) gives every parameter values that are a function of step k
// alone, so a loaded checkpoint can be checked value by value against the step it
// claims to be.
#include <memory>
#include <vector>

#include "strata/backends/api/registry.h"
#include "strata/nn/layers/container.h"
#include "strata/nn/layers/linear.h"

namespace strata::testing {

inline std::unique_ptr<nn::Sequential> kill_test_model() {
  using P = ops::VirtualDispatch;
  const P p(backends::registry().get("reference"));
  auto m = std::make_unique<nn::Sequential>();
  m->add(std::make_unique<nn::Linear<P>>(p, 512, 512));
  m->add(std::make_unique<nn::Linear<P>>(p, 512, 512));
  return m;
}

inline void kill_test_fill(nn::Module& m, int64_t step) {
  int64_t salt = 0;
  for (auto& [name, t] : m.named_parameters()) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(step) + static_cast<float>((static_cast<int64_t>(i) * 7 + salt) % 1000) * 1e-3f;
    copy_into(Tensor::from_vector(v, t.sizes()), t);
    ++salt;
  }
}

}  // namespace strata::testing
