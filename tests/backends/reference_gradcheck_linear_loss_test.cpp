// linear, relu, dropout and the losses on the reference backend: backward ops
// against central differences in f64; forward values against hand-worked numbers.
#include <gtest/gtest.h>

#include "reference_test_util.h"
#include "support/coverage.h"
#include "support/expect_error.h"

namespace strata::testing {
namespace {

STRATA_COVERS(linear_fwd, "gradcheck");
STRATA_COVERS(linear_fwd, "values");
STRATA_COVERS(linear_bwd_data, "gradcheck");
STRATA_COVERS(linear_bwd_weight, "gradcheck");
STRATA_COVERS(relu_fwd, "gradcheck");
STRATA_COVERS(relu_fwd, "values");
STRATA_COVERS(relu_bwd, "gradcheck");
STRATA_COVERS(dropout_fwd, "gradcheck");
STRATA_COVERS(dropout_bwd, "gradcheck");
STRATA_COVERS(softmax_xent_fwd, "gradcheck");
STRATA_COVERS(softmax_xent_fwd, "values");
STRATA_COVERS(softmax_xent_bwd, "gradcheck");
STRATA_COVERS(bce_logits_fwd, "gradcheck");
STRATA_COVERS(bce_logits_fwd, "values");
STRATA_COVERS(bce_logits_bwd, "gradcheck");

// ---------------------------------------------------------------- linear

struct LinearCase {
  const char* name;
  int64_t n, in, out;
  bool bias;
  bool transposed_x;  // x as a non-contiguous (transposed) view
};

const LinearCase kLinearCases[] = {
    {"bias", 3, 5, 4, true, false},
    {"batch1_no_bias", 1, 7, 3, false, false},
    {"strided_x", 4, 6, 5, true, true},
};

class LinearGradcheck : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearGradcheck, AllInputsMatchCentralDifferences) {
  const LinearCase& c = GetParam();
  ReferenceBackend ref;
  const Tensor x = c.transposed_x ? random_tensor({c.in, c.n}, DType::f64, 51).permute({1, 0})
                                  : random_tensor({c.n, c.in}, DType::f64, 51);
  const Tensor w = random_tensor({c.out, c.in}, DType::f64, 52);
  const Tensor b = c.bias ? random_tensor({c.out}, DType::f64, 53) : Tensor();
  const Tensor y = nan_tensor({c.n, c.out});
  const Tensor cot = random_tensor({c.n, c.out}, DType::f64, 54);
  auto loss = [&] {
    ref.linear_fwd({x, w, b, y});
    return dot(y, cot);
  };
  const Tensor dx = nan_tensor({c.n, c.in}), dw = nan_tensor({c.out, c.in});
  const Tensor db = c.bias ? nan_tensor({c.out}) : Tensor();
  ref.linear_bwd_data({cot, w, dx});
  ref.linear_bwd_weight({x, cot, dw, db});
  EXPECT_TRUE(grad_matches("dx", dx, numeric_grad(x, loss)));
  EXPECT_TRUE(grad_matches("dw", dw, numeric_grad(w, loss)));
  if (c.bias) {
    EXPECT_TRUE(grad_matches("db", db, numeric_grad(b, loss)));
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, LinearGradcheck, ::testing::ValuesIn(kLinearCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ReferenceLinear, HandWorkedValues) {
  ReferenceBackend ref;
  // x [2,3] * w[2,3]^T + b.
  const Tensor x = from_values({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor w = from_values({1, 0, -1, 2, 1, 0}, {2, 3});
  const Tensor b = from_values({10, 20}, {2});
  const Tensor y = nan_tensor({2, 2});
  ref.linear_fwd({x, w, b, y});
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1 - 3 + 10, 2 + 2 + 20, 4 - 6 + 10, 8 + 5 + 20}));
}

// ---------------------------------------------------------------- relu, dropout

TEST(ReferenceRelu, GradcheckAndValues) {
  ReferenceBackend ref;
  const Tensor x = random_tensor({2, 3, 5, 3}, DType::f64, 61, -1, 1, kNHWC);
  const Tensor y = nan_tensor({2, 3, 5, 3});
  const Tensor cot = random_tensor({2, 3, 5, 3}, DType::f64, 62);
  auto loss = [&] {
    ref.relu_fwd({x, y});
    return dot(y, cot);
  };
  loss();
  const auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(yv[i], std::max(xv[i], 0.0));
  const Tensor dx = nan_tensor({2, 3, 5, 3}, DType::f64, kNHWC);
  ref.relu_bwd({y, cot, dx});
  EXPECT_TRUE(grad_matches("dx", dx, numeric_grad(x, loss)));
}

TEST(ReferenceDropout, GradcheckWithAFixedMask) {
  ReferenceBackend ref;
  const Tensor x = random_tensor({4, 5, 3}, DType::f64, 63);
  const Tensor y = nan_tensor({4, 5, 3});
  const Tensor mask = Tensor::empty({4, 5, 3}, DType::u8);
  const Tensor cot = random_tensor({4, 5, 3}, DType::f64, 64);
  auto loss = [&] {
    ops::DropoutFwdArgs a{x, y, mask};
    a.p = 0.3;
    a.seed = 1234;
    ref.dropout_fwd(a);
    return dot(y, cot);
  };
  loss();
  const Tensor dx = nan_tensor({4, 5, 3});
  ops::DropoutBwdArgs b{cot, mask, dx};
  b.p = 0.3;
  ref.dropout_bwd(b);
  EXPECT_TRUE(grad_matches("dx", dx, numeric_grad(x, loss)));
}

// ---------------------------------------------------------------- softmax cross-entropy

struct XentCase {
  const char* name;
  int64_t n, c;
  bool transposed_logits;
  double scale;          // logits in [-scale, scale)
  int64_t every;         // every `every`-th row ignored; 0: none
  int64_t ignore_index;  // -100, or a class whose rows are then left out
};

const XentCase kXentCases[] = {
    {"small", 4, 5, false, 2.0, 0, -100},
    {"batch1", 1, 7, false, 2.0, 0, -100},
    {"strided_large_logits", 3, 6, true, 30.0, 0, -100},
    {"ignored_rows", 7, 5, false, 2.0, 3, -100},
    {"strided_ignored_rows", 5, 9, true, 4.0, 2, -100},
    {"ignore_index_is_a_class", 6, 4, false, 2.0, 4, 2},
};

Tensor xent_logits(const XentCase& c, uint64_t seed, DType dt = DType::f64) {
  return c.transposed_logits ? random_tensor({c.c, c.n}, dt, seed, -c.scale, c.scale).permute({1, 0})
                             : random_tensor({c.n, c.c}, dt, seed, -c.scale, c.scale);
}
Tensor xent_labels(const XentCase& c, uint64_t seed) {
  return c.every ? labels_with_ignored(c.n, c.c, seed, c.every, c.ignore_index) : random_labels(c.n, c.c, seed);
}

class SoftmaxXentGradcheck : public ::testing::TestWithParam<XentCase> {};

// The backward, from the logits and the saved [N] log-sum-exp only, against central
// differences of the forward's loss; ignored rows' gradients are zero, and so are theirs.
TEST_P(SoftmaxXentGradcheck, LogitsMatchCentralDifferences) {
  const XentCase& c = GetParam();
  ReferenceBackend ref;
  const Tensor logits = xent_logits(c, 71);
  const Tensor labels = xent_labels(c, 72);
  const Tensor loss_t = nan_tensor(Shape{}), lse = nan_tensor({c.n});
  const double cot = 0.7;
  auto loss = [&] {
    ref.softmax_xent_fwd({logits, labels, loss_t, lse, c.ignore_index});
    return loss_t.item() * cot;
  };
  loss();
  const Tensor dlogits = nan_tensor({c.n, c.c});
  ref.softmax_xent_bwd({logits, lse, labels, scalar_tensor(cot), dlogits, c.ignore_index});
  EXPECT_TRUE(grad_matches("dlogits", dlogits, numeric_grad(logits, loss)));
}

// The loss and the saved log-sum-exp against the formula written here in f64: the mean over
// the rows not ignored of log(sum_j exp x_nj) - x_n[label], and lse for every row.
TEST_P(SoftmaxXentGradcheck, ValuesMatchAnF64Formula) {
  const XentCase& c = GetParam();
  ReferenceBackend ref;
  for (DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor logits = xent_logits(c, 74, dt);
    const Tensor labels = xent_labels(c, 75);
    const Tensor loss = nan_tensor(Shape{}, dt), lse = nan_tensor({c.n}, dt);
    ref.softmax_xent_fwd({logits, labels, loss, lse, c.ignore_index});
    const std::vector<double> x = logits.to_vector<double>();
    const std::vector<int64_t> lab = labels.to_vector<int64_t>();
    const std::vector<double> got_lse = lse.to_vector<double>();
    double total = 0;
    int64_t kept = 0;
    for (int64_t n = 0; n < c.n; ++n) {
      double s = 0;
      for (int64_t j = 0; j < c.c; ++j) s += std::exp(x[n * c.c + j]);
      const double want_lse = std::log(s);
      EXPECT_NEAR(got_lse[n], want_lse, dt == DType::f64 ? 1e-12 : 1e-5 * std::fabs(want_lse) + 1e-6) << "row " << n;
      if (lab[n] == c.ignore_index) continue;
      total += want_lse - x[n * c.c + lab[n]];
      ++kept;
    }
    ASSERT_GT(kept, 0);
    ASSERT_LT(kept, c.every ? c.n : c.n + 1);
    EXPECT_NEAR(loss.item(), total / kept, dt == DType::f64 ? 1e-12 : 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, SoftmaxXentGradcheck, ::testing::ValuesIn(kXentCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ReferenceSoftmaxXent, HandWorkedValuesAndStability) {
  ReferenceBackend ref;
  // Row 0: equal logits, loss log 3. Row 1: logits (1000, 0, 0), label 1: loss 1000
  // (a naive exp overflows to inf/NaN). Mean over the batch: (log 3 + 1000) / 2.
  const Tensor logits = from_values({5, 5, 5, 1000, 0, 0}, {2, 3});
  const Tensor labels = Tensor::from_vector(std::vector<int64_t>{2, 1}, {2});
  const Tensor loss = nan_tensor(Shape{}), lse = nan_tensor({2});
  ref.softmax_xent_fwd({logits, labels, loss, lse});
  EXPECT_NEAR(loss.item(), (std::log(3.0) + 1000.0) / 2, 1e-12);
  const auto l = lse.to_vector<double>();
  EXPECT_NEAR(l[0], 5 + std::log(3.0), 1e-14);
  EXPECT_EQ(l[1], 1000.0);
  // The backward's softmax, recomputed from lse, is (1/3, 1/3, 1/3) and (1, e^-1000, e^-1000).
  const Tensor d = nan_tensor({2, 3});
  ref.softmax_xent_bwd({logits, lse, labels, scalar_tensor(2.0), d});
  const auto dv = d.to_vector<double>();
  EXPECT_NEAR(dv[0], 1.0 / 3, 1e-15);
  EXPECT_NEAR(dv[2], 1.0 / 3 - 1, 1e-15);
  EXPECT_EQ(dv[3], 1.0);
  EXPECT_NEAR(dv[4], -1.0, 1e-15);

  // f32 too: large logits stay finite; the saved lse is f32.
  const Tensor l32 = from_values({100, -100, 0, 0}, {2, 2}, DType::f32);
  const Tensor lab32 = Tensor::from_vector(std::vector<int64_t>{1, 0}, {2});
  const Tensor loss32 = nan_tensor(Shape{}, DType::f32), lse32 = nan_tensor({2}, DType::f32);
  ref.softmax_xent_fwd({l32, lab32, loss32, lse32});
  EXPECT_NEAR(loss32.item(), (200.0 + std::log(2.0)) / 2, 1e-4);
}

// Rows labelled ignore_index leave the mean: the loss of [a, ignored, b] is that of [a, b].
TEST(ReferenceSoftmaxXent, IgnoredRowsLeaveTheMean) {
  ReferenceBackend ref;
  const Tensor logits = random_tensor({3, 4}, DType::f64, 76);
  const Tensor loss = nan_tensor(Shape{}), lse = nan_tensor({3});
  ref.softmax_xent_fwd({logits, Tensor::from_vector(std::vector<int64_t>{1, -100, 3}, {3}), loss, lse});
  std::vector<double> x = logits.to_vector<double>();
  x.erase(x.begin() + 4, x.begin() + 8);
  const Tensor kept_logits = from_values(x, {2, 4});
  const Tensor loss2 = nan_tensor(Shape{}), lse2 = nan_tensor({2});
  ref.softmax_xent_fwd({kept_logits, Tensor::from_vector(std::vector<int64_t>{1, 3}, {2}), loss2, lse2});
  EXPECT_NEAR(loss.item(), loss2.item(), 1e-15);
}

// Every row ignored: 0/0, NaN, as torch.nn.functional.cross_entropy returns in PyTorch 2.x;
// the gradient is zero (no row contributes), not NaN.
TEST(ReferenceSoftmaxXent, EveryRowIgnoredGivesNanLossAndZeroGradient) {
  ReferenceBackend ref;
  const Tensor logits = random_tensor({3, 4}, DType::f64, 77);
  const Tensor labels = Tensor::from_vector(std::vector<int64_t>{-100, -100, -100}, {3});
  const Tensor loss = nan_tensor(Shape{}), lse = nan_tensor({3}), d = nan_tensor({3, 4});
  ref.softmax_xent_fwd({logits, labels, loss, lse});
  EXPECT_TRUE(std::isnan(loss.item()));
  for (double v : lse.to_vector<double>()) EXPECT_TRUE(std::isfinite(v));
  ref.softmax_xent_bwd({logits, lse, labels, scalar_tensor(1.0), d});
  for (double v : d.to_vector<double>()) EXPECT_EQ(v, 0.0);
}

TEST(ReferenceSoftmaxXent, OutOfRangeLabelThrowsNamingOpIndexAndValue) {
  ReferenceBackend ref;
  const Tensor logits = random_tensor({3, 4}, DType::f64, 73);
  const Tensor loss = nan_tensor(Shape{}), lse = nan_tensor({3});
  for (int64_t bad : {int64_t{4}, int64_t{-1}, int64_t{-101}}) {
    const Tensor labels = Tensor::from_vector(std::vector<int64_t>{-100, bad, 2}, {3});
    const std::string value = "labels[1] = " + std::to_string(bad);
    EXPECT_STRATA_ERROR(ref.softmax_xent_fwd({logits, labels, loss, lse}), "softmax_xent_fwd", "argument 'labels'",
                        value.c_str(), "[0, 4)", "ignore_index (-100)");
    const Tensor dl = nan_tensor({3, 4});
    EXPECT_STRATA_ERROR(ref.softmax_xent_bwd({logits, lse, labels, scalar_tensor(1.0), dl}), "softmax_xent_bwd",
                        value.c_str());
  }
}

// ---------------------------------------------------------------- BCE with logits

TEST(ReferenceBceLogits, GradcheckOverAllElements) {
  ReferenceBackend ref;
  // Multi-label [N,C] and a rank-4 NHWC map; logits spread wide so both branches of |x| run.
  for (const auto& [shape, fmt] : {std::pair{Shape{3, 5}, kNCHW}, std::pair{Shape{2, 3, 3, 2}, kNHWC}}) {
    const Tensor logits = random_tensor(shape, DType::f64, 81, -6, 6, fmt);
    const Tensor targets = random_tensor(shape, DType::f64, 82, 0, 1, fmt);
    const Tensor loss_t = nan_tensor(Shape{});
    const double cot = -1.3;
    auto loss = [&] {
      ref.bce_logits_fwd({logits, targets, loss_t});
      return loss_t.item() * cot;
    };
    const Tensor dlogits = nan_tensor(shape, DType::f64, fmt);
    ref.bce_logits_bwd({logits, targets, scalar_tensor(cot), dlogits});
    EXPECT_TRUE(grad_matches("dlogits", dlogits, numeric_grad(logits, loss))) << shape.str();
  }
}

TEST(ReferenceBceLogits, HandWorkedValuesAndStability) {
  ReferenceBackend ref;
  // x=0: log 2 whatever t. x=100,t=1: ~0. x=-100,t=1: 100. x=100,t=0: 100 (naive overflows).
  const Tensor logits = from_values({0, 0, 100, -100, 100, 2}, {2, 3});
  const Tensor targets = from_values({0, 1, 1, 1, 0, 0.25}, {2, 3});
  const Tensor loss = nan_tensor(Shape{});
  ref.bce_logits_fwd({logits, targets, loss});
  const double last = -(0.25 * std::log(1 / (1 + std::exp(-2.0))) + 0.75 * std::log(1 - 1 / (1 + std::exp(-2.0))));
  const double want = (2 * std::log(2.0) + std::exp(-100.0) + 100 + 100 + last) / 6;
  EXPECT_NEAR(loss.item(), want, 1e-12);
}

}  // namespace
}  // namespace strata::testing
