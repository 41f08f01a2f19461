#include "strata/nn/resnet.h"

namespace strata::nn {

namespace {
struct Layout {
  bool bottleneck;
  int blocks[4];
};
Layout layout_of(int depth) {
  switch (depth) {
    case 18: return {false, {2, 2, 2, 2}};
    case 34: return {false, {3, 4, 6, 3}};
    case 50: return {true, {3, 4, 6, 3}};
    case 101: return {true, {3, 4, 23, 3}};
    case 152: return {true, {3, 8, 36, 3}};
    default: STRATA_FAIL("ResNet: depth must be 18, 34, 50, 101 or 152, got ", depth);
  }
}
}  // namespace

std::string describe(const ResNetConfig& c) {
  const bool folded = c.fold_batch_norm.value_or(false);
  const auto with = [](bool on, const char* what) { return std::string(on ? what : ""); };
  return "ResNet-" + std::to_string(c.depth) + " (torchvision v1.5, " + std::to_string(c.num_classes) +
         " classes, " + std::to_string(c.in_channels) + " input channels, " +
         (c.small_input ? "small-image stem 3x3/1 without max-pool" : "ImageNet stem 7x7/2 + max-pool") +
         (c.base_channels != 64 ? ", base width " + std::to_string(c.base_channels) : std::string()) +
         with(folded, ", batch norms folded into the convolutions for inference") +
         with(c.space_to_depth_stem.value_or(false) && !c.small_input, ", the stem over 2x2 pixel blocks") +
         with(folded && c.winograd.value_or(false), ", folded 3x3 convolutions by Winograd") +
         with(folded && c.residual_in_place.value_or(false), ", residuals accumulated in place") + ")";
}

template <class P, class Block>
ResNetT<P, Block>::ResNetT(const P& p, const ResNetConfig& config) : c_(config) {
  // Defaults that depend on the device, resolved once: describe() names what runs.
  const bool cpu = p.device().type == DeviceType::cpu;
  c_.fold_batch_norm = c_.fold_batch_norm.value_or(!cpu || p.capabilities().keeps_versioned_weights());
  c_.winograd = c_.winograd.value_or(cpu && p.capabilities().keeps_versioned_weights()) && *c_.fold_batch_norm;
  c_.residual_in_place =
      c_.residual_in_place.value_or(p.capabilities().accumulates_residual_in_place()) && *c_.fold_batch_norm;
  const ResNetConfig& c = c_;
  const Layout lay = layout_of(c.depth);
  STRATA_CHECK(lay.bottleneck == (Block::kExpansion == 4), "ResNet: depth ", c.depth, " needs another block type");
  STRATA_CHECK(c.num_classes > 0 && c.in_channels > 0, "ResNet: invalid num_classes=", c.num_classes,
               " in_channels=", c.in_channels);
  const DType dt = c.dtype;
  Conv2dOptions stem;
  stem.bias = false;
  stem.dtype = dt;
  stem.stride = c.small_input ? 1 : 2;
  stem.padding = c.small_input ? 1 : 3;
  const int64_t base = c.base_channels;
  STRATA_CHECK(base > 0, "ResNet: base_channels must be positive, got ", base);
  conv1_ = &register_module("conv1", std::make_unique<Conv2d<P>>(p, c.in_channels, base, c.small_input ? 3 : 7, stem));
  conv1_->set_input_grad(false);
  BatchNormOptions bno;
  bno.dtype = dt;
  bno.fuse_eval = c.fuse_eval;
  bno.fuse_train = c.fuse_train.value_or(p.device().type != DeviceType::cpu);
  bno.fold_into_conv = *c.fold_batch_norm;
  bn1_ = &register_module("bn1", std::make_unique<BatchNorm2d<P>>(p, base, bno));
  if (*c.fold_batch_norm) conv1_->fold_batch_norm(*bn1_);
  relu_ = &register_module("relu", std::make_unique<ReLU<P>>(p));
  if (!c.small_input) maxpool_ = &register_module("maxpool", std::make_unique<MaxPool2d<P>>(p, 3, 2, 1));
  int64_t inplanes = base;
  for (int s = 0; s < 4; ++s) {
    const int64_t planes = base << s;
    auto stage = std::make_unique<detail::Stage<Block>>();
    for (int b = 0; b < lay.blocks[s]; ++b) {
      const int stride = (s > 0 && b == 0) ? 2 : 1;
      Block& block = stage->add(std::make_unique<Block>(p, inplanes, planes, stride, bno));
      block.set_residual_in_place(*c_.residual_in_place);
      inplanes = planes * Block::kExpansion;
    }
    layers_[s] = &register_module("layer" + std::to_string(s + 1), std::move(stage));
  }
  avgpool_ = &register_module("avgpool", std::make_unique<GlobalAvgPool<P>>(p));
  LinearOptions fco;
  fco.dtype = dt;
  fc_ = &register_module("fc", std::make_unique<Linear<P>>(p, inplanes, c.num_classes, fco));
  initialize(*this, c.init);
  c_.space_to_depth_stem = !c.small_input && c_.space_to_depth_stem.value_or(!cpu && conv1_->space_to_depth_fits());
  if (*c.space_to_depth_stem) conv1_->set_space_to_depth(true);
  if (*c.winograd)
    for (const auto& [name, m] : named_modules())
      if (auto* conv = dynamic_cast<Conv2d<P>*>(m)) conv->set_folded_winograd(true);
}

template <class P, class Block>
Tensor ResNetT<P, Block>::forward(const Tensor& x) {
  STRATA_CHECK(x.dim() == 4 && x.size(1) == c_.in_channels, "ResNet: input ", x.str(), " must be [N, ",
               c_.in_channels, ", H, W]");
  Tensor h;
  stem_fused_ = false;
  if (conv1_->folds()) {
    h = conv1_->forward_folded(x, Tensor(), true);
  } else {
    h = conv1_->forward(x);
    stem_fused_ = bn1_->fuses(h);
    h = stem_fused_ ? bn1_->forward_fused(h, Tensor(), true) : relu_->forward(bn1_->forward(h));
  }
  if (maxpool_) h = maxpool_->forward(h);
  for (auto* stage : layers_) h = stage->forward(h);
  return fc_->forward(avgpool_->forward(h));
}

template <class P, class Block>
Tensor ResNetT<P, Block>::backward(const Tensor& dlogits) {
  return detail::explicit_backward<P>(*this, dlogits, [&] {
    Tensor g = fc_->backward(dlogits);
    grads_ready(*fc_);
    g = avgpool_->backward(g);
    for (int s = 3; s >= 0; --s) g = layers_[s]->backward(g);  // (each block reports itself)
    if (maxpool_) g = maxpool_->backward(g);
    g = bn1_->backward(stem_fused_ ? g : relu_->backward(g));
    grads_ready(*bn1_);
    g = conv1_->backward(g);
    grads_ready(*conv1_);
    return g;
  });
}

template <class P>
std::unique_ptr<Module> make_resnet_module(const P& p, const ResNetConfig& c) {
  if (layout_of(c.depth).bottleneck) return std::make_unique<ResNetT<P, Bottleneck<P>>>(p, c);
  return std::make_unique<ResNetT<P, BasicBlock<P>>>(p, c);
}

#define STRATA_NN_INSTANTIATE(P)                 \
  template class ResNetT<P, BasicBlock<P>>;      \
  template class ResNetT<P, Bottleneck<P>>;      \
  template std::unique_ptr<Module> make_resnet_module<P>(const P&, const ResNetConfig&);
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
