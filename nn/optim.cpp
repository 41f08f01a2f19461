#include "strata/nn/optim.h"

#include <atomic>
#include <cstdio>
#include <map>
#include <utility>

#include "strata/nn/policy.h"
#include "strata/ops/direct/memory_plans.h"
#include "strata/ops/direct/optim_plans.h"

namespace strata::nn {

std::vector<ParamGroup> param_groups(Module& m, double weight_decay, bool no_decay_bn_bias) {
  if (!no_decay_bn_bias) return {ParamGroup{"all", m.named_parameters(), weight_decay}};
  ParamGroup decay{"decay", {}, weight_decay}, no_decay{"no_decay", {}, 0.0};
  for (auto& [prefix, mod] : m.named_modules()) {
    const bool bn = mod->type_name().find("Norm") != std::string_view::npos;
    for (const auto& [n, t] : mod->own_parameters()) {
      const std::string full = prefix.empty() ? n : prefix + "." + n;
      (bn || n == "bias" ? no_decay : decay).params.emplace_back(full, t);
    }
  }
  return {decay, no_decay};
}

OptimizerKind parse_optimizer_kind(std::string_view s) {
  if (s == "sgd") return OptimizerKind::sgd;
  if (s == "adam") return OptimizerKind::adam;
  if (s == "adamw") return OptimizerKind::adamw;
  STRATA_FAIL("optimizer: unknown kind '", s, "' (known: sgd, adam, adamw)");
}

std::string_view optimizer_kind_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::adam: return "adam";
    case OptimizerKind::adamw: return "adamw";
  }
  return "?";
}

std::string describe(const OptimizerConfig& c) {
  char buf[256];
  if (c.kind == OptimizerKind::sgd)
    std::snprintf(buf, sizeof buf, "sgd (lr %g, momentum %g%s, weight_decay %g%s)", c.lr, c.momentum,
                  c.nesterov ? ", nesterov" : "", c.weight_decay, c.no_decay_bn_bias ? ", none on BN/bias" : "");
  else
    std::snprintf(buf, sizeof buf, "%s (lr %g, betas %g/%g, eps %g, weight_decay %g%s)",
                  std::string(optimizer_kind_name(c.kind)).c_str(), c.lr, c.beta1, c.beta2, c.eps, c.weight_decay,
                  c.no_decay_bn_bias ? ", none on BN/bias" : "");
  return buf;
}

namespace {

// A value no optimizer's state has had before: a captured step is tied to one.
uint64_t new_state_epoch() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

template <class D>
class TapeKernels final : public StepKernels {
 public:
  explicit TapeKernels(const D& d) : d_(d) {}
  void sgd(std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> bufs,
           const ops::SgdOptions& o, std::span<const Tensor> hypers, const Tensor& amp) override {
    check_direct_only(hypers, amp);
    ops::multi_sgd_step_(d_, p, g, bufs, o);
  }
  void adam(std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> m,
            std::span<const Tensor> v, std::span<const int64_t> steps, const ops::AdamOptions& o,
            std::span<const Tensor> hypers, const Tensor& amp) override {
    check_direct_only(hypers, amp);
    ops::multi_adam_step_(d_, p, g, m, v, steps, o);
  }
  void fill(const Tensor& t, double value) override { ops::fill_(d_, t, value); }
  void copy(const Tensor& src, const Tensor& dst) override { copy_into(src, dst); }
  std::string_view backend_name() const override { return d_.backend_name(); }

 private:
  static void check_direct_only(std::span<const Tensor> hypers, const Tensor& amp) {
    STRATA_CHECK(hypers.empty(), "optimizer: hyperparameters in device memory are graph mode's, and the tape "
                                 "modes do not capture");
    STRATA_CHECK(!amp.defined(), "optimizer: loss scaling decided on the device is direct and graph modes'; the "
                                 "tape modes unscale the gradients before step()");
  }
  D d_;
};

// Direct and graph modes: the steps' direct plans (ops/direct/optim_plans.h), which validate a
// group's lists when they change and report the parameters' writes as the front end does.
template <class Impl>
class DirectKernels final : public StepKernels {
 public:
  explicit DirectKernels(Impl& impl) : impl_(&impl) {}
  void sgd(std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> bufs,
           const ops::SgdOptions& o, std::span<const Tensor> hypers, const Tensor& amp) override {
    sgd_.run(*impl_, p, g, bufs, o, hypers, amp);
  }
  void adam(std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> m,
            std::span<const Tensor> v, std::span<const int64_t> steps, const ops::AdamOptions& o,
            std::span<const Tensor> hypers, const Tensor& amp) override {
    adam_.run(*impl_, p, g, m, v, steps, o, hypers, amp);
  }
  void fill(const Tensor& t, double value) override { ops::direct::fill_now(*impl_, t, value); }
  void copy(const Tensor& src, const Tensor& dst) override { ops::direct::copy_now(*impl_, src, dst); }
  std::string_view backend_name() const override { return Impl::kName; }

