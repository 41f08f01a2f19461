#pragma once
// The element-wise ops, the whole-tensor reductions and the memory ops (bound.h): the front end
// (ops/pointwise_ops.cpp, ops/pointwise_formula_ops.cpp, ops/tensor_ops.cpp) and direct mode's
// plans and one-off calls (ops/direct/) both bind here.
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
  Bound<OpId::relu_fwd, Tensor> r;
  r.out = direct::planned_empty_like(x, x.sizes());
  r.args = {x, r.out};
  return r;
}

template <class D>
Bound<OpId::relu_bwd, Tensor> relu_bwd(const D& d, const Tensor& y, const Tensor& dy) {
  validate_relu_bwd(d, y, dy);
  Bound<OpId::relu_bwd, Tensor> r;
  r.out = direct::planned_empty_like(y, y.sizes());
  r.args = {y, dy, r.out};
  return r;
}

// y = a + b, into a given y (a gradient's accumulation) or a new one. Its backward is the identity.
template <class D>
Bound<OpId::add, Tensor> add(const D& d, const Tensor& a, const Tensor& b, const Tensor& into = Tensor()) {
  validate_add(d, a, b);
  Bound<OpId::add, Tensor> r;
  if (into.defined()) check_elementwise_pair(d, OpId::add, "a", a, "output", into);
  r.out = into.defined() ? into : direct::planned_empty_like(a, a.sizes());
  r.args = {a, b, r.out};
  return r;
}

template <class D>
Bound<OpId::scale, Tensor> scale(const D& d, const Tensor& x, double alpha) {
  validate_scale(d, x);
  Bound<OpId::scale, Tensor> r;
  r.out = direct::planned_empty_like(x, x.sizes());
  r.args = {x, r.out, alpha};
  return r;
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
  Bound<OpId::dropout_fwd, DropoutOut> r;
  r.out = {direct::planned_empty_like(x, x.sizes()), direct::planned_empty_like(x, x.sizes(), DType::u8)};
  r.args = {x, r.out.y, r.out.mask};
  r.args.p = p;
  r.args.seed = seed;
  r.args.offset = offset;
  return r;
}

template <class D>
Bound<OpId::dropout_bwd, Tensor> dropout_bwd(const D& d, const Tensor& dy, const Tensor& mask, double p) {
  validate_dropout_bwd(d, dy, mask);
  Bound<OpId::dropout_bwd, Tensor> r;
  r.out = direct::planned_empty_like(dy, dy.sizes());
  r.args = {dy, mask, r.out};
  r.args.p = p;
  return r;
}

// sum and mean of every element (op: OpId::sum or OpId::mean), into a given one-element y or a new scalar.
template <OpId op, class D>
Bound<op, Tensor> reduce_all(const D& d, const Tensor& x, const Tensor& into = Tensor()) {
  static_assert(op == OpId::sum || op == OpId::mean);
  validate_reduce_all(d, op, x, into);
  Bound<op, Tensor> r;
  r.out = into.defined() ? into : direct::planned_empty(Shape{}, x.dtype(), x.device());
  r.args = {x, r.out};
  return r;
}

template <class D>
Bound<OpId::argmax, Tensor> argmax(const D& d, const Tensor& x) {
  validate_argmax(d, x);
  Bound<OpId::argmax, Tensor> r;
  r.out = direct::planned_empty(Shape{x.size(0)}, DType::i64, x.device());
  r.args = {x, r.out};
  return r;
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
  Bound<OpId::unary_fwd, Tensor> r;
  r.out = direct::planned_empty_like(x, x.sizes());
  r.args = {x, r.out, fn, p0, p1};
  return r;
}

template <class D>
Bound<OpId::unary_bwd, Tensor> unary_bwd(const D& d, UnaryFn fn, const Tensor& x, const Tensor& y, const Tensor& dy,
                                         double p0 = 0.0, double p1 = 0.0) {
  validate_unary_bwd(d, fn, x, y, dy);
  Bound<OpId::unary_bwd, Tensor> r;
  r.out = direct::planned_empty_like(x, x.sizes());
  r.args = {x, y, dy, r.out, fn, p0, p1};
  return r;
}

// a and b broadcast to one shape (views with stride 0 where they repeat; the kernels read any strides).
template <class D>
Bound<OpId::binary_fwd, Tensor> binary_fwd(const D& d, BinaryFn fn, const Tensor& a, const Tensor& b) {
  const Broadcast e = broadcast(binary_name(fn), a, b);
  validate_binary(d, fn, e.a, e.b);
  Bound<OpId::binary_fwd, Tensor> r;
  r.out = output_like(a, b, e.sizes, a.dtype());
  r.args = {e.a, e.b, r.out, fn};
  return r;
}

// The gradients asked for (none: no kernel to run, binary_bwd_needed says so).
template <class D>
Bound<OpId::binary_bwd, BinaryGrads> binary_bwd(const D& d, BinaryFn fn, const Tensor& a, const Tensor& b,
                                                const Tensor& y, const Tensor& dy, bool want_da, bool want_db) {
  validate_binary_bwd(d, fn, a, b, y, dy);
  Bound<OpId::binary_bwd, BinaryGrads> r;
  if (want_da) r.out.da = direct::planned_empty_like(a, a.sizes());
  if (want_db) r.out.db = direct::planned_empty_like(b, b.sizes());
  r.args = {a, b, y, dy, r.out.da.defined() ? TensorView(r.out.da) : TensorView(),
            r.out.db.defined() ? TensorView(r.out.db) : TensorView(), fn};
  return r;
}

// u8 a fn b, a and b broadcast.
template <class D>
Bound<OpId::compare, Tensor> compare(const D& d, CompareFn fn, const Tensor& a, const Tensor& b) {
  const Broadcast e = broadcast(compare_name(fn), a, b);
  validate_compare(d, fn, e.a, e.b);
  Bound<OpId::compare, Tensor> r;
  r.out = output_like(a, b, e.sizes, DType::u8);
  r.args = {e.a, e.b, r.out, fn};
  return r;
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
  Bound<OpId::where, Tensor> r;
  r.out = output_like(a, b, out, a.dtype());
  r.args = {ec, ea, eb, r.out};
  return r;
}

}  // namespace strata::ops::bind
