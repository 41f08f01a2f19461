// The formulas of ops/table/pointwise.def refuse bad input with the formula's name, the argument
// and what is wrong; the named functions take exactly the row's parameters (a compile error
// otherwise: static_assert in ops/functional.h).
#include <gtest/gtest.h>

#include "support/op_fixtures.h"

namespace strata::testing {
namespace {

STRATA_COVERS(unary_fwd, "errors");
STRATA_COVERS(unary_bwd, "errors");
STRATA_COVERS(binary_fwd, "errors");
STRATA_COVERS(binary_bwd, "errors");

TEST(OpErrors, PointwiseUnary) {
  auto d = reference_dispatch();
  const Tensor x = rnd({2, 3});
  EXPECT_STRATA_ERROR(ops::exp(d, Tensor()), "exp", "input", "undefined");
  EXPECT_STRATA_ERROR(ops::log(d, Tensor::empty({3}, DType::i64)), "log", "input");
  EXPECT_STRATA_ERROR(ops::sqrt(d, fake_cuda({3})), "sqrt", "input", "cuda:0");
  EXPECT_STRATA_ERROR(ops::clamp(d, x, 1.0, -1.0), "clamp", "min 1", "max -1");
  EXPECT_STRATA_ERROR(ops::unary_bwd(d, ops::UnaryFn::tanh, x, x, rnd({3, 2})), "tanh", "grad_output", "shape");
  EXPECT_STRATA_ERROR(ops::unary_bwd(d, ops::UnaryFn::tanh, x, x, rnd({2, 3}, DType::f64)), "tanh", "dtype");
}

TEST(OpErrors, PointwiseBinary) {
  auto d = reference_dispatch();
  const Tensor a = rnd({2, 3});
  EXPECT_STRATA_ERROR(ops::mul(d, a, rnd({3, 2})), "mul", "a", "b", "[2,3]", "[3,2]");
  EXPECT_STRATA_ERROR(ops::div(d, a, rnd({2, 3}, DType::f64)), "div", "dtype");
  EXPECT_STRATA_ERROR(ops::sub(d, a, Tensor()), "sub", "b", "undefined");
  EXPECT_STRATA_ERROR(ops::maximum(d, fake_cuda({2, 3}), fake_cuda({2, 3})), "maximum", "cuda:0");
  EXPECT_STRATA_ERROR(ops::binary_bwd(d, ops::BinaryFn::mul, a, a, a, rnd({2, 2})), "mul", "grad_output");
}

}  // namespace
}  // namespace strata::testing
