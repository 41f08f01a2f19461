#pragma once
// conv2d and its backward (bound.h): ops::conv2d* and direct mode's Conv2dPlan both bind here.
#include <cstdint>
#include <utility>

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
  Tensor y = into_z ? z : direct::planned_empty_like(x, out);
  return {{.x = x, .w = w, .b = b, .y = y, .p = p, .z = z, .relu = relu, .w_version = w_version}, std::move(y)};
}

// The backward: dx of x_sizes in layout fmt.
template <class D>
Bound<OpId::conv2d_bwd_data, Tensor> conv2d_bwd_data(const D& d, const Tensor& dy, const Tensor& w,
                                                     const Shape& x_sizes, const Conv2dParams& p, MemoryFormat fmt) {
  check_input(d, OpId::conv2d_bwd_data, "grad_output", dy);
  Tensor dx = direct::planned_empty(x_sizes, dy.dtype(), dy.device(), fmt);
  validate_conv2d_bwd_data(d, dy, w, dx, p);
  return {{dy, w, dx, p}, std::move(dx)};
}

// dw of w_sizes in layout fmt, or in weight's gradient home when weight is given (a plan's).
template <class D>
Bound<OpId::conv2d_bwd_weight, Tensor> conv2d_bwd_weight(const D& d, const Tensor& x, const Tensor& dy,
                                                         const Shape& w_sizes, const Conv2dParams& p,
                                                         MemoryFormat fmt, const Tensor& weight = Tensor()) {
  check_input(d, OpId::conv2d_bwd_weight, "input", x);
  Tensor dw = detail::gradient(weight, w_sizes, x.dtype(), x.device(), fmt);
  validate_conv2d_bwd_weight(d, x, dy, dw, p);
  return {{x, dy, dw, p}, std::move(dw)};
}

// db [C]; in bias's gradient home when bias is given.
template <class D>
Bound<OpId::conv2d_bwd_bias, Tensor> conv2d_bwd_bias(const D& d, const Tensor& dy, const Tensor& bias = Tensor()) {
  const Shape out = validate_conv2d_bwd_bias(d, dy);
  Tensor db = detail::gradient(bias, out, dy.dtype(), dy.device());
  return {{dy, db}, std::move(db)};
}

}  // namespace strata::ops::bind
