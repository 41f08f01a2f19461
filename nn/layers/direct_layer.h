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
// A step (StepOf::type<Impl>) is a layer's direct forward and backward formulas, composed of
// ops/direct/'s plans; the steps live in ops/direct/steps/ (plan_step.h says what one is):
// ops::direct::PlanOf<OpPlan> for a one-input plan, WeightedStep for y = op(x, weight, bias)
// with mixed-precision casts, and one step per layer with more (batch norm's casts, the loss,
// GPT's layers); a plan of that interface is a step as it is (Dropout's, Flatten's).
// (DirectLayer takes a selector type rather than a template template parameter: the
// plans' parameter is constrained, which its partial specialization cannot repeat.)
#include <string_view>

#include "strata/nn/layers/layer_util.h"
#include "strata/ops/direct/plans.h"
#include "strata/ops/direct/steps/gradients.h"
#include "strata/ops/direct/steps/plan_step.h"
#include "strata/ops/direct/steps/weighted_step.h"

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
    if (ops::direct::needs_rebind(e.dy, dy) || e.need_dx != m.input_grad()) {
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

// The steps of the layers y = op(x, weight, bias): WeightedStep over their plan.
struct Conv2dStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::WeightedStep<Impl, ops::direct::Conv2dPlan<Impl>>;
};
// Conv2d's space-to-depth form: the same step over a convolution of pixel blocks.
struct SpaceToDepthConvStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::WeightedStep<Impl, ops::direct::SpaceToDepthConv2dPlan<Impl>>;
};
struct LinearStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::WeightedStep<Impl, ops::direct::LinearPlan<Impl>>;
};
// A Linear whose input rows are layer-normalised in its product's prologue (inference).
struct NormedLinearStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::NormedLinearStep<Impl>;
};

}  // namespace strata::nn::detail
