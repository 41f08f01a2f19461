// Front end of RMSprop, Adagrad and Adadelta's steps (ops/adaptive_optim.h).
#include <cmath>
#include <string>
#include <vector>

#include "strata/ops/bind/optim.h"
#include "strata/ops/frontend_support.h"

namespace strata::ops {

namespace {

void note_writes(std::span<const Tensor> params) {
  for (const Tensor& p : params) p.note_write();
}
using detail::check_finite_at_least;

}  // namespace

void check_rmsprop_options(std::string_view who, const RmspropOptions& o) {
  check_finite_at_least(who, "lr", o.lr, 0.0);
  check_finite_at_least(who, "eps", o.eps, 0.0);
  check_finite_at_least(who, "weight_decay", o.weight_decay, 0.0);
  check_finite_at_least(who, "momentum", o.momentum, 0.0);
  STRATA_CHECK(o.alpha >= 0.0 && o.alpha < 1.0, who, ": alpha must be in [0, 1), got ", o.alpha);
}

void check_adagrad_options(std::string_view who, const AdagradOptions& o) {
  check_finite_at_least(who, "lr", o.lr, 0.0);
  check_finite_at_least(who, "lr_decay", o.lr_decay, 0.0);
  check_finite_at_least(who, "weight_decay", o.weight_decay, 0.0);
  check_finite_at_least(who, "eps", o.eps, 0.0);
}

void check_adadelta_options(std::string_view who, const AdadeltaOptions& o) {
  check_finite_at_least(who, "lr", o.lr, 0.0);
  check_finite_at_least(who, "eps", o.eps, 0.0);
  check_finite_at_least(who, "weight_decay", o.weight_decay, 0.0);
  STRATA_CHECK(o.rho >= 0.0 && o.rho <= 1.0, who, ": rho must be in [0, 1], got ", o.rho);
}

template <class D>
void rmsprop_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                   const Tensor& momentum_buf, const Tensor& grad_avg, const RmspropOptions& o) {
  auto b = bind::rmsprop_step(d, param, grad, square_avg, momentum_buf, grad_avg, o);
  param.note_write();
  run_once(d, std::move(b));
}

template <class D>
void adagrad_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradOptions& o,
                   int64_t step) {
  auto b = bind::adagrad_step(d, param, grad, sum, o, step);
  param.note_write();
  run_once(d, std::move(b));
}

template <class D>
void adadelta_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                    const Tensor& acc_delta, const AdadeltaOptions& o) {
  auto b = bind::adadelta_step(d, param, grad, square_avg, acc_delta, o);
  param.note_write();
  run_once(d, std::move(b));
}

template <class D>
void multi_rmsprop_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                         std::span<const Tensor> square_avgs, std::span<const Tensor> momentum_bufs,
                         std::span<const Tensor> grad_avgs, const RmspropOptions& o) {
  bind::ListViews v;
  auto b = bind::multi_rmsprop_step(d, v, params, grads, square_avgs, momentum_bufs, grad_avgs, o);
  note_writes(params);
  run_once(d, std::move(b));
}

template <class D>
void multi_adagrad_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                         std::span<const Tensor> sums, std::span<const int64_t> steps, const AdagradOptions& o) {
  bind::ListViews v;
  auto b = bind::multi_adagrad_step(d, v, params, grads, sums, steps, o);
  note_writes(params);
  run_once(d, std::move(b));
}

template <class D>
void multi_adadelta_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                          std::span<const Tensor> square_avgs, std::span<const Tensor> acc_deltas,
                          const AdadeltaOptions& o) {
  bind::ListViews v;
  auto b = bind::multi_adadelta_step(d, v, params, grads, square_avgs, acc_deltas, o);
  note_writes(params);
  run_once(d, std::move(b));
}

using Tensors = std::span<const Tensor>;
#define STRATA_OPS_INSTANTIATE(D)                                                                                  \
  template void rmsprop_step_<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,           \
                                 const Tensor&, const RmspropOptions&);                                           \
  template void adagrad_step_<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const AdagradOptions&,    \
                                 int64_t);                                                                         \
  template void adadelta_step_<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,          \
                                  const AdadeltaOptions&);                                                         \
  template void multi_rmsprop_step_<D>(const D&, Tensors, Tensors, Tensors, Tensors, Tensors,                     \
                                       const RmspropOptions&);                                                     \
  template void multi_adagrad_step_<D>(const D&, Tensors, Tensors, Tensors, std::span<const int64_t>,            \
                                       const AdagradOptions&);                                                     \
  template void multi_adadelta_step_<D>(const D&, Tensors, Tensors, Tensors, Tensors, const AdadeltaOptions&);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
