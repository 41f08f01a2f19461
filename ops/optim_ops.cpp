#include "strata/ops/frontend_support.h"

namespace strata::ops {

namespace {
void check_param_like(std::string_view op, std::string_view arg, const Tensor& param, const Tensor& t) {
  check_defined(op, "param", param);
  check_defined(op, arg, t);
  check_same_shape(op, "param", param, arg, t);
  check_same_dtype(op, "param", param, arg, t);
}
}  // namespace

template <class D>
void sgd_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdOptions& o) {
  check_float("sgd_step", "param", param);
  check_param_like("sgd_step", "grad", param, grad);
  if (o.momentum != 0.0) check_param_like("sgd_step", "momentum_buf", param, momentum_buf);
  STRATA_CHECK(!o.nesterov || o.momentum > 0, "sgd_step: nesterov needs momentum > 0");
  check_input(d, OpId::sgd_step, "param", param);
  check_input(d, OpId::sgd_step, "grad", grad);
  if (o.momentum != 0.0) check_input(d, OpId::sgd_step, "momentum_buf", momentum_buf);
  d.sgd_step(SgdStepArgs{param, grad, momentum_buf, o});
}

template <class D>
void adam_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const AdamOptions& o, int64_t step) {
  check_float("adam_step", "param", param);
  check_param_like("adam_step", "grad", param, grad);
  check_param_like("adam_step", "exp_avg", param, exp_avg);
  check_param_like("adam_step", "exp_avg_sq", param, exp_avg_sq);
  STRATA_CHECK(step >= 1, "adam_step: step must be >= 1, got ", step);
  check_input(d, OpId::adam_step, "param", param);
  check_input(d, OpId::adam_step, "grad", grad);
  check_input(d, OpId::adam_step, "exp_avg", exp_avg);
  check_input(d, OpId::adam_step, "exp_avg_sq", exp_avg_sq);
  d.adam_step(AdamStepArgs{param, grad, exp_avg, exp_avg_sq, o, step});
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
  template void amp_update_scale_<D>(const D&, const Tensor&, const Tensor&, double, double, int64_t);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