 private:
  Impl* impl_;
  ops::direct::MultiSgdStepPlan<Impl> sgd_;
  ops::direct::MultiAdamStepPlan<Impl> adam_;
};

}  // namespace

std::shared_ptr<StepKernels> make_step_kernels(ops::DispatchMode mode, std::string_view backend) {
  return with_policy(mode, backend, [](const auto& p) -> std::shared_ptr<StepKernels> {
    using P = std::decay_t<decltype(p)>;
    // The optimizer's one mode choice: the step kernels are picked here, once.
    if constexpr (is_direct_v<P>)
      return std::make_shared<DirectKernels<typename P::Backend>>(*p.impl);
    else
      return std::make_shared<TapeKernels<P>>(p);
  });
}

Optimizer::Optimizer(const OptimizerConfig& c, std::vector<ParamGroup> groups, std::shared_ptr<StepKernels> kernels)
    : c_(c), groups_(std::move(groups)), kernels_(std::move(kernels)), lr_(c.lr), state_epoch_(new_state_epoch()) {
  STRATA_CHECK(kernels_ != nullptr, "optimizer: no step kernels");
  STRATA_CHECK(c.lr >= 0.0, "optimizer: lr must be >= 0, got ", c.lr);
  STRATA_CHECK(c.kind != OptimizerKind::sgd || c.momentum >= 0.0, "optimizer: momentum must be >= 0, got ",
               c.momentum);
  STRATA_CHECK(!(c.kind == OptimizerKind::sgd && c.nesterov && c.momentum <= 0.0),
               "optimizer: nesterov needs momentum > 0");
  std::map<std::string, bool> seen;
  for (const ParamGroup& g : groups_)
    for (const auto& [n, t] : g.params) {
      STRATA_CHECK(seen.emplace(n, true).second, "optimizer: parameter '", n, "' is in more than one group");
      STRATA_CHECK(is_floating(t.dtype()), "optimizer: parameter '", n, "' is ", t.str(), ", not floating point");
      slots_.push_back(Slot{n, t, {}});
    }
}

void Optimizer::allocate(Slot& s) {
  STRATA_CHECK(!capturing_, "optimizer: parameter '", s.name, "' takes its first step inside a captured step; "
               "its state must exist before the capture (graph mode runs a step in direct mode first)");
  state_epoch_ = new_state_epoch();
  const Tensor& p = s.param;
  auto zeros = [&] {
    Tensor t = Tensor::empty_like(p, p.sizes());  // the parameter's layout: its kernels read both alike
    kernels_->fill(t, 0.0);
    return t;
  };
  if (c_.kind == OptimizerKind::sgd) {
    if (c_.momentum != 0.0) s.state.a = zeros();
  } else {
    s.state.a = zeros();
    s.state.b = zeros();
  }
}

void Optimizer::step() {
  // One call per group (its weight decay), as PyTorch's fused optimizers make; the
  // slots are in group order.
  size_t begin = 0;
  for (const ParamGroup& g : groups_) {
    step_group(begin, begin + g.params.size(), g.weight_decay);
    begin += g.params.size();
  }
  ++steps_;
}

void Optimizer::step(const Tensor& amp) {
  STRATA_CHECK(amp.defined() && amp.dtype() == DType::f64 && amp.sizes() == Shape{4},
               "optimizer: step(amp) needs the f64 [4] loss-scaling state, got ", amp.defined() ? amp.str() : "none");
  STRATA_CHECK(!amp_.defined() || amp_.same(amp), "optimizer: step(amp) with another loss scaler's state than before");
  amp_ = amp;
  step();
}

