#include "strata/nn/layers/batch_norm.h"

#include "strata/autograd/functions.h"
#include "strata/ops/shape_rules.h"

namespace strata::nn {

namespace {
// Whether x's batch norm must run in the parameters' dtype between two casts: x has
// another dtype and the backend `b` has no batch norm for x with these parameters as
// they are (the cuda backend takes f16/bf16 x with f32 parameters; the CPU ones do not).
bool needs_casts(const backends::Capabilities& b, const Tensor& x, DType params) {
  if (x.dtype() == params) return false;
  return !(ops::batch_norm_param_dtype(x) == params && b.supports(ops::OpId::batch_norm_fwd, x.dtype()) &&
           b.supports(ops::OpId::batch_norm_bwd, x.dtype()));
}
}  // namespace

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
    auto& impl = *p_.impl;
    auto& e = direct_.cache.get(x, training ? 1 : 0, [&](auto& entry, const Tensor& in) {
      // As the tape branch below: in the parameters' dtype, NCHW, between two casts.
      Tensor bn_in = in;
      if (needs_casts(impl.capabilities(), in, weight_.dtype())) {
        entry.x_in.plan(impl, in, weight_.dtype(), MemoryFormat::contiguous);
        bn_in = entry.x_in.y;
      }
      entry.plan.plan(impl, bn_in, weight_, bias_, running_mean_, running_var_, training, o_.momentum, o_.eps);
      if (entry.x_in.planned()) entry.y_out.plan(impl, entry.plan.y, in.dtype(), in.suggested_format());
    });
    e.x_in.run();
    e.plan.forward();
    e.y_out.run();
    return e.y_out.planned() ? e.y_out.y : e.plan.y;
  } else {
    if (needs_casts(p_.capabilities(), x, weight_.dtype())) {
      // Statistics, affine parameters and the normalisation in the parameters' dtype
      // (f32), the output back in the input's dtype and layout, at two extra passes
      // over the activation.
      const Tensor y = autograd::batch_norm(p_, autograd::cast(p_, x, weight_.dtype(), MemoryFormat::contiguous),
                                            weight_, bias_, running_mean_, running_var_, training, o_.momentum,
                                            o_.eps);
      return autograd::cast(p_, y, x.dtype(), x.suggested_format());
    }
    return autograd::batch_norm(p_, x, weight_, bias_, running_mean_, running_var_, training, o_.momentum, o_.eps);
  }
}

template <class P>
Tensor BatchNorm2d<P>::backward(const Tensor& dy) {
  if constexpr (is_direct_v<P>) {
    auto& e = detail::latest_entry(direct_.cache, "BatchNorm2d");
    auto& impl = *p_.impl;
    if (needs_rebind(e.dy, dy)) {
      if (e.x_in.planned()) {
        e.dy_in.plan(impl, dy, weight_.dtype(), MemoryFormat::contiguous);
        e.plan.plan_backward(e.dy_in.y);
        e.dx_out.plan(impl, e.plan.dx, e.y_out.y.dtype(), e.y_out.y.suggested_format());
      } else {
        e.plan.plan_backward(dy);
      }
      e.dy = dy;
    }
    detail::release_grad_buffer(impl, weight_, e.plan.dgamma);
    detail::release_grad_buffer(impl, bias_, e.plan.dbeta);
    e.dy_in.run();
    e.plan.backward();
    e.dx_out.run();
    detail::accumulate_grad(impl, weight_, e.plan.dgamma);
    detail::accumulate_grad(impl, bias_, e.plan.dbeta);
    return e.dx_out.planned() ? e.dx_out.y : e.plan.dx;
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
