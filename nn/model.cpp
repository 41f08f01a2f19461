#include "strata/nn/model.h"

#include <cmath>

#include "strata/autograd/functions.h"
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/node.h"
#include "strata/nn/policy.h"
#include "strata/ops/direct/kernel_call.h"

namespace strata::nn {

std::unique_ptr<Optimizer> Model::make_optimizer(const OptimizerConfig& c) {
  return std::make_unique<Optimizer>(c, param_groups(module(), c.weight_decay, c.no_decay_bn_bias),
                                     make_step_kernels(mode(), backend_name()));
}

namespace {

ops::DispatchMode mode_of(std::string_view kmode) {
  return kmode == "virtual" ? ops::DispatchMode::virtual_call
                            : (kmode == "static" ? ops::DispatchMode::static_call : ops::DispatchMode::direct);
}

template <class P>
class ModelImpl final : public Model {
 public:
  ModelImpl(const P& p, std::unique_ptr<Module> net, DType dt, const ModelOptions& o, const std::string& what,
            const std::string& init)
      : p_(p), net_(std::move(net)), loss_(p, o.loss), dtype_(dt), compute_(o.compute_dtype.value_or(dt)),
        fmt_(o.memory_format) {
    STRATA_CHECK(is_floating(compute_), "Model: compute dtype must be floating, got ", dtype_name(compute_));
    scale_ = o.initial_loss_scale.value_or(compute_ == DType::f16 ? 65536.0 : 0.0);
    STRATA_CHECK(scale_ >= 0 && std::isfinite(scale_), "Model: initial_loss_scale must be finite and >= 0, got ",
                 scale_);
    if constexpr (is_direct_v<P>)
      STRATA_CHECK(scale_ == 0, "Model: loss scaling (on by default for f16 compute) is not supported in direct mode "
                                "yet; use the virtual or static mode, or bf16");
    describe_ = what + " | " + group_thousands(net_->num_parameters()) + " parameters | init " + init +
                " | dispatch " + std::string(P::kMode) + " on " + std::string(p_.backend_name()) + " | " +
                std::string(dtype_name(dt)) +
                (compute_ != dt ? " parameters, " + std::string(dtype_name(compute_)) + " compute" : "") +
                (fmt_ == MemoryFormat::channels_last ? " channels_last" : "") +
                (scale_ > 0 ? " | dynamic loss scaling from " + std::to_string(static_cast<int64_t>(scale_)) : "") +
                " | loss " + std::string(loss_kind_name(o.loss));
  }

  Module& module() override { return *net_; }
  const Module& module() const override { return *net_; }
  ops::DispatchMode mode() const override { return mode_of(P::kMode); }
  std::string_view backend_name() const override { return p_.backend_name(); }
  Device device() const override { return p_.device(); }
  DType dtype() const override { return dtype_; }
  LossKind loss_kind() const override { return loss_.kind(); }

  Tensor forward(const Tensor& x) override { return net_->forward(to_input(x)); }

  StepResult forward_loss(const Tensor& x, const Tensor& targets) override {
    logits_ = to_params_dtype(forward(x), logits_full_);  // the loss in full precision
    loss_value_ = loss_.forward(logits_, to_targets(targets));
    return {loss_value_, logits_};
  }

  void backward() override {
    STRATA_CHECK(loss_value_.defined(), "Model::backward: call forward_loss first");
    if constexpr (is_direct_v<P>) {
      // Mixed precision: dL/dlogits back into the compute dtype (the cast's backward).
      const Tensor dlogits = loss_.backward();
      net_->backward(dlogits.dtype() == compute_ ? dlogits : stage(dlogits, compute_, fmt_, dlogits_));
    } else {
      autograd::backward(loss_value_);
    }
  }

