#include "strata/nn/clip_grad.h"

#include <cmath>

#include "strata/autograd/grad_mode.h"

namespace strata::nn {

Tensor clip_grad_norm_(std::span<const Tensor> params, double max_norm) {
  STRATA_CHECK(std::isfinite(max_norm) && max_norm > 0, "clip_grad_norm_: max_norm must be finite and > 0, got ",
               max_norm);
  autograd::NoGradGuard no_grad;
  Tensor squares;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    const Tensor s = (g * g).sum();
    squares = squares.defined() ? squares + s : s;
  }
  if (!squares.defined()) return {};
  const Tensor norm = squares.sqrt();
  // min(1, max_norm / (norm + 1e-6)), PyTorch's clamp(max=1.0); the coefficient is positive.
  const Tensor coef = (max_norm / (norm + 1e-6)).clamp(0.0, 1.0);
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (g.defined()) copy_into(g * coef, g);
  }
  return norm;
}

}  // namespace strata::nn
