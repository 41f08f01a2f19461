// Batch-norm folding (ResNetConfig::fold_batch_norm): a ResNet in evaluation with
// gradients off runs each convolution with the batch norm after it folded into its
// weights and bias, and the ReLU and residual add in the same call (the conv2d epilogue).
// Stated tolerance, f32: relative error 1e-5 against the unfolded model's separate ops
// (the folded weights are rounded once to f32, and the convolution sums them in another
// order); bf16 is checked on the GPU (tests/cuda). Folding keeps the unfolded parameters:
// training, evaluation with gradients on and the state dict see only them, and the folded
// copy follows every change to them.
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eval_test_util.h"
#include "strata/autograd/functions.h"
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/node.h"
#include "strata/backends/api/registry.h"
#include "strata/backends/reference/reference_backend.h"
#include "strata/ops/direct/plans.h"

namespace strata::testing {
namespace {

constexpr double kTolF32 = 1e-5;

std::vector<std::string> cpu_backends() {
  std::vector<std::string> out = {"reference"};
  const std::string best(backends::registry().best(DeviceType::cpu));
  if (best != "reference") out.push_back(best);
  return out;
}

struct Pair {
  std::unique_ptr<nn::Model> folded, plain;
};
// The same ResNet twice, with non-trivial batch norms: folded, and with every op separate.
Pair make_pair(int depth, ops::DispatchMode mode, const std::string& backend, const nn::ModelOptions& o = {}) {
  nn::ResNetConfig c = tiny_resnet(depth);
  c.fold_batch_norm = true;
  Pair p{nn::make_resnet(c, mode, backend, o), nullptr};
  c.fold_batch_norm = false;
  c.fuse_eval = false;
  p.plain = nn::make_resnet(c, mode, backend, o);
  randomise_statistics(*p.folded, {p.plain.get()}, true);
  return p;
}

// The same ResNet twice, `option` on in the first and off in the second.
struct Twins {
  std::unique_ptr<nn::Model> on, off;
};
Twins twins(nn::ResNetConfig c, std::optional<bool> nn::ResNetConfig::*option, ops::DispatchMode mode,
            const std::string& backend, const nn::ModelOptions& o = {}) {
  c.*option = true;
  Twins t{nn::make_resnet(c, mode, backend, o), nullptr};
  c.*option = false;
  t.off = nn::make_resnet(c, mode, backend, o);
  return t;
}

Tensor host(const Tensor& t) {
  Tensor h = Tensor::empty(t.sizes(), t.dtype(), Device::cpu());
  copy_into(t, h);
  return h;
}

TEST(NnFoldBatchNorm, MatchesTheUnfoldedModelInEveryModeWithOnlyConvolutions) {
  for (const std::string& backend : cpu_backends()) {
    for (int depth : {18, 50}) {
      for (ops::DispatchMode mode : kAllModes) {
        SCOPED_TRACE(backend + " ResNet-" + std::to_string(depth) + " " + std::string(ops::dispatch_mode_name(mode)));
        Pair p = make_pair(depth, mode, backend);
        p.folded->eval();
        p.plain->eval();
        const Tensor x = random_tensor({2, 3, 9, 11}, DType::f32, 41);
        Tensor yf, yp;
        const std::vector<std::string> folded_ops = traced_ops(*p.folded, x, yf);
        const std::vector<std::string> plain_ops = traced_ops(*p.plain, x, yp);
        EXPECT_TRUE(close(yf, yp, kTolF32));
        EXPECT_FALSE(bitwise_equal(yf, yp)) << "the folded model ran the unfolded ops";
        for (const char* gone : {"batch_norm_fwd", "relu_fwd", "add"}) {
          EXPECT_EQ(count(folded_ops, gone), 0) << gone;
          EXPECT_GT(count(plain_ops, gone), 0) << gone;
        }
        EXPECT_EQ(count(folded_ops, "conv2d_fwd"), count(plain_ops, "conv2d_fwd"));
        // The same model again (direct mode's plans reused): the same bits.
        Tensor again;
        traced_ops(*p.folded, x, again);
        EXPECT_TRUE(bitwise_equal(again, yf));
      }
    }
  }
}

// ResNetConfig::residual_in_place: on a backend that accumulates a residual in place
// (onednn), each block's last convolution writes over its residual instead of copying it
// into a new output first. The predictions are bitwise those of the copying model in every
// mode, channels-last and not, called again (direct mode's plans), and the caller's input is
// untouched; a block told so (ResNet tells its own) returns its input's storage, one that
// was not told leaves its input alone.
TEST(NnFoldBatchNorm, ResidualsAccumulatedInPlaceAreTheCopiedOnes) {
  const std::string best(backends::registry().best(DeviceType::cpu));
  if (!backends::registry().get(best).capabilities().accumulates_residual_in_place())
    GTEST_SKIP() << best << " does not accumulate a residual in place";
  const bool bf16 = backends::registry().get(best).supports(ops::OpId::conv2d_fwd, DType::bf16);
  for (MemoryFormat fmt : {MemoryFormat::contiguous, MemoryFormat::channels_last})
    for (ops::DispatchMode mode : kAllModes)
      for (DType compute : {DType::f32, DType::bf16}) {
        if (compute == DType::bf16 && !bf16) continue;  // mixed precision where the CPU has bf16
        SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)) +
                     (fmt == MemoryFormat::channels_last ? " channels-last " : " contiguous ") +
                     std::string(dtype_name(compute)));
        nn::ModelOptions o;
        o.memory_format = fmt;
        if (compute == DType::bf16) o.compute_dtype = compute;
        nn::ResNetConfig c = tiny_resnet(50);
        c.fold_batch_norm = true;
        auto [in_place, copied] = twins(c, &nn::ResNetConfig::residual_in_place, mode, best, o);
        randomise_statistics(*in_place, {copied.get()}, true);
        EXPECT_NE(in_place->describe().find("residuals accumulated in place"), std::string::npos);
        EXPECT_EQ(copied->describe().find("residuals accumulated in place"), std::string::npos);
        in_place->eval();
        copied->eval();
        const Tensor x = random_tensor({2, 3, 9, 11}, DType::f32, 43), x_before = host(x);
        const Tensor want = host(copied->predict(x));
        for (int call = 0; call < 2; ++call) {
          EXPECT_TRUE(bitwise_equal(host(in_place->predict(x)), want)) << "call " << call;
          EXPECT_TRUE(bitwise_equal(x, x_before)) << "call " << call;
        }
      }
  // A block's own forward, in a tape mode: written over its input only when told so.
  nn::ResNetConfig c = tiny_resnet(50);
  c.fold_batch_norm = true;
  nn::ModelOptions o;
  o.memory_format = MemoryFormat::channels_last;
  auto m = nn::make_resnet(c, ops::DispatchMode::static_call, best, o);
  m->eval();
  autograd::NoGradGuard no_grad;
  nn::with_policy(ops::DispatchMode::static_call, best, [&](const auto& p) {
    using P = std::decay_t<decltype(p)>;
    nn::Bottleneck<P>* identity_block = nullptr;  // one without a downsample
    for (auto& [name, mod] : m->module().named_modules())
      if (auto* b = dynamic_cast<nn::Bottleneck<P>*>(mod); b && !b->downsample_conv()) identity_block = b;
    ASSERT_NE(identity_block, nullptr);
    EXPECT_TRUE(identity_block->residual_in_place());  // ResNet's default on this backend
    const int64_t ch = identity_block->branch_convs().front()->parameters().front().size(1);
    const Tensor x = random_tensor({1, ch, 5, 4}, DType::f32, 44, -1, 1, MemoryFormat::channels_last);
    const Tensor x_before = host(x);
    const Tensor y = identity_block->forward(x);
    EXPECT_EQ(y.data_ptr(), x.data_ptr()) << "the block did not write over its input";
    EXPECT_FALSE(bitwise_equal(x, x_before));
    identity_block->set_residual_in_place(false);
    const Tensor x2 = random_tensor({1, ch, 5, 4}, DType::f32, 45, -1, 1, MemoryFormat::channels_last);
    const Tensor x2_before = host(x2);
    const Tensor y2 = identity_block->forward(x2);
    EXPECT_NE(y2.data_ptr(), x2.data_ptr());
    EXPECT_TRUE(bitwise_equal(x2, x2_before)) << "a block not told so wrote over its input";
  });
}

