// The formulas of ops/table/pointwise.def on the reference backend: every row's values against
// an independent <cmath> formula (support/pointwise_rows.h) and its derivative against central
// differences in f64, on contiguous, transposed, channels-last, one-element and empty operands.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "reference_test_util.h"
#include "support/coverage.h"
#include "support/pointwise_rows.h"

namespace strata::testing {
namespace {

STRATA_COVERS(unary_fwd, "values");
STRATA_COVERS(unary_bwd, "gradcheck");
STRATA_COVERS(binary_fwd, "values");
STRATA_COVERS(binary_bwd, "gradcheck");

using ops::BinaryFn;
using ops::UnaryFn;

TEST(PointwiseRows, EveryRowHasAnIndependentFormula) {
  std::vector<std::string> missing;
#define STRATA_UNARY(name, params, fwd, bwd, domain)                                                  \
  if (std::none_of(unary_rows().begin(), unary_rows().end(),                                          \
                   [](const UnaryRow& r) { return r.fn == UnaryFn::name; }))                          \
    missing.push_back(#name);
#define STRATA_BINARY(name, fwd, bwd_a, bwd_b, domain)                                                  \
  if (std::none_of(binary_rows().begin(), binary_rows().end(),                                        \
                   [](const BinaryRow& r) { return r.fn == BinaryFn::name; }))                         \
    missing.push_back(#name);
#include "strata/ops/table/pointwise.def"
#undef STRATA_BINARY
#undef STRATA_UNARY
  EXPECT_TRUE(missing.empty()) << "rows of pointwise.def without a formula in support/pointwise_rows.h: "
                               << ::testing::PrintToString(missing);
}

// The operand layouts every row runs on: [3,4,5] contiguous, a transposed [5,3] view,
// channels-last [2,3,2,4], one element, and an empty tensor.
struct Layout {
  const char* name;
  Shape sizes;
  bool transposed;
  MemoryFormat fmt;
};
const Layout kLayouts[] = {{"contiguous", {3, 4, 5}, false, kNCHW},
                           {"transposed", {3, 5}, true, kNCHW},
                           {"channels_last", {2, 3, 2, 4}, false, kNHWC},
                           {"one", {1}, false, kNCHW},
                           {"empty", {0, 3}, false, kNCHW}};

Tensor operand(ops::PointwiseDomain dom, const Layout& l, uint64_t seed) {
  if (!l.transposed) return domain_tensor(dom, l.sizes, DType::f64, seed, l.fmt);
  return domain_tensor(dom, {l.sizes[1], l.sizes[0]}, DType::f64, seed).permute({1, 0});
}

TEST(ReferencePointwise, UnaryValuesMatchIndependentFormulas) {
  ReferenceBackend ref;
  for (const UnaryRow& r : unary_rows())
    for (const Layout& l : kLayouts) {
      const Tensor x = operand(domain_of(r.fn), l, 11);
      const Tensor y = nan_tensor(l.sizes);
      ref.unary_fwd({x, y, r.fn, r.p0, r.p1});
      const auto xv = x.contiguous().to_vector<double>(), yv = y.to_vector<double>();
      for (size_t i = 0; i < xv.size(); ++i)
        EXPECT_NEAR(yv[i], r.expect(xv[i]), 1e-12 * (1 + std::fabs(r.expect(xv[i]))))
            << ops::unary_name(r.fn) << " " << l.name << " at x = " << xv[i];
    }
}

TEST(ReferencePointwise, UnaryGradientsMatchCentralDifferences) {
  ReferenceBackend ref;
  for (const UnaryRow& r : unary_rows())
    for (const Layout& l : kLayouts) {
      if (l.sizes.numel() == 0) continue;
      const Tensor x = operand(domain_of(r.fn), l, 21);
      const Tensor y = nan_tensor(l.sizes), cot = random_tensor(l.sizes, DType::f64, 22);
      auto loss = [&] {
        ref.unary_fwd({x, y, r.fn, r.p0, r.p1});
        return dot(y, cot);
      };
      loss();
      const Tensor dx = nan_tensor(l.sizes);
      ref.unary_bwd({x, y, cot, dx, r.fn, r.p0, r.p1});
      EXPECT_TRUE(grad_matches((std::string(ops::unary_name(r.fn)) + " dx " + l.name).c_str(), dx,
                               numeric_grad(x, loss)));
    }
}

TEST(ReferencePointwise, BinaryValuesMatchIndependentFormulas) {
  ReferenceBackend ref;
  for (const BinaryRow& r : binary_rows())
    for (const Layout& l : kLayouts) {
      const Tensor a = operand(domain_of(r.fn), l, 31), b = operand(domain_of(r.fn), l, 32);
      const Tensor y = nan_tensor(l.sizes);
      ref.binary_fwd({a, b, y, r.fn});
      const auto av = a.contiguous().to_vector<double>(), bv = b.contiguous().to_vector<double>();
      const auto yv = y.to_vector<double>();
      for (size_t i = 0; i < av.size(); ++i)
        EXPECT_NEAR(yv[i], r.expect(av[i], bv[i]), 1e-12 * (1 + std::fabs(r.expect(av[i], bv[i]))))
            << ops::binary_name(r.fn) << " " << l.name << " at a = " << av[i] << ", b = " << bv[i];
    }
}

TEST(ReferencePointwise, BinaryGradientsMatchCentralDifferences) {
  ReferenceBackend ref;
  for (const BinaryRow& r : binary_rows())
    for (const Layout& l : kLayouts) {
      if (l.sizes.numel() == 0) continue;
      const Tensor a = operand(domain_of(r.fn), l, 41), b = operand(domain_of(r.fn), l, 42);
      const Tensor y = nan_tensor(l.sizes), cot = random_tensor(l.sizes, DType::f64, 43);
      auto loss = [&] {
        ref.binary_fwd({a, b, y, r.fn});
        return dot(y, cot);
      };
      loss();
      const Tensor da = nan_tensor(l.sizes), db = nan_tensor(l.sizes);
      ref.binary_bwd({a, b, y, cot, da, db, r.fn});
      const std::string n = std::string(ops::binary_name(r.fn)) + " " + l.name;
      EXPECT_TRUE(grad_matches((n + " da").c_str(), da, numeric_grad(a, loss)));
      EXPECT_TRUE(grad_matches((n + " db").c_str(), db, numeric_grad(b, loss)));
    }
}

// Ties of maximum/minimum split the gradient (PyTorch's rule); one of the two asked for.
TEST(ReferencePointwise, MaximumTiesSplitTheGradientAndOneSideAlone) {
  ReferenceBackend ref;
  const Tensor a = from_values({1, 2, 3}, {3}), b = from_values({1, 5, 0}, {3});
  const Tensor y = nan_tensor({3}), dy = from_values({4, 4, 4}, {3}), da = nan_tensor({3});
  ref.binary_fwd({a, b, y, BinaryFn::maximum});
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 5, 3}));
  ref.binary_bwd({a, b, y, dy, da, {}, BinaryFn::maximum});
  EXPECT_EQ(da.to_vector<double>(), (std::vector<double>{2, 0, 4}));
}

}  // namespace
}  // namespace strata::testing
