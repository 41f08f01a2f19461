#pragma once
// Direct mode's step of a layer y = op(x, weight, bias) (Conv2d, Linear, LayerNorm), over one
// plan of ops/direct/ and the parameters' mixed-precision casts (ops/direct/steps/plan_step.h
// says what a step is).
#include "strata/ops/direct/cast_plans.h"
#include "strata/ops/direct/steps/gradients.h"

namespace strata::ops::direct {

// Plan is of the shape of ops/direct/plans.h's Conv2dPlan: plan(impl, x, w, b, extra...),
// plan_backward(dy, need_dx), forward(), backward() and the tensors y, dx, dw, db. Mixed
// precision: the plan computes in its input's dtype with planned copies of the master weights
// (refreshed per forward); gradients return to the masters' dtype.
template <class Impl, class Plan>
class WeightedStep {
 public:
  template <class... Extra>
  void plan(Impl& impl, const Tensor& x, const Tensor& weight, const Tensor& bias, const Extra&... extra) {
    impl_ = &impl;
    weight_ = weight;
    bias_ = bias;
    op_.plan(impl, x, w_.plan(impl, weight, x), b_.plan(impl, bias, x), extra...);
  }
  template <class... Args>
  const Tensor& run(const Args&...) {
    w_.refresh();
    b_.refresh();
    op_.forward();
    return op_.y;
  }
  void plan_backward(const Tensor& dy, bool need_dx) {
    op_.plan_backward(dy, need_dx);
    w_.plan_grad(*impl_, op_.dw);
    b_.plan_grad(*impl_, op_.db);
  }
  const Tensor& run_backward() {
    backward_into_grads(*impl_, {{weight_, w_.grad(op_.dw)}, {bias_, b_.grad(op_.db)}}, [&] {
      op_.backward();
      w_.convert_grad(op_.dw);
      b_.convert_grad(op_.db);
    });
    return op_.dx;
  }

 private:
  Impl* impl_ = nullptr;
  Tensor weight_, bias_;  // the masters, whose .grad() receives the gradients
  Plan op_;
  ParamCast<Impl> w_, b_;  // mixed precision: master weight and bias
};

}  // namespace strata::ops::direct
