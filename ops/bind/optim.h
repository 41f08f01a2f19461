#pragma once
// The optimizers' steps and the loss scale's update (bound.h): the front end (ops/optim_ops.cpp,
// ops/adaptive_optim_ops.cpp) and direct mode's group plans (ops/direct/optim_plans.h) both bind
// here. A group's lists are views held in the caller's ListViews (a plan keeps its own, so a step
// allocates nothing once the lists have their sizes); `check` = false skips the checks when the
// caller knows the same tensors passed them before (a plan's key: optim_plans.h). hypers and amp
// are direct and graph modes' optional arguments (op_args.h).
#include <span>
#include <vector>

#include "strata/ops/bind/bound.h"
#include "strata/ops/validate.h"
#include "strata/ops/validate_adaptive_optim.h"
#include "strata/ops/validate_optim.h"

namespace strata::ops::bind {

struct ListViews {
  std::vector<TensorView> lists[6];
  // List i: views of ts, or none when unused (a buffer the options do not need).
  std::span<const TensorView> set(int i, std::span<const Tensor> ts, bool used = true) {
    if (used) lists[i].assign(ts.begin(), ts.end());
    else lists[i].clear();
    return lists[i];
  }
};

template <class D>
Bound<OpId::sgd_step> sgd_step(const D& d, const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
                               const SgdOptions& o) {
  validate_sgd_step(d, param, grad, momentum_buf, o);
  return {{param, grad, momentum_buf, o}, {}};
}

template <class D>
Bound<OpId::adam_step> adam_step(const D& d, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                                 const Tensor& exp_avg_sq, const AdamOptions& o, int64_t step) {
  validate_adam_step(d, param, grad, exp_avg, exp_avg_sq, step);
  return {{param, grad, exp_avg, exp_avg_sq, o, step}, {}};
}

template <class D>
Bound<OpId::rmsprop_step> rmsprop_step(const D& d, const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                                       const Tensor& momentum_buf, const Tensor& grad_avg, const RmspropOptions& o) {
  validate_rmsprop_step(d, param, grad, square_avg, momentum_buf, grad_avg, o);
  return {{param, grad, square_avg, o.momentum != 0.0 ? TensorView(momentum_buf) : TensorView(),
           o.centered ? TensorView(grad_avg) : TensorView(), o},
          {}};
}

template <class D>
Bound<OpId::adagrad_step> adagrad_step(const D& d, const Tensor& param, const Tensor& grad, const Tensor& sum,
                                       const AdagradOptions& o, int64_t step) {
  validate_adagrad_step(d, param, grad, sum, o, step);
  return {{param, grad, sum, o, step}, {}};
}

template <class D>
Bound<OpId::adadelta_step> adadelta_step(const D& d, const Tensor& param, const Tensor& grad,
                                         const Tensor& square_avg, const Tensor& acc_delta, const AdadeltaOptions& o) {
  validate_adadelta_step(d, param, grad, square_avg, acc_delta, o);
  return {{param, grad, square_avg, acc_delta, o}, {}};
}

template <class D>
Bound<OpId::multi_sgd_step> multi_sgd_step(const D& d, ListViews& v, std::span<const Tensor> params,
                                           std::span<const Tensor> grads, std::span<const Tensor> momentum_bufs,
                                           const SgdOptions& o, std::span<const Tensor> hypers = {},
                                           const Tensor& amp = Tensor(), bool check = true) {
  if (check) validate_multi_sgd_step(d, params, grads, momentum_bufs, o);
  return {{v.set(0, params), v.set(1, grads), v.set(2, momentum_bufs, o.momentum != 0.0), v.set(3, hypers), o,
           TensorView(amp)},
          {}};
}

template <class D>
Bound<OpId::multi_adam_step> multi_adam_step(const D& d, ListViews& v, std::span<const Tensor> params,
                                             std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
                                             std::span<const Tensor> exp_avg_sqs, std::span<const int64_t> steps,
                                             const AdamOptions& o, std::span<const Tensor> hypers = {},
                                             const Tensor& amp = Tensor(), bool check = true) {
  if (check) validate_multi_adam_step(d, params, grads, exp_avgs, exp_avg_sqs, steps);
  return {{v.set(0, params), v.set(1, grads), v.set(2, exp_avgs), v.set(3, exp_avg_sqs), v.set(4, hypers), steps, o,
           TensorView(amp)},
          {}};
}

template <class D>
Bound<OpId::multi_rmsprop_step> multi_rmsprop_step(const D& d, ListViews& v, std::span<const Tensor> params,
                                                   std::span<const Tensor> grads, std::span<const Tensor> square_avgs,
                                                   std::span<const Tensor> momentum_bufs,
                                                   std::span<const Tensor> grad_avgs, const RmspropOptions& o,
                                                   std::span<const Tensor> hypers = {}, const Tensor& amp = Tensor(),
                                                   bool check = true) {
  if (check) validate_multi_rmsprop_step(d, params, grads, square_avgs, momentum_bufs, grad_avgs, o);
  return {{v.set(0, params), v.set(1, grads), v.set(2, square_avgs), v.set(3, momentum_bufs, o.momentum != 0.0),
           v.set(4, grad_avgs, o.centered), v.set(5, hypers), o, TensorView(amp)},
          {}};
}

template <class D>
Bound<OpId::multi_adagrad_step> multi_adagrad_step(const D& d, ListViews& v, std::span<const Tensor> params,
                                                   std::span<const Tensor> grads, std::span<const Tensor> sums,
                                                   std::span<const int64_t> steps, const AdagradOptions& o,
                                                   std::span<const Tensor> hypers = {}, const Tensor& amp = Tensor(),
                                                   bool check = true) {
  if (check) validate_multi_adagrad_step(d, params, grads, sums, steps, o);
  return {{v.set(0, params), v.set(1, grads), v.set(2, sums), v.set(3, hypers), steps, o, TensorView(amp)},
          {}};
}

template <class D>
Bound<OpId::multi_adadelta_step> multi_adadelta_step(const D& d, ListViews& v, std::span<const Tensor> params,
                                                     std::span<const Tensor> grads,
                                                     std::span<const Tensor> square_avgs,
                                                     std::span<const Tensor> acc_deltas, const AdadeltaOptions& o,
                                                     std::span<const Tensor> hypers = {}, const Tensor& amp = Tensor(),
                                                     bool check = true) {
  if (check) validate_multi_adadelta_step(d, params, grads, square_avgs, acc_deltas, o);
  return {{v.set(0, params), v.set(1, grads), v.set(2, square_avgs), v.set(3, acc_deltas), v.set(4, hypers), o,
           TensorView(amp)},
          {}};
}

// Dynamic loss scaling's update of `state` from the gradients' sums (AmpUpdateScaleArgs).
template <class D>
Bound<OpId::amp_update_scale> amp_update_scale(const D& d, const Tensor& grad_sums, const Tensor& state, double growth,
                                               double backoff, int64_t interval) {
  validate_amp_update_scale(d, grad_sums, state, growth, backoff, interval);
  return {{grad_sums, state, growth, backoff, interval}, {}};
}

}  // namespace strata::ops::bind
