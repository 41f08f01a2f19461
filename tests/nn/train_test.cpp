// Optimizers, schedules and training: the update formulas against hand-computed
// values, parameter groups, one step lowering the loss, overfitting a small batch,
// and training steps bitwise equal across dispatch modes.
#include <gtest/gtest.h>

#include <cmath>

#include "strata/nn/schedule.h"
#include "nn_test_util.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

// A one-parameter "model" to check the optimizer arithmetic in f64.
class OneParam final : public nn::Module {
 public:
  explicit OneParam(std::vector<double> v) {
    w_ = register_parameter("w", Tensor::from_vector(v, Shape{static_cast<int64_t>(v.size())}));
  }
  std::string_view type_name() const override { return "OneParam"; }
  Tensor w_;
};

void set_grad(Tensor p, std::vector<double> g) { p.set_grad(Tensor::from_vector(g, p.sizes())); }

// torch.optim's defaults: plain SGD (no momentum buffer, no decay) unless asked.
TEST(NnOptim, DefaultsArePyTorchs) {
  const nn::OptimizerConfig c;
  EXPECT_EQ(c.kind, nn::OptimizerKind::sgd);
  EXPECT_EQ(c.momentum, 0.0);
  EXPECT_FALSE(c.nesterov);
  EXPECT_EQ(c.weight_decay, 0.0);
  EXPECT_EQ(c.beta1, 0.9);
  EXPECT_EQ(c.beta2, 0.999);
  EXPECT_EQ(c.eps, 1e-8);
  EXPECT_EQ(nn::describe(c), "sgd (lr 0.1, momentum 0, weight_decay 0)");
  OneParam m({1.0});
  nn::Optimizer opt(c, nn::param_groups(m, c.weight_decay, false),
                    nn::make_step_kernels(DispatchMode::virtual_call, "reference"));
  set_grad(m.w_, {0.5});
  opt.step();
  set_grad(m.w_, {0.5});
  opt.step();
  EXPECT_EQ(m.w_.to_vector<double>()[0], 1.0 - 0.1 * 0.5 - 0.1 * 0.5);
  EXPECT_TRUE(opt.state_dict().empty());  // no momentum buffer
}

TEST(NnOptim, SgdMomentumNesterovWeightDecayFormulas) {
  for (bool nesterov : {false, true}) {
    OneParam m({1.0, -2.0});
    nn::OptimizerConfig c;
    c.lr = 0.1;
    c.momentum = 0.9;
    c.nesterov = nesterov;
    c.weight_decay = 0.01;
    nn::Optimizer opt(c, nn::param_groups(m, c.weight_decay, false),
                      nn::make_step_kernels(DispatchMode::direct, "reference"));
    double p = 1.0, buf = 0.0;
    for (double g : {0.5, -0.25, 1.0}) {
      set_grad(m.w_, {g, g});
      opt.step();
      const double gd = g + 0.01 * p;
      buf = 0.9 * buf + gd;
      p -= 0.1 * (nesterov ? gd + 0.9 * buf : buf);
    }
    EXPECT_NEAR(m.w_.to_vector<double>()[0], p, 1e-12) << nesterov;
    EXPECT_EQ(opt.step_count(), 3);
  }
}

TEST(NnOptim, AdamAndAdamWFormulas) {
  for (auto kind : {nn::OptimizerKind::adam, nn::OptimizerKind::adamw}) {
    OneParam m({0.5});
    nn::OptimizerConfig c;
    c.kind = kind;
    c.lr = 0.01;
    c.weight_decay = 0.1;
    nn::Optimizer opt(c, nn::param_groups(m, c.weight_decay, false),
                      nn::make_step_kernels(DispatchMode::static_call, "reference"));
    double p = 0.5, mm = 0, v = 0;
    int t = 0;
    for (double g : {0.3, -0.1}) {
      set_grad(m.w_, {g});
      opt.step();
      ++t;
      double gg = g;
      if (kind == nn::OptimizerKind::adamw)
        p *= 1 - 0.01 * 0.1;
      else
        gg += 0.1 * p;
      mm = 0.9 * mm + 0.1 * gg;
      v = 0.999 * v + 0.001 * gg * gg;
      const double mhat = mm / (1 - std::pow(0.9, t));
      const double denom = std::sqrt(v) / std::sqrt(1 - std::pow(0.999, t)) + 1e-8;
      p -= 0.01 * mhat / denom;
    }
    EXPECT_NEAR(m.w_.to_vector<double>()[0], p, 1e-12) << nn::optimizer_kind_name(kind);
    // A parameter without a gradient is skipped.
    m.w_.set_grad(Tensor());
    const double before = m.w_.to_vector<double>()[0];
    opt.step();
    EXPECT_EQ(m.w_.to_vector<double>()[0], before);
  }
}

