// Losses (softmax cross-entropy, BCE with logits; forward and backward), reductions
// (sum, mean, argmax), fill, copy and the fused optimizer steps on each CPU backend
// against the reference. Tolerance kTolReduction (1e-5); argmax, fill and copy
// must match exactly.
#include <cmath>
#include <limits>
#include <string>

#include "cpu_backend_test_util.h"
#include "support/expect_error.h"
#include "support/optimizer_lists.h"

namespace strata::testing {
namespace {

STRATA_COVERS(softmax_xent_fwd, "vs_reference");
STRATA_COVERS(softmax_xent_bwd, "vs_reference");
STRATA_COVERS(bce_logits_fwd, "vs_reference");
STRATA_COVERS(bce_logits_bwd, "vs_reference");
STRATA_COVERS(sum, "vs_reference");
STRATA_COVERS(mean, "vs_reference");
STRATA_COVERS(argmax, "vs_reference");
STRATA_COVERS(fill, "vs_reference");
STRATA_COVERS(copy, "vs_reference");
STRATA_COVERS(sgd_step, "vs_reference");
STRATA_COVERS(adam_step, "vs_reference");
STRATA_COVERS(multi_sgd_step, "vs_reference");
STRATA_COVERS(multi_adam_step, "vs_reference");
STRATA_COVERS(amp_update_scale, "vs_reference");

class LossReduceOptimTest : public CpuBackendTest {};

// ---------------------------------------------------------------- losses

// Ignored rows (every `every`-th, labelled -100; 0: none), a batch of 1, strided logits (a
// transposed view, or a column slice of wider rows) and a language model's vocabulary. The
// saved state is the [N] log-sum-exp; each backward starts from the reference's, as it would
// from its own forward's. Padded: logits and dlogits are the first c (odd) columns of rows of
// round_up(c, 64), GPT's output projection's layout (GptConfig::vocab_multiple); the backward
// writes the view's elements only, the padding's NaN left as it was.
TEST_P(LossReduceOptimTest, SoftmaxCrossEntropy) {
  struct Case {
    std::string name;
    int64_t n, c, every;
    bool transposed;  // logits as a transposed view
    bool sliced;      // logits as columns 2 .. c+1 of [n, c+5]
    bool padded = false;  // logits and dlogits as columns 0 .. c-1 of [n, round_up(c, 64)]
  };
  uint64_t seed = 10000;
  for (DType dt : {DType::f32, DType::f64}) {
    if (!be().capabilities().supports(ops::OpId::softmax_xent_fwd, dt)) continue;
    for (const Case& k : std::vector<Case>{{"5x10", 5, 10, 0, false, false},
                                           {"batch1x3", 1, 3, 0, false, false},
                                           {"batch1_ignored", 1, 3, 1, false, false},
                                           {"transposed_7x4_ignored", 7, 4, 2, true, false},
                                           {"resnet_2x1000", 2, 1000, 0, false, false},
                                           {"sliced_9x13_ignored", 9, 13, 3, false, true},
                                           {"vocab_3x50257_ignored", 3, 50257, 2, false, true},
                                           {"padded_5x11", 5, 11, 0, false, false, true},
                                           {"padded_vocab_3x50257_ignored", 3, 50257, 2, false, false, true}}) {
      SCOPED_TRACE(k.name + " " + std::string(dtype_name(dt)));
      const int64_t cp = (k.c + 63) / 64 * 64;
      const Tensor logits = k.transposed ? random_tensor({k.c, k.n}, dt, seed += 10, -3, 3).permute({1, 0})
                            : k.sliced ? random_tensor({k.n, k.c + 5}, dt, seed += 10, -3, 3).narrow(1, 2, k.c)
                            : k.padded ? random_tensor({k.n, cp}, dt, seed += 10, -3, 3).narrow(1, 0, k.c)
                                       : random_tensor({k.n, k.c}, dt, seed += 10, -3, 3);
      const Tensor labels = k.every ? labels_with_ignored(k.n, k.c, seed + 1, k.every) : random_labels(k.n, k.c, seed + 1);
      const DType st = dt == DType::f64 ? DType::f64 : DType::f32;
      const Tensor loss = nan_tensor({}, kNCHW, dt), loss_r = nan_tensor({}, kNCHW, dt);
      const Tensor lse = nan_tensor({k.n}, kNCHW, st), lse_r = nan_tensor({k.n}, kNCHW, st);
      be().softmax_xent_fwd({logits, labels, loss, lse});
      ref_.softmax_xent_fwd({logits, labels, loss_r, lse_r});
      if (k.every == 1) {
        EXPECT_TRUE(std::isnan(loss.item())) << "every row ignored: 0/0";
        EXPECT_TRUE(std::isnan(loss_r.item()));
      } else {
        STRATA_EXPECT_CLOSE(loss, loss_r, kTolReduction, "softmax_xent_fwd loss");
      }
      STRATA_EXPECT_CLOSE(lse, lse_r, kTolReduction, "softmax_xent_fwd lse");

      const Tensor dloss = scalar_tensor(0.7, dt);
      const Tensor d_rows = nan_tensor({k.n, k.padded ? cp : k.c}, kNCHW, dt);
      const Tensor d = d_rows.narrow(1, 0, k.c), d_r = nan_tensor({k.n, k.c}, kNCHW, dt);
      be().softmax_xent_bwd({logits, lse_r, labels, dloss, d});
      ref_.softmax_xent_bwd({logits, lse_r, labels, dloss, d_r});
      STRATA_EXPECT_CLOSE(d, d_r, kTolReduction, "softmax_xent_bwd");
      if (k.padded) {
        const Tensor pad = d_rows.narrow(1, k.c, cp - k.c).contiguous().to(DType::f64);
        const double* p = pad.data<double>();
        for (int64_t i = 0; i < pad.numel(); ++i) ASSERT_TRUE(std::isnan(p[i])) << "padding element " << i << " written";
      }
    }
  }
}

// A label neither a class nor ignore_index: the backend's error names the op, the argument,
// the position and the value, as the reference's does.
TEST_P(LossReduceOptimTest, SoftmaxCrossEntropyBadLabel) {
  const Tensor logits = rand_f32({4, 6}, 10500);
  const Tensor labels = Tensor::from_vector(std::vector<int64_t>{1, -100, 6, 0}, {4});
  const Tensor loss = nan_tensor({}), lse = nan_tensor({4}), d = nan_tensor({4, 6});
  EXPECT_STRATA_ERROR(be().softmax_xent_fwd({logits, labels, loss, lse}), "softmax_xent_fwd", "argument 'labels'",
                      "labels[2] = 6", "[0, 6)", "ignore_index (-100)");
  EXPECT_STRATA_ERROR(be().softmax_xent_bwd({logits, lse, labels, scalar_tensor(1.0), d}), "softmax_xent_bwd",
                      "labels[2] = 6");
}

TEST_P(LossReduceOptimTest, BceWithLogits) {
  uint64_t seed = 11000;
  for (const Shape& s : {Shape{4, 20}, Shape{1, 1}, Shape{3, 2, 5}}) {
    SCOPED_TRACE(s.str());
    const Tensor x = rand_f32(s, seed += 10, kNCHW, -4, 4), t = rand_f32(s, seed + 1, kNCHW, 0, 1);
    const Tensor loss = nan_tensor({}), loss_r = nan_tensor({});
    be().bce_logits_fwd({x, t, loss});
    ref_.bce_logits_fwd({x, t, loss_r});
    STRATA_EXPECT_CLOSE(loss, loss_r, kTolReduction, "bce_logits_fwd");
    const Tensor dloss = scalar_tensor(1.3);
    const Tensor d = nan_tensor(s), d_r = nan_tensor(s);
    be().bce_logits_bwd({x, t, dloss, d});
    ref_.bce_logits_bwd({x, t, dloss, d_r});
    STRATA_EXPECT_CLOSE(d, d_r, kTolReduction, "bce_logits_bwd");
  }
}

// ---------------------------------------------------------------- reductions

TEST_P(LossReduceOptimTest, SumMean) {
  struct Case {
    std::string name;
    Tensor x;
  };
  const std::vector<Case> cases = {{"3x4x5", rand_f32({3, 4, 5}, 12001)},
                                   {"nhwc_2x3x4x5", rand_f32({2, 3, 4, 5}, 12002, kNHWC)},
                                   {"strided_view", rand_f32({6, 9}, 12003).narrow(1, 2, 4)},
                                   {"large_100003", rand_f32({100003}, 12004, kNCHW, 0.0, 1.0)},
                                   {"large_nhwc_4x64x12x12", rand_f32({4, 64, 12, 12}, 12007, kNHWC, 0.0, 1.0)},
                                   {"one_element", rand_f32({1}, 12005)},
                                   {"rank0", rand_f32({}, 12006)}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor s = nan_tensor({}), s_r = nan_tensor({}), m = nan_tensor({}), m_r = nan_tensor({});
    be().sum({c.x, s});
    ref_.sum({c.x, s_r});
    be().mean({c.x, m});
    ref_.mean({c.x, m_r});
    STRATA_EXPECT_CLOSE(s, s_r, kTolReduction, "sum");
    STRATA_EXPECT_CLOSE(m, m_r, kTolReduction, "mean");
  }
}

TEST_P(LossReduceOptimTest, ArgmaxFirstMaximumWins) {
  std::vector<double> v = rand_f32({6, 10}, 13000).to_vector<double>();
  for (int j = 0; j < 10; ++j) v[30 + j] = (j % 3 == 1) ? 0.5 : 0.25;  // row 3: ties at 1, 4, 7
  const Tensor x = Tensor::from_vector(std::vector<float>(v.begin(), v.end()), {6, 10});
  for (const Tensor& in : {x, copy_of(x.permute({1, 0})).permute({1, 0})}) {
    const Tensor y = Tensor::empty({6}, DType::i64), y_r = Tensor::empty({6}, DType::i64);
    be().argmax({in, y});
    ref_.argmax({in, y_r});
    EXPECT_EQ(y.to_vector<int64_t>(), y_r.to_vector<int64_t>());
    EXPECT_EQ(y.to_vector<int64_t>()[3], 1);
  }
}

// ---------------------------------------------------------------- fill, copy

TEST_P(LossReduceOptimTest, Fill) {
  const Tensor t = rand_f32({2, 8, 3, 3}, 14000, kNHWC), t_r = copy_of(t);
  be().fill({t.narrow(1, 2, 3), 0.25});
  ref_.fill({t_r.narrow(1, 2, 3), 0.25});
  EXPECT_TRUE(bitwise_equal(t, t_r));
  const Tensor i = Tensor::empty({5}, DType::i64);
  be().fill({i, 7.0});
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{7, 7, 7, 7, 7}));
}

