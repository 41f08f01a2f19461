#pragma once
// The transformer's fused ops recorded on the tape (ops/transformer_ops.h): layer norm over
// the last dim and scaled dot-product attention, each one backend call forward and one
// backward. D as in functions.h.
#include <optional>

#include "strata/core/tensor.h"

namespace strata::autograd {

// torch.nn.functional.layer_norm over x's last dim; weight and bias [C] optional.
template <class D>
Tensor layer_norm(const D& d, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// torch.nn.functional.scaled_dot_product_attention of q [B, H, Tq, D] over k, v [B, H, Tk, D]
// (no attention mask, no dropout): is_causal lets query i see the keys up to i + Tk - Tq
// (with Tq == Tk PyTorch's lower-triangular mask; a cached decoding step's queries see the
// whole cache); scale defaults to 1 / sqrt(D), as PyTorch's. kv_len (i64 [1], optional): the
// keys are the first kv_len rows of k and v (a static cache; ops/transformer_ops.h).
template <class D>
Tensor scaled_dot_product_attention(const D& d, const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal,
                                    std::optional<double> scale = std::nullopt, const Tensor& kv_len = Tensor());

}  // namespace strata::autograd
