// Fused training (ResNetConfig::fuse_train): a ResNet in training runs each batch norm with
// the ReLU and residual add after it as one batch norm call, and each backward with the
// ReLU's backward in the batch norm's. One training step must give the separate ops'
// loss, logits, gradients and running statistics — bitwise on the reference backend,
// which rounds each step as the separate ops do, within f32 rounding on the others — in
// every dispatch mode, and run no ReLU kernels.
#include <string>
#include <vector>

#include "eval_test_util.h"

namespace strata::testing {
namespace {

struct TracedStep {
  StepOutputs out;
  std::vector<std::string> ops;
};

TracedStep train_step(nn::Model& m, const Tensor& x, const Tensor& labels) {
  TracedStep t;
  nn::StepResult r;
  t.ops = traced([&] {
    m.module().zero_grad();
    r = m.forward_loss(x, labels);
    m.backward();
  });
  t.out = snapshot(m, r);
  return t;
}

TEST(NnFusedTraining, MatchesTheSeparateOpsInEveryModeWithoutReluKernels) {
  for_each_fusion_case([](const std::string& backend, nn::ResNetConfig c, ops::DispatchMode mode) {
    c.fuse_train = true;  // the CPU's default is off
    auto fused = nn::make_resnet(c, mode, backend);
    c.fuse_train = false;
    auto plain = nn::make_resnet(c, mode, backend);
    randomise_statistics(*fused, {plain.get()}, true);
    const Tensor x = random_tensor({3, 3, 9, 11}, DType::f32, 41);
    const Tensor labels = random_labels(3, 10, 42);
    for (int step = 0; step < 2; ++step) {  // the second: direct mode's plans reused
      const TracedStep f = train_step(*fused, x, labels), p = train_step(*plain, x, labels);
      if (backend == "reference") {
        expect_bitwise(f.out, p.out, "fused vs separate");
      } else {
        EXPECT_TRUE(close(f.out.loss, p.out.loss, 1e-5));
        for (size_t i = 0; i < f.out.grads.size(); ++i)
          EXPECT_TRUE(close(f.out.grads[i].second, p.out.grads[i].second, 1e-4)) << f.out.grads[i].first;
        for (size_t i = 0; i < f.out.state.size(); ++i)
          EXPECT_TRUE(close(f.out.state[i].second, p.out.state[i].second, 1e-5)) << f.out.state[i].first;
      }
      EXPECT_EQ(count(f.ops, "relu_fwd"), 0);
      EXPECT_EQ(count(f.ops, "relu_bwd"), 0);
      EXPECT_GT(count(p.ops, "relu_fwd"), 0);
      EXPECT_GT(count(p.ops, "relu_bwd"), 0);
      EXPECT_LT(count(f.ops, "add"), count(p.ops, "add"));  // the residual adds' forward
      EXPECT_EQ(count(f.ops, "batch_norm_fwd"), count(p.ops, "batch_norm_fwd"));
    }
  });
}

// The running statistics and the batch count move as without fusion over several steps
// with an optimizer, and training then evaluation switch between the fused forms.
TEST(NnFusedTraining, TrainsAsTheSeparateOpsWithAnOptimizerAndThenEvaluates) {
  for (ops::DispatchMode mode : {ops::DispatchMode::static_call, ops::DispatchMode::direct}) {
    SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)));
    nn::ResNetConfig c = tiny_resnet(50);
    c.fuse_train = true;
    auto fused = nn::make_resnet(c, mode, "reference");
    c.fuse_train = false;
    auto plain = nn::make_resnet(c, mode, "reference");
    nn::OptimizerConfig o;
    o.lr = 0.05;
    o.momentum = 0.9;
    auto opt_f = fused->make_optimizer(o), opt_p = plain->make_optimizer(o);
    const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 43);
    const Tensor labels = random_labels(2, 10, 44);
    nn::StepResult rf, rp;
    for (int step = 0; step < 3; ++step) {
      rf = fused->train_step(x, labels, *opt_f);
      rp = plain->train_step(x, labels, *opt_p);
    }
    expect_bitwise(snapshot(*fused, rf), snapshot(*plain, rp), "after 3 steps");
    fused->eval();
    plain->eval();
    Tensor yf, yp;
    traced_ops(*fused, x, yf);
    traced_ops(*plain, x, yp);
    EXPECT_TRUE(bitwise_equal(yf, yp));
  }
}

}  // namespace
}  // namespace strata::testing
