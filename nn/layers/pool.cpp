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

template <class P, class Kind>
Pool2d<P, Kind>::Pool2d(const P& p, int kernel_size, int stride, int padding)
    : p_(p), pp_(pool_params(Kind::kName, kernel_size, stride, padding)) {}

template <class P, class Kind>
std::string Pool2d<P, Kind>::extra_repr() const {
  return pool_repr(pp_);
}

template <class P, class Kind>
Tensor Pool2d<P, Kind>::forward(const Tensor& x) {
  return direct_.forward(p_, x, [&](const auto& tape) { return Kind::tape(tape, x, pp_); }, pp_);
}

template <class P, class Kind>
Tensor Pool2d<P, Kind>::backward(const Tensor& dy) {
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

#define STRATA_NN_INSTANTIATE(P)                   \
  template class Pool2d<P, detail::MaxPoolKind>; \
  template class Pool2d<P, detail::AvgPoolKind>; \
  template class GlobalAvgPool<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
