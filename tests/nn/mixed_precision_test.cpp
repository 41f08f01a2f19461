// Mixed precision in the nn layer (ModelOptions::compute_dtype), checked on the CPU
// reference with f64 master weights and f32 compute: the same mechanism the cuda
// backend's bf16 training uses (f32 masters, bf16 compute), where the reference
// backend can run it and the answer is known. The mixed model must agree with an f32
// model holding the same (rounded) weights, keep its parameters, gradients and BN
// statistics in f64, and train. Direct mode plans the same conversions and must give
// bitwise the tape modes' results.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "strata/autograd/grad_mode.h"
#include "strata/backends/reference/reference_backend.h"
#include "strata/core/allocator.h"
#include "strata/nn/layers/batch_norm.h"
#include "strata/nn/layers/conv2d.h"
#include "strata/nn/layers/linear.h"
#include "strata/ops/trace.h"
#include "nn_test_util.h"

namespace strata::testing {
namespace {

Tensor as(const Tensor& t, DType dt) {
  if (!is_floating(t.dtype())) return t.clone();
  Tensor o = Tensor::empty(t.sizes(), dt, Device::cpu());
  copy_into(t, o);
  return o;
}

class NnMixedPrecision : public ::testing::TestWithParam<ops::DispatchMode> {};

TEST_P(NnMixedPrecision, F64MastersWithF32ComputeMatchAnF32Model) {
  nn::ModelOptions mixed_opts;
  mixed_opts.compute_dtype = DType::f32;
  auto mixed = nn::make_resnet(tiny_resnet(18, DType::f64, 9), GetParam(), "reference", mixed_opts);
  auto plain = nn::make_resnet(tiny_resnet(18, DType::f32, 9), GetParam(), "reference");
  nn::StateDict sd;
  for (auto& [n, t] : mixed->state_dict()) sd.emplace_back(n, as(t, DType::f32));
  plain->load_state_dict(sd);
  EXPECT_NE(mixed->describe().find("f64 parameters, f32 compute"), std::string::npos) << mixed->describe();

  const Tensor x = random_tensor({3, 3, 12, 12}, DType::f32, 31);
  const Tensor y = random_labels(3, 10, 32);
  const nn::StepResult rm = mixed->forward_loss(x, y);
  mixed->backward();
  const nn::StepResult rp = plain->forward_loss(x, y);
  plain->backward();

  EXPECT_EQ(rm.loss.dtype(), DType::f64) << "the loss is computed in the masters' dtype";
  EXPECT_EQ(rm.logits.dtype(), DType::f64);
  EXPECT_TRUE(close(as(rm.loss, DType::f32), rp.loss, 1e-5));
  EXPECT_TRUE(close(as(rm.logits, DType::f32), rp.logits, 1e-5));
  const auto pm = mixed->module().named_parameters(), pp = plain->module().named_parameters();
  ASSERT_EQ(pm.size(), pp.size());
  for (size_t i = 0; i < pm.size(); ++i) {
    SCOPED_TRACE(pm[i].first);
    const Tensor gm = pm[i].second.grad(), gp = pp[i].second.grad();
    ASSERT_TRUE(gm.defined());
    EXPECT_EQ(gm.dtype(), DType::f64) << "master gradients stay in the masters' dtype";
    // BN runs in f64 in the mixed model and in f32 in the plain one: agreement to f32's
    // precision, amplified a little by the normalisation.
    EXPECT_TRUE(close(as(gm, DType::f32), gp, 1e-4));
  }
  // Running statistics were updated, in f64.
  for (auto& [n, t] : mixed->state_dict())
    if (n.find("running_mean") != std::string::npos) {
      EXPECT_EQ(t.dtype(), DType::f64) << n;
    }
}

TEST_P(NnMixedPrecision, TrainsAndPredictsInTheMastersDtype) {
  nn::ModelOptions o;
  o.compute_dtype = DType::f32;
  auto m = nn::make_resnet(tiny_resnet(18, DType::f64, 9), GetParam(), "reference", o);
  nn::OptimizerConfig oc;
  oc.lr = 0.05;
  oc.momentum = 0.9;
  auto opt = m->make_optimizer(oc);
  const Tensor x = random_tensor({8, 3, 12, 12}, DType::f32, 41);
  const Tensor y = random_labels(8, 10, 42);
  double first = 0, last = 0;
  for (int s = 0; s < 25; ++s) {
    const double l = m->train_step(x, y, *opt).loss.item();
    if (s == 0) first = l;
    last = l;
  }
  EXPECT_LT(last, 0.5 * first) << "25 steps on one batch should at least halve the loss";
  const Tensor p = m->predict(x);
  EXPECT_EQ(p.dtype(), DType::f64);
}

// Evaluation with gradients off converts each weight to the compute dtype once (the tape
// modes keep the copy, nn::detail::EvalCast; direct mode plans its conversions), and a
// weight written since is converted again: the prediction after a write is bitwise that of
// a fresh model holding the same weights.
TEST_P(NnMixedPrecision, EvaluationConvertsTheWeightsOnceUntilTheyChange) {
  nn::ModelOptions o;
  o.compute_dtype = DType::f32;
  auto m = nn::make_resnet(tiny_resnet(18, DType::f64, 9), GetParam(), "reference", o);
  m->eval();
  autograd::NoGradGuard no_grad;
  const Tensor x = random_tensor({2, 3, 12, 12}, DType::f32, 51);
  int copies = 0;
  const auto predict = [&](nn::Model& model) {
    ops::take_trace();
    ops::set_trace_enabled(true);
    const Tensor y = model.predict(x).clone();
    ops::set_trace_enabled(false);
    copies = 0;
    for (const ops::TraceEvent& e : ops::take_trace()) copies += e.op == ops::OpId::copy;
    return y;
  };
  const Tensor first = predict(*m);
  const int first_copies = copies;
  EXPECT_TRUE(close(predict(*m), first, 0.0)) << "the kept copies give the converted weights' answer";
  if (GetParam() != ops::DispatchMode::direct) {
    int weights = 1;  // the classifier's bias, and every convolution and classifier weight
    for (const auto& [name, t] : m->module().named_parameters()) weights += t.dim() >= 2;
    EXPECT_EQ(first_copies - copies, weights) << "each weight converted at the first prediction only";
  }
  const nn::StateDict params = m->module().named_parameters();
  const Tensor* fc = nn::find_entry(params, "fc.weight");
  ASSERT_NE(fc, nullptr);
  copy_into(random_tensor(fc->sizes(), DType::f64, 52, -0.3, 0.3), *fc);
  auto fresh = nn::make_resnet(tiny_resnet(18, DType::f64, 9), GetParam(), "reference", o);
  fresh->load_state_dict(m->state_dict());
  fresh->eval();
  const Tensor after = predict(*m);
  EXPECT_FALSE(close(after, first, 1e-3)) << "the written weight changed nothing the prediction sees";
  EXPECT_TRUE(close(after, predict(*fresh), 0.0));
}

INSTANTIATE_TEST_SUITE_P(AllModes, NnMixedPrecision, ::testing::ValuesIn(kAllModes),
                         [](const auto& info) { return std::string(ops::dispatch_mode_name(info.param)); });

// Loss scaling by a power of two is exact while nothing overflows: the trained
// parameters must be bitwise those of the unscaled run. A scale that overflows the f32
// compute (gradients become inf) must skip the step, leave the parameters alone and
// halve the scale, and training then continues. The tape modes decide on the host,
// direct mode on the device (the optimizer's kernels unscale or skip).
class NnMixedPrecisionLossScaling : public ::testing::TestWithParam<ops::DispatchMode> {};

TEST_P(NnMixedPrecisionLossScaling, IsExactAndSkipsOverflowingSteps) {
  const Tensor x = random_tensor({4, 3, 12, 12}, DType::f32, 51);
  const Tensor y = random_labels(4, 10, 52);
  nn::OptimizerConfig oc;
  oc.lr = 0.05;
  oc.momentum = 0.9;
  auto run = [&](std::optional<double> scale, int steps) {
    nn::ModelOptions o;
    o.compute_dtype = DType::f32;
    o.initial_loss_scale = scale;
    auto m = nn::make_resnet(tiny_resnet(18, DType::f64, 9), GetParam(), "reference", o);
    auto opt = m->make_optimizer(oc);
    for (int s = 0; s < steps; ++s) m->train_step(x, y, *opt);
    return m;
  };
  auto plain = run(0.0, 3);
  auto scaled = run(1024.0, 3);
  EXPECT_EQ(plain->loss_scale(), 0.0);
  EXPECT_EQ(scaled->loss_scale(), 1024.0);
  EXPECT_EQ(scaled->skipped_steps(), 0);
  EXPECT_NE(scaled->describe().find("dynamic loss scaling from 1024"), std::string::npos) << scaled->describe();
  const auto a = plain->state_dict(), b = scaled->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bitwise_equal(a[i].second, b[i].second)) << a[i].first;

