#pragma once
// Direct-mode plans of the transformer's fused ops, layer norm and scaled dot-product attention
// (op_table.def's layer_norm_* and attention_*), made as ops/direct/plans.h makes its plans:
// each op bound by its one definition (ops/bind/transformer.h), the front end's, so both refuse
// the same calls with the same messages and allocate the same outputs, saved statistics and
// gradients (here in the step's memory); one kernel call each way when run.
#include <array>
#include <cmath>

#include "strata/ops/bind/transformer.h"
#include "strata/ops/direct/tensor_plans.h"

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
    auto bound = bind::layer_norm_fwd(StaticDispatch<Impl>(impl), x, weight, bias, eps,
                                      [&](const Tensor& t, const Shape& rows) {
                                        return planned_view_or_copy(impl, t, rows, x_copy_);
                                      });
    y = bound.out.result.y;
    mean = bound.out.result.mean;
    rstd = bound.out.result.rstd;
    x_rows_ = bound.out.reads[0];
    fwd_ = bound.args;
    x_ = x;
    w_ = weight;
    b_ = bias;
  }
  void plan_backward(const Tensor& dy, bool need_dx) {
    // The binding sees x, mean, rstd and dy as rows, in that order: x as the forward saw it, the
    // statistics (this plan's own dense buffers) as views, dy as a view or a planned copy.
    int i = 0;
    const auto as_rows = [&](const Tensor& t, const Shape& rows) {
      switch (i++) {
        case 0: return x_rows_;
        case 3: return planned_view_or_copy(*impl_, t, rows, dy_copy_);
        default: return t.view(rows);
      }
    };
    auto bound = bind::layer_norm_bwd(StaticDispatch<Impl>(*impl_), x_, w_, mean, rstd, dy, need_dx, w_.defined(),
                                      b_.defined(), as_rows, w_, b_);
    dx = bound.out.result.dx;
    dw = bound.out.result.dweight;
    db = bound.out.result.dbias;
    any_grad_ = bind::layer_norm_bwd_needed(bound.out.result);
    if (any_grad_) bwd_ = bound.args;
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
  bool any_grad_ = false;
  CastPlan<Impl> x_copy_, dy_copy_;
  LayerNormFwdArgs fwd_;
  LayerNormBwdArgs bwd_;
};

// Scaled dot-product attention of q [B, H, Tq, D] over k, v [B, H, Tk, D] (any strides), kv_len
// and a decoding step's new rows (k_new, v_new at positions) optional (ops/transformer_ops.h). y is [B, H, Tq, D] over [B, Tq, H, D] memory as the front
// end's, so the heads' outputs side by side ([B, Tq, H * D]) are a view of it. The kernels take
// any strides for the gradients too: plan_backward writes them where the caller says (the
// slices of one QKV projection's gradient) or into planned buffers of q's, k's and v's sizes.
template <BackendImpl Impl>
class AttentionPlan {
 public:
  Tensor y, lse, dq, dk, dv;
  void plan(Impl& impl, const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
            const Tensor& kv_len = Tensor(), const Tensor& k_new = Tensor(), const Tensor& v_new = Tensor(),
            const Tensor& positions = Tensor()) {
    impl_ = &impl;
    auto bound =
        bind::attention_fwd(StaticDispatch<Impl>(impl), q, k, v, causal, scale, kv_len, k_new, v_new, positions);
    y = bound.out.y;
    lse = bound.out.lse;
    fwd_ = bound.args;
    q_ = q;
    k_ = k;
    v_ = v;
    kv_len_ = kv_len;
    appended_ = {k_new, v_new, positions};
  }
  void plan_backward(const Tensor& dy, const Tensor& dq_into = Tensor(), const Tensor& dk_into = Tensor(),
                     const Tensor& dv_into = Tensor()) {
    auto bound = bind::attention_bwd(StaticDispatch<Impl>(*impl_), q_, k_, v_, y, lse, dy, fwd_.causal, fwd_.scale,
                                     kv_len_, dq_into, dk_into, dv_into);
    dq = bound.out.result.dq;
    dk = bound.out.result.dk;
    dv = bound.out.result.dv;
    delta_ = bound.out.reads[0];
    bwd_ = bound.args;
  }
  void forward() { run_kernel<OpId::attention_fwd>(*impl_, fwd_); }
  void backward() { run_kernel<OpId::attention_bwd>(*impl_, bwd_); }

 private:
  Impl* impl_ = nullptr;
  Tensor q_, k_, v_, kv_len_, delta_;
  std::array<Tensor, 3> appended_;  // k_new, v_new, positions: what fwd_ points at
  AttentionFwdArgs fwd_;
  AttentionBwdArgs bwd_;
};

}  // namespace strata::ops::direct
