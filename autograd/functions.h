#pragma once
// Differentiable ops: the front end (ops/functional.h) plus a tape record when grad
// mode is on and an input requires grad. The backward formulas live next to their
// nodes in autograd/*_fn.cpp, one place per op. D is the dispatch policy
// (ops::VirtualDispatch or ops::StaticDispatch<Impl>).
#include "strata/core/tensor.h"
#include "strata/ops/functional.h"

namespace strata::autograd {

using ops::Conv2dParams;
using ops::Pool2dParams;

template <class D> ops::Conv2dSignature<D> conv2d;  // as ops::conv2d
// As ops::conv2d_fused (the inference epilogue); a backward through it is refused.
template <class D> Tensor conv2d_fused(const D& d, const Tensor& x, const Tensor& w, const Tensor& b,
                                       const Conv2dParams& p, const Tensor& z, bool relu,
                                       const uint64_t* w_version = nullptr, bool into_z = false);
// Training mode updates running_mean/running_var in place. z, relu: fused, y =
// relu?(bn(x) + z) (ops::batch_norm); in evaluation only with gradients off. sync:
// synchronised statistics in training (ops::batch_norm), for the backward too.
template <class D> Tensor batch_norm(const D& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& running_mean, const Tensor& running_var, bool training,
                                     double momentum, double eps, const Tensor& z = Tensor(), bool relu = false,
                                     ops::ChannelSumReducer* sync = nullptr);
template <class D> Tensor relu(const D& d, const Tensor& x);
template <class D> Tensor max_pool2d(const D& d, const Tensor& x, const Pool2dParams& p);
template <class D> Tensor avg_pool2d(const D& d, const Tensor& x, const Pool2dParams& p);
template <class D> Tensor global_avg_pool(const D& d, const Tensor& x);
template <class D> Tensor space_to_depth(const D& d, const Tensor& x, const ops::SpaceToDepthParams& p);
template <class D> Tensor linear(const D& d, const Tensor& x, const Tensor& w, const Tensor& b);
// x w^T + b + z, the residual z added in the product where the backend can (ops::linear_add).
template <class D> Tensor linear_add(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& z);
// The two-layer perceptron y = act(x w1^T + b1) w2^T + b2 (GPT's MLP; NVIDIA Apex's
// FusedDenseGeluDense) as one node: the activation in the first product's epilogue and its
// derivative in the second's backward product (ops::linear_act, ops::linear_act_bwd_data); act a
// parameterless formula of pointwise.def; b1, b2 optional; z, optional, added to the output in the
// second product (ops::linear_add).
template <class D> Tensor mlp(const D& d, const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                              const Tensor& b2, ops::UnaryFn act, const Tensor& z = Tensor());
template <class D> Tensor add(const D& d, const Tensor& a, const Tensor& b);
template <class D> Tensor scale(const D& d, const Tensor& x, double alpha);
// Identity when p == 0 (eval mode is the caller's choice: pass p = 0).
template <class D> Tensor dropout(const D& d, const Tensor& x, double p, uint64_t seed, uint64_t offset);
// Mean over the rows whose label is not ignore_index (NaN when every row is); the tape keeps the
// logits and a log-sum-exp per row, not the softmax (op_args.h, SoftmaxXentFwdArgs).
template <class D> Tensor softmax_xent(const D& d, const Tensor& logits, const Tensor& labels,
                                       int64_t ignore_index = ops::kDefaultIgnoreIndex);
template <class D> Tensor bce_logits(const D& d, const Tensor& logits, const Tensor& targets);
template <class D> Tensor sum(const D& d, const Tensor& x);
template <class D> Tensor mean(const D& d, const Tensor& x);
// A differentiable view with new sizes (flatten); copies when x is not contiguous.
template <class D> Tensor reshape(const D& d, const Tensor& x, const Shape& sizes);
// x converted to dtype dt (x itself when it already is); the gradient flows back
// converted to x's dtype. Mixed precision casts f32 master weights with it.
template <class D> Tensor cast(const D& d, const Tensor& x, DType dt);
// ... and in layout fmt (rank 4; the gradient returns in x's layout).
template <class D> Tensor cast(const D& d, const Tensor& x, DType dt, MemoryFormat fmt);

// The formulas of ops/table/pointwise.def, recorded: y = f(x) and y = f(a, b), their
// backward the row's derivative. One function per row, as in ops/functional.h:
// autograd::exp(d, x), autograd::clamp(d, x, lo, hi), autograd::mul(d, a, b), ...
template <class D> Tensor unary(const D& d, ops::UnaryFn fn, const Tensor& x, double p0 = 0.0, double p1 = 0.0);
template <class D> Tensor binary(const D& d, ops::BinaryFn fn, const Tensor& a, const Tensor& b);
#define STRATA_UNARY(name, params, fwd, bwd, domain)                                                       \
  template <class D, class... P>                                                                           \
  Tensor name(const D& d, const Tensor& x, P... p) {                                                       \
    static_assert(sizeof...(P) == (params), #name " takes " #params " scalar parameter(s)");              \
    return autograd::unary(d, ops::UnaryFn::name, x, ops::detail::nth_param(0, p...),                \
                           ops::detail::nth_param(1, p...));                                          \
  }
#define STRATA_BINARY(name, fwd, bwd_a, bwd_b, domain) \
  template <class D>                                   \
  Tensor name(const D& d, const Tensor& a, const Tensor& b) {                                      \
    return autograd::binary(d, ops::BinaryFn::name, a, b);                                         \
  }
#include "strata/ops/table/pointwise.def"
#undef STRATA_BINARY
#undef STRATA_UNARY

}  // namespace strata::autograd

#include "strata/autograd/tensor_functions.h"  // IWYU pragma: export (the tensor API's functions)
#include "strata/autograd/transformer_functions.h"  // IWYU pragma: export (layer norm, attention)
