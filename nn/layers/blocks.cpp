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
BatchNormOptions bn_opts(DType dt) {
  BatchNormOptions o;
  o.dtype = dt;
  return o;
}
int64_t key_of(const Tensor& t) { return static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr())); }
}  // namespace

template <class P>
Tensor ResidualAdd<P>::forward(const Tensor& a, const Tensor& b) {
  return sum_.forward_keyed(p_, a, key_of(b), [&](const auto& tape) { return autograd::add(tape, a, b); }, b);
}

template <class P>
Tensor ResidualAdd<P>::accumulate(const Tensor& identity_grad, const Tensor& main_grad) {
  return grad_sum_.forward_keyed(
      p_, identity_grad, key_of(main_grad),
      [](const auto&) -> Tensor { STRATA_FAIL("ResidualAdd::accumulate runs in direct mode only"); }, main_grad);
}

template <class P>
Downsample<P>::Downsample(const P& p, int64_t in_channels, int64_t out_channels, int stride, DType dt) {
  conv_ = &register_module("0", std::make_unique<Conv2d<P>>(p, in_channels, out_channels, 1, conv_opts<P>(stride, 0, dt)));
  bn_ = &register_module("1", std::make_unique<BatchNorm2d<P>>(p, out_channels, bn_opts(dt)));
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
BasicBlock<P>::BasicBlock(const P& p, int64_t inplanes, int64_t planes, int stride, DType dt) : add_(p) {
  conv1_ = &register_module("conv1", std::make_unique<Conv2d<P>>(p, inplanes, planes, 3, conv_opts<P>(stride, 1, dt)));
  bn1_ = &register_module("bn1", std::make_unique<BatchNorm2d<P>>(p, planes, bn_opts(dt)));
  relu_ = &register_module("relu", std::make_unique<ReLU<P>>(p));
  conv2_ = &register_module("conv2", std::make_unique<Conv2d<P>>(p, planes, planes, 3, conv_opts<P>(1, 1, dt)));
  bn2_ = &register_module("bn2", std::make_unique<BatchNorm2d<P>>(p, planes, bn_opts(dt)));
  if (stride != 1 || inplanes != planes * kExpansion)
    downsample_ = &register_module("downsample",
                                   std::make_unique<Downsample<P>>(p, inplanes, planes * kExpansion, stride, dt));
  // torchvision applies its one ReLU twice; direct mode plans per call site.
  relu_out_ = &own_unlisted(std::make_unique<ReLU<P>>(p));
}

template <class P>
Tensor BasicBlock<P>::forward(const Tensor& x) {
  Tensor out = relu_->forward(bn1_->forward(conv1_->forward(x)));
  out = bn2_->forward(conv2_->forward(out));
  const Tensor identity = downsample_ ? downsample_->forward(x) : x;
  return relu_out_->forward(add_.forward(out, identity));
}

template <class P>
Tensor BasicBlock<P>::backward(const Tensor& dy) {
  return detail::explicit_backward<P>(*this, dy, [&] {
    const Tensor g = relu_out_->backward(dy);
    const Tensor g_identity = downsample_ ? downsample_->backward(g) : g;
    Tensor g_main = conv2_->backward(bn2_->backward(g));
    g_main = conv1_->backward(bn1_->backward(relu_->backward(g_main)));
    return add_.accumulate(g_identity, g_main);
  });
}

template <class P>
Bottleneck<P>::Bottleneck(const P& p, int64_t inplanes, int64_t planes, int stride, DType dt) : add_(p) {
  const int64_t width = planes;
  conv1_ = &register_module("conv1", std::make_unique<Conv2d<P>>(p, inplanes, width, 1, conv_opts<P>(1, 0, dt)));
  bn1_ = &register_module("bn1", std::make_unique<BatchNorm2d<P>>(p, width, bn_opts(dt)));
  conv2_ = &register_module("conv2", std::make_unique<Conv2d<P>>(p, width, width, 3, conv_opts<P>(stride, 1, dt)));
  bn2_ = &register_module("bn2", std::make_unique<BatchNorm2d<P>>(p, width, bn_opts(dt)));
  conv3_ = &register_module("conv3",
                            std::make_unique<Conv2d<P>>(p, width, planes * kExpansion, 1, conv_opts<P>(1, 0, dt)));
  bn3_ = &register_module("bn3", std::make_unique<BatchNorm2d<P>>(p, planes * kExpansion, bn_opts(dt)));
  relu_ = &register_module("relu", std::make_unique<ReLU<P>>(p));
  if (stride != 1 || inplanes != planes * kExpansion)
    downsample_ = &register_module("downsample",
                                   std::make_unique<Downsample<P>>(p, inplanes, planes * kExpansion, stride, dt));
  relu2_ = &own_unlisted(std::make_unique<ReLU<P>>(p));
  relu_out_ = &own_unlisted(std::make_unique<ReLU<P>>(p));
}

template <class P>
Tensor Bottleneck<P>::forward(const Tensor& x) {
  Tensor out = relu_->forward(bn1_->forward(conv1_->forward(x)));
  out = relu2_->forward(bn2_->forward(conv2_->forward(out)));
  out = bn3_->forward(conv3_->forward(out));
  const Tensor identity = downsample_ ? downsample_->forward(x) : x;
  return relu_out_->forward(add_.forward(out, identity));
}

template <class P>
Tensor Bottleneck<P>::backward(const Tensor& dy) {
  return detail::explicit_backward<P>(*this, dy, [&] {
    const Tensor g = relu_out_->backward(dy);
    const Tensor g_identity = downsample_ ? downsample_->backward(g) : g;
    Tensor g_main = conv3_->backward(bn3_->backward(g));
    g_main = conv2_->backward(bn2_->backward(relu2_->backward(g_main)));
    g_main = conv1_->backward(bn1_->backward(relu_->backward(g_main)));
    return add_.accumulate(g_identity, g_main);
  });
}

#define STRATA_NN_INSTANTIATE(P) \
  template class ResidualAdd<P>; \
  template class Downsample<P>;  \
  template class BasicBlock<P>;  \
  template class Bottleneck<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
