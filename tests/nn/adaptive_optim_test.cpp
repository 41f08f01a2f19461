// nn::Optimizer's RMSprop, Adagrad and Adadelta: torch.optim's defaults, the steps of
// every configuration against the oracle written from torch.optim's algorithms (with a
// group's weight decay, in direct and tape modes), the configurations refused with the
// optimizer and argument named, the state under PyTorch's names, and a checkpoint that
// resumes bitwise where the uninterrupted run goes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nn_test_util.h"
#include "strata/nn/checkpoint.h"
#include "support/adaptive_optim_cases.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

class TwoParams final : public nn::Module {
 public:
  TwoParams() {
    w_ = register_parameter("w", random_tensor({3, 5}, DType::f64, 60000));
    b_ = register_parameter("b", random_tensor({5}, DType::f64, 60001));
  }
  std::string_view type_name() const override { return "TwoParams"; }
  Tensor w_, b_;
};

// The nn config of a test case (support/adaptive_optim_cases.h).
nn::OptimizerConfig config_of(const AdaptiveCase& c) {
  nn::OptimizerConfig oc;
  switch (c.kind) {
    case Adaptive::rmsprop:
      oc.kind = nn::OptimizerKind::rmsprop;
      oc.rmsprop = {c.rmsprop.alpha, c.rmsprop.eps, c.rmsprop.momentum, c.rmsprop.centered};
      oc.weight_decay = c.rmsprop.weight_decay;
      break;
    case Adaptive::adagrad:
      oc.kind = nn::OptimizerKind::adagrad;
      oc.adagrad = {c.adagrad.lr_decay, c.adagrad.eps, c.init};
      oc.weight_decay = c.adagrad.weight_decay;
      break;
    case Adaptive::adadelta:
      oc.kind = nn::OptimizerKind::adadelta;
      oc.adadelta = {c.adadelta.rho, c.adadelta.eps};
      oc.weight_decay = c.adadelta.weight_decay;
      break;
  }
  oc.lr = case_lr(c);
  return oc;
}

TEST(NnAdaptiveOptim, DefaultsAreTorchOptims) {
  const nn::OptimizerConfig c;
  EXPECT_EQ(c.rmsprop.alpha, 0.99);
  EXPECT_EQ(c.rmsprop.eps, 1e-8);
  EXPECT_EQ(c.rmsprop.momentum, 0.0);
  EXPECT_FALSE(c.rmsprop.centered);
  EXPECT_EQ(c.adagrad.lr_decay, 0.0);
  EXPECT_EQ(c.adagrad.eps, 1e-10);
  EXPECT_EQ(c.adagrad.initial_accumulator_value, 0.0);
  EXPECT_EQ(c.adadelta.rho, 0.9);
  EXPECT_EQ(c.adadelta.eps, 1e-6);
  EXPECT_EQ(nn::default_lr(nn::OptimizerKind::rmsprop), 0.01);
  EXPECT_EQ(nn::default_lr(nn::OptimizerKind::adagrad), 0.01);
  EXPECT_EQ(nn::default_lr(nn::OptimizerKind::adadelta), 1.0);
  for (const char* k : {"rmsprop", "adagrad", "adadelta"})
    EXPECT_EQ(nn::optimizer_kind_name(nn::parse_optimizer_kind(k)), k);
  EXPECT_STRATA_ERROR(nn::parse_optimizer_kind("adamax"), "unknown kind 'adamax'", "rmsprop, adagrad, adadelta");
  nn::OptimizerConfig r = c;
  r.kind = nn::OptimizerKind::rmsprop, r.lr = 0.01;
  EXPECT_EQ(nn::describe(r), "rmsprop (lr 0.01, alpha 0.99, eps 1e-08, momentum 0, weight_decay 0)");
}

