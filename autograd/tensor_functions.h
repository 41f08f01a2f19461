#pragma once
// The tensor API's differentiable functions (ops/tensor_ops.h recorded on the tape), and the
// views the tape follows. Broadcasting binary ops (autograd::mul ... in functions.h, add) expand
// their operands with autograd::expand, whose backward sums over the repeated dims; matmul is
// views around bmm. D as in functions.h.
#include <span>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/ops/tensor_ops.h"

namespace strata::autograd {

// x viewed with `sizes` (broadcast: stride 0 on the repeated dims); backward sums over them.
template <class D> Tensor expand(const D& d, const Tensor& x, const Shape& sizes);
template <class D> Tensor permute(const D& d, const Tensor& x, std::span<const int> dims);
template <class D> Tensor transpose(const D& d, const Tensor& x, int dim0, int dim1);
// Elements start, start + step, ... < end along dim (start/end clamped, negatives from the end).
template <class D> Tensor slice(const D& d, const Tensor& x, int dim, int64_t start, int64_t end, int64_t step = 1);
template <class D> Tensor reduce(const D& d, ops::ReduceFn fn, const Tensor& x, std::span<const int> dims,
                                 bool keepdim);
template <class D> Tensor softmax(const D& d, const Tensor& x, int dim, bool log = false);
template <class D> Tensor bmm(const D& d, const Tensor& a, const Tensor& b);
// PyTorch's matmul: 1-D . 1-D, 2-D x 2-D, and batched with broadcast batch dims.
template <class D> Tensor matmul(const D& d, const Tensor& a, const Tensor& b);
template <class D> Tensor where(const D& d, const Tensor& cond, const Tensor& a, const Tensor& b);
template <class D> Tensor index_select(const D& d, const Tensor& x, int dim, const Tensor& index);
template <class D> Tensor cat(const D& d, std::span<const Tensor> xs, int dim);
// var over dims (unbiased: divided by n - 1), composed of the ops above.
template <class D> Tensor var(const D& d, const Tensor& x, std::span<const int> dims, bool unbiased, bool keepdim);

}  // namespace strata::autograd
