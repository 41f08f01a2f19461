#include "strata/ops/frontend_support.h"

namespace strata::ops {

template <class D>
BatchNormOut batch_norm(const D& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        const Tensor& running_mean, const Tensor& running_var, bool training, double momentum,
                        double eps, const Tensor& z, bool relu, ChannelSumReducer* sync) {
  const int64_t c =
      validate_batch_norm(d, x, gamma, beta, running_mean, running_var, training, momentum, eps, z, relu, sync);
  const DType st = batch_norm_param_dtype(x);
  const bool saves = training || !(z.defined() || relu);  // fused evaluation has no backward
  BatchNormOut out{Tensor::empty_like(x, x.sizes()), saves ? Tensor::empty(Shape{c}, st, x.device()) : Tensor(),
                   saves ? Tensor::empty(Shape{c}, st, x.device()) : Tensor()};
  if (training && relu) out.relu_mask = Tensor::empty(Shape{relu_mask_bytes(x.numel())}, DType::u8, x.device());
  BatchNormFwdArgs a{x, gamma, beta, running_mean, running_var, out.y, out.save_mean, out.save_invstd};
  a.eps = eps;
  a.momentum = momentum;
  a.training = training;
  a.z = z;
  a.relu = relu;
  a.relu_mask = out.relu_mask;
  a.sync = active_sync(sync);
  d.batch_norm_fwd(a);
  return out;
}

template <class D>
BatchNormGrads batch_norm_bwd(const D& d, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                              const Tensor& save_mean, const Tensor& save_invstd, bool training,
                              const Tensor& relu_mask, bool want_dz, ChannelSumReducer* sync) {
  const int64_t c = validate_batch_norm_bwd(d, x, dy, gamma, save_mean, save_invstd, relu_mask, training, sync);
  const DType st = batch_norm_param_dtype(x);
  BatchNormGrads g{Tensor::empty_like(x, x.sizes()), Tensor::empty(Shape{c}, st, x.device()),
                   Tensor::empty(Shape{c}, st, x.device())};
  // Without a ReLU the residual's gradient is dy itself.
  if (want_dz) g.dz = relu_mask.defined() ? Tensor::empty_like(x, x.sizes()) : dy;
  BatchNormBwdArgs a{x, dy, gamma, save_mean, save_invstd, g.dx, g.dgamma, g.dbeta};
  a.training = training;
  a.relu_mask = relu_mask;
  if (relu_mask.defined()) a.dz = g.dz;
  a.sync = active_sync(sync);
  d.batch_norm_bwd(a);
  return g;
}

template <class D>
Tensor max_pool2d(const D& d, const Tensor& x, const Pool2dParams& p) {
  const Shape out = validate_max_pool2d(d, x, p);
  Tensor y = Tensor::empty_like(x, out);
  d.max_pool2d_fwd(MaxPool2dFwdArgs{x, y, p});
  return y;
}

template <class D>
Tensor max_pool2d_bwd(const D& d, const Tensor& x, const Tensor& y, const Tensor& dy, const Pool2dParams& p) {
  validate_max_pool2d_bwd(d, x, y, dy, p);
  Tensor dx = Tensor::empty_like(x, x.sizes());
  d.max_pool2d_bwd(MaxPool2dBwdArgs{x, y, dy, dx, p});
  return dx;
}

template <class D>
Tensor avg_pool2d(const D& d, const Tensor& x, const Pool2dParams& p) {
  const Shape out = validate_avg_pool2d(d, x, p);
  Tensor y = Tensor::empty_like(x, out);
  d.avg_pool2d_fwd(AvgPool2dFwdArgs{x, y, p});
  return y;
}

template <class D>
Tensor avg_pool2d_bwd(const D& d, const Tensor& dy, const Tensor& x_like, const Pool2dParams& p) {
  validate_avg_pool2d_bwd(d, dy, x_like, p);
  Tensor dx = Tensor::empty_like(x_like, x_like.sizes(), dy.dtype());
  d.avg_pool2d_bwd(AvgPool2dBwdArgs{dy, dx, p});
  return dx;
}

template <class D>
Tensor global_avg_pool(const D& d, const Tensor& x) {
  const Shape out = validate_global_avg_pool(d, x);
  Tensor y = Tensor::empty(out, x.dtype(), x.device());
  d.global_avg_pool_fwd(GlobalAvgPoolFwdArgs{x, y});
  return y;
}

template <class D>
Tensor global_avg_pool_bwd(const D& d, const Tensor& dy, const Tensor& x_like) {
  validate_global_avg_pool_bwd(d, dy, x_like);
  Tensor dx = Tensor::empty_like(x_like, x_like.sizes(), dy.dtype());
  d.global_avg_pool_bwd(GlobalAvgPoolBwdArgs{dy, dx});
  return dx;
}

template <class D>
Tensor space_to_depth(const D& d, const Tensor& x, const SpaceToDepthParams& p) {
  const SpaceToDepthParams r = validate_space_to_depth(d, x, p);
  Tensor y = Tensor::empty_like(x, space_to_depth_out_shape(x, r));
  d.space_to_depth_fwd(SpaceToDepthArgs{x, y, r});
  return y;
}

template <class D>
Tensor space_to_depth_bwd(const D& d, const Tensor& dy, const Tensor& x_like, const SpaceToDepthParams& p) {
  const SpaceToDepthParams r = validate_space_to_depth_bwd(d, dy, x_like, p);
  Tensor dx = Tensor::empty_like(x_like, x_like.sizes(), dy.dtype());
  d.space_to_depth_bwd(SpaceToDepthBwdArgs{dy, dx, r});
  return dx;
}

#define STRATA_OPS_INSTANTIATE(D)                                                                                 \
  template BatchNormOut batch_norm<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,      \
                                      const Tensor&, bool, double, double, const Tensor&, bool,                  \
                                      ChannelSumReducer*);                                                       \
  template BatchNormGrads batch_norm_bwd<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, \
                                            const Tensor&, bool, const Tensor&, bool, ChannelSumReducer*);       \
  template Tensor max_pool2d<D>(const D&, const Tensor&, const Pool2dParams&);                                   \
  template Tensor max_pool2d_bwd<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Pool2dParams&); \
  template Tensor avg_pool2d<D>(const D&, const Tensor&, const Pool2dParams&);                                   \
  template Tensor avg_pool2d_bwd<D>(const D&, const Tensor&, const Tensor&, const Pool2dParams&);                \
  template Tensor global_avg_pool<D>(const D&, const Tensor&);                                                   \
  template Tensor global_avg_pool_bwd<D>(const D&, const Tensor&, const Tensor&);                               \
  template Tensor space_to_depth<D>(const D&, const Tensor&, const SpaceToDepthParams&);                          \
  template Tensor space_to_depth_bwd<D>(const D&, const Tensor&, const Tensor&, const SpaceToDepthParams&);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
