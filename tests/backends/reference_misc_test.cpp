// Ops checked by values on the reference backend: element-wise ops, dropout masks,
// reductions, fill, copy across dtypes and layouts, the optimizer steps against
// PyTorch's documented formulas, and f32 against f64 for every forward op.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "strata/core/dtype_dispatch.h"
#include "reference_test_util.h"
#include "support/coverage.h"
#include "support/optimizer_lists.h"
#include "strata/backends/api/registry.h"

namespace strata::testing {
namespace {

STRATA_COVERS(add, "values");
STRATA_COVERS(scale, "values");
STRATA_COVERS(axpy, "values");
STRATA_COVERS(fill, "values");
STRATA_COVERS(dropout_fwd, "values");
STRATA_COVERS(dropout_bwd, "values");
STRATA_COVERS(sum, "values");
STRATA_COVERS(mean, "values");
STRATA_COVERS(argmax, "values");
STRATA_COVERS(copy, "values");
STRATA_COVERS(sgd_step, "values");
STRATA_COVERS(adam_step, "values");
STRATA_COVERS(multi_sgd_step, "values");
STRATA_COVERS(multi_adam_step, "values");
STRATA_COVERS(amp_update_scale, "values");

// ---------------------------------------------------------------- element-wise

TEST(ReferenceElementwise, AddScaleAxpyOnMixedLayouts) {
  ReferenceBackend ref;
  const Shape s{2, 3, 3, 2};
  const Tensor a = random_tensor(s, DType::f64, 1, -1, 1, kNHWC), b = random_tensor(s, DType::f64, 2);
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  const Tensor y = nan_tensor(s, DType::f64, kNHWC);
  ref.add({a, b, y});
  auto yv = y.to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i) EXPECT_EQ(yv[i], av[i] + bv[i]);
  ref.scale({a, y, -2.5});
  yv = y.to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i) EXPECT_EQ(yv[i], -2.5 * av[i]);
  // axpy accumulates: y = -2.5 a + 0.5 b.
  ref.axpy({b, y, 0.5});
  yv = y.to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i) EXPECT_EQ(yv[i], -2.5 * av[i] + 0.5 * bv[i]);
}

TEST(ReferenceElementwise, FillWritesEveryElementOfAView) {
  ReferenceBackend ref;
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor t = from_values({1, 2, 3, 4, 5, 6}, {2, 3}, dt);
    ref.fill({t.narrow(1, 1, 2), 0.25});  // columns 1..2 only
    EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1, 0.25, 0.25, 4, 0.25, 0.25}));
  }
}

// ---------------------------------------------------------------- dropout

TEST(ReferenceDropout, MaskStatisticsScalingAndDeterminism) {
  ReferenceBackend ref;
  const int64_t n = 20000;
  const Tensor x = random_tensor({n}, DType::f64, 3);
  const Tensor y = nan_tensor({n}), mask = Tensor::empty({n}, DType::u8);
  auto run = [&](double p, uint64_t seed, uint64_t offset, const Tensor& out, const Tensor& m) {
    ops::DropoutFwdArgs a{x, out, m};
    a.p = p, a.seed = seed, a.offset = offset;
    ref.dropout_fwd(a);
  };
  for (double p : {0.1, 0.5, 0.8}) {
    run(p, 7, 0, y, mask);
    const auto mv = mask.to_vector<uint8_t>();
    const auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(mv[i] == 0 || mv[i] == 1);
      kept += mv[i];
      EXPECT_EQ(yv[i], mv[i] ? xv[i] * (1.0 / (1 - p)) : 0.0);
    }
    // Binomial: 5 standard deviations is at most ~0.018 at n = 20000.
    EXPECT_NEAR(static_cast<double>(kept) / n, 1 - p, 0.02) << "p = " << p;

    // Same seed, same mask; another seed, another mask.
    const Tensor y2 = nan_tensor({n}), m2 = Tensor::empty({n}, DType::u8);
    run(p, 7, 0, y2, m2);
    EXPECT_TRUE(bitwise_equal(y, y2));
    EXPECT_EQ(m2.to_vector<uint8_t>(), mv);
    run(p, 8, 0, y2, m2);
    EXPECT_NE(m2.to_vector<uint8_t>(), mv);

    // The offset shifts the counter: element i with offset 100 draws as element i + 100.
    const Tensor y3 = nan_tensor({n}), m3 = Tensor::empty({n}, DType::u8);
    run(p, 7, 100, y3, m3);
    const auto m3v = m3.to_vector<uint8_t>();
    for (int64_t i = 0; i + 100 < n; ++i) ASSERT_EQ(m3v[i], mv[i + 100]) << i;

    // Backward: dx = dy / (1 - p) where kept, 0 elsewhere.
    const Tensor dx = nan_tensor({n});
    ops::DropoutBwdArgs b{x, mask, dx};
    b.p = p;
    ref.dropout_bwd(b);
    const auto dxv = dx.to_vector<double>();
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(dxv[i], mv[i] ? xv[i] * (1.0 / (1 - p)) : 0.0);
  }
  // p = 0 keeps everything unchanged; p = 1 drops everything.
  run(0.0, 9, 0, y, mask);
  EXPECT_TRUE(bitwise_equal(y, x));
  run(1.0, 9, 0, y, mask);
  for (double v : y.to_vector<double>()) EXPECT_EQ(v, 0.0);
}

