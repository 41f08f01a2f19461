#pragma once
// Direct mode's step of a loss on logits (nn::Loss): the plan of its kind, whose backward
// starts from a planned 1 (ops/direct/steps/plan_step.h says what a step is).
#include <cstdint>

#include "strata/ops/direct/cast_plans.h"
#include "strata/ops/direct/plans.h"
#include "strata/ops/direct/tensor_plans.h"
#include "strata/ops/functional.h"

namespace strata::ops::direct {

template <class Impl>
class LossStep {
 public:
  void plan(Impl& impl, const Tensor& logits, const Tensor& targets, LossKind kind, int64_t ignore_index);
  const Tensor& run(const Tensor& targets, LossKind kind, int64_t ignore_index);
  const Tensor& run_backward(bool seeded = false);  // dL/dlogits; seeded: see nn::Loss::backward
  const Tensor& seed() const { return kind_ == LossKind::cross_entropy ? xent_.dloss : bce_.dloss; }

 private:
  LossKind kind_ = LossKind::cross_entropy;
  SoftmaxXentPlan<Impl> xent_;
  BceLogitsPlan<Impl> bce_;
  Tensor targets_;  // keeps the targets alive (the key holds the logits)
  // Logits [..., C] and targets [...] as rows [N, C] and [N] (views, or copies the front end's
  // reshape would make), and dL/dlogits in the logits' sizes.
  CastPlan<Impl> logit_rows_, target_rows_;
  Tensor dlogits_;
};

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
  // The tape's reshape of the logits to rows and view of the targets (nn::Loss::forward), planned.
  const int64_t c = logits.size(logits.dim() - 1);
  xent_.plan(impl, planned_view_or_copy(impl, logits, {logits.numel() / c, c}, logit_rows_),
             planned_view_or_copy(impl, targets, {targets.numel()}, target_rows_), ignore_index);
  // dlogits may be the first columns of padded rows (SoftmaxXentPlan): a view with their strides.
  const Tensor& d = xent_.dlogits;
  const auto st = view_strides(d.sizes(), d.strides(), logits.sizes());
  STRATA_CHECK(st.has_value(), "Loss: dL/dlogits ", d.str(), " cannot be viewed as the logits' ", logits.sizes().str(),
               " (internal error)");
  dlogits_ = d.as_strided(logits.sizes(), *st, d.offset());
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

}  // namespace strata::ops::direct
