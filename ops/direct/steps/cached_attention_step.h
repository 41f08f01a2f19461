#pragma once
// A decoding step's causal self-attention in direct mode, over a static key/value cache
// (nn::Gpt::static_cache): the tape modes' forward_cached as plans. Forward only: a cache is
// for inference.
#include <cmath>
#include <vector>

#include "strata/core/shape.h"
#include "strata/core/tensor.h"
#include "strata/ops/direct/tensor_plans.h"
#include "strata/ops/direct/steps/transformer_steps.h"
#include "strata/ops/direct/transformer_plans.h"

namespace strata::ops::direct {

// qkv [B, T, 3C] (the QKV projection's output, `heads` heads): k and v, as [B, H, T, D] views of
// its slices, are written into the caches k_cache, v_cache [B, H, capacity, D] at the rows
// `positions` [T] by the attention op itself, then q attends over the caches' first `held` [1]
// keys (read on the device at every run, so one plan serves every position); y [B, T, C] is the
// heads side by side. The positions and the count are the cache's slots, which the caller
// rewrites before each run (nn::KvCache::advance).
template <class Impl>
class CachedAttentionStep {
 public:
  void plan(Impl& impl, const Tensor& qkv, int64_t heads, const Tensor& k_cache, const Tensor& v_cache,
            const Tensor& positions, const Tensor& held) {
    impl_ = &impl;
    const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
    const Shape dims{B, T, heads, C / heads};
    const auto [q, k, v] = plan_qkv_heads(impl, qkv, dims, copies_);
    attn_.plan(impl, q, k_cache, v_cache, true, 1.0 / std::sqrt(static_cast<double>(dims[3])), held, k, v, positions);
    y_ = attn_.y.permute(kQkvHeads).view({B, T, C});
    kept_ = {k_cache, v_cache, positions, held};
  }
  template <class... Args>
  const Tensor& run(const Args&...) {
    for (auto& c : copies_) c.run();
    attn_.forward();
    return y_;
  }
  void plan_backward(const Tensor&, bool) { no_backward(); }
  const Tensor& run_backward() { no_backward(); }

 private:
  [[noreturn]] static void no_backward() {
    STRATA_FAIL("CausalSelfAttention: no backward through a decoding step over a key/value cache (a cache is for "
                "inference)");
  }

  Impl* impl_ = nullptr;
  Tensor y_;
  std::vector<Tensor> kept_;  // the caches and their slots, which the plans point at
  CastPlan<Impl> copies_[3];
  AttentionPlan<Impl> attn_;
};

}  // namespace strata::ops::direct
