#include "strata/ops/bind/conv.h"
#include "strata/ops/frontend_support.h"

namespace strata::ops {

template <class D>
Tensor conv2d(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  return run_once(d, bind::conv2d_fwd(d, x, w, b, p));
}

template <class D>
Tensor conv2d_fused(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                    const Tensor& z, bool relu, const uint64_t* w_version, bool into_z) {
  return run_once(d, bind::conv2d_fwd(d, x, w, b, p, z, relu, w_version, into_z));
}

template <class D>
Tensor conv2d_bwd_data(const D& d, const Tensor& dy, const Tensor& w, const Shape& x_sizes, const Conv2dParams& p,
                       MemoryFormat fmt) {
  return run_once(d, bind::conv2d_bwd_data(d, dy, w, x_sizes, p, fmt));
}

template <class D>
Tensor conv2d_bwd_weight(const D& d, const Tensor& x, const Tensor& dy, const Shape& w_sizes, const Conv2dParams& p,
                         MemoryFormat fmt) {
  return run_once(d, bind::conv2d_bwd_weight(d, x, dy, w_sizes, p, fmt));
}

template <class D>
Tensor conv2d_bwd_bias(const D& d, const Tensor& dy) {
  return run_once(d, bind::conv2d_bwd_bias(d, dy));
}

#define STRATA_OPS_INSTANTIATE(D)                                                                              \
  template Conv2dSignature<D> conv2d<D>;                                                                      \
  template Tensor conv2d_fused<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&,    \
                                  const Tensor&, bool, const uint64_t*, bool);                                \
  template Tensor conv2d_bwd_data<D>(const D&, const Tensor&, const Tensor&, const Shape&, const Conv2dParams&, \
                                     MemoryFormat);                                                           \
  template Tensor conv2d_bwd_weight<D>(const D&, const Tensor&, const Tensor&, const Shape&,                   \
                                       const Conv2dParams&, MemoryFormat);                                    \
  template Tensor conv2d_bwd_bias<D>(const D&, const Tensor&);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
