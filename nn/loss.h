#pragma once
// Losses on logits, mean-reduced as PyTorch's defaults:
//  cross_entropy: softmax cross-entropy, labels i64 [N] (torch.nn.CrossEntropyLoss); a
//                 sequence model's logits [..., C] with labels [...] (classes last) are
//                 flattened to rows (direct mode: planned views, and dL/dlogits viewed back).
//                 Rows labelled ignore_index (-100 unless given, as PyTorch's) are left out
//                 of the mean and get a zero gradient; with every row ignored the loss is
//                 NaN (0/0, what PyTorch 2.x returns)
//  bce_logits:    binary cross-entropy with logits, targets like the logits, for
//                 multi-label tasks (torch.nn.BCEWithLogitsLoss)
// Tape policies record the loss on the tape; in direct mode the loss is planned per
// (logits, targets) pair like any layer, and backward() returns dL/dlogits (seeded
// with 1, as autograd::backward seeds the root, or with what the caller wrote into seed()).
#include <string_view>

#include "strata/nn/layers/direct_layer.h"
#include "strata/ops/direct/steps/loss_step.h"
#include "strata/ops/functional.h"

namespace strata::nn {

using ops::LossKind;  // cross_entropy | bce_logits (ops/functional.h)
LossKind parse_loss_kind(std::string_view s);  // "cross_entropy" | "bce_logits"
std::string_view loss_kind_name(LossKind k);

namespace detail {
// The loss's direct step (ops/direct/steps/loss_step.h).
struct LossStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::LossStep<Impl>;
};
}  // namespace detail

template <class P>
class Loss {
 public:
  // ignore_index: cross_entropy's label of rows left out (bce_logits has none).
  Loss(const P& p, LossKind kind, int64_t ignore_index = ops::kDefaultIgnoreIndex)
      : p_(p), kind_(kind), ignore_index_(ignore_index) {}
  LossKind kind() const { return kind_; }
  int64_t ignore_index() const { return ignore_index_; }
  // A rank-0 loss on the policy's device.
  Tensor forward(const Tensor& logits, const Tensor& targets);
  // Direct mode: dL/dlogits of the latest forward, from a seed of 1 written right before;
  // `seeded`: from what the caller wrote into seed() since (dynamic loss scaling's scale).
  Tensor backward(bool seeded = false);
  // Direct mode: the rank-0 gradient the latest forward's backward starts from, a buffer
  // of the step's memory that backward() fills with 1 unless told it is seeded.
  Tensor seed();

 private:
  P p_;
  LossKind kind_;
  int64_t ignore_index_;
  [[no_unique_address]] detail::DirectLayer<P, detail::LossStepOf> direct_;
};

}  // namespace strata::nn
