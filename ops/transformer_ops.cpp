// The front end of layer norm and attention (ops/transformer_ops.h): validate
// (ops/validate_transformer.h), allocate the outputs, call the backend once. Layer norm runs
// on x seen as rows [N, C] (a view when the strides allow, else a copy).
#include "strata/ops/transformer_ops.h"

#include "strata/ops/frontend_support.h"
#include "strata/ops/tensor_ops.h"
#include "strata/ops/validate_transformer.h"

namespace strata::ops {

namespace {
Shape without_last(const Shape& s) {
  Shape r;
  for (int i = 0; i + 1 < s.size(); ++i) r.push_back(s[i]);
  return r;
}
}  // namespace

template <class D>
LayerNormResult layer_norm(const D& d, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t c = validate_layer_norm(d, x, weight, bias, eps);
  const Shape rows{x.numel() / c, c};
  LayerNormResult r;
  r.y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  r.mean = Tensor::empty(without_last(x.sizes()), stats_dtype(x.dtype()), x.device());
  r.rstd = Tensor::empty(without_last(x.sizes()), stats_dtype(x.dtype()), x.device());
  const Shape n{rows[0]};
  d.layer_norm_fwd(LayerNormFwdArgs{view_or_copy(x, rows), weight, bias, r.y.view(rows), r.mean.view(n),
                                    r.rstd.view(n), eps});
  return r;
}

template <class D>
LayerNormGrads layer_norm_bwd(const D& d, const Tensor& x, const Tensor& weight, const Tensor& mean,
                              const Tensor& rstd, const Tensor& dy, bool need_dx, bool need_dweight, bool need_dbias) {
  validate_layer_norm_bwd(d, x, weight, mean, rstd, dy);
  const int64_t c = x.size(x.dim() - 1);
  const Shape rows{x.numel() / c, c}, n{rows[0]};
  LayerNormGrads g;
  if (need_dx) g.dx = Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (need_dweight && weight.defined()) g.dweight = Tensor::empty(Shape{c}, x.dtype(), x.device());
  if (need_dbias) g.dbias = Tensor::empty(Shape{c}, x.dtype(), x.device());
  if (!g.dx.defined() && !g.dweight.defined() && !g.dbias.defined()) return g;
  d.layer_norm_bwd(LayerNormBwdArgs{view_or_copy(x, rows), weight, view_or_copy(mean, n), view_or_copy(rstd, n),
                                    view_or_copy(dy, rows), g.dx.defined() ? g.dx.view(rows) : Tensor(), g.dweight,
                                    g.dbias});
  return g;
}

template <class D>
AttentionResult attention(const D& d, const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                          const Tensor& kv_len) {
  validate_attention(d, q, k, v, causal, scale, kv_len);
  AttentionResult r;
  // y in [B, Tq, H, D] memory, seen as [B, H, Tq, D]: the heads' outputs side by side, so the
  // [B, Tq, H * D] the output projection reads is a view of it.
  r.y = Tensor::empty(Shape{q.size(0), q.size(2), q.size(1), q.size(3)}, q.dtype(), q.device()).permute({0, 2, 1, 3});
  r.lse = Tensor::empty(Shape{q.size(0), q.size(1), q.size(2)}, stats_dtype(q.dtype()), q.device());
  d.attention_fwd(AttentionFwdArgs{q, k, v, r.y, r.lse, kv_len, scale, causal});
  return r;
}

template <class D>
AttentionGrads attention_bwd(const D& d, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y,
                             const Tensor& lse, const Tensor& dy, bool causal, double scale,
                             const Tensor& kv_len) {
  validate_attention_bwd(d, q, k, v, y, lse, dy, causal, scale, kv_len);
  AttentionGrads g;
  g.dq = Tensor::empty(q.sizes(), q.dtype(), q.device());
  g.dk = Tensor::empty(k.sizes(), k.dtype(), k.device());
  g.dv = Tensor::empty(v.sizes(), v.dtype(), v.device());
  const Tensor delta = Tensor::empty(lse.sizes(), lse.dtype(), lse.device());
  d.attention_bwd(AttentionBwdArgs{q, k, v, y, lse, dy, delta, g.dq, g.dk, g.dv, kv_len, scale, causal});
  return g;
}

#define STRATA_OPS_INSTANTIATE(D)                                                                                \
  template LayerNormResult layer_norm<D>(const D&, const Tensor&, const Tensor&, const Tensor&, double);        \
  template LayerNormGrads layer_norm_bwd<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, \
                                            const Tensor&, bool, bool, bool);                                   \
  template AttentionResult attention<D>(const D&, const Tensor&, const Tensor&, const Tensor&, bool, double,    \
                                        const Tensor&);                                                         \
  template AttentionGrads attention_bwd<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, \
                                           const Tensor&, const Tensor&, bool, double, const Tensor&);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