// bf16 compute (mixed precision, f32 parameters) where the best CPU backend has bf16
// convolutions (onednn on AVX512_BF16): stated tolerance 3e-2, bf16's rounding of the folded
// weights and of each activation (the unfolded model rounds after the convolution, the batch
// norm's casts and the add).
TEST(NnFoldBatchNorm, Bf16WithinItsRounding) {
  const std::string best(backends::registry().best(DeviceType::cpu));
  if (!backends::registry().get(best).supports(ops::OpId::conv2d_fwd, DType::bf16))
    GTEST_SKIP() << best << " has no bf16 convolution on this CPU";
  nn::ModelOptions o;
  o.compute_dtype = DType::bf16;
  o.memory_format = MemoryFormat::channels_last;
  for (ops::DispatchMode mode : kAllModes) {
    SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)));
    nn::ResNetConfig c = tiny_resnet(50);
    c.fold_batch_norm = true;
    auto folded = nn::make_resnet(c, mode, best, o);
    c.fold_batch_norm = c.fuse_eval = false;
    auto plain = nn::make_resnet(c, mode, best, o);
    randomise_statistics(*folded, {plain.get()}, true);
    folded->eval();
    plain->eval();
    const Tensor x = random_tensor({2, 3, 9, 11}, DType::f32, 51);
    Tensor yf, yp;
    const std::vector<std::string> folded_ops = traced_ops(*folded, x, yf);
    traced_ops(*plain, x, yp);
    Tensor yf32 = Tensor::empty(yf.sizes(), DType::f32, Device::cpu()), yp32 = yf32.clone();
    copy_into(yf, yf32);
    copy_into(yp, yp32);
    EXPECT_TRUE(close(yf32, yp32, 3e-2));
    EXPECT_EQ(count(folded_ops, "batch_norm_fwd"), 0);
    EXPECT_EQ(count(folded_ops, "relu_fwd"), 0);
  }
}

