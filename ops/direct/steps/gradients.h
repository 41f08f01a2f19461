#pragma once
// Direct mode's steps (ops/direct/steps/): what each step's backward shares, rebinding to a
// new dy and handing the gradients it wrote to the parameters' .grad(), exactly as the autograd
// engine hands them over in the tape modes.
#include <initializer_list>

#include "strata/core/tensor.h"
#include "strata/ops/direct/memory_plans.h"
#include "strata/ops/direct/step_memory.h"

namespace strata::ops::direct {

// Whether a backward plan must be (re)bound to dy: first use, or dy moved.
inline bool needs_rebind(const Tensor& bound, const Tensor& dy) {
  return !bound.defined() || bound.data_ptr() != dy.data_ptr() || !(bound.sizes() == dy.sizes()) ||
         !(bound.strides() == dy.strides());
}

// Before a plan overwrites its gradient buffer `buf`: when a parameter's .grad() still is
// that buffer (gradients were not zeroed since the last backward), it is copied out first so
// the new gradient accumulates onto it.
template <class Impl>
void release_grad_buffer(Impl& impl, Tensor param, const Tensor& buf) {
  const Tensor g = param.grad();
  if (!g.defined() || !buf.defined() || g.data_ptr() != buf.data_ptr()) return;
  Tensor copy = Tensor::empty_like(g, g.sizes());
  copy_now(impl, g, copy);
  param.set_grad(copy);
}

// param.grad = g, or existing + g through the backend's add, exactly as the autograd engine
// accumulates a leaf's gradient (ops::add(existing, new)).
template <class Impl>
void accumulate_grad(Impl& impl, Tensor param, const Tensor& g) {
  const Tensor existing = param.grad();
  if (!existing.defined()) {
    param.set_grad(g);
    return;
  }
  Tensor sum = Tensor::empty_like(existing, existing.sizes());
  add_now(impl, existing, g, sum);
  param.set_grad(sum);
}

// A parameter and the planned buffer its gradient is written to.
struct ParamGrad {
  const Tensor& param;  // undefined: no such parameter (a layer without bias)
  const Tensor& grad;
};
// run() writes the gradients into their buffers; each then goes to its parameter's .grad()
// (release_grad_buffer before, accumulate_grad after).
// A memory plan's recording pass only notes the kernels: .grad() is left alone.
template <class Impl, class Run>
void backward_into_grads(Impl& impl, std::initializer_list<ParamGrad> grads, Run&& run) {
  if (recording()) return run();
  for (const ParamGrad& g : grads)
    if (g.param.defined()) release_grad_buffer(impl, g.param, g.grad);
  run();
  for (const ParamGrad& g : grads)
    if (g.param.defined()) accumulate_grad(impl, g.param, g.grad);
}

}  // namespace strata::ops::direct
