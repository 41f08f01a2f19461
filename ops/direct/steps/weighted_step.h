#pragma once
// Direct mode's step of a layer y = op(x, weight, bias) (Conv2d, Linear, LayerNorm), over one
// plan of ops/direct/ and the parameters' mixed-precision casts (ops/direct/steps/plan_step.h
// says what a step is).
#include <array>
#include <optional>

#include "strata/ops/direct/cast_plans.h"
#include "strata/ops/direct/plans.h"
#include "strata/ops/direct/steps/gradients.h"

namespace strata::ops::direct {

// Plan is of the shape of ops/direct/plans.h's Conv2dPlan: plan(impl, x, w, b, extra...),
// plan_backward(dy, need_dx), forward(), backward() and the tensors y, dx, dw, db. Mixed
// precision: the plan computes in its input's dtype with planned copies of the master weights
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
  ParamCast<Impl> w_, b_;  // mixed precision: master weight and bias
};

// A product with a layer-norm prologue is inference's (ops::linear_norm): no backward through it.
[[noreturn]] inline void no_normed_backward(const char* layer) {
  STRATA_FAIL(layer, ": no backward through a product whose layer norm ran in its prologue (a decoding step's fused "
              "form is for inference)");
}
inline void no_backward_when_normed(bool normed, const char* layer) {
  if (normed) no_normed_backward(layer);
}

// Direct mode's step of the two-layer perceptron (plans.h's MlpPlan; GPT's MLP): WeightedStep's
// mixed-precision casts for each of its four parameters.
template <class Impl>
class MlpStep {
 public:
  // norm_eps (inference): the layer norm (norm_w, norm_b) of x's rows in the first product's prologue.
  void plan(Impl& impl, const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
            UnaryFn act, const Tensor& z = Tensor(), const Tensor& norm_w = Tensor(), const Tensor& norm_b = Tensor(),
            std::optional<double> norm_eps = std::nullopt) {
    impl_ = &impl;
    params_ = {w1, b1, w2, b2};
    normed_ = norm_eps.has_value();
    const NormPrologue norm{norm_casts_[0].plan(impl, norm_w, x), norm_casts_[1].plan(impl, norm_b, x),
                            norm_eps.value_or(0.0)};
    op_.plan(impl, x, casts_[0].plan(impl, w1, x), casts_[1].plan(impl, b1, x), casts_[2].plan(impl, w2, x),
             casts_[3].plan(impl, b2, x), act, z, normed_ ? &norm : nullptr);
  }
  template <class... Args>
  const Tensor& run(const Args&...) {
    for (ParamCast<Impl>& c : casts_) c.refresh();
    for (ParamCast<Impl>& c : norm_casts_) c.refresh();
    op_.forward();
    return op_.proj.y;
  }
  void plan_backward(const Tensor& dy, bool need_dx) {
    no_backward_when_normed(normed_, "GptMlp");
    op_.plan_backward(dy, need_dx);
    const std::array<const Tensor*, 4> g = grads();
    for (size_t i = 0; i < casts_.size(); ++i) casts_[i].plan_grad(*impl_, *g[i]);
  }
  const Tensor& run_backward() {
    const std::array<const Tensor*, 4> g = grads();
    backward_into_grads(*impl_,
                        {{params_[0], casts_[0].grad(*g[0])},
                         {params_[1], casts_[1].grad(*g[1])},
                         {params_[2], casts_[2].grad(*g[2])},
                         {params_[3], casts_[3].grad(*g[3])}},
                        [&] {
                          op_.backward();
                          for (size_t i = 0; i < casts_.size(); ++i) casts_[i].convert_grad(*g[i]);
                        });
    return op_.fc.dx;
  }

 private:
  std::array<const Tensor*, 4> grads() const { return {&op_.fc.dw, &op_.fc.db, &op_.proj.dw, &op_.proj.db}; }

  Impl* impl_ = nullptr;
  std::array<Tensor, 4> params_;  // w1, b1, w2, b2: the masters, whose .grad() receives the gradients
  MlpPlan<Impl> op_;
  std::array<ParamCast<Impl>, 4> casts_;
  std::array<ParamCast<Impl>, 2> norm_casts_;  // the prologue's layer-norm weight and bias
  bool normed_ = false;
};

// Direct mode's step of a linear layer whose input rows are layer-normalised in the product's
// prologue (ops::linear_norm; a decoding step's layer norm and the projection after it): the
// mixed-precision casts of the linear's and the layer norm's parameters. Inference only.
template <class Impl>
class NormedLinearStep {
 public:
  void plan(Impl& impl, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& norm_w, const Tensor& norm_b,
            double eps) {
    const NormPrologue norm{casts_[2].plan(impl, norm_w, x), casts_[3].plan(impl, norm_b, x), eps};
    op_.plan(impl, x, casts_[0].plan(impl, w, x), casts_[1].plan(impl, b, x), Tensor(), std::nullopt, &norm);
  }
  template <class... Args>
  const Tensor& run(const Args&...) {
    for (ParamCast<Impl>& c : casts_) c.refresh();
    op_.forward();
    return op_.y;
  }
  void plan_backward(const Tensor&, bool) { no_normed_backward("Linear"); }
  const Tensor& run_backward() { no_normed_backward("Linear"); }

 private:
  LinearPlan<Impl> op_;
  std::array<ParamCast<Impl>, 4> casts_;  // w, b, then the layer norm's weight and bias
};

}  // namespace strata::ops::direct
