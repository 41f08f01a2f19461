// Batch-norm folding: when the folded copies are made, and that they follow every change to
// the parameters they are made from (a training step, a step in evaluation mode, weights
// written in place, an optimizer step alone, a load; mixed precision's copies too), while
// training and the state dict see only the unfolded parameters. Tolerance: kFoldTolF32.
#include <memory>
#include <string>
#include <vector>

#include "eval_test_util.h"
#include "strata/autograd/grad_mode.h"
#include "strata/backends/api/registry.h"

namespace strata::testing {
namespace {

// Training runs the unfolded convolutions and batch norms, bitwise as a model that never
// folded; back in evaluation the folded copy has followed the step.
// On every CPU backend and both layouts: onednn keeps folded weights re-laid out between
// predictions (ops::Conv2dFwdArgs::w_version), and must read them again after each fold.
TEST(NnFoldBatchNorm, TrainingUsesTheUnfoldedParametersAndEvaluationFollowsIt) {
  for (const std::string& backend : cpu_backends())
  for (MemoryFormat fmt : {MemoryFormat::contiguous, MemoryFormat::channels_last})
  for (ops::DispatchMode mode : {ops::DispatchMode::virtual_call, ops::DispatchMode::direct}) {
    SCOPED_TRACE(backend + " " + std::string(ops::dispatch_mode_name(mode)) +
                 (fmt == MemoryFormat::channels_last ? " channels-last" : ""));
    nn::ModelOptions o;
    o.memory_format = fmt;
    FoldPair p = make_fold_pair(18, mode, backend, o);
    const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 42);
    const Tensor labels = Tensor::from_vector<int64_t>({1, 7}, Shape{2});
    p.folded->eval();
    p.folded->predict(x);  // folded once before training
    nn::OptimizerConfig oc;
    oc.lr = 0.1;
    auto opt_f = p.folded->make_optimizer(oc), opt_p = p.plain->make_optimizer(oc);
    p.folded->train();
    p.plain->train();
    const nn::StepResult rf = p.folded->train_step(x, labels, *opt_f);
    const StepOutputs sf = snapshot(*p.folded, rf);
    const StepOutputs sp = snapshot(*p.plain, p.plain->train_step(x, labels, *opt_p));
    expect_bitwise(sf, sp, "train_step");
    p.folded->eval();
    p.plain->eval();
    EXPECT_TRUE(close(host(p.folded->predict(x)), host(p.plain->predict(x)), kFoldTolF32));
  }
}

// The folded copies are made at the first fold: a model that only trains holds none
// (they were made with the model, 90 MiB for ResNet-50 in f32 on top of a training step's
// peak), and entering evaluation makes them, in the weights' layout.
TEST(NnFoldBatchNorm, AModelThatOnlyTrainsHoldsNoFoldedCopies) {
  nn::ResNetConfig c = tiny_resnet(18);
  c.fold_batch_norm = true;
  auto m = nn::make_resnet(c, ops::DispatchMode::direct, "reference");
  const auto folded_convs = [&] {
    int n = 0;
    nn::with_policy(ops::DispatchMode::direct, "reference", [&](const auto& p) {
      using P = std::decay_t<decltype(p)>;
      for (auto& [name, mod] : m->module().named_modules())
        if (const auto* conv = dynamic_cast<const nn::Conv2d<P>*>(mod); conv && conv->folded_weight().defined()) ++n;
    });
    return n;
  };
  auto opt = m->make_optimizer({});
  m->train_step(random_tensor({2, 3, 8, 8}, DType::f32, 43), Tensor::from_vector<int64_t>({1, 7}, Shape{2}), *opt);
  EXPECT_EQ(folded_convs(), 0);
  m->eval();
  EXPECT_EQ(folded_convs(), 20) << "the stem, 2 per block and 3 downsamples of a ResNet-18";
}

// Fine-tuning with frozen batch norms: steps taken in evaluation mode (gradients on, so
// the unfolded path) change the weights; the next prediction folds them again.
TEST(NnFoldBatchNorm, StepsTakenInEvaluationModeAreFoldedAgain) {
  for (ops::DispatchMode mode : {ops::DispatchMode::static_call, ops::DispatchMode::direct}) {
    SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)));
    FoldPair p = make_fold_pair(50, mode, "reference");
    const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 43);
    const Tensor labels = Tensor::from_vector<int64_t>({3, 4}, Shape{2});
    p.folded->eval();
    p.plain->eval();
    const Tensor before = host(p.folded->predict(x));
    nn::OptimizerConfig oc;
    oc.lr = 0.01;
    auto opt_f = p.folded->make_optimizer(oc), opt_p = p.plain->make_optimizer(oc);
    p.folded->train_step(x, labels, *opt_f);
    p.plain->train_step(x, labels, *opt_p);
    const Tensor after = host(p.folded->predict(x));
    EXPECT_FALSE(close(after, before, 1e-3)) << "the step changed nothing the prediction sees";
    const Tensor want = host(p.plain->predict(x));
    EXPECT_TRUE(close(after, want, kFoldTolF32));
  }
}

