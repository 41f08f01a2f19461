#include "strata/nn/layers/blocks.h"

#include <cstdint>

#include "strata/autograd/functions.h"

namespace strata::nn {

namespace {
template <class P>
Conv2dOptions conv_opts(int stride, int padding, DType dt) {
  Conv2dOptions o;
  o.stride = stride;
  o.padding = padding;
  o.bias = false;
  o.dtype = dt;
  return o;
}
}  // namespace

template <class P>
Downsample<P>::Downsample(const P& p, int64_t in_channels, int64_t out_channels, int stride, const BatchNormOptions& bn) {
  conv_ = &register_module("0", std::make_unique<Conv2d<P>>(p, in_channels, out_channels, 1, conv_opts<P>(stride, 0, bn.dtype)));
  bn_ = &register_module("1", std::make_unique<BatchNorm2d<P>>(p, out_channels, bn));
  if (bn.fold_into_conv) conv_->fold_batch_norm(*bn_);
}

template <class P>
Tensor Downsample<P>::forward(const Tensor& x) {
  return bn_->forward(conv_->forward(x));
}

template <class P>
Tensor Downsample<P>::backward(const Tensor& dy) {
  return conv_->backward(bn_->backward(dy));
}

template <class P>
BasicBlock<P>::BasicBlock(const P& p, int64_t inplanes, int64_t planes, int stride, const BatchNormOptions& bn) : add_(p) {
  conv1_ = &register_module("conv1", std::make_unique<Conv2d<P>>(p, inplanes, planes, 3, conv_opts<P>(stride, 1, bn.dtype)));
  bn1_ = &register_module("bn1", std::make_unique<BatchNorm2d<P>>(p, planes, bn));
  relu_ = &register_module("relu", std::make_unique<ReLU<P>>(p));
  conv2_ = &register_module("conv2", std::make_unique<Conv2d<P>>(p, planes, planes, 3, conv_opts<P>(1, 1, bn.dtype)));
  bn2_ = &register_module("bn2", std::make_unique<BatchNorm2d<P>>(p, planes, bn));
  if (stride != 1 || inplanes != planes * kExpansion)
    downsample_ = &register_module("downsample",
                                   std::make_unique<Downsample<P>>(p, inplanes, planes * kExpansion, stride, bn));
  // torchvision applies its one ReLU twice; direct mode plans per call site.
  relu_out_ = &own_unlisted(std::make_unique<ReLU<P>>(p));
  if (bn.fold_into_conv) {
    conv1_->fold_batch_norm(*bn1_);
    conv2_->fold_batch_norm(*bn2_);
  }
}

template <class P>
Tensor BasicBlock<P>::forward(const Tensor& x) {
  fused_ = false;
  if (conv1_->folds()) {  // evaluation, batch norms folded: each conv with what follows it
    const Tensor out = conv1_->forward_folded(x, Tensor(), true);
    const Tensor identity = downsample_ ? downsample_->conv().forward_folded(x, Tensor(), false) : x;
    return conv2_->forward_folded(out, identity, true, residual_in_place_);
  }
  const Tensor h = conv1_->forward(x);
  if (bn1_->fuses(h)) {  // each batch norm with the ReLU and residual add after it
    fused_ = true;
    const Tensor out = bn1_->forward_fused(h, Tensor(), true);
    const Tensor y2 = conv2_->forward(out);
    const Tensor identity = downsample_ ? downsample_->forward(x) : x;
    return bn2_->forward_fused(y2, identity, true);
  }
  Tensor out = relu_->forward(bn1_->forward(h));
  out = bn2_->forward(conv2_->forward(out));
  const Tensor identity = downsample_ ? downsample_->forward(x) : x;
  return relu_out_->forward(add_.forward(out, identity));
}

template <class P>
Tensor BasicBlock<P>::backward(const Tensor& dy) {
  return detail::explicit_backward<P>(*this, dy, [&] {
    if (fused_) {  // each batch norm's backward masks its gradient; bn2 returns the residual's
      const Tensor g2 = bn2_->backward(dy);
      const Tensor& g = bn2_->residual_grad();
      const Tensor g_identity = downsample_ ? downsample_->backward(g) : g;
      const Tensor g_main = conv1_->backward(bn1_->backward(conv2_->backward(g2)));
      return add_.accumulate(g_identity, g_main);
    }
    const Tensor g = relu_out_->backward(dy);
    const Tensor g_identity = downsample_ ? downsample_->backward(g) : g;
    Tensor g_main = conv2_->backward(bn2_->backward(g));
    g_main = conv1_->backward(bn1_->backward(relu_->backward(g_main)));
    return add_.accumulate(g_identity, g_main);
  });
}

template <class P>
Bottleneck<P>::Bottleneck(const P& p, int64_t inplanes, int64_t planes, int stride, const BatchNormOptions& bn) : add_(p) {
  const int64_t width = planes;
  conv1_ = &register_module("conv1", std::make_unique<Conv2d<P>>(p, inplanes, width, 1, conv_opts<P>(1, 0, bn.dtype)));
  bn1_ = &register_module("bn1", std::make_unique<BatchNorm2d<P>>(p, width, bn));
  conv2_ = &register_module("conv2", std::make_unique<Conv2d<P>>(p, width, width, 3, conv_opts<P>(stride, 1, bn.dtype)));
  bn2_ = &register_module("bn2", std::make_unique<BatchNorm2d<P>>(p, width, bn));
  conv3_ = &register_module("conv3",
                            std::make_unique<Conv2d<P>>(p, width, planes * kExpansion, 1, conv_opts<P>(1, 0, bn.dtype)));
  bn3_ = &register_module("bn3", std::make_unique<BatchNorm2d<P>>(p, planes * kExpansion, bn));
  relu_ = &register_module("relu", std::make_unique<ReLU<P>>(p));
  if (stride != 1 || inplanes != planes * kExpansion)
    downsample_ = &register_module("downsample",
                                   std::make_unique<Downsample<P>>(p, inplanes, planes * kExpansion, stride, bn));
  relu2_ = &own_unlisted(std::make_unique<ReLU<P>>(p));
  relu_out_ = &own_unlisted(std::make_unique<ReLU<P>>(p));
  if (bn.fold_into_conv) {
    conv1_->fold_batch_norm(*bn1_);
    conv2_->fold_batch_norm(*bn2_);
    conv3_->fold_batch_norm(*bn3_);
  }
}

template <class P>
Tensor Bottleneck<P>::forward(const Tensor& x) {
  fused_ = false;
  if (conv1_->folds()) {  // evaluation, batch norms folded: 3 or 4 convolutions and nothing else
    Tensor out = conv1_->forward_folded(x, Tensor(), true);
    out = conv2_->forward_folded(out, Tensor(), true);
    const Tensor identity = downsample_ ? downsample_->conv().forward_folded(x, Tensor(), false) : x;
    return conv3_->forward_folded(out, identity, true, residual_in_place_);
  }
  const Tensor h = conv1_->forward(x);
  if (bn1_->fuses(h)) {  // each batch norm with the ReLU and residual add after it
    fused_ = true;
    Tensor out = bn1_->forward_fused(h, Tensor(), true);
    out = bn2_->forward_fused(conv2_->forward(out), Tensor(), true);
    const Tensor y3 = conv3_->forward(out);
    const Tensor identity = downsample_ ? downsample_->forward(x) : x;
    return bn3_->forward_fused(y3, identity, true);
  }
  Tensor out = relu_->forward(bn1_->forward(h));
  out = relu2_->forward(bn2_->forward(conv2_->forward(out)));
  out = bn3_->forward(conv3_->forward(out));
  const Tensor identity = downsample_ ? downsample_->forward(x) : x;
  return relu_out_->forward(add_.forward(out, identity));
}

template <class P>
Tensor Bottleneck<P>::backward(const Tensor& dy) {
  return detail::explicit_backward<P>(*this, dy, [&] {
    if (fused_) {  // each batch norm's backward masks its gradient; bn3 returns the residual's
      const Tensor g3 = bn3_->backward(dy);
      const Tensor& g = bn3_->residual_grad();
      const Tensor g_identity = downsample_ ? downsample_->backward(g) : g;
      Tensor g_main = conv2_->backward(bn2_->backward(conv3_->backward(g3)));
      g_main = conv1_->backward(bn1_->backward(g_main));
      return add_.accumulate(g_identity, g_main);
    }
    const Tensor g = relu_out_->backward(dy);
    const Tensor g_identity = downsample_ ? downsample_->backward(g) : g;
    Tensor g_main = conv3_->backward(bn3_->backward(g));
    g_main = conv2_->backward(bn2_->backward(relu2_->backward(g_main)));
    g_main = conv1_->backward(bn1_->backward(relu_->backward(g_main)));
    return add_.accumulate(g_identity, g_main);
  });
}

#define STRATA_NN_INSTANTIATE(P) \
  template class Downsample<P>;  \
  template class BasicBlock<P>;  \
  template class Bottleneck<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
