#pragma once
// The front end of the transformer's fused ops (op_table.def's layer_norm_* and attention_*):
// checks (ops/validate_transformer.h), output allocation, one backend call. No autograd
// (autograd/transformer_functions.h records these).
#include "strata/core/tensor.h"

namespace strata::ops {

// Layer norm over x's last dim: y like x; mean and rstd (the statistics dtype: f32, or f64
// for f64 inputs) of x's sizes without the last dim. weight and bias [C] are optional.
struct LayerNormResult {
  Tensor y, mean, rstd;
};
template <class D>
LayerNormResult layer_norm(const D& d, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
// The gradients the flags ask for (undefined otherwise).
struct LayerNormGrads {
  Tensor dx, dweight, dbias;
};
template <class D>
LayerNormGrads layer_norm_bwd(const D& d, const Tensor& x, const Tensor& weight, const Tensor& mean,
                              const Tensor& rstd, const Tensor& dy, bool need_dx, bool need_dweight, bool need_dbias);

// Scaled dot-product attention of q [B, H, Tq, D] over k, v [B, H, Tk, D]: y [B, H, Tq, D]
// and lse [B, H, Tq] (op_args.h's AttentionFwdArgs); causal: query i sees the keys up to
// position i + Tk - Tq. scale is usually 1 / sqrt(D). kv_len (optional, i64 [1]): only the
// first kv_len rows of k and v are keys, Tk reading kv_len in the causal rule (a static
// cache: on the GPU the count is read by the kernel, so a captured step may change it).
struct AttentionResult {
  Tensor y, lse;
};
// k_new, v_new [B, H, Tq, D] and positions (i64 [Tq]; optional, all three or none, forward only):
// a decoding step's keys and values, written into k's and v's rows `positions` before the
// queries attend, where an index_add into each cache ran before (op_args.h).
template <class D>
AttentionResult attention(const D& d, const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                          const Tensor& kv_len = Tensor(), const Tensor& k_new = Tensor(),
                          const Tensor& v_new = Tensor(), const Tensor& positions = Tensor());
struct AttentionGrads {
  Tensor dq, dk, dv;
};
template <class D>
AttentionGrads attention_bwd(const D& d, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y,
                             const Tensor& lse, const Tensor& dy, bool causal, double scale,
                             const Tensor& kv_len = Tensor());

}  // namespace strata::ops
