#pragma once
// Internal to nn/: helpers every layer uses.
#include <string_view>
#include <vector>

#include "strata/autograd/functions.h"
#include "strata/autograd/grad_mode.h"
#include "strata/nn/module.h"
#include "strata/nn/plan_cache.h"
#include "strata/nn/policy.h"

namespace strata::nn::detail {

// A parameter or buffer of `sizes` on the policy's device, filled with `value`
// (init policies overwrite parameters; see nn/init.h).
Tensor make_filled(Device dev, const Shape& sizes, DType dt, double value);
// Writes host values (converted to t's dtype) into t, wherever t lives.
void assign_host(const Tensor& t, const std::vector<double>& values);

// Mixed precision (tape modes): parameter t in the dtype x computes in, and in x's
// layout (a channels-last step's convolutions then stage no weights); t itself when
// the dtypes agree or t is undefined (no bias).
template <class P>
Tensor compute_cast(const P& p, const Tensor& t, const Tensor& x) {
  if (!t.defined() || t.dtype() == x.dtype() || !is_floating(x.dtype())) return t;
  return autograd::cast(p, t, x.dtype(), t.dim() == 4 ? x.suggested_format() : MemoryFormat::contiguous);
}

// compute_cast for one parameter of a layer, kept in evaluation with gradients off: the
// converted copy is reused while the parameter's stamp (Tensor::stamp: its memory and
// version) is the one it was made from, instead of converting at every call (a bf16 ResNet-50's
// classifier weight took 0.83 of a 21.5 ms batch-1 forward on a 2-vCPU CPU). With
// gradients on, a plain compute_cast: the cast is on the tape. The copy stays with the
// layer until the next conversion (a bf16 ResNet-50's unfolded weights: 51 MB).
class EvalCast {
 public:
  template <class P>
  Tensor operator()(const P& p, const Tensor& t, const Tensor& x) {
    if (!t.defined() || t.dtype() == x.dtype() || !is_floating(x.dtype()) || autograd::GradMode::enabled())
      return compute_cast(p, t, x);
    const MemoryFormat fmt = t.dim() == 4 ? x.suggested_format() : MemoryFormat::contiguous;
    if (!kept_.defined() || kept_.dtype() != x.dtype() || fmt_ != fmt || from_ != t.stamp()) {
      kept_ = compute_cast(p, t, x);
      fmt_ = fmt;
      from_ = t.stamp();
    }
    return kept_;
  }

 private:
  Tensor kept_;
  MemoryFormat fmt_ = MemoryFormat::contiguous;
  Tensor::Stamp from_;
};

}  // namespace strata::nn::detail
