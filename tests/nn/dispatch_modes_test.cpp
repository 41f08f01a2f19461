// Whole networks, forward and backward, in the three dispatch modes on the reference
// backend: loss, logits, every parameter gradient and every buffer (BN running
// statistics) must be bitwise equal. Direct mode runs the modules' explicit backward
// (residual branches included), the tape modes autograd::backward.
#include <gtest/gtest.h>

#include "strata/backends/reference/reference_backend.h"
#include "strata/nn/layers/conv2d.h"
#include "nn_test_util.h"

namespace strata::testing {
namespace {

using nn::make_lenet;
using nn::make_resnet;

struct RunOptions {
  int steps = 1;
  bool zero_between = true;  // false: gradients accumulate over the steps
  bool eval = false;
};

template <class Make>
std::vector<StepOutputs> run_all_modes(Make make, const Tensor& x, const Tensor& y, RunOptions o = {}) {
  std::vector<StepOutputs> out;
  for (auto mode : kAllModes) {
    std::unique_ptr<nn::Model> m = make(mode);
    if (o.eval) m->eval();
    nn::StepResult r;
    for (int s = 0; s < o.steps; ++s) {
      if (o.zero_between) m->module().zero_grad();
      r = m->forward_loss(x, y);
      m->backward();
    }
    out.push_back(snapshot(*m, r));
  }
  return out;
}

void expect_all_equal(const std::vector<StepOutputs>& outs) {
  expect_bitwise(outs[0], outs[1], "virtual vs static");
  expect_bitwise(outs[0], outs[2], "virtual vs direct");
  EXPECT_GT(outs[0].loss.item(), 0.0);
}

TEST(NnDispatchModes, ResNet18BitwiseEqualAcrossModes) {
  nn::ResNetConfig c;
  c.depth = 18;
  c.num_classes = 10;
  c.small_input = true;
  c.init.seed = 3;
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 11);
  const Tensor y = random_labels(2, 10, 12);
  expect_all_equal(run_all_modes([&](auto mode) { return make_resnet(c, mode, "reference"); }, x, y));
}

TEST(NnDispatchModes, BottleneckResNetWithAccumulatedGradientsBitwiseEqual) {
  // Two backward passes without zeroing: direct mode must accumulate existing + new
  // through the backend's add, as the autograd engine does for leaves.
  const Tensor x = random_tensor({2, 3, 16, 16}, DType::f32, 21);
  const Tensor y = random_labels(2, 10, 22);
  nn::ResNetConfig c = tiny_resnet(50);
  c.small_input = false;
  RunOptions o;
  o.steps = 2;
  o.zero_between = false;
  expect_all_equal(run_all_modes([&](auto mode) { return make_resnet(c, mode, "reference"); }, x, y, o));
}

TEST(NnDispatchModes, EvalModeAndChannelsLastBitwiseEqual) {
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 31);
  const Tensor y = random_labels(2, 10, 32);
  RunOptions eval;
  eval.eval = true;
  expect_all_equal(run_all_modes([&](auto mode) { return make_resnet(tiny_resnet(18), mode, "reference"); }, x, y, eval));
  nn::ModelOptions cl;
  cl.memory_format = MemoryFormat::channels_last;
  expect_all_equal(
      run_all_modes([&](auto mode) { return make_resnet(tiny_resnet(34), mode, "reference", cl); }, x, y));
}

TEST(NnDispatchModes, F64ResNetBitwiseEqual) {
  nn::ResNetConfig c = tiny_resnet(18);
  c.dtype = DType::f64;
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f64, 41);
  const Tensor y = random_labels(2, 10, 42);
  expect_all_equal(run_all_modes([&](auto mode) { return make_resnet(c, mode, "reference"); }, x, y));
}