TEST_P(LossReduceOptimTest, CopyAcrossLayoutsAndDtypes) {
  struct Case {
    std::string name;
    Tensor x;
    DType to;
    MemoryFormat fmt;
  };
  const Tensor f32 = rand_f32({2, 5, 3, 4}, 15000);
  const std::vector<Case> cases = {
      {"f32_nchw_to_nhwc", f32, DType::f32, kNHWC},
      {"f32_nhwc_to_nchw", rand_f32({2, 5, 3, 4}, 15001, kNHWC), DType::f32, kNCHW},
      {"f32_same_layout", f32, DType::f32, kNCHW},
      {"f32_to_f64", f32, DType::f64, kNCHW},
      {"f32_to_bf16_nhwc", f32, DType::bf16, kNHWC},
      {"f32_to_f16", f32, DType::f16, kNCHW},
      {"f64_to_f32", random_tensor({3, 7}, DType::f64, 15002), DType::f32, kNCHW},
      {"i64_to_f32", random_labels(9, 100, 15003), DType::f32, kNCHW},
      {"strided_view_to_contiguous", f32.narrow(1, 1, 3), DType::f32, kNCHW},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor y = Tensor::empty(c.x.sizes(), c.to, Device::cpu(), c.fmt);
    const Tensor y_r = Tensor::empty(c.x.sizes(), c.to, Device::cpu(), c.fmt);
    be().copy({c.x, y});
    ref_.copy({c.x, y_r});
    EXPECT_TRUE(bitwise_equal(y, y_r));
  }
}

