#pragma once
// Direct mode, mixed precision: dtype (and layout) conversions planned once, like
// the plans of plans.h. CastPlan is one copy op; ParamCast keeps a parameter's
// compute-dtype copy and converts its gradient back.
#include "strata/ops/bind/pointwise.h"
#include "strata/ops/direct/kernel_call.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/validate.h"

namespace strata::ops::direct {

// A conversion of x to dtype dt (4-D: in layout fmt) planned once. plan() allocates
// the output y, a buffer of the step (step_memory.h) that lives as `life` says; run()
// is one call of the backend's copy op, which converts dtypes, and does nothing when
// nothing was planned.
template <backends::BackendImpl Impl>
class CastPlan {
 public:
  Tensor y;
  void plan(Impl& impl, const Tensor& x, DType dt, MemoryFormat fmt = MemoryFormat::contiguous,
            Lifetime life = Lifetime::step_local) {
    check_defined("copy", "source", x);
    plan_into(impl, x, planned_empty(x.sizes(), dt, x.device(), x.dim() == 4 ? fmt : MemoryFormat::contiguous, life));
  }
  // The conversion into a buffer the caller chose (a gradient's, planned_grad).
  void plan_into(Impl& impl, const Tensor& x, const Tensor& out) {
    y = out;
    args_ = bind::copy(StaticDispatch<Impl>(impl), x, y).args;
    impl_ = &impl;
  }
  bool planned() const { return impl_ != nullptr; }
  void run() {
    if (impl_) run_kernel<OpId::copy>(*impl_, args_);
  }

 private:
  Impl* impl_ = nullptr;
  CopyArgs args_;
};

// A parameter (master weight) used by a plan that computes in a narrower dtype, as
// the tape modes cast it to the compute dtype. The plan reads a planned copy in the compute
// dtype, refreshed before each forward (the optimizer changed the master); the
// plan's gradient, in the compute dtype, is converted into a planned buffer of the
// parameter's dtype, which then goes to .grad() as usual. When the dtypes agree
// nothing is planned and the parameter and gradient pass through.
template <backends::BackendImpl Impl>
class ParamCast {
 public:
  // What the plan computes with for input x: param itself or its planned copy.
  Tensor plan(Impl& impl, const Tensor& param, const Tensor& x) {
    if (!param.defined() || param.dtype() == x.dtype() || !is_floating(x.dtype())) return param;
    master_ = param;
    // In x's layout: a channels-last step's convolutions then read weights that need no staging.
    to_compute_.plan(impl, param, x.dtype(), x.suggested_format());
    return to_compute_.y;
  }
  void refresh() { to_compute_.run(); }
  // After the plan allocated its gradient g (plan_backward).
  void plan_grad(Impl& impl, const Tensor& g) {
    if (to_compute_.planned() && g.defined())
      to_master_.plan_into(impl, g, planned_grad(master_, g.sizes(), master_.dtype()));
  }
  // The buffer that holds the gradient in the parameter's dtype (for release_grad_buffer).
  const Tensor& grad(const Tensor& g) const { return to_master_.planned() ? to_master_.y : g; }
  // After the plan's backward wrote g: the gradient in the parameter's dtype.
  const Tensor& convert_grad(const Tensor& g) {
    to_master_.run();
    return grad(g);
  }

 private:
  Tensor master_;  // the parameter, when a copy is planned
  CastPlan<Impl> to_compute_, to_master_;
};

}  // namespace strata::ops::direct