std::array<double, 4> read_amp_state(const Tensor& amp) {
  Tensor host = Tensor::empty(Shape{4}, DType::f64, Device::cpu());
  copy_into(amp, host);
  const double* s = host.data<double>();
  return {s[0], s[1], s[2], s[3]};
}

std::array<double, 4> Optimizer::read_amp() const {
  STRATA_CHECK(!capturing_, "optimizer: the loss scaler's state cannot be read inside a captured step");
  return read_amp_state(amp_);  // at a parameter's first step, state_dict and load
}

int64_t Optimizer::skipped_total() const {
  return amp_.defined() ? static_cast<int64_t>(read_amp()[ops::kAmpSkipped]) : 0;
}

void Optimizer::step_group(size_t begin, size_t end, double weight_decay) {
  std::vector<Tensor> params, grads, a, b, hypers;
  std::vector<int64_t> steps;
  for (size_t i = begin; i < end; ++i) {
    Slot& s = slots_[i];
    const Tensor g = s.param.grad();
    if (!g.defined()) continue;
    STRATA_CHECK(g.sizes() == s.param.sizes() && g.dtype() == s.param.dtype(), "optimizer: gradient ", g.str(),
                 " of '", s.name, "' does not match the parameter ", s.param.str());
    if (s.state.step == 0 && !s.state.a.defined()) {
      allocate(s);
      if (amp_.defined()) {
        // The skips before this step (amp_update_scale has counted this step's already).
        const std::array<double, 4> st = read_amp();
        s.state.step = static_cast<int64_t>(st[ops::kAmpSkipped]) - (st[ops::kAmpInvScale] == 0.0 ? 1 : 0);
      }
    }
    ++s.state.step;
    if (capturing_) {
      hypers.push_back(hyper_.narrow(0, static_cast<int64_t>(i), 1).view(Shape{2}));
      stepped_.push_back(i);
    }
    params.push_back(s.param);
    grads.push_back(g);
    if (s.state.a.defined()) a.push_back(s.state.a);
    if (s.state.b.defined()) b.push_back(s.state.b);
    steps.push_back(s.state.step);
  }
  if (params.empty()) return;
  if (c_.kind == OptimizerKind::sgd) {
    ops::SgdOptions o;
    o.lr = lr_;
    o.momentum = c_.momentum;
    o.weight_decay = weight_decay;
    o.nesterov = c_.nesterov;
    kernels_->sgd(params, grads, a, o, hypers, amp_);
  } else {
    ops::AdamOptions o;
    o.lr = lr_;
    o.beta1 = c_.beta1;
    o.beta2 = c_.beta2;
    o.eps = c_.eps;
    o.weight_decay = weight_decay;
    o.decoupled_weight_decay = c_.kind == OptimizerKind::adamw;
    kernels_->adam(params, grads, a, b, steps, o, hypers, amp_);
  }
}

void Optimizer::begin_capture() {
  STRATA_CHECK(!capturing_, "optimizer: begin_capture while a capture is open");
  STRATA_CHECK(!slots_.empty(), "optimizer: nothing to capture (no parameters)");
  if (!hyper_.defined()) {
    // Pinned: a captured step's copy of them is read by the device (a cuda graph refreshes
    // it from this memory at each launch).
    hyper_ = Tensor::empty_pinned(Shape{static_cast<int64_t>(slots_.size()), 2}, DType::f64);
  }
  capturing_ = true;
  stepped_.clear();
}

std::vector<size_t> Optimizer::end_capture() {
  capturing_ = false;
  return std::exchange(stepped_, {});
}

void Optimizer::advance_captured(const std::vector<size_t>& stepped) {
  for (size_t i : stepped) ++slots_.at(i).state.step;
  ++steps_;
  write_run_time_hyperparameters();
}

