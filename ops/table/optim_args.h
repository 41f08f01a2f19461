#pragma once
// RMSprop, Adagrad and Adadelta (op_table.def's rmsprop_step, adagrad_step, adadelta_step
// and their multi_ lists): options with torch.optim's defaults, argument structs, and
// each optimizer's update of one element, written once here for every backend: the
// reference instantiates it in double, the CPU loops in the parameter's dtype, the cuda
// kernels in double over f32 storage. The updates follow the algorithm boxes of
// torch.optim.RMSprop, Adagrad and Adadelta (maximize and foreach/fused flags aside):
//   RMSprop (Tieleman & Hinton, "Lecture 6.5 - RMSProp", Neural Networks for Machine
//   Learning, 2012; centered: Graves, "Generating Sequences With Recurrent Neural
//   Networks", 2013):
//     g += wd p; v = alpha v + (1 - alpha) g^2
//     centered: ga = alpha ga + (1 - alpha) g; avg = sqrt(v - ga^2) + eps, else sqrt(v) + eps
//     momentum: b = momentum b + g / avg; p -= lr b, else p -= lr g / avg
//   Adagrad (Duchi, Hazan & Singer, "Adaptive Subgradient Methods for Online Learning and
//   Stochastic Optimization", 2011):
//     g += wd p; clr = lr / (1 + (t - 1) lr_decay); sum += g^2; p -= clr g / (sqrt(sum) + eps)
//   Adadelta (Zeiler, "ADADELTA: An Adaptive Learning Rate Method", 2012):
//     g += wd p; v = rho v + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(v + eps) g;
//     u = rho u + (1 - rho) d^2; p -= lr d
// State tensors start as zeros (Adagrad's sum at initial_accumulator_value, the
// optimizer's choice). Graph mode's `hyper` and loss scaling's `amp` work as for
// SgdStepArgs / AdamStepArgs (op_args.h): hyper's lr replaces o.lr (and for Adagrad its
// step replaces `step`), the gradient is read times amp[3], the step skipped when that is 0,
// and Adagrad's count discounts amp's skipped steps as Adam's bias correction does.
#include <math.h>

#include <cstdint>
#include <span>

#include "strata/ops/table/op_args.h"