// The space-to-depth stem (ResNetConfig::space_to_depth_stem): the folded ImageNet stem
// runs as ops::space_to_depth and a 4x4 stride-1 convolution over the 2x2 blocks, with
// the folded weight rearranged. The same model without it, within f32's rounding, in every
// mode and layout, odd sizes and batch 1; the trace shows the form ran.
TEST(NnFoldBatchNorm, SpaceToDepthStemMatchesTheStemInEveryMode) {
  for (const std::string& backend : cpu_backends())
  for (MemoryFormat fmt : {MemoryFormat::contiguous, MemoryFormat::channels_last})
  for (ops::DispatchMode mode : kAllModes)
  for (const Shape& xs : {Shape{2, 3, 19, 17}, Shape{1, 3, 16, 16}}) {
    SCOPED_TRACE(backend + " " + std::string(ops::dispatch_mode_name(mode)) +
                 (fmt == MemoryFormat::channels_last ? " channels-last " : " ") + xs.str());
    nn::ModelOptions o;
    o.memory_format = fmt;
    nn::ResNetConfig c = tiny_resnet(18);
    c.small_input = false;
    c.fold_batch_norm = true;
    c.winograd = false;
    auto [blocks, stem] = twins(c, &nn::ResNetConfig::space_to_depth_stem, mode, backend, o);
    randomise_statistics(*blocks, {stem.get()}, true);
    blocks->eval();
    stem->eval();
    const Tensor x = random_tensor(xs, DType::f32, 47);
    Tensor yb, ys;
    const std::vector<std::string> block_ops = traced_ops(*blocks, x, yb);
    const std::vector<std::string> stem_ops = traced_ops(*stem, x, ys);
    EXPECT_TRUE(close(yb, ys, kTolF32));
    EXPECT_EQ(count(block_ops, "space_to_depth_fwd"), 1);
    EXPECT_EQ(count(stem_ops, "space_to_depth_fwd"), 0);
    EXPECT_EQ(count(block_ops, "conv2d_fwd"), count(stem_ops, "conv2d_fwd"));
    Tensor again;
    traced_ops(*blocks, x, again);
    EXPECT_TRUE(bitwise_equal(again, yb));
  }
}

