#pragma once
// Validate-and-infer of RMSprop, Adagrad and Adadelta's steps (ops/validate.h says why one
// function per op): the front end (ops/adaptive_optim_ops.cpp) calls them at every call, the
// direct plans (ops/direct/optim_plans.h) when a group's tensors change. The options' own checks
// are ops/adaptive_optim.h's check_*_options, which nn's optimizer config also uses.
#include <initializer_list>
#include <span>
#include <string>

#include "strata/ops/adaptive_optim.h"
#include "strata/ops/validate.h"
#include "strata/ops/validate_optim.h"

namespace strata::ops {

namespace detail {

inline void check_finite_at_least(std::string_view who, std::string_view name, double v, double lo) {
  STRATA_CHECK(std::isfinite(v) && v >= lo, who, ": ", name, " must be a finite number >= ", lo, ", got ", v);
}

// A list of one kind of operand: its name in messages, its tensors, whether the step
// reads it (a state tensor the options leave out is not checked) and, for such a
// state, when it is needed (its message when missing).
struct Operands {
  std::string_view name;
  std::span<const Tensor> ts;
  bool used = true;
  std::string_view needed_when = "";
};

inline std::string entry_name(std::string_view list, size_t i, bool single) {
  return single ? std::string(list) : std::string(list) + "[" + std::to_string(i) + "]";
}

// The lists of one step call: lists[0] the parameters, [1] the gradients, then the state.
// A single step is lists of one entry, named without an index. Each used list has the
// parameters' length; each parameter is floating, and every other operand of it has its
// sizes and dtype and is an input the backend takes.
template <class D>
void check_lists(const D& d, OpId id, bool single, std::initializer_list<Operands> lists) {
  const std::string_view op = op_name(id);
  const Operands& params = *lists.begin();
  for (const Operands& l : lists)
    if (l.used && !single)
      STRATA_CHECK(l.ts.size() == params.ts.size(), op, ": ", l.name, l.needed_when, " has ", l.ts.size(),
                   " entries, params ", params.ts.size());
  for (size_t i = 0; i < params.ts.size(); ++i) {
    const std::string p = entry_name(params.name, i, single);
    check_float(op, p, params.ts[i]);
    check_input(d, id, p, params.ts[i]);
    for (auto it = lists.begin() + 1; it != lists.end(); ++it)
      if (it->used) check_elementwise_pair(d, id, p, params.ts[i], entry_name(it->name, i, single), it->ts[i]);
  }
}

inline void check_steps(std::string_view op, std::span<const int64_t> steps, size_t params, bool single) {
  STRATA_CHECK(single || steps.size() == params, op, ": steps has ", steps.size(), " entries, params ", params);
  for (size_t i = 0; i < steps.size(); ++i)
    STRATA_CHECK(steps[i] >= 1, op, ": ", entry_name("steps", i, single), " must be >= 1 (a 1-based count), got ",
                 steps[i]);
}

}  // namespace detail

template <class D>
void validate_rmsprop_step(const D& d, const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                           const Tensor& momentum_buf, const Tensor& grad_avg, const RmspropOptions& o) {
  check_rmsprop_options("rmsprop_step", o);
  detail::check_lists(d, OpId::rmsprop_step, true,
                      {{"param", {&param, 1}},
                       {"grad", {&grad, 1}},
                       {"square_avg", {&square_avg, 1}},
                       {"momentum_buf", {&momentum_buf, 1}, o.momentum != 0.0},
                       {"grad_avg", {&grad_avg, 1}, o.centered}});
}
template <class D>
void validate_adagrad_step(const D& d, const Tensor& param, const Tensor& grad, const Tensor& sum,
                           const AdagradOptions& o, int64_t step) {
  check_adagrad_options("adagrad_step", o);
  detail::check_lists(d, OpId::adagrad_step, true, {{"param", {&param, 1}}, {"grad", {&grad, 1}}, {"sum", {&sum, 1}}});
  detail::check_steps("adagrad_step", {&step, 1}, 1, true);
}
template <class D>
void validate_adadelta_step(const D& d, const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                            const Tensor& acc_delta, const AdadeltaOptions& o) {
  check_adadelta_options("adadelta_step", o);
  detail::check_lists(d, OpId::adadelta_step, true,
                      {{"param", {&param, 1}},
                       {"grad", {&grad, 1}},
                       {"square_avg", {&square_avg, 1}},
                       {"acc_delta", {&acc_delta, 1}}});
}
template <class D>
void validate_multi_rmsprop_step(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                                 std::span<const Tensor> square_avgs, std::span<const Tensor> momentum_bufs,
                                 std::span<const Tensor> grad_avgs, const RmspropOptions& o) {
  check_rmsprop_options("multi_rmsprop_step", o);
  detail::check_lists(d, OpId::multi_rmsprop_step, false,
                      {{"params", params},
                       {"grads", grads},
                       {"square_avgs", square_avgs},
                       {"momentum_bufs", momentum_bufs, o.momentum != 0.0, " (momentum is not 0)"},
                       {"grad_avgs", grad_avgs, o.centered, " (centered)"}});
}
template <class D>
void validate_multi_adagrad_step(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                                 std::span<const Tensor> sums, std::span<const int64_t> steps,
                                 const AdagradOptions& o) {
  check_adagrad_options("multi_adagrad_step", o);
  detail::check_lists(d, OpId::multi_adagrad_step, false, {{"params", params}, {"grads", grads}, {"sums", sums}});
  detail::check_steps("multi_adagrad_step", steps, params.size(), false);
}
template <class D>
void validate_multi_adadelta_step(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                                  std::span<const Tensor> square_avgs, std::span<const Tensor> acc_deltas,
                                  const AdadeltaOptions& o) {
  check_adadelta_options("multi_adadelta_step", o);
  detail::check_lists(d, OpId::multi_adadelta_step, false,
                      {{"params", params}, {"grads", grads}, {"square_avgs", square_avgs}, {"acc_deltas", acc_deltas}});
}

}  // namespace strata::ops