void Optimizer::write_run_time_hyperparameters() {
  STRATA_CHECK(hyper_.defined(), "optimizer: no run-time hyperparameters (no step was captured)");
  auto* h = hyper_.data<double>();
  for (size_t i = 0; i < slots_.size(); ++i) {
    h[2 * i] = lr_;
    h[2 * i + 1] = static_cast<double>(slots_[i].state.step);
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Slot& s : slots_) {
    if (set_to_none) {
      s.param.set_grad(Tensor());
    } else if (s.param.grad().defined()) {
      kernels_->fill(s.param.grad(), 0.0);
    }
  }
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  const int64_t skipped = skipped_total();
  for (const Slot& s : slots_) {
    const int64_t taken = s.state.step - skipped;  // loss scaling's skips are no steps
    if (s.state.step == 0 || taken <= 0) continue;
    if (c_.kind == OptimizerKind::sgd) {
      if (s.state.a.defined()) out.emplace_back(s.name + ".momentum_buffer", s.state.a);
      continue;
    }
    out.emplace_back(s.name + ".exp_avg", s.state.a);
    out.emplace_back(s.name + ".exp_avg_sq", s.state.b);
    out.emplace_back(s.name + ".step", Tensor::from_vector(std::vector<int64_t>{taken}, Shape{}));
  }
  return out;
}

void Optimizer::load_state_dict(const StateDict& sd) {
  std::map<std::string_view, const Tensor*> given;
  for (const auto& [n, t] : sd) given.emplace(n, &t);
  std::string problems;
  std::map<std::string_view, bool> used;
  auto take = [&](const Slot& s, const std::string& suffix, const Shape& want) -> const Tensor* {
    const std::string key = s.name + suffix;
    auto it = given.find(key);
    if (it == given.end()) return nullptr;
    used.emplace(it->first, true);
    if (!(it->second->sizes() == want))
      problems += "\n  size mismatch for '" + key + "': " + it->second->sizes().str() + " in the state dict, " +
                  want.str() + " expected";
    return it->second;
  };
  struct Found {
    Slot* slot;
    const Tensor *a, *b, *step;
  };
  std::vector<Found> found;
  for (Slot& s : slots_) {
    Found f{&s, nullptr, nullptr, nullptr};
    if (c_.kind == OptimizerKind::sgd) {
      f.a = take(s, ".momentum_buffer", s.param.sizes());
    } else {
      f.a = take(s, ".exp_avg", s.param.sizes());
      f.b = take(s, ".exp_avg_sq", s.param.sizes());
      f.step = take(s, ".step", Shape{});
      if ((f.a != nullptr) != (f.b != nullptr) || (f.a != nullptr) != (f.step != nullptr))
        problems += "\n  incomplete adam state for '" + s.name + "' (needs exp_avg, exp_avg_sq and step)";
      // A state is saved only after a step; PyTorch stores the count as a float. A
      // value outside [1, 2^53] is corruption and would overflow the next ++step.
      if (f.step && f.step->numel() == 1) {
        const double v = f.step->to_vector<double>()[0];
        if (!(v >= 1 && v <= 9007199254740992.0 && v == static_cast<double>(static_cast<int64_t>(v))))
          problems += "\n  '" + s.name + ".step' = " + std::to_string(v) + " is not a step count >= 1";
      }
    }
    found.push_back(f);
  }
  for (const auto& [n, t] : sd)
    if (!used.count(n)) problems += "\n  unexpected key '" + n + "'";
  STRATA_CHECK(problems.empty(), "optimizer load_state_dict (", optimizer_kind_name(c_.kind), ", ", slots_.size(),
               " parameters):", problems);
  const int64_t skipped = skipped_total();
  for (Found& f : found) {
    State st;
    if (f.a) {
      // Into the state tensors already there when there are (a captured step refers to them).
      if (!f.slot->state.a.defined() || (f.b && !f.slot->state.b.defined())) allocate(*f.slot);
      st = f.slot->state;
      copy_into(*f.a, st.a);
      if (f.b) copy_into(*f.b, st.b);
      st.step = (f.step ? f.step->to_vector<int64_t>().at(0) : 1) + skipped;
    }
    if (!st.a.defined() && f.slot->state.a.defined()) state_epoch_ = new_state_epoch();  // state dropped
    f.slot->state = st;
  }
}

std::string Optimizer::describe() const {
  std::string s = nn::describe(c_) + ", groups:";
  for (const ParamGroup& g : groups_) {
    int64_t n = 0;
    for (const auto& [name, t] : g.params) n += t.numel();
    s += " " + g.name + " (" + std::to_string(g.params.size()) + " tensors, " + group_thousands(n) +
         " params, weight_decay " + std::to_string(g.weight_decay) + ")";
  }
  return s;
}

}  // namespace strata::nn