// Training in the space-to-depth form: the stem's weight gradient comes back through the
// weight rearrangement's adjoint. One training step against the 7x7 stem, in every mode and
// layout: on the reference backend (which sums in double) the loss and every gradient bit for
// bit the same, so any misplaced weight or pixel shows; on the best CPU backend within f32's
// rounding (2e-5; a batch of 4 at 35x33, where the tiny network's batch norms are well
// conditioned: at a batch of 2 the 7x7 stem's own gradients sit 2.7e-3 from the reference's).
TEST(NnFoldBatchNorm, SpaceToDepthStemTrainsAsTheStem) {
  for (const std::string& backend : cpu_backends())
  for (MemoryFormat fmt : {MemoryFormat::contiguous, MemoryFormat::channels_last})
  for (ops::DispatchMode mode : kAllModes) {
    SCOPED_TRACE(backend + " " + std::string(ops::dispatch_mode_name(mode)) +
                 (fmt == MemoryFormat::channels_last ? " channels-last" : ""));
    nn::ModelOptions o;
    o.memory_format = fmt;
    nn::ResNetConfig c = tiny_resnet(18);
    c.small_input = false;
    auto [blocks, stem] = twins(c, &nn::ResNetConfig::space_to_depth_stem, mode, backend, o);
    const Tensor x = random_tensor({4, 3, 35, 33}, DType::f32, 49);
    const Tensor labels = Tensor::from_vector<int64_t>({4, 1, 7, 2}, Shape{4});
    auto opt_b = blocks->make_optimizer({}), opt_s = stem->make_optimizer({});
    blocks->train();
    stem->train();
    const Tensor lb = host(blocks->train_step(x, labels, *opt_b).loss);
    const Tensor ls = host(stem->train_step(x, labels, *opt_s).loss);
    const std::vector<Tensor> pb = blocks->module().parameters(), ps = stem->module().parameters();
    ASSERT_EQ(pb.size(), ps.size());
    const bool exact = backend == "reference";
    EXPECT_TRUE(exact ? bitwise_equal(lb, ls) : close(lb, ls, 2e-5));
    for (size_t i = 0; i < pb.size(); ++i) {
      const Tensor gb = host(pb[i].grad()), gs = host(ps[i].grad());
      EXPECT_TRUE(exact ? bitwise_equal(gb, gs) : close(gb, gs, 2e-5)) << "parameter " << i;
    }
  }
}

// The form's input gradient (a Conv2d that is not a first layer): direct mode's step
// against the tape's, and both against the plain 7x7 layer, on the reference (bitwise).
TEST(NnFoldBatchNorm, SpaceToDepthFormGivesTheInputGradient) {
  using Impl = backends::ReferenceBackend;
  nn::Conv2dOptions co;
  co.stride = 2;
  co.padding = 3;
  const Tensor x = random_tensor({2, 3, 13, 11}, DType::f32, 50);
  const Tensor w = random_tensor({5, 3, 7, 7}, DType::f32, 52), b = random_tensor({5}, DType::f32, 53);
  const auto run = [&](const auto& policy, bool blocks) {
    using P = std::decay_t<decltype(policy)>;
    nn::Conv2d<P> conv(policy, 3, 5, 7, co);
    copy_into(w, conv.weight());
    copy_into(b, conv.bias());
    conv.set_space_to_depth(blocks);
    Tensor xi = x.clone();
    std::vector<Tensor> out;
    if constexpr (nn::is_direct_v<P>) {
      const Tensor y = conv.forward(xi);
      const Tensor dy = random_tensor(y.sizes(), DType::f32, 51);
      out = {host(y), host(conv.backward(dy)), host(conv.weight().grad()), host(conv.bias().grad())};
    } else {
      xi.set_requires_grad(true);
      const Tensor y = conv.forward(xi);
      const Tensor dy = random_tensor(y.sizes(), DType::f32, 51);
      autograd::backward(y, dy);
      out = {host(y), host(xi.grad()), host(conv.weight().grad()), host(conv.bias().grad())};
    }
    return out;
  };
  const auto plain = run(nn::Direct<Impl>(), false);
  const ops::VirtualDispatch reference(backends::registry().get("reference"));
  for (const auto& got : {run(nn::Direct<Impl>(), true), run(reference, true)})
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(bitwise_equal(got[i], plain[i])) << "output " << i;
}

