#include "strata/nn/optim.h"

#include <atomic>
#include <cmath>
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

namespace {
constexpr OptimizerKind kKinds[] = {OptimizerKind::sgd,     OptimizerKind::adam,    OptimizerKind::adamw,
                                    OptimizerKind::rmsprop, OptimizerKind::adagrad, OptimizerKind::adadelta};
}  // namespace

OptimizerKind parse_optimizer_kind(std::string_view s) {
  for (OptimizerKind k : kKinds)
    if (s == optimizer_kind_name(k)) return k;
  STRATA_FAIL("optimizer: unknown kind '", s, "' (known: sgd, adam, adamw, rmsprop, adagrad, adadelta)");
}

std::string_view optimizer_kind_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::adam: return "adam";
    case OptimizerKind::adamw: return "adamw";
    case OptimizerKind::rmsprop: return "rmsprop";
    case OptimizerKind::adagrad: return "adagrad";
    case OptimizerKind::adadelta: return "adadelta";
  }
  return "?";
}

double default_lr(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::sgd: return 0.1;
    case OptimizerKind::adam:
    case OptimizerKind::adamw: return 1e-3;
    case OptimizerKind::rmsprop:
    case OptimizerKind::adagrad: return 1e-2;
    case OptimizerKind::adadelta: return 1.0;
  }
  return 0.0;
}

std::string describe(const OptimizerConfig& c) {
  char buf[256];
  const char* bn = c.no_decay_bn_bias ? ", none on BN/bias" : "";
  switch (c.kind) {
    case OptimizerKind::sgd:
      std::snprintf(buf, sizeof buf, "sgd (lr %g, momentum %g%s, weight_decay %g%s)", c.lr, c.momentum,
                    c.nesterov ? ", nesterov" : "", c.weight_decay, bn);
      break;
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
      std::snprintf(buf, sizeof buf, "%s (lr %g, betas %g/%g, eps %g, weight_decay %g%s)",
                    std::string(optimizer_kind_name(c.kind)).c_str(), c.lr, c.beta1, c.beta2, c.eps, c.weight_decay,
                    bn);
      break;
    case OptimizerKind::rmsprop:
      std::snprintf(buf, sizeof buf, "rmsprop (lr %g, alpha %g, eps %g, momentum %g%s, weight_decay %g%s)", c.lr,
                    c.rmsprop.alpha, c.rmsprop.eps, c.rmsprop.momentum, c.rmsprop.centered ? ", centered" : "",
                    c.weight_decay, bn);
      break;
    case OptimizerKind::adagrad:
      std::snprintf(buf, sizeof buf, "adagrad (lr %g, lr_decay %g, eps %g, initial_accumulator_value %g, "
                    "weight_decay %g%s)", c.lr, c.adagrad.lr_decay, c.adagrad.eps,
                    c.adagrad.initial_accumulator_value, c.weight_decay, bn);
      break;
    case OptimizerKind::adadelta:
      std::snprintf(buf, sizeof buf, "adadelta (lr %g, rho %g, eps %g, weight_decay %g%s)", c.lr, c.adadelta.rho,
                    c.adadelta.eps, c.weight_decay, bn);
      break;
  }
  return buf;
}

