#pragma once
// Internal to nn/model.cpp: what differs between the dispatch modes in a Model's calls, in one
// place. ModelState holds a model's network, loss and buffers; ModelMode<P> converts inputs and
// outputs (mixed precision), runs the backward and plans a step's memory: the tape modes through
// the front end and autograd, direct and graph modes (ModelMode<Direct<Impl>>) through buffers
// planned once and ops/direct's validated calls.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "strata/autograd/functions.h"
#include "strata/autograd/node.h"
#include "strata/nn/loss.h"
#include "strata/nn/model.h"
#include "strata/nn/policy.h"
#include "strata/ops/direct/memory_plans.h"
#include "strata/ops/direct/step_memory.h"

namespace strata::nn::detail {

inline ops::DispatchMode mode_of(std::string_view kmode) {
  return kmode == "virtual" ? ops::DispatchMode::virtual_call
                            : (kmode == "static" ? ops::DispatchMode::static_call : ops::DispatchMode::direct);
}

// The layout `fmt` asks of a tensor of `dims` dimensions: only 4-D ones have a channels-last one.
inline MemoryFormat layout_for(int64_t dims, MemoryFormat fmt) { return dims == 4 ? fmt : MemoryFormat::contiguous; }

// Direct mode's model-level buffers (the input in the compute dtype, targets, logits in
// the parameters' dtype): one per shape and dtype, so that plans and graphs made for a
// shape keep reading and writing the same memory when other shapes come and go.
class BufferSet {
 public:
  // The buffer for these sizes and dtype, allocated on first use.
  Tensor get(const Shape& sizes, DType dt, Device d, MemoryFormat fmt) {
    for (const Tensor& b : bufs_)
      if (b.sizes() == sizes && b.dtype() == dt) return b;
    // Bounded like the layers' plan caches; a plan or graph still using an evicted
    // buffer keeps it alive (and a graph whose input moved is captured again).
    constexpr size_t kShapes = 8;
    if (bufs_.size() == kShapes) bufs_.erase(bufs_.begin());
    bufs_.push_back(Tensor::empty(sizes, dt, d, fmt));
    return bufs_.back();
  }
  // Whether t is one of the buffers.
  bool holds(const Tensor& t) const {
    for (const Tensor& b : bufs_)
      if (b.data_ptr() == t.data_ptr() && b.sizes() == t.sizes() && b.dtype() == t.dtype()) return true;
    return false;
  }

 private:
  std::vector<Tensor> bufs_;
};

// What a model holds, in every mode.
template <class P>
struct ModelState {
  P p;
  std::unique_ptr<Module> net;
  Loss<P> loss;
  DType dtype, compute;  // the parameters' and the activations' dtype
  MemoryFormat fmt;
  Tensor logits{}, loss_value{};
  BufferSet input{}, targets{};                   // direct mode: the planned input and target buffers
  BufferSet logits_full{}, dlogits{}, predicted{};  // direct mode, mixed precision: planned conversions
  ops::direct::StepMemory memory{};              // direct mode: the planned steps' arenas
  std::vector<Tensor> params{};                  // direct mode: the network's parameters, once
  bool forward_only = false;                     // the latest forward kept nothing for backward
  bool token_ids = false;                        // the inputs are i64 ids (nn/token_inputs.h)
  // Direct mode, dynamic loss scaling on the device: its state (ops::AmpUpdateScaleArgs),
  // each gradient's sum and one rank-0 view per sum.
  Tensor amp{}, grad_sums{};
  std::vector<Tensor> sum_views{};
};

// Where the modes differ at the model's level, in one place (the layers' differences are
// their direct_ members, nn/layers/direct_layer.h). Tape modes: conversions go through
// the front end, recorded where a gradient flows back through them; backward is the
// autograd engine's from the loss; dynamic loss scaling is available.
template <class P>
struct ModelMode {

