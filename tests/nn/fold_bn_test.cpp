// Batch-norm folding (ResNetConfig::fold_batch_norm): a ResNet in evaluation with
// gradients off runs each convolution with the batch norm after it folded into its
// weights and bias, and the ReLU and residual add in the same call (the conv2d epilogue).
// Stated tolerance, f32: kFoldTolF32 (eval_test_util.h); bf16 is checked on the GPU
// (tests/cuda). The forms of the folded forward (space-to-depth stem, Winograd, residuals
// accumulated in place) are here; that the folded copies follow every change to the unfolded
// parameters is tests/nn/fold_refresh_test.cpp.
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

TEST(NnFoldBatchNorm, MatchesTheUnfoldedModelInEveryModeWithOnlyConvolutions) {
  for (const std::string& backend : cpu_backends()) {
    for (int depth : {18, 50}) {
      for (ops::DispatchMode mode : kAllModes) {
        SCOPED_TRACE(backend + " ResNet-" + std::to_string(depth) + " " + std::string(ops::dispatch_mode_name(mode)));
        FoldPair p = make_fold_pair(depth, mode, backend);
        p.folded->eval();
        p.plain->eval();
        const Tensor x = random_tensor({2, 3, 9, 11}, DType::f32, 41);
        Tensor yf, yp;
        const std::vector<std::string> folded_ops = traced_ops(*p.folded, x, yf);
        const std::vector<std::string> plain_ops = traced_ops(*p.plain, x, yp);
        EXPECT_TRUE(close(yf, yp, kFoldTolF32));
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
    EXPECT_TRUE(close(yb, ys, kFoldTolF32));
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