// ---------------------------------------------------------------- reductions

TEST(ReferenceReduce, SumAndMeanMatchAccumulateOnAStridedView) {
  ReferenceBackend ref;
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor big = random_tensor({3, 4, 5, 6}, dt, 5, -1, 1, kNHWC);
    const Tensor x = big.narrow(2, 1, 3).narrow(3, 0, 5);  // a non-dense view
    const auto xv = x.to_vector<double>();
    const double want = std::accumulate(xv.begin(), xv.end(), 0.0);
    const Tensor y = nan_tensor(Shape{}, dt);
    ref.sum({x, y});
    EXPECT_NEAR(y.item(), want, dt == DType::f32 ? 1e-5 : 1e-13);
    ref.mean({x, y});
    EXPECT_NEAR(y.item(), want / static_cast<double>(xv.size()), dt == DType::f32 ? 1e-6 : 1e-15);
  }
  // Exact values: 1..100 sums to 5050.
  std::vector<double> v(100);
  std::iota(v.begin(), v.end(), 1.0);
  const Tensor y = nan_tensor(Shape{});
  ref.sum({from_values(v, {10, 10}), y});
  EXPECT_EQ(y.item(), 5050.0);
  ref.mean({from_values(v, {10, 10}), y});
  EXPECT_EQ(y.item(), 50.5);
}

TEST(ReferenceReduce, ArgmaxFirstMaximumWins) {
  ReferenceBackend ref;
  const Tensor x = from_values({1, 3, 3, 0,      //
                                -5, -2, -9, -2,  //
                                7, 1, 2, 7,      //
                                0, 0, 0, 0},
                               {4, 4});
  const Tensor y = Tensor::empty({4}, DType::i64);
  ref.argmax({x, y});
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0, 0}));
  // Transposed view: rows of x^T are columns of x.
  ref.argmax({x.permute({1, 0}), y});
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 0, 2}));
}

// ---------------------------------------------------------------- copy

TEST(ReferenceCopy, NchwToNhwcAndBackIsExact) {
  ReferenceBackend ref;
  const Tensor x = random_tensor({2, 3, 5, 4}, DType::f64, 6);
  const Tensor nhwc = nan_tensor({2, 3, 5, 4}, DType::f64, kNHWC);
  ref.copy({x, nhwc});
  // The channels-last storage holds x's values in N,H,W,C order.
  const double* p = nhwc.data<double>();
  const auto xv = x.to_vector<double>();
  const int N = 2, C = 3, H = 5, W = 4;
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int h = 0; h < H; ++h)
        for (int w = 0; w < W; ++w)
          ASSERT_EQ(p[((n * H + h) * W + w) * C + c], xv[((n * C + c) * H + h) * W + w]) << n << c << h << w;
  const Tensor back = nan_tensor({2, 3, 5, 4});
  ref.copy({nhwc, back});
  EXPECT_TRUE(bitwise_equal(back, x));
}

