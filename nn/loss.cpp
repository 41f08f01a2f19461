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
  if constexpr (is_direct_v<P>) {
    const bool xent = kind_ == LossKind::cross_entropy;
    auto& e = direct_.cache.get(
        logits, static_cast<int64_t>(reinterpret_cast<uintptr_t>(targets.data_ptr())) ^ (xent ? 0 : 1),
        [&](auto& entry, const Tensor& in) {
          auto& impl = *p_.impl;
          entry.targets = targets;
          if (xent)
            entry.xent.plan(impl, in, targets);
          else
            entry.bce.plan(impl, in, targets);
        });
    if (xent) {
      e.xent.forward();
      return e.xent.loss;
    }
    e.bce.forward();
    return e.bce.loss;
  } else {
    return kind_ == LossKind::cross_entropy ? autograd::softmax_xent(p_, logits, targets)
                                            : autograd::bce_logits(p_, logits, targets);
  }
}

template <class P>
Tensor Loss<P>::backward() {
  if constexpr (is_direct_v<P>) {
    auto& e = detail::latest_entry(direct_.cache, "Loss");
    if (kind_ == LossKind::cross_entropy) {
      e.xent.backward();
      return e.xent.dlogits;
    }
    e.bce.backward();
    return e.bce.dlogits;
  } else {
    STRATA_FAIL("Loss::backward runs in direct mode only; in the tape modes call autograd::backward(loss)");
  }
}

#define STRATA_NN_INSTANTIATE(P) template class Loss<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
