#pragma once
// Direct mode's steps: a layer's direct forward and backward formulas, composed of the plans
// of ops/direct/ (nn's layers run them through their direct_ member, nn/layers/direct_layer.h).
// A step of backend Impl is
//   void plan(Impl&, const Tensor& x, const Args&... args);  once per input: validate, allocate
//   const Tensor& run(const Args&... args);                  every forward, same arguments: y
//   void plan_backward(const Tensor& dy, bool need_dx);      once per dy
//   const Tensor& run_backward();                            dx (undefined when !need_dx and the
//                                                            step skips it); parameter gradients
//                                                            go to .grad() (backward_into_grads)
// PlanStep adapts a one-input plan of ops/direct/plans.h, WeightedStep (weighted_step.h) a plan
// y = op(x, weight, bias) with mixed-precision casts; the others hold more (batch norm's casts:
// batch_norm_step.h, the loss's rows: loss_step.h, GPT's layers: transformer_steps.h), and a
// plan with this interface of its own is a step as it is (DropoutPlan, ReshapePlan).
#include "strata/backends/api/backend.h"
#include "strata/core/tensor.h"

namespace strata::ops::direct {

// A plan of ops/direct/plans.h with one input x and the plan's y, dx, forward(),
// plan_backward(dy) and backward(); it always computes dx. A second input tensor among
// the arguments (a residual add's) is kept alive here: the cache's key holds only x.
template <class Plan>
class PlanStep {
 public:
  template <class Impl, class... Args>
  void plan(Impl& impl, const Tensor& x, const Args&... args) {
    op_.plan(impl, x, args...);
    (keep(args), ...);
  }
  template <class... Args>
  const Tensor& run(const Args&...) {
    op_.forward();
    return op_.y;
  }
  void plan_backward(const Tensor& dy, bool /*need_dx*/) { op_.plan_backward(dy); }
  const Tensor& run_backward() {
    op_.backward();
    return op_.dx;
  }

 private:
  void keep(const Tensor& t) { kept_ = t; }
  template <class A>
  void keep(const A&) {}

  Plan op_;
  Tensor kept_;
};

// The step selector of a one-input plan (what nn's DirectLayer takes: a type whose
// type<Impl> is the step).
template <template <backends::BackendImpl> class Plan>
struct PlanOf {
  template <backends::BackendImpl Impl>
  using type = PlanStep<Plan<Impl>>;
};

}  // namespace strata::ops::direct
