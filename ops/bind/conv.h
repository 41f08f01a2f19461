#pragma once
// conv2d and its backward (bound.h): ops::conv2d* and direct mode's Conv2dPlan both bind here.
#include <cstdint>

#include "strata/ops/bind/bound.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/validate.h"

namespace strata::ops::bind {

// z, relu: the inference epilogue (op_args.h); into_z: y is z, written over; w_version: op_args.h.
template <class D>
Bound<OpId::conv2d_fwd, Tensor> conv2d_fwd(const D& d, const Tensor& x, const Tensor& w, const Tensor& b,
                                           const Conv2dParams& p, const Tensor& z = Tensor(), bool relu = false,
                                           const uint64_t* w_version = nullptr, bool into_z = false) {
  const Shape out = validate_conv2d(d, x, w, b, p, z, relu, into_z);
  Bound<OpId::conv2d_fwd, Tensor> r;
  r.out = into_z ? z : direct::planned_empty_like(x, out);
  r.args = {x, w, b, r.out, p};
  r.args.z = z;
  r.args.relu = relu;
  r.args.w_version = w_version;
  return r;
}

// The backward: dx of x_sizes in layout fmt.
template <class D>
Bound<OpId::conv2d_bwd_data, Tensor> conv2d_bwd_data(const D& d, const Tensor& dy, const Tensor& w,
                                                     const Shape& x_sizes, const Conv2dParams& p, MemoryFormat fmt) {
  check_input(d, OpId::conv2d_bwd_data, "grad_output", dy);
  Bound<OpId::conv2d_bwd_data, Tensor> r;
  r.out = direct::planned_empty(x_sizes, dy.dtype(), dy.device(), fmt);
  validate_conv2d_bwd_data(d, dy, w, r.out, p);
  r.args = {dy, w, r.out, p};
  return r;
}

// dw of w_sizes in layout fmt, or in weight's gradient home when weight is given (a plan's).
template <class D>
Bound<OpId::conv2d_bwd_weight, Tensor> conv2d_bwd_weight(const D& d, const Tensor& x, const Tensor& dy,
                                                         const Shape& w_sizes, const Conv2dParams& p,
                                                         MemoryFormat fmt, const Tensor& weight = Tensor()) {
  check_input(d, OpId::conv2d_bwd_weight, "input", x);
  Bound<OpId::conv2d_bwd_weight, Tensor> r;
  r.out = weight.defined() ? direct::planned_grad(weight, w_sizes, x.dtype())
                           : direct::planned_empty(w_sizes, x.dtype(), x.device(), fmt);
  validate_conv2d_bwd_weight(d, x, dy, r.out, p);
  r.args = {x, dy, r.out, p};
  return r;
}

// db [C]; in bias's gradient home when bias is given.
template <class D>
Bound<OpId::conv2d_bwd_bias, Tensor> conv2d_bwd_bias(const D& d, const Tensor& dy, const Tensor& bias = Tensor()) {
  const Shape out = validate_conv2d_bwd_bias(d, dy);
  Bound<OpId::conv2d_bwd_bias, Tensor> r;
  r.out = bias.defined() ? direct::planned_grad(bias, out, dy.dtype()) : direct::planned_empty(out, dy.dtype(), dy.device());
  r.args = {dy, r.out};
  return r;
}

}  // namespace strata::ops::bind