namespace strata::ops {

struct RmspropOptions {
  double lr = 0.01, alpha = 0.99, eps = 1e-8, weight_decay = 0.0, momentum = 0.0;
  bool centered = false;
};
struct RmspropStepArgs {
  // square_avg always; momentum_buf when momentum != 0; grad_avg when centered.
  TensorView param, grad, square_avg, momentum_buf, grad_avg;
  RmspropOptions o{};
  TensorView hyper{};  // optional f64 {lr, step}
  TensorView amp{};    // optional f64 [4]
};

struct AdagradOptions {
  double lr = 0.01, lr_decay = 0.0, weight_decay = 0.0, eps = 1e-10;
};
struct AdagradStepArgs {
  TensorView param, grad, sum;
  AdagradOptions o{};
  int64_t step = 1;    // 1-based, for lr_decay
  TensorView hyper{};  // optional f64 {lr, step}
  TensorView amp{};    // optional f64 [4]
};

struct AdadeltaOptions {
  double lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0.0;
};
struct AdadeltaStepArgs {
  TensorView param, grad, square_avg, acc_delta;
  AdadeltaOptions o{};
  TensorView hyper{};  // optional f64 {lr, step}
  TensorView amp{};    // optional f64 [4]
};

// A parameter group's steps in one call, as MultiSgdStepArgs: lists of equal length
// (momentum_bufs empty without momentum, grad_avgs unless centered, hypers without graph
// mode).
struct MultiRmspropStepArgs {
  std::span<const TensorView> params, grads, square_avgs, momentum_bufs, grad_avgs, hypers;
  RmspropOptions o{};
  TensorView amp{};
};
struct MultiAdagradStepArgs {
  std::span<const TensorView> params, grads, sums, hypers;
  std::span<const int64_t> steps;
  AdagradOptions o{};
  TensorView amp{};
};
struct MultiAdadeltaStepArgs {
  std::span<const TensorView> params, grads, square_avgs, acc_deltas, hypers;
  AdadeltaOptions o{};
  TensorView amp{};
};

namespace detail {
inline TensorView entry_or_none(std::span<const TensorView> list, size_t i) {
  return list.empty() ? TensorView() : list[i];
}
}  // namespace detail

inline RmspropStepArgs step_of(const MultiRmspropStepArgs& a, size_t i) {
  return RmspropStepArgs{a.params[i],
                         a.grads[i],
                         a.square_avgs[i],
                         detail::entry_or_none(a.momentum_bufs, i),
                         detail::entry_or_none(a.grad_avgs, i),
                         a.o,
                         detail::entry_or_none(a.hypers, i),
                         a.amp};
}
inline AdagradStepArgs step_of(const MultiAdagradStepArgs& a, size_t i) {
  return AdagradStepArgs{a.params[i], a.grads[i], a.sums[i], a.o, a.steps[i], detail::entry_or_none(a.hypers, i),
                         a.amp};
}
inline AdadeltaStepArgs step_of(const MultiAdadeltaStepArgs& a, size_t i) {
  return AdadeltaStepArgs{a.params[i], a.grads[i],       a.square_avgs[i], a.acc_deltas[i],
                          a.o,         detail::entry_or_none(a.hypers, i), a.amp};
}

// CPU backends (hyper and amp in host memory): the arguments with hyper's values in place.
inline RmspropStepArgs with_hyper_read(RmspropStepArgs a) {
  if (a.hyper.defined) a.o.lr = a.hyper.ptr<const double>()[0];
  return a;
}
inline AdadeltaStepArgs with_hyper_read(AdadeltaStepArgs a) {
  if (a.hyper.defined) a.o.lr = a.hyper.ptr<const double>()[0];
  return a;
}
inline AdagradStepArgs with_hyper_read(AdagradStepArgs a) {
  if (a.hyper.defined) {
    a.o.lr = a.hyper.ptr<const double>()[0];
    a.step = static_cast<int64_t>(a.hyper.ptr<const double>()[1]);
  }
  if (a.amp.defined) a.step -= static_cast<int64_t>(a.amp.ptr<const double>()[kAmpSkipped]);
  return a;
}

// ---- one element's update, for every backend ----
// T is the storage type, C the arithmetic type (the reference: double; the CPU loops:
// T; the cuda kernels: double over f32). The gradient is read times gs (loss scaling's
// 1/scale, else 1); the parameter and state are updated in place. Each weight decay is
// skipped at 0, as torch.optim skips it.

STRATA_HOST_DEVICE inline float optim_sqrt(float x) { return sqrtf(x); }
STRATA_HOST_DEVICE inline double optim_sqrt(double x) { return sqrt(x); }

// The options as the arithmetic type (1 - alpha formed in double: in f32, 1 - 0.99f is
// 2e-7 off 0.01 relative).
template <class C>
struct RmspropCoeffs {
  C lr, alpha, one_minus_alpha, eps, weight_decay, momentum;
  STRATA_HOST_DEVICE static RmspropCoeffs of(const RmspropOptions& o, double lr) {
    return {static_cast<C>(lr),    static_cast<C>(o.alpha),        static_cast<C>(1.0 - o.alpha),
            static_cast<C>(o.eps), static_cast<C>(o.weight_decay), static_cast<C>(o.momentum)};
  }
};
// momentum_buf / grad_avg: null without momentum / unless centered.
template <class C, class T>
STRATA_HOST_DEVICE inline void rmsprop_element(T& param, T grad, C gs, T& square_avg, T* momentum_buf, T* grad_avg,
                                               const RmspropCoeffs<C>& k) {
  const C p = static_cast<C>(param);
  C g = static_cast<C>(grad) * gs;
  if (k.weight_decay != C(0)) g = g + k.weight_decay * p;
  const C v = k.alpha * static_cast<C>(square_avg) + k.one_minus_alpha * (g * g);
  square_avg = static_cast<T>(v);
  C avg;
  if (grad_avg) {
    const C ga = k.alpha * static_cast<C>(*grad_avg) + k.one_minus_alpha * g;
    *grad_avg = static_cast<T>(ga);
    avg = optim_sqrt(v - ga * ga) + k.eps;
  } else {
    avg = optim_sqrt(v) + k.eps;
  }
  if (momentum_buf) {
    const C b = k.momentum * static_cast<C>(*momentum_buf) + g / avg;
    *momentum_buf = static_cast<T>(b);
    param = static_cast<T>(p - k.lr * b);
  } else {
    param = static_cast<T>(p - k.lr * (g / avg));
  }
}

// Adagrad's learning rate at 1-based step t.
STRATA_HOST_DEVICE inline double adagrad_clr(double lr, double lr_decay, double t) {
  return lr / (1.0 + (t - 1.0) * lr_decay);
}
template <class C>
struct AdagradCoeffs {
  C clr, eps, weight_decay;
  STRATA_HOST_DEVICE static AdagradCoeffs of(const AdagradOptions& o, double lr, double t) {
    return {static_cast<C>(adagrad_clr(lr, o.lr_decay, t)), static_cast<C>(o.eps), static_cast<C>(o.weight_decay)};
  }
};
template <class C, class T>
STRATA_HOST_DEVICE inline void adagrad_element(T& param, T grad, C gs, T& sum, const AdagradCoeffs<C>& k) {
  const C p = static_cast<C>(param);
  C g = static_cast<C>(grad) * gs;
  if (k.weight_decay != C(0)) g = g + k.weight_decay * p;
  const C s = static_cast<C>(sum) + g * g;
  sum = static_cast<T>(s);
  param = static_cast<T>(p - k.clr * (g / (optim_sqrt(s) + k.eps)));
}

template <class C>
struct AdadeltaCoeffs {
  C lr, rho, one_minus_rho, eps, weight_decay;
  STRATA_HOST_DEVICE static AdadeltaCoeffs of(const AdadeltaOptions& o, double lr) {
    return {static_cast<C>(lr), static_cast<C>(o.rho), static_cast<C>(1.0 - o.rho), static_cast<C>(o.eps),
            static_cast<C>(o.weight_decay)};
  }
};
template <class C, class T>
STRATA_HOST_DEVICE inline void adadelta_element(T& param, T grad, C gs, T& square_avg, T& acc_delta,
                                                const AdadeltaCoeffs<C>& k) {
  const C p = static_cast<C>(param);
  C g = static_cast<C>(grad) * gs;
  if (k.weight_decay != C(0)) g = g + k.weight_decay * p;
  const C v = k.rho * static_cast<C>(square_avg) + k.one_minus_rho * (g * g);
  square_avg = static_cast<T>(v);
  const C delta = optim_sqrt(static_cast<C>(acc_delta) + k.eps) / optim_sqrt(v + k.eps) * g;
  acc_delta = static_cast<T>(k.rho * static_cast<C>(acc_delta) + k.one_minus_rho * (delta * delta));
  param = static_cast<T>(p - k.lr * delta);
}

}  // namespace strata::ops
