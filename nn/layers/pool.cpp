#include "strata/nn/layers/pool.h"

#include "strata/autograd/functions.h"

namespace strata::nn {

namespace {
ops::Pool2dParams pool_params(std::string_view op, int kernel, int stride, int padding) {
  STRATA_CHECK(kernel > 0 && stride >= 0 && padding >= 0 && 2 * padding <= kernel, op,
               ": invalid configuration kernel_size=", kernel, " stride=", stride, " padding=", padding);
  ops::Pool2dParams p;
  p.kernel_h = p.kernel_w = kernel;
  p.stride_h = p.stride_w = stride == 0 ? kernel : stride;
  p.pad_h = p.pad_w = padding;
  p.count_include_pad = true;
  return p;
}
std::string pool_repr(const ops::Pool2dParams& p) {
  return "kernel_size=" + std::to_string(p.kernel_h) + ", stride=" + std::to_string(p.stride_h) +
         ", padding=" + std::to_string(p.pad_h);
}
}  // namespace

template <class P>
MaxPool2d<P>::MaxPool2d(const P& p, int kernel_size, int stride, int padding)
    : p_(p), pp_(pool_params("MaxPool2d", kernel_size, stride, padding)) {}

template <class P>
std::string MaxPool2d<P>::extra_repr() const {
  return pool_repr(pp_);
}

template <class P>
Tensor MaxPool2d<P>::forward(const Tensor& x) {
  return direct_.forward(p_, x, [&](const auto& tape) { return autograd::max_pool2d(tape, x, pp_); }, pp_);
}

template <class P>
Tensor MaxPool2d<P>::backward(const Tensor& dy) {
  return direct_.backward(*this, dy);
}

template <class P>
AvgPool2d<P>::AvgPool2d(const P& p, int kernel_size, int stride, int padding)
    : p_(p), pp_(pool_params("AvgPool2d", kernel_size, stride, padding)) {}

template <class P>
std::string AvgPool2d<P>::extra_repr() const {
  return pool_repr(pp_);
}

template <class P>
Tensor AvgPool2d<P>::forward(const Tensor& x) {
  return direct_.forward(p_, x, [&](const auto& tape) { return autograd::avg_pool2d(tape, x, pp_); }, pp_);
}

template <class P>
Tensor AvgPool2d<P>::backward(const Tensor& dy) {
  return direct_.backward(*this, dy);
}

template <class P>
Tensor GlobalAvgPool<P>::forward(const Tensor& x) {
  return direct_.forward(p_, x, [&](const auto& tape) { return autograd::global_avg_pool(tape, x); });
}

template <class P>
Tensor GlobalAvgPool<P>::backward(const Tensor& dy) {
  return direct_.backward(*this, dy);
}

#define STRATA_NN_INSTANTIATE(P) \
  template class MaxPool2d<P>;   \
  template class AvgPool2d<P>;   \
  template class GlobalAvgPool<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
