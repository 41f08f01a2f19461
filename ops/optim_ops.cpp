#include "strata/ops/bind/optim.h"
#include "strata/ops/frontend_support.h"

namespace strata::ops {

namespace {
void note_writes(std::span<const Tensor> params) {
  for (const Tensor& p : params) p.note_write();
}
}  // namespace

template <class D>
void sgd_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdOptions& o) {
  auto b = bind::sgd_step(d, param, grad, momentum_buf, o);
  param.note_write();
  run_once(d, std::move(b));
}

template <class D>
void adam_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const AdamOptions& o, int64_t step) {
  auto b = bind::adam_step(d, param, grad, exp_avg, exp_avg_sq, o, step);
  param.note_write();
  run_once(d, std::move(b));
}

template <class D>
void multi_sgd_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                     std::span<const Tensor> momentum_bufs, const SgdOptions& o) {
  bind::ListViews v;
  auto b = bind::multi_sgd_step(d, v, params, grads, momentum_bufs, o);
  note_writes(params);
  run_once(d, std::move(b));
}

template <class D>
void multi_adam_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                      std::span<const Tensor> exp_avgs, std::span<const Tensor> exp_avg_sqs,
                      std::span<const int64_t> steps, const AdamOptions& o) {
  bind::ListViews v;
  auto b = bind::multi_adam_step(d, v, params, grads, exp_avgs, exp_avg_sqs, steps, o);
  note_writes(params);
  run_once(d, std::move(b));
}

template <class D>
void amp_update_scale_(const D& d, const Tensor& grad_sums, const Tensor& state, double growth, double backoff,
                       int64_t interval) {
  run_once(d, bind::amp_update_scale(d, grad_sums, state, growth, backoff, interval));
}

#define STRATA_OPS_INSTANTIATE(D)                                                                           \
  template void sgd_step_<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const SgdOptions&);    \
  template void adam_step_<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,        \
                              const AdamOptions&, int64_t);                                              \
  template void multi_sgd_step_<D>(const D&, std::span<const Tensor>, std::span<const Tensor>,              \
                                   std::span<const Tensor>, const SgdOptions&);                           \
  template void multi_adam_step_<D>(const D&, std::span<const Tensor>, std::span<const Tensor>,             \
                                    std::span<const Tensor>, std::span<const Tensor>,                      \
                                    std::span<const int64_t>, const AdamOptions&);                        \
  template void amp_update_scale_<D>(const D&, const Tensor&, const Tensor&, double, double, int64_t);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
