#pragma once
// ResNet-18/34/50/101/152 exactly as torchvision.models.resnet (v1.5: stride on the
// 3x3 conv of the bottleneck; convs without bias; BatchNorm eps 1e-5, momentum 0.1),
// with torchvision's parameter and buffer names and order, so state dicts move
// between the two (ResNet-50 at 1000 classes: 25,557,032 parameters).
//   conv1 bn1 relu maxpool layer1..layer4 avgpool fc
// Options beyond torchvision: number of classes, input channels (1 for MNIST), and a
// small-image stem for 28-32 px inputs (conv1 3x3 stride 1 padding 1, no max-pool),
// which keeps the parameter names (conv1.weight is then [64, C, 3, 3]).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/nn/init.h"
#include "strata/nn/layers/blocks.h"
#include "strata/nn/layers/pool.h"
#include "strata/nn/layers/linear.h"

namespace strata::nn {

struct ResNetConfig {
  int depth = 50;  // 18, 34, 50, 101, 152
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  bool small_input = false;
  // Channels of the stem and layer1 (doubling per stage): 64 is torchvision's; smaller
  // values make cheap networks of the same structure (tests, quick experiments).
  int64_t base_channels = 64;
  // torchvision's own init is kaiming_normal_fan_out.
  InitConfig init{InitPolicy::kaiming_normal_fan_out, false, 0};
  DType dtype = DType::f32;
  // Evaluation with gradients off runs each batch norm with the ReLU and residual add
  // after it in one pass (BatchNormOptions::fuse_eval); false: the separate ops.
  bool fuse_eval = true;
  // Training runs each batch norm with the ReLU and residual add after it in one pass,
  // its backward with the ReLU's (BatchNormOptions::fuse_train); false: the separate ops.
  // Unset: on where it measured faster, on a GPU (the cuda backend fuses them into its own
  // batch-norm passes); off on the CPU, where the CPU backends' extra epilogue and mask
  // passes made ResNet-50 training steps 7-24 % slower (docs/results/cpu_libtorch.md).
  std::optional<bool> fuse_train;
  // Evaluation with gradients off runs each convolution with the batch norm after it
  // folded into its weights and bias, and the ReLU and residual add in the same call
  // (Conv2d::fold_batch_norm): conv1 of the stem, then 2 (BasicBlock) or 3 (Bottleneck)
  // convolutions per block plus the downsample's. The parameters, the state dict and
  // training keep the unfolded batch norms. Takes precedence over fuse_eval. Unset: on a
  // GPU, where it measured faster at every batch, dtype and dispatch mode measured (H100:
  // docs/results/gpu_fused_eval.md), and on a CPU backend that keeps the folded weights in
  // its own layout (onednn: 0.8x fused evaluation's time at batch 1); off on the other CPU
  // backends, where it measured within 4 % of fused evaluation (docs/results/cpu_libtorch.md).
  std::optional<bool> fold_batch_norm;
  // The ImageNet stem's 7x7 stride-2 convolution as a stride-1 convolution over the input's
  // 2x2 pixel blocks, in training and evaluation (Conv2d::set_space_to_depth; the parameters
  // keep the 7x7 form; the small-image stem has stride 1 and keeps its form). Unset: on a GPU
  // (ResNet-50 inference in 0.90x the time, H100 b256 bf16, docs/results/gpu_fused_eval.md),
  // off on the CPU (onednn: 1.02-1.04x at batch 1, docs/results/cpu_libtorch.md).
  std::optional<bool> space_to_depth_stem;
  // With folding, in evaluation: the folded 3x3 stride-1 convolutions may run a Winograd
  // transform (Conv2d::set_folded_winograd: fewer multiplies, larger rounding). Unset: on a
  // CPU backend that keeps versioned weights (onednn: ResNet-50 batch 1 / 224² in 0.87-0.94x
  // the time, docs/results/cpu_libtorch.md), off elsewhere (the cuda backend does not read it).
  std::optional<bool> winograd;
  // With folding, in evaluation: each block's last convolution writes its output over the
  // residual (ResidualBlockBase::set_residual_in_place: the block inputs and downsample
  // outputs are the network's own temporaries), where the backend accumulates a residual in
  // place. Unset: on where it does (onednn: no copy of the residual per block; ResNet-50 at
  // batch 1 / 224²: docs/results/cpu_libtorch.md).
  std::optional<bool> residual_in_place;
};

// "ResNet-50 (torchvision v1.5, 1000 classes, 3 input channels, ImageNet stem)".
std::string describe(const ResNetConfig& c);

namespace detail {
// A stage ("layer1"...): blocks named "0", "1", ..., called without virtual dispatch.
template <class Block>
class Stage final : public Module {
 public:
  std::string_view type_name() const override { return "Sequential"; }
  Block& add(std::unique_ptr<Block> b) {
    Block& ref = register_module(std::to_string(blocks_.size()), std::move(b));
    blocks_.push_back(&ref);
    return ref;
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (Block* b : blocks_) h = b->forward(h);
    return h;
  }
  Tensor backward(const Tensor& dy) override {
    Tensor g = dy;
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
      g = (*it)->backward(g);
      grads_ready(**it);
    }
    return g;
  }

 private:
  std::vector<Block*> blocks_;
};
}  // namespace detail

template <class P, class Block>
class ResNetT final : public Module {
 public:
  ResNetT(const P& p, const ResNetConfig& c);
  std::string_view type_name() const override { return "ResNet"; }
  // x [N, in_channels, H, W] on the policy's device -> logits [N, num_classes].
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dlogits) override;  // direct mode
  const ResNetConfig& config() const { return c_; }

 private:
  ResNetConfig c_;
  Conv2d<P>* conv1_;
  BatchNorm2d<P>* bn1_;
  ReLU<P>* relu_;
  bool stem_fused_ = false;  // the latest forward's stem ran bn1 with its ReLU
  MaxPool2d<P>* maxpool_ = nullptr;
  detail::Stage<Block>* layers_[4];
  GlobalAvgPool<P>* avgpool_;
  Linear<P>* fc_;
};

// The module for a config (depth picks BasicBlock or Bottleneck), initialised with
// c.init. Instantiated for every policy of the build.
template <class P>
std::unique_ptr<Module> make_resnet_module(const P& p, const ResNetConfig& c);

}  // namespace strata::nn
