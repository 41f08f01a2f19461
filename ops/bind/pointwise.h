#pragma once
// The element-wise ops, the whole-tensor reductions and the memory ops (bound.h): the front end
// (ops/pointwise_ops.cpp, ops/pointwise_formula_ops.cpp, ops/tensor_ops.cpp) and direct mode's
// plans and one-off calls (ops/direct/) both bind here.
#include <utility>

#include "strata/ops/bind/bound.h"
#include "strata/ops/broadcast.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/functional.h"
#include "strata/ops/validate.h"
#include "strata/ops/tensor_ops.h"
#include "strata/ops/validate_tensor.h"

namespace strata::ops::bind {

template <class D>
Bound<OpId::relu_fwd, Tensor> relu_fwd(const D& d, const Tensor& x) {
  validate_relu(d, x);
  Tensor y = direct::planned_empty_like(x, x.sizes());
  return {{x, y}, std::move(y)};
}

template <class D>
Bound<OpId::relu_bwd, Tensor> relu_bwd(const D& d, const Tensor& y, const Tensor& dy) {
  validate_relu_bwd(d, y, dy);
  Tensor dx = direct::planned_empty_like(y, y.sizes());
  return {{y, dy, dx}, std::move(dx)};
}

// y = a + b, into a given y (a gradient's accumulation) or a new one. Its backward is the identity.
template <class D>
Bound<OpId::add, Tensor> add(const D& d, const Tensor& a, const Tensor& b, const Tensor& into = Tensor()) {
  validate_add(d, a, b);
  if (into.defined()) check_elementwise_pair(d, OpId::add, "a", a, "output", into);
  Tensor y = into.defined() ? into : direct::planned_empty_like(a, a.sizes());
  return {{a, b, y}, std::move(y)};
}

template <class D>
Bound<OpId::scale, Tensor> scale(const D& d, const Tensor& x, double alpha) {
  validate_scale(d, x);
  Tensor y = direct::planned_empty_like(x, x.sizes());
  return {{x, y, alpha}, std::move(y)};
}

// y += alpha x, in place.
template <class D>
Bound<OpId::axpy> axpy(const D& d, const Tensor& x, const Tensor& y, double alpha) {
  validate_axpy(d, x, y);
  return {{x, y, alpha}, {}};
}

// The output and its mask; seed and offset are the forward's draw (a plan sets them at each run).
template <class D>
Bound<OpId::dropout_fwd, DropoutOut> dropout_fwd(const D& d, const Tensor& x, double p, uint64_t seed = 0,
                                                 uint64_t offset = 0) {
  validate_dropout(d, x, p);
  DropoutOut o{direct::planned_empty_like(x, x.sizes()), direct::planned_empty_like(x, x.sizes(), DType::u8)};
  return {{.x = x, .y = o.y, .mask = o.mask, .p = p, .seed = seed, .offset = offset}, std::move(o)};
}

template <class D>
Bound<OpId::dropout_bwd, Tensor> dropout_bwd(const D& d, const Tensor& dy, const Tensor& mask, double p) {
  validate_dropout_bwd(d, dy, mask);
  Tensor dx = direct::planned_empty_like(dy, dy.sizes());
  return {{dy, mask, dx, p}, std::move(dx)};
}

// sum and mean of every element (op: OpId::sum or OpId::mean), into a given one-element y or a new scalar.
template <OpId op, class D>
Bound<op, Tensor> reduce_all(const D& d, const Tensor& x, const Tensor& into = Tensor()) {
  static_assert(op == OpId::sum || op == OpId::mean);
  validate_reduce_all(d, op, x, into);
  Tensor y = into.defined() ? into : direct::planned_empty(Shape{}, x.dtype(), x.device());
  return {{x, y}, std::move(y)};
}

template <class D>
Bound<OpId::argmax, Tensor> argmax(const D& d, const Tensor& x) {
  validate_argmax(d, x);
  Tensor y = direct::planned_empty(Shape{x.size(0)}, DType::i64, x.device());
  return {{x, y}, std::move(y)};
}

// Every element of y = value, in place.
template <class D>
Bound<OpId::fill> fill(const D& d, const Tensor& y, double value) {
  validate_fill(d, y);
  return {{y, value}, {}};
}

// dst = src (any dtypes, layouts and devices the backend's copy takes), in place.
template <class D>
Bound<OpId::copy> copy(const D& d, const Tensor& src, const Tensor& dst) {
  validate_copy(d, src, dst);
  return {{src, dst}, {}};
}

// ---- the formulas of pointwise.def
template <class D>
Bound<OpId::unary_fwd, Tensor> unary_fwd(const D& d, UnaryFn fn, const Tensor& x, double p0 = 0.0, double p1 = 0.0) {
  validate_unary(d, fn, x, p0, p1);
  Tensor y = direct::planned_empty_like(x, x.sizes());
  return {{x, y, fn, p0, p1}, std::move(y)};
}

template <class D>
Bound<OpId::unary_bwd, Tensor> unary_bwd(const D& d, UnaryFn fn, const Tensor& x, const Tensor& y, const Tensor& dy,
                                         double p0 = 0.0, double p1 = 0.0) {
  validate_unary_bwd(d, fn, x, y, dy);
  Tensor dx = direct::planned_empty_like(x, x.sizes());
  return {{x, y, dy, dx, fn, p0, p1}, std::move(dx)};
}

// a and b broadcast to one shape (views with stride 0 where they repeat; the kernels read any strides).
template <class D>
Bound<OpId::binary_fwd, Tensor> binary_fwd(const D& d, BinaryFn fn, const Tensor& a, const Tensor& b) {
  const Broadcast e = broadcast(binary_name(fn), a, b);
  validate_binary(d, fn, e.a, e.b);
  Tensor y = output_like(a, b, e.sizes, a.dtype());
  return {{e.a, e.b, y, fn}, std::move(y)};
}

// The gradients asked for (none: no kernel to run, binary_bwd_needed says so).
template <class D>
Bound<OpId::binary_bwd, BinaryGrads> binary_bwd(const D& d, BinaryFn fn, const Tensor& a, const Tensor& b,
                                                const Tensor& y, const Tensor& dy, bool want_da, bool want_db) {
  validate_binary_bwd(d, fn, a, b, y, dy);
  BinaryGrads g;
  if (want_da) g.da = direct::planned_empty_like(a, a.sizes());
  if (want_db) g.db = direct::planned_empty_like(b, b.sizes());
  return {{a, b, y, dy, g.da, g.db, fn}, std::move(g)};  // a gradient not asked for: an undefined view
}

// u8 a fn b, a and b broadcast.
template <class D>
Bound<OpId::compare, Tensor> compare(const D& d, CompareFn fn, const Tensor& a, const Tensor& b) {
  const Broadcast e = broadcast(compare_name(fn), a, b);
  validate_compare(d, fn, e.a, e.b);
  Tensor y = output_like(a, b, e.sizes, DType::u8);
  return {{e.a, e.b, y, fn}, std::move(y)};
}

// cond ? a : b, the three broadcast.
template <class D>
Bound<OpId::where, Tensor> where(const D& d, const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", "condition", cond);
  check_defined("where", "a", a);
  check_defined("where", "b", b);
  const Shape out = broadcast_shape("where", broadcast_shape("where", cond.sizes(), a.sizes()), b.sizes());
  const Tensor ec = expand_to("where", cond, out), ea = expand_to("where", a, out), eb = expand_to("where", b, out);
  validate_where(d, ec, ea, eb);
  Tensor y = output_like(a, b, out, a.dtype());
  return {{ec, ea, eb, y}, std::move(y)};
}

}  // namespace strata::ops::bind
