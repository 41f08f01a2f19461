// Backward formulas of conv2d, batch_norm, linear and the two-layer perceptron.
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/node_base.h"
#include "strata/ops/validate.h"

namespace strata::autograd {
using detail::NodeT;
using detail::record;

namespace {

template <class D>
class Conv2dNode final : public NodeT<D> {
 public:
  Conv2dNode(const D& d, Tensor x, Tensor w, bool has_bias, Conv2dParams p)
      : NodeT<D>(d), x_(std::move(x)), w_(std::move(w)), has_bias_(has_bias), p_(p) {}
  std::string_view name() const override { return "conv2d"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    const auto& e = this->next;
    const MemoryFormat fmt = x_.suggested_format();
    Tensor dx = e[0].valid() ? ops::conv2d_bwd_data(this->d_, dy, w_, x_.sizes(), p_, fmt) : Tensor();
    Tensor dw = e[1].valid() ? ops::conv2d_bwd_weight(this->d_, x_, dy, w_.sizes(), p_, w_.suggested_format()) : Tensor();
    Tensor db = has_bias_ && e[2].valid() ? ops::conv2d_bwd_bias(this->d_, dy) : Tensor();
    return {dx, dw, db};
  }
  void release() override { x_ = w_ = Tensor(); }

 private:
  Tensor x_, w_;
  bool has_bias_;
  Conv2dParams p_;
};

// The convolution with its inference epilogue: recorded so that a backward through it
// fails with a message rather than silently leaving its inputs without gradients.
template <class D>
class Conv2dFusedNode final : public NodeT<D> {
 public:
  explicit Conv2dFusedNode(const D& d) : NodeT<D>(d) {}
  std::string_view name() const override { return "conv2d_fused"; }
  std::vector<Tensor> apply(const Tensor&) override {
    ops::check_conv2d_has_backward(true);
    return {};
  }
  void release() override {}
};

// Inputs x, gamma, beta and, fused, the residual z; a fused ReLU's mask masks dy.
template <class D>
class BatchNormNode final : public NodeT<D> {
 public:
  BatchNormNode(const D& d, Tensor x, Tensor gamma, Tensor mean, Tensor invstd, bool training, Tensor mask,
                ops::ChannelSumReducer* sync)
      : NodeT<D>(d), x_(std::move(x)), gamma_(std::move(gamma)), mean_(std::move(mean)), invstd_(std::move(invstd)),
        mask_(std::move(mask)), training_(training), sync_(sync) {}
  std::string_view name() const override { return mask_.defined() ? "batch_norm_relu" : "batch_norm"; }
  std::vector<Tensor> apply(const Tensor& dy_in) override {
    const auto& e = this->next;
    const bool want_dz = e.size() > 3 && e[3].valid();
    // The mask is over x's memory order: a gradient in another layout is copied into it.
    const Tensor dy = mask_.defined() && !ops::same_memory_order(x_, dy_in)
                          ? ops::to(this->d_, dy_in, dy_in.dtype(), dy_in.device(), x_.suggested_format())
                          : dy_in;
    ops::BatchNormGrads g =
        ops::batch_norm_bwd(this->d_, x_, dy, gamma_, mean_, invstd_, training_, mask_, want_dz, sync_);
    if (e.size() > 3) return {g.dx, g.dgamma, g.dbeta, g.dz};
    return {g.dx, g.dgamma, g.dbeta};
  }
  void release() override { x_ = gamma_ = mean_ = invstd_ = mask_ = Tensor(); }

 private:
  Tensor x_, gamma_, mean_, invstd_, mask_;
  bool training_;
  ops::ChannelSumReducer* sync_;  // the forward's group: its backward reduces over it too
};

// Inputs x, w, b and, with a residual added (linear_add), z, whose gradient is dy.
template <class D>
class LinearNode final : public NodeT<D> {
 public:
  LinearNode(const D& d, Tensor x, Tensor w, bool has_bias)
      : NodeT<D>(d), x_(std::move(x)), w_(std::move(w)), has_bias_(has_bias) {}
  std::string_view name() const override { return "linear"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    const auto& e = this->next;
    Tensor dx = e[0].valid() ? ops::linear_bwd_data(this->d_, dy, w_) : Tensor();
    ops::LinearWeightGrads g;
    if (e[1].valid() || (has_bias_ && e[2].valid())) g = ops::linear_bwd_weight(this->d_, x_, dy, has_bias_);
    if (e.size() > 3) return {dx, g.dw, g.db, e[3].valid() ? dy : Tensor()};
    return {dx, g.dw, g.db};
  }
  void release() override { x_ = w_ = Tensor(); }

