#pragma once
// RMSprop, Adagrad and Adadelta's steps as plain loops over any strides, in the
// parameter's dtype: each element runs the update of ops/table/optim_args.h, the one
// the reference and the cuda kernels run. Parameters and state update in place.
#include "strata/backends/cpu/strided.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::loops {

// An absent state tensor (RMSprop's momentum buffer or centered average): the loop walks
// the parameter's offsets in its place and the update gets a null pointer.
inline const ops::TensorView& or_param(const ops::TensorView& state, const ops::TensorView& param) {
  return state.defined ? state : param;
}

template <class T>
void rmsprop_step(const ops::RmspropStepArgs& args) {
  if (ops::amp_skips(args.amp)) return;
  const ops::RmspropStepArgs a = ops::with_hyper_read(args);
  const bool mom = a.o.momentum != 0.0;
  STRATA_CHECK(!mom || a.momentum_buf.defined, "rmsprop_step: momentum ", a.o.momentum, " needs a momentum_buf");
  STRATA_CHECK(!a.o.centered || a.grad_avg.defined, "rmsprop_step: centered needs a grad_avg");
  T* p = a.param.ptr<T>();
  const T* g = a.grad.ptr<const T>();
  T* sq = a.square_avg.ptr<T>();
  T* buf = mom ? a.momentum_buf.ptr<T>() : nullptr;
  T* avg = a.o.centered ? a.grad_avg.ptr<T>() : nullptr;
  const auto k = ops::RmspropCoeffs<T>::of(a.o, a.o.lr);
  const T gs = static_cast<T>(ops::amp_grad_factor(a.amp));
  for_each_unordered([=](int64_t, int64_t op, int64_t og, int64_t os, int64_t ob, int64_t oa) {
    ops::rmsprop_element<T>(p[op], g[og], gs, sq[os], buf ? &buf[ob] : nullptr, avg ? &avg[oa] : nullptr, k);
  }, a.param, a.grad, a.square_avg, or_param(a.momentum_buf, a.param), or_param(a.grad_avg, a.param));
}

template <class T>
void adagrad_step(const ops::AdagradStepArgs& args) {
  if (ops::amp_skips(args.amp)) return;
  const ops::AdagradStepArgs a = ops::with_hyper_read(args);
  STRATA_CHECK(a.step >= 1, "adagrad_step: step is 1-based (lr_decay counts from it), got ", a.step);
  T* p = a.param.ptr<T>();
  const T* g = a.grad.ptr<const T>();
  T* sum = a.sum.ptr<T>();
  const auto k = ops::AdagradCoeffs<T>::of(a.o, a.o.lr, static_cast<double>(a.step));
  const T gs = static_cast<T>(ops::amp_grad_factor(a.amp));
  for_each_unordered([=](int64_t, int64_t op, int64_t og, int64_t os) {
    ops::adagrad_element<T>(p[op], g[og], gs, sum[os], k);
  }, a.param, a.grad, a.sum);
}

template <class T>
void adadelta_step(const ops::AdadeltaStepArgs& args) {
  if (ops::amp_skips(args.amp)) return;
  const ops::AdadeltaStepArgs a = ops::with_hyper_read(args);
  T* p = a.param.ptr<T>();
  const T* g = a.grad.ptr<const T>();
  T* sq = a.square_avg.ptr<T>();
  T* acc = a.acc_delta.ptr<T>();
  const auto k = ops::AdadeltaCoeffs<T>::of(a.o, a.o.lr);
  const T gs = static_cast<T>(ops::amp_grad_factor(a.amp));
  for_each_unordered([=](int64_t, int64_t op, int64_t og, int64_t os, int64_t oa) {
    ops::adadelta_element<T>(p[op], g[og], gs, sq[os], acc[oa], k);
  }, a.param, a.grad, a.square_avg, a.acc_delta);
}

// The step for an args struct's type (callers generic over the optimizers).
template <class T>
void step_of(const ops::RmspropStepArgs& a) {
  rmsprop_step<T>(a);
}
template <class T>
void step_of(const ops::AdagradStepArgs& a) {
  adagrad_step<T>(a);
}
template <class T>
void step_of(const ops::AdadeltaStepArgs& a) {
  adadelta_step<T>(a);
}

// A backend's single step through these loops, for f32 and f64.
template <class Args>
void step_in(std::string_view backend, std::string_view op, const Args& a) {
  visit_float(backend, op, a.param.dtype, [&](auto t) { step_of<decltype(t)>(a); });
}

}  // namespace strata::backends::loops
