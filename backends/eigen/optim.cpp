// Fused optimizer steps as Eigen expressions, one pass per tensor they write
// (context.h's elementwise()), in the parameter's dtype. The formulas are those of
// torch.optim.SGD (dampening 0) and torch.optim.Adam / AdamW, as in the reference.
#include <cmath>

#include "strata/backends/cpu/adaptive_optim.h"
#include "strata/backends/cpu/optim.h"
#include "strata/backends/eigen/context.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using eigen::elementwise;
using eigen::In;
using eigen::Out;
using eigen::visit_float;

// g = grad + wd * param; buf = momentum * buf + g; param -= lr * (nesterov ? g + momentum * buf : buf).
// With loss scaling (args.amp) the gradient is read times 1/scale, or the step skipped.
void EigenBackend::sgd_step(const SgdStepArgs& args) {
  if (amp_skips(args.amp)) return;
  const SgdStepArgs a = with_hyper_read(args);
  visit_float("sgd_step", a.param.dtype, [&](auto t) {
    using T = decltype(t);
    const T lr = static_cast<T>(a.o.lr), mom = static_cast<T>(a.o.momentum), wd = static_cast<T>(a.o.weight_decay);
    const T gs = static_cast<T>(amp_grad_factor(a.amp));
    if (a.o.momentum == 0.0) {
      elementwise(*ctx_, "sgd_step", false, [=](auto p, auto g) { return p - (g * gs + p * wd) * lr; }, Out<T>{a.param},
                  In<T>{a.param}, In<T>{a.grad});
      return;
    }
    STRATA_CHECK(a.momentum_buf.defined, "sgd_step: momentum ", a.o.momentum, " needs a momentum_buf for param ",
                 a.param.sizes.str());
    elementwise(*ctx_, "sgd_step", false, [=](auto b, auto p, auto g) { return b * mom + (g * gs + p * wd); },
                Out<T>{a.momentum_buf}, In<T>{a.momentum_buf}, In<T>{a.param}, In<T>{a.grad});
    if (a.o.nesterov) {
      elementwise(*ctx_, "sgd_step", false, [=](auto p, auto g, auto b) { return p - ((g * gs + p * wd) + b * mom) * lr; },
                  Out<T>{a.param}, In<T>{a.param}, In<T>{a.grad}, In<T>{a.momentum_buf});
    } else {
      elementwise(*ctx_, "sgd_step", false, [=](auto p, auto b) { return p - b * lr; }, Out<T>{a.param},
                  In<T>{a.param}, In<T>{a.momentum_buf});
    }
  });
}

// Adam: g = grad + wd * param.  AdamW: param *= 1 - lr * wd.  Then
// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// param -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
void EigenBackend::adam_step(const AdamStepArgs& args) {
  if (amp_skips(args.amp)) return;
  const AdamStepArgs a = with_hyper_read(args);
  STRATA_CHECK(a.step >= 1, "adam_step: step is 1-based (bias correction divides by 1 - beta^step), got ", a.step);
  visit_float("adam_step", a.param.dtype, [&](auto t) {
    using T = decltype(t);
    const double steps = static_cast<double>(a.step);
    // 1 - beta formed in double: 1 - 0.999f is 1.3e-5 off 0.001 in f32.
    const T b1 = static_cast<T>(a.o.beta1), b2 = static_cast<T>(a.o.beta2), eps = static_cast<T>(a.o.eps);
    const T c1 = static_cast<T>(1.0 - a.o.beta1), c2 = static_cast<T>(1.0 - a.o.beta2);
    const T step_size = static_cast<T>(a.o.lr / (1.0 - std::pow(a.o.beta1, steps)));
    const T bc2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(a.o.beta2, steps)));
    const T wd = a.o.decoupled_weight_decay ? T(0) : static_cast<T>(a.o.weight_decay);
    const T decay = a.o.decoupled_weight_decay ? static_cast<T>(1.0 - a.o.lr * a.o.weight_decay) : T(1);
    const T gs = static_cast<T>(amp_grad_factor(a.amp));
    elementwise(*ctx_, "adam_step", false, [=](auto m, auto p, auto g) { return m * b1 + (g * gs + p * wd) * c1; },
                Out<T>{a.exp_avg}, In<T>{a.exp_avg}, In<T>{a.param}, In<T>{a.grad});
    elementwise(
        *ctx_, "adam_step", false,
        [=](auto v, auto p, auto g) {
          const auto gg = g * gs + p * wd;
          return v * b2 + gg * gg * c2;
        },
        Out<T>{a.exp_avg_sq}, In<T>{a.exp_avg_sq}, In<T>{a.param}, In<T>{a.grad});
    elementwise(
        *ctx_, "adam_step", false,
        [=](auto p, auto m, auto v) { return p * decay - m * step_size / (v.sqrt() / bc2_sqrt + eps); },
        Out<T>{a.param}, In<T>{a.param}, In<T>{a.exp_avg}, In<T>{a.exp_avg_sq});
  });
}

// A list: each parameter's single step (a loop over tensors costs a CPU nothing a kernel launch would).
void EigenBackend::multi_sgd_step(const MultiSgdStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) sgd_step(step_of(a, i));
}

void EigenBackend::multi_adam_step(const MultiAdamStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) adam_step(step_of(a, i));
}

// RMSprop, Adagrad, Adadelta: the shared CPU loops (one pass over the operands each,
// which Eigen's expressions, one per tensor written, would not beat).
void EigenBackend::rmsprop_step(const RmspropStepArgs& a) { loops::step_in(kName, "rmsprop_step", a); }
void EigenBackend::adagrad_step(const AdagradStepArgs& a) { loops::step_in(kName, "adagrad_step", a); }
void EigenBackend::adadelta_step(const AdadeltaStepArgs& a) { loops::step_in(kName, "adadelta_step", a); }
void EigenBackend::multi_rmsprop_step(const MultiRmspropStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) rmsprop_step(step_of(a, i));
}
void EigenBackend::multi_adagrad_step(const MultiAdagradStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) adagrad_step(step_of(a, i));
}
void EigenBackend::multi_adadelta_step(const MultiAdadeltaStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) adadelta_step(step_of(a, i));
}

void EigenBackend::amp_update_scale(const AmpUpdateScaleArgs& a) {
  visit_float("amp_update_scale", a.grad_sums.dtype, [&](auto t) { loops::amp_update_scale<decltype(t)>(a); });
}

}  // namespace strata::backends
