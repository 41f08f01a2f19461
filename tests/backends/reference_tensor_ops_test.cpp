// The tensor API's ops on the reference backend: values against formulas written out here
// element by element (comparisons, where, reductions, softmax, bmm, index_select), and the
// backward rows against central differences in f64 (softmax_bwd) or as adjoints (index_add of
// index_select), on contiguous, transposed and broadcast operands.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "reference_test_util.h"
#include "support/coverage.h"

namespace strata::testing {
namespace {

STRATA_COVERS(compare, "values");
STRATA_COVERS(where, "values");
STRATA_COVERS(reduce_dims, "values");
STRATA_COVERS(softmax_fwd, "values");
STRATA_COVERS(softmax_bwd, "gradcheck");
STRATA_COVERS(bmm, "values");
STRATA_COVERS(index_select, "values");
STRATA_COVERS(index_add, "adjoint");

// x[i, j, k] of a [I, J, K] tensor of any strides.
double at3(const Tensor& t, int64_t i, int64_t j, int64_t k) {
  const double* p = t.data<double>();
  return p[i * t.strides()[0] + j * t.strides()[1] + k * t.strides()[2]];
}

TEST(ReferenceTensorOps, ComparisonsFollowTheirDefinitions) {
  ReferenceBackend ref;
  const Tensor a = from_values({1, 2, 3, -1, 5, 5}, {2, 3});
  const Tensor b = from_values({1, 3, 2, -1, 4, 6}, {3, 2}).permute({1, 0});  // b[i][j] = v[j * 2 + i]
  const auto av = a.to_vector<double>(), bv = b.contiguous().to_vector<double>();
  for (auto fn : {ops::CompareFn::eq, ops::CompareFn::ne, ops::CompareFn::lt, ops::CompareFn::le,
                  ops::CompareFn::gt, ops::CompareFn::ge}) {
    const Tensor y = Tensor::empty({2, 3}, DType::u8);
    ref.compare({a, b, y, fn});
    const auto yv = y.to_vector<int>();
    for (size_t i = 0; i < av.size(); ++i) {
      const double x = av[i], z = bv[i];
      const bool want = fn == ops::CompareFn::eq ? x == z : fn == ops::CompareFn::ne ? x != z
                        : fn == ops::CompareFn::lt ? x < z : fn == ops::CompareFn::le ? x <= z
                        : fn == ops::CompareFn::gt ? x > z : x >= z;
      EXPECT_EQ(yv[i], want ? 1 : 0) << ops::compare_name(fn) << " at " << i;
    }
  }
  // i64 labels larger than a double's 53 bits compare exactly.
  const Tensor big = Tensor::from_vector<int64_t>({(int64_t{1} << 60) + 1}, {1});
  const Tensor big2 = Tensor::from_vector<int64_t>({int64_t{1} << 60}, {1});
  const Tensor y = Tensor::empty({1}, DType::u8);
  ref.compare({big, big2, y, ops::CompareFn::eq});
  EXPECT_EQ(y.to_vector<int>()[0], 0);
}

TEST(ReferenceTensorOps, WherePicksByTheCondition) {
  ReferenceBackend ref;
  const Tensor c = Tensor::from_vector<uint8_t>({1, 0, 0, 7}, {2, 2});
  const Tensor a = from_values({1, 2, 3, 4}, {2, 2});
  const Tensor row = from_values({-1, -2}, {1, 2});
  const Tensor b = row.as_strided({2, 2}, {0, 1}, 0);  // broadcast
  const Tensor y = nan_tensor({2, 2});
  ref.where({c, a, b, y});
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, -2, -1, 4}));
}

TEST(ReferenceTensorOps, ReductionsOverDimsFollowTheirDefinitions) {
  ReferenceBackend ref;
  const Tensor x = random_tensor({5, 4, 3}, DType::f64, 1).permute({2, 1, 0});  // [3, 4, 5], strided
  // Over dim 1: sum, mean, max, min, argmax, argmin of x[i, :, k].
  const Tensor s = nan_tensor({3, 1, 5}), m = nan_tensor({3, 1, 5}), mx = nan_tensor({3, 1, 5}),
               mn = nan_tensor({3, 1, 5});
  const Tensor am = Tensor::empty({3, 1, 5}, DType::i64), an = Tensor::empty({3, 1, 5}, DType::i64);
  ref.reduce_dims({x, s, ops::ReduceFn::sum});
  ref.reduce_dims({x, m, ops::ReduceFn::mean});
  ref.reduce_dims({x, mx, ops::ReduceFn::max});
  ref.reduce_dims({x, mn, ops::ReduceFn::min});
  ref.reduce_dims({x, am, ops::ReduceFn::argmax});
  ref.reduce_dims({x, an, ops::ReduceFn::argmin});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < 5; ++k) {
      double sum = 0, hi = -INFINITY, lo = INFINITY;
      int64_t hi_at = 0, lo_at = 0;
      for (int64_t j = 0; j < 4; ++j) {
        const double v = at3(x, i, j, k);
        sum += v;
        if (v > hi) hi = v, hi_at = j;
        if (v < lo) lo = v, lo_at = j;
      }
      EXPECT_NEAR(at3(s, i, 0, k), sum, 1e-12);
      EXPECT_NEAR(at3(m, i, 0, k), sum / 4, 1e-12);
      EXPECT_EQ(at3(mx, i, 0, k), hi);
      EXPECT_EQ(at3(mn, i, 0, k), lo);
      EXPECT_EQ(am.data<int64_t>()[i * 5 + k], hi_at);
      EXPECT_EQ(an.data<int64_t>()[i * 5 + k], lo_at);
    }
  // Over dims 0 and 2 at once, and over every dim.
  const Tensor s02 = nan_tensor({1, 4, 1}), all = nan_tensor({1, 1, 1});
  ref.reduce_dims({x, s02, ops::ReduceFn::sum});
  ref.reduce_dims({x, all, ops::ReduceFn::sum});
  double total = 0;
  for (int64_t j = 0; j < 4; ++j) {
    double sum = 0;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t k = 0; k < 5; ++k) sum += at3(x, i, j, k);
    EXPECT_NEAR(s02.data<double>()[j], sum, 1e-12);
    total += sum;
  }
  EXPECT_NEAR(all.item(), total, 1e-12);
}

