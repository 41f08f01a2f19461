// Fused optimizer steps, element by element, computed in double and stored in the
// parameter's dtype. The formulas are those of torch.optim.SGD (dampening 0) and
// torch.optim.Adam / AdamW.
#include <cmath>

#include "strata/backends/reference/reference_backend.h"
#include "strata/backends/reference/strided.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using ref::for_each_element;
using ref::visit_float;

// g = grad + wd * param; buf = momentum * buf + g (buf starts at zero, so the first
// step gives buf = g); g = nesterov ? g + momentum * buf : buf; param -= lr * g.
void ReferenceBackend::sgd_step(const SgdStepArgs& args) {
  if (amp_skips(args.amp)) return;
  const SgdStepArgs a = with_hyper_read(args);
  const double gs = amp_grad_factor(a.amp);
  visit_float(a.param.dtype, "sgd_step", [&](auto tag) {
    using T = decltype(tag);
    T* param = a.param.ptr<T>();
    const T* grad = a.grad.ptr<T>();
    if (a.o.momentum == 0.0) {
      for_each_element(
          [&](int64_t, int64_t op, int64_t og) {
            const double p = static_cast<double>(param[op]);
            const double g = static_cast<double>(grad[og]) * gs + a.o.weight_decay * p;
            param[op] = static_cast<T>(p - a.o.lr * g);
          },
          a.param, a.grad);
      return;
    }
    STRATA_CHECK(a.momentum_buf.defined, "sgd_step: momentum ", a.o.momentum, " needs a momentum_buf for param ",
                 a.param.sizes.str());
    T* buf = a.momentum_buf.ptr<T>();
    for_each_element(
        [&](int64_t, int64_t op, int64_t og, int64_t ob) {
          const double p = static_cast<double>(param[op]);
          double g = static_cast<double>(grad[og]) * gs + a.o.weight_decay * p;
          const double b = a.o.momentum * static_cast<double>(buf[ob]) + g;
          buf[ob] = static_cast<T>(b);
          g = a.o.nesterov ? g + a.o.momentum * b : b;
          param[op] = static_cast<T>(p - a.o.lr * g);
        },
        a.param, a.grad, a.momentum_buf);
  });
}

// Adam: g = grad + wd * param.  AdamW: param *= 1 - lr * wd.  Then
// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// param -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
void ReferenceBackend::adam_step(const AdamStepArgs& args) {
  if (amp_skips(args.amp)) return;
  const AdamStepArgs a = with_hyper_read(args);
  const double gs = amp_grad_factor(a.amp);
  STRATA_CHECK(a.step >= 1, "adam_step: step is 1-based (bias correction divides by 1 - beta^step), got ", a.step);
  visit_float(a.param.dtype, "adam_step", [&](auto tag) {
    using T = decltype(tag);
    T* param = a.param.ptr<T>();
    const T* grad = a.grad.ptr<T>();
    T* m = a.exp_avg.ptr<T>();
    T* v = a.exp_avg_sq.ptr<T>();
    const double t = static_cast<double>(a.step);
    const double bc1 = 1.0 - std::pow(a.o.beta1, t);
    const double bc2_sqrt = std::sqrt(1.0 - std::pow(a.o.beta2, t));
    const double step_size = a.o.lr / bc1;
    for_each_element(
        [&](int64_t, int64_t op, int64_t og, int64_t om, int64_t ov) {
          double p = static_cast<double>(param[op]);
          double g = static_cast<double>(grad[og]) * gs;
          if (a.o.decoupled_weight_decay)
            p *= 1.0 - a.o.lr * a.o.weight_decay;
          else
            g += a.o.weight_decay * p;
          const double mt = a.o.beta1 * static_cast<double>(m[om]) + (1.0 - a.o.beta1) * g;
          const double vt = a.o.beta2 * static_cast<double>(v[ov]) + (1.0 - a.o.beta2) * g * g;
          m[om] = static_cast<T>(mt);
          v[ov] = static_cast<T>(vt);
          p -= step_size * mt / (std::sqrt(vt) / bc2_sqrt + a.o.eps);
          param[op] = static_cast<T>(p);
        },
        a.param, a.grad, a.exp_avg, a.exp_avg_sq);
  });
}

// A list: each parameter's single step (a loop over tensors costs a CPU nothing a kernel launch would).
void ReferenceBackend::multi_sgd_step(const MultiSgdStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) sgd_step(step_of(a, i));
}

void ReferenceBackend::multi_adam_step(const MultiAdamStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) adam_step(step_of(a, i));
}

// Dynamic loss scaling's update (ops::amp_update_scale_state), one element at a time.
void ReferenceBackend::amp_update_scale(const AmpUpdateScaleArgs& a) {
  visit_float(a.grad_sums.dtype, "amp_update_scale", [&](auto tag) {
    using T = decltype(tag);
    const T* sums = a.grad_sums.ptr<T>();
    ops::amp_update_scale_state(
        a.state.ptr<double>(), a.state.strides[0], a.grad_sums.numel(),
        [&](int64_t i) { return static_cast<double>(sums[i * a.grad_sums.strides[0]]); }, a.growth, a.backoff,
        a.interval);
  });
}

}  // namespace strata::backends
