// The type-erased model over user-written networks (nn::make_model): a Sequential and
// a user's own Module train in the three dispatch modes with bitwise-equal results,
// describe themselves, checkpoint and resume, and fail clearly where they cannot run.
#include <gtest/gtest.h>

#include <cmath>

#include "strata/core/factories.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/custom_model.h"
#include "strata/nn/layers/blocks.h"
#include "strata/nn/layers/factories.h"
#include "nn_test_util.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

auto mlp = [](const auto& p) { return nn::sequential(nn::linear(p, 6, 16), nn::relu(p), nn::linear(p, 16, 3)); };

// A user's own network: a convolutional feature extractor and a classifier, with the
// explicit backward direct mode needs.
template <class P>
class SmallCnn final : public nn::Module {
 public:
  explicit SmallCnn(const P& p)
      : features_(register_module("features", nn::sequential(nn::conv2d(p, 1, 4, 3, {.padding = 1}),
                                                             nn::batch_norm2d(p, 4), nn::relu(p),
                                                             nn::max_pool2d(p, 2), nn::flatten(p)))),
        fc_(register_module("fc", nn::linear(p, 4 * 4 * 4, 5))) {}
  std::string_view type_name() const override { return "SmallCnn"; }
  Tensor forward(const Tensor& x) override { return fc_.forward(features_.forward(x)); }
  Tensor backward(const Tensor& dy) override { return features_.backward(fc_.backward(dy)); }
  void set_input_grad(bool on) override { features_.set_input_grad(on); }

 private:
  nn::Sequential& features_;
  nn::Linear<P>& fc_;
};

// A network that is not a chain: a residual block, y = x + fc2(relu(fc1(x))), between two linear
// layers. Its direct-mode backward sums the identity's and the branch's gradients in the tape's
// order (identity first) through nn::ResidualAdd, so every mode agrees bit for bit.
template <class P>
class ResidualMlp final : public nn::Module {
 public:
  explicit ResidualMlp(const P& p)
      : in_(register_module("in", nn::linear(p, 6, 16))),
        fc1_(register_module("fc1", nn::linear(p, 16, 16))),
        relu_(register_module("relu", nn::relu(p))),
        fc2_(register_module("fc2", nn::linear(p, 16, 16))),
        out_(register_module("out", nn::linear(p, 16, 3))),
        add_(p) {}
  std::string_view type_name() const override { return "ResidualMlp"; }
  Tensor forward(const Tensor& x) override {
    const Tensor h = in_.forward(x);
    return out_.forward(add_.forward(fc2_.forward(relu_.forward(fc1_.forward(h))), h));
  }
  Tensor backward(const Tensor& dy) override {
    const Tensor g = out_.backward(dy);
    return in_.backward(add_.accumulate(g, fc1_.backward(relu_.backward(fc2_.backward(g)))));
  }
  void set_input_grad(bool on) override { in_.set_input_grad(on); }

 private:
  nn::Linear<P>& in_;
  nn::Linear<P>& fc1_;
  nn::ReLU<P>& relu_;
  nn::Linear<P>& fc2_;
  nn::Linear<P>& out_;
  nn::ResidualAdd<P> add_;
};

// Three SGD steps with momentum from the same initial weights in every mode.
template <class Make>
std::vector<StepOutputs> train_all_modes(Make make, const Tensor& x, const Tensor& y) {
  std::vector<StepOutputs> out;
  for (auto mode : kAllModes) {
    std::unique_ptr<nn::Model> m = make(mode);
    auto opt = m->make_optimizer({.lr = 0.1, .momentum = 0.9});
    nn::StepResult r;
    for (int s = 0; s < 3; ++s) r = m->train_step(x, y, *opt);
    out.push_back(snapshot(*m, r));
  }
  expect_bitwise(out[0], out[1], "virtual vs static");
  expect_bitwise(out[0], out[2], "virtual vs direct");
  return out;
}

TEST(NnCustomModel, AResidualBlockTrainsBitwiseEqualInEveryMode) {
  Generator g(3);
  const Tensor x = randn({8, 6}, g);
  const Tensor y = randint(0, 3, {8}, g);
  const auto out = train_all_modes(
      [&](DispatchMode mode) {
        manual_seed(11);
        return nn::make_model<ResidualMlp>(mode, "reference");
      },
      x, y);
  EXPECT_TRUE(std::isfinite(out[0].loss.item()));
}