TEST(ReferenceCopy, Bf16AndF16RoundToNearestEven) {
  ReferenceBackend ref;
  const float one = 1.0f;
  const std::vector<float> in{1.0f + 0x1p-8f,             // halfway, even neighbour is 1
                              1.0f + 3 * 0x1p-8f,         // halfway, even neighbour is 1 + 2^-6
                              1.0f + 0x1p-8f + 0x1p-20f,  // just above halfway: up
                              3.14159265f,
                              -2.5f,
                              0.0f};
  const std::vector<double> want_bf16{one, 1.0 + 0x1p-6, 1.0 + 0x1p-7, 3.140625, -2.5, 0.0};
  const Tensor f32 = Tensor::from_vector(in, {6});
  const Tensor bf = Tensor::empty({6}, DType::bf16);
  const Tensor back = Tensor::empty({6}, DType::f32);
  ref.copy({f32, bf});
  EXPECT_EQ(bf.data<bf16_t>()[3].bits, 0x4049);  // pi in bf16
  ref.copy({bf, back});
  EXPECT_EQ(back.to_vector<double>(), want_bf16);

  // f16: 0.1 is 0x2E66 = 0.0999755859375; 65504 is the largest finite value.
  const Tensor f64 = from_values({0.1, 65504, -1.5}, {3});
  const Tensor h = Tensor::empty({3}, DType::f16), hb = Tensor::empty({3}, DType::f64);
  ref.copy({f64, h});
  EXPECT_EQ(h.data<f16_t>()[0].bits, 0x2E66);
  ref.copy({h, hb});
  EXPECT_EQ(hb.to_vector<double>(), (std::vector<double>{0.0999755859375, 65504, -1.5}));
}

TEST(ReferenceCopy, IntegerConversionsAndTransposedViews) {
  ReferenceBackend ref;
  // f64 -> i32 truncates toward zero, as static_cast and torch's .to(int32) do.
  const Tensor f = from_values({2.7, -2.7, 255, 0.5}, {2, 2});
  const Tensor i = Tensor::empty({2, 2}, DType::i32);
  ref.copy({f, i});
  EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{2, -2, 255, 0}));
  // i32 -> u8 -> f32, written into a transposed view.
  const Tensor u = Tensor::empty({2, 2}, DType::u8);
  ref.copy({i.narrow(0, 1, 1).view({1, 2}).narrow(1, 0, 1), u.narrow(0, 0, 1).narrow(1, 0, 1)});
  EXPECT_EQ(u.data<uint8_t>()[0], 255);
  const Tensor dst = Tensor::empty({2, 2}, DType::f32);
  ref.copy({i, dst.permute({1, 0})});
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{2, 255, -2, 0}));
  // i64 labels to f64 and back.
  const Tensor l = Tensor::from_vector(std::vector<int64_t>{0, 9, 1LL << 40}, {3});
  const Tensor ld = Tensor::empty({3}, DType::f64), l2 = Tensor::empty({3}, DType::i64);
  ref.copy({l, ld});
  ref.copy({ld, l2});
  EXPECT_EQ(l2.to_vector<int64_t>(), (std::vector<int64_t>{0, 9, 1LL << 40}));
  // Rank 0.
  const Tensor s = scalar_tensor(4.5), s32 = Tensor::empty(Shape{}, DType::f32);
  ref.copy({s, s32});
  EXPECT_EQ(s32.item(), 4.5);
}

