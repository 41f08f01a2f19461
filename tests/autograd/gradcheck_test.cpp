// Every differentiable op through the autograd front end (tape + backward), checked
// by central finite differences in f64 on the reference backend, in virtual mode.
// The backend-level formulas are checked op by op in tests/backends; this checks
// the nodes: which gradient goes to which input, layouts, accumulation.
#include <gtest/gtest.h>

#include "strata/autograd/functions.h"
#include "strata/autograd/gradcheck.h"
#include "strata/autograd/node.h"
#include "strata/core/allocator.h"
#include "support/op_fixtures.h"

namespace strata::testing {
namespace {

using autograd::gradcheck;
using ops::Conv2dParams;
using ops::Pool2dParams;
using Inputs = std::vector<Tensor>;

Tensor leaf(const Shape& s, uint64_t seed, MemoryFormat fmt = MemoryFormat::contiguous) {
  Tensor t = random_tensor(s, DType::f64, seed, -1.0, 1.0, fmt);
  t.set_requires_grad(true);
  return t;
}

// Reduces an output to a scalar with random weights so every element matters.
Tensor weighted_sum(const ops::VirtualDispatch& d, const Tensor& y, uint64_t seed) {
  Tensor r = random_tensor(y.sizes(), DType::f64, seed);
  Tensor flat = autograd::reshape(d, y, Shape{1, y.numel()});
  Tensor rw = r.view(Shape{1, y.numel()});
  return autograd::linear(d, flat, rw, Tensor());  // [1,1] = sum(y * r)
}

void expect_gradcheck(const std::function<Tensor(const Inputs&)>& f, const Inputs& in) {
  auto r = gradcheck(f, in);
  EXPECT_TRUE(r.ok) << r.report << "max abs error " << r.max_abs_error;
}

struct ConvCase {
  Shape x, w;
  Conv2dParams p;
  bool bias;
  MemoryFormat fmt;
};

TEST(Gradcheck, Conv2d) {
  auto d = reference_dispatch();
  Conv2dParams s2p1;
  s2p1.stride_h = s2p1.stride_w = 2;
  s2p1.pad_h = s2p1.pad_w = 1;
  Conv2dParams grouped;
  grouped.groups = 2;
  grouped.pad_h = 1;
  Conv2dParams dil;
  dil.dilation_h = dil.dilation_w = 2;
  dil.pad_w = 1;
  const std::vector<ConvCase> cases = {
      {{1, 3, 7, 5}, {4, 3, 3, 3}, s2p1, true, MemoryFormat::contiguous},
      {{2, 4, 5, 6}, {6, 2, 3, 2}, grouped, false, MemoryFormat::contiguous},
      {{2, 2, 7, 7}, {3, 2, 3, 3}, dil, true, MemoryFormat::channels_last},
  };
  for (const auto& c : cases) {
    Inputs in = {leaf(c.x, 1, c.fmt), leaf(c.w, 2)};
    if (c.bias) in.push_back(leaf({c.w[0]}, 3));
    expect_gradcheck(
        [&](const Inputs& v) {
          return weighted_sum(d, autograd::conv2d(d, v[0], v[1], c.bias ? v[2] : Tensor(), c.p), 9);
        },
        in);
  }
}

TEST(Gradcheck, BatchNormTrainAndEval) {
  auto d = reference_dispatch();
  for (bool training : {true, false}) {
    for (const Shape& s : {Shape{3, 4, 3, 5}, Shape{5, 3}}) {
      const int64_t c = s[1];
      Tensor rm = random_tensor({c}, DType::f64, 4), rv = random_tensor({c}, DType::f64, 5, 0.5, 1.5);
      Inputs in = {leaf(s, 1), leaf({c}, 2), leaf({c}, 3)};
      expect_gradcheck(
          [&](const Inputs& v) {
            // Running stats must not drift between finite-difference evaluations.
            Tensor rm2 = rm.clone(), rv2 = rv.clone();
            return weighted_sum(d, autograd::batch_norm(d, v[0], v[1], v[2], rm2, rv2, training, 0.1, 1e-5), 8);
          },
          in);
    }
  }
}

TEST(Gradcheck, ReluPoolsAndGlobalPool) {
  auto d = reference_dispatch();
  Pool2dParams mp{3, 3, 2, 2, 1, 1, true};
  Pool2dParams ap{2, 3, 2, 1, 1, 1, false};
  Inputs in = {leaf({2, 3, 7, 6}, 11, MemoryFormat::channels_last)};
  expect_gradcheck([&](const Inputs& v) { return weighted_sum(d, autograd::relu(d, v[0]), 1); }, in);
  expect_gradcheck([&](const Inputs& v) { return weighted_sum(d, autograd::max_pool2d(d, v[0], mp), 2); }, in);
  expect_gradcheck([&](const Inputs& v) { return weighted_sum(d, autograd::avg_pool2d(d, v[0], ap), 3); }, in);
  ap.count_include_pad = true;
  expect_gradcheck([&](const Inputs& v) { return weighted_sum(d, autograd::avg_pool2d(d, v[0], ap), 3); }, in);
  expect_gradcheck([&](const Inputs& v) { return weighted_sum(d, autograd::global_avg_pool(d, v[0]), 4); }, in);
}

TEST(Gradcheck, LinearAddScaleDropout) {
  auto d = reference_dispatch();
  Inputs in = {leaf({1, 5}, 1), leaf({3, 5}, 2), leaf({3}, 3)};
  expect_gradcheck([&](const Inputs& v) { return weighted_sum(d, autograd::linear(d, v[0], v[1], v[2]), 4); }, in);
  Inputs ab = {leaf({2, 3}, 5), leaf({2, 3}, 6)};
  expect_gradcheck([&](const Inputs& v) { return weighted_sum(d, autograd::add(d, v[0], v[1]), 7); }, ab);
  Inputs one = {leaf({2, 3}, 8)};
  expect_gradcheck([&](const Inputs& v) { return weighted_sum(d, autograd::scale(d, v[0], -2.5), 7); }, one);
  expect_gradcheck([&](const Inputs& v) { return weighted_sum(d, autograd::dropout(d, v[0], 0.4, 77, 3), 8); }, one);
}

TEST(Gradcheck, LossesAndReductions) {
  auto d = reference_dispatch();
  Tensor labels = random_labels(4, 5, 3);
  Tensor targets = random_tensor({4, 5}, DType::f64, 9, 0.0, 1.0);
  Inputs in = {leaf({4, 5}, 1)};
  expect_gradcheck([&](const Inputs& v) { return autograd::softmax_xent(d, v[0], labels); }, in);
  // Rows 0 and 3 ignored (-100), then rows labelled 2 ignored (an ignore_index naming a class).
  const Tensor ignoring = labels_with_ignored(4, 5, 3, 3);
  expect_gradcheck([&](const Inputs& v) { return autograd::softmax_xent(d, v[0], ignoring); }, in);
  expect_gradcheck([&](const Inputs& v) { return autograd::softmax_xent(d, v[0], labels_with_ignored(4, 5, 3, 2, 2), 2); },
                   in);
  expect_gradcheck([&](const Inputs& v) { return autograd::bce_logits(d, v[0], targets); }, in);
  expect_gradcheck([&](const Inputs& v) { return autograd::sum(d, autograd::relu(d, v[0])); }, in);
  expect_gradcheck([&](const Inputs& v) { return autograd::mean(d, autograd::scale(d, v[0], 3.0)); }, in);
}

// The tape keeps the logits (the caller's tensor, not a copy) and one f64 log-sum-exp per row:
// recording the loss of [N, C] logits allocates O(N), not a second [N, C] softmax.
TEST(Gradcheck, SoftmaxXentSavesAPerRowStatisticNotASoftmax) {
  auto d = reference_dispatch();
  const int64_t n = 64, c = 1000;
  const Tensor logits = leaf({n, c}, 11);
  const Tensor labels = labels_with_ignored(n, c, 12, 5);
  const size_t before = cpu_allocator().stats().current_bytes;
  Tensor loss = autograd::softmax_xent(d, logits, labels);
  const size_t kept = cpu_allocator().stats().current_bytes - before;
  EXPECT_LE(kept, static_cast<size_t>(n) * sizeof(double) + 1024) << "bytes held after the forward";
  EXPECT_EQ(ops::softmax_xent(d, logits.detach(), labels).lse.sizes(), Shape{n});
  autograd::backward(loss);
  ASSERT_TRUE(logits.grad().defined());
  EXPECT_EQ(logits.grad().sizes(), (Shape{n, c}));
}

TEST(Gradcheck, DetectsAWrongGradient) {
  // The checker must be able to fail: scale's backward is right for alpha, so a
  // function whose true gradient differs (x used in a non-differentiable way) fails.
  auto d = reference_dispatch();
  Inputs in = {leaf({3}, 1)};
  auto r = gradcheck(
      [&](const Inputs& v) {
        // Reads x through a copy the tape does not see: the analytic gradient is 0.
        Tensor hidden = v[0].clone();
        return autograd::sum(d, autograd::add(d, autograd::scale(d, v[0], 0.0), hidden));
      },
      in);
  EXPECT_FALSE(r.ok);
}

}  // namespace
}  // namespace strata::testing
