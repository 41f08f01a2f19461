#pragma once
// Helpers of the autograd tests that check gradients by central differences in f64.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "strata/autograd/gradcheck.h"
#include "strata/core/tensor.h"
#include "support/random.h"

namespace strata::testing {

using Inputs = std::vector<Tensor>;

// A random f64 leaf that requires its gradient.
inline Tensor leaf(const Shape& s, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Tensor t = random_tensor(s, DType::f64, seed, lo, hi);
  t.set_requires_grad(true);
  return t;
}
// sum(y * c) for a fixed random c: a gradient that varies per element.
inline Tensor weighted(const Tensor& y, uint64_t seed = 99) {
  return (y * random_tensor(y.sizes(), DType::f64, seed)).sum();
}
inline void expect_gradcheck(const char* what, const std::function<Tensor(const Inputs&)>& f, const Inputs& in) {
  const auto r = autograd::gradcheck(f, in);
  EXPECT_TRUE(r.ok) << what << ": " << r.report;
}

}  // namespace strata::testing