TEST(ReferenceCopy, NonCpuDeviceThrowsNamingBothDevices) {
  ReferenceBackend ref;
  const Tensor x = random_tensor({4}, DType::f32, 7);
  std::vector<float> host(4);
  ops::TensorView gpu(Tensor::borrow(host.data(), {4}, DType::f32));
  gpu.device = Device::cuda(0);  // what the front end would hand over for a GPU tensor
  for (int dir = 0; dir < 2; ++dir) {
    try {
      if (dir == 0)
        ref.copy({x, gpu});
      else
        ref.copy({gpu, x});
      ADD_FAILURE() << "copy with a cuda side did not throw";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("copy"), std::string::npos) << msg;
      EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
      EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(host, std::vector<float>(4, 0.0f));
}

// ---------------------------------------------------------------- optimizers

TEST(ReferenceSgd, HandWorkedMomentumAndNesterov) {
  ReferenceBackend ref;
  // param 1, constant grad 0.5, lr 0.1, momentum 0.9 (torch.optim.SGD, dampening 0):
  // buf 0.5, 0.95, 1.355; param 0.95, 0.855, 0.7195.
  {
    const Tensor p = from_values({1}, {1}), g = from_values({0.5}, {1}), buf = from_values({0}, {1});
    const double want[3] = {0.95, 0.855, 0.7195};
    for (int t = 0; t < 3; ++t) {
      ops::SgdStepArgs a{p, g, buf};
      a.o.lr = 0.1, a.o.momentum = 0.9;
      ref.sgd_step(a);
      EXPECT_NEAR(p.item(), want[t], 1e-15) << "step " << t + 1;
    }
    EXPECT_NEAR(buf.item(), 1.355, 1e-15);
  }
  // Nesterov: g + 0.9 buf = 0.95, then 1.355: param 0.905, 0.7695.
  {
    const Tensor p = from_values({1}, {1}), g = from_values({0.5}, {1}), buf = from_values({0}, {1});
    const double want[2] = {0.905, 0.7695};
    for (int t = 0; t < 2; ++t) {
      ops::SgdStepArgs a{p, g, buf};
      a.o.lr = 0.1, a.o.momentum = 0.9, a.o.nesterov = true;
      ref.sgd_step(a);
      EXPECT_NEAR(p.item(), want[t], 1e-15) << "step " << t + 1;
    }
  }
  // No momentum, weight decay 0.1: p -= lr (g + wd p): 1 - 0.1 (0.5 + 0.1) = 0.94.
  {
    const Tensor p = from_values({1}, {1}), g = from_values({0.5}, {1});
    ops::SgdStepArgs a{p, g, Tensor()};
    a.o.lr = 0.1, a.o.weight_decay = 0.1;
    ref.sgd_step(a);
    EXPECT_NEAR(p.item(), 0.94, 1e-15);
  }
}

// PyTorch's documented SGD, one scalar at a time.
void sgd_scalar(double& p, double& buf, double grad, double lr, double mom, double wd, bool nesterov) {
  double g = grad + wd * p;
  if (mom != 0) {
    buf = mom * buf + g;  // buf starts at zero: first step buf = g
    g = nesterov ? g + mom * buf : buf;
  }
  p -= lr * g;
}

TEST(ReferenceSgd, MatchesScalarFormulaOverSeveralSteps) {
  ReferenceBackend ref;
  for (bool nesterov : {false, true})
    for (double wd : {0.0, 1e-2}) {
      const Tensor p = random_tensor({3, 4}, DType::f64, 8).permute({1, 0});  // strided param
      const Tensor buf = from_values(std::vector<double>(12, 0.0), {4, 3});
      std::vector<double> ep = p.to_vector<double>(), eb(12, 0.0);
      for (int t = 0; t < 4; ++t) {
        const Tensor g = random_tensor({4, 3}, DType::f64, 100 + t);
        const auto gv = g.to_vector<double>();
        ops::SgdStepArgs a{p, g, buf};
        a.o.lr = 0.05, a.o.momentum = 0.9, a.o.weight_decay = wd, a.o.nesterov = nesterov;
        ref.sgd_step(a);
        for (int i = 0; i < 12; ++i) sgd_scalar(ep[i], eb[i], gv[i], 0.05, 0.9, wd, nesterov);
      }
      EXPECT_TRUE(close(p, Tensor::from_vector(ep, {4, 3}), 1e-14));
      EXPECT_TRUE(close(buf, Tensor::from_vector(eb, {4, 3}), 1e-14));
    }
}

TEST(ReferenceAdam, FirstStepMovesByLrTimesSign) {
  ReferenceBackend ref;
  // After bias correction m/(sqrt v) = g/|g| on step 1: param -= lr g / (|g| + eps).
  const Tensor p = from_values({1, -2, 3}, {3}), g = from_values({0.5, -4, 1e-3}, {3});
  const Tensor m = from_values({0, 0, 0}, {3}), v = from_values({0, 0, 0}, {3});
  ops::AdamStepArgs a{p, g, m, v};
  a.o.lr = 0.01, a.o.eps = 1e-8, a.step = 1;
  ref.adam_step(a);
  const auto pv = p.to_vector<double>();
  EXPECT_NEAR(pv[0], 1 - 0.01 * 0.5 / (0.5 + 1e-8), 1e-15);
  EXPECT_NEAR(pv[1], -2 + 0.01 * 4 / (4 + 1e-8), 1e-15);
  EXPECT_NEAR(pv[2], 3 - 0.01 * 1e-3 / (1e-3 + 1e-8), 1e-15);
  EXPECT_NEAR(m.to_vector<double>()[1], 0.1 * -4, 1e-15);
  EXPECT_NEAR(v.to_vector<double>()[1], 0.001 * 16, 1e-15);
  // Step 0 would divide by 1 - beta^0 = 0.
  a.step = 0;
  EXPECT_THROW(ref.adam_step(a), Error);
}

// torch.optim.Adam / AdamW as documented: m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t),
// p -= lr m_hat / (sqrt(v_hat) + eps); Adam adds wd p to g, AdamW scales p by 1 - lr wd.
void adam_scalar(double& p, double& m, double& v, double g, int t, double lr, double b1, double b2, double eps,
                 double wd, bool adamw) {
  if (adamw)
    p = p - lr * wd * p;
  else
    g = g + wd * p;
  m = b1 * m + (1 - b1) * g;
  v = b2 * v + (1 - b2) * g * g;
  const double m_hat = m / (1 - std::pow(b1, t));
  const double v_hat = v / (1 - std::pow(b2, t));
  p = p - lr * m_hat / (std::sqrt(v_hat) + eps);
}

TEST(ReferenceAdam, AdamAndAdamWMatchScalarFormulaOverSeveralSteps) {
  ReferenceBackend ref;
  for (bool adamw : {false, true})
    for (double wd : {0.0, 0.05}) {
      const Tensor p = random_tensor({2, 3, 2, 2}, DType::f64, 9, -1, 1, kNHWC);
      const Tensor m = from_values(std::vector<double>(24, 0.0), {2, 3, 2, 2});
      const Tensor v = from_values(std::vector<double>(24, 0.0), {2, 3, 2, 2});
      std::vector<double> ep = p.to_vector<double>(), em(24, 0.0), ev(24, 0.0);
      for (int t = 1; t <= 5; ++t) {
        const Tensor g = random_tensor({2, 3, 2, 2}, DType::f64, 200 + t);
        const auto gv = g.to_vector<double>();
        ops::AdamStepArgs a{p, g, m, v};
        a.o.lr = 1e-2, a.o.beta1 = 0.8, a.o.beta2 = 0.95, a.o.eps = 1e-6, a.o.weight_decay = wd;
        a.o.decoupled_weight_decay = adamw, a.step = t;
        ref.adam_step(a);
        for (int i = 0; i < 24; ++i) adam_scalar(ep[i], em[i], ev[i], gv[i], t, 1e-2, 0.8, 0.95, 1e-6, wd, adamw);
      }
      EXPECT_TRUE(close(p, Tensor::from_vector(ep, {2, 3, 2, 2}), 1e-14)) << "adamw " << adamw << " wd " << wd;
      EXPECT_TRUE(close(m, Tensor::from_vector(em, {2, 3, 2, 2}), 1e-14));
      EXPECT_TRUE(close(v, Tensor::from_vector(ev, {2, 3, 2, 2}), 1e-14));
    }
}

// GradScaler's rule over a run of steps: 2 finite steps double the scale (interval 2),
// a NaN or inf halves it and counts a skip; 1/scale (or 0) is what the steps read.
TEST(ReferenceOptim, MultiTensorStepsMatchSingleSteps) {
  expect_multi_steps_match_single_steps(backends::registry().get("reference"), [](const Tensor& t) { return t; });
}

TEST(ReferenceAmp, UpdateScaleFollowsGradScalersRule) {
  ReferenceBackend ref;
  const Tensor state = Tensor::from_vector<double>({8.0, 0.0, 0.0, 0.0}, Shape{4});
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  struct Step {
    double sum, scale, good, skipped, inv;
  };
  for (const Step& st : std::vector<Step>{{1.0, 8, 1, 0, 0.125},
                                          {-3.0, 16, 0, 0, 0.125},
                                          {inf, 8, 0, 1, 0.0},
                                          {2.0, 8, 1, 1, 0.125},
                                          {nan, 4, 0, 2, 0.0},
                                          {0.0, 4, 1, 2, 0.25}}) {
    SCOPED_TRACE(st.sum);
    const Tensor sums = Tensor::from_vector<double>({0.5, st.sum, -1e300}, Shape{3});
    ref.amp_update_scale({sums, state, 2.0, 0.5, 2});
    EXPECT_EQ(state.to_vector<double>(), (std::vector<double>{st.scale, st.good, st.skipped, st.inv}));
  }
}

TEST(ReferenceOptim, F32StepsTrackF64) {
  ReferenceBackend ref;
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor p = random_tensor({5}, dt, 10), g = random_tensor({5}, dt, 11);
    const Tensor buf = nan_tensor({5}, dt), m = nan_tensor({5}, dt), v = nan_tensor({5}, dt);
    ref.fill({buf, 0.0});
    ref.fill({m, 0.0});
    ref.fill({v, 0.0});
    const Tensor p64 = random_tensor({5}, DType::f64, 10);
    std::vector<double> ep = p64.to_vector<double>(), eb(5, 0.0), em(5, 0.0), ev(5, 0.0);
    const auto gv = random_tensor({5}, DType::f64, 11).to_vector<double>();
    ops::SgdStepArgs s{p, g, buf};
    s.o.lr = 0.1, s.o.momentum = 0.9;
    ref.sgd_step(s);
    ops::AdamStepArgs a{p, g, m, v};
    a.step = 1;
    ref.adam_step(a);
    for (int i = 0; i < 5; ++i) {
      sgd_scalar(ep[i], eb[i], gv[i], 0.1, 0.9, 0, false);
      adam_scalar(ep[i], em[i], ev[i], gv[i], 1, 1e-3, 0.9, 0.999, 1e-8, 0, false);
    }
    EXPECT_TRUE(close(p, Tensor::from_vector(ep, {5}), dt == DType::f32 ? 1e-6 : 1e-15)) << dtype_name(dt);
  }
}

