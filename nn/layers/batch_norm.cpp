#include "nn/layers/batch_norm.h"

#include "autograd/functions.h"
#include "ops/shape_rules.h"

namespace strata::nn {

template <class P>
BatchNorm2d<P>::BatchNorm2d(const P& p, int64_t channels, const BatchNormOptions& o)
    : p_(p), channels_(channels), o_(o) {
  STRATA_CHECK(channels > 0, "BatchNorm2d: channels must be positive, got ", channels);
  const Device dev = p_.device();
  weight_ = register_parameter("weight", detail::make_filled(dev, Shape{channels}, o.dtype, 1.0));
  bias_ = register_parameter("bias", detail::make_filled(dev, Shape{channels}, o.dtype, 0.0));
  running_mean_ = register_buffer("running_mean", detail::make_filled(dev, Shape{channels}, o.dtype, 0.0));
  running_var_ = register_buffer("running_var", detail::make_filled(dev, Shape{channels}, o.dtype, 1.0));
  num_batches_tracked_ =
      register_buffer("num_batches_tracked", detail::make_filled(Device::cpu(), Shape{}, DType::i64, 0.0));
}

template <class P>
std::string BatchNorm2d<P>::extra_repr() const {
  return std::to_string(channels_) + ", eps=" + std::to_string(o_.eps) + ", momentum=" + std::to_string(o_.momentum);
}

template <class P>
int64_t BatchNorm2d<P>::num_batches_tracked() const {
  return *num_batches_tracked_.data<int64_t>();
}

template <class P>
Tensor BatchNorm2d<P>::forward(const Tensor& x) {
  const bool training = is_training();
  if (training) ++*num_batches_tracked_.data<int64_t>();
  if constexpr (is_direct_v<P>) {
    auto& e = direct_.cache.get(x, training ? 1 : 0, [&](auto& entry, const Tensor& in) {
      entry.plan.plan(*p_.impl, in, weight_, bias_, running_mean_, running_var_, training, o_.momentum, o_.eps);
    });
    e.plan.forward();
    return e.plan.y;
  } else {
    // f16/bf16 input with f32 parameters runs as it is where the backend has such a
    // batch norm (the cuda backend); any other dtype mix goes through casts.
    const bool native = ops::batch_norm_param_dtype(x) == weight_.dtype() &&
                        p_.supports(ops::OpId::batch_norm_fwd, x.dtype()) &&
                        p_.supports(ops::OpId::batch_norm_bwd, x.dtype());
    if (x.dtype() != weight_.dtype() && !native) {
      // Mixed precision on a backend without f16/bf16 batch norm (the CPU ones; the
      // cuda backend takes f16/bf16 input with f32 statistics directly): statistics,
      // affine parameters and the normalisation in the parameters' dtype (f32), the
      // output back in the input's dtype and layout, at two extra passes over the
      // activation.
      const Tensor y = autograd::batch_norm(p_, autograd::cast(p_, x, weight_.dtype(), MemoryFormat::contiguous),
                                            weight_, bias_, running_mean_, running_var_, training, o_.momentum,
                                            o_.eps);
      const MemoryFormat fmt =
          x.is_channels_last() && !x.is_contiguous() ? MemoryFormat::channels_last : MemoryFormat::contiguous;
      return autograd::cast(p_, y, x.dtype(), fmt);
    }
    return autograd::batch_norm(p_, x, weight_, bias_, running_mean_, running_var_, training, o_.momentum, o_.eps);
  }
}

template <class P>
Tensor BatchNorm2d<P>::backward(const Tensor& dy) {
  if constexpr (is_direct_v<P>) {
    auto& e = detail::latest_entry(direct_.cache, "BatchNorm2d");
    if (needs_rebind(e.dy, dy)) {
      e.plan.plan_backward(dy);
      e.dy = dy;
    }
    auto& impl = *p_.impl;
    detail::release_grad_buffer(impl, weight_, e.plan.dgamma);
    detail::release_grad_buffer(impl, bias_, e.plan.dbeta);
    e.plan.backward();
    detail::accumulate_grad(impl, weight_, e.plan.dgamma);
    detail::accumulate_grad(impl, bias_, e.plan.dbeta);
    return e.plan.dx;
  } else {
    return Module::backward(dy);
  }
}

template <class P>
int64_t BatchNorm2d<P>::plans_made() const {
  if constexpr (is_direct_v<P>)
    return direct_.cache.plans_made();
  else
    return 0;
}

#define STRATA_NN_INSTANTIATE(P) template class BatchNorm2d<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
