#pragma once
// y = a + b between two branches of a network (ResNet's blocks, GPT's residual stream), and in
// direct mode the sum of the two branches' gradients: accumulate(identity, main) adds them with
// the backend's add as identity + main, which is what the autograd engine does when a tensor
// gets a second gradient (later-created nodes run first, so the identity's arrives first, and a
// second is accumulated as existing + new through ops::add): gradients are bitwise the tape's.
#include <cstdint>

#include "strata/nn/layers/direct_layer.h"

namespace strata::nn {

namespace detail {
// What tells direct-mode plans for the same first input apart: the second input's memory.
inline int64_t plan_key_of(const Tensor& t) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
}
}  // namespace detail

template <class P>
class ResidualAdd {
 public:
  explicit ResidualAdd(const P& p) : p_(p) {}
  Tensor forward(const Tensor& a, const Tensor& b);
  // Direct mode: identity_grad + main_grad into a planned buffer.
  Tensor accumulate(const Tensor& identity_grad, const Tensor& main_grad);

 private:
  P p_;
  [[no_unique_address]] detail::DirectLayer<P, ops::direct::PlanOf<ops::direct::AddPlan>> sum_, grad_sum_;
};

}  // namespace strata::nn
