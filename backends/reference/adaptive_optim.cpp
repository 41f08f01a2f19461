// RMSprop, Adagrad and Adadelta's steps, element by element: the update of
// ops/table/optim_args.h computed in double, stored in the parameter's dtype.
#include "strata/backends/reference/reference_backend.h"
#include "strata/backends/reference/strided.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using ref::for_each_element;
using ref::visit_float;

void ReferenceBackend::rmsprop_step(const RmspropStepArgs& args) {
  if (amp_skips(args.amp)) return;
  const RmspropStepArgs a = with_hyper_read(args);
  const bool mom = a.o.momentum != 0.0;
  STRATA_CHECK(!mom || a.momentum_buf.defined, "rmsprop_step: momentum ", a.o.momentum,
               " needs a momentum_buf for param ", a.param.sizes.str());
  STRATA_CHECK(!a.o.centered || a.grad_avg.defined, "rmsprop_step: centered needs a grad_avg for param ",
               a.param.sizes.str());
  const double gs = amp_grad_factor(a.amp);
  const auto k = RmspropCoeffs<double>::of(a.o, a.o.lr);
  visit_float(a.param.dtype, "rmsprop_step", [&](auto tag) {
    using T = decltype(tag);
    T* param = a.param.ptr<T>();
    const T* grad = a.grad.ptr<T>();
    T* sq = a.square_avg.ptr<T>();
    T* buf = mom ? a.momentum_buf.ptr<T>() : nullptr;
    T* avg = a.o.centered ? a.grad_avg.ptr<T>() : nullptr;
    // Absent state walks the parameter's offsets, unused.
    const TensorView& bv = mom ? a.momentum_buf : a.param;
    const TensorView& av = a.o.centered ? a.grad_avg : a.param;
    for_each_element(
        [&](int64_t, int64_t op, int64_t og, int64_t os, int64_t ob, int64_t oa) {
          rmsprop_element<double>(param[op], grad[og], gs, sq[os], buf ? &buf[ob] : nullptr,
                                  avg ? &avg[oa] : nullptr, k);
        },
        a.param, a.grad, a.square_avg, bv, av);
  });
}

void ReferenceBackend::adagrad_step(const AdagradStepArgs& args) {
  if (amp_skips(args.amp)) return;
  const AdagradStepArgs a = with_hyper_read(args);
  STRATA_CHECK(a.step >= 1, "adagrad_step: step is 1-based (lr_decay counts from it), got ", a.step);
  const double gs = amp_grad_factor(a.amp);
  const auto k = AdagradCoeffs<double>::of(a.o, a.o.lr, static_cast<double>(a.step));
  visit_float(a.param.dtype, "adagrad_step", [&](auto tag) {
    using T = decltype(tag);
    T* param = a.param.ptr<T>();
    const T* grad = a.grad.ptr<T>();
    T* sum = a.sum.ptr<T>();
    for_each_element(
        [&](int64_t, int64_t op, int64_t og, int64_t os) {
          adagrad_element<double>(param[op], grad[og], gs, sum[os], k);
        },
        a.param, a.grad, a.sum);
  });
}

void ReferenceBackend::adadelta_step(const AdadeltaStepArgs& args) {
  if (amp_skips(args.amp)) return;
  const AdadeltaStepArgs a = with_hyper_read(args);
  const double gs = amp_grad_factor(a.amp);
  const auto k = AdadeltaCoeffs<double>::of(a.o, a.o.lr);
  visit_float(a.param.dtype, "adadelta_step", [&](auto tag) {
    using T = decltype(tag);
    T* param = a.param.ptr<T>();
    const T* grad = a.grad.ptr<T>();
    T* sq = a.square_avg.ptr<T>();
    T* acc = a.acc_delta.ptr<T>();
    for_each_element(
        [&](int64_t, int64_t op, int64_t og, int64_t os, int64_t oa) {
          adadelta_element<double>(param[op], grad[og], gs, sq[os], acc[oa], k);
        },
        a.param, a.grad, a.square_avg, a.acc_delta);
  });
}

// A list: each parameter's single step.
void ReferenceBackend::multi_rmsprop_step(const MultiRmspropStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) rmsprop_step(step_of(a, i));
}
void ReferenceBackend::multi_adagrad_step(const MultiAdagradStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) adagrad_step(step_of(a, i));
}
void ReferenceBackend::multi_adadelta_step(const MultiAdadeltaStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) adadelta_step(step_of(a, i));
}

}  // namespace strata::backends
