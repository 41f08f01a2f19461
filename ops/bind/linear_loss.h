#pragma once
// linear and the losses, each with its backward (bound.h): the front end
// (ops/linear_loss_ops.cpp) and direct mode's plans (ops/direct/plans.h) both bind here.
#include <utility>

#include "strata/ops/bind/bound.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/functional.h"
#include "strata/ops/validate.h"
#include "strata/ops/validate_transformer.h"

namespace strata::ops::bind {

template <class D>
Bound<OpId::linear_fwd, Tensor> linear_fwd(const D& d, const Tensor& x, const Tensor& w, const Tensor& b) {
  const Shape out = validate_linear(d, x, w, b);  // before x.dtype(): x may be undefined
  Tensor y = direct::planned_empty(out, x.dtype(), x.device());
  return {{x, w, b, y}, std::move(y)};
}

template <class D>
Bound<OpId::linear_bwd_data, Tensor> linear_bwd_data(const D& d, const Tensor& dy, const Tensor& w) {
  const Shape out = validate_linear_bwd_data(d, dy, w);
  Tensor dx = direct::planned_empty(out, dy.dtype(), dy.device());
  return {{dy, w, dx}, std::move(dx)};
}

// y = x w^T + b + z (op_args.h's LinearFwdArgs::z).
template <class D>
Bound<OpId::linear_fwd, Tensor> linear_add_fwd(const D& d, const Tensor& x, const Tensor& w, const Tensor& b,
                                               const Tensor& z) {
  const Shape out = validate_linear_add(d, x, w, b, z);
  Tensor y = direct::planned_empty(out, x.dtype(), x.device());
  return {{x, w, b, y, std::nullopt, {}, z}, std::move(y)};
}

// y = act(x w^T + b) and the pre-activation the backward reads (op_args.h's LinearFwdArgs).
template <class D>
Bound<OpId::linear_fwd, LinearActOut> linear_act_fwd(const D& d, const Tensor& x, const Tensor& w, const Tensor& b,
                                                     UnaryFn act) {
  const Shape out = validate_linear_act(d, x, w, b, act);
  LinearActOut o{direct::planned_empty(out, x.dtype(), x.device()), direct::planned_empty(out, x.dtype(), x.device())};
  return {{x, w, b, o.y, act, o.pre}, std::move(o)};
}

// y = act?(LN(x) w^T + b) (op_args.h's LinearFwdArgs::norm_eps: the layer norm of x's rows as the
// product's prologue; inference), pre with act; reads: the composed form's normalised rows and
// their mean and rstd, which the fused kernel leaves unwritten.
template <class D>
Bound<OpId::linear_fwd, WithReads<LinearActOut, 3>> linear_norm_fwd(const D& d, const Tensor& x, const Tensor& norm_w,
                                                                   const Tensor& norm_b, double eps, const Tensor& w,
                                                                   const Tensor& b, std::optional<UnaryFn> act) {
  const Shape out = act ? validate_linear_act(d, x, w, b, *act) : validate_linear(d, x, w, b);
  validate_layer_norm(d, x, norm_w, norm_b, eps);
  const auto empty = [&](const Shape& s, DType t) { return direct::planned_empty(s, t, x.device()); };
  LinearActOut o{empty(out, x.dtype()), act ? empty(out, x.dtype()) : Tensor()};
  Tensor normed = empty(x.sizes(), x.dtype()), mean = empty(Shape{x.size(0)}, stats_dtype(x.dtype())),
         rstd = empty(Shape{x.size(0)}, stats_dtype(x.dtype()));
  return {{x, w, b, o.y, act, o.pre, {}, norm_w, norm_b, normed, mean, rstd, eps},
          {std::move(o), {std::move(normed), std::move(mean), std::move(rstd)}}};
}

// The gradient at pre of a linear whose input was post = act(pre) (op_args.h's LinearBwdDataArgs).
template <class D>
Bound<OpId::linear_bwd_data, Tensor> linear_act_bwd_data(const D& d, const Tensor& dy, const Tensor& w, UnaryFn act,
                                                         const Tensor& pre, const Tensor& post) {
  const Shape out = validate_linear_act_bwd_data(d, dy, w, act, pre, post);
  Tensor dpre = direct::planned_empty(out, dy.dtype(), dy.device());
  return {{dy, w, dpre, act, pre, post}, std::move(dpre)};
}

// dw, and db when with_bias; in weight's and bias's gradient homes when given (a plan's).
template <class D>
Bound<OpId::linear_bwd_weight, LinearWeightGrads> linear_bwd_weight(const D& d, const Tensor& x, const Tensor& dy,
                                                                    bool with_bias, const Tensor& weight = Tensor(),
                                                                    const Tensor& bias = Tensor()) {
  const Shape dw = validate_linear_bwd_weight(d, x, dy);
  const Shape db{dy.size(1)};
  LinearWeightGrads g;
  g.dw = detail::gradient(weight, dw, x.dtype(), x.device());
  if (with_bias) g.db = detail::gradient(bias, db, x.dtype(), x.device());
  return {{x, dy, g.dw, g.db}, std::move(g)};
}

// The loss (a scalar that outlives a planned step: Tensor::empty) and the per-row log-sum-exp
// the backward reads, both in stats_dtype.
template <class D>
Bound<OpId::softmax_xent_fwd, SoftmaxXentOut> softmax_xent_fwd(const D& d, const Tensor& logits, const Tensor& labels,
                                                               int64_t ignore_index) {
  validate_softmax_xent(d, logits, labels);
  const DType st = stats_dtype(logits.dtype());
  SoftmaxXentOut o{Tensor::empty(Shape{}, st, logits.device()),
                   direct::planned_empty(Shape{logits.size(0)}, st, logits.device())};
  return {{logits, labels, o.loss, o.lse, ignore_index}, std::move(o)};
}

// into: a buffer for dlogits that a plan laid out itself (logits' sizes and dtype, any strides).
template <class D>
Bound<OpId::softmax_xent_bwd, Tensor> softmax_xent_bwd(const D& d, const Tensor& logits, const Tensor& lse,
                                                       const Tensor& labels, const Tensor& dloss, int64_t ignore_index,
                                                       const Tensor& into = Tensor()) {
  validate_softmax_xent_bwd(d, logits, lse, labels, dloss);
  Tensor dlogits =
      detail::given_or_new("softmax_xent_bwd", "dlogits", into, logits.sizes(), logits.dtype(), logits.device());
  return {{logits, lse, labels, dloss, dlogits, ignore_index}, std::move(dlogits)};
}

template <class D>
Bound<OpId::bce_logits_fwd, Tensor> bce_logits_fwd(const D& d, const Tensor& logits, const Tensor& targets) {
  validate_bce_logits(d, logits, targets);
  Tensor loss = Tensor::empty(Shape{}, logits.dtype(), logits.device());
  return {{logits, targets, loss}, std::move(loss)};
}

template <class D>
Bound<OpId::bce_logits_bwd, Tensor> bce_logits_bwd(const D& d, const Tensor& logits, const Tensor& targets,
                                                   const Tensor& dloss) {
  validate_bce_logits_bwd(d, logits, targets, dloss);
  Tensor dlogits = direct::planned_empty(logits.sizes(), logits.dtype(), logits.device());
  return {{logits, targets, dloss, dlogits}, std::move(dlogits)};
}

}  // namespace strata::ops::bind