  // 2^200 * gradients overflows f32 (max ~3.4e38) on the way back through the casts.
  const double huge = std::ldexp(1.0, 200);
  auto fresh = run(0.0, 0);
  auto overflow = run(huge, 1);
  EXPECT_EQ(overflow->skipped_steps(), 1);
  EXPECT_EQ(overflow->loss_scale(), huge / 2);
  const auto f = fresh->state_dict(), g = overflow->state_dict();
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i].first.find("num_batches_tracked") == std::string::npos &&
        f[i].first.find("running_") == std::string::npos) {
      EXPECT_TRUE(bitwise_equal(f[i].second, g[i].second)) << "skipped step changed " << f[i].first;
    }
  }
  nn::ModelOptions bad;
  bad.initial_loss_scale = -1.0;
  EXPECT_STRATA_ERROR(nn::make_resnet(tiny_resnet(18, DType::f64, 9), GetParam(), "reference", bad), "initial_loss_scale", "-1");
}

INSTANTIATE_TEST_SUITE_P(AllModes, NnMixedPrecisionLossScaling, ::testing::ValuesIn(kAllModes),
                         [](const auto& info) { return std::string(ops::dispatch_mode_name(info.param)); });

// Direct mode decides on the device what the tape modes decide on the host: the same
// skipped steps, the same scale, and bitwise the same parameters and Adam state (whose
// step counts leave the skipped steps out), through skips, a recovery and growth.
TEST(NnMixedPrecisionDirect, LossScalingOnTheDeviceMatchesTheTapeModes) {
  const Tensor x = random_tensor({4, 3, 12, 12}, DType::f32, 53);
  const Tensor y = random_labels(4, 10, 54);
  nn::OptimizerConfig oc;
  oc.kind = nn::OptimizerKind::adamw;
  oc.lr = 1e-3;
  oc.weight_decay = 1e-2;
  struct Run {
    std::unique_ptr<nn::Model> m;
    std::unique_ptr<nn::Optimizer> opt;
    std::vector<double> losses;
  };
  auto run = [&](ops::DispatchMode mode) {
    nn::ModelOptions o;
    o.compute_dtype = DType::f32;
    o.initial_loss_scale = std::ldexp(1.0, 130);  // overflows f32 at first: steps are skipped until it is low enough
    Run r{nn::make_resnet(tiny_resnet(18, DType::f64, 9), mode, "reference", o), nullptr, {}};
    r.opt = r.m->make_optimizer(oc);
    for (int s = 0; s < 8; ++s) r.losses.push_back(r.m->train_step(x, y, *r.opt).loss.item());
    return r;
  };
  const Run tape = run(ops::DispatchMode::static_call);
  const Run direct = run(ops::DispatchMode::direct);
  EXPECT_GE(tape.m->skipped_steps(), 1);
  EXPECT_LT(tape.m->skipped_steps(), 8);
  EXPECT_EQ(direct.m->skipped_steps(), tape.m->skipped_steps());
  EXPECT_EQ(direct.m->loss_scale(), tape.m->loss_scale());
  EXPECT_EQ(direct.losses, tape.losses);
  const auto a = tape.m->state_dict(), b = direct.m->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bitwise_equal(a[i].second, b[i].second)) << a[i].first;
  const auto oa = tape.opt->state_dict(), ob = direct.opt->state_dict();
  ASSERT_EQ(oa.size(), ob.size());
  ASSERT_FALSE(oa.empty());
  for (size_t i = 0; i < oa.size(); ++i) {
    EXPECT_EQ(oa[i].first, ob[i].first);
    EXPECT_TRUE(bitwise_equal(oa[i].second, ob[i].second)) << oa[i].first;
  }
  // A checkpoint of the direct optimizer resumes in a fresh one exactly.
  auto fresh = direct.m->make_optimizer(oc);
  fresh->load_state_dict(ob);
  const auto oc2 = fresh->state_dict();
  for (size_t i = 0; i < ob.size(); ++i) EXPECT_TRUE(bitwise_equal(oc2[i].second, ob[i].second)) << ob[i].first;
}

