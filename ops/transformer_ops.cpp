// The front end of layer norm and attention (ops/transformer_ops.h): the ops' bindings
// (ops/bind/transformer.h), run once. Layer norm's tensors are seen as rows by view_or_copy.
#include "strata/ops/transformer_ops.h"

#include "strata/ops/bind/transformer.h"
#include "strata/ops/frontend_support.h"
#include "strata/ops/tensor_ops.h"
#include "strata/ops/validate_transformer.h"

namespace strata::ops {

template <class D>
LayerNormResult layer_norm(const D& d, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  return run_once(d, bind::layer_norm_fwd(d, x, weight, bias, eps, view_or_copy)).result;
}

template <class D>
LayerNormGrads layer_norm_bwd(const D& d, const Tensor& x, const Tensor& weight, const Tensor& mean,
                              const Tensor& rstd, const Tensor& dy, bool need_dx, bool need_dweight, bool need_dbias) {
  auto b = bind::layer_norm_bwd(d, x, weight, mean, rstd, dy, need_dx, need_dweight, need_dbias, view_or_copy);
  if (!bind::layer_norm_bwd_needed(b.out.result)) return b.out.result;
  return run_once(d, std::move(b)).result;
}

template <class D>
AttentionResult attention(const D& d, const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                          const Tensor& kv_len, const Tensor& k_new, const Tensor& v_new, const Tensor& positions) {
  return run_once(d, bind::attention_fwd(d, q, k, v, causal, scale, kv_len, k_new, v_new, positions));
}

template <class D>
AttentionGrads attention_bwd(const D& d, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y,
                             const Tensor& lse, const Tensor& dy, bool causal, double scale,
                             const Tensor& kv_len) {
  return run_once(d, bind::attention_bwd(d, q, k, v, y, lse, dy, causal, scale, kv_len)).result;
}

#define STRATA_OPS_INSTANTIATE(D)                                                                                \
  template LayerNormResult layer_norm<D>(const D&, const Tensor&, const Tensor&, const Tensor&, double);        \
  template LayerNormGrads layer_norm_bwd<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, \
                                            const Tensor&, bool, bool, bool);                                   \
  template AttentionResult attention<D>(const D&, const Tensor&, const Tensor&, const Tensor&, bool, double,    \
                                        const Tensor&, const Tensor&, const Tensor&, const Tensor&);            \
  template AttentionGrads attention_bwd<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, \
                                           const Tensor&, const Tensor&, bool, double, const Tensor&);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
