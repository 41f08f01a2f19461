#pragma once
// Validate-and-infer for the optimizer steps (SGD, Adam, and their multi-tensor forms), as
// ops/validate.h does for the other ops: operands named as each op's messages call them. The
// adaptive optimizers' steps (validate_adaptive_optim.h) share the detail helpers.
#include <span>
#include <string>
#include <string_view>

#include "strata/ops/validate.h"

namespace strata::ops {

// ---- the optimizer steps: operands named as the op's messages call them (the single step's
// "param", a list's "params[3]").
namespace detail {
inline void check_param_like(std::string_view op, std::string_view param_name, std::string_view arg,
                             const Tensor& param, const Tensor& t) {
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

inline std::string item(std::string_view list, size_t i) { return std::string(list) + "[" + std::to_string(i) + "]"; }

inline void check_list_length(std::string_view op, std::string_view name, size_t n, size_t want) {
  STRATA_CHECK(n == want, op, ": ", name, " has ", n, " entries, params ", want);
}

}  // namespace detail

template <class D>
void validate_sgd_step(const D& d, const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
                       const SgdOptions& o) {
  STRATA_CHECK(!o.nesterov || o.momentum > 0, "sgd_step: nesterov needs momentum > 0");
  detail::check_sgd_operands(d, OpId::sgd_step, "sgd_step", "param", "grad", "momentum_buf", param, grad,
                             momentum_buf, o.momentum != 0.0);
}
template <class D>
void validate_adam_step(const D& d, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                        const Tensor& exp_avg_sq, int64_t step) {
  detail::check_adam_operands(d, OpId::adam_step, "adam_step", "param", "grad", "exp_avg", "exp_avg_sq", "step",
                              param, grad, exp_avg, exp_avg_sq, step);
}
template <class D>
void validate_multi_sgd_step(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                             std::span<const Tensor> momentum_bufs, const SgdOptions& o) {
  constexpr std::string_view op = "multi_sgd_step";
  const bool mom = o.momentum != 0.0;
  detail::check_list_length(op, "grads", grads.size(), params.size());
  if (mom) detail::check_list_length(op, "momentum_bufs (momentum is not 0)", momentum_bufs.size(), params.size());
  STRATA_CHECK(!o.nesterov || o.momentum > 0, op, ": nesterov needs momentum > 0");
  for (size_t i = 0; i < params.size(); ++i)
    detail::check_sgd_operands(d, OpId::multi_sgd_step, op, detail::item("params", i), detail::item("grads", i),
                               detail::item("momentum_bufs", i), params[i], grads[i],
                               mom ? momentum_bufs[i] : Tensor(), mom);
}
template <class D>
void validate_multi_adam_step(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                              std::span<const Tensor> exp_avgs, std::span<const Tensor> exp_avg_sqs,
                              std::span<const int64_t> steps) {
  constexpr std::string_view op = "multi_adam_step";
  detail::check_list_length(op, "grads", grads.size(), params.size());
  detail::check_list_length(op, "exp_avgs", exp_avgs.size(), params.size());
  detail::check_list_length(op, "exp_avg_sqs", exp_avg_sqs.size(), params.size());
  detail::check_list_length(op, "steps", steps.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i)
    detail::check_adam_operands(d, OpId::multi_adam_step, op, detail::item("params", i), detail::item("grads", i),
                                detail::item("exp_avgs", i), detail::item("exp_avg_sqs", i),
                                detail::item("steps", i), params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
                                steps[i]);
}

}  // namespace strata::ops
