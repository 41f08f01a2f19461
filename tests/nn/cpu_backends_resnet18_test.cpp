// A ResNet-18 training step (forward, loss, backward: BN in training mode, residual
// gradients, 20 convolutions) on each production CPU backend, in each dispatch mode,
// against the same step on the reference backend: identical initial weights and batch,
// then the loss, the logits and every parameter gradient compared as a relative L2
// error. Per-op tests cannot catch what only a whole network exercises (a stride or
// layout mix-up between ops, a cached plan reused for the wrong shape). Within one
// backend the three modes must agree bitwise.
#include <cmath>
#include <string>

#include "strata/backends/api/registry.h"
#include "nn_test_util.h"

namespace strata::testing {
namespace {

nn::ResNetConfig resnet18() {
  nn::ResNetConfig c;
  c.depth = 18;
  c.num_classes = 10;
  c.small_input = true;  // 3x3 stem, no max-pool: the Fashion-MNIST/CIFAR model
  c.init.seed = 7;
  return c;
}

StepOutputs step(const std::string& backend, ops::DispatchMode mode, const Tensor& x, const Tensor& y) {
  auto m = nn::make_resnet(resnet18(), mode, backend);
  const nn::StepResult r = m->forward_loss(x, y);
  m->backward();
  return snapshot(*m, r);
}

class CpuBackendResNet18Step : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuBackendResNet18Step, MatchesTheReferenceAndIsBitwiseEqualAcrossModes) {
  const std::string backend = GetParam();
  if (!backends::registry().find(backend)) GTEST_SKIP() << backend << " is not built";
  // Batch 4 at 16x16: layer4 sees 2x2 maps, so BN there normalises 16 values per
  // channel; odd channel counts are not possible in ResNet-18, odd sizes come from
  // the stride-2 convolutions of 16 -> 8 -> 4 -> 2.
  const Tensor x = random_tensor({4, 3, 16, 16}, DType::f32, 31);
  const Tensor y = random_labels(4, 10, 32);
  const StepOutputs ref = step("reference", ops::DispatchMode::static_call, x, y);

  std::vector<StepOutputs> outs;
  for (auto mode : kAllModes) outs.push_back(step(backend, mode, x, y));
  expect_bitwise(outs[0], outs[1], backend + ": virtual vs static");
  expect_bitwise(outs[0], outs[2], backend + ": virtual vs direct");

  const StepOutputs& got = outs[1];
  const double lr = ref.loss.item(), lg = got.loss.item();
  EXPECT_NEAR(lg, lr, 1e-5 * std::abs(lr)) << "loss";
  EXPECT_LT(relative_error(got.logits, ref.logits), 1e-5) << "logits";
  ASSERT_EQ(got.grads.size(), ref.grads.size());
  // f32 against the reference's f64 accumulation: measured worst case 3.5e-6 on onednn
  // and openblas (layer4's BN weight: batch statistics over 16 values amplify reordered
  // sums), 5.9e-6 on eigen (layer4's conv weight: f32 batch-norm statistics); 1e-4
  // leaves room for another kernel choice, a wrong gradient is off by O(1).
  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    SCOPED_TRACE(ref.grads[i].first);
    ASSERT_EQ(got.grads[i].first, ref.grads[i].first);
    ASSERT_TRUE(got.grads[i].second.defined() && ref.grads[i].second.defined());
    const double e = relative_error(got.grads[i].second, ref.grads[i].second);
    EXPECT_LT(e, 1e-4) << "gradient of " << ref.grads[i].first;
    if (e > worst) worst = e, worst_name = ref.grads[i].first;
  }
  // Buffers after the step: BN running statistics updated from the batch.
  ASSERT_EQ(got.state.size(), ref.state.size());
  for (size_t i = 0; i < ref.state.size(); ++i)
    EXPECT_LT(relative_error(got.state[i].second, ref.state[i].second), 1e-5) << ref.state[i].first;
  std::printf("[ %s ] loss %.8f (reference %.8f), worst gradient relative L2 error %.2e (%s) over %zu tensors\n",
              backend.c_str(), lg, lr, worst, worst_name.c_str(), ref.grads.size());
}

INSTANTIATE_TEST_SUITE_P(Backends, CpuBackendResNet18Step, ::testing::Values("onednn", "openblas", "eigen"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace strata::testing