namespace {

// The options of a step of group weight decay `wd` at learning rate `lr`.
ops::RmspropOptions rmsprop_options(const OptimizerConfig& c, double lr, double wd) {
  return {lr, c.rmsprop.alpha, c.rmsprop.eps, wd, c.rmsprop.momentum, c.rmsprop.centered};
}
ops::AdagradOptions adagrad_options(const OptimizerConfig& c, double lr, double wd) {
  return {lr, c.adagrad.lr_decay, wd, c.adagrad.eps};
}
ops::AdadeltaOptions adadelta_options(const OptimizerConfig& c, double lr, double wd) {
  return {lr, c.adadelta.rho, c.adadelta.eps, wd};
}

}  // namespace

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
  void rmsprop(std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> sq,
               std::span<const Tensor> bufs, std::span<const Tensor> avgs, const ops::RmspropOptions& o,
               std::span<const Tensor> hypers, const Tensor& amp) override {
    check_direct_only(hypers, amp);
    ops::multi_rmsprop_step_(d_, p, g, sq, bufs, avgs, o);
  }
  void adagrad(std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> sums,
               std::span<const int64_t> steps, const ops::AdagradOptions& o, std::span<const Tensor> hypers,
               const Tensor& amp) override {
    check_direct_only(hypers, amp);
    ops::multi_adagrad_step_(d_, p, g, sums, steps, o);
  }
  void adadelta(std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> sq,
                std::span<const Tensor> acc, const ops::AdadeltaOptions& o, std::span<const Tensor> hypers,
                const Tensor& amp) override {
    check_direct_only(hypers, amp);
    ops::multi_adadelta_step_(d_, p, g, sq, acc, o);
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
  void rmsprop(std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> sq,
               std::span<const Tensor> bufs, std::span<const Tensor> avgs, const ops::RmspropOptions& o,
               std::span<const Tensor> hypers, const Tensor& amp) override {
    rmsprop_.run(*impl_, p, g, sq, bufs, avgs, o, hypers, amp);
  }
  void adagrad(std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> sums,
               std::span<const int64_t> steps, const ops::AdagradOptions& o, std::span<const Tensor> hypers,
               const Tensor& amp) override {
    adagrad_.run(*impl_, p, g, sums, steps, o, hypers, amp);
  }
  void adadelta(std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> sq,
                std::span<const Tensor> acc, const ops::AdadeltaOptions& o, std::span<const Tensor> hypers,
                const Tensor& amp) override {
    adadelta_.run(*impl_, p, g, sq, acc, o, hypers, amp);
  }
  void fill(const Tensor& t, double value) override { ops::direct::fill_now(*impl_, t, value); }
  void copy(const Tensor& src, const Tensor& dst) override { ops::direct::copy_now(*impl_, src, dst); }
  std::string_view backend_name() const override { return Impl::kName; }

 private:
  Impl* impl_;
  ops::direct::MultiSgdStepPlan<Impl> sgd_;
  ops::direct::MultiAdamStepPlan<Impl> adam_;
  ops::direct::MultiRmspropStepPlan<Impl> rmsprop_;
  ops::direct::MultiAdagradStepPlan<Impl> adagrad_;
  ops::direct::MultiAdadeltaStepPlan<Impl> adadelta_;
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

namespace {

// The state a kind keeps per parameter, in the order its kernels take it, with PyTorch's
// names (torch.optim's state keys) and first values.
std::vector<Optimizer::StateSpec> specs_of(const OptimizerConfig& c) {
  switch (c.kind) {
    case OptimizerKind::sgd:
      if (c.momentum != 0.0) return {{"momentum_buffer"}};
      return {};
    case OptimizerKind::adam:
    case OptimizerKind::adamw: return {{"exp_avg"}, {"exp_avg_sq"}};
    case OptimizerKind::rmsprop: {
      std::vector<Optimizer::StateSpec> s{{"square_avg"}};
      if (c.rmsprop.momentum != 0.0) s.push_back({"momentum_buffer"});
      if (c.rmsprop.centered) s.push_back({"grad_avg"});
      return s;
    }
    case OptimizerKind::adagrad: return {{"sum", c.adagrad.initial_accumulator_value}};
    case OptimizerKind::adadelta: return {{"square_avg"}, {"acc_delta"}};
  }
  return {};
}

// The options' ranges, named as torch.optim names them, with the config's weight decay
// and each group's (which replaces it).
void check_config(const OptimizerConfig& c, const std::vector<ParamGroup>& groups) {
  const std::string who = "optimizer " + std::string(optimizer_kind_name(c.kind));
  std::vector<double> decays{c.weight_decay};
  for (const ParamGroup& g : groups) decays.push_back(g.weight_decay);
  for (double wd : decays) {
    if (c.kind == OptimizerKind::rmsprop) ops::check_rmsprop_options(who, rmsprop_options(c, c.lr, wd));
    if (c.kind == OptimizerKind::adagrad) ops::check_adagrad_options(who, adagrad_options(c, c.lr, wd));
    if (c.kind == OptimizerKind::adadelta) ops::check_adadelta_options(who, adadelta_options(c, c.lr, wd));
  }
  const double init = c.adagrad.initial_accumulator_value;
  STRATA_CHECK(c.kind != OptimizerKind::adagrad || (std::isfinite(init) && init >= 0.0), who,
               ": initial_accumulator_value must be a finite number >= 0, got ", init);
}

}  // namespace

Optimizer::Optimizer(const OptimizerConfig& c, std::vector<ParamGroup> groups, std::shared_ptr<StepKernels> kernels)
    : c_(c),
      specs_(specs_of(c)),
      groups_(std::move(groups)),
      kernels_(std::move(kernels)),
      lr_(c.lr),
      state_epoch_(new_state_epoch()) {
  STRATA_CHECK(kernels_ != nullptr, "optimizer: no step kernels");
  check_config(c, groups_);
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
  s.state.bufs.clear();
  for (const StateSpec& spec : specs_) {
    Tensor t = Tensor::empty_like(p, p.sizes());  // the parameter's layout: its kernels read both alike
    kernels_->fill(t, spec.init);
    s.state.bufs.push_back(t);
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
  std::vector<Tensor> params, grads, hypers;
  std::vector<std::vector<Tensor>> state(specs_.size());  // the kernels' state lists, in specs_ order
  std::vector<int64_t> steps;
  for (size_t i = begin; i < end; ++i) {
    Slot& s = slots_[i];
    const Tensor g = s.param.grad();
    if (!g.defined()) continue;
    STRATA_CHECK(g.sizes() == s.param.sizes() && g.dtype() == s.param.dtype(), "optimizer: gradient ", g.str(),
                 " of '", s.name, "' does not match the parameter ", s.param.str());
    if (s.state.step == 0 && s.state.bufs.empty()) {
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
    for (size_t k = 0; k < s.state.bufs.size(); ++k) state[k].push_back(s.state.bufs[k]);
    steps.push_back(s.state.step);
  }
  if (params.empty()) return;
  const auto list = [&](size_t k) {
    return k < state.size() ? std::span<const Tensor>(state[k]) : std::span<const Tensor>();
  };
  switch (c_.kind) {
    case OptimizerKind::sgd: {
      ops::SgdOptions o;
      o.lr = lr_;
      o.momentum = c_.momentum;
      o.weight_decay = weight_decay;
      o.nesterov = c_.nesterov;
      kernels_->sgd(params, grads, list(0), o, hypers, amp_);
      break;
    }
    case OptimizerKind::adam:
    case OptimizerKind::adamw: {
      ops::AdamOptions o;
      o.lr = lr_;
      o.beta1 = c_.beta1;
      o.beta2 = c_.beta2;
      o.eps = c_.eps;
      o.weight_decay = weight_decay;
      o.decoupled_weight_decay = c_.kind == OptimizerKind::adamw;
      kernels_->adam(params, grads, list(0), list(1), steps, o, hypers, amp_);
      break;
    }
    case OptimizerKind::rmsprop: {
      // square_avg, then momentum_buffer and grad_avg where the options keep them (state_specs).
      const bool mom = c_.rmsprop.momentum != 0.0;
      kernels_->rmsprop(params, grads, list(0), mom ? list(1) : std::span<const Tensor>(),
                        c_.rmsprop.centered ? list(mom ? 2 : 1) : std::span<const Tensor>(),
                        rmsprop_options(c_, lr_, weight_decay), hypers, amp_);
      break;
    }
    case OptimizerKind::adagrad:
      kernels_->adagrad(params, grads, list(0), steps, adagrad_options(c_, lr_, weight_decay), hypers, amp_);
      break;
    case OptimizerKind::adadelta:
      kernels_->adadelta(params, grads, list(0), list(1), adadelta_options(c_, lr_, weight_decay), hypers, amp_);
      break;
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
    for (size_t k = 0; k < s.state.bufs.size(); ++k) out.emplace_back(s.name + "." + specs_[k].name, s.state.bufs[k]);
    if (c_.kind != OptimizerKind::sgd)  // torch.optim.SGD keeps no count
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
  const bool counts = c_.kind != OptimizerKind::sgd;
  std::string needs;  // "exp_avg, exp_avg_sq and step"
  for (const StateSpec& spec : specs_) needs += (needs.empty() ? "" : ", ") + spec.name;
  if (counts) needs += " and step";
  struct Found {
    Slot* slot;
    std::vector<const Tensor*> bufs;
    const Tensor* step = nullptr;
    bool any = false;
  };
  std::vector<Found> found;
  for (Slot& s : slots_) {
    Found f{&s, {}};
    size_t have = 0;
    for (const StateSpec& spec : specs_) {
      f.bufs.push_back(take(s, "." + spec.name, s.param.sizes()));
      have += f.bufs.back() != nullptr;
    }
    if (counts) {
      f.step = take(s, ".step", Shape{});
      have += f.step != nullptr;
    }
    f.any = have > 0;
    if (f.any && have != specs_.size() + (counts ? 1 : 0))
      problems += "\n  incomplete " + std::string(optimizer_kind_name(c_.kind)) + " state for '" + s.name +
                  "' (needs " + needs + ")";
    // A state is saved only after a step; PyTorch stores the count as a float. A
    // value outside [1, 2^53] is corruption and would overflow the next ++step.
    if (f.step && f.step->numel() == 1) {
      const double v = f.step->to_vector<double>()[0];
      if (!(v >= 1 && v <= 9007199254740992.0 && v == static_cast<double>(static_cast<int64_t>(v))))
        problems += "\n  '" + s.name + ".step' = " + std::to_string(v) + " is not a step count >= 1";
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
    if (f.any) {
      // Into the state tensors already there when there are (a captured step refers to them).
      if (f.slot->state.bufs.size() != specs_.size()) allocate(*f.slot);
      st = f.slot->state;
      for (size_t k = 0; k < specs_.size(); ++k) copy_into(*f.bufs[k], st.bufs[k]);
      st.step = (f.step ? f.step->to_vector<int64_t>().at(0) : 1) + skipped;
    }
    if (st.bufs.empty() && !f.slot->state.bufs.empty()) state_epoch_ = new_state_epoch();  // state dropped
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
