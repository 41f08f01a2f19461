#include "strata/nn/layers/container.h"

#include "strata/autograd/functions.h"

namespace strata::nn {

template <class P>
Tensor Flatten<P>::forward(const Tensor& x) {
  STRATA_CHECK(x.dim() >= 1, "Flatten: input ", x.str(), " has no batch dimension");
  const Shape out{x.size(0), x.size(0) == 0 ? 0 : x.numel() / x.size(0)};
  return direct_.forward(p_, x, [&](const auto& tape) { return autograd::reshape(tape, x, out); }, out);
}

template <class P>
Tensor Flatten<P>::backward(const Tensor& dy) {
  return direct_.backward(*this, dy);
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (Module* m : layers_) h = m->forward(h);
  return h;
}

Tensor Sequential::backward(const Tensor& dy) {
  Tensor g = dy;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) g = (*it)->backward(g);
  return g;
}

void Sequential::set_input_grad(bool on) {
  input_grad_ = on;
  if (!layers_.empty()) layers_.front()->set_input_grad(on);
}

#define STRATA_NN_INSTANTIATE(P) template class Flatten<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