// Direct mode: the same steps as the tape modes, bitwise (same kernels, same casts
// through the copy op, same order of gradient accumulation), over a few SGD steps
// with momentum, through Conv2d, BatchNorm2d (in f64 between casts), Linear, dropout,
// residual branches and channels-last activations.
template <class Make>
void expect_direct_matches_tape(Make make, const Tensor& x, const Tensor& y, int steps = 3) {
  std::vector<StepOutputs> outs;
  for (auto mode : kAllModes) {
    std::unique_ptr<nn::Model> m = make(mode);
    nn::OptimizerConfig oc;
    oc.lr = 0.05;
    oc.momentum = 0.9;
    auto opt = m->make_optimizer(oc);
    nn::StepResult r;
    for (int s = 0; s < steps; ++s) r = m->train_step(x, y, *opt);
    // And once more without zeroing: the new gradients accumulate onto the old ones.
    r = m->forward_loss(x, y);
    m->backward();
    outs.push_back(snapshot(*m, r));
  }
  EXPECT_EQ(outs[2].loss.dtype(), DType::f64);
  EXPECT_EQ(outs[2].grads[0].second.dtype(), DType::f64);
  expect_bitwise(outs[0], outs[1], "virtual vs static");
  expect_bitwise(outs[0], outs[2], "virtual vs direct");
}

