#pragma once
// Fused optimizer steps as plain loops, with PyTorch's update rules (torch.optim.SGD
// with dampening 0, torch.optim.Adam / AdamW). Parameters and state update in place.
#include <cmath>

#include "strata/backends/cpu/strided.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::loops {

// One element's SGD update. The code between "codegen:begin" and "codegen:end" is also written,
// as it is, into the training steps codegen/ generates, so that they update as this loop does.
// codegen:begin train_loops
template <class T>
inline void sgd_update(T& p, T g, T lr, T wd, T gs) {
  p -= lr * (g * gs + wd * p);
}
template <class T>
inline void sgd_momentum_update(T& p, T g, T& buf, T lr, T wd, T mom, T gs, bool nesterov) {
  const T d = g * gs + wd * p;
  const T nb = mom * buf + d;
  buf = nb;
  p -= lr * (nesterov ? d + mom * nb : nb);
}
// codegen:end

// g = grad + wd p; buf = momentum buf + g; g = nesterov ? g + momentum buf : buf;
// p -= lr g. A zero-initialised buffer makes the first step buf = g, as in PyTorch.
// With loss scaling (args.amp) the gradient is read times 1/scale, or the step skipped.
template <class T>
void sgd_step(const ops::SgdStepArgs& args) {
  if (ops::amp_skips(args.amp)) return;
  const ops::SgdStepArgs a = ops::with_hyper_read(args);
  T* p = a.param.ptr<T>();
  const T* g = a.grad.ptr<const T>();
  const T lr = static_cast<T>(a.o.lr), wd = static_cast<T>(a.o.weight_decay), mom = static_cast<T>(a.o.momentum);
  const T gs = static_cast<T>(ops::amp_grad_factor(a.amp));
  if (a.o.momentum == 0.0) {
    for_each_unordered([=](int64_t, int64_t op, int64_t og) { sgd_update(p[op], g[og], lr, wd, gs); }, a.param,
                       a.grad);
    return;
  }
  STRATA_CHECK(a.momentum_buf.defined, "sgd_step: momentum ", a.o.momentum, " needs a momentum buffer");
  T* b = a.momentum_buf.ptr<T>();
  const bool nesterov = a.o.nesterov;
  for_each_unordered([=](int64_t, int64_t op, int64_t og, int64_t ob) {
    sgd_momentum_update(p[op], g[og], b[ob], lr, wd, mom, gs, nesterov);
  }, a.param, a.grad, a.momentum_buf);
}

// Adam (L2 weight decay added to the gradient) or AdamW (decoupled: p *= 1 - lr wd):
// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
template <class T>
void adam_step(const ops::AdamStepArgs& args) {
  if (ops::amp_skips(args.amp)) return;
  const ops::AdamStepArgs a = ops::with_hyper_read(args);
  STRATA_CHECK(a.step >= 1, "adam_step: step is 1-based (bias correction divides by 1 - beta^step), got ", a.step);
  T* p = a.param.ptr<T>();
  const T* g = a.grad.ptr<const T>();
  T* m = a.exp_avg.ptr<T>();
  T* v = a.exp_avg_sq.ptr<T>();
  const double t = static_cast<double>(a.step);
  // 1 - beta in double: in f32, 1 - 0.999f loses four digits.
  const T b1 = static_cast<T>(a.o.beta1), b2 = static_cast<T>(a.o.beta2);
  const T c1 = static_cast<T>(1.0 - a.o.beta1), c2 = static_cast<T>(1.0 - a.o.beta2);
  const T step_size = static_cast<T>(a.o.lr / (1.0 - std::pow(a.o.beta1, t)));
  const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(1.0 - std::pow(a.o.beta2, t)));
  const T eps = static_cast<T>(a.o.eps);
  const T l2 = a.o.decoupled_weight_decay ? T(0) : static_cast<T>(a.o.weight_decay);
  const T decay = a.o.decoupled_weight_decay ? static_cast<T>(1.0 - a.o.lr * a.o.weight_decay) : T(1);
  const T gs = static_cast<T>(ops::amp_grad_factor(a.amp));
  for_each_unordered([=](int64_t, int64_t op, int64_t og, int64_t om, int64_t ov) {
    const T pv = p[op] * decay;
    const T d = g[og] * gs + l2 * p[op];
    const T nm = b1 * m[om] + c1 * d;
    const T nv = b2 * v[ov] + c2 * d * d;
    m[om] = nm;
    v[ov] = nv;
    p[op] = pv - step_size * nm / (std::sqrt(nv) * inv_sqrt_bc2 + eps);
  }, a.param, a.grad, a.exp_avg, a.exp_avg_sq);
}

// Dynamic loss scaling's update (ops::amp_update_scale_state), state in host memory.
template <class T>
void amp_update_scale(const ops::AmpUpdateScaleArgs& a) {
  const T* sums = a.grad_sums.ptr<const T>();
  const int64_t stride = a.grad_sums.strides[0];
  ops::amp_update_scale_state(
      a.state.ptr<double>(), a.state.strides[0], a.grad_sums.numel(),
      [&](int64_t i) { return static_cast<double>(sums[i * stride]); }, a.growth, a.backoff, a.interval);
}

// The step for an args struct's type (callers generic over SGD and Adam).
template <class T>
void step_of(const ops::SgdStepArgs& a) {
  sgd_step<T>(a);
}
template <class T>
void step_of(const ops::AdamStepArgs& a) {
  adam_step<T>(a);
}

}  // namespace strata::backends::loops
