#pragma once
// The tensor API's ops beyond the element-wise ones: reductions over dims, softmax, the batched
// matrix product, index_select and index_add (bound.h): the front end (ops/tensor_ops.cpp) and
// direct mode's plans (ops/direct/tensor_plans.h) both bind here.
#include <span>
#include <utility>
#include <vector>

#include "strata/ops/bind/bound.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/tensor_ops.h"
#include "strata/ops/validate_tensor.h"

namespace strata::ops::bind {

// fn over the dims of x that `mask` (validate_reduce's) marks, kept as dims of size 1.
template <class D>
Bound<OpId::reduce_dims, Tensor> reduce_dims(const D& d, ReduceFn fn, const Tensor& x, std::span<const int> dims,
                                             std::vector<bool>* mask_out = nullptr) {
  check_defined(reduce_name(fn), "input", x);
  const std::vector<bool> mask = validate_reduce(d, fn, x, dims);
  const bool arg = fn == ReduceFn::argmax || fn == ReduceFn::argmin;
  Tensor y = direct::planned_empty(reduced_shape(x.sizes(), mask, true), arg ? DType::i64 : x.dtype(), x.device());
  if (mask_out) *mask_out = mask;
  return {{x, y, fn}, std::move(y)};
}

// A scalar is softmaxed as [1] (its one element, a view), as PyTorch does.
template <class D>
Bound<OpId::softmax_fwd, Tensor> softmax_fwd(const D& d, const Tensor& x, int dim, bool log) {
  check_defined(log ? "log_softmax" : "softmax", "input", x);
  const int w = validate_softmax(d, x, dim, log);
  const Tensor xs = x.dim() == 0 ? x.view({1}) : x;
  const Tensor y = direct::planned_empty_like(xs, xs.sizes());
  return {{xs, y, w, log}, x.dim() == 0 ? y.view(Shape{}) : y};
}

template <class D>
Bound<OpId::softmax_bwd, Tensor> softmax_bwd(const D& d, const Tensor& y, const Tensor& dy, int dim, bool log) {
  const int w = validate_softmax_bwd(d, y, dy, dim, log);
  const bool scalar = y.dim() == 0;
  const Tensor ys = scalar ? y.view({1}) : y, dys = scalar ? dy.view({1}) : dy;
  const Tensor dx = direct::planned_empty_like(ys, ys.sizes());
  return {{ys, dys, dx, w, log}, scalar ? dx.view(Shape{}) : dx};
}

// y = alpha a b, batched. operand(t, batch): t as a GEMM reads it (gemm_layout.h; the front end
// copies an operand that is not, a plan copies it into a planned buffer at each run), with a
// batch of one broadcast to `batch`; reads[0] and reads[1] hold what the product reads.
template <class D, class Operand>
Bound<OpId::bmm, WithReads<Tensor, 2>> bmm(const D& d, const Tensor& a, const Tensor& b, double alpha,
                                            Operand&& operand) {
  const Shape out = validate_bmm(d, a, b);
  Tensor y = direct::planned_empty(out, a.dtype(), a.device());
  Tensor ra = operand(a, out[0]), rb = operand(b, out[0]);
  return {{ra, rb, y, alpha}, {std::move(y), {std::move(ra), std::move(rb)}}};
}

// x with dim `dim` replaced by its rows at `index`. index_values: the index whose values are
// checked (a plan's recording pass checks stand-in zeros: tensor_plans.h's index_to_check).
template <class D>
Bound<OpId::index_select, Tensor> index_select(const D& d, const Tensor& x, int dim, const Tensor& index,
                                               const Tensor& index_values) {
  const int w = validate_index_select(d, x, dim, index_values);
  Shape out = x.sizes();
  out[w] = index.numel();
  Tensor y = direct::planned_empty(out, x.dtype(), x.device());
  return {{x, index, y, w}, std::move(y)};
}

// y[index] += x along dim (index_select's adjoint), into a given y of `sizes` (zero it first:
// bind::fill) or a new one.
template <class D>
Bound<OpId::index_add, Tensor> index_add(const D& d, const Tensor& x, int dim, const Tensor& index,
                                         const Tensor& index_values, const Shape& sizes,
                                         const Tensor& into = Tensor()) {
  const int w = validate_index_add(d, x, dim, index_values, sizes);
  Tensor y = detail::given_or_new("index_add", "y", into, sizes, x.dtype(), x.device());
  return {{x, index, y, w}, std::move(y)};
}

// index_add_: y[index] += x along dim, in place into a tensor of the caller's (its own checks
// name the in-place op and its self).
template <class D>
Bound<OpId::index_add, Tensor> index_add_into(const D& d, const Tensor& y, int dim, const Tensor& index,
                                              const Tensor& index_values, const Tensor& x) {
  check_defined("index_add_", "self", y);
  check_same_dtype("index_add_", "self", y, "source", x);
  check_device("index_add_", "self", y, d.device(), d.backend_name());
  return index_add(d, x, dim, index, index_values, y.sizes(), y);
}

}  // namespace strata::ops::bind