// Weights written in place during evaluation, gradients off (weight surgery, pruning, a
// hand-made update), and an optimizer step taken with no forward before it: the next
// prediction folds them again, in every mode (Tensor::version).
TEST(NnFoldBatchNorm, WeightsWrittenInEvaluationAreFoldedAgain) {
  for (ops::DispatchMode mode : {ops::DispatchMode::static_call, ops::DispatchMode::direct}) {
    SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)));
    FoldPair p = make_fold_pair(18, mode, "reference");
    const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 44);
    p.folded->eval();
    p.plain->eval();
    Tensor before = host(p.folded->predict(x));
    autograd::NoGradGuard no_grad;
    const auto convs = [](nn::Model& m) {
      std::vector<Tensor> out;
      for (auto& [name, t] : m.module().named_parameters())
        if (name.find("conv") != std::string::npos) out.push_back(t);
      return out;
    };
    for (nn::Model* m : {p.folded.get(), p.plain.get()}) {
      uint64_t seed = 50;
      for (const Tensor& w : convs(*m)) copy_into(random_tensor(w.sizes(), DType::f32, seed++, -0.2, 0.2), w);
    }
    Tensor after = host(p.folded->predict(x));
    EXPECT_FALSE(close(after, before, 1e-3)) << "the written weights changed nothing the prediction sees";
    EXPECT_TRUE(close(after, host(p.plain->predict(x)), kFoldTolF32)) << "after copy_into";
    before = after;
    for (nn::Model* m : {p.folded.get(), p.plain.get()}) {
      uint64_t seed = 90;
      for (Tensor w : convs(*m)) w.set_grad(random_tensor(w.sizes(), DType::f32, seed++, -1.0, 1.0));
      nn::OptimizerConfig oc;
      oc.lr = 0.05;
      m->make_optimizer(oc)->step();
    }
    after = host(p.folded->predict(x));
    EXPECT_FALSE(close(after, before, 1e-3)) << "the step changed nothing the prediction sees";
    EXPECT_TRUE(close(after, host(p.plain->predict(x)), kFoldTolF32)) << "after an optimizer step alone";
  }
}

