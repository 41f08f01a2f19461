#include "strata/ops/frontend_support.h"

namespace strata::ops {

namespace {
void check_param_like(std::string_view op, std::string_view param_name, std::string_view arg, const Tensor& param,
                      const Tensor& t) {
  check_defined(op, param_name, param);
  check_defined(op, arg, t);
  check_same_shape(op, param_name, param, arg, t);
  check_same_dtype(op, param_name, param, arg, t);
}

// One parameter's operands of an SGD step, named as the op's messages call them (the
// single step's "param", a list's "params[3]").
template <class D>
void check_sgd_operands(const D& d, OpId id, std::string_view op, std::string_view p, std::string_view g,
                        std::string_view b, const Tensor& param, const Tensor& grad, const Tensor& buf, bool momentum) {
  check_float(op, p, param);
  check_param_like(op, p, g, param, grad);
  if (momentum) check_param_like(op, p, b, param, buf);
  check_input(d, id, p, param);
  check_input(d, id, g, grad);
  if (momentum) check_input(d, id, b, buf);
}

// One parameter's operands of an Adam step and its step count.
template <class D>
void check_adam_operands(const D& d, OpId id, std::string_view op, std::string_view p, std::string_view g,
                         std::string_view m, std::string_view v, std::string_view step_name, const Tensor& param,
                         const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, int64_t step) {
  check_float(op, p, param);
  check_param_like(op, p, g, param, grad);
  check_param_like(op, p, m, param, exp_avg);
  check_param_like(op, p, v, param, exp_avg_sq);
  STRATA_CHECK(step >= 1, op, ": ", step_name, " must be >= 1, got ", step);
  check_input(d, id, p, param);
  check_input(d, id, g, grad);
  check_input(d, id, m, exp_avg);
  check_input(d, id, v, exp_avg_sq);
}

std::string item(std::string_view list, size_t i) { return std::string(list) + "[" + std::to_string(i) + "]"; }

void check_list_length(std::string_view op, std::string_view name, size_t n, size_t want) {
  STRATA_CHECK(n == want, op, ": ", name, " has ", n, " entries, params ", want);
}

std::vector<TensorView> views_of(std::span<const Tensor> ts) { return {ts.begin(), ts.end()}; }
}  // namespace

template <class D>
void sgd_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdOptions& o) {
  STRATA_CHECK(!o.nesterov || o.momentum > 0, "sgd_step: nesterov needs momentum > 0");
  check_sgd_operands(d, OpId::sgd_step, "sgd_step", "param", "grad", "momentum_buf", param, grad, momentum_buf,
                     o.momentum != 0.0);
  param.note_write();
  d.sgd_step(SgdStepArgs{param, grad, momentum_buf, o});
}

template <class D>
void adam_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const AdamOptions& o, int64_t step) {
  check_adam_operands(d, OpId::adam_step, "adam_step", "param", "grad", "exp_avg", "exp_avg_sq", "step", param, grad,
                      exp_avg, exp_avg_sq, step);
  param.note_write();
  d.adam_step(AdamStepArgs{param, grad, exp_avg, exp_avg_sq, o, step});
}

template <class D>
void multi_sgd_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                     std::span<const Tensor> momentum_bufs, const SgdOptions& o) {
  constexpr std::string_view op = "multi_sgd_step";
  const bool mom = o.momentum != 0.0;
  check_list_length(op, "grads", grads.size(), params.size());
  if (mom) check_list_length(op, "momentum_bufs (momentum is not 0)", momentum_bufs.size(), params.size());
  STRATA_CHECK(!o.nesterov || o.momentum > 0, op, ": nesterov needs momentum > 0");
  for (size_t i = 0; i < params.size(); ++i)
    check_sgd_operands(d, OpId::multi_sgd_step, op, item("params", i), item("grads", i), item("momentum_bufs", i),
                       params[i], grads[i], mom ? momentum_bufs[i] : Tensor(), mom);
  const std::vector<TensorView> pv = views_of(params), gv = views_of(grads),
                                bv = mom ? views_of(momentum_bufs) : std::vector<TensorView>();
  for (const Tensor& p : params) p.note_write();
  d.multi_sgd_step(MultiSgdStepArgs{pv, gv, bv, {}, o});
}

template <class D>
void multi_adam_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                      std::span<const Tensor> exp_avgs, std::span<const Tensor> exp_avg_sqs,
                      std::span<const int64_t> steps, const AdamOptions& o) {
  constexpr std::string_view op = "multi_adam_step";
  check_list_length(op, "grads", grads.size(), params.size());
  check_list_length(op, "exp_avgs", exp_avgs.size(), params.size());
  check_list_length(op, "exp_avg_sqs", exp_avg_sqs.size(), params.size());
  check_list_length(op, "steps", steps.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i)
    check_adam_operands(d, OpId::multi_adam_step, op, item("params", i), item("grads", i), item("exp_avgs", i),
                        item("exp_avg_sqs", i), item("steps", i), params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
                        steps[i]);
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
