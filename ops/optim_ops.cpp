#include "strata/ops/frontend_support.h"
#include "strata/ops/validate_optim.h"

namespace strata::ops {

namespace {
std::vector<TensorView> views_of(std::span<const Tensor> ts) { return {ts.begin(), ts.end()}; }
}  // namespace

template <class D>
void sgd_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdOptions& o) {
  validate_sgd_step(d, param, grad, momentum_buf, o);
  param.note_write();
  d.sgd_step(SgdStepArgs{param, grad, momentum_buf, o});
}

template <class D>
void adam_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const AdamOptions& o, int64_t step) {
  validate_adam_step(d, param, grad, exp_avg, exp_avg_sq, step);
  param.note_write();
  d.adam_step(AdamStepArgs{param, grad, exp_avg, exp_avg_sq, o, step});
}

template <class D>
void multi_sgd_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                     std::span<const Tensor> momentum_bufs, const SgdOptions& o) {
  validate_multi_sgd_step(d, params, grads, momentum_bufs, o);
  const bool mom = o.momentum != 0.0;
  const std::vector<TensorView> pv = views_of(params), gv = views_of(grads),
                                bv = mom ? views_of(momentum_bufs) : std::vector<TensorView>();
  for (const Tensor& p : params) p.note_write();
  d.multi_sgd_step(MultiSgdStepArgs{pv, gv, bv, {}, o});
}

template <class D>
void multi_adam_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                      std::span<const Tensor> exp_avgs, std::span<const Tensor> exp_avg_sqs,
                      std::span<const int64_t> steps, const AdamOptions& o) {
  validate_multi_adam_step(d, params, grads, exp_avgs, exp_avg_sqs, steps);
  const std::vector<TensorView> pv = views_of(params), gv = views_of(grads), mv = views_of(exp_avgs),
                                vv = views_of(exp_avg_sqs);
  for (const Tensor& p : params) p.note_write();
  d.multi_adam_step(MultiAdamStepArgs{pv, gv, mv, vv, {}, steps, o});
}

template <class D>
void amp_update_scale_(const D& d, const Tensor& grad_sums, const Tensor& state, double growth, double backoff,
                       int64_t interval) {
  validate_amp_update_scale(d, grad_sums, state, growth, backoff, interval);
  d.amp_update_scale(AmpUpdateScaleArgs{grad_sums, state, growth, backoff, interval});
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
