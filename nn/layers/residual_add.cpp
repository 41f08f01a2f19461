#include "strata/nn/layers/residual_add.h"

#include "strata/autograd/functions.h"

namespace strata::nn {

template <class P>
Tensor ResidualAdd<P>::forward(const Tensor& a, const Tensor& b) {
  return sum_.forward_keyed(p_, a, detail::plan_key_of(b), [&](const auto& tape) { return autograd::add(tape, a, b); },
                            b);
}

template <class P>
Tensor ResidualAdd<P>::accumulate(const Tensor& identity_grad, const Tensor& main_grad) {
  return grad_sum_.forward_keyed(
      p_, identity_grad, detail::plan_key_of(main_grad),
      [](const auto&) -> Tensor { STRATA_FAIL("ResidualAdd::accumulate runs in direct mode only"); }, main_grad);
}

#define STRATA_NN_INSTANTIATE(P) template class ResidualAdd<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