TEST(ReferenceTensorOps, MaxAndArgmaxFollowPyTorchOnNaNAndTies) {
  ReferenceBackend ref;
  const Tensor x = from_values({1, NAN, 3, 2, 2, 1}, {2, 3});
  const Tensor mx = nan_tensor({2, 1});
  const Tensor am = Tensor::empty({2, 1}, DType::i64);
  ref.reduce_dims({x, mx, ops::ReduceFn::max});
  ref.reduce_dims({x, am, ops::ReduceFn::argmax});
  EXPECT_TRUE(std::isnan(mx.to_vector<double>()[0]));  // NaN propagates
  EXPECT_EQ(mx.to_vector<double>()[1], 2.0);
  EXPECT_EQ(am.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));  // NaN wins; the first of a tie
}

TEST(ReferenceTensorOps, SoftmaxFollowsItsDefinitionAndItsBackwardTheDifferences) {
  ReferenceBackend ref;
  for (bool log : {false, true})
    for (int dim : {0, 1}) {
      const Tensor x = random_tensor({4, 3}, DType::f64, 2, -3.0, 3.0).permute({1, 0});  // [3, 4]
      const Tensor y = nan_tensor({3, 4});
      ref.softmax_fwd({x, y, dim, log});
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 4; ++j) {
          double z = 0;
          for (int64_t t = 0; t < (dim == 0 ? 3 : 4); ++t)
            z += std::exp(dim == 0 ? x.data<double>()[t * x.strides()[0] + j * x.strides()[1]]
                                   : x.data<double>()[i * x.strides()[0] + t * x.strides()[1]]);
          const double v = x.data<double>()[i * x.strides()[0] + j * x.strides()[1]];
          const double want = log ? v - std::log(z) : std::exp(v) / z;
          EXPECT_NEAR(y.data<double>()[i * 4 + j], want, 1e-12);
        }
      // d/dx of sum(cot * softmax(x)) by central differences against softmax_bwd.
      const Tensor xc = x.contiguous(), cot = random_tensor({3, 4}, DType::f64, 3);
      auto loss = [&] {
        const Tensor yy = nan_tensor({3, 4});
        ref.softmax_fwd({xc, yy, dim, log});
        return dot(yy, cot);
      };
      const Tensor yc = nan_tensor({3, 4}), dx = nan_tensor({3, 4});
      ref.softmax_fwd({xc, yc, dim, log});
      ref.softmax_bwd({yc, cot, dx, dim, log});
      EXPECT_TRUE(grad_matches(log ? "log_softmax" : "softmax", dx, numeric_grad(xc, loss)));
    }
}

TEST(ReferenceTensorOps, BatchedProductIsTheSumOfProducts) {
  ReferenceBackend ref;
  const Tensor a = random_tensor({2, 4, 3}, DType::f64, 4).permute({0, 2, 1});  // [2, 3, 4], transposed
  const Tensor b1 = random_tensor({1, 4, 5}, DType::f64, 5);
  const Tensor b = b1.as_strided({2, 4, 5}, {0, 5, 1}, 0);  // one matrix for both batches
  const Tensor y = nan_tensor({2, 3, 5});
  ref.bmm({a, b, y, 2.0});
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        double want = 0;
        for (int64_t k = 0; k < 4; ++k) want += at3(a, n, i, k) * at3(b, n, k, j);
        EXPECT_NEAR(at3(y, n, i, j), 2.0 * want, 1e-12);
      }
}

TEST(ReferenceTensorOps, IndexSelectPicksRowsAndIndexAddIsItsAdjoint) {
  ReferenceBackend ref;
  const Tensor x = random_tensor({5, 3}, DType::f64, 6);
  const Tensor index = Tensor::from_vector<int64_t>({4, 0, 4, 2}, {4});
  const Tensor y = nan_tensor({4, 3});
  ref.index_select({x, index, y, 0});
  const std::vector<int64_t> idx = {4, 0, 4, 2};
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(y.data<double>()[i * 3 + j], x.data<double>()[idx[i] * 3 + j]);
  // <index_select(x), g> = <x, index_add(g)> for every x and g.
  const Tensor g = random_tensor({4, 3}, DType::f64, 7);
  const Tensor acc = Tensor::empty({5, 3}, DType::f64);
  ref.fill({acc, 0.0});
  ref.index_add({g, index, acc, 0});
  EXPECT_NEAR(dot(y, g), dot(x, acc), 1e-12);
  // A bad index is an error naming it, never a read outside x.
  const Tensor bad = Tensor::from_vector<int64_t>({1, 5}, {2});
  const Tensor y2 = nan_tensor({2, 3});
  try {
    ref.index_select({x, bad, y2, 0});
    ADD_FAILURE() << "no error for index 5 of a dim of 5";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index[1] = 5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::testing
