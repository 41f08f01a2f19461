#pragma once
// Internal to nn/: helpers every layer uses.
#include <string_view>
#include <vector>

#include "strata/autograd/functions.h"
#include "strata/nn/module.h"
#include "strata/nn/plan_cache.h"
#include "strata/nn/policy.h"
#include "strata/ops/direct/kernel_call.h"

namespace strata::nn::detail {

// A parameter or buffer of `sizes` on the policy's device, filled with `value`
// (init policies overwrite parameters; see nn/init.h).
Tensor make_filled(Device dev, const Shape& sizes, DType dt, double value);
// Writes host values (converted to t's dtype) into t, wherever t lives.
void assign_host(const Tensor& t, const std::vector<double>& values);

// Direct mode: the entry of the latest forward, or an error naming the module.
template <class Entry>
Entry& latest_entry(PlanCache<Entry>& cache, std::string_view module) {
  Entry* e = cache.latest();
  STRATA_CHECK(e != nullptr, module, ".backward: no forward has run (direct mode plans at the first forward)");
  return *e;
}

// Direct mode, before a plan overwrites its gradient buffer `buf`: when a parameter's
// .grad() still is that buffer (gradients were not zeroed since the last backward),
// it is copied out first so the new gradient accumulates onto it.
template <class Impl>
void release_grad_buffer(Impl& impl, Tensor param, const Tensor& buf) {
  const Tensor g = param.grad();
  if (!g.defined() || !buf.defined() || g.data_ptr() != buf.data_ptr()) return;
  Tensor copy = Tensor::empty(g.sizes(), g.dtype(), g.device());
  const ops::CopyArgs a{g, copy};
  ops::direct::run_kernel(impl, ops::OpId::copy, [&] { impl.copy(a); });
  param.set_grad(copy);
}

// Direct mode: param.grad = g, or existing + g through the backend's add, exactly
// as the autograd engine accumulates a leaf's gradient (ops::add(existing, new)).
template <class Impl>
void accumulate_grad(Impl& impl, Tensor param, const Tensor& g) {
  const Tensor existing = param.grad();
  if (!existing.defined()) {
    param.set_grad(g);
    return;
  }
  Tensor sum = Tensor::empty(existing.sizes(), existing.dtype(), existing.device());
  const ops::AddArgs a{existing, g, sum};
  ops::direct::run_kernel(impl, ops::OpId::add, [&] { impl.add(a); });
  param.set_grad(sum);
}

// Mixed precision (tape modes): parameter t in the dtype x computes in; t itself when
// they agree or t is undefined (no bias).
template <class P>
Tensor compute_cast(const P& p, const Tensor& t, const Tensor& x) {
  if (!t.defined() || t.dtype() == x.dtype() || !is_floating(x.dtype())) return t;
  return autograd::cast(p, t, x.dtype());
}

// Direct mode, mixed precision: a dtype (and layout) conversion planned once. plan()
// allocates the output y; run() is one call of the backend's copy op, which converts
// dtypes, and does nothing when nothing was planned.
template <class Impl>
class CastPlan {
 public:
  Tensor y;
  void plan(Impl& impl, const Tensor& x, DType dt, MemoryFormat fmt = MemoryFormat::contiguous) {
    impl_ = &impl;
    y = Tensor::empty(x.sizes(), dt, x.device(), x.dim() == 4 ? fmt : MemoryFormat::contiguous);
    args_ = {x, y};
  }
  bool planned() const { return impl_ != nullptr; }
  void run() {
    if (impl_) ops::direct::run_kernel(*impl_, ops::OpId::copy, [&] { impl_->copy(args_); });
  }

 private:
  Impl* impl_ = nullptr;
  ops::CopyArgs args_;
};

// Direct mode, mixed precision: a parameter (master weight) used by a plan that
// computes in a narrower dtype, as compute_cast does on the tape. The plan reads a
// planned copy in the compute dtype, refreshed before each forward (the optimizer
// changed the master); the plan's gradient, in the compute dtype, is converted into a
// planned buffer of the parameter's dtype, which then goes to .grad() as usual. When
// the dtypes agree nothing is planned and the parameter and gradient pass through.
template <class Impl>
class ParamCast {
 public:
  // What the plan computes with for input x: param itself or its planned copy.
  Tensor plan(Impl& impl, const Tensor& param, const Tensor& x) {
    if (!param.defined() || param.dtype() == x.dtype() || !is_floating(x.dtype())) return param;
    master_ = param.dtype();
    to_compute_.plan(impl, param, x.dtype());
    return to_compute_.y;
  }
  void refresh() { to_compute_.run(); }
  // After the plan allocated its gradient g (plan_backward).
  void plan_grad(Impl& impl, const Tensor& g) {
    if (to_compute_.planned() && g.defined()) to_master_.plan(impl, g, master_);
  }
  // The buffer that holds the gradient in the parameter's dtype (for release_grad_buffer).
  const Tensor& grad(const Tensor& g) const { return to_master_.planned() ? to_master_.y : g; }
  // After the plan's backward wrote g: the gradient in the parameter's dtype.
  const Tensor& convert_grad(const Tensor& g) {
    to_master_.run();
    return grad(g);
  }

 private:
  DType master_ = DType::f32;
  CastPlan<Impl> to_compute_, to_master_;
};

// Empty per-mode state for the tape policies.
struct NoDirectState {};

}  // namespace strata::nn::detail