// ---------------------------------------------------------------- f32 against f64

Tensor to_dtype(const Tensor& t, DType dt) {
  Tensor out = Tensor::empty(t.sizes(), dt, Device::cpu(), t.is_channels_last() ? kNHWC : kNCHW);
  copy_into(t, out);
  return out;
}

// Runs `op` on f64 inputs and on the same inputs rounded to f32, and compares the
// outputs: every op's f32 instantiation computes what its f64 one does.
void expect_f32_tracks_f64(const char* what, const std::vector<Tensor>& inputs64, const std::vector<Shape>& out_shapes,
                           const std::function<void(const std::vector<Tensor>&, const std::vector<Tensor>&)>& op) {
  std::vector<Tensor> in32, in64r, out32, out64;
  for (const Tensor& t : inputs64) {
    const bool is_float = t.dtype() == DType::f64;
    Tensor t32 = is_float ? to_dtype(t, DType::f32) : t;
    in32.push_back(t32);
    in64r.push_back(is_float ? to_dtype(t32, DType::f64) : t);  // the f32-rounded values, in f64
  }
  for (const Shape& s : out_shapes) {
    out32.push_back(nan_tensor(s, DType::f32));
    out64.push_back(nan_tensor(s, DType::f64));
  }
  op(in32, out32);
  op(in64r, out64);
  for (size_t i = 0; i < out_shapes.size(); ++i)
    EXPECT_TRUE(close(out32[i], out64[i], 1e-6)) << what << " output " << i;
}

