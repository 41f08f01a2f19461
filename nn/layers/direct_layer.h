#pragma once
// Internal to nn/: a layer's direct mode in one member, so that a layer writes only what
// it computes. Its forward and backward are one call each, the same in every mode:
//   return direct_.forward(p_, x, [&](const auto& tape) { return autograd::op(tape, x, ...); }, args...);
//   return direct_.backward(*this, dy);
// Under a tape policy forward is the tape formula (autograd::*, which records the
// backward) and backward is Module's (the tape runs backward, not the module). Under
// Direct<Impl> forward plans a step once per input (nn/plan_cache.h) and runs it; backward
// binds the latest forward's step to dy once per gradient buffer and runs it backwards.
//
// A step (StepOf::type<Impl>) is a layer's direct forward and backward formulas:
//   void plan(Impl&, const Tensor& x, const Args&... args);  once per input: validate, allocate
//   const Tensor& run(const Args&... args);                  every forward, same arguments: y
//   void plan_backward(const Tensor& dy, bool need_dx);      once per dy
//   const Tensor& run_backward();                            dx (undefined when !need_dx and the
//                                                            step skips it); parameter gradients
//                                                            go to .grad() (backward_into_grads)
// PlanStep adapts a one-input plan of ops/direct/plans.h, WeightedStep a plan
// y = op(x, weight, bias) with mixed-precision casts; layers with more (BatchNorm2d's casts,
// Dropout's mask, Flatten's view) declare their own step beside the layer.
// (DirectLayer takes a selector type rather than a template template parameter: the
// plans' parameter is constrained, which its partial specialization cannot repeat.)
#include <string_view>

#include "strata/nn/layers/layer_util.h"
#include "strata/ops/direct/cast_plans.h"
#include "strata/ops/direct/plans.h"

namespace strata::nn::detail {

// Tape policies: the tape formula; no state, no plans.
template <class P, class StepOf>
class DirectLayer {
 public:
  template <class Tape, class... Args>
  Tensor forward(const P& p, const Tensor&, Tape&& tape, const Args&...) {
    return tape(p);
  }
  template <class Tape, class... Args>
  Tensor forward_keyed(const P& p, const Tensor&, int64_t, Tape&& tape, const Args&...) {
    return tape(p);
  }
  Tensor backward(Module& m, const Tensor& dy) { return m.Module::backward(dy); }
  Tensor backward_of_identity(Module& m, const Tensor& dy) { return m.Module::backward(dy); }
  Tensor backward_of_loss(std::string_view who, bool /*seeded*/ = false) {
    STRATA_FAIL(who, "::backward runs in direct mode only; in the tape modes call autograd::backward(loss)");
  }
  int64_t plans_made() const { return 0; }
};

template <class Impl, class StepOf>
class DirectLayer<Direct<Impl>, StepOf> {
 public:
  using Step = typename StepOf::template type<Impl>;

  template <class Tape, class... Args>
  const Tensor& forward(const Direct<Impl>& p, const Tensor& x, Tape&& tape, const Args&... args) {
    return forward_keyed(p, x, 0, tape, args...);
  }
  // `key`: what tells plans for the same x apart (BatchNorm2d's training flag, a second input).
  template <class Tape, class... Args>
  const Tensor& forward_keyed(const Direct<Impl>& p, const Tensor& x, int64_t key, Tape&&, const Args&... args) {
    auto make = [&](Entry& entry, const Tensor& in) { entry.step.plan(*p.impl, in, args...); };
    latest_ = ops::direct::recording() ? &recording_entry(x, key, make) : &cache_.get(x, key, make);
    return latest_->step.run(args...);
  }

  // dL/d(input) of the latest forward, for module `m` (its name for errors, its input_grad()).
  const Tensor& backward(const Module& m, const Tensor& dy) {
    Entry& e = latest(m.type_name());
    if (needs_rebind(e.dy, dy) || e.need_dx != m.input_grad()) {
      e.step.plan_backward(dy, m.input_grad());
      e.dy = dy;
      e.need_dx = m.input_grad();
    }
    return e.step.run_backward();
  }

  // The gradient through a forward that returned its input (Dropout in eval).
  const Tensor& backward_of_identity(const Module&, const Tensor& dy) { return dy; }
  // dL/d(input) of the latest forward of a loss `who`: its step seeds its own gradient
  // unless `seeded` (the caller wrote the seed).
  const Tensor& backward_of_loss(std::string_view who, bool seeded = false) {
    return latest(who).step.run_backward(seeded);
  }
  // The latest forward's step (`who` names the module in the error when none ran).
  Step& latest_step(std::string_view who) { return latest(who).step; }

  int64_t plans_made() const { return cache_.plans_made(); }

 private:
  struct Entry {
    Step step;
    Tensor dy;  // what the backward is bound to
    bool need_dx = true;
  };

  Entry& latest(std::string_view module) {
    STRATA_CHECK(latest_ != nullptr, module, ".backward: no forward has run (direct mode plans at the first forward)");
    return *latest_;
  }
  // A memory plan's recording pass (ops/direct/step_memory.h) uses the plans that exist
  // and makes the missing ones against placeholders, beside the cache: they are dropped
  // when the recording ends, and the pass that follows makes them for real.
  template <class Make>
  Entry& recording_entry(const Tensor& x, int64_t key, Make&& make) {
    if (Entry* hit = cache_.find(x, key)) return *hit;
    if (recorded_.size() == 0)
      ops::direct::on_recording_end([this] {
        recorded_.clear();
        latest_ = nullptr;
      });
    return recorded_.get(x, key, make);
  }

  PlanCache<Entry> cache_, recorded_;
  Entry* latest_ = nullptr;  // the latest forward's entry
};

// The backward of a container or network: its children's backward in reverse order,
// which runs in direct mode only. Under a tape policy the tape runs backward
// (autograd::backward on the loss) and an explicit call is Module's error. The one place
// where a module's code chooses between the two modes; a layer's direct_ does it for leaves.
template <class P, class Fn>
Tensor explicit_backward(Module& m, const Tensor& dy, Fn&& children_backward) {
  if constexpr (is_direct_v<P>)
    return children_backward();
  else
    return m.Module::backward(dy);
}

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

template <template <backends::BackendImpl> class Plan>
struct PlanOf {
  template <backends::BackendImpl Impl>
  using type = PlanStep<Plan<Impl>>;
};

// A layer y = op(x, weight, bias) (Conv2d, Linear); Plan is of the shape of
// ops/direct/plans.h's Conv2dPlan: plan(impl, x, w, b, extra...), plan_backward(dy,
// need_dx), forward(), backward() and the tensors y, dx, dw, db. Mixed precision: the
// plan computes in its input's dtype with planned copies of the master weights
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
  ops::direct::ParamCast<Impl> w_, b_;  // mixed precision: master weight and bias
};

struct Conv2dStepOf {
  template <backends::BackendImpl Impl>
  using type = WeightedStep<Impl, ops::direct::Conv2dPlan<Impl>>;
};
// Conv2d's space-to-depth form: the same step over a convolution of pixel blocks.
struct SpaceToDepthConvStepOf {
  template <backends::BackendImpl Impl>
  using type = WeightedStep<Impl, ops::direct::SpaceToDepthConv2dPlan<Impl>>;
};
struct LinearStepOf {
  template <backends::BackendImpl Impl>
  using type = WeightedStep<Impl, ops::direct::LinearPlan<Impl>>;
};

}  // namespace strata::nn::detail