// A captured training step (graph mode) refers to the optimizer's state tensors: loading
// a state dict copies into them, and state_epoch() changes exactly when they are replaced.
TEST(NnOptim, LoadingKeepsTheStateTensorsAndTheEpochSaysWhenTheyChange) {
  for (auto kind : {nn::OptimizerKind::sgd, nn::OptimizerKind::adam}) {
    SCOPED_TRACE(std::string(nn::optimizer_kind_name(kind)));
    OneParam m({0.5, -0.25});
    nn::OptimizerConfig c;
    c.kind = kind;
    c.momentum = 0.9;
    nn::Optimizer opt(c, nn::param_groups(m, 0.0, false), nn::make_step_kernels(DispatchMode::direct, "reference"));
    const uint64_t fresh = opt.state_epoch();
    set_grad(m.w_, {0.3, 0.1});
    opt.step();  // allocates the state
    const uint64_t stepped = opt.state_epoch();
    EXPECT_NE(stepped, fresh);
    nn::StateDict saved;
    std::vector<const void*> where;
    for (const auto& [n, t] : opt.state_dict()) {
      Tensor copy = Tensor::empty(t.sizes(), t.dtype());
      copy_into(t, copy);
      saved.emplace_back(n, copy);
      where.push_back(t.data_ptr());
    }
    set_grad(m.w_, {-0.2, 0.4});
    opt.step();
    opt.load_state_dict(saved);
    EXPECT_EQ(opt.state_epoch(), stepped);
    const nn::StateDict now = opt.state_dict();
    ASSERT_EQ(now.size(), saved.size());
    for (size_t i = 0; i < now.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(now[i].second, saved[i].second)) << now[i].first;
      if (!now[i].first.ends_with(".step")) {
        EXPECT_EQ(now[i].second.data_ptr(), where[i]) << now[i].first;
      }
    }
    opt.load_state_dict({});  // no state: dropped
    EXPECT_NE(opt.state_epoch(), stepped);
    const nn::Optimizer other(c, nn::param_groups(m, 0.0, false),
                              nn::make_step_kernels(DispatchMode::direct, "reference"));
    EXPECT_NE(other.state_epoch(), fresh);
    EXPECT_NE(other.state_epoch(), stepped);
  }
}

TEST(NnOptim, ParamGroupsExcludeBatchNormAndBiasFromWeightDecay) {
  nn::ResNetConfig c;
  c.depth = 18;
  c.num_classes = 10;
  c.base_channels = 8;
  auto m = nn::make_resnet(c, DispatchMode::virtual_call, "null");
  auto groups = nn::param_groups(m->module(), 5e-4, true);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].weight_decay, 5e-4);
  EXPECT_EQ(groups[1].weight_decay, 0.0);
  EXPECT_EQ(groups[0].params.size(), 21u);  // 20 conv weights + fc.weight
  EXPECT_EQ(groups[1].params.size(), 41u);  // 20 BN x (weight, bias) + fc.bias
  for (auto& [n, t] : groups[1].params) EXPECT_TRUE(n.find("bn") != std::string::npos || n.find("downsample.1") != std::string::npos || n == "fc.bias") << n;
  auto opt = m->make_optimizer({nn::OptimizerKind::sgd, 0.1, 0.9, true, 0.9, 0.999, 1e-8, 5e-4, true});
  EXPECT_NE(opt->describe().find("no_decay (41 tensors"), std::string::npos) << opt->describe();
  EXPECT_EQ(nn::param_groups(m->module(), 5e-4, false).size(), 1u);
}

TEST(NnOptim, ZeroGradVariants) {
  OneParam m({1.0});
  nn::Optimizer opt({}, nn::param_groups(m, 0, false), nn::make_step_kernels(DispatchMode::virtual_call, "reference"));
  set_grad(m.w_, {3.0});
  opt.zero_grad(false);
  ASSERT_TRUE(m.w_.grad().defined());
  EXPECT_EQ(m.w_.grad().item(), 0.0);
  opt.zero_grad();
  EXPECT_FALSE(m.w_.grad().defined());
}