// Five steps of both parameters (a group each way: the config's weight decay, and none),
// through each dispatch mode's kernels, against the oracle in f64.
TEST(NnAdaptiveOptim, StepsMatchTorchOptimsAlgorithms) {
  for (const AdaptiveCase& c : adaptive_cases())
    for (DispatchMode mode : {DispatchMode::virtual_call, DispatchMode::direct}) {
      SCOPED_TRACE(c.name + (mode == DispatchMode::direct ? ", direct" : ", virtual"));
      TwoParams m;
      const nn::OptimizerConfig oc = config_of(c);
      std::vector<nn::ParamGroup> groups{{"decay", {{"w", m.w_}}, oc.weight_decay}, {"plain", {{"b", m.b_}}, 0.0}};
      nn::Optimizer opt(oc, groups, nn::make_step_kernels(mode, "reference"));
      AdaptiveCase plain = c;  // the second group's: no weight decay
      plain.rmsprop.weight_decay = plain.adagrad.weight_decay = plain.adadelta.weight_decay = 0.0;
      std::vector<double> ew = m.w_.to_vector<double>(), eb = m.b_.to_vector<double>();
      std::vector<std::vector<double>> sw(static_cast<size_t>(state_count(c)), std::vector<double>(15, c.init));
      std::vector<std::vector<double>> sb(static_cast<size_t>(state_count(c)), std::vector<double>(5, c.init));
      for (int64_t t = 1; t <= 5; ++t) {
        const Tensor gw = random_tensor({3, 5}, DType::f64, 61000 + t), gb = random_tensor({5}, DType::f64, 62000 + t);
        m.w_.set_grad(gw);
        m.b_.set_grad(gb);
        opt.step();
        oracle_step(c, ew, gw.to_vector<double>(), sw, t);
        oracle_step(plain, eb, gb.to_vector<double>(), sb, t);
      }
      EXPECT_TRUE(close(m.w_, Tensor::from_vector(ew, {3, 5}), 1e-13));
      EXPECT_TRUE(close(m.b_, Tensor::from_vector(eb, {5}), 1e-13));
    }
}

TEST(NnAdaptiveOptim, BadConfigurationsNameTheOptimizerAndTheArgument) {
  TwoParams m;
  const auto make = [&](nn::OptimizerConfig c, double group_decay = 0.0) {
    nn::Optimizer(c, nn::param_groups(m, group_decay, false), nn::make_step_kernels(DispatchMode::direct, "reference"));
  };
  nn::OptimizerConfig c;
  c.kind = nn::OptimizerKind::rmsprop;
  c.lr = -0.01;
  EXPECT_STRATA_ERROR(make(c), "optimizer rmsprop", "lr", ">= 0", "-0.01");
  c.lr = 0.01, c.rmsprop.alpha = 1.0;
  EXPECT_STRATA_ERROR(make(c), "optimizer rmsprop", "alpha", "[0, 1)");
  c.rmsprop.alpha = 0.99, c.rmsprop.eps = -1e-8;
  EXPECT_STRATA_ERROR(make(c), "optimizer rmsprop", "eps");
  c.rmsprop.eps = 1e-8, c.rmsprop.momentum = -0.5;
  EXPECT_STRATA_ERROR(make(c), "optimizer rmsprop", "momentum");
  c.rmsprop.momentum = 0.0;
  EXPECT_STRATA_ERROR(make(c, -1e-4), "optimizer rmsprop", "weight_decay");  // a group's
  c.kind = nn::OptimizerKind::adagrad;
  c.adagrad.initial_accumulator_value = -0.1;
  EXPECT_STRATA_ERROR(make(c), "optimizer adagrad", "initial_accumulator_value");
  c.adagrad.initial_accumulator_value = 0.0, c.adagrad.lr_decay = -1;
  EXPECT_STRATA_ERROR(make(c), "optimizer adagrad", "lr_decay");
  c.kind = nn::OptimizerKind::adadelta;
  c.adadelta.rho = 1.1;
  EXPECT_STRATA_ERROR(make(c), "optimizer adadelta", "rho", "[0, 1]");
  c.adadelta.rho = 0.9, c.adadelta.eps = -1;
  EXPECT_STRATA_ERROR(make(c), "optimizer adadelta", "eps");
}

