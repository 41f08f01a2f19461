#include "strata/nn/loss.h"

#include <cstdint>

#include "strata/autograd/functions.h"
#include "strata/ops/direct/tensor_plans.h"
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

namespace detail {

template <class Impl>
void LossStep<Impl>::plan(Impl& impl, const Tensor& logits, const Tensor& targets, LossKind kind,
                          int64_t ignore_index) {
  kind_ = kind;
  targets_ = targets;
  if (kind != LossKind::cross_entropy) {
    bce_.plan(impl, logits, targets);
    dlogits_ = bce_.dlogits;
    return;
  }
  if (logits.dim() <= 2) {
    xent_.plan(impl, logits, targets, ignore_index);
    dlogits_ = xent_.dlogits;
    return;
  }
  // The tape's reshape of the logits to rows and view of the targets (Loss::forward), planned.
  const int64_t c = logits.size(logits.dim() - 1);
  xent_.plan(impl, ops::direct::planned_view_or_copy(impl, logits, {logits.numel() / c, c}, logit_rows_),
             ops::direct::planned_view_or_copy(impl, targets, {targets.numel()}, target_rows_), ignore_index);
  dlogits_ = xent_.dlogits.view(logits.sizes());
}

template <class Impl>
const Tensor& LossStep<Impl>::run(const Tensor&, LossKind, int64_t) {
  if (kind_ == LossKind::cross_entropy) {
    logit_rows_.run();
    target_rows_.run();
    xent_.forward();
    return xent_.loss;
  }
  bce_.forward();
  return bce_.loss;
}

template <class Impl>
const Tensor& LossStep<Impl>::run_backward(bool seeded) {
  if (kind_ == LossKind::cross_entropy)
    xent_.backward(seeded);
  else
    bce_.backward(seeded);
  return dlogits_;
}

}  // namespace detail

#define STRATA_NN_INSTANTIATE(P) template class Loss<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