 private:
  Tensor x_, w_;
  bool has_bias_;
};

// Inputs x, w1, b1, w2, b2 and the residual z (optional; its gradient is dy); saved the
// pre-activation and the hidden layer h = act(pre). The ops in the order direct mode's MlpPlan runs
// them (ops/direct/plans.h).
template <class D>
class MlpNode final : public NodeT<D> {
 public:
  MlpNode(const D& d, Tensor x, Tensor w1, bool has_b1, Tensor w2, bool has_b2, ops::UnaryFn act, Tensor pre, Tensor h)
      : NodeT<D>(d), x_(std::move(x)), w1_(std::move(w1)), w2_(std::move(w2)), pre_(std::move(pre)), h_(std::move(h)),
        has_b1_(has_b1), has_b2_(has_b2), act_(act) {}
  std::string_view name() const override { return "mlp"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    const auto& e = this->next;
    ops::LinearWeightGrads g1, g2;
    Tensor dx;
    if (e[3].valid() || (has_b2_ && e[4].valid())) g2 = ops::linear_bwd_weight(this->d_, h_, dy, has_b2_);
    if (e[0].valid() || e[1].valid() || (has_b1_ && e[2].valid())) {
      const Tensor dpre = ops::linear_act_bwd_data(this->d_, dy, w2_, act_, pre_, h_);
      if (e[0].valid()) dx = ops::linear_bwd_data(this->d_, dpre, w1_);
      if (e[1].valid() || (has_b1_ && e[2].valid())) g1 = ops::linear_bwd_weight(this->d_, x_, dpre, has_b1_);
    }
    return {dx, g1.dw, g1.db, g2.dw, g2.db, e[5].valid() ? dy : Tensor()};
  }
  void release() override { x_ = w1_ = w2_ = pre_ = h_ = Tensor(); }

 private:
  Tensor x_, w1_, w2_, pre_, h_;
  bool has_b1_, has_b2_;
  ops::UnaryFn act_;
};

}  // namespace

template <class D>
Tensor conv2d(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  Tensor y = ops::conv2d(d, x, w, b, p);
  record<Conv2dNode<D>>(d, {&x, &w, &b}, y, x, w, b.defined(), p);
  return y;
}

template <class D>
Tensor conv2d_fused(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                    const Tensor& z, bool relu, const uint64_t* w_version, bool into_z) {
  STRATA_CHECK(!into_z || !GradMode::enabled(), "conv2d_fused: the output written over the residual runs with "
               "gradients off");
  Tensor y = ops::conv2d_fused(d, x, w, b, p, z, relu, w_version, into_z);
  record<Conv2dFusedNode<D>>(d, {&x, &w, &b, &z}, y);
  return y;
}

template <class D>
Tensor batch_norm(const D& d, const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps, const Tensor& z,
                  bool relu, ops::ChannelSumReducer* sync) {
  STRATA_CHECK(training || !(z.defined() || relu) || !GradMode::enabled(),
               "batch_norm: a fused evaluation has no backward; run it with gradients off, or in training");
  ops::BatchNormOut o =
      ops::batch_norm(d, x, gamma, beta, running_mean, running_var, training, momentum, eps, z, relu, sync);
  if (z.defined())
    record<BatchNormNode<D>>(d, {&x, &gamma, &beta, &z}, o.y, x, gamma, o.save_mean, o.save_invstd, training,
                             o.relu_mask, sync);
  else
    record<BatchNormNode<D>>(d, {&x, &gamma, &beta}, o.y, x, gamma, o.save_mean, o.save_invstd, training,
                             o.relu_mask, sync);
  return o.y;
}

template <class D>
Tensor linear(const D& d, const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor y = ops::linear(d, x, w, b);
  record<LinearNode<D>>(d, {&x, &w, &b}, y, x, w, b.defined());
  return y;
}

template <class D>
Tensor linear_add(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& z) {
  Tensor y = ops::linear_add(d, x, w, b, z);
  record<LinearNode<D>>(d, {&x, &w, &b, &z}, y, x, w, b.defined());
  return y;
}

template <class D>
Tensor mlp(const D& d, const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
           ops::UnaryFn act, const Tensor& z) {
  const ops::LinearActOut hidden = ops::linear_act(d, x, w1, b1, act);
  Tensor y = z.defined() ? ops::linear_add(d, hidden.y, w2, b2, z) : ops::linear(d, hidden.y, w2, b2);
  record<MlpNode<D>>(d, {&x, &w1, &b1, &w2, &b2, &z}, y, x, w1, b1.defined(), w2, b2.defined(), act, hidden.pre,
                     hidden.y);
  return y;
}

#define STRATA_AUTOGRAD_INSTANTIATE(D)                                                                   \
  template ops::Conv2dSignature<D> conv2d<D>;                                                           \
  template Tensor conv2d_fused<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&, \
                                  const Tensor&, bool, const uint64_t*, bool);                           \
  template Tensor batch_norm<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,    \
                                const Tensor&, bool, double, double, const Tensor&, bool,                \
                                ops::ChannelSumReducer*);                                                \
  template Tensor linear<D>(const D&, const Tensor&, const Tensor&, const Tensor&);                     \
  template Tensor linear_add<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&);   \
  template Tensor mlp<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, \
                         ops::UnaryFn, const Tensor&);
STRATA_AUTOGRAD_INSTANTIATE_ALL()

}  // namespace strata::autograd
