#include "strata/nn/model.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "strata/autograd/functions.h"
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/node.h"
#include "strata/nn/model_modes.h"
#include "strata/nn/policy.h"
#include "strata/nn/step_graphs.h"
#include "strata/nn/token_inputs.h"
#include "strata/ops/direct/graph_capture.h"
#include "strata/ops/direct/memory_plans.h"
#include "strata/ops/direct/step_memory.h"

namespace strata::nn {

std::unique_ptr<Optimizer> Model::make_optimizer(const OptimizerConfig& c) {
  return std::make_unique<Optimizer>(c, param_groups(module(), c.weight_decay, c.no_decay_bn_bias),
                                     make_step_kernels(mode(), backend_name()));
}

void Model::set_param_ready_hook(std::function<void(const Tensor&)> fn) {
  param_ready_ = std::move(fn);
  drop_captured_steps();
  if (!param_ready_) {
    module().set_grad_ready_hook({});
    return;
  }
  module().set_grad_ready_hook([this](const Module& m) {
    if (ops::direct::recording()) return;  // a memory plan's first pass computes no gradient
    for (const Tensor& p : m.parameters()) param_ready_(p);
  });
}

namespace {

// Cross-entropy's targets are class indices: an integer dtype (LibTorch: "expected scalar type
// Long but found Float"), none negative but the ignore index. A floating tensor is refused,
// never truncated.
void check_class_labels(const Tensor& t, int64_t ignore_index) {
  const bool host = t.device().type == DeviceType::cpu;
  if (is_floating(t.dtype())) {
    std::string example;
    if (host && t.numel() > 0) {
      const std::vector<double> v = t.contiguous().to_vector<double>();
      size_t i = 0;
      while (i + 1 < v.size() && v[i] == std::floor(v[i]) && v[i] >= 0) ++i;
      example = " (value " + std::to_string(v[i]) + " at position " + std::to_string(i) + ")";
    }
    STRATA_FAIL("Model: cross_entropy's targets must be class indices of an integer dtype (i64), got ",
                dtype_name(t.dtype()), " targets ", t.str(), example,
                "; convert labels that are whole numbers with .to(DType::i64)");
  }
  if (!host) return;  // device labels: the loss's kernel checks the range
  const std::vector<int64_t> v = t.contiguous().to_vector<int64_t>();
  for (size_t i = 0; i < v.size(); ++i)
    STRATA_CHECK(v[i] >= 0 || v[i] == ignore_index, "Model: cross_entropy's targets are class indices; label ", v[i],
                 " at position ", i, " of ", t.str(), " is negative and not the ignore index (", ignore_index, ")");
}

using detail::BufferSet;
using detail::layout_for;
using detail::ModelMode;
using detail::ModelState;
using detail::StepGraph;
using detail::mode_of;

template <class P>
class ModelImpl final : public Model {
  using Mode = ModelMode<P>;

