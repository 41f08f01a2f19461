#pragma once
// A reshape's direct plan (flatten, as autograd::reshape): a view of x when x is contiguous, a
// planned contiguous copy otherwise (a channels-last input); the gradient a contiguous view of
// dy in x's sizes, rebound when dy moves.
#include "strata/ops/direct/memory_plans.h"
#include "strata/ops/direct/step_memory.h"

namespace strata::ops::direct {

template <backends::BackendImpl Impl>
class ReshapePlan {
 public:
  void plan(Impl& impl, const Tensor& x, const Shape& out) {
    STRATA_CHECK(out.numel() == x.numel(), "reshape: ", x.str(), " has ", x.numel(), " elements, ", out.str(), " ",
                 out.numel());
    in_sizes_ = x.sizes();
    copies_ = !x.is_contiguous();
    if (!copies_) {
      y_ = x.view(out);
      return;
    }
    const Tensor c = planned_empty(x.sizes(), x.dtype(), x.device());
    copy_.plan(impl, x, c);
    y_ = c.view(out);
  }
  const Tensor& run(const Shape&) {
    if (copies_) copy_.run();
    return y_;
  }
  void plan_backward(const Tensor& dy, bool) {
    STRATA_CHECK(dy.is_contiguous(), "reshape backward: grad_output ", dy.str(), " must be contiguous");
    dx_ = dy.view(in_sizes_);
  }
  const Tensor& run_backward() { return dx_; }

 private:
  Shape in_sizes_;
  Tensor y_, dx_;
  CopyPlan<Impl> copy_;
  bool copies_ = false;
};

}  // namespace strata::ops::direct
