#pragma once
// Internal to nn/: direct mode of a layer y = op(x, weight, bias) (Conv2d, Linear).
// One object owns the layer's plans (one per input, nn/plan_cache.h), the master-weight
// casts of mixed precision and the gradients' bookkeeping; the layer only says which
// plan and which extra arguments (conv2d's parameters). PlanOf::type<Impl> is the
// plan, of the shape of ops/direct/plans.h's Conv2dPlan: plan(impl, x, w, b,
// extra...), plan_backward(dy, need_dx), forward(), backward() and the tensors y, dx,
// dw, db. (A selector type rather than a template template parameter: the plans'
// parameter is constrained, which a partial specialization cannot repeat.)
#include <string_view>

#include "strata/nn/layers/layer_util.h"
#include "strata/ops/direct/cast_plans.h"
#include "strata/ops/direct/plans.h"

namespace strata::nn::detail {

// The plan selectors of the layers that use WeightedDirect.
struct Conv2dPlanOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::Conv2dPlan<Impl>;
};
struct LinearPlanOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::LinearPlan<Impl>;
};

// Tape modes: no state, no plans.
template <class P, class PlanOf>
struct WeightedDirect : NoDirectState {
  int64_t plans_made() const { return 0; }
};

template <class Impl, class PlanOf>
struct WeightedDirect<Direct<Impl>, PlanOf> {
  struct Entry {
    typename PlanOf::template type<Impl> plan;
    Tensor dy;
    bool need_dx = true;
    ops::direct::ParamCast<Impl> w, b;  // mixed precision: master weight and bias
  };
  PlanCache<Entry> cache;

  // Mixed precision: the plan computes in its input's dtype with planned copies of
  // the master weights (refreshed per forward); gradients return to the masters' dtype.
  template <class... Extra>
  const Tensor& forward(Impl& impl, const Tensor& x, const Tensor& weight, const Tensor& bias, const Extra&... extra) {
    auto& e = cache.get(x, 0, [&](Entry& entry, const Tensor& in) {
      entry.plan.plan(impl, in, entry.w.plan(impl, weight, in), entry.b.plan(impl, bias, in), extra...);
    });
    e.w.refresh();
    e.b.refresh();
    e.plan.forward();
    return e.plan.y;
  }

  // Gradients of the latest forward: accumulated into weight and bias (.grad()), and
  // returned for the input when input_grad.
  Tensor backward(Impl& impl, std::string_view module, const Tensor& dy, bool input_grad, const Tensor& weight,
                  const Tensor& bias) {
    Entry& e = latest_entry(cache, module);
    if (needs_rebind(e.dy, dy) || e.need_dx != input_grad) {
      e.plan.plan_backward(dy, input_grad);
      e.w.plan_grad(impl, e.plan.dw);
      e.b.plan_grad(impl, e.plan.db);
      e.dy = dy;
      e.need_dx = input_grad;
    }
    release_grad_buffer(impl, weight, e.w.grad(e.plan.dw));
    if (bias.defined()) release_grad_buffer(impl, bias, e.b.grad(e.plan.db));
    e.plan.backward();
    accumulate_grad(impl, weight, e.w.convert_grad(e.plan.dw));
    if (bias.defined()) accumulate_grad(impl, bias, e.b.convert_grad(e.plan.db));
    return input_grad ? e.plan.dx : Tensor();
  }

  int64_t plans_made() const { return cache.plans_made(); }
};

}  // namespace strata::nn::detail