 public:
  ModelImpl(const P& p, std::unique_ptr<Module> net, DType dt, const ModelOptions& o, const std::string& what,
            const std::string& init, ops::DispatchMode mode)
      : s_{p, std::move(net), Loss<P>(p, o.loss, o.ignore_index), dt, o.compute_dtype.value_or(dt),
           o.memory_format.value_or(p.preferred_memory_format(o.compute_dtype.value_or(dt)))},
        mode_(mode), borrowed_(o.borrowed_results) {
    STRATA_CHECK(mode == mode_of(P::kMode) || (mode == ops::DispatchMode::graph && captures_graphs_v<P>),
                 "Model: dispatch mode ", ops::dispatch_mode_name(mode), " does not go with the policy ", P::kMode);
    STRATA_CHECK(is_floating(s_.compute), "Model: compute dtype must be floating, got ", dtype_name(s_.compute));
    s_.token_ids = detail::takes_token_ids(*s_.net);
    scale_ = o.initial_loss_scale.value_or(s_.compute == DType::f16 ? 65536.0 : 0.0);
    STRATA_CHECK(scale_ >= 0 && std::isfinite(scale_), "Model: initial_loss_scale must be finite and >= 0, got ",
                 scale_);
    // Weights in the activations' layout: no convolution stages one, nor its gradient.
    if (s_.fmt == MemoryFormat::channels_last) s_.net->to_memory_format(MemoryFormat::channels_last);
    if constexpr (is_direct_v<P>)
      if (scale_ > 0) {
        s_.amp = Tensor::empty(Shape{4}, DType::f64, s_.p.device());
        copy_into(Tensor::from_vector(std::vector<double>{scale_, 0.0, 0.0, 0.0}, Shape{4}), s_.amp);
      }
    describe_ = what + " | " + group_thousands(s_.net->num_parameters()) + " parameters | init " + init +
                " | dispatch " + std::string(ops::dispatch_mode_name(mode)) + " on " + std::string(s_.p.backend_name()) + " | " +
                std::string(dtype_name(dt)) +
                (s_.compute != dt ? " parameters, " + std::string(dtype_name(s_.compute)) + " compute" : "") +
                (s_.fmt == MemoryFormat::channels_last ? " channels_last" : "") +
                (scale_ > 0 ? " | dynamic loss scaling from " + std::to_string(static_cast<int64_t>(scale_)) : "") +
                " | loss " + std::string(loss_kind_name(o.loss));
  }

  Module& module() override { return *s_.net; }
  const Module& module() const override { return *s_.net; }
  ops::DispatchMode mode() const override { return mode_; }
  std::string_view backend_name() const override { return s_.p.backend_name(); }
  Device device() const override { return s_.p.device(); }
  DType dtype() const override { return s_.dtype; }
  LossKind loss_kind() const override { return s_.loss.kind(); }

  Tensor forward(const Tensor& x) override {
    Mode::keep_gradients(s_);
    s_.forward_only = false;
    return s_.net->forward(to_input(x));
  }

  // With gradients off (evaluation), a planned forward-only step; on, a backward may
  // follow, which train_step plans with it.
  StepResult forward_loss(const Tensor& x, const Tensor& targets) override {
    if (autograd::GradMode::enabled()) return owned(unplanned_forward_loss(x, targets));
    StepResult r;
    Mode::planned(
        s_, step_key("forward_loss", x, targets), [&] { r = unplanned_forward_loss(x, targets); },
        [&] { return std::vector<Tensor>{r.loss, r.logits}; });
    s_.forward_only = true;
    return owned(r);
  }

  void backward() override {
    STRATA_CHECK(s_.loss_value.defined(), "Model::backward: call forward_loss first");
    STRATA_CHECK(!s_.forward_only,
                 "Model::backward: the latest forward ran with gradients off (NoGradGuard, predict), which keeps "
                 "nothing for backward; call forward_loss with gradients on");
    Mode::backward(s_, param_ready_);
  }

  StepResult train_step(const Tensor& x, const Tensor& targets, Optimizer& opt) override {
    if constexpr (captures_graphs_v<P>)
      if (mode_ == ops::DispatchMode::graph) return owned(captured_train_step(x, targets, opt));
    opt.zero_grad();
    StepResult r;
    if constexpr (!is_direct_v<P>) {
      if (scale_ > 0) {
        r = unplanned_forward_loss(x, targets);
        Mode::backward_scaled(s_, scale_, param_ready_);
        run_gradient_hook();
        if (Mode::unscale_grads_all_finite(s_, scale_)) {
          opt.step();
          if (++good_steps_ == kGrowthInterval) scale_ *= 2, good_steps_ = 0;
        } else {
          ++skipped_;
          scale_ *= 0.5;
          good_steps_ = 0;
        }
        return r;
      }
    }
    Mode::planned(
        s_, step_key("train_step", x, targets),
        [&] {
          r = unplanned_forward_loss(x, targets);
          scaled_backward();
        },
        [&] { return std::vector<Tensor>{r.loss, r.logits}; });
    run_gradient_hook();
    step_optimizer(opt);
    return owned(r);
  }

