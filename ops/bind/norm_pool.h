#pragma once
// Batch norm, the poolings and space-to-depth, each with its backward (bound.h): the front end
// (ops/norm_pool_ops.cpp) and direct mode's plans (ops/direct/plans.h) both bind here.
#include <utility>

#include "strata/ops/bind/bound.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/functional.h"
#include "strata/ops/validate.h"

namespace strata::ops::bind {

// z, relu: fused, y = relu?(bn(x) + z); fused evaluation saves no statistics (no backward
// follows it); fused training saves the ReLU's mask. sync: op_args.h.
template <class D>
Bound<OpId::batch_norm_fwd, BatchNormOut> batch_norm_fwd(const D& d, const Tensor& x, const Tensor& gamma,
                                                         const Tensor& beta, const Tensor& running_mean,
                                                         const Tensor& running_var, bool training, double momentum,
                                                         double eps, const Tensor& z = Tensor(), bool relu = false,
                                                         ChannelSumReducer* sync = nullptr) {
  const int64_t c =
      validate_batch_norm(d, x, gamma, beta, running_mean, running_var, training, momentum, eps, z, relu, sync);
  const DType st = batch_norm_param_dtype(x);
  BatchNormOut o;
  o.y = direct::planned_empty_like(x, x.sizes());
  if (training || !(z.defined() || relu)) {
    o.save_mean = direct::planned_empty(Shape{c}, st, x.device());
    o.save_invstd = direct::planned_empty(Shape{c}, st, x.device());
  }
  if (training && relu) o.relu_mask = direct::planned_empty(Shape{relu_mask_bytes(x.numel())}, DType::u8, x.device());
  return {{.x = x,
           .gamma = gamma,
           .beta = beta,
           .running_mean = running_mean,
           .running_var = running_var,
           .y = o.y,
           .save_mean = o.save_mean,
           .save_invstd = o.save_invstd,
           .eps = eps,
           .momentum = momentum,
           .training = training,
           .z = z,
           .relu = relu,
           .relu_mask = o.relu_mask,
           .sync = active_sync(sync)},
          std::move(o)};
}

// want_dz: the residual's gradient too (dy itself without a ReLU). weight, bias: the parameters
// whose gradients' homes take dgamma and dbeta (a plan's), when given.
template <class D>
Bound<OpId::batch_norm_bwd, BatchNormGrads> batch_norm_bwd(const D& d, const Tensor& x, const Tensor& dy,
                                                           const Tensor& gamma, const Tensor& save_mean,
                                                           const Tensor& save_invstd, bool training,
                                                           const Tensor& relu_mask, bool want_dz,
                                                           ChannelSumReducer* sync, const Tensor& weight = Tensor(),
                                                           const Tensor& bias = Tensor()) {
  const int64_t c = validate_batch_norm_bwd(d, x, dy, gamma, save_mean, save_invstd, relu_mask, training, sync);
  const DType st = batch_norm_param_dtype(x);
  BatchNormGrads g;
  g.dx = direct::planned_empty_like(x, x.sizes());
  g.dgamma = detail::gradient(weight, Shape{c}, st, x.device());
  g.dbeta = detail::gradient(bias, Shape{c}, st, x.device());
  if (want_dz) g.dz = relu_mask.defined() ? direct::planned_empty_like(x, x.sizes()) : dy;
  return {{.x = x,
           .dy = dy,
           .gamma = gamma,
           .save_mean = save_mean,
           .save_invstd = save_invstd,
           .dx = g.dx,
           .dgamma = g.dgamma,
           .dbeta = g.dbeta,
           .training = training,
           .relu_mask = relu_mask,
           .dz = relu_mask.defined() ? TensorView(g.dz) : TensorView(),
           .sync = active_sync(sync)},
          std::move(g)};
}

template <class D>
Bound<OpId::max_pool2d_fwd, Tensor> max_pool2d_fwd(const D& d, const Tensor& x, const Pool2dParams& p) {
  Tensor y = direct::planned_empty_like(x, validate_max_pool2d(d, x, p));
  return {{x, y, p}, std::move(y)};
}

template <class D>
Bound<OpId::max_pool2d_bwd, Tensor> max_pool2d_bwd(const D& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                                                   const Pool2dParams& p) {
  validate_max_pool2d_bwd(d, x, y, dy, p);
  Tensor dx = direct::planned_empty_like(x, x.sizes());
  return {{x, y, dy, dx, p}, std::move(dx)};
}

template <class D>
Bound<OpId::avg_pool2d_fwd, Tensor> avg_pool2d_fwd(const D& d, const Tensor& x, const Pool2dParams& p) {
  Tensor y = direct::planned_empty_like(x, validate_avg_pool2d(d, x, p));
  return {{x, y, p}, std::move(y)};
}

// x_like: the forward's input (its sizes and layout).
template <class D>
Bound<OpId::avg_pool2d_bwd, Tensor> avg_pool2d_bwd(const D& d, const Tensor& dy, const Tensor& x_like,
                                                   const Pool2dParams& p) {
  validate_avg_pool2d_bwd(d, dy, x_like, p);
  Tensor dx = direct::planned_empty_like(x_like, x_like.sizes(), dy.dtype());
  return {{dy, dx, p}, std::move(dx)};
}

template <class D>
Bound<OpId::global_avg_pool_fwd, Tensor> global_avg_pool_fwd(const D& d, const Tensor& x) {
  const Shape out = validate_global_avg_pool(d, x);  // before x.dtype(): x may be undefined
  Tensor y = direct::planned_empty(out, x.dtype(), x.device());
  return {{x, y}, std::move(y)};
}

template <class D>
Bound<OpId::global_avg_pool_bwd, Tensor> global_avg_pool_bwd(const D& d, const Tensor& dy, const Tensor& x_like) {
  validate_global_avg_pool_bwd(d, dy, x_like);
  Tensor dx = direct::planned_empty_like(x_like, x_like.sizes(), dy.dtype());
  return {{dy, dx}, std::move(dx)};
}

template <class D>
Bound<OpId::space_to_depth_fwd, Tensor> space_to_depth_fwd(const D& d, const Tensor& x, const SpaceToDepthParams& p) {
  const SpaceToDepthParams q = validate_space_to_depth(d, x, p);
  Tensor y = direct::planned_empty_like(x, space_to_depth_out_shape(x, q));
  return {{x, y, q}, std::move(y)};
}

// into: a buffer of the caller's for dx (a parameter's gradient, planned_grad), else a new one.
template <class D>
Bound<OpId::space_to_depth_bwd, Tensor> space_to_depth_bwd(const D& d, const Tensor& dy, const Tensor& x_like,
                                                           const SpaceToDepthParams& p, const Tensor& into = Tensor()) {
  const SpaceToDepthParams q = validate_space_to_depth_bwd(d, dy, x_like, p);
  Tensor dx = detail::given_or_new("space_to_depth_bwd", "dx", into, x_like.sizes(), dy.dtype(), x_like.device(),
                                   Tensor::format_like(x_like, x_like.sizes()));
  return {{dy, dx, q}, std::move(dx)};
}

}  // namespace strata::ops::bind
