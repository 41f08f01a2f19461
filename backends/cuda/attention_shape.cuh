#pragma once
// An attention call's shape as its kernels read it: the sizes, the causal rule and the keys a
// cache holds (AttentionFwdArgs::kv_len, read on the device at every launch). Shared by the
// training and general kernels (attention.cu) and the decoding kernel (attention_decode.cu).
// Internal to backends/cuda.
#include <cstdint>

#include "strata/ops/table/op_args.h"

namespace strata::backends::cuda {

// codegen:begin cuda_kernels attention
struct AttnShape {
  int64_t B, H, tq, tk, D;
  bool causal;
  const int64_t* kv_len;  // optional: the keys held, read at every launch
  // The keys k holds: L = kv_len (clamped to [0, tk]) or tk.
  __device__ int64_t held() const { return kv_len ? min(max(*kv_len, int64_t{0}), tk) : tk; }
  // The keys query i sees: [0, keys(i)); the queries key j is seen by: [first_query(j), tq).
  __device__ int64_t keys(int64_t i) const {
    const int64_t l = held();
    return max(int64_t{0}, causal ? min(l, i + l - tq + 1) : l);
  }
  __device__ int64_t first_query(int64_t j) const {
    const int64_t l = held();
    if (j >= l) return tq;
    return causal ? min(tq, max(int64_t{0}, j - (l - tq))) : 0;
  }
};
// codegen:end

inline AttnShape attn_shape(const ops::TensorView& q, const ops::TensorView& k, bool causal,
                            const ops::TensorView& kv_len) {
  return {q.sizes[0], q.sizes[1], q.sizes[2], k.sizes[2], q.sizes[3], causal,
          kv_len.defined ? kv_len.ptr<const int64_t>() : nullptr};
}

}  // namespace strata::backends::cuda
