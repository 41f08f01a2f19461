#pragma once
// Direct mode's step of a batch norm (nn::BatchNorm2d): the batch norm plan, between two casts
// when the backend has no batch norm for x's dtype with these parameters (as the tape formula's
// casts). ops/direct/steps/plan_step.h says what a step is.
#include "strata/backends/api/capabilities.h"
#include "strata/ops/direct/cast_plans.h"
#include "strata/ops/direct/plans.h"
#include "strata/ops/direct/steps/gradients.h"
#include "strata/ops/shape_rules.h"

namespace strata::ops::direct {

// Whether x's batch norm must run in the parameters' dtype between two casts: x has
// another dtype and the backend `b` has no batch norm for x with these parameters as
// they are (the cuda backend takes f16/bf16 x with f32 parameters; the CPU ones do not).
// BatchNorm2d's tape formula casts by the same rule.
inline bool batch_norm_needs_casts(const backends::Capabilities& b, const Tensor& x, DType params) {
  if (x.dtype() == params) return false;
  return !(batch_norm_param_dtype(x) == params && b.supports(OpId::batch_norm_fwd, x.dtype()) &&
           b.supports(OpId::batch_norm_bwd, x.dtype()));
}

template <class Impl>
class BatchNormStep {
 public:
  // z, relu: fused evaluation (BatchNorm2d::forward_fused), never between casts.
  // sync: the group of the forward that plans; run takes each forward's.
  void plan(Impl& impl, const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
            const Tensor& running_var, bool training, double momentum, double eps, const Tensor& z, bool relu,
            ChannelSumReducer* sync);
  const Tensor& run(const Tensor& gamma, const Tensor& beta, const Tensor& running_mean, const Tensor& running_var,
                    bool training, double momentum, double eps, const Tensor& z, bool relu, ChannelSumReducer* sync);
  void plan_backward(const Tensor& dy, bool need_dx);
  const Tensor& run_backward();
  const Tensor& residual_grad() const { return op_.dz; }

 private:
  Impl* impl_ = nullptr;
  Tensor gamma_, beta_;
  BatchNormPlan<Impl> op_;
  CastPlan<Impl> x_in_, y_out_, dy_in_, dx_out_;
};

// As the tape formula: in the parameters' dtype, NCHW, between two casts.
template <class Impl>
void BatchNormStep<Impl>::plan(Impl& impl, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                               const Tensor& running_mean, const Tensor& running_var, bool training, double momentum,
                               double eps, const Tensor& z, bool relu, ChannelSumReducer* sync) {
  impl_ = &impl;
  gamma_ = gamma;
  beta_ = beta;
  Tensor bn_in = x;
  if (batch_norm_needs_casts(impl.capabilities(), x, gamma.dtype())) {
    x_in_.plan(impl, x, gamma.dtype(), MemoryFormat::contiguous);
    bn_in = x_in_.y;
  }
  STRATA_CHECK(!(z.defined() || relu) || !x_in_.planned(), "BatchNorm2d: a fused batch norm between casts");
  op_.plan(impl, bn_in, gamma, beta, running_mean, running_var, training, momentum, eps, z, relu, sync);
  if (x_in_.planned()) y_out_.plan(impl, op_.y, x.dtype(), x.suggested_format());
}

// A plan serves every group (its buffers do not depend on one): this forward's is set.
template <class Impl>
const Tensor& BatchNormStep<Impl>::run(const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, double,
                                       double, const Tensor&, bool, ChannelSumReducer* sync) {
  op_.set_sync(sync);
  x_in_.run();
  op_.forward();
  y_out_.run();
  return y_out_.planned() ? y_out_.y : op_.y;
}

template <class Impl>
void BatchNormStep<Impl>::plan_backward(const Tensor& dy, bool) {
  if (x_in_.planned()) {
    dy_in_.plan(*impl_, dy, gamma_.dtype(), MemoryFormat::contiguous);
    op_.plan_backward(dy_in_.y);
    dx_out_.plan(*impl_, op_.dx, y_out_.y.dtype(), y_out_.y.suggested_format());
  } else {
    op_.plan_backward(dy);
  }
}

template <class Impl>
const Tensor& BatchNormStep<Impl>::run_backward() {
  backward_into_grads(*impl_, {{gamma_, op_.dgamma}, {beta_, op_.dbeta}}, [&] {
    dy_in_.run();
    op_.backward();
    dx_out_.run();
  });
  return dx_out_.planned() ? dx_out_.y : op_.dx;
}

}  // namespace strata::ops::direct
