#pragma once
// The residual blocks of torchvision's ResNet (v1.5), with torchvision's child names
// and registration order so state dicts match:
//   BasicBlock:  conv1(3x3, stride) bn1 relu conv2(3x3) bn2 [downsample] ; expansion 1
//   Bottleneck:  conv1(1x1) bn1 conv2(3x3, stride) bn2 conv3(1x1) bn3 relu [downsample];
//                expansion 4 (stride on the 3x3 conv: "ResNet v1.5")
//   downsample:  "0" conv 1x1 (stride, no bias), "1" BatchNorm2d
// out = relu(branch(x) + identity), identity = downsample(x) or x.
//
// Direct-mode backward runs the identity branch first and then the main branch, and
// sums their input gradients as identity + main with the backend's add, exactly what
// the autograd engine does (later-created nodes run first; a second gradient for a
// tensor is accumulated as existing + new through ops::add), so gradients are bitwise
// those of the tape.
#include <memory>
#include <vector>

#include "strata/nn/layers/activation.h"
#include "strata/nn/layers/batch_norm.h"
#include "strata/nn/layers/conv2d.h"
#include "strata/nn/layers/residual_add.h"

namespace strata::nn {

// What init policies need to know of a residual block, whatever its policy.
class ResidualBlockBase : public Module {
 public:
  // The convolutions of the residual branch, in order (2 or 3).
  virtual std::vector<Module*> branch_convs() = 0;
  // The last BatchNorm of the branch (zeroed by zero_last_bn_gamma).
  virtual Module* last_bn() = 0;
  // The downsample's conv, or nullptr.
  virtual Module* downsample_conv() = 0;

  // Folded evaluation may write the block's output over its residual (the downsample's
  // output, or the block's input itself) where the backend accumulates a residual in place
  // (Conv2d::forward_folded's z_dead). Only for a block whose input no one reads after it:
  // ResNet sets it on its own blocks (ResNetConfig::residual_in_place); off by default.
  void set_residual_in_place(bool on) { residual_in_place_ = on; }
  bool residual_in_place() const { return residual_in_place_; }

 protected:
  bool residual_in_place_ = false;
};

template <class P>
class Downsample final : public Module {
 public:
  Downsample(const P& p, int64_t in_channels, int64_t out_channels, int stride, const BatchNormOptions& bn);
  std::string_view type_name() const override { return "Sequential"; }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Conv2d<P>& conv() { return *conv_; }
  BatchNorm2d<P>& bn() { return *bn_; }

 private:
  Conv2d<P>* conv_;
  BatchNorm2d<P>* bn_;
};

template <class P>
class BasicBlock final : public ResidualBlockBase {
 public:
  static constexpr int kExpansion = 1;
  BasicBlock(const P& p, int64_t inplanes, int64_t planes, int stride, const BatchNormOptions& bn);
  std::string_view type_name() const override { return "BasicBlock"; }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  std::vector<Module*> branch_convs() override { return {conv1_, conv2_}; }
  Module* last_bn() override { return bn2_; }
  Module* downsample_conv() override { return downsample_ ? &downsample_->conv() : nullptr; }

 private:
  Conv2d<P>*conv1_, *conv2_;
  BatchNorm2d<P>*bn1_, *bn2_;
  ReLU<P>*relu_, *relu_out_;
  bool fused_ = false;  // the latest forward ran each batch norm with what follows it
  Downsample<P>* downsample_ = nullptr;
  ResidualAdd<P> add_;
};

template <class P>
class Bottleneck final : public ResidualBlockBase {
 public:
  static constexpr int kExpansion = 4;
  // width = planes (groups 1, base width 64).
  Bottleneck(const P& p, int64_t inplanes, int64_t planes, int stride, const BatchNormOptions& bn);
  std::string_view type_name() const override { return "Bottleneck"; }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  std::vector<Module*> branch_convs() override { return {conv1_, conv2_, conv3_}; }
  Module* last_bn() override { return bn3_; }
  Module* downsample_conv() override { return downsample_ ? &downsample_->conv() : nullptr; }

 private:
  Conv2d<P>*conv1_, *conv2_, *conv3_;
  BatchNorm2d<P>*bn1_, *bn2_, *bn3_;
  ReLU<P>*relu_, *relu2_, *relu_out_;
  bool fused_ = false;  // the latest forward ran each batch norm with what follows it
  Downsample<P>* downsample_ = nullptr;
  ResidualAdd<P> add_;
};

}  // namespace strata::nn