// ---------------------------------------------------------------- optimizers

TEST_P(LossReduceOptimTest, SgdStep) {
  struct Case {
    std::string name;
    double momentum, weight_decay;
    bool nesterov;
  };
  uint64_t seed = 16000;
  for (const Case& c : std::vector<Case>{{"plain", 0, 0, false},
                                         {"momentum", 0.9, 0, false},
                                         {"nesterov_wd", 0.9, 1e-2, true},
                                         {"wd_only", 0, 5e-4, false}}) {
    SCOPED_TRACE(c.name);
    const Tensor p = rand_f32({3, 33}, seed += 10), p_r = copy_of(p);
    const Tensor buf = rand_f32({3, 33}, seed + 1, kNCHW, 0, 0.1), buf_r = copy_of(buf);
    for (int step = 0; step < 2; ++step) {
      const Tensor g = rand_f32({3, 33}, seed + 2 + step);
      ops::SgdStepArgs a{p, g, buf};
      a.o.lr = 0.05, a.o.momentum = c.momentum, a.o.weight_decay = c.weight_decay, a.o.nesterov = c.nesterov;
      // Graph mode's form (lr read from `hyper`, o.lr a decoy): the reference's at the first
      // step, the backend's at the second, each against the other's plain form.
      const Tensor hyper = Tensor::from_vector<double>({0.05, 0.0}, Shape{2});
      ops::SgdStepArgs h = a;
      h.hyper = hyper, h.o.lr = 123.0;
      be().sgd_step(step == 1 ? h : a);
      a.param = h.param = p_r, a.momentum_buf = h.momentum_buf = buf_r;
      ref_.sgd_step(step == 0 ? h : a);
    }
    STRATA_EXPECT_CLOSE(p, p_r, kTolReduction, "sgd_step param");
    if (c.momentum != 0) {
      STRATA_EXPECT_CLOSE(buf, buf_r, kTolReduction, "sgd_step momentum_buf");
    }
  }
}