TEST(NnCustomModel, SequentialTrainsBitwiseEqualInEveryMode) {
  Generator g(1);
  const Tensor x = randn({8, 6}, g);
  const Tensor y = randint(0, 3, {8}, g);
  const auto out = train_all_modes(
      [&](DispatchMode mode) {
        manual_seed(7);  // the layers' construction-time values, the same in every mode
        return nn::make_model(mlp, mode, "reference");
      },
      x, y);
  EXPECT_GT(out[0].loss.item(), 0.0);
}

TEST(NnCustomModel, UsersOwnModuleTrainsBitwiseEqualInEveryMode) {
  const Tensor x = random_tensor({4, 1, 8, 8}, DType::f32, 3);
  const Tensor y = random_labels(4, 5, 4);
  nn::ModelOptions o;
  o.init = nn::InitConfig{nn::InitPolicy::kaiming_normal_fan_out, false, 11};
  train_all_modes([&](DispatchMode mode) { return nn::make_model<SmallCnn>(mode, "reference", o); }, x, y);
}

TEST(NnCustomModel, LossFallsOnALearnableProblem) {
  // Labels from a random linear teacher: learnable by the MLP.
  Generator g(2);
  const Tensor x = randn({64, 6}, g);
  const Tensor teacher = randn({6, 3}, g);
  std::vector<int64_t> labels;
  const auto xv = x.to_vector<float>(), tv = teacher.to_vector<float>();
  for (int i = 0; i < 64; ++i) {
    int64_t best = 0;
    float best_v = -INFINITY;
    for (int c = 0; c < 3; ++c) {
      float s = 0;
      for (int k = 0; k < 6; ++k) s += xv[static_cast<size_t>(i * 6 + k)] * tv[static_cast<size_t>(k * 3 + c)];
      if (s > best_v) best_v = s, best = c;
    }
    labels.push_back(best);
  }
  const Tensor y = from_vector(labels);
  auto m = nn::make_model(mlp, DispatchMode::direct);
  auto opt = m->make_optimizer({.lr = 0.5});
  const double first = m->train_step(x, y, *opt).loss.item();
  double last = first;
  for (int s = 0; s < 100; ++s) last = m->train_step(x, y, *opt).loss.item();
  EXPECT_LT(last, 0.5 * first) << first << " -> " << last;
  m->eval();
  EXPECT_EQ(m->predict(x).sizes(), (Shape{64, 3}));
}

TEST(NnCustomModel, BackendDefaultsToTheBestAndDescribeNamesEverything) {
  manual_seed(4);
  auto m = nn::make_model(mlp, DispatchMode::static_call);
  EXPECT_EQ(m->backend_name(), backends::registry().best());
  EXPECT_EQ(m->dtype(), DType::f32);
  EXPECT_EQ(m->num_parameters(), 6 * 16 + 16 + 16 * 3 + 3);
  const std::string& d = m->describe();
  for (const char* part : {"Sequential(Linear, ReLU, Linear)", "163 parameters",
                           "init pytorch_default at construction (default generator seeded 4)", "dispatch static on",
                           "loss cross_entropy"})
    EXPECT_NE(d.find(part), std::string::npos) << d << " lacks " << part;
  nn::ModelOptions o;
  o.init = nn::InitConfig{nn::InitPolicy::xavier_uniform, false, 3};
  auto x = nn::make_model<SmallCnn>(DispatchMode::direct, "reference", o);
  EXPECT_NE(x->describe().find("SmallCnn(Sequential, Linear) | 373 parameters | init xavier_uniform (seed 3)"),
            std::string::npos)
      << x->describe();
}

TEST(NnCustomModel, CheckpointsResumeAcrossModes) {
  TempDir dir;
  const std::string path = dir.file("cnn.safetensors");
  const Tensor x = random_tensor({4, 1, 8, 8}, DType::f32, 5);
  const Tensor y = random_labels(4, 5, 6);
  nn::OptimizerConfig oc{.lr = 0.05, .momentum = 0.9};
  auto a = nn::make_model<SmallCnn>(DispatchMode::direct, "reference");
  auto opt_a = a->make_optimizer(oc);
  for (int s = 0; s < 2; ++s) a->train_step(x, y, *opt_a);
  nn::save_checkpoint(path, a->module(), opt_a.get(), 2);
  const Tensor next_a = a->train_step(x, y, *opt_a).loss.clone();

  manual_seed(123);  // other construction-time values: the checkpoint must replace them all
  auto b = nn::make_model<SmallCnn>(DispatchMode::virtual_call, "reference");
  auto opt_b = b->make_optimizer(oc);
  EXPECT_EQ(nn::load_checkpoint(path, b->module(), opt_b.get()).step, 2);
  EXPECT_TRUE(bitwise_equal(b->train_step(x, y, *opt_b).loss, next_a));
}

