// linear, relu, dropout and the losses on the reference backend: backward ops
// against central differences in f64; forward values against hand-worked numbers.
#include <gtest/gtest.h>

#include "reference_test_util.h"
#include "support/coverage.h"

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
  double scale;  // logits in [-scale, scale)
};

const XentCase kXentCases[] = {
    {"small", 4, 5, false, 2.0},
    {"batch1", 1, 7, false, 2.0},
    {"strided_large_logits", 3, 6, true, 30.0},
};

class SoftmaxXentGradcheck : public ::testing::TestWithParam<XentCase> {};

TEST_P(SoftmaxXentGradcheck, LogitsMatchCentralDifferences) {
  const XentCase& c = GetParam();
  ReferenceBackend ref;
  const Tensor logits = c.transposed_logits
                            ? random_tensor({c.c, c.n}, DType::f64, 71, -c.scale, c.scale).permute({1, 0})
                            : random_tensor({c.n, c.c}, DType::f64, 71, -c.scale, c.scale);
  const Tensor labels = random_labels(c.n, c.c, 72);
  const Tensor loss_t = nan_tensor(Shape{}), probs = nan_tensor({c.n, c.c});
  const double cot = 0.7;
  auto loss = [&] {
    ref.softmax_xent_fwd({logits, labels, loss_t, probs});
    return loss_t.item() * cot;
  };
  loss();
  const Tensor dlogits = nan_tensor({c.n, c.c});
  ref.softmax_xent_bwd({probs, labels, scalar_tensor(cot), dlogits});
  EXPECT_TRUE(grad_matches("dlogits", dlogits, numeric_grad(logits, loss)));
}

INSTANTIATE_TEST_SUITE_P(Reference, SoftmaxXentGradcheck, ::testing::ValuesIn(kXentCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ReferenceSoftmaxXent, HandWorkedValuesAndStability) {
  ReferenceBackend ref;
  // Row 0: equal logits, loss log 3. Row 1: logits (1000, 0, 0), label 1: loss 1000
  // (a naive exp overflows to inf/NaN). Mean over the batch: (log 3 + 1000) / 2.
  const Tensor logits = from_values({5, 5, 5, 1000, 0, 0}, {2, 3});
  const Tensor labels = Tensor::from_vector(std::vector<int64_t>{2, 1}, {2});
  const Tensor loss = nan_tensor(Shape{}), probs = nan_tensor({2, 3});
  ref.softmax_xent_fwd({logits, labels, loss, probs});
  EXPECT_NEAR(loss.item(), (std::log(3.0) + 1000.0) / 2, 1e-12);
  const auto p = probs.to_vector<double>();
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(p[i], 1.0 / 3, 1e-15);
  EXPECT_EQ(p[3], 1.0);
  EXPECT_NEAR(p[4], std::exp(-1000.0), 1e-300);

  // f32 too: large logits stay finite.
  const Tensor l32 = from_values({100, -100, 0, 0}, {2, 2}, DType::f32);
  const Tensor lab32 = Tensor::from_vector(std::vector<int64_t>{1, 0}, {2});
  const Tensor loss32 = nan_tensor(Shape{}, DType::f32), probs32 = nan_tensor({2, 2}, DType::f32);
  ref.softmax_xent_fwd({l32, lab32, loss32, probs32});
  EXPECT_NEAR(loss32.item(), (200.0 + std::log(2.0)) / 2, 1e-4);
}

TEST(ReferenceSoftmaxXent, OutOfRangeLabelThrowsNamingOpIndexAndValue) {
  ReferenceBackend ref;
  const Tensor logits = random_tensor({3, 4}, DType::f64, 73);
  const Tensor loss = nan_tensor(Shape{}), probs = nan_tensor({3, 4});
  for (int64_t bad : {int64_t{4}, int64_t{-1}}) {
    const Tensor labels = Tensor::from_vector(std::vector<int64_t>{0, bad, 2}, {3});
    try {
      ref.softmax_xent_fwd({logits, labels, loss, probs});
      ADD_FAILURE() << "label " << bad << " did not throw";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("softmax_xent_fwd"), std::string::npos) << msg;
      EXPECT_NE(msg.find("[1]"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
    }
    const Tensor dl = nan_tensor({3, 4});
    EXPECT_THROW(ref.softmax_xent_bwd({probs, labels, scalar_tensor(1.0), dl}), Error);
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