TEST_P(LossReduceOptimTest, AdamStep) {
  uint64_t seed = 17000;
  for (bool adamw : {false, true}) {
    SCOPED_TRACE(adamw ? "adamw" : "adam");
    const Shape s{2, 8, 3, 3};
    const Tensor p = rand_f32(s, seed += 10, kNHWC), p_r = copy_of(p);
    const Tensor m = nan_tensor(s, kNHWC), v = nan_tensor(s, kNHWC);
    ReferenceBackend{}.fill({m, 0.0});
    ReferenceBackend{}.fill({v, 0.0});
    const Tensor m_r = copy_of(m), v_r = copy_of(v);
    for (int step = 1; step <= 3; ++step) {
      const Tensor g = rand_f32(s, seed + step, kNHWC);
      ops::AdamStepArgs a{p, g, m, v};
      a.o.lr = 1e-2, a.o.weight_decay = 1e-2, a.o.decoupled_weight_decay = adamw, a.step = step;
      // Graph mode's form (lr and step read from `hyper`), as in SgdStep.
      const Tensor hyper = Tensor::from_vector<double>({1e-2, static_cast<double>(step)}, Shape{2});
      ops::AdamStepArgs h = a;
      h.hyper = hyper, h.o.lr = 123.0, h.step = 77;
      be().adam_step(step == 2 ? h : a);
      a.param = h.param = p_r, a.exp_avg = h.exp_avg = m_r, a.exp_avg_sq = h.exp_avg_sq = v_r;
      ref_.adam_step(step == 3 ? h : a);
    }
    STRATA_EXPECT_CLOSE(p, p_r, kTolReduction, "adam_step param");
    STRATA_EXPECT_CLOSE(m, m_r, kTolReduction, "adam_step exp_avg");
    STRATA_EXPECT_CLOSE(v, v_r, kTolReduction, "adam_step exp_avg_sq");
  }
}