// The rearranged weight: [out, 16, 4, 4] for 7x7 stride 2 over 3 channels, and a clear
// error where the form does not fit or comes after the first fold.
TEST(NnFoldBatchNorm, SpaceToDepthFormOfTheFoldedWeight) {
  nn::ResNetConfig c = tiny_resnet(18);
  c.small_input = false;
  c.fold_batch_norm = true;
  c.space_to_depth_stem = true;
  auto m = nn::make_resnet(c, ops::DispatchMode::virtual_call, "reference");
  m->eval();
  nn::with_policy(ops::DispatchMode::virtual_call, "reference", [&](const auto& p) {
    using P = std::decay_t<decltype(p)>;
    std::vector<nn::Conv2d<P>*> convs;
    for (auto& [name, mod] : m->module().named_modules())
      if (auto* conv = dynamic_cast<nn::Conv2d<P>*>(mod)) convs.push_back(conv);
    ASSERT_FALSE(convs.empty());
    nn::Conv2d<P>& stem = *convs.front();
    EXPECT_TRUE(stem.space_to_depth());
    EXPECT_EQ(stem.folded_weight().sizes(), (Shape{8, 16, 4, 4}));
    EXPECT_EQ(stem.weight().sizes(), (Shape{8, 3, 7, 7}));
    EXPECT_STRATA_ERROR(stem.set_space_to_depth(false), "set_space_to_depth", "before the first fold");
    EXPECT_STRATA_ERROR(convs[1]->set_space_to_depth(true), "set_space_to_depth", "does not fit");
  });
}

// Winograd (ResNetConfig::winograd, on by default where the backend keeps versioned
// weights: onednn) for the folded 3x3 stride-1 convolutions, in both layouts (channels-last
// weights reach oneDNN's Winograd layout through a plain copy) and after a training step's
// refold. Stated tolerance: relative error 1e-4 against the direct convolutions (Winograd's
// transforms round more). The reference backend has no Winograd form: bitwise the same.
TEST(NnFoldBatchNorm, WinogradWithinItsRounding) {
  for (const std::string& backend : cpu_backends())
  for (MemoryFormat fmt : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
    SCOPED_TRACE(backend + (fmt == MemoryFormat::channels_last ? " channels-last" : ""));
    nn::ModelOptions o;
    o.memory_format = fmt;
    nn::ResNetConfig c = tiny_resnet(18);
    c.base_channels = 16;  // oneDNN's Winograd kernels take channels in blocks of 16
    c.fold_batch_norm = true;
    auto [wino, direct] = twins(c, &nn::ResNetConfig::winograd, ops::DispatchMode::direct, backend, o);
    randomise_statistics(*wino, {direct.get()}, true);
    const Tensor x = random_tensor({2, 3, 16, 16}, DType::f32, 48);  // layer1 at 16x16: Winograd
    const Tensor labels = Tensor::from_vector<int64_t>({2, 5}, Shape{2});
    wino->eval();
    direct->eval();
    const auto check = [&](const char* when) {
      const Tensor yw = host(wino->predict(x)), yd = host(direct->predict(x));
      if (backend == "reference")
        EXPECT_TRUE(bitwise_equal(yw, yd)) << when;
      else
        EXPECT_TRUE(close(yw, yd, 1e-4)) << when;
    };
    check("before training");
    nn::OptimizerConfig oc;
    oc.lr = 0.1;
    auto opt_w = wino->make_optimizer(oc), opt_d = direct->make_optimizer(oc);
    wino->train();
    direct->train();
    wino->train_step(x, labels, *opt_w);
    direct->train_step(x, labels, *opt_d);
    wino->eval();
    direct->eval();
    check("after a step");
  }
}

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
    Pair p = make_pair(18, mode, backend, o);
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
    EXPECT_TRUE(close(host(p.folded->predict(x)), host(p.plain->predict(x)), kTolF32));
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
    Pair p = make_pair(50, mode, "reference");
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
    EXPECT_TRUE(close(after, want, kTolF32));
  }
}

