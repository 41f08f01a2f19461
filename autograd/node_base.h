#pragma once
// Internal to autograd/*_fn.cpp: the node base that knows its dispatcher, and the
// instantiation list.
#include "strata/autograd/functions.h"
#include "strata/autograd/node.h"
#include "strata/ops/dispatch.h"
#include "strata/backends/static_backends.h"

namespace strata::autograd::detail {

template <class D>
class NodeT : public Node {
 public:
  explicit NodeT(const D& d) : d_(d) {}
  Tensor accumulate(const Tensor& a, const Tensor& b) const override { return ops::add(d_, a, b); }
  Tensor ones_like(const Tensor& t) const override { return ops::full(d_, t.sizes(), t.dtype(), 1.0); }

 protected:
  D d_;
};

// x broadcast to `sizes` by a recorded expand (whose backward sums the gradient back over the
// repeated dims), or x itself when it has them already: the operands of a broadcasting op.
template <class D>
Tensor broadcast_to(const D& d, const Tensor& x, const Shape& sizes) {
  return x.sizes() == sizes ? x : autograd::expand(d, x, sizes);
}

// Builds node N only when the tape needs it (cheap when grad mode is off).
template <class N, class D, class... Saved>
void record(const D& d, std::initializer_list<const Tensor*> inputs, const Tensor& output, Saved&&... saved) {
  if (!any_requires_grad(inputs)) return;
  auto node = std::make_shared<N>(d, std::forward<Saved>(saved)...);
  attach(node, inputs, output);
}

}  // namespace strata::autograd::detail

#define STRATA_AUTOGRAD_STATIC_INSTANTIATE(Impl) STRATA_AUTOGRAD_INSTANTIATE(::strata::ops::StaticDispatch<Impl>)
#define STRATA_AUTOGRAD_INSTANTIATE_ALL()                   \
  STRATA_AUTOGRAD_INSTANTIATE(::strata::ops::VirtualDispatch) \
  STRATA_FOR_EACH_BACKEND(STRATA_AUTOGRAD_STATIC_INSTANTIATE)