// PyTorch's state keys, Adagrad's sum starting at initial_accumulator_value, and a state
// missing a tensor refused with what it needs.
TEST(NnAdaptiveOptim, StateDictNamesAndChecks) {
  for (const AdaptiveCase& c : adaptive_cases()) {
    SCOPED_TRACE(c.name);
    TwoParams m;
    nn::Optimizer opt(config_of(c), nn::param_groups(m, 0.0, false),
                      nn::make_step_kernels(DispatchMode::direct, "reference"));
    EXPECT_TRUE(opt.state_dict().empty()) << "no state before a step";
    m.w_.set_grad(random_tensor({3, 5}, DType::f64, 63000));
    opt.step();  // b has no gradient: no state
    std::vector<std::string> keys;
    for (const auto& [n, t] : opt.state_dict()) keys.push_back(n);
    std::vector<std::string> want;
    for (const nn::Optimizer::StateSpec& s : opt.state_specs()) want.push_back("w." + s.name);
    want.push_back("w.step");
    EXPECT_EQ(keys, want);
    if (c.kind == Adaptive::rmsprop) {
      const size_t n = 1 + (c.rmsprop.momentum != 0) + c.rmsprop.centered;
      EXPECT_EQ(want.size(), n + 1);
      EXPECT_EQ(want[0], "w.square_avg");
      if (c.rmsprop.centered) {
        EXPECT_EQ(want[n - 1], "w.grad_avg");
      }
      if (c.rmsprop.momentum != 0) {
        EXPECT_EQ(want[1], "w.momentum_buffer");
      }
    }
    if (c.kind == Adaptive::adagrad) {
      EXPECT_EQ(want, (std::vector<std::string>{"w.sum", "w.step"}));
      const auto sum = opt.state_dict()[0].second.to_vector<double>();
      const auto g = random_tensor({3, 5}, DType::f64, 63000).to_vector<double>();
      EXPECT_DOUBLE_EQ(sum[4], c.init + g[4] * g[4]);
    }
    if (c.kind == Adaptive::adadelta) {
      EXPECT_EQ(want, (std::vector<std::string>{"w.square_avg", "w.acc_delta", "w.step"}));
    }
    nn::StateDict partial = opt.state_dict();
    partial.erase(partial.begin());
    const std::string incomplete = "incomplete " + std::string(nn::optimizer_kind_name(config_of(c).kind)) +
                                   " state for 'w'";
    EXPECT_STRATA_ERROR(opt.load_state_dict(partial), "optimizer load_state_dict", incomplete.c_str());
  }
}

// Two steps, a checkpoint, and two more: a fresh model and optimizer (another dispatch
// mode) loaded from it end bitwise where the uninterrupted run does.
TEST(NnAdaptiveOptim, CheckpointResumesBitwise) {
  const nn::ResNetConfig rc = tiny_resnet(18);
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 1);
  const Tensor y = random_labels(2, 10, 2);
  for (const AdaptiveCase& c : adaptive_cases()) {
    if (c.name == "rmsprop" || c.name == "adagrad" || c.name == "adadelta") continue;  // their richer variants
    SCOPED_TRACE(c.name);
    TempDir dir;
    const std::string path = dir.file("ckpt.safetensors");
    nn::OptimizerConfig oc = config_of(c);
    oc.no_decay_bn_bias = true;
    auto a = nn::make_resnet(rc, DispatchMode::direct, "reference");
    auto opt_a = a->make_optimizer(oc);
    for (int s = 0; s < 2; ++s) a->train_step(x, y, *opt_a);
    nn::save_checkpoint(path, a->module(), opt_a.get(), 2);
    auto b = nn::make_resnet(rc, DispatchMode::virtual_call, "reference");  // fresh weights
    auto opt_b = b->make_optimizer(oc);
    nn::load_checkpoint(path, b->module(), opt_b.get());
    for (int s = 0; s < 2; ++s) {
      a->train_step(x, y, *opt_a);
      b->train_step(x, y, *opt_b);
    }
    const auto ra = a->state_dict(), rb = b->state_dict();
    for (size_t i = 0; i < ra.size(); ++i) EXPECT_TRUE(bitwise_equal(ra[i].second, rb[i].second)) << ra[i].first;
    const auto oa = opt_a->state_dict(), ob = opt_b->state_dict();
    ASSERT_EQ(oa.size(), ob.size());
    EXPECT_FALSE(oa.empty());
    for (size_t i = 0; i < oa.size(); ++i) {
      EXPECT_EQ(oa[i].first, ob[i].first);
      EXPECT_TRUE(bitwise_equal(oa[i].second, ob[i].second)) << oa[i].first;
    }
  }
}

}  // namespace
}  // namespace strata::testing