TEST(ReferenceF32, EveryForwardOpTracksF64) {
  ReferenceBackend ref;
  using V = std::vector<Tensor>;
  Conv2dParams cp;
  cp.stride_h = 2, cp.pad_h = cp.pad_w = 1, cp.groups = 2;
  expect_f32_tracks_f64("conv2d",
                        {random_tensor({2, 4, 7, 5}, DType::f64, 1, -1, 1, kNHWC),
                         random_tensor({6, 2, 3, 3}, DType::f64, 2), random_tensor({6}, DType::f64, 3)},
                        {{2, 6, 4, 5}, {2, 4, 7, 5}, {6, 2, 3, 3}, {6}}, [&](const V& in, const V& out) {
                          ref.conv2d_fwd({in[0], in[1], in[2], out[0], cp});
                          ref.conv2d_bwd_data({out[0], in[1], out[1], cp});
                          ref.conv2d_bwd_weight({in[0], out[0], out[2], cp});
                          ref.conv2d_bwd_bias({out[0], out[3]});
                        });
  expect_f32_tracks_f64(
      "batch_norm",
      {random_tensor({3, 2, 3, 3}, DType::f64, 4), random_tensor({2}, DType::f64, 5), random_tensor({2}, DType::f64, 6),
       random_tensor({2}, DType::f64, 7), random_tensor({2}, DType::f64, 8, 0.5, 1),
       random_tensor({3, 2, 3, 3}, DType::f64, 18)},
      {{3, 2, 3, 3}, {2}, {2}, {3, 2, 3, 3}, {2}, {2}}, [&](const V& in, const V& out) {
        ref.batch_norm_fwd({in[0], in[1], in[2], in[3].clone(), in[4].clone(), out[0], out[1], out[2]});
        ref.batch_norm_bwd({in[0], in[5], in[1], out[1], out[2], out[3], out[4], out[5]});
      });
  Pool2dParams pp;
  pp.kernel_h = pp.kernel_w = 3, pp.pad_h = pp.pad_w = 1;
  expect_f32_tracks_f64("pool", {distinct_tensor({2, 2, 5, 5}, 9)},
                        {{2, 2, 3, 3}, {2, 2, 5, 5}, {2, 2, 3, 3}, {2, 2, 5, 5}, {2, 2}, {2, 2, 5, 5}},
                        [&](const V& in, const V& out) {
                          ref.max_pool2d_fwd({in[0], out[0], pp});
                          ref.max_pool2d_bwd({in[0], out[0], out[0], out[1], pp});
                          ref.avg_pool2d_fwd({in[0], out[2], pp});
                          ref.avg_pool2d_bwd({out[2], out[3], pp});
                          ref.global_avg_pool_fwd({in[0], out[4]});
                          ref.global_avg_pool_bwd({out[4], out[5]});
                        });
  expect_f32_tracks_f64("linear",
                        {random_tensor({3, 5}, DType::f64, 10), random_tensor({4, 5}, DType::f64, 11),
                         random_tensor({4}, DType::f64, 12)},
                        {{3, 4}, {3, 5}, {4, 5}, {4}}, [&](const V& in, const V& out) {
                          ref.linear_fwd({in[0], in[1], in[2], out[0]});
                          ref.linear_bwd_data({out[0], in[1], out[1]});
                          ref.linear_bwd_weight({in[0], out[0], out[2], out[3]});
                        });
  expect_f32_tracks_f64("losses",
                        {random_tensor({4, 6}, DType::f64, 13, -5, 5), labels_with_ignored(4, 6, 14, 3),
                         random_tensor({4, 6}, DType::f64, 15, 0, 1)},
                        {{}, {4}, {4, 6}, {}, {4, 6}}, [&](const V& in, const V& out) {
                          ref.softmax_xent_fwd({in[0], in[1], out[0], out[1]});
                          ref.softmax_xent_bwd({in[0], out[1], in[1], out[0], out[2]});
                          ref.bce_logits_fwd({in[0], in[2], out[3]});
                          ref.bce_logits_bwd({in[0], in[2], out[3], out[4]});
                        });
  expect_f32_tracks_f64("elementwise_reduce",
                        {random_tensor({3, 7}, DType::f64, 16), random_tensor({3, 7}, DType::f64, 17)},
                        {{3, 7}, {3, 7}, {3, 7}, {}, {}}, [&](const V& in, const V& out) {
                          ref.add({in[0], in[1], out[0]});
                          ref.relu_fwd({out[0], out[1]});
                          ref.relu_bwd({out[1], in[1], out[2]});
                          ref.sum({out[2], out[3]});
                          ref.mean({out[2], out[4]});
                        });
}

}  // namespace
}  // namespace strata::testing