// The lists' steps against the backend's own single steps, bitwise, and against the
// reference's single steps.
TEST_P(LossReduceOptimTest, MultiTensorStepsMatchSingleSteps) {
  expect_multi_steps_match_single_steps(be(), [](const Tensor& t) { return t; });
  const std::vector<Tensor> p{rand_f32({3, 33}, 18000), rand_f32({2, 8, 3, 3}, 18001, kNHWC)};
  const std::vector<Tensor> g{rand_f32({3, 33}, 18002), rand_f32({2, 8, 3, 3}, 18003, kNHWC)};
  const std::vector<Tensor> m{rand_f32({3, 33}, 18004), rand_f32({2, 8, 3, 3}, 18005, kNHWC)};
  const std::vector<Tensor> v{rand_f32({3, 33}, 18006, kNCHW, 0, 1), rand_f32({2, 8, 3, 3}, 18007, kNHWC, 0, 1)};
  std::vector<Tensor> pr, mr, vr;
  for (size_t i = 0; i < p.size(); ++i) {
    pr.push_back(copy_of(p[i]));
    mr.push_back(copy_of(m[i]));
    vr.push_back(copy_of(v[i]));
  }
  const std::vector<ops::TensorView> pv(p.begin(), p.end()), gv(g.begin(), g.end()), mv(m.begin(), m.end()),
      vv(v.begin(), v.end());
  const std::vector<int64_t> steps{1, 4};
  ops::AdamOptions o;
  o.lr = 1e-2, o.weight_decay = 1e-2, o.decoupled_weight_decay = true;
  be().multi_adam_step({pv, gv, mv, vv, {}, steps, o});
  for (size_t i = 0; i < p.size(); ++i) ref_.adam_step({pr[i], g[i], mr[i], vr[i], o, steps[i]});
  for (size_t i = 0; i < p.size(); ++i) {
    STRATA_EXPECT_CLOSE(p[i], pr[i], kTolReduction, "multi_adam_step params[" + std::to_string(i) + "]");
    STRATA_EXPECT_CLOSE(v[i], vr[i], kTolReduction, "multi_adam_step exp_avg_sqs[" + std::to_string(i) + "]");
  }
  ops::SgdOptions so;
  so.lr = 0.05, so.momentum = 0.9, so.weight_decay = 1e-2;
  be().multi_sgd_step({pv, gv, mv, {}, so});
  for (size_t i = 0; i < p.size(); ++i) ref_.sgd_step({pr[i], g[i], mr[i], so});
  for (size_t i = 0; i < p.size(); ++i) {
    STRATA_EXPECT_CLOSE(p[i], pr[i], kTolReduction, "multi_sgd_step params[" + std::to_string(i) + "]");
    STRATA_EXPECT_CLOSE(m[i], mr[i], kTolReduction, "multi_sgd_step momentum_bufs[" + std::to_string(i) + "]");
  }
}

