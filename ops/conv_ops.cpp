#include "strata/ops/frontend_support.h"
#include "strata/ops/shape_rules.h"

namespace strata::ops {
using detail::check_input;

template <class D>
Tensor conv2d(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  const Shape out = conv2d_out_shape(x, w, b, p);
  check_input(d, OpId::conv2d_fwd, "input", x);
  check_input(d, OpId::conv2d_fwd, "weight", w);
  if (b.defined()) check_input(d, OpId::conv2d_fwd, "bias", b);
  Tensor y = Tensor::empty_like(x, out);
  d.conv2d_fwd(Conv2dFwdArgs{x, w, b, y, p});
  return y;
}

template <class D>
Tensor conv2d_bwd_data(const D& d, const Tensor& dy, const Tensor& w, const Shape& x_sizes, const Conv2dParams& p,
                       MemoryFormat fmt) {
  check_input(d, OpId::conv2d_bwd_data, "grad_output", dy);
  check_input(d, OpId::conv2d_bwd_data, "weight", w);
  check_same_dtype("conv2d_bwd_data", "grad_output", dy, "weight", w);
  Tensor dx = Tensor::empty(x_sizes, dy.dtype(), dy.device(), fmt);
  STRATA_CHECK(conv2d_out_shape(dx, w, Tensor(), p) == dy.sizes(), "conv2d_bwd_data: grad_output ", dy.str(),
               " does not match the forward output for input ", x_sizes.str(), " and weight ", w.sizes().str());
  d.conv2d_bwd_data(Conv2dBwdDataArgs{dy, w, dx, p});
  return dx;
}

template <class D>
Tensor conv2d_bwd_weight(const D& d, const Tensor& x, const Tensor& dy, const Shape& w_sizes, const Conv2dParams& p) {
  check_input(d, OpId::conv2d_bwd_weight, "input", x);
  check_input(d, OpId::conv2d_bwd_weight, "grad_output", dy);
  check_same_dtype("conv2d_bwd_weight", "grad_output", dy, "input", x);
  Tensor dw = Tensor::empty(w_sizes, x.dtype(), x.device());
  STRATA_CHECK(conv2d_out_shape(x, dw, Tensor(), p) == dy.sizes(), "conv2d_bwd_weight: grad_output ", dy.str(),
               " does not match the forward output for input ", x.sizes().str(), " and weight ", w_sizes.str());
  d.conv2d_bwd_weight(Conv2dBwdWeightArgs{x, dy, dw, p});
  return dw;
}

template <class D>
Tensor conv2d_bwd_bias(const D& d, const Tensor& dy) {
  check_rank("conv2d_bwd_bias", "grad_output", dy, 4);
  check_input(d, OpId::conv2d_bwd_bias, "grad_output", dy);
  Tensor db = Tensor::empty(Shape{dy.size(1)}, dy.dtype(), dy.device());
  d.conv2d_bwd_bias(Conv2dBwdBiasArgs{dy, db});
  return db;
}

#define STRATA_OPS_INSTANTIATE(D)                                                                              \
  template Tensor conv2d<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&);      \
  template Tensor conv2d_bwd_data<D>(const D&, const Tensor&, const Tensor&, const Shape&, const Conv2dParams&, \
                                     MemoryFormat);                                                           \
  template Tensor conv2d_bwd_weight<D>(const D&, const Tensor&, const Tensor&, const Shape&,                   \
                                       const Conv2dParams&);                                                  \
  template Tensor conv2d_bwd_bias<D>(const D&, const Tensor&);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