TEST(NnSchedule, StepMultistepCosineAndWarmup) {
  nn::ScheduleConfig s;
  s.kind = nn::ScheduleKind::step;
  s.base_lr = 0.1;
  s.step_size = 10;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(nn::lr_at(s, 0), 0.1);
  EXPECT_DOUBLE_EQ(nn::lr_at(s, 9), 0.1);
  EXPECT_DOUBLE_EQ(nn::lr_at(s, 10), 0.05);
  EXPECT_DOUBLE_EQ(nn::lr_at(s, 25), 0.025);
  s.kind = nn::ScheduleKind::multistep;
  s.milestones = {3, 7};
  EXPECT_DOUBLE_EQ(nn::lr_at(s, 2), 0.1);
  EXPECT_DOUBLE_EQ(nn::lr_at(s, 3), 0.05);
  EXPECT_DOUBLE_EQ(nn::lr_at(s, 8), 0.025);
  s.kind = nn::ScheduleKind::cosine;
  s.total_steps = 110;
  s.warmup_steps = 10;
  s.warmup_start_factor = 0.1;
  s.min_lr = 0.001;
  EXPECT_DOUBLE_EQ(nn::lr_at(s, 0), 0.01);
  EXPECT_DOUBLE_EQ(nn::lr_at(s, 5), 0.1 * (0.1 + 0.9 * 0.5));
  EXPECT_DOUBLE_EQ(nn::lr_at(s, 10), 0.1);
  EXPECT_NEAR(nn::lr_at(s, 60), 0.001 + 0.099 * 0.5, 1e-15);
  EXPECT_DOUBLE_EQ(nn::lr_at(s, 110), 0.001);
  EXPECT_DOUBLE_EQ(nn::lr_at(s, 500), 0.001);
  EXPECT_NE(nn::describe(s).find("warm-up 10 steps"), std::string::npos);
  EXPECT_STRATA_ERROR(nn::parse_schedule_kind("poly"), "unknown kind 'poly'");
}

nn::ResNetConfig tiny_resnet() {
  nn::ResNetConfig c;
  c.depth = 18;
  c.num_classes = 10;
  c.small_input = true;
  c.base_channels = 8;
  c.init.seed = 1;
  return c;
}

TEST(NnTraining, OneSgdStepLowersTheLoss) {
  auto m = nn::make_resnet(tiny_resnet(), DispatchMode::static_call, "reference");
  auto opt = m->make_optimizer({nn::OptimizerKind::sgd, 0.05, 0.9, false, 0.9, 0.999, 1e-8, 0.0, false});
  const Tensor x = random_tensor({8, 3, 8, 8}, DType::f32, 3);
  const Tensor y = random_labels(8, 10, 4);
  const double before = m->train_step(x, y, *opt).loss.item();
  const double after = m->forward_loss(x, y).loss.item();
  EXPECT_LT(after, before);
}

TEST(NnTraining, FiftyStepsOverfitSixteenImages) {
  nn::LeNetConfig c;
  c.variant = nn::LeNetVariant::keras;
  c.input_size = 20;  // 20 -> 16 -> 8 -> 4 -> 2: a small, quick LeNet
  c.init.seed = 2;
  auto m = nn::make_lenet(c, DispatchMode::direct, "reference");
  nn::OptimizerConfig oc;
  oc.kind = nn::OptimizerKind::adam;
  oc.lr = 1e-2;
  auto opt = m->make_optimizer(oc);
  const Tensor x = random_tensor({16, 1, 20, 20}, DType::f32, 5);
  const Tensor y = random_labels(16, 10, 6);
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    last = m->train_step(x, y, *opt).loss.item();
    if (step == 0) first = last;
  }
  m->eval();
  const auto pred = ops::argmax(ops::VirtualDispatch(backends::registry().get("reference")), m->predict(x));
  const auto p = pred.to_vector<int64_t>(), t = y.to_vector<int64_t>();
  int correct = 0;
  for (size_t i = 0; i < p.size(); ++i) correct += p[i] == t[i];
  std::printf("overfit: loss %.4f -> %.4f, accuracy %d/16\n", first, last, correct);
  EXPECT_GT(correct / 16.0, 0.95);
}

TEST(NnTraining, TrainStepsBitwiseEqualAcrossModes) {
  const Tensor x = random_tensor({4, 3, 8, 8}, DType::f32, 7);
  const Tensor y = random_labels(4, 10, 8);
  std::vector<nn::StateDict> finals;
  for (auto kind : {nn::OptimizerKind::sgd, nn::OptimizerKind::adamw}) {
    std::vector<StepOutputs> outs;
    for (auto mode : kAllModes) {
      auto m = nn::make_resnet(tiny_resnet(), mode, "reference");
      nn::OptimizerConfig oc;
      oc.kind = kind;
      oc.lr = kind == nn::OptimizerKind::sgd ? 0.1 : 1e-3;
      oc.momentum = 0.9;
      oc.nesterov = true;
      oc.weight_decay = 1e-4;
      oc.no_decay_bn_bias = true;
      auto opt = m->make_optimizer(oc);
      nn::StepResult r;
      for (int s = 0; s < 3; ++s) r = m->train_step(x, y, *opt);
      outs.push_back(snapshot(*m, r));
    }
    expect_bitwise(outs[0], outs[1], "virtual vs static");
    expect_bitwise(outs[0], outs[2], "virtual vs direct");
  }
}

}  // namespace
}  // namespace strata::testing
