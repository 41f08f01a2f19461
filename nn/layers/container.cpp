#include "strata/nn/layers/container.h"

#include "strata/autograd/functions.h"

namespace strata::nn {

template <class P>
Tensor Flatten<P>::forward(const Tensor& x) {
  STRATA_CHECK(x.dim() >= 1, "Flatten: input ", x.str(), " has no batch dimension");
  in_sizes_ = x.sizes();
  const Shape out{x.size(0), x.size(0) == 0 ? 0 : x.numel() / x.size(0)};
  if constexpr (is_direct_v<P>) {
    auto& e = direct_.cache.get(x, 0, [&](auto& entry, const Tensor& in) {
      if (in.is_contiguous()) {
        entry.y = in.view(out);
        return;
      }
      entry.copies = true;
      Tensor c = Tensor::empty(in.sizes(), in.dtype(), in.device());
      entry.copy = ops::CopyArgs{in, c};
      entry.y = c.view(out);
    });
    if (e.copies) ops::direct::run_kernel(*p_.impl, ops::OpId::copy, [&] { p_.impl->copy(e.copy); });
    return e.y;
  } else {
    return autograd::reshape(p_, x, out);
  }
}

template <class P>
Tensor Flatten<P>::backward(const Tensor& dy) {
  if constexpr (is_direct_v<P>) {
    auto& e = detail::latest_entry(direct_.cache, "Flatten");
    STRATA_CHECK(dy.is_contiguous(), "Flatten.backward: grad_output ", dy.str(), " must be contiguous");
    if (!e.dx.defined() || e.dx.data_ptr() != dy.data_ptr() || !(e.dx.sizes() == in_sizes_)) e.dx = dy.view(in_sizes_);
    return e.dx;
  } else {
    return Module::backward(dy);
  }
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
