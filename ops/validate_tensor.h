#pragma once
// Validate-and-infer of the tensor API's ops (ops/validate.h says why one function per op):
// each checks its operands (defined, device, dtypes the backend claims, shapes) and returns
// the output's sizes where it has one.
#include <span>

#include "strata/ops/tensor_ops.h"
#include "strata/ops/validate.h"

namespace strata::ops {

// a and b already broadcast to one shape (ops::compare expands them).
template <class D>
void validate_compare(const D& d, CompareFn fn, const Tensor& a, const Tensor& b) {
  check_elementwise_pair(d, OpId::compare, "a", a, "b", b, compare_name(fn));
}

template <class D>
void validate_where(const D& d, const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", "condition", cond);
  check_dtype("where", "condition", cond, DType::u8);
  check_float("where", "a", a);
  check_same_shape("where", "a", a, "b", b);
  check_same_shape("where", "condition", cond, "a", a);
  check_same_dtype("where", "a", a, "b", b);
  check_device("where", "condition", cond, d.device(), d.backend_name());
  check_input(d, OpId::where, "a", a);
  check_input(d, OpId::where, "b", b);
}

inline std::string_view reduce_name(ReduceFn fn) {
  switch (fn) {
    case ReduceFn::sum: return "sum";
    case ReduceFn::mean: return "mean";
    case ReduceFn::max: return "amax";
    case ReduceFn::min: return "amin";
    case ReduceFn::argmax: return "argmax";
    case ReduceFn::argmin: return "argmin";
  }
  return "reduce";
}

// The reduced dims as a mask over x's dims; max/min/arg* refuse an empty reduction.
template <class D>
std::vector<bool> validate_reduce(const D& d, ReduceFn fn, const Tensor& x, std::span<const int> dims) {
  const std::string_view op = reduce_name(fn);
  check_float(op, "input", x);
  check_input(d, OpId::reduce_dims, "input", x, op);
  std::vector<bool> mask = reduce_mask(op, dims, x.dim());
  if (fn == ReduceFn::argmax || fn == ReduceFn::argmin)
    STRATA_CHECK(dims.size() <= 1, op, ": takes one dim (or none, for the flattened input), got ", dims.size());
  if (fn != ReduceFn::sum && fn != ReduceFn::mean)
    for (int i = 0; i < x.dim(); ++i)
      STRATA_CHECK(!mask[i] || x.size(i) > 0, op, ": cannot reduce over dim ", i, " of ", x.str(),
                   ", which has no elements (no identity for ", op, ")");
  return mask;
}

template <class D>
int validate_softmax(const D& d, const Tensor& x, int dim, bool log) {
  const std::string_view op = log ? "log_softmax" : "softmax";
  check_float(op, "input", x);
  check_input(d, OpId::softmax_fwd, "input", x, op);
  return x.dim() == 0 ? 0 : wrap_dim(op, dim, x.dim());
}
template <class D>
int validate_softmax_bwd(const D& d, const Tensor& y, const Tensor& dy, int dim, bool log) {
  const std::string_view op = log ? "log_softmax_bwd" : "softmax_bwd";
  check_defined(op, "output", y);
  check_defined(op, "grad_output", dy);
  check_same_shape(op, "output", y, "grad_output", dy);
  check_same_dtype(op, "output", y, "grad_output", dy);
  check_input(d, OpId::softmax_bwd, "output", y, op);
  check_input(d, OpId::softmax_bwd, "grad_output", dy, op);
  return y.dim() == 0 ? 0 : wrap_dim(op, dim, y.dim());
}

// [B, M, N] for a [B or 1, M, K] x b [B or 1, K, N].
template <class D>
Shape validate_bmm(const D& d, const Tensor& a, const Tensor& b) {
  check_defined("bmm", "a", a);
  check_defined("bmm", "b", b);
  check_rank("bmm", "a", a, 3);
  check_rank("bmm", "b", b, 3);
  check_float("bmm", "a", a);
  check_same_dtype("bmm", "a", a, "b", b);
  check_input(d, OpId::bmm, "a", a);
  check_input(d, OpId::bmm, "b", b);
  STRATA_CHECK(a.size(2) == b.size(1), "bmm: a ", a.sizes().str(), " and b ", b.sizes().str(),
               " cannot be multiplied (a's last dim ", a.size(2), " != b's rows ", b.size(1), ")");
  STRATA_CHECK(a.size(0) == b.size(0) || a.size(0) == 1 || b.size(0) == 1, "bmm: batch sizes of a ",
               a.sizes().str(), " and b ", b.sizes().str(), " differ");
  return Shape{std::max(a.size(0), b.size(0)), a.size(1), b.size(2)};
}

// The index: rank 1, i64 or i32, on the backend's device, `count` entries when count >= 0;
// host indices checked in range.
template <class D>
void check_index(const D& d, std::string_view op, const Tensor& index, int64_t extent, int64_t count = -1) {
  check_defined(op, "index", index);
  check_rank(op, "index", index, 1);
  STRATA_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op,
               ": argument 'index' must be i64 or i32, got ", dtype_name(index.dtype()), " (", index.str(), ")");
  check_device(op, "index", index, d.device(), d.backend_name());
  STRATA_CHECK(count < 0 || index.numel() == count, op, ": argument 'index' ", index.str(), " has ", index.numel(),
               " entries for ", count, " rows");
  if (index.device().type != DeviceType::cpu) return;  // the backend checks device indices
  for (int64_t i = 0; i < index.numel(); ++i) {
    const int64_t v = index.dtype() == DType::i64 ? index.data<int64_t>()[i * index.strides()[0]]
                                                  : index.data<int32_t>()[i * index.strides()[0]];
    STRATA_CHECK(v >= 0 && v < extent, op, ": argument 'index': index[", i, "] = ", v,
                 " is out of range for a dim of size ", extent);
  }
}

template <class D>
int validate_index_select(const D& d, const Tensor& x, int dim, const Tensor& index) {
  check_defined("index_select", "input", x);
  STRATA_CHECK(x.dim() >= 1, "index_select: input ", x.str(), " has no dims to select from");
  const int dd = wrap_dim("index_select", dim, x.dim());
  check_input(d, OpId::index_select, "input", x);
  check_index(d, "index_select", index, x.size(dd));
  return dd;
}
template <class D>
int validate_index_add(const D& d, const Tensor& x, int dim, const Tensor& index, const Shape& sizes) {
  check_defined("index_add", "source", x);
  check_float("index_add", "source", x);
  STRATA_CHECK(x.dim() >= 1 && x.dim() == sizes.size(), "index_add: source ", x.str(), " does not match output sizes ",
               sizes.str());
  const int dd = wrap_dim("index_add", dim, x.dim());
  for (int i = 0; i < x.dim(); ++i)
    STRATA_CHECK(i == dd || x.size(i) == sizes[i], "index_add: source ", x.str(), " and output sizes ", sizes.str(),
                 " differ in dim ", i);
  check_input(d, OpId::index_add, "source", x);
  check_index(d, "index_add", index, sizes[dd], x.size(dd));
  return dd;
}

}  // namespace strata::ops