  double loss_scale() const override { return device_amp(ops::kAmpScale).value_or(scale_); }
  int64_t skipped_steps() const override {
    return static_cast<int64_t>(device_amp(ops::kAmpSkipped).value_or(static_cast<double>(skipped_)));
  }

  Tensor predict(const Tensor& x) override {
    autograd::NoGradGuard guard;
    if constexpr (captures_graphs_v<P>)
      if (mode_ == ops::DispatchMode::graph && !s_.net->is_training()) return owned(captured_predict(x));
    Tensor y;
    Mode::planned(
        s_, step_key("predict", x, Tensor()), [&] { y = to_params_dtype(forward(x), s_.predicted); },
        [&] { return std::vector<Tensor>{y}; });
    s_.forward_only = true;
    return owned(y);
  }

  Tensor network_input(const Tensor& x) override { return to_input(x); }
  Tensor input_buffer(const Shape& sizes) override { return Mode::input_buffer(s_, sizes); }
  Tensor targets_buffer(const Shape& sizes) override { return Mode::targets_buffer(s_, sizes, targets_dtype()); }
  void drop_captured_steps() override { graphs_.clear(); }
  const ops::direct::StepMemoryStats& step_memory() const override { return s_.memory.last(); }

 private:
  // Graph mode's predict: planned and run as direct mode the first time for a shape,
  // captured the second, launched from then on. The input's copy into the planned input
  // buffer and the move of gradients out of the arena run before, outside the graph.
  Tensor captured_predict(const Tensor& x) {
    Mode::keep_gradients(s_);
    const Tensor in = to_input(x);
    const std::string key = step_key("predict", in, Tensor());
    s_.forward_only = true;
    // A capture may not refold, and a replay runs no forward() that would: folded copies are
    // brought up to date first.
    s_.net->refresh_derived();
    if (StepGraph* c = graphs_.find(key, in, Tensor(), nullptr)) {
      c->graph->launch();
      return c->outputs[0];
    }
    Tensor y;
    auto body = [&] { y = to_params_dtype(s_.net->forward(in), s_.predicted); };
    if (!s_.memory.known(key)) {
      Mode::planned(s_, key, body, [&] { return std::vector<Tensor>{y}; });
      return y;
    }
    StepGraph& c = graphs_.add({key, ops::direct::capture_step(*s_.p.impl, body), in, Tensor(), {y}});
    c.graph->launch();
    return y;
  }

  // Direct mode: backward, from the loss scale when dynamic loss scaling is on.
  void scaled_backward() {
    STRATA_CHECK(!s_.forward_only, "Model::train_step: the forward kept nothing for backward");
    Mode::backward(s_, param_ready_, s_.amp.defined());
  }
  // The optimizer's step; with loss scaling on the device, first each gradient's sum and
  // the scale's update, whose state the step's kernels read (skip, or 1/scale).
  void step_optimizer(Optimizer& opt) {
    if constexpr (is_direct_v<P>) {
      if (s_.amp.defined()) {
        if (s_.params.empty()) s_.params = s_.net->parameters();
        std::vector<const Tensor*> grads;
        for (const Tensor& param : s_.params)
          if (param.grad().defined()) grads.push_back(&param);
        if (s_.sum_views.size() != grads.size()) {
          STRATA_CHECK(!ops::direct::capturing(), "Model::train_step: loss scaling's buffers cannot be made inside "
                                                  "a captured step");
          s_.grad_sums = Tensor::empty(Shape{static_cast<int64_t>(grads.size())}, s_.dtype, s_.p.device());
          s_.sum_views.clear();
          for (size_t j = 0; j < grads.size(); ++j)
            s_.sum_views.push_back(s_.grad_sums.narrow(0, static_cast<int64_t>(j), 1).view(Shape{}));
        }
        for (size_t j = 0; j < grads.size(); ++j) ops::direct::sum_now(*s_.p.impl, grads[j]->grad(), s_.sum_views[j]);
        ops::direct::amp_update_scale_now(*s_.p.impl, s_.grad_sums, s_.amp, 2.0, 0.5, kGrowthInterval);
        opt.step(s_.amp);
        return;
      }
    }
    opt.step();
  }
  // Direct mode with loss scaling: element i of its device state (a read that waits).
  std::optional<double> device_amp(int i) const {
    if (!s_.amp.defined()) return std::nullopt;
    return read_amp_state(s_.amp)[static_cast<size_t>(i)];
  }

