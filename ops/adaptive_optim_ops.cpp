// Front end of RMSprop, Adagrad and Adadelta's steps (ops/adaptive_optim.h).
#include <cmath>
#include <string>
#include <vector>

#include "strata/ops/frontend_support.h"

namespace strata::ops {

namespace {

void check_finite_at_least(std::string_view who, std::string_view name, double v, double lo) {
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

std::string entry_name(std::string_view list, size_t i, bool single) {
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

void check_steps(std::string_view op, std::span<const int64_t> steps, size_t params, bool single) {
  STRATA_CHECK(single || steps.size() == params, op, ": steps has ", steps.size(), " entries, params ", params);
  for (size_t i = 0; i < steps.size(); ++i)
    STRATA_CHECK(steps[i] >= 1, op, ": ", entry_name("steps", i, single), " must be >= 1 (a 1-based count), got ",
                 steps[i]);
}

std::vector<TensorView> views_of(std::span<const Tensor> ts) { return {ts.begin(), ts.end()}; }
std::vector<TensorView> views_if(bool used, std::span<const Tensor> ts) {
  return used ? views_of(ts) : std::vector<TensorView>();
}
void note_writes(std::span<const Tensor> params) {
  for (const Tensor& p : params) p.note_write();
}

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
  check_rmsprop_options("rmsprop_step", o);
  const bool mom = o.momentum != 0.0;
  check_lists(d, OpId::rmsprop_step, true,
              {{"param", {&param, 1}},
               {"grad", {&grad, 1}},
               {"square_avg", {&square_avg, 1}},
               {"momentum_buf", {&momentum_buf, 1}, mom},
               {"grad_avg", {&grad_avg, 1}, o.centered}});
  param.note_write();
  d.rmsprop_step(RmspropStepArgs{param, grad, square_avg, mom ? TensorView(momentum_buf) : TensorView(),
                                 o.centered ? TensorView(grad_avg) : TensorView(), o});
}

template <class D>
void adagrad_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradOptions& o,
                   int64_t step) {
  check_adagrad_options("adagrad_step", o);
  check_lists(d, OpId::adagrad_step, true, {{"param", {&param, 1}}, {"grad", {&grad, 1}}, {"sum", {&sum, 1}}});
  check_steps("adagrad_step", {&step, 1}, 1, true);
  param.note_write();
  d.adagrad_step(AdagradStepArgs{param, grad, sum, o, step});
}

template <class D>
void adadelta_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                    const Tensor& acc_delta, const AdadeltaOptions& o) {
  check_adadelta_options("adadelta_step", o);
  check_lists(d, OpId::adadelta_step, true,
              {{"param", {&param, 1}},
               {"grad", {&grad, 1}},
               {"square_avg", {&square_avg, 1}},
               {"acc_delta", {&acc_delta, 1}}});
  param.note_write();
  d.adadelta_step(AdadeltaStepArgs{param, grad, square_avg, acc_delta, o});
}

template <class D>
void multi_rmsprop_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                         std::span<const Tensor> square_avgs, std::span<const Tensor> momentum_bufs,
                         std::span<const Tensor> grad_avgs, const RmspropOptions& o) {
  check_rmsprop_options("multi_rmsprop_step", o);
  const bool mom = o.momentum != 0.0;
  check_lists(d, OpId::multi_rmsprop_step, false,
              {{"params", params},
               {"grads", grads},
               {"square_avgs", square_avgs},
               {"momentum_bufs", momentum_bufs, mom, " (momentum is not 0)"},
               {"grad_avgs", grad_avgs, o.centered, " (centered)"}});
  const std::vector<TensorView> pv = views_of(params), gv = views_of(grads), sv = views_of(square_avgs),
                                bv = views_if(mom, momentum_bufs), av = views_if(o.centered, grad_avgs);
  note_writes(params);
  d.multi_rmsprop_step(MultiRmspropStepArgs{pv, gv, sv, bv, av, {}, o});
}

template <class D>
void multi_adagrad_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                         std::span<const Tensor> sums, std::span<const int64_t> steps, const AdagradOptions& o) {
  check_adagrad_options("multi_adagrad_step", o);
  check_lists(d, OpId::multi_adagrad_step, false, {{"params", params}, {"grads", grads}, {"sums", sums}});
  check_steps("multi_adagrad_step", steps, params.size(), false);
  const std::vector<TensorView> pv = views_of(params), gv = views_of(grads), sv = views_of(sums);
  note_writes(params);
  d.multi_adagrad_step(MultiAdagradStepArgs{pv, gv, sv, {}, steps, o});
}

template <class D>
void multi_adadelta_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                          std::span<const Tensor> square_avgs, std::span<const Tensor> acc_deltas,
                          const AdadeltaOptions& o) {
  check_adadelta_options("multi_adadelta_step", o);
  check_lists(d, OpId::multi_adadelta_step, false,
              {{"params", params}, {"grads", grads}, {"square_avgs", square_avgs}, {"acc_deltas", acc_deltas}});
  const std::vector<TensorView> pv = views_of(params), gv = views_of(grads), sv = views_of(square_avgs),
                                av = views_of(acc_deltas);
  note_writes(params);
  d.multi_adadelta_step(MultiAdadeltaStepArgs{pv, gv, sv, av, {}, o});
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
