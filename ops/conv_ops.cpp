#include "strata/ops/frontend_support.h"

namespace strata::ops {

template <class D>
Tensor conv2d(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  Tensor y = Tensor::empty_like(x, validate_conv2d(d, x, w, b, p));
  d.conv2d_fwd(Conv2dFwdArgs{x, w, b, y, p});
  return y;
}

template <class D>
Tensor conv2d_fused(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                    const Tensor& z, bool relu, const uint64_t* w_version, bool into_z) {
  const Shape out = validate_conv2d(d, x, w, b, p, z, relu, into_z);
  Tensor y = into_z ? z : Tensor::empty_like(x, out);
  Conv2dFwdArgs a{x, w, b, y, p};
  a.z = z;
  a.relu = relu;
  a.w_version = w_version;
  d.conv2d_fwd(a);
  return y;
}

template <class D>
Tensor conv2d_bwd_data(const D& d, const Tensor& dy, const Tensor& w, const Shape& x_sizes, const Conv2dParams& p,
                       MemoryFormat fmt) {
  check_input(d, OpId::conv2d_bwd_data, "grad_output", dy);
  Tensor dx = Tensor::empty(x_sizes, dy.dtype(), dy.device(), fmt);
  validate_conv2d_bwd_data(d, dy, w, dx, p);
  d.conv2d_bwd_data(Conv2dBwdDataArgs{dy, w, dx, p});
  return dx;
}

template <class D>
Tensor conv2d_bwd_weight(const D& d, const Tensor& x, const Tensor& dy, const Shape& w_sizes, const Conv2dParams& p,
                         MemoryFormat fmt) {
  check_input(d, OpId::conv2d_bwd_weight, "input", x);
  Tensor dw = Tensor::empty(w_sizes, x.dtype(), x.device(), fmt);
  validate_conv2d_bwd_weight(d, x, dy, dw, p);
  d.conv2d_bwd_weight(Conv2dBwdWeightArgs{x, dy, dw, p});
  return dw;
}

template <class D>
Tensor conv2d_bwd_bias(const D& d, const Tensor& dy) {
  const Shape out = validate_conv2d_bwd_bias(d, dy);
  Tensor db = Tensor::empty(out, dy.dtype(), dy.device());
  d.conv2d_bwd_bias(Conv2dBwdBiasArgs{dy, db});
  return db;
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
