#pragma once
// GPT-2's layers (Radford, Wu, Child, Luan, Amodei & Sutskever, "Language Models are
// Unsupervised Multitask Learners", 2019), with its child names so state dicts match
// Hugging Face's and nanoGPT's: wte, wpe, h.<i>.{ln_1, attn.{c_attn, c_proj}, ln_2,
// mlp.{c_fc, c_proj}}, ln_f; the output projection is wte's weight (tied).
//
// This first form composes the tensor API's recorded ops (index_select, the reductions,
// matmul, softmax, where, the GELU row), so it runs in the tape modes (virtual, static) on
// every backend and is the oracle the fused kernels and direct-mode plans to come are tested
// against. Direct and graph modes refuse it at construction: they need those plans.
#include <cstdint>
#include <vector>

#include "strata/nn/layers/linear.h"

namespace strata::nn {

struct GptConfig {
  int64_t vocab_size = 50257, block_size = 1024;  // tokens, the longest sequence
  int64_t n_layer = 12, n_head = 12, n_embd = 768;
  double layer_norm_eps = 1e-5;
  DType dtype = DType::f32;
};

// The keys and values of the tokens a model has seen, per layer ([B, heads, T, head width]
// each): decoding a token at a time attends over them instead of running the whole sequence
// again. Filled by Gpt::forward(ids, &cache); T grows by each call's tokens.
struct KvCache {
  std::vector<Tensor> k, v;
  int64_t length() const { return k.empty() ? 0 : k[0].size(2); }
};

// y[..., :] = weight[ids[...], :]; ids i64 (or i32) of any shape.
template <class P>
class Embedding final : public Module {
 public:
  Embedding(const P& p, int64_t num, int64_t dim, DType dt = DType::f32);
  std::string_view type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& ids) override;
  const Tensor& weight() const { return weight_; }

 private:
  P p_;
  int64_t num_, dim_;
  Tensor weight_;
};

// Over the last dim: (x - mean) / sqrt(var + eps) * weight + bias (biased variance).
template <class P>
class LayerNorm final : public Module {
 public:
  LayerNorm(const P& p, int64_t dim, double eps = 1e-5, DType dt = DType::f32);
  std::string_view type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;

 private:
  P p_;
  int64_t dim_;
  double eps_;
  Tensor weight_, bias_;
};

// Causal multi-head self-attention over x [B, T, C]: one fused QKV projection (c_attn), the
// heads' scaled dot products masked to the past, and the output projection (c_proj).
template <class P>
class CausalSelfAttention final : public Module {
 public:
  CausalSelfAttention(const P& p, const GptConfig& c);
  std::string_view type_name() const override { return "CausalSelfAttention"; }
  Tensor forward(const Tensor& x) override { return forward(x, nullptr, 0); }
  // With a cache, x is the tokens after the cached ones: their keys and values join layer
  // `layer`'s, and each attends to every cached token and to the new ones up to itself.
  Tensor forward(const Tensor& x, KvCache* cache, size_t layer);

 private:
  // The keys after each query's position, u8 [queries, past + queries]: made once per shape
  // (and device), not at every call.
  const Tensor& future_mask(int64_t queries, int64_t past, Device device);

  P p_;
  int64_t n_head_, n_embd_;
  Linear<P>& c_attn_;
  Linear<P>& c_proj_;
  Tensor mask_;
  int64_t mask_queries_ = 0, mask_past_ = -1;
};

// c_fc (C -> 4C), GELU (the tanh approximation GPT-2 uses), c_proj (4C -> C).
template <class P>
class GptMlp final : public Module {
 public:
  GptMlp(const P& p, const GptConfig& c);
  std::string_view type_name() const override { return "MLP"; }
  Tensor forward(const Tensor& x) override;

 private:
  P p_;
  Linear<P>& c_fc_;
  Linear<P>& c_proj_;
};

template <class P>
class GptBlock final : public Module {
 public:
  GptBlock(const P& p, const GptConfig& c);
  std::string_view type_name() const override { return "Block"; }
  Tensor forward(const Tensor& x) override { return forward(x, nullptr, 0); }
  Tensor forward(const Tensor& x, KvCache* cache, size_t layer);

 private:
  P p_;
  LayerNorm<P>& ln_1_;
  CausalSelfAttention<P>& attn_;
  LayerNorm<P>& ln_2_;
  GptMlp<P>& mlp_;
};

// ids i64 [B, T] (T <= block_size) -> logits [B, T, vocab_size].
template <class P>
class Gpt final : public Module {
 public:
  Gpt(const P& p, const GptConfig& c);
  std::string_view type_name() const override { return "GPT"; }
  Tensor forward(const Tensor& ids) override { return forward(ids, nullptr); }
  // With a cache, ids are the tokens after the cached ones (positions continue from its length,
  // which with them may not pass block_size); the cache takes their keys and values.
  Tensor forward(const Tensor& ids, KvCache* cache);
  const GptConfig& config() const { return c_; }

 private:
  P p_;
  GptConfig c_;
  Embedding<P>& wte_;
  Embedding<P>& wpe_;
  std::vector<GptBlock<P>*> h_;
  LayerNorm<P>* ln_f_ = nullptr;
};

}  // namespace strata::nn