// Weights written in place during evaluation, gradients off (weight surgery, pruning, a
// hand-made update), and an optimizer step taken with no forward before it: the next
// prediction folds them again, in every mode (Tensor::version).
TEST(NnFoldBatchNorm, WeightsWrittenInEvaluationAreFoldedAgain) {
  for (ops::DispatchMode mode : {ops::DispatchMode::static_call, ops::DispatchMode::direct}) {
    SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)));
    Pair p = make_pair(18, mode, "reference");
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
    EXPECT_TRUE(close(after, host(p.plain->predict(x)), kTolF32)) << "after copy_into";
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
    EXPECT_TRUE(close(after, host(p.plain->predict(x)), kTolF32)) << "after an optimizer step alone";
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
  std::vector<Case> cases = {{"reference", DType::f64, kTolF32}};
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
    Pair p = make_pair(18, mode, "reference");
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
    EXPECT_TRUE(close(host(p.folded->predict(x)), host(other->predict(x)), kTolF32));
  }
}

// The epilogue is the inference form: a backward through it fails with a message, in the
// tape modes (autograd) and in direct mode (the plan), and the layer refuses to run it
// with gradients on.
TEST(NnFoldBatchNorm, BackwardThroughTheEpilogueIsRefused) {
  const auto d = ops::VirtualDispatch(backends::registry().get("reference"));
  Tensor x = random_tensor({1, 2, 5, 5}, DType::f32, 45);
  const Tensor w = random_tensor({3, 2, 3, 3}, DType::f32, 46), b = random_tensor({3}, DType::f32, 47);
  ops::Conv2dParams cp;
  cp.pad_h = cp.pad_w = 1;
  x.set_requires_grad(true);
  const Tensor y = autograd::conv2d_fused(d, x, w, b, cp, Tensor(), true);
  EXPECT_STRATA_ERROR(autograd::backward(autograd::sum(d, y)), "conv2d", "no backward", "ReLU");

  backends::ReferenceBackend impl;
  ops::direct::Conv2dPlan<backends::ReferenceBackend> plan;
  plan.plan(impl, x, w, b, cp, Tensor(), true);
  plan.forward();
  EXPECT_STRATA_ERROR(plan.plan_backward(random_tensor({1, 3, 5, 5}, DType::f32, 48), true), "conv2d", "no backward");

  nn::Conv2d<ops::VirtualDispatch> conv{d, 2, 3, 3, nn::Conv2dOptions{1, 1, 1, 1, true, DType::f32}};
  EXPECT_STRATA_ERROR(conv.forward_fused(x, Tensor(), true), "Conv2d::forward_fused", "gradients off");
  EXPECT_STRATA_ERROR(conv.forward_folded(x, Tensor(), true), "Conv2d::forward_folded", "fold_batch_norm");
}

// The epilogue without folding: any Conv2d followed by a ReLU (and a residual) in one
// call, bitwise the separate ops on the reference backend.
TEST(NnFoldBatchNorm, ConvolutionWithReluAndResidualWithoutFolding) {
  const auto d = ops::VirtualDispatch(backends::registry().get("reference"));
  nn::Conv2d<ops::VirtualDispatch> conv{d, 4, 6, 3, nn::Conv2dOptions{2, 1, 1, 1, true, DType::f32}};
  const Tensor x = random_tensor({2, 4, 9, 7}, DType::f32, 49), z = random_tensor({2, 6, 5, 4}, DType::f32, 50);
  autograd::NoGradGuard no_grad;
  ASSERT_TRUE(conv.fuses());
  const Tensor fused = conv.forward_fused(x, z, true);
  const Tensor separate = ops::relu(d, ops::add(d, conv.forward(x), z));
  EXPECT_TRUE(bitwise_equal(fused, separate));
  const std::vector<std::string> names = traced([&] { conv.forward_fused(x, Tensor(), true); });
  EXPECT_EQ(names, std::vector<std::string>{"conv2d_fwd"});
}

}  // namespace
}  // namespace strata::testing
