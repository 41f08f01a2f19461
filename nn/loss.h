#pragma once
// Losses on logits, mean-reduced as PyTorch's defaults:
//  cross_entropy: softmax cross-entropy, labels i64 [N] (torch.nn.CrossEntropyLoss)
//  bce_logits:    binary cross-entropy with logits, targets like the logits, for
//                 multi-label tasks (torch.nn.BCEWithLogitsLoss)
// Tape policies record the loss on the tape; in direct mode the loss is planned per
// (logits, targets) pair like any layer, and backward() returns dL/dlogits (seeded
// with a planned 1, as autograd::backward seeds the root).
#include <string_view>

#include "strata/nn/layers/layer_util.h"
#include "strata/ops/direct/plans.h"

namespace strata::nn {

enum class LossKind { cross_entropy, bce_logits };
LossKind parse_loss_kind(std::string_view s);  // "cross_entropy" | "bce_logits"
std::string_view loss_kind_name(LossKind k);

namespace detail {
template <class P>
struct LossDirect : NoDirectState {};
template <class Impl>
struct LossDirect<Direct<Impl>> {
  struct Entry {
    ops::direct::SoftmaxXentPlan<Impl> xent;
    ops::direct::BceLogitsPlan<Impl> bce;
    Tensor targets;  // keeps the targets alive (the key holds the logits)
  };
  PlanCache<Entry> cache;
};
}  // namespace detail

template <class P>
class Loss {
 public:
  Loss(const P& p, LossKind kind) : p_(p), kind_(kind) {}
  LossKind kind() const { return kind_; }
  // A rank-0 loss on the policy's device.
  Tensor forward(const Tensor& logits, const Tensor& targets);
  // Direct mode: dL/dlogits of the latest forward.
  Tensor backward();

 private:
  P p_;
  LossKind kind_;
  [[no_unique_address]] detail::LossDirect<P> direct_;
};

}  // namespace strata::nn
