#include "strata/nn/loss.h"

#include <cstdint>

#include "strata/autograd/functions.h"
#include "strata/ops/shape_rules.h"

namespace strata::nn {

LossKind parse_loss_kind(std::string_view s) {
  if (s == "cross_entropy") return LossKind::cross_entropy;
  if (s == "bce_logits") return LossKind::bce_logits;
  STRATA_FAIL("loss: unknown kind '", s, "' (known: cross_entropy, bce_logits)");
}

std::string_view loss_kind_name(LossKind k) {
  return k == LossKind::cross_entropy ? "cross_entropy" : "bce_logits";
}

template <class P>
Tensor Loss<P>::forward(const Tensor& logits, const Tensor& targets) {
  // A sequence model's logits [..., C] with targets [...]: each position one example (direct
  // mode's step views them as rows itself).
  if (kind_ == LossKind::cross_entropy && logits.defined() && logits.dim() > 2 && targets.defined()) {
    const int64_t c = logits.size(logits.dim() - 1);
    STRATA_CHECK(targets.numel() * c == logits.numel(), "Loss: cross_entropy's targets ", targets.str(),
                 " are not one class per row of logits ", logits.str(), " (classes last)");
    if constexpr (!is_direct_v<P>)
      return forward(autograd::reshape(p_, logits, {-1, c}), targets.contiguous().view(Shape{targets.numel()}));
  }
  const int64_t key = static_cast<int64_t>(reinterpret_cast<uintptr_t>(targets.data_ptr())) ^
                      (kind_ == LossKind::cross_entropy ? 0 : 1);
  return direct_.forward_keyed(
      p_, logits, key,
      [&](const auto& tape) {
        return kind_ == LossKind::cross_entropy ? autograd::softmax_xent(tape, logits, targets, ignore_index_)
                                                : autograd::bce_logits(tape, logits, targets);
      },
      targets, kind_, ignore_index_);
}

template <class P>
Tensor Loss<P>::backward(bool seeded) {
  return direct_.backward_of_loss("Loss", seeded);
}

template <class P>
Tensor Loss<P>::seed() {
  if constexpr (is_direct_v<P>)
    return direct_.latest_step("Loss").seed();
  else
    STRATA_FAIL("Loss::seed is direct mode's; the tape modes seed autograd::backward");
}

#define STRATA_NN_INSTANTIATE(P) template class Loss<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
