#include "strata/nn/layers/linear.h"

#include "strata/autograd/functions.h"
#include "strata/nn/init.h"

namespace strata::nn {

template <class P>
Linear<P>::Linear(const P& p, int64_t in_features, int64_t out_features, const LinearOptions& o)
    : p_(p), in_(in_features), out_(out_features) {
  STRATA_CHECK(in_features > 0 && out_features > 0, "Linear: invalid configuration in_features=", in_features,
               " out_features=", out_features);
  const Device dev = p_.device();
  weight_ = register_parameter("weight", detail::make_filled(dev, Shape{out_features, in_features}, o.dtype, 0.0));
  if (o.bias) bias_ = register_parameter("bias", detail::make_filled(dev, Shape{out_features}, o.dtype, 0.0));
  init::reset_parameters(*this);  // torch's default, so a layer is usable without a policy
}

template <class P>
std::string Linear<P>::extra_repr() const {
  return "in_features=" + std::to_string(in_) + ", out_features=" + std::to_string(out_) +
         ", bias=" + (bias_.defined() ? "True" : "False");
}

template <class P>
Tensor Linear<P>::forward(const Tensor& x) {
  if constexpr (is_direct_v<P>) {
    // Mixed precision as in Conv2d: planned compute-dtype copies of the masters.
    auto& impl = *p_.impl;
    auto& e = direct_.cache.get(x, 0, [&](auto& entry, const Tensor& in) {
      entry.plan.plan(impl, in, entry.w.plan(impl, weight_, in), entry.b.plan(impl, bias_, in));
    });
    e.w.refresh();
    e.b.refresh();
    e.plan.forward();
    return e.plan.y;
  } else {
    return autograd::linear(p_, x, detail::compute_cast(p_, weight_, x), detail::compute_cast(p_, bias_, x));
  }
}

template <class P>
Tensor Linear<P>::backward(const Tensor& dy) {
  if constexpr (is_direct_v<P>) {
    auto& e = detail::latest_entry(direct_.cache, "Linear");
    if (needs_rebind(e.dy, dy) || e.need_dx != input_grad_) {
      e.plan.dx = Tensor();
      e.plan.plan_backward(dy, input_grad_);
      e.w.plan_grad(*p_.impl, e.plan.dw);
      e.b.plan_grad(*p_.impl, e.plan.db);
      e.dy = dy;
      e.need_dx = input_grad_;
    }
    auto& impl = *p_.impl;
    detail::release_grad_buffer(impl, weight_, e.w.grad(e.plan.dw));
    if (bias_.defined()) detail::release_grad_buffer(impl, bias_, e.b.grad(e.plan.db));
    e.plan.backward();
    detail::accumulate_grad(impl, weight_, e.w.convert_grad(e.plan.dw));
    if (bias_.defined()) detail::accumulate_grad(impl, bias_, e.b.convert_grad(e.plan.db));
    return input_grad_ ? e.plan.dx : Tensor();
  } else {
    return Module::backward(dy);
  }
}

template <class P>
int64_t Linear<P>::plans_made() const {
  if constexpr (is_direct_v<P>)
    return direct_.cache.plans_made();
  else
    return 0;
}

#define STRATA_NN_INSTANTIATE(P) template class Linear<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
