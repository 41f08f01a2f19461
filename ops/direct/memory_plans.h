#pragma once
// Direct mode's one-off calls outside a layer's plan: the copies, adds, fills, sums and the loss
// scale's update that a model, its layers and its optimizer make around a planned step
// (converting an input into its planned buffer, moving a gradient out of the arena or adding
// it to the one a parameter holds, seeding a scaled loss).
// Each binds its op by the op's one definition (ops/bind/), the front end's, and runs its kernel
// at once (run_kernel: traced, recorded by a memory plan, captured in graph mode alike), so these
// ops are defined once for every mode and nn/ never calls a backend kernel itself.
#include "strata/ops/bind/optim.h"
#include "strata/ops/bind/pointwise.h"
#include "strata/ops/direct/kernel_call.h"
#include "strata/ops/dispatch.h"

namespace strata::ops::direct {

using backends::BackendImpl;

// dst = src (any dtypes, layouts and devices the backend's copy takes); reported as a write of dst.
template <BackendImpl Impl>
void copy_now(Impl& impl, const Tensor& src, const Tensor& dst) {
  const auto b = bind::copy(StaticDispatch<Impl>(impl), src, dst);
  dst.note_write();
  run_kernel<OpId::copy>(impl, b.args);
}

// y = a + b (the engine's accumulation of a gradient, ops::add).
template <BackendImpl Impl>
void add_now(Impl& impl, const Tensor& a, const Tensor& b, const Tensor& y) {
  run_kernel<OpId::add>(impl, bind::add(StaticDispatch<Impl>(impl), a, b, y).args);
}

// y = a + b into a given y, planned once and run at every step (a gradient sum inside a step:
// the autograd engine's accumulation, ops::add).
template <BackendImpl Impl>
class AddIntoPlan {
 public:
  void plan(Impl& impl, const Tensor& a, const Tensor& b, const Tensor& y) {
    args_ = bind::add(StaticDispatch<Impl>(impl), a, b, y).args;
    impl_ = &impl;
  }
  void run() { run_kernel<OpId::add>(*impl_, args_); }

 private:
  Impl* impl_ = nullptr;
  AddArgs args_;
};

// Every element of t = value.
template <BackendImpl Impl>
void fill_now(Impl& impl, const Tensor& t, double value) {
  const auto b = bind::fill(StaticDispatch<Impl>(impl), t, value);
  t.note_write();
  run_kernel<OpId::fill>(impl, b.args);
}

// y (one element, x's dtype) = the sum of x's elements.
template <BackendImpl Impl>
void sum_now(Impl& impl, const Tensor& x, const Tensor& y) {
  run_kernel<OpId::sum>(impl, bind::reduce_all<OpId::sum>(StaticDispatch<Impl>(impl), x, y).args);
}

// Dynamic loss scaling's update of `state` from the gradients' sums (AmpUpdateScaleArgs).
template <BackendImpl Impl>
void amp_update_scale_now(Impl& impl, const Tensor& grad_sums, const Tensor& state, double growth, double backoff,
                          int64_t interval) {
  run_kernel<OpId::amp_update_scale>(
      impl, bind::amp_update_scale(StaticDispatch<Impl>(impl), grad_sums, state, growth, backoff, interval).args);
}

// A copy planned once (validated at plan) and run many times: the same two buffers each step
// (a non-contiguous input flattened into its planned buffer).
template <BackendImpl Impl>
class CopyPlan {
 public:
  void plan(Impl& impl, const Tensor& src, const Tensor& dst) {
    args_ = bind::copy(StaticDispatch<Impl>(impl), src, dst).args;
    impl_ = &impl;
  }
  void run() { run_kernel<OpId::copy>(*impl_, args_); }

 private:
  Impl* impl_ = nullptr;
  CopyArgs args_;
};

}  // namespace strata::ops::direct
