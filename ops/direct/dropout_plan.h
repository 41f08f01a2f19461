#pragma once
// Dropout's direct plan: a planned mask and output; seed and offset are read at every run,
// or, inside a graph capture, at every launch of the graph (the launch writes them to device
// memory the kernel reads: DropoutFwdArgs::rng). Bound by the ops' one definition (ops/bind/).
#include <memory>

#include "strata/ops/bind/pointwise.h"
#include "strata/ops/direct/graph_capture.h"
#include "strata/ops/direct/kernel_call.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/validate.h"

namespace strata::ops::direct {

// Where a dropout layer draws next: each training forward advances the offset by its elements.
struct DropoutCounter {
  uint64_t seed = 0, offset = 0;
};

template <backends::BackendImpl Impl>
class DropoutPlan {
 public:
  void plan(Impl& impl, const Tensor& x, double prob, DropoutCounter*, uint64_t) {
    auto bound = bind::dropout_fwd(StaticDispatch<Impl>(impl), x, prob);
    impl_ = &impl;
    y_ = bound.out.y;
    mask_ = bound.out.mask;
    // Made here, outside any capture (nothing is allocated inside one).
    if constexpr (CapturesGraphs<Impl>) {
      rng_ = std::make_shared<Rng>(
          Rng{Tensor::empty(Shape{2}, DType::i64, Device::cpu()), Tensor::empty(Shape{2}, DType::i64, x.device()), {}});
      rng_->upload = bind::copy(StaticDispatch<Impl>(impl), rng_->host, rng_->device).args;
    }
    fwd_ = bound.args;
  }
  const Tensor& run(double, DropoutCounter* counter, uint64_t offset) {
    if (!capturing()) {
      fwd_.seed = counter->seed;
      fwd_.offset = offset;
      run_kernel<OpId::dropout_fwd>(*impl_, fwd_);
      return y_;
    }
    STRATA_CHECK(rng_, "dropout: backend '", Impl::kName, "' does not capture graphs");
    const uint64_t n = static_cast<uint64_t>(y_.numel());
    before_each_launch([impl = impl_, rng = rng_, counter, n] {
      // The host copy may be rewritten at once: a copy from pageable memory is staged before it returns.
      int64_t* h = rng->host.template data<int64_t>();
      h[0] = static_cast<int64_t>(counter->seed);
      h[1] = static_cast<int64_t>(counter->offset);
      run_kernel<OpId::copy>(*impl, rng->upload);
      counter->offset += n;
    });
    fwd_.rng = rng_->device;
    run_kernel<OpId::dropout_fwd>(*impl_, fwd_);
    fwd_.rng = {};
    return y_;
  }
  void plan_backward(const Tensor& dy, bool) {
    auto bound = bind::dropout_bwd(StaticDispatch<Impl>(*impl_), dy, mask_, fwd_.p);
    dx_ = bound.out;
    bwd_ = bound.args;
  }
  const Tensor& run_backward() {
    run_kernel<OpId::dropout_bwd>(*impl_, bwd_);
    return dx_;
  }

 private:
  Impl* impl_ = nullptr;
  Tensor y_, mask_, dx_;
  // Graph mode: {seed, offset} on the device and its host staging, shared with the
  // launches' writes (a graph may outlive this plan in a plan cache).
  struct Rng {
    Tensor host, device;
    CopyArgs upload;  // host to device
  };
  std::shared_ptr<Rng> rng_;
  DropoutFwdArgs fwd_;
  DropoutBwdArgs bwd_;
};

}  // namespace strata::ops::direct