nn::ModelOptions f32_compute(MemoryFormat fmt = MemoryFormat::contiguous) {
  nn::ModelOptions o;
  o.compute_dtype = DType::f32;
  o.memory_format = fmt;
  return o;
}

TEST(NnMixedPrecisionDirect, ResNet18StepsBitwiseEqualToTapeModes) {
  const Tensor x = random_tensor({4, 3, 8, 8}, DType::f32, 61);
  const Tensor y = random_labels(4, 10, 62);
  for (auto fmt : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
    SCOPED_TRACE(fmt == MemoryFormat::channels_last ? "channels_last" : "contiguous");
    expect_direct_matches_tape(
        [&](auto mode) { return nn::make_resnet(tiny_resnet(18, DType::f64, 9), mode, "reference", f32_compute(fmt)); }, x, y);
  }
}

TEST(NnMixedPrecisionDirect, LeNetStepsBitwiseEqualToTapeModes) {
  nn::LeNetConfig c;
  c.variant = nn::LeNetVariant::keras;  // with dropout
  c.init.seed = 7;
  c.dropout_seed = 99;
  c.dtype = DType::f64;
  const Tensor x = random_tensor({3, 1, 28, 28}, DType::f32, 71);
  const Tensor y = random_labels(3, 10, 72);
  expect_direct_matches_tape([&](auto mode) { return nn::make_lenet(c, mode, "reference", f32_compute()); }, x, y);
  c.variant = nn::LeNetVariant::tensorflow;
  c.input_size = 12;
  nn::ModelOptions bce = f32_compute();
  bce.loss = nn::LossKind::bce_logits;
  const Tensor t = random_tensor({3, 10}, DType::f32, 73, 0.0, 1.0);
  expect_direct_matches_tape([&](auto mode) { return nn::make_lenet(c, mode, "reference", bce); },
                             random_tensor({3, 1, 12, 12}, DType::f32, 74), t);
}

// Direct mode plans the conversions with everything else at the first step: later
// steps make no plan and allocate nothing (the optimizer's state included).
TEST(NnMixedPrecisionDirect, PlansAndAllocatesNothingAfterTheFirstStep) {
  using P = nn::Direct<backends::ReferenceBackend>;
  nn::ModelOptions o = f32_compute();
  o.borrowed_results = true;  // the planned buffers themselves: a step then allocates nothing at all
  auto m = nn::make_resnet(tiny_resnet(18, DType::f64, 9), ops::DispatchMode::direct, "reference", o);
  auto plans = [&] {
    int64_t n = 0;
    for (auto& [name, mod] : m->module().named_modules()) {
      if (auto* c = dynamic_cast<nn::Conv2d<P>*>(mod)) n += c->plans_made();
      if (auto* b = dynamic_cast<nn::BatchNorm2d<P>*>(mod)) n += b->plans_made();
      if (auto* l = dynamic_cast<nn::Linear<P>*>(mod)) n += l->plans_made();
    }
    return n;
  };
  nn::OptimizerConfig oc;
  oc.lr = 0.05;
  oc.momentum = 0.9;
  auto opt = m->make_optimizer(oc);
  const Tensor x = random_tensor({4, 3, 12, 12}, DType::f32, 81);
  const Tensor y = random_labels(4, 10, 82);
  m->train_step(x, y, *opt);
  const int64_t planned = plans();
  EXPECT_GT(planned, 0);
  const size_t allocations = cpu_allocator().stats().allocations;
  for (int s = 0; s < 3; ++s) m->train_step(x, y, *opt);
  EXPECT_EQ(plans(), planned);
  EXPECT_EQ(cpu_allocator().stats().allocations, allocations) << "direct mode allocated after planning";
  // Writing into the planned input buffer (compute dtype) reuses the plans too.
  Tensor buf = m->input_buffer(Shape{4, 3, 12, 12});
  EXPECT_EQ(buf.dtype(), DType::f32);
  copy_into(x, buf);
  m->train_step(buf, y, *opt);
  EXPECT_EQ(plans(), planned);
  EXPECT_EQ(m->predict(x).dtype(), DType::f64);
}

TEST(NnMixedPrecisionErrors, NonFloatComputeIsAClearError) {
  nn::ModelOptions o;
  o.compute_dtype = DType::i32;
  EXPECT_STRATA_ERROR(nn::make_resnet(tiny_resnet(18, DType::f64, 9), ops::DispatchMode::static_call, "reference", o),
                      "compute dtype must be floating", "i32");
  EXPECT_STRATA_ERROR(nn::parse_precision("fp8"), "unknown precision 'fp8'", "bf16");
  EXPECT_EQ(nn::parse_precision("bf16"), DType::bf16);
  EXPECT_FALSE(nn::parse_precision("fp32").has_value());
}

}  // namespace
}  // namespace strata::testing
