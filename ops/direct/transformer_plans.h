#pragma once
// Direct-mode plans of the transformer's fused ops, layer norm and scaled dot-product attention
// (op_table.def's layer_norm_* and attention_*), made as ops/direct/plans.h makes its plans:
// validated with the front end's own functions (ops/validate_transformer.h) through a
// StaticDispatch over the plan's backend, so both refuse the same calls with the same messages;
// outputs, saved statistics and gradients allocated as the front end (ops/transformer_ops.cpp)
// allocates them, in the step's memory; one kernel call each way when run.
#include <cmath>

#include "strata/ops/direct/tensor_plans.h"
#include "strata/ops/validate_transformer.h"

namespace strata::ops::direct {

// Layer norm over x's last dim C, run on x seen as rows [N, C] (a view, or a planned copy where
// the front end copies). The shape of plans.h's Conv2dPlan (plan(impl, x, w, b, eps),
// plan_backward(dy, need_dx), y, dx, dw, db), so WeightedStep (steps/weighted_step.h) runs it;
// weight and bias are optional. The backward's one kernel writes dx (when asked), dw and db (for
// the parameters given).
template <BackendImpl Impl>
class LayerNormPlan {
 public:
  Tensor y, mean, rstd, dx, dw, db;
  void plan(Impl& impl, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
    impl_ = &impl;
    const int64_t c = validate_layer_norm(StaticDispatch<Impl>(impl), x, weight, bias, eps);
    x_ = x;
    w_ = weight;
    b_ = bias;
    rows_ = {x.numel() / c, c};
    const Shape stats(x.sizes().begin(), x.sizes().end() - 1);
    y = planned_empty(x.sizes(), x.dtype(), x.device());
    mean = planned_empty(stats, stats_dtype(x.dtype()), x.device());
    rstd = planned_empty(stats, stats_dtype(x.dtype()), x.device());
    const Shape n{rows_[0]};
    x_rows_ = planned_view_or_copy(impl, x, rows_, x_copy_);
    fwd_ = {x_rows_, weight, bias, y.view(rows_), mean.view(n), rstd.view(n), eps};
  }
  void plan_backward(const Tensor& dy, bool need_dx) {
    validate_layer_norm_bwd(StaticDispatch<Impl>(*impl_), x_, w_, mean, rstd, dy);
    const Shape c{rows_[1]}, n{rows_[0]};
    dx = need_dx ? planned_empty(x_.sizes(), x_.dtype(), x_.device()) : Tensor();
    dw = w_.defined() ? planned_grad(w_, c, x_.dtype()) : Tensor();
    db = b_.defined() ? planned_grad(b_, c, x_.dtype()) : Tensor();
    any_grad_ = dx.defined() || dw.defined() || db.defined();
    bwd_ = {x_rows_, w_, mean.view(n), rstd.view(n), planned_view_or_copy(*impl_, dy, rows_, dy_copy_),
            dx.defined() ? dx.view(rows_) : Tensor(), dw, db};
  }
  void forward() {
    x_copy_.run();
    run_kernel<OpId::layer_norm_fwd>(*impl_, fwd_);
  }
  void backward() {
    if (!any_grad_) return;  // the front end calls no kernel when no gradient is asked for
    dy_copy_.run();
    run_kernel<OpId::layer_norm_bwd>(*impl_, bwd_);
  }

 private:
  Impl* impl_ = nullptr;
  Tensor x_, w_, b_, x_rows_;
  Shape rows_;
  bool any_grad_ = false;
  CastPlan<Impl> x_copy_, dy_copy_;
  LayerNormFwdArgs fwd_;
  LayerNormBwdArgs bwd_;
};

// Scaled dot-product attention of q [B, H, Tq, D] over k, v [B, H, Tk, D] (any strides), kv_len
// optional (ops/transformer_ops.h). y is [B, H, Tq, D] over [B, Tq, H, D] memory as the front
// end's, so the heads' outputs side by side ([B, Tq, H * D]) are a view of it. The kernels take
// any strides for the gradients too: plan_backward writes them where the caller says (the
// slices of one QKV projection's gradient) or into planned buffers of q's, k's and v's sizes.
template <BackendImpl Impl>
class AttentionPlan {
 public:
  Tensor y, lse, dq, dk, dv;
  void plan(Impl& impl, const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
            const Tensor& kv_len = Tensor()) {
    impl_ = &impl;
    validate_attention(StaticDispatch<Impl>(impl), q, k, v, causal, scale, kv_len);
    q_ = q;
    k_ = k;
    v_ = v;
    kv_len_ = kv_len;
    y = planned_empty(Shape{q.size(0), q.size(2), q.size(1), q.size(3)}, q.dtype(), q.device()).permute({0, 2, 1, 3});
    lse = planned_empty(Shape{q.size(0), q.size(1), q.size(2)}, stats_dtype(q.dtype()), q.device());
    fwd_ = {q, k, v, y, lse, kv_len, scale, causal};
  }
  void plan_backward(const Tensor& dy, const Tensor& dq_into = Tensor(), const Tensor& dk_into = Tensor(),
                     const Tensor& dv_into = Tensor()) {
    validate_attention_bwd(StaticDispatch<Impl>(*impl_), q_, k_, v_, y, lse, dy, fwd_.causal, fwd_.scale, kv_len_);
    dq = gradient_buffer("dq", q_, dq_into);
    dk = gradient_buffer("dk", k_, dk_into);
    dv = gradient_buffer("dv", v_, dv_into);
    delta_ = planned_empty(lse.sizes(), lse.dtype(), lse.device());
    bwd_ = {q_, k_, v_, y, lse, dy, delta_, dq, dk, dv, kv_len_, fwd_.scale, fwd_.causal};
  }
  void forward() { run_kernel<OpId::attention_fwd>(*impl_, fwd_); }
  void backward() { run_kernel<OpId::attention_bwd>(*impl_, bwd_); }

 private:
  static Tensor gradient_buffer(const char* name, const Tensor& like, const Tensor& into) {
    if (!into.defined()) return planned_empty(like.sizes(), like.dtype(), like.device());
    STRATA_CHECK(into.sizes() == like.sizes() && into.dtype() == like.dtype() && into.device() == like.device(),
                 "scaled_dot_product_attention_bwd: the buffer for ", name, " ", into.str(), " is not like ",
                 like.str(), " (internal error)");
    return into;
  }

  Impl* impl_ = nullptr;
  Tensor q_, k_, v_, kv_len_, delta_;
  AttentionFwdArgs fwd_;
  AttentionBwdArgs bwd_;
};

}  // namespace strata::ops::direct