  // Graph mode's train_step: forward, loss, backward and the optimizer's step in one
  // graph (nn/step_graphs.h). Before each launch, outside the graph: the gradients are
  // released (zero_grad) and the input and targets copied into their planned buffers. After
  // it, .grad() again holds each gradient's arena buffer (or its bucket view: data-parallel
  // averaging, the gradient hook, is captured between backward and the optimizer's step as
  // direct mode runs it) and the graph-launch hook runs; the gradient hooks are not called
  // again.
  StepResult captured_train_step(const Tensor& x, const Tensor& targets, Optimizer& opt) {
    opt.zero_grad();
    const Tensor in = to_input(x), tg = to_targets(targets);
    const std::string key = step_key("train_step", in, tg);
    s_.forward_only = false;
    if (StepGraph* c = graphs_.find(key, in, tg, &opt)) {
      detail::relaunch_training(*c);
      run_graph_launch_hook();
      s_.loss_value = c->outputs[0];
      s_.logits = c->outputs[1];
      return {s_.loss_value, s_.logits};
    }
    StepResult r;
    auto forward_backward = [&] {
      r = unplanned_forward_loss(in, tg);
      scaled_backward();
    };
    auto update = [&] {
      run_gradient_hook();
      step_optimizer(opt);
    };
    if (!s_.memory.known(key)) {
      Mode::planned(s_, key, forward_backward, [&] { return std::vector<Tensor>{r.loss, r.logits}; });
      update();
      return r;
    }
    StepGraph c = detail::capture_training(*s_.p.impl, opt, [&] {
      forward_backward();
      update();
    });
    c.key = key;
    c.input = in;
    c.targets = tg;
    c.outputs = {r.loss, r.logits};
    for (const Tensor& param : s_.net->parameters())
      if (param.grad().defined()) c.grads.emplace_back(param, param.grad());
    detail::launch_training(graphs_.add(std::move(c)));
    run_graph_launch_hook();
    return r;
  }

