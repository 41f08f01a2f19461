#include "strata/ops/bind/norm_pool.h"
#include "strata/ops/frontend_support.h"

namespace strata::ops {

template <class D>
BatchNormOut batch_norm(const D& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        const Tensor& running_mean, const Tensor& running_var, bool training, double momentum,
                        double eps, const Tensor& z, bool relu, ChannelSumReducer* sync) {
  return run_once(d, bind::batch_norm_fwd(d, x, gamma, beta, running_mean, running_var, training, momentum, eps, z,
                                          relu, sync));
}

template <class D>
BatchNormGrads batch_norm_bwd(const D& d, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                              const Tensor& save_mean, const Tensor& save_invstd, bool training,
                              const Tensor& relu_mask, bool want_dz, ChannelSumReducer* sync) {
  return run_once(d, bind::batch_norm_bwd(d, x, dy, gamma, save_mean, save_invstd, training, relu_mask, want_dz,
                                          sync));
}

template <class D>
Tensor max_pool2d(const D& d, const Tensor& x, const Pool2dParams& p) {
  return run_once(d, bind::max_pool2d_fwd(d, x, p));
}

template <class D>
Tensor max_pool2d_bwd(const D& d, const Tensor& x, const Tensor& y, const Tensor& dy, const Pool2dParams& p) {
  return run_once(d, bind::max_pool2d_bwd(d, x, y, dy, p));
}

template <class D>
Tensor avg_pool2d(const D& d, const Tensor& x, const Pool2dParams& p) {
  return run_once(d, bind::avg_pool2d_fwd(d, x, p));
}

template <class D>
Tensor avg_pool2d_bwd(const D& d, const Tensor& dy, const Tensor& x_like, const Pool2dParams& p) {
  return run_once(d, bind::avg_pool2d_bwd(d, dy, x_like, p));
}

template <class D>
Tensor global_avg_pool(const D& d, const Tensor& x) {
  return run_once(d, bind::global_avg_pool_fwd(d, x));
}

template <class D>
Tensor global_avg_pool_bwd(const D& d, const Tensor& dy, const Tensor& x_like) {
  return run_once(d, bind::global_avg_pool_bwd(d, dy, x_like));
}

template <class D>
Tensor space_to_depth(const D& d, const Tensor& x, const SpaceToDepthParams& p) {
  return run_once(d, bind::space_to_depth_fwd(d, x, p));
}

template <class D>
Tensor space_to_depth_bwd(const D& d, const Tensor& dy, const Tensor& x_like, const SpaceToDepthParams& p) {
  return run_once(d, bind::space_to_depth_bwd(d, dy, x_like, p));
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