  StepResult train_step(const Tensor& x, const Tensor& targets, Optimizer& opt) override {
    opt.zero_grad();
    StepResult r = forward_loss(x, targets);
    if constexpr (!is_direct_v<P>) {
      if (scale_ > 0) {
        autograd::backward(autograd::scale(p_, loss_value_, scale_));
        run_gradient_hook();
        if (unscale_grads_all_finite()) {
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
    backward();
    run_gradient_hook();
    opt.step();
    return r;
  }

  double loss_scale() const override { return scale_; }
  int64_t skipped_steps() const override { return skipped_; }

  Tensor predict(const Tensor& x) override {
    autograd::NoGradGuard guard;
    return to_params_dtype(forward(x), predicted_);
  }

  Tensor input_buffer(const Shape& sizes) override {
    if constexpr (is_direct_v<P>) {
      if (!input_.defined() || !(input_.sizes() == sizes))
        input_ = Tensor::empty(sizes, compute_, p_.device(), sizes.size() == 4 ? fmt_ : MemoryFormat::contiguous);
      return input_;
    } else {
      return Tensor::empty(sizes, dtype_, p_.device(), sizes.size() == 4 ? fmt_ : MemoryFormat::contiguous);
    }
  }

 private:
  bool matches(const Tensor& x, DType dt, MemoryFormat fmt) const {
    const bool layout = fmt == MemoryFormat::channels_last ? x.is_channels_last() : x.is_contiguous();
    return x.dtype() == dt && x.device() == p_.device() && layout;
  }

  // Into `buf` (planned, direct mode) or converted through the front end.
  Tensor stage(const Tensor& x, DType dt, MemoryFormat fmt, Tensor& buf) {
    if (x.dim() != 4) fmt = MemoryFormat::contiguous;
    if constexpr (is_direct_v<P>) {
      if (buf.defined() && buf.data_ptr() == x.data_ptr() && buf.sizes() == x.sizes() && buf.dtype() == x.dtype())
        return buf;
      if (!buf.defined() || !(buf.sizes() == x.sizes()) || buf.dtype() != dt)
        buf = Tensor::empty(x.sizes(), dt, p_.device(), fmt);
      const ops::CopyArgs a{x, buf};
      ops::direct::run_kernel(*p_.impl, ops::OpId::copy, [&] { p_.impl->copy(a); });
      return buf;
    } else {
      if (matches(x, dt, fmt)) return x;
      return ops::to(p_, x, dt, p_.device(), fmt);
    }
  }

  // Gradients times 1/scale (exact for the power-of-two scales used); whether all are
  // finite, from one device-to-host read of the sum of their sums.
  bool unscale_grads_all_finite() {
    autograd::NoGradGuard guard;
    Tensor total;
    for (Tensor param : net_->parameters()) {
      const Tensor g = param.grad();
      if (!g.defined()) continue;
      const Tensor u = ops::scale(p_, g, 1.0 / scale_);
      param.set_grad(u);
      const Tensor s = ops::sum(p_, u);
      total = total.defined() ? ops::add(p_, total, s) : s;
    }
    return !total.defined() || std::isfinite(total.item());
  }

  // Mixed precision: the network's output (compute dtype) in the parameters' dtype;
  // direct mode converts into the planned `buf`.
  Tensor to_params_dtype(const Tensor& y, Tensor& buf) {
    if (y.dtype() == dtype_) return y;
    if constexpr (is_direct_v<P>)
      return stage(y, dtype_, fmt_, buf);
    else
      return autograd::cast(p_, y, dtype_);
  }

  Tensor to_input(const Tensor& x) {
    STRATA_CHECK(x.defined(), "Model: input is undefined");
    return stage(x, compute_, fmt_, input_);
  }
  Tensor to_targets(const Tensor& t) {
    STRATA_CHECK(t.defined(), "Model: targets are undefined");
    const DType dt = loss_.kind() == LossKind::cross_entropy ? DType::i64 : dtype_;
    return stage(t, dt, MemoryFormat::contiguous, targets_);
  }

  P p_;
  std::unique_ptr<Module> net_;
  Loss<P> loss_;
  static constexpr int64_t kGrowthInterval = 2000;
  DType dtype_, compute_;
  double scale_ = 0;
  int64_t good_steps_ = 0, skipped_ = 0;
  MemoryFormat fmt_;
  Tensor input_, targets_, logits_, loss_value_;
  Tensor logits_full_, dlogits_, predicted_;  // direct mode, mixed precision: planned conversions
};

}  // namespace

std::optional<DType> parse_precision(std::string_view name) {
  if (name == "fp32") return std::nullopt;
  if (name == "bf16") return DType::bf16;
  if (name == "fp16") return DType::f16;
  STRATA_FAIL("unknown precision '", name, "' (known: fp32, bf16, fp16)");
}

std::unique_ptr<Model> make_resnet(const ResNetConfig& c, ops::DispatchMode mode, std::string_view backend,
                                   const ModelOptions& o) {
  STRATA_CHECK(!o.init, "make_resnet: the init policy comes from ResNetConfig::init, not ModelOptions::init");
  return with_policy(mode, backend, [&](const auto& p) -> std::unique_ptr<Model> {
    using P = std::decay_t<decltype(p)>;
    return std::make_unique<ModelImpl<P>>(p, make_resnet_module(p, c), c.dtype, o, describe(c), describe(c.init));
  });
}

std::unique_ptr<Model> make_lenet(const LeNetConfig& c, ops::DispatchMode mode, std::string_view backend,
                                  const ModelOptions& o) {
  STRATA_CHECK(!o.init, "make_lenet: the init policy comes from LeNetConfig::init, not ModelOptions::init");
  return with_policy(mode, backend, [&](const auto& p) -> std::unique_ptr<Model> {
    using P = std::decay_t<decltype(p)>;
    return std::make_unique<ModelImpl<P>>(p, std::make_unique<LeNet<P>>(p, c), c.dtype, o, describe(c),
                                          describe(c.init));
  });
}

template <class P>
std::unique_ptr<Model> detail::wrap_module(const P& p, std::unique_ptr<Module> net, DType dtype, const ModelOptions& o,
                                           const std::string& what, const std::string& init) {
  return std::make_unique<ModelImpl<P>>(p, std::move(net), dtype, o, what, init);
}

#define STRATA_NN_INSTANTIATE(P)                                                                                    \
  template std::unique_ptr<Model> detail::wrap_module<P>(const P&, std::unique_ptr<Module>, DType, const ModelOptions&, \
                                                         const std::string&, const std::string&);
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