  // x in dtype dt and layout fmt (`bufs` are direct mode's planned buffers).
  static Tensor convert(ModelState<P>& s, const Tensor& x, DType dt, MemoryFormat fmt, BufferSet& /*bufs*/) {
    const bool layout = fmt == MemoryFormat::channels_last ? x.is_channels_last() : x.is_contiguous();
    if (x.dtype() == dt && x.device() == s.p.device() && layout) return x;
    return ops::to(s.p, x, dt, s.p.device(), fmt);
  }
  // Mixed precision: the network's output y in the parameters' dtype.
  static Tensor output_in_params_dtype(ModelState<P>& s, const Tensor& y, BufferSet& /*bufs*/) {
    return autograd::cast(s.p, y, s.dtype);
  }
  static Tensor input_buffer(ModelState<P>& s, const Shape& sizes) {
    if (s.token_ids) return Tensor::empty(sizes, DType::i64, s.p.device());
    return Tensor::empty(sizes, s.dtype, s.p.device(), layout_for(sizes.size(), s.fmt));
  }
  static Tensor targets_buffer(ModelState<P>& s, const Shape& sizes, DType dt) {
    return Tensor::empty(sizes, dt, s.p.device());
  }
  static void backward(ModelState<P>& s, const autograd::LeafDone& ready, bool /*scaled*/ = false) {
    autograd::backward(s.loss_value, Tensor(), ready);
  }
  // The tape holds what backward needs for as long as it needs it: nothing to plan.
  template <class Step, class Outputs>
  static void planned(ModelState<P>&, const std::string&, Step&& step, Outputs&&) {
    step();
  }
  static void keep_gradients(ModelState<P>&) {}
  static void backward_scaled(ModelState<P>& s, double scale, const autograd::LeafDone& ready) {
    autograd::backward(autograd::scale(s.p, s.loss_value, scale), Tensor(), ready);
  }
  // Gradients times 1/scale (exact for the power-of-two scales used); whether all are
  // finite, from one device-to-host read of the sum of their sums.
  static bool unscale_grads_all_finite(ModelState<P>& s, double scale) {
    autograd::NoGradGuard guard;
    Tensor total;
    for (Tensor param : s.net->parameters()) {
      const Tensor g = param.grad();
      if (!g.defined()) continue;
      const Tensor u = ops::scale(s.p, g, 1.0 / scale);
      param.set_grad(u);
      const Tensor sum = ops::sum(s.p, u);
      total = total.defined() ? ops::add(s.p, total, sum) : sum;
    }
    return !total.defined() || std::isfinite(total.item());
  }
};

// Direct mode: conversions are copies into buffers planned once; backward is the
// network's explicit one, from the loss's planned seed; dynamic loss scaling is decided
// on the device (the scale is the seed; the optimizer's kernels unscale or skip).
template <class Impl>
struct ModelMode<Direct<Impl>> {
  using State = ModelState<Direct<Impl>>;

  static Tensor convert(State& s, const Tensor& x, DType dt, MemoryFormat fmt, BufferSet& bufs) {
    if (bufs.holds(x)) return x;
    const Tensor buf = bufs.get(x.sizes(), dt, s.p.device(), fmt);
    ops::direct::copy_now(*s.p.impl, x, buf);
    return buf;
  }
  static Tensor output_in_params_dtype(State& s, const Tensor& y, BufferSet& bufs) {
    return convert(s, y, s.dtype, layout_for(y.dim(), s.fmt), bufs);
  }
  // The planned input buffer for these sizes: in the compute dtype, or i64 for token ids (the
  // buffer that to_input copies ids into).
  static Tensor input_buffer(State& s, const Shape& sizes) {
    if (s.token_ids) return s.input.get(sizes, DType::i64, s.p.device(), MemoryFormat::contiguous);
    return s.input.get(sizes, s.compute, s.p.device(), layout_for(sizes.size(), s.fmt));
  }
  static Tensor targets_buffer(State& s, const Shape& sizes, DType dt) {
    return s.targets.get(sizes, dt, s.p.device(), MemoryFormat::contiguous);
  }
  // The step's buffers in one arena, laid out from the step's recorded kernel calls.
  template <class Step, class Outputs>
  static void planned(State& s, const std::string& key, Step&& step, Outputs&& outputs) {
    s.memory.run(key, s.p.device(), step, outputs);
  }
  // Before a forward: gradients that a planned step left in its arena (still in .grad(),
  // not zeroed: accumulation, or a read after the step) move out of the memory the
  // forward will overwrite.
  static void keep_gradients(State& s) {
    if (ops::direct::recording()) return;
    if (s.params.empty()) s.params = s.net->parameters();
    for (Tensor& param : s.params) {
      const Tensor g = param.grad();
      if (!s.memory.holds(g)) continue;
      Tensor copy = Tensor::empty_like(g, g.sizes());
      ops::direct::copy_now(*s.p.impl, g, copy);
      param.set_grad(copy);
    }
  }
  // Mixed precision: dL/dlogits back into the compute dtype (the cast's backward). The
  // network reports finished parameters itself (Model::set_param_ready_hook).
  // `scaled`: the loss times the loss scale (its device value is the seed).
  static void backward(State& s, const autograd::LeafDone&, bool scaled = false) {
    if (scaled) {
      ops::direct::copy_now(*s.p.impl, s.amp.narrow(0, ops::kAmpScale, 1).view(Shape{}), s.loss.seed());
    }
    const Tensor dlogits = s.loss.backward(scaled);
    if (dlogits.dtype() == s.compute) {
      s.net->backward(dlogits);
      return;
    }
    s.net->backward(convert(s, dlogits, s.compute, layout_for(dlogits.dim(), s.fmt), s.dlogits));
  }
};

}  // namespace strata::nn::detail