  StepResult unplanned_forward_loss(const Tensor& x, const Tensor& targets) {
    s_.logits = loss_input(forward(x));
    s_.loss_value = s_.loss.forward(s_.logits, to_targets(targets));
    return {s_.loss_value, s_.logits};
  }
  // What tells planned steps apart: the entry point, train/eval, the inputs' sizes and dtypes.
  // In direct mode also the planned input buffer the step reads (the layers' plans are
  // keyed on it), so that a step over a new buffer for the same shape is planned anew.
  std::string step_key(std::string_view what, const Tensor& x, const Tensor& targets) {
    latest_input_sizes_ = x.sizes();  // a planned step that replays converts no input
    if constexpr (!is_direct_v<P>) return {};  // the tape modes plan nothing
    std::string k(what);
    k += s_.net->is_training() ? " train " : " eval ";
    for (const Tensor* t : {&x, &targets})
      k += t->defined() ? std::string(dtype_name(t->dtype())) + t->sizes().str() + " " : "- ";
    // Token ids have a buffer of their own (to_input keeps them integers).
    const Tensor in = s_.input.holds(x)              ? x
                      : is_floating(x.dtype())       ? Mode::input_buffer(s_, x.sizes())
                                                     : s_.input.get(x.sizes(), DType::i64, s_.p.device(),
                                                                    MemoryFormat::contiguous);
    k += std::to_string(reinterpret_cast<uintptr_t>(in.data_ptr()));
    return k;
  }
  // The loss in the parameters' precision. Under mixed precision a backend's cross-entropy
  // reads f16/bf16 logits as they are, computing in f32 with the cast's bits (ops/validate.h),
  // as PyTorch's autocast does: no full-precision copy of the logits is written (for a language
  // model's vocabulary the largest tensor of the step), and StepResult::logits are the network's
  // own. Other losses, and f64 parameters, get the cast.
  Tensor loss_input(const Tensor& y) {
    const auto& caps = s_.p.capabilities();
    if (y.dtype() != s_.dtype && s_.loss.kind() == LossKind::cross_entropy &&
        ops::stats_dtype(y.dtype()) == s_.dtype && caps.supports(ops::OpId::softmax_xent_fwd, y.dtype()) &&
        caps.supports(ops::OpId::softmax_xent_bwd, y.dtype()))
      return y;
    return to_params_dtype(y, s_.logits_full);
  }
  // Mixed precision: the network's output (compute dtype) in the parameters' dtype.
  Tensor to_params_dtype(const Tensor& y, BufferSet& bufs) {
    if (y.dtype() == s_.dtype) return y;
    return Mode::output_in_params_dtype(s_, y, bufs);
  }
  Tensor to_input(const Tensor& x) {
    STRATA_CHECK(x.defined(), "Model: input is undefined");
    latest_input_sizes_ = x.sizes();
    // Token ids stay integers (i64); everything else is converted to the compute dtype.
    if (!is_floating(x.dtype())) return Mode::convert(s_, x, DType::i64, MemoryFormat::contiguous, s_.input);
    return Mode::convert(s_, x, s_.compute, layout_for(x.dim(), s_.fmt), s_.input);
  }
  // Direct and graph modes return copies of their planned outputs unless results are borrowed
  // (ModelOptions::borrowed_results); the tape modes' outputs are fresh already.
  Tensor owned(const Tensor& t) const {
    if constexpr (is_direct_v<P>)
      if (!borrowed_ && t.defined()) return t.clone();
    return t;
  }
  StepResult owned(const StepResult& r) const { return {owned(r.loss), owned(r.logits)}; }

  Tensor to_targets(const Tensor& t) {
    STRATA_CHECK(t.defined(), "Model: targets are undefined");
    if (s_.loss.kind() == LossKind::cross_entropy) check_class_labels(t, s_.loss.ignore_index());
    return Mode::convert(s_, t, targets_dtype(), MemoryFormat::contiguous, s_.targets);
  }
  DType targets_dtype() const { return s_.loss.kind() == LossKind::cross_entropy ? DType::i64 : s_.dtype; }

  ModelState<P> s_;
  ops::DispatchMode mode_;
  bool borrowed_ = false;  // ModelOptions::borrowed_results
  detail::StepGraphs graphs_;  // graph mode; after s_, so destroyed before the plans' memory
  static constexpr int64_t kGrowthInterval = 2000;
  double scale_ = 0;
  int64_t good_steps_ = 0, skipped_ = 0;
};

}  // namespace

template <class P>
std::unique_ptr<Model> detail::wrap_module(const P& p, std::unique_ptr<Module> net, DType dtype, const ModelOptions& o,
                                           const std::string& what, const std::string& init,
                                           ops::DispatchMode mode) {
  return std::make_unique<ModelImpl<P>>(p, std::move(net), dtype, o, what, init, mode);
}

#define STRATA_NN_INSTANTIATE(P)                                                                                    \
  template std::unique_ptr<Model> detail::wrap_module<P>(const P&, std::unique_ptr<Module>, DType, const ModelOptions&, \
                                                         const std::string&, const std::string&,            \
                                                         ops::DispatchMode);
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
