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
Dropout<P>::Dropout(const P& p, double prob, uint64_t seed) : p_(p), prob_(prob), counter_{seed, 0} {
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
  const uint64_t offset = counter_.offset;
  // A memory plan's recording pass runs this forward once more, and a graph capture
  // once: neither is a draw (each launch of the captured graph is, DropoutStep::run).
  if (!ops::direct::recording() && !ops::direct::capturing()) counter_.offset += static_cast<uint64_t>(x.numel());
  return direct_.forward(
      p_, x, [&](const auto& tape) { return autograd::dropout(tape, x, prob_, counter_.seed, offset); }, prob_,
      &counter_, offset);
}

template <class P>
Tensor Dropout<P>::backward(const Tensor& dy) {
  return last_active_ ? direct_.backward(*this, dy) : direct_.backward_of_identity(*this, dy);
}

namespace detail {

template <class Impl>
void DropoutStep<Impl>::plan(Impl& impl, const Tensor& x, double prob, DropoutCounter*, uint64_t) {
  STRATA_CHECK(impl.capabilities().supports(ops::OpId::dropout_fwd, x.dtype()), "dropout: backend '", Impl::kName,
               "' does not support ", x.str());
  impl_ = &impl;
  y_ = ops::direct::planned_empty_like(x, x.sizes());
  mask_ = ops::direct::planned_empty_like(x, x.sizes(), DType::u8);
  // Made here, outside any capture (nothing is allocated inside one).
  if constexpr (ops::direct::CapturesGraphs<Impl>)
    rng_ = std::make_shared<Rng>(
        Rng{Tensor::empty(Shape{2}, DType::i64, Device::cpu()), Tensor::empty(Shape{2}, DType::i64, x.device())});
  fwd_ = ops::DropoutFwdArgs{x, y_, mask_};
  fwd_.p = prob;
}

template <class Impl>
const Tensor& DropoutStep<Impl>::run(double, DropoutCounter* counter, uint64_t offset) {
  if (!ops::direct::capturing()) {
    fwd_.seed = counter->seed;
    fwd_.offset = offset;
    ops::direct::run_kernel<ops::OpId::dropout_fwd>(*impl_, fwd_);
    return y_;
  }
  STRATA_CHECK(rng_, "dropout: backend '", Impl::kName, "' does not capture graphs");
  const uint64_t n = static_cast<uint64_t>(y_.numel());
  ops::direct::before_each_launch([impl = impl_, rng = rng_, counter, n] {
    // The host copy may be rewritten at once: a copy from pageable memory is staged before it returns.
    int64_t* h = rng->host.template data<int64_t>();
    h[0] = static_cast<int64_t>(counter->seed);
    h[1] = static_cast<int64_t>(counter->offset);
    ops::direct::run_kernel<ops::OpId::copy>(*impl, ops::CopyArgs{rng->host, rng->device});
    counter->offset += n;
  });
  fwd_.rng = rng_->device;
  ops::direct::run_kernel<ops::OpId::dropout_fwd>(*impl_, fwd_);
  fwd_.rng = {};
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
