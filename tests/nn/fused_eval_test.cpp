// Fused evaluation (ResNetConfig::fuse_eval): a ResNet in eval mode with gradients off
// runs each batch norm with the ReLU and residual add after it as one batch norm call.
// It must give the separate ops' results — bitwise on the reference backend, which
// rounds each step as the separate ops do, within f32 rounding on the others — in every
// dispatch mode, run no separate ReLU or add kernels, and leave evaluation with gradients
// on to the separate ops (training has its own fusion, fused_train_test.cpp).
#include <cmath>
#include <string>
#include <vector>

#include "eval_test_util.h"
#include "strata/autograd/grad_mode.h"

namespace strata::testing {
namespace {

TEST(NnFusedEvaluation, MatchesTheSeparateOpsInEveryModeWithoutReluOrAddKernels) {
  for_each_fusion_case([](const std::string& backend, nn::ResNetConfig c, ops::DispatchMode mode) {
    c.fold_batch_norm = false;  // fused evaluation itself (folding, onednn's default, runs neither)
    auto fused = nn::make_resnet(c, mode, backend);
    c.fuse_eval = false;
    auto plain = nn::make_resnet(c, mode, backend);
    randomise_statistics(*fused, *plain);
    fused->eval();
    plain->eval();
    const Tensor x = random_tensor({2, 3, 9, 11}, DType::f32, 31);
    Tensor yf, yp;
    const std::vector<std::string> fused_ops = traced_ops(*fused, x, yf);
    const std::vector<std::string> plain_ops = traced_ops(*plain, x, yp);
    if (backend == "reference")
      EXPECT_TRUE(bitwise_equal(yf, yp));
    else
      EXPECT_TRUE(close(yf, yp, 1e-5));
    EXPECT_EQ(count(fused_ops, "relu_fwd"), 0);
    EXPECT_EQ(count(fused_ops, "add"), 0);
    EXPECT_GT(count(plain_ops, "relu_fwd"), 0);
    EXPECT_GT(count(plain_ops, "add"), 0);
    EXPECT_LT(fused_ops.size(), plain_ops.size());
    // The same models again (direct mode's plans reused).
    Tensor again;
    traced_ops(*fused, x, again);
    EXPECT_TRUE(bitwise_equal(again, yf));
  });
}

TEST(NnFusedEvaluation, EvaluationWithGradientsOnUsesTheSeparateOps) {
  for (ops::DispatchMode mode : {ops::DispatchMode::virtual_call, ops::DispatchMode::direct}) {
    SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)));
    auto m = nn::make_resnet(tiny_resnet(18), mode, "reference");
    const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 32);
    m->eval();
    const std::vector<std::string> names = traced([&] { m->forward(x); });  // gradients on: a backward may follow
    EXPECT_GT(count(names, "relu_fwd"), 0);
    // And a backward after it works.
    const Tensor labels = Tensor::from_vector<int64_t>({1, 2}, Shape{2});
    const nn::StepResult r = m->forward_loss(x, labels);
    m->backward();
    EXPECT_TRUE(std::isfinite(r.loss.item()));
  }
}

}  // namespace
}  // namespace strata::testing