// Mixed precision: the folded parameters are kept in the compute dtype too, written at each
// fold (not converted at each forward), so a step or a load must reach them: the prediction
// after a training step differs from the one before and follows the unfolded model's, and so
// after loading other weights. f64 compute on the reference (any machine) and bf16 on the
// best CPU backend where it has bf16 convolutions.
TEST(NnFoldBatchNorm, MixedPrecisionCopiesFollowEachFold) {
  struct Case {
    std::string backend;
    DType compute;
    double tol;
  };
  std::vector<Case> cases = {{"reference", DType::f64, kFoldTolF32}};
  const std::string best(backends::registry().best(DeviceType::cpu));
  if (backends::registry().get(best).supports(ops::OpId::conv2d_fwd, DType::bf16))
    cases.push_back({best, DType::bf16, 3e-2});
  const auto f32 = [](const Tensor& t) {
    Tensor h = Tensor::empty(t.sizes(), DType::f32, Device::cpu());
    copy_into(t, h);
    return h;
  };
  for (const Case& k : cases)
    for (ops::DispatchMode mode : {ops::DispatchMode::virtual_call, ops::DispatchMode::direct}) {
      SCOPED_TRACE(k.backend + " " + std::string(dtype_name(k.compute)) + " " +
                   std::string(ops::dispatch_mode_name(mode)));
      nn::ModelOptions o;
      o.compute_dtype = k.compute;
      nn::ResNetConfig c = tiny_resnet(18);
      c.fold_batch_norm = true;
      auto folded = nn::make_resnet(c, mode, k.backend, o);
      c.fold_batch_norm = c.fuse_eval = false;
      auto plain = nn::make_resnet(c, mode, k.backend, o);
      randomise_statistics(*folded, {plain.get()}, true);
      const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 45);
      const Tensor labels = Tensor::from_vector<int64_t>({1, 7}, Shape{2});
      folded->eval();
      plain->eval();
      const Tensor before = f32(folded->predict(x));
      EXPECT_TRUE(close(before, f32(plain->predict(x)), k.tol));
      nn::OptimizerConfig oc;
      oc.lr = 0.1;
      auto opt_f = folded->make_optimizer(oc), opt_p = plain->make_optimizer(oc);
      folded->train();
      plain->train();
      folded->train_step(x, labels, *opt_f);
      plain->train_step(x, labels, *opt_p);
      folded->eval();
      plain->eval();
      const Tensor after = f32(folded->predict(x));
      EXPECT_FALSE(bitwise_equal(after, before)) << "the folded copies did not follow the step";
      EXPECT_TRUE(close(after, f32(plain->predict(x)), k.tol));
      nn::ResNetConfig oc18 = tiny_resnet(18, DType::f32, 78);
      oc18.fuse_eval = false;
      auto other = nn::make_resnet(oc18, mode, k.backend, o);
      randomise_statistics(*other, {}, true);
      folded->load_state_dict(other->state_dict());
      other->eval();
      EXPECT_TRUE(close(f32(folded->predict(x)), f32(other->predict(x)), k.tol));
    }
}

// The state dict holds the unfolded parameters only (a checkpoint of a folded model is
// the user's weights), and loading one into a folded model in evaluation folds it.
TEST(NnFoldBatchNorm, StateDictKeepsTheUnfoldedWeightsAndLoadingFoldsThem) {
  for (ops::DispatchMode mode : kAllModes) {
    SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)));
    FoldPair p = make_fold_pair(18, mode, "reference");
    const Tensor x = random_tensor({1, 3, 8, 8}, DType::f32, 44);
    p.folded->eval();
    p.folded->predict(x);
    const nn::StateDict sf = p.folded->state_dict(), sp = p.plain->state_dict();
    ASSERT_EQ(sf.size(), sp.size());
    for (size_t i = 0; i < sf.size(); ++i) {
      EXPECT_EQ(sf[i].first, sp[i].first);
      EXPECT_TRUE(bitwise_equal(sf[i].second, sp[i].second)) << sf[i].first;
    }
    // Other weights, loaded while folded and in evaluation.
    nn::ResNetConfig c = tiny_resnet(18, DType::f32, 77);
    c.fuse_eval = false;
    auto other = nn::make_resnet(c, mode, "reference");
    randomise_statistics(*other, {}, true);
    p.folded->load_state_dict(other->state_dict());
    other->eval();
    EXPECT_TRUE(close(host(p.folded->predict(x)), host(other->predict(x)), kFoldTolF32));
  }
}

}  // namespace
}  // namespace strata::testing
