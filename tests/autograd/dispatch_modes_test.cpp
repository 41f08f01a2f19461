// The same small network (conv -> BN -> ReLU -> max pool -> linear -> softmax
// cross-entropy), forward and backward, in the three dispatch modes: outputs and
// every gradient must be bitwise equal.
#include <gtest/gtest.h>

#include "strata/autograd/functions.h"
#include "strata/autograd/node.h"
#include "strata/backends/null/null_backend.h"
#include "strata/backends/reference/reference_backend.h"
#include "strata/ops/direct/plans.h"
#include "support/compare.h"
#include "support/op_fixtures.h"

namespace strata::testing {
namespace {

using backends::ReferenceBackend;

struct Params {
  Tensor x, labels, conv_w, conv_b, gamma, beta, rm, rv, fc_w, fc_b;
};

Params make_params(DType dt) {
  Params p;
  p.x = random_tensor({3, 2, 9, 7}, dt, 1);
  p.labels = labels_with_ignored(3, 5, 2, 2);  // rows 0 and 2 ignored (-100): the mean is row 1's
  p.conv_w = random_tensor({4, 2, 3, 3}, dt, 3);
  p.conv_b = random_tensor({4}, dt, 4);
  p.gamma = random_tensor({4}, dt, 5, 0.5, 1.5);
  p.beta = random_tensor({4}, dt, 6);
  p.rm = random_tensor({4}, dt, 7);
  p.rv = random_tensor({4}, dt, 8, 0.5, 1.5);
  p.fc_w = random_tensor({5, 4 * 4 * 3}, dt, 9);
  p.fc_b = random_tensor({5}, dt, 10);
  return p;
}

ops::Conv2dParams conv_params() {
  ops::Conv2dParams c;
  c.pad_h = c.pad_w = 1;
  return c;
}
const ops::Pool2dParams kPool{2, 2, 2, 2, 0, 0, true};

struct Result {
  Tensor loss, d_conv_w, d_conv_b, d_gamma, d_beta, d_fc_w, d_fc_b, rm, rv;
};

template <class D>
Result run_tape(const D& d, Params p) {
  p.rm = p.rm.clone();
  p.rv = p.rv.clone();
  for (Tensor* t : {&p.conv_w, &p.conv_b, &p.gamma, &p.beta, &p.fc_w, &p.fc_b}) {
    *t = t->clone();
    t->set_requires_grad(true);
  }
  Tensor h = autograd::conv2d(d, p.x, p.conv_w, p.conv_b, conv_params());
  h = autograd::batch_norm(d, h, p.gamma, p.beta, p.rm, p.rv, true, 0.1, 1e-5);
  h = autograd::relu(d, h);
  h = autograd::max_pool2d(d, h, kPool);
  h = autograd::reshape(d, h, Shape{h.size(0), -1});
  h = autograd::linear(d, h, p.fc_w, p.fc_b);
  Tensor loss = autograd::softmax_xent(d, h, p.labels);
  autograd::backward(loss);
  return {loss,          p.conv_w.grad(), p.conv_b.grad(), p.gamma.grad(), p.beta.grad(),
          p.fc_w.grad(), p.fc_b.grad(),   p.rm,            p.rv};
}

// What a hand-written cuDNN network does: plan every layer once, then call the
// kernels in order, and the backward pass in reverse.
template <class Impl>
Result run_direct(Impl& impl, Params p) {
  namespace dp = ops::direct;
  p.rm = p.rm.clone();
  p.rv = p.rv.clone();
  dp::Conv2dPlan<Impl> conv;
  dp::BatchNormPlan<Impl> bn;
  dp::ReluPlan<Impl> relu;
  dp::MaxPool2dPlan<Impl> pool;
  dp::LinearPlan<Impl> fc;
  dp::SoftmaxXentPlan<Impl> loss;
  conv.plan(impl, p.x, p.conv_w, p.conv_b, conv_params());
  bn.plan(impl, conv.y, p.gamma, p.beta, p.rm, p.rv, true, 0.1, 1e-5);
  relu.plan(impl, bn.y);
  pool.plan(impl, relu.y, kPool);
  const Tensor flat = pool.y.view(Shape{pool.y.size(0), -1});
  fc.plan(impl, flat, p.fc_w, p.fc_b);
  loss.plan(impl, fc.y, p.labels);
  EXPECT_EQ(loss.lse.sizes(), Shape{fc.y.size(0)}) << "the loss keeps one statistic per row for its backward";
  fc.plan_backward(loss.dlogits, true);
  pool.plan_backward(fc.dx.view(pool.y.sizes()));
  relu.plan_backward(pool.dx);
  bn.plan_backward(relu.dx);
  conv.plan_backward(bn.dx, false);

  conv.forward();
  bn.forward();
  relu.forward();
  pool.forward();
  fc.forward();
  loss.forward();
  loss.backward();
  fc.backward();
  pool.backward();
  relu.backward();
  bn.backward();
  conv.backward();
  return {loss.loss, conv.dw, conv.db, bn.dgamma, bn.dbeta, fc.dw, fc.db, p.rm, p.rv};
}

void expect_bitwise(const Result& a, const Result& b) {
  EXPECT_TRUE(bitwise_equal(a.loss, b.loss));
  EXPECT_TRUE(bitwise_equal(a.d_conv_w, b.d_conv_w));
  EXPECT_TRUE(bitwise_equal(a.d_conv_b, b.d_conv_b));
  EXPECT_TRUE(bitwise_equal(a.d_gamma, b.d_gamma));
  EXPECT_TRUE(bitwise_equal(a.d_beta, b.d_beta));
  EXPECT_TRUE(bitwise_equal(a.d_fc_w, b.d_fc_w));
  EXPECT_TRUE(bitwise_equal(a.d_fc_b, b.d_fc_b));
  EXPECT_TRUE(bitwise_equal(a.rm, b.rm));
  EXPECT_TRUE(bitwise_equal(a.rv, b.rv));
}

TEST(DispatchModes, BitwiseEqualOnReference) {
  for (DType dt : {DType::f32, DType::f64}) {
    const Params p = make_params(dt);
    auto& impl = backends::registry().impl<ReferenceBackend>();
    const Result v = run_tape(reference_dispatch(), p);
    const Result s = run_tape(ops::StaticDispatch<ReferenceBackend>(impl), p);
    const Result r = run_direct(impl, p);
    expect_bitwise(v, s);
    expect_bitwise(v, r);
    EXPECT_GT(v.loss.item(), 0.0);
    EXPECT_GT(max_abs_diff(v.d_conv_w, Tensor::from_vector(std::vector<double>(v.d_conv_w.numel(), 0.0),
                                                           v.d_conv_w.sizes())),
              0.0);
  }
}

TEST(DispatchModes, NullBackendRunsEveryMode) {
  // Outputs are never written on null; this checks the whole stack runs without it.
  const Params p = make_params(DType::f32);
  auto& impl = backends::registry().impl<backends::NullBackend>();
  ops::VirtualDispatch v(backends::registry().get("null"));
  ops::StaticDispatch<backends::NullBackend> s(impl);
  EXPECT_NO_THROW(run_tape(v, p));
  EXPECT_NO_THROW(run_tape(s, p));
  EXPECT_NO_THROW(run_direct(impl, p));
}

TEST(DispatchModes, TraceRecordsEveryOpWithItsBackend) {
  const Params p = make_params(DType::f32);
  ops::take_trace();
  ops::set_trace_enabled(true);
  run_tape(reference_dispatch(), p);
  ops::set_trace_enabled(false);
  const auto events = ops::take_trace();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().op, ops::OpId::conv2d_fwd);
  for (const auto& e : events) EXPECT_EQ(e.backend, "reference");
  bool saw_bwd = false;
  for (const auto& e : events) saw_bwd |= e.op == ops::OpId::conv2d_bwd_weight;
  EXPECT_TRUE(saw_bwd);
}

}  // namespace
}  // namespace strata::testing
