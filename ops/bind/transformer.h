#pragma once
// Layer norm and scaled dot-product attention, each with its backward (bound.h): the front end
// (ops/transformer_ops.cpp) and direct mode's plans (ops/direct/transformer_plans.h) both bind
// here. Layer norm runs on its tensors seen as rows [N, C] through rows(t, sizes): a view when
// the strides allow, else a copy (the front end's now, a plan's planned copy at each run).
#include <utility>

#include "strata/ops/bind/bound.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/transformer_ops.h"
#include "strata/ops/validate_transformer.h"

namespace strata::ops::bind {

namespace detail {
inline Shape without_last(const Shape& s) {
  Shape r;
  for (int i = 0; i + 1 < s.size(); ++i) r.push_back(s[i]);
  return r;
}
inline Shape layer_norm_rows(const Tensor& x) {
  const int64_t c = x.size(x.dim() - 1);
  return {x.numel() / c, c};
}
}  // namespace detail

// reads[0]: x as rows.
template <class D, class Rows>
Bound<OpId::layer_norm_fwd, WithReads<LayerNormResult, 1>> layer_norm_fwd(const D& d, const Tensor& x,
                                                                          const Tensor& weight, const Tensor& bias,
                                                                          double eps, Rows&& rows) {
  validate_layer_norm(d, x, weight, bias, eps);
  const Shape rs = detail::layer_norm_rows(x), n{rs[0]}, stats = detail::without_last(x.sizes());
  LayerNormResult o{direct::planned_empty(x.sizes(), x.dtype(), x.device()),
                    direct::planned_empty(stats, stats_dtype(x.dtype()), x.device()),
                    direct::planned_empty(stats, stats_dtype(x.dtype()), x.device())};
  Tensor xr = rows(x, rs);
  return {{xr, weight, bias, o.y.view(rs), o.mean.view(n), o.rstd.view(n), eps}, {std::move(o), {std::move(xr)}}};
}

inline bool layer_norm_bwd_needed(const LayerNormGrads& g) {
  return g.dx.defined() || g.dweight.defined() || g.dbias.defined();
}

// The gradients the flags ask for (dweight only with a weight); weight_param, bias_param: the
// parameters whose gradients' homes take dweight and dbias (a plan's), when given. No gradient
// asked for: nothing to run (layer_norm_bwd_needed). reads: x, mean, rstd and dy as rows.
template <class D, class Rows>
Bound<OpId::layer_norm_bwd, WithReads<LayerNormGrads, 4>> layer_norm_bwd(
    const D& d, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd, const Tensor& dy,
    bool need_dx, bool need_dweight, bool need_dbias, Rows&& rows, const Tensor& weight_param = Tensor(),
    const Tensor& bias_param = Tensor()) {
  validate_layer_norm_bwd(d, x, weight, mean, rstd, dy);
  const Shape rs = detail::layer_norm_rows(x), c{rs[1]}, n{rs[0]};
  LayerNormGrads g;
  if (need_dx) g.dx = direct::planned_empty(x.sizes(), x.dtype(), x.device());
  if (need_dweight && weight.defined()) g.dweight = detail::gradient(weight_param, c, x.dtype(), x.device());
  if (need_dbias) g.dbias = detail::gradient(bias_param, c, x.dtype(), x.device());
  if (!layer_norm_bwd_needed(g)) return {{}, {std::move(g), {}}};
  Tensor xr = rows(x, rs), mr = rows(mean, n), rr = rows(rstd, n), dyr = rows(dy, rs);
  return {{xr, weight, mr, rr, dyr, g.dx.defined() ? g.dx.view(rs) : Tensor(), g.dweight, g.dbias},
          {std::move(g), {std::move(xr), std::move(mr), std::move(rr), std::move(dyr)}}};
}

// y [B, H, Tq, D] over [B, Tq, H, D] memory: the heads' outputs side by side, so the
// [B, Tq, H * D] the output projection reads is a view of it; lse [B, H, Tq] in stats_dtype.
// k_new, v_new, positions: a decoding step's rows written into the cache k, v first (op_args.h).
template <class D>
Bound<OpId::attention_fwd, AttentionResult> attention_fwd(const D& d, const Tensor& q, const Tensor& k, const Tensor& v,
                                                          bool causal, double scale, const Tensor& kv_len = Tensor(),
                                                          const Tensor& k_new = Tensor(), const Tensor& v_new = Tensor(),
                                                          const Tensor& positions = Tensor()) {
  validate_attention(d, q, k, v, causal, scale, kv_len);
  const bool append = k_new.defined() || v_new.defined() || positions.defined();
  if (append) validate_attention_append(d, q, k, k_new, v_new, positions);
  const Shape heads_last{q.size(0), q.size(2), q.size(1), q.size(3)};
  AttentionResult o{direct::planned_empty(heads_last, q.dtype(), q.device()).permute({0, 2, 1, 3}),
                    direct::planned_empty(Shape{q.size(0), q.size(1), q.size(2)}, stats_dtype(q.dtype()), q.device())};
  AttentionFwdArgs args{q, k, v, o.y, o.lse, kv_len, scale, causal};
  if (append) {
    args.k_new = k_new;
    args.v_new = v_new;
    args.positions = positions;
  }
  return {args, std::move(o)};
}

// dq, dk, dv into the buffers given (a plan's: the slices of one QKV projection's gradient) or new
// ones; reads[0]: the kernel's scratch (delta, lse's sizes).
template <class D>
Bound<OpId::attention_bwd, WithReads<AttentionGrads, 1>> attention_bwd(
    const D& d, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y, const Tensor& lse, const Tensor& dy,
    bool causal, double scale, const Tensor& kv_len, const Tensor& dq_into = Tensor(), const Tensor& dk_into = Tensor(),
    const Tensor& dv_into = Tensor()) {
  validate_attention_bwd(d, q, k, v, y, lse, dy, causal, scale, kv_len);
  const auto grad = [](const char* name, const Tensor& like, const Tensor& into) {
    return detail::given_or_new("attention_bwd", name, into, like.sizes(), like.dtype(), like.device());
  };
  AttentionGrads g{grad("dq", q, dq_into), grad("dk", k, dk_into), grad("dv", v, dv_into)};
  Tensor delta = direct::planned_empty(lse.sizes(), lse.dtype(), lse.device());
  return {{q, k, v, y, lse, dy, delta, g.dq, g.dk, g.dv, kv_len, scale, causal}, {std::move(g), {std::move(delta)}}};
}

}  // namespace strata::ops::bind
