#include "strata/nn/layers/activation.h"

#include "strata/autograd/functions.h"
#include "strata/ops/direct/graph_capture.h"

namespace strata::nn {

template <class P>
Tensor ReLU<P>::forward(const Tensor& x) {
  return direct_.forward(p_, x, [&](const auto& tape) { return autograd::relu(tape, x); });
}

template <class P>
Tensor ReLU<P>::backward(const Tensor& dy) {
  return direct_.backward(*this, dy);
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
  STRATA_CHECK(!ops::direct::capturing(),
               "Dropout: graph mode cannot capture dropout in training yet: its random offset is an argument of "
               "the kernel, which every launch of the graph would repeat; train in direct mode, or with p = 0");
  const uint64_t offset = offset_;
  // A memory plan's recording pass runs this forward once more; its draw is not one.
  if (!ops::direct::recording()) offset_ += static_cast<uint64_t>(x.numel());
  return direct_.forward(
      p_, x, [&](const auto& tape) { return autograd::dropout(tape, x, prob_, seed_, offset); }, prob_, seed_, offset);
}

template <class P>
Tensor Dropout<P>::backward(const Tensor& dy) {
  return last_active_ ? direct_.backward(*this, dy) : direct_.backward_of_identity(*this, dy);
}

namespace detail {

template <class Impl>
void DropoutStep<Impl>::plan(Impl& impl, const Tensor& x, double prob, uint64_t, uint64_t) {
  STRATA_CHECK(impl.capabilities().supports(ops::OpId::dropout_fwd, x.dtype()), "dropout: backend '", Impl::kName,
               "' does not support ", x.str());
  impl_ = &impl;
  y_ = ops::direct::planned_empty_like(x, x.sizes());
  mask_ = ops::direct::planned_empty_like(x, x.sizes(), DType::u8);
  fwd_ = ops::DropoutFwdArgs{x, y_, mask_};
  fwd_.p = prob;
}

template <class Impl>
const Tensor& DropoutStep<Impl>::run(double, uint64_t seed, uint64_t offset) {
  fwd_.seed = seed;
  fwd_.offset = offset;
  ops::direct::run_kernel<ops::OpId::dropout_fwd>(*impl_, fwd_);
  return y_;
}

template <class Impl>
void DropoutStep<Impl>::plan_backward(const Tensor& dy, bool) {
  ops::check_same_shape("dropout plan", "output", y_, "grad_output", dy);
  dx_ = ops::direct::planned_empty_like(dy, dy.sizes());
  bwd_ = ops::DropoutBwdArgs{dy, mask_, dx_};
  bwd_.p = fwd_.p;
}

template <class Impl>
const Tensor& DropoutStep<Impl>::run_backward() {
  ops::direct::run_kernel<ops::OpId::dropout_bwd>(*impl_, bwd_);
  return dx_;
}

}  // namespace detail

#define STRATA_NN_INSTANTIATE(P) \
  template class ReLU<P>;        \
  template class Dropout<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
