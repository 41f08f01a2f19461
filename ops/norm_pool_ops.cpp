#include "strata/ops/frontend_support.h"
#include "strata/ops/shape_rules.h"

namespace strata::ops {
using detail::check_input;

template <class D>
BatchNormOut batch_norm(const D& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        const Tensor& running_mean, const Tensor& running_var, bool training, double momentum,
                        double eps) {
  const int64_t c = batch_norm_channels(x, gamma, beta, running_mean, running_var);
  STRATA_CHECK(eps > 0 && momentum >= 0 && momentum <= 1, "batch_norm: eps must be > 0 and momentum in [0,1], got eps ",
               eps, " momentum ", momentum);
  if (training)
    STRATA_CHECK(x.numel() / c > 1, "batch_norm: training needs more than one value per channel, got input ",
                 x.str());
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"input", &x}, {"weight", &gamma},
                                {"bias", &beta}, {"running_mean", &running_mean}, {"running_var", &running_var}})
    check_input(d, OpId::batch_norm_fwd, name, *t);
  const DType st = batch_norm_param_dtype(x);
  BatchNormOut out{Tensor::empty_like(x, x.sizes()), Tensor::empty(Shape{c}, st, x.device()),
                   Tensor::empty(Shape{c}, st, x.device())};
  BatchNormFwdArgs a{x, gamma, beta, running_mean, running_var, out.y, out.save_mean, out.save_invstd};
  a.eps = eps;
  a.momentum = momentum;
  a.training = training;
  d.batch_norm_fwd(a);
  return out;
}

template <class D>
BatchNormGrads batch_norm_bwd(const D& d, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                              const Tensor& save_mean, const Tensor& save_invstd, bool training) {
  check_float("batch_norm_bwd", "input", x);
  STRATA_CHECK(x.dim() == 2 || x.dim() == 4, "batch_norm_bwd: input must be [N,C] or [N,C,H,W], got ", x.str());
  check_defined("batch_norm_bwd", "grad_output", dy);
  check_same_shape("batch_norm_bwd", "input", x, "grad_output", dy);
  check_same_dtype("batch_norm_bwd", "grad_output", dy, "input", x);
  const int64_t c = x.size(1);
  check_batch_norm_param("batch_norm_bwd", "weight", gamma, x);
  check_batch_norm_param("batch_norm_bwd", "save_mean", save_mean, x);
  check_batch_norm_param("batch_norm_bwd", "save_invstd", save_invstd, x);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"input", &x}, {"grad_output", &dy},
                                {"weight", &gamma}, {"save_mean", &save_mean}, {"save_invstd", &save_invstd}})
    check_input(d, OpId::batch_norm_bwd, name, *t);
  const DType st = batch_norm_param_dtype(x);
  BatchNormGrads g{Tensor::empty_like(x, x.sizes()), Tensor::empty(Shape{c}, st, x.device()),
                   Tensor::empty(Shape{c}, st, x.device())};
  BatchNormBwdArgs a{x, dy, gamma, save_mean, save_invstd, g.dx, g.dgamma, g.dbeta};
  a.training = training;
  d.batch_norm_bwd(a);
  return g;
}

template <class D>
Tensor max_pool2d(const D& d, const Tensor& x, const Pool2dParams& p) {
  const Shape out = pool2d_out_shape("max_pool2d", x, p);
  check_input(d, OpId::max_pool2d_fwd, "input", x);
  Tensor y = Tensor::empty_like(x, out);
  d.max_pool2d_fwd(MaxPool2dFwdArgs{x, y, p});
  return y;
}

