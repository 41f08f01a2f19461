#pragma once
// The front end of the tensor API's ops (op_table.def's compare ... index_add): checks,
// broadcasting, output allocation, one backend call. No autograd (autograd/tensor_functions.h
// records these). Element-wise ops broadcast with NumPy's rules; dims may be negative.
#include <span>
#include <string_view>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/ops/table/op_args.h"

namespace strata::ops {

// The broadcast of two shapes (NumPy's rule: align from the last dim; each pair equal or
// one of them 1), or an error naming the op and both shapes.
Shape broadcast_shape(std::string_view op, const Shape& a, const Shape& b);
// x viewed with `sizes` (x's shape broadcast to it: stride 0 on the dims it repeats).
Tensor expand_to(std::string_view op, const Tensor& x, const Shape& sizes);
// dim in [-rank, rank) as a dim in [0, rank); rank 0 takes -1 and 0. An error names the op.
int wrap_dim(std::string_view op, int dim, int rank);
// The dims a reduction of a rank-`rank` tensor runs over (every dim when `dims` is empty),
// as a mask; a dim named twice is an error.
std::vector<bool> reduce_mask(std::string_view op, std::span<const int> dims, int rank);
// x's sizes with the reduced dims set to 1 (keepdim's shape) and without them.
Shape reduced_shape(const Shape& sizes, const std::vector<bool>& mask, bool keepdim);
// x with `sizes` (as many elements): a view when the strides allow (PyTorch's rule for
// reshape, core's view_strides), else a contiguous copy.
Tensor view_or_copy(const Tensor& x, const Shape& sizes);

template <class D> Tensor compare(const D& d, CompareFn fn, const Tensor& a, const Tensor& b);
template <class D> Tensor where(const D& d, const Tensor& cond, const Tensor& a, const Tensor& b);
// fn over `dims` (all when empty); argmax/argmin take one dim, or none for the flattened x.
template <class D> Tensor reduce(const D& d, ReduceFn fn, const Tensor& x, std::span<const int> dims,
                                 bool keepdim);
template <class D> Tensor softmax(const D& d, const Tensor& x, int dim, bool log = false);
template <class D> Tensor softmax_bwd(const D& d, const Tensor& y, const Tensor& dy, int dim, bool log = false);
// a [B, M, K] x b [B, K, N] (either batch may be 1 and broadcast) -> [B, M, N], times alpha.
template <class D> Tensor bmm(const D& d, const Tensor& a, const Tensor& b, double alpha = 1.0);
template <class D> Tensor index_select(const D& d, const Tensor& x, int dim, const Tensor& index);
// zeros of `sizes` with x's rows added at index along dim (index_select's adjoint).
template <class D> Tensor index_add(const D& d, const Tensor& x, int dim, const Tensor& index, const Shape& sizes);
// y[.., index[i], ..] += x[.., i, ..] in place (torch's y.index_add_(dim, index, x)); y a float
// tensor of x's dtype on the backend's device, any strides.
template <class D> void index_add_(const D& d, const Tensor& y, int dim, const Tensor& index, const Tensor& x);

// One function per comparison: ops::eq(d, a, b), ops::lt(d, a, b), ...
#define STRATA_COMPARE(name, expr) \
  template <class D>               \
  Tensor name(const D& d, const Tensor& a, const Tensor& b) { return compare(d, CompareFn::name, a, b); }
#include "strata/ops/table/pointwise.def"
#undef STRATA_COMPARE

}  // namespace strata::ops
