#pragma once
#include "strata/backends/api/registry.h"
#include "strata/core/tensor.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/functional.h"
#include "support/coverage.h"
#include "support/expect_error.h"
#include "support/random.h"

namespace strata::testing {

inline ops::VirtualDispatch reference_dispatch() { return ops::VirtualDispatch(backends::registry().get("reference")); }
inline Tensor rnd(const Shape& s, DType dt = DType::f32, uint64_t seed = 7) { return random_tensor(s, dt, seed); }
// A tensor that claims to live on cuda:0 (borrowed host memory), for device checks
// on machines without a GPU. Never dereferenced: the check must fire first.
inline Tensor fake_cuda(const Shape& s) {
  static std::vector<float> buf(4096);
  return Tensor::borrow(buf.data(), s, DType::f32, Device::cuda(0));
}

}  // namespace strata::testing