template <class D>
Tensor max_pool2d_bwd(const D& d, const Tensor& x, const Tensor& y, const Tensor& dy, const Pool2dParams& p) {
  const Shape out = pool2d_out_shape("max_pool2d_bwd", x, p);
  check_defined("max_pool2d_bwd", "output", y);
  check_defined("max_pool2d_bwd", "grad_output", dy);
  STRATA_CHECK(out == dy.sizes() && out == y.sizes(), "max_pool2d_bwd: grad_output ", dy.str(), " and output ",
               y.str(), " must be ", out.str(), " for input ", x.str());
  check_same_dtype("max_pool2d_bwd", "output", y, "input", x);
  check_same_dtype("max_pool2d_bwd", "grad_output", dy, "input", x);
  check_input(d, OpId::max_pool2d_bwd, "input", x);
  check_input(d, OpId::max_pool2d_bwd, "output", y);
  check_input(d, OpId::max_pool2d_bwd, "grad_output", dy);
  Tensor dx = Tensor::empty_like(x, x.sizes());
  d.max_pool2d_bwd(MaxPool2dBwdArgs{x, y, dy, dx, p});
  return dx;
}

template <class D>
Tensor avg_pool2d(const D& d, const Tensor& x, const Pool2dParams& p) {
  const Shape out = pool2d_out_shape("avg_pool2d", x, p);
  check_input(d, OpId::avg_pool2d_fwd, "input", x);
  Tensor y = Tensor::empty_like(x, out);
  d.avg_pool2d_fwd(AvgPool2dFwdArgs{x, y, p});
  return y;
}

template <class D>
Tensor avg_pool2d_bwd(const D& d, const Tensor& dy, const Tensor& x_like, const Pool2dParams& p) {
  const Shape out = pool2d_out_shape("avg_pool2d_bwd", x_like, p);
  check_defined("avg_pool2d_bwd", "grad_output", dy);
  STRATA_CHECK(out == dy.sizes(), "avg_pool2d_bwd: grad_output ", dy.str(), " must be ", out.str(), " for input ",
               x_like.str());
  check_input(d, OpId::avg_pool2d_bwd, "grad_output", dy);
  // Only x_like's sizes are read, but the gradient is allocated on its device.
  check_device("avg_pool2d_bwd", "input", x_like, d.device(), d.backend_name());
  Tensor dx = Tensor::empty_like(x_like, x_like.sizes(), dy.dtype());
  d.avg_pool2d_bwd(AvgPool2dBwdArgs{dy, dx, p});
  return dx;
}

template <class D>
Tensor global_avg_pool(const D& d, const Tensor& x) {
  const Shape out = global_avg_pool_out_shape(x);
  check_input(d, OpId::global_avg_pool_fwd, "input", x);
  Tensor y = Tensor::empty(out, x.dtype(), x.device());
  d.global_avg_pool_fwd(GlobalAvgPoolFwdArgs{x, y});
  return y;
}

template <class D>
Tensor global_avg_pool_bwd(const D& d, const Tensor& dy, const Tensor& x_like) {
  const Shape out = global_avg_pool_out_shape(x_like);
  check_defined("global_avg_pool_bwd", "grad_output", dy);
  STRATA_CHECK(out == dy.sizes(), "global_avg_pool_bwd: grad_output ", dy.str(), " must be ", out.str(),
               " for input ", x_like.str());
  check_input(d, OpId::global_avg_pool_bwd, "grad_output", dy);
  check_device("global_avg_pool_bwd", "input", x_like, d.device(), d.backend_name());
  Tensor dx = Tensor::empty_like(x_like, x_like.sizes(), dy.dtype());
  d.global_avg_pool_bwd(GlobalAvgPoolBwdArgs{dy, dx});
  return dx;
}

#define STRATA_OPS_INSTANTIATE(D)                                                                                 \
  template BatchNormOut batch_norm<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,      \
                                      const Tensor&, bool, double, double);                                      \
  template BatchNormGrads batch_norm_bwd<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, \
                                            const Tensor&, bool);                                                \
  template Tensor max_pool2d<D>(const D&, const Tensor&, const Pool2dParams&);                                   \
  template Tensor max_pool2d_bwd<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Pool2dParams&); \
  template Tensor avg_pool2d<D>(const D&, const Tensor&, const Pool2dParams&);                                   \
  template Tensor avg_pool2d_bwd<D>(const D&, const Tensor&, const Tensor&, const Pool2dParams&);                \
  template Tensor global_avg_pool<D>(const D&, const Tensor&);                                                   \
  template Tensor global_avg_pool_bwd<D>(const D&, const Tensor&, const Tensor&);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
