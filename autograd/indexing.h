#pragma once
// The tensor API's data-dependent indexing, composed of recorded views and index_select (so
// differentiable, on any backend): the positions are worked out on the host, which reads a
// device index or mask once (PyTorch's masked_select synchronises the same way). Defined with
// the methods in autograd/tensor_methods.cpp.
#include "strata/core/tensor.h"

namespace strata {

// y[..i.., j, ..k..] = x[..i.., index[..i.., j, ..k..], ..k..] along `dim` (torch.gather): index
// an integer tensor of x's rank, no larger than x in the other dims; y has index's sizes.
Tensor gather(const Tensor& x, int dim, const Tensor& index);
// x with src's elements added along `dim` at index (torch.scatter_add): out[.., index[..j..], ..]
// += src[..j..]; index of x's rank, no larger than src, nor than x outside dim.
Tensor scatter_add(const Tensor& x, int dim, const Tensor& index, const Tensor& src);
// The elements of x where mask (u8, broadcast with x) is nonzero, in row-major order, as a
// rank-1 tensor (torch.masked_select, x[mask]).
Tensor masked_select(const Tensor& x, const Tensor& mask);

}  // namespace strata
