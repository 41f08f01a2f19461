// The formulas of ops/table/pointwise.def through autograd (tape, nodes, which gradient goes
// where), by central differences in f64 on the reference backend, and the named functions
// (autograd::exp, autograd::clamp, autograd::mul, ...) as the same ops.
#include <gtest/gtest.h>

#include "strata/autograd/node.h"
#include "strata/autograd/functions.h"
#include "strata/autograd/gradcheck.h"
#include "support/op_fixtures.h"
#include "support/pointwise_rows.h"

namespace strata::testing {
namespace {

using Inputs = std::vector<Tensor>;

Tensor leaf_in(ops::PointwiseDomain dom, const Shape& s, uint64_t seed) {
  Tensor t = domain_tensor(dom, s, DType::f64, seed);
  t.set_requires_grad(true);
  return t;
}

TEST(AutogradPointwise, EveryUnaryRowMatchesCentralDifferences) {
  auto d = reference_dispatch();
  for (const UnaryRow& r : unary_rows()) {
    const Tensor x = leaf_in(domain_of(r.fn), {3, 4}, 3);
    // sum(f(x) * f(x)) so the backward sees a gradient that varies per element
    auto f = [&](const Inputs& in) {
      Tensor y = autograd::unary(d, r.fn, in[0], r.p0, r.p1);
      return autograd::sum(d, autograd::mul(d, y, y));
    };
    auto res = autograd::gradcheck(f, {x});
    EXPECT_TRUE(res.ok) << ops::unary_name(r.fn) << ": " << res.report;
  }
}

TEST(AutogradPointwise, EveryBinaryRowMatchesCentralDifferencesForBothInputs) {
  auto d = reference_dispatch();
  for (const BinaryRow& r : binary_rows()) {
    const Tensor a = leaf_in(domain_of(r.fn), {2, 5}, 4), b = leaf_in(domain_of(r.fn), {2, 5}, 5);
    auto f = [&](const Inputs& in) {
      Tensor y = autograd::binary(d, r.fn, in[0], in[1]);
      return autograd::sum(d, autograd::mul(d, y, y));
    };
    auto res = autograd::gradcheck(f, {a, b});
    EXPECT_TRUE(res.ok) << ops::binary_name(r.fn) << ": " << res.report;
  }
}

TEST(AutogradPointwise, OnlyTheInputThatNeedsAGradientGetsOne) {
  auto d = reference_dispatch();
  Tensor a = leaf_in(ops::PointwiseDomain::any, {4}, 6);
  const Tensor b = random_tensor({4}, DType::f64, 7);  // no gradient wanted
  autograd::backward(autograd::sum(d, autograd::div(d, a, b)));
  ASSERT_TRUE(a.grad().defined());
  const auto g = a.grad().to_vector<double>(), bv = b.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_DOUBLE_EQ(g[i], 1.0 / bv[i]);
  EXPECT_FALSE(b.grad().defined());
}

TEST(AutogradPointwise, NamedFunctionsAreTheirRows) {
  auto d = reference_dispatch();
  const Tensor x = domain_tensor(ops::PointwiseDomain::positive, {5}, DType::f64, 8);
  EXPECT_EQ(ops::exp(d, x).to_vector<double>(), ops::unary(d, ops::UnaryFn::exp, x).to_vector<double>());
  EXPECT_EQ(ops::clamp(d, x, 0.5, 1.0).to_vector<double>(),
            ops::unary(d, ops::UnaryFn::clamp, x, 0.5, 1.0).to_vector<double>());
  EXPECT_EQ(ops::pow_scalar(d, x, 3).to_vector<double>(),
            ops::unary(d, ops::UnaryFn::pow_scalar, x, 3.0).to_vector<double>());
  EXPECT_EQ(autograd::mul(d, x, x).to_vector<double>(), ops::binary(d, ops::BinaryFn::mul, x, x).to_vector<double>());
}

}  // namespace
}  // namespace strata::testing