TEST(NnDispatchModes, LeNetKerasWithDropoutBitwiseEqual) {
  nn::LeNetConfig c;
  c.variant = nn::LeNetVariant::keras;
  c.init.seed = 7;
  c.dropout_seed = 99;
  const Tensor x = random_tensor({3, 1, 28, 28}, DType::f32, 51);
  const Tensor y = random_labels(3, 10, 52);
  RunOptions o;
  o.steps = 2;  // the dropout offsets advance identically in every mode
  auto outs = run_all_modes([&](auto mode) { return make_lenet(c, mode, "reference"); }, x, y, o);
  expect_all_equal(outs);
}

TEST(NnDispatchModes, LeNetTensorflowWithBceLossBitwiseEqual) {
  nn::LeNetConfig c;
  c.input_size = 12;  // keeps the 32/64-channel convs cheap
  c.num_classes = 4;
  nn::ModelOptions o;
  o.loss = nn::LossKind::bce_logits;
  const Tensor x = random_tensor({2, 1, 12, 12}, DType::f32, 61);
  const Tensor y = random_tensor({2, 4}, DType::f32, 62, 0.0, 1.0);
  expect_all_equal(run_all_modes([&](auto mode) { return make_lenet(c, mode, "reference", o); }, x, y));
}

TEST(NnDispatchModes, DirectModePlansOncePerInputShape) {
  auto m = make_resnet(tiny_resnet(18), ops::DispatchMode::direct, "reference");
  using Conv = nn::Conv2d<nn::Direct<backends::ReferenceBackend>>;
  Conv* stem = nullptr;
  for (auto& [name, mod] : m->module().named_modules())
    if (name == "conv1") stem = dynamic_cast<Conv*>(mod);
  ASSERT_NE(stem, nullptr);
  const Tensor y = random_labels(2, 10, 1);
  for (int i = 0; i < 3; ++i) {  // new input tensors each time: copied into the planned input
    m->forward_loss(random_tensor({2, 3, 8, 8}, DType::f32, 100 + i), y);
    m->backward();
  }
  EXPECT_EQ(stem->plans_made(), 1);
  m->eval();  // batch 1: BN needs the running statistics
  m->forward(random_tensor({1, 3, 8, 8}, DType::f32, 7));
  EXPECT_EQ(stem->plans_made(), 2);
  // Writing into the planned input buffer skips the copy and reuses the plan.
  Tensor buf = m->input_buffer(Shape{1, 3, 8, 8});
  copy_into(random_tensor({1, 3, 8, 8}, DType::f32, 8), buf);
  m->forward(buf);
  EXPECT_EQ(stem->plans_made(), 2);
}

TEST(NnDispatchModes, ModuleBackwardOutsideDirectModeIsAClearError) {
  auto m = make_resnet(tiny_resnet(18), ops::DispatchMode::virtual_call, "reference");
  EXPECT_STRATA_ERROR(m->module().backward(Tensor()), "direct mode", "autograd::backward");
  auto d = make_resnet(tiny_resnet(18), ops::DispatchMode::direct, "reference");
  EXPECT_STRATA_ERROR(d->module().backward(random_tensor({1, 10}, DType::f32, 1)), "no forward");
  EXPECT_STRATA_ERROR(make_resnet(tiny_resnet(18), ops::DispatchMode::direct, "no_such_backend"), "no_such_backend");
}

TEST(NnDispatchModes, GraphModeOnACpuBackendIsAClearError) {
  EXPECT_EQ(ops::parse_dispatch_mode("graph"), ops::DispatchMode::graph);
  EXPECT_EQ(ops::dispatch_mode_name(ops::DispatchMode::graph), "graph");
  EXPECT_STRATA_ERROR(make_resnet(tiny_resnet(18), ops::DispatchMode::graph, "reference"), "graph mode", "reference",
                      "does not capture graphs");
  EXPECT_STRATA_ERROR(ops::parse_dispatch_mode("graphs"), "graphs", "virtual, static, direct or graph");
}

}  // namespace
}  // namespace strata::testing