TEST(NnCustomModel, WhatCannotRunIsAClearError) {
  EXPECT_STRATA_ERROR(nn::make_model([](const auto&) { return std::unique_ptr<nn::Module>(); }),
                      "make_model", "returned no module");
  EXPECT_STRATA_ERROR(nn::make_model([](const auto& p) {
                        return nn::sequential(nn::linear(p, 4, 4), nn::linear(p, 4, 2, {.dtype = DType::f64}));
                      }),
                      "make_model", "one dtype", "0.weight is f32", "1.weight is f64");
  EXPECT_STRATA_ERROR(nn::make_model(mlp, DispatchMode::virtual_call, "tpu"), "'tpu'", "not built");
  nn::ModelOptions o;
  o.init = nn::InitConfig{};
  EXPECT_STRATA_ERROR(nn::make_lenet({}, DispatchMode::virtual_call, "reference", o), "make_lenet",
                      "LeNetConfig::init");
  // A user's module without backward() runs in the tape modes, and says why not in direct mode.
  auto no_backward = [](const auto& p) {
    struct Net final : nn::Module {
      explicit Net(const std::decay_t<decltype(p)>& q) : fc(register_module("fc", nn::linear(q, 4, 2))) {}
      std::string_view type_name() const override { return "NoBackward"; }
      Tensor forward(const Tensor& x) override { return fc.forward(x); }
      nn::Module& fc;
    };
    return std::make_unique<Net>(p);
  };
  const Tensor x = random_tensor({2, 4}, DType::f32, 1);
  const Tensor y = random_labels(2, 2, 2);
  auto tape = nn::make_model(no_backward, DispatchMode::static_call, "reference");
  auto opt = tape->make_optimizer({});
  EXPECT_GT(tape->train_step(x, y, *opt).loss.item(), 0.0);
  auto direct = nn::make_model(no_backward, DispatchMode::direct, "reference");
  auto opt_d = direct->make_optimizer({});
  EXPECT_STRATA_ERROR(direct->train_step(x, y, *opt_d), "NoBackward", "no explicit backward");
}

}  // namespace
}  // namespace strata::testing

namespace strata::testing {
namespace {

// What predict and train_step return is the caller's in direct mode: the next call does not
// change it. With borrowed_results the planned buffers come back instead, and the next call
// writes over them (the documented opt-in for those who measure that copy).
TEST(NnCustomModel, DirectModeResultsAreTheCallersUnlessBorrowed) {
  Generator g(9);
  const Tensor x1 = randn({4, 6}, g), x2 = randn({4, 6}, g);
  const Tensor y = randint(0, 3, {4}, g);
  for (bool borrowed : {false, true}) {
    manual_seed(5);
    nn::ModelOptions o;
    o.borrowed_results = borrowed;
    auto m = nn::make_model(mlp, DispatchMode::direct, "reference", o);
    m->eval();
    m->predict(x1);  // plans the step: later calls run in its buffers
    const Tensor p1 = m->predict(x1);
    const std::vector<float> before = p1.to_vector<float>();
    const Tensor p2 = m->predict(x2);
    if (borrowed)
      EXPECT_EQ(p1.to_vector<float>(), p2.to_vector<float>()) << "a borrowed result is the planned buffer";
    else
      EXPECT_EQ(p1.to_vector<float>(), before) << "an owned result kept its values";
    m->train();
    auto opt = m->make_optimizer({.lr = 0.1});
    const nn::StepResult r1 = m->train_step(x1, y, *opt);
    const double loss1 = r1.loss.item();
    m->train_step(x2, y, *opt);
    if (!borrowed) {
      EXPECT_EQ(r1.loss.item(), loss1);
    }
  }
}

// Cross-entropy's labels are class indices: floating or negative labels are refused, naming the
// dtype or the value, never truncated.
TEST(NnCustomModel, LabelsThatAreNotClassIndicesAreRefused) {
  auto m = nn::make_model(mlp, DispatchMode::direct, "reference");
  auto opt = m->make_optimizer({.lr = 0.1});
  const Tensor x = randn({3, 6});
  EXPECT_STRATA_ERROR(m->train_step(x, Tensor::from_vector<float>({0, 1.5f, 2}, {3}), *opt), "cross_entropy",
                      "integer dtype", "f32", "1.5", "position 1");
  EXPECT_STRATA_ERROR(m->train_step(x, Tensor::from_vector<int64_t>({0, -1, 2}, {3}), *opt), "label -1",
                      "position 1", "negative");
}

}  // namespace
}  // namespace strata::testing
