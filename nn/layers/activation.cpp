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
Dropout<P>::Dropout(const P& p, double prob, uint64_t seed) : DropoutDraws(prob, seed), p_(p) {
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

#define STRATA_NN_INSTANTIATE(P) \
  template class ReLU<P>;        \
  template class Dropout<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
