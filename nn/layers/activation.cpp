#include "strata/nn/layers/activation.h"

#include "strata/autograd/functions.h"

namespace strata::nn {

template <class P>
Tensor ReLU<P>::forward(const Tensor& x) {
  if constexpr (is_direct_v<P>) {
    auto& e = direct_.cache.get(x, 0, [&](auto& entry, const Tensor& in) { entry.plan.plan(*p_.impl, in); });
    e.plan.forward();
    return e.plan.y;
  } else {
    return autograd::relu(p_, x);
  }
}

template <class P>
Tensor ReLU<P>::backward(const Tensor& dy) {
  if constexpr (is_direct_v<P>) {
    auto& e = detail::latest_entry(direct_.cache, "ReLU");
    if (needs_rebind(e.dy, dy)) {
      e.plan.plan_backward(dy);
      e.dy = dy;
    }
    e.plan.backward();
    return e.plan.dx;
  } else {
    return Module::backward(dy);
  }
}

template <class P>
Dropout<P>::Dropout(const P& p, double prob, uint64_t seed) : p_(p), prob_(prob), seed_(seed) {
  STRATA_CHECK(prob >= 0.0 && prob < 1.0, "Dropout: p must be in [0, 1), got ", prob);
}

template <class P>
std::string Dropout<P>::extra_repr() const {
  return "p=" + std::to_string(prob_);
}

template <class P>
Tensor Dropout<P>::forward(const Tensor& x) {
  last_active_ = is_training() && prob_ > 0.0;
  if (!last_active_) return x;
  const uint64_t offset = offset_;
  offset_ += static_cast<uint64_t>(x.numel());
  if constexpr (is_direct_v<P>) {
    auto& e = direct_.cache.get(x, 0, [&](auto& entry, const Tensor& in) {
      STRATA_CHECK(p_.impl->capabilities().supports(ops::OpId::dropout_fwd, in.dtype()), "dropout: backend '", P::Backend::kName,
                   "' does not support ", in.str());
      entry.y = Tensor::empty_like(in, in.sizes());
      entry.mask = Tensor::empty_like(in, in.sizes(), DType::u8);
      entry.fwd = ops::DropoutFwdArgs{in, entry.y, entry.mask};
      entry.fwd.p = prob_;
    });
    e.fwd.seed = seed_;
    e.fwd.offset = offset;
    ops::direct::run_kernel(*p_.impl, ops::OpId::dropout_fwd, [&] { p_.impl->dropout_fwd(e.fwd); });
    return e.y;
  } else {
    return autograd::dropout(p_, x, prob_, seed_, offset);
  }
}

template <class P>
Tensor Dropout<P>::backward(const Tensor& dy) {
  if constexpr (is_direct_v<P>) {
    if (!last_active_) return dy;
    auto& e = detail::latest_entry(direct_.cache, "Dropout");
    if (needs_rebind(e.dy, dy)) {
      ops::check_same_shape("dropout plan", "output", e.y, "grad_output", dy);
      e.dx = Tensor::empty_like(dy, dy.sizes());
      e.bwd = ops::DropoutBwdArgs{dy, e.mask, e.dx};
      e.bwd.p = prob_;
      e.dy = dy;
    }
    ops::direct::run_kernel(*p_.impl, ops::OpId::dropout_bwd, [&] { p_.impl->dropout_bwd(e.bwd); });
    return e.dx;
  } else {
    return Module::backward(dy);
  }
}

#define STRATA_NN_INSTANTIATE(P) \
  template class ReLU<P>;        \
  template class Dropout<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