// Dynamic loss scaling on the device: the state's update (finite sums, a non-finite
// one, growth after `interval` finite steps), and the steps that read it: a scaled
// gradient times 1/scale gives the unscaled gradient's step bitwise, a skip writes
// nothing, Adam's bias correction discounts the skipped steps.
TEST_P(LossReduceOptimTest, AmpUpdateScaleAndTheStepsThatReadIt) {
  const auto state = [](std::vector<double> v) { return Tensor::from_vector<double>(v, Shape{4}); };
  struct Case {
    std::string name;
    std::vector<float> sums;
    std::vector<double> before, after;
  };
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const Case& c : std::vector<Case>{{"finite", {1.f, -2.f, 3e30f}, {1024, 1, 1, 0}, {1024, 2, 1, 1.0 / 1024}},
                                         {"grows", {0.f}, {1024, 2, 0, 0}, {2048, 0, 0, 1.0 / 1024}},
                                         {"inf", {1.f, inf}, {1024, 2, 1, 0}, {512, 0, 2, 0}},
                                         {"nan", {nan, 1.f}, {8, 1, 0, 0.125}, {4, 0, 1, 0}}}) {
    SCOPED_TRACE(c.name);
    const Tensor sums = Tensor::from_vector(c.sums, Shape{static_cast<int64_t>(c.sums.size())});
    const Tensor st = state(c.before), st_r = state(c.before);
    be().amp_update_scale({sums, st, 2.0, 0.5, 3});
    ref_.amp_update_scale({sums, st_r, 2.0, 0.5, 3});
    EXPECT_EQ(st.to_vector<double>(), c.after);
    EXPECT_EQ(st_r.to_vector<double>(), c.after);
  }

  const Shape s{4, 9};
  const Tensor g = rand_f32(s, 18000), g_scaled = copy_of(g);
  ReferenceBackend{}.scale({g, g_scaled, 256.0});
  const Tensor finite = state({256, 0, 3, 1.0 / 256}), skipped = state({128, 0, 4, 0});
  // SGD with momentum: scaled and read times 1/256 == unscaled; a skip changes nothing.
  const Tensor p = rand_f32(s, 18001), buf = rand_f32(s, 18002, kNCHW, 0, 0.1);
  const Tensor p_amp = copy_of(p), buf_amp = copy_of(buf), p_skip = copy_of(p), buf_skip = copy_of(buf);
  ops::SgdStepArgs a{p, g, buf};
  a.o.lr = 0.05, a.o.momentum = 0.9, a.o.weight_decay = 1e-2;
  ops::SgdStepArgs b = a, k = a;
  b.param = p_amp, b.grad = g_scaled, b.momentum_buf = buf_amp, b.amp = finite;
  k.param = p_skip, k.grad = g_scaled, k.momentum_buf = buf_skip, k.amp = skipped;
  be().sgd_step(a);
  be().sgd_step(b);
  be().sgd_step(k);
  EXPECT_TRUE(bitwise_equal(p_amp, p));
  EXPECT_TRUE(bitwise_equal(buf_amp, buf));
  EXPECT_TRUE(bitwise_equal(p_skip, rand_f32(s, 18001)));  // as before the step
  EXPECT_TRUE(bitwise_equal(buf_skip, rand_f32(s, 18002, kNCHW, 0, 0.1)));
  EXPECT_FALSE(bitwise_equal(p_skip, p));
  // Adam: the step count passed is the attempts plus the skips before (here 5 = 2 + 3),
  // the kernel counts 5 - amp's 3 skipped = 2, as the plain step 2.
  const Tensor q = rand_f32(s, 18003), m = rand_f32(s, 18004, kNCHW, 0, 0.1), v = rand_f32(s, 18005, kNCHW, 0, 0.1);
  const Tensor q_amp = copy_of(q), m_amp = copy_of(m), v_amp = copy_of(v);
  const Tensor q_skip = copy_of(q), m_skip = copy_of(m), v_skip = copy_of(v);
  ops::AdamStepArgs c{q, g, m, v};
  c.o.lr = 1e-2, c.step = 2;
  ops::AdamStepArgs d = c, e = c;
  d.param = q_amp, d.grad = g_scaled, d.exp_avg = m_amp, d.exp_avg_sq = v_amp, d.amp = finite, d.step = 5;
  e.param = q_skip, e.grad = g_scaled, e.exp_avg = m_skip, e.exp_avg_sq = v_skip, e.amp = skipped, e.step = 4;
  be().adam_step(c);
  be().adam_step(d);
  be().adam_step(e);
  EXPECT_TRUE(bitwise_equal(q_amp, q));
  EXPECT_TRUE(bitwise_equal(m_amp, m));
  EXPECT_TRUE(bitwise_equal(v_amp, v));
  EXPECT_FALSE(bitwise_equal(q_skip, q));
  EXPECT_TRUE(bitwise_equal(q_skip, rand_f32(s, 18003)));  // as before the step
  EXPECT_TRUE(bitwise_equal(m_skip, rand_f32(s, 18004, kNCHW, 0, 0.1)));
}

STRATA_CPU_BACKEND_SUITE(LossReduceOptimTest);

}  // namespace
}  // namespace strata::testing
