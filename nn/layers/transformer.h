#pragma once
// GPT-2's layers (Radford, Wu, Child, Luan, Amodei & Sutskever, "Language Models are
// Unsupervised Multitask Learners", 2019), with its child names so state dicts match
// Hugging Face's and nanoGPT's: wte, wpe, h.<i>.{ln_1, attn.{c_attn, c_proj}, ln_2,
// mlp.{c_fc, c_proj}}, ln_f; the output projection is wte's weight (tied).
//
// The layers are the op table's ops: index_select for the embeddings, layer_norm, linear, the
// GELU row, the fused causal attention and the batched product of the output projection, in
// every dispatch mode on every backend. The tape modes (virtual, static) record them; direct
// mode plans each call once per input shape (ops/direct/steps/transformer_steps.h over ops/direct/'s
// plans) and runs backward explicitly, module by module in reverse order, bitwise the tape's:
// where gradients meet (the residual stream, wte's weight, which the tied output projection
// reads too) they are summed by the same kernels in the order the autograd engine sums them,
// and attention writes the gradients of q, k and v straight into their slices of the QKV
// projection's gradient, which the tape assembles by adding three zero-filled copies (the same
// bits: adding +0 changes no value but a -0, which the kernels' sums, started at +0, produce
// only by underflowing on the way to a narrower dtype). Graph mode (cuda) captures direct mode's steps.
// Mixed precision (GptConfig::compute_dtype): the embeddings are looked up and summed in the
// parameters' dtype, the sum converted to the compute dtype, and everything after runs in it,
// each layer reading its parameters converted (the tape modes' recorded casts, direct mode's
// planned conversions); gradients return to the parameters' dtype.
// Decoding has a graph form of its own, in static mode: a static key/value cache
// (Gpt::static_cache) lets one CUDA graph of the step replay at every position
// (nn/generate.h). Key/value caches are the tape modes' (direct mode plans whole sequences of
// one length and refuses a cache).
#include <cstdint>
#include <optional>
#include <vector>

#include "strata/nn/layers/container.h"
#include "strata/nn/layers/linear.h"
#include "strata/nn/layers/residual_add.h"

namespace strata::ops::direct {
template <backends::BackendImpl Impl>
class UnaryPlan;
template <backends::BackendImpl Impl>
class LayerNormPlan;
// Direct mode's steps of these layers (ops/direct/steps/transformer_steps.h). Only
// transformer.cpp instantiates them (the layers' destructors are defined there), so the
// header's other users compile without the plans.
template <class Impl>
class EmbeddingStep;
template <class Impl>
class AttentionStep;
template <class Impl>
class CachedAttentionStep;
template <class Impl>
class EmbeddingSumStep;
template <class Impl>
class TiedProjectionStep;
}  // namespace strata::ops::direct

namespace strata::nn {

template <class P>
class LayerNorm;

namespace detail {
struct EmbeddingStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::EmbeddingStep<Impl>;
};
struct LayerNormStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::WeightedStep<Impl, ops::direct::LayerNormPlan<Impl>>;
};
struct AttentionStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::AttentionStep<Impl>;
};
struct CachedAttentionStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::CachedAttentionStep<Impl>;
};
struct MlpStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::MlpStep<Impl>;
};
struct EmbeddingSumStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::EmbeddingSumStep<Impl>;
};
struct TiedProjectionStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::TiedProjectionStep<Impl>;
};

// An op over x's last dim: x [..., in] folded into rows [N, in], f(rows, z_rows) -> [N, out], and
// its output unfolded to [..., out], by autograd::reshape in the tape modes and planned views in
// direct mode. z (optional, the output's shape) is folded alike: a residual f adds, whose gradient
// is dy, the caller's to route in direct mode.
template <class P>
class LastDimRows {
 public:
  template <class F>
  Tensor forward(const P& p, const Tensor& x, int64_t out, const Tensor& z, F&& f);
  // Direct mode: dL/dx from dL/dy through back (the rows' gradient from the output rows');
  // `m` (the layer that owns it) names it in errors.
  template <class F>
  Tensor backward(const Module& m, const Tensor& dy, F&& back);

 private:
  [[no_unique_address]] DirectLayer<P, FlattenStepOf> rows_, unfold_, z_rows_;
};

// A Linear over x's last dim (LastDimRows); z, optional, added in the product (Linear::forward_add).
template <class P>
class LastDimLinear {
 public:
  Tensor forward(const P& p, Linear<P>& lin, const Tensor& x, int64_t out, const Tensor& z = Tensor());
  // x's rows layer-normalised in the product's prologue (Linear::forward_normed; inference).
  Tensor forward_normed(const P& p, Linear<P>& lin, const Tensor& x, int64_t out, const LayerNorm<P>& norm);
  Tensor backward(const Module& m, Linear<P>& lin, const Tensor& dy);

 private:
  LastDimRows<P> rows_;
};
}  // namespace detail

struct GptConfig {
  int64_t vocab_size = 50257, block_size = 1024;  // tokens, the longest sequence
  int64_t n_layer = 12, n_head = 12, n_embd = 768;
  double layer_norm_eps = 1e-5;
  DType dtype = DType::f32;                // the parameters'
  std::optional<DType> compute_dtype;      // mixed precision: the activations' (nullopt: dtype)
  // The output projection computes over vocab_size rounded up to a multiple of this (1: none):
  // the weight read with zero rows appended and the logits stored in rows of that length, of
  // which the model hands out the first vocab_size columns (a strided view). An odd vocabulary
  // (GPT-2's 50,257) as the GEMMs' leading dimension keeps cuBLAS from its 16-byte vectorised
  // kernels, 2.5 times slower in bf16 on an H200; padding is what nanoGPT (a vocabulary of 50,304)
  // and Karpathy's llm.c repository (a padded row stride, softmax over the real classes) do. The
  // parameters, state dicts and the loss keep vocab_size: the padded classes are never seen.
  int64_t vocab_multiple = 64;
  // The padding costs a copy of the weight per forward (its zero rows appended), which pays only
  // when the product has enough rows: a decoding step's one row reads the weight once either
  // way, and the copy made it 17 % slower on an H200 (docs/results/gpt2_vs_pytorch.md). Forwards
  // of fewer rows (batch times tokens) than this compute over vocab_size.
  int64_t pad_head_min_rows = 128;
  // vocab_size rounded up to vocab_multiple: the output projection's row length.
  int64_t padded_vocab() const { return (vocab_size + vocab_multiple - 1) / vocab_multiple * vocab_multiple; }
  // The output projection's row length for a forward of `rows` rows (see pad_head_min_rows).
  int64_t head_columns(int64_t rows) const { return rows >= pad_head_min_rows ? padded_vocab() : vocab_size; }
};

// The keys and values of the tokens a model has seen, per layer ([B, heads, rows, head width]
// each): decoding a token at a time attends over them instead of running the whole sequence
// again. Filled by Gpt::forward(ids, &cache).
//  - Growing (a default KvCache): each call's keys and values are appended (rows = tokens seen).
//  - Static (Gpt::static_cache): k and v hold `capacity` zero rows from the start, each call's
//    written at its tokens' positions. The positions and the count of rows held are device
//    tensors (`slots`) that advance() writes before a call, and the kernels read: the calls'
//    ops and addresses do not change from one position to the next, so one captured step
//    replays at every position. Inference only (no gradient through the writes).
struct KvCache {
  std::vector<Tensor> k, v;
  int64_t capacity = 0;  // static: rows per layer (0: growing)
  int64_t filled = 0;    // static: tokens seen
  Tensor slots;          // static: i64 [capacity + 1] on the device: the positions of the call's
                         // T tokens, then the count held after it (filled)
  int64_t length() const { return capacity > 0 ? filled : k.empty() ? 0 : k[0].size(2); }
  bool is_static() const { return capacity > 0; }
  // Static: makes the next call's T tokens the ones after the `filled` seen (writes their
  // positions and the new count into slots) and counts them seen.
  void advance(int64_t tokens);
  // Static: the positions [T] and the count held [1] that advance(T) wrote.
  Tensor positions(int64_t tokens) const { return slots.narrow(0, 0, tokens); }
  Tensor held(int64_t tokens) const { return slots.narrow(0, tokens, 1); }
};

// y[..., :] = weight[ids[...], :]; ids i64 (or i32) of any shape.
template <class P>
class Embedding final : public Module {
 public:
  Embedding(const P& p, int64_t num, int64_t dim, DType dt = DType::f32);
  ~Embedding() override;
  std::string_view type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& ids) override;
  // Direct mode: the weight's gradient (dy's rows added up at their ids) into .grad(); ids
  // have none (undefined is returned).
  Tensor backward(const Tensor& dy) override;
  // Direct mode, a tied weight that an op after the lookup reads too (GPT's output
  // projection): `later` is that op's gradient for the weight, which the autograd engine
  // accumulates first, so .grad() gets (.grad() +) later + the lookup's, summed as it sums them.
  Tensor backward_tied(const Tensor& dy, const Tensor& later);
  const Tensor& weight() const { return weight_; }
  int64_t plans_made() const;

 private:
  P p_;
  int64_t num_, dim_;
  Tensor weight_;
  [[no_unique_address]] detail::DirectLayer<P, detail::EmbeddingStepOf> direct_;
};

// Over the last dim: (x - mean) / sqrt(var + eps) * weight + bias (biased variance).
template <class P>
class LayerNorm final : public Module {
 public:
  LayerNorm(const P& p, int64_t dim, double eps = 1e-5, DType dt = DType::f32);
  ~LayerNorm() override;
  std::string_view type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  int64_t plans_made() const;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  double eps() const { return eps_; }

 private:
  P p_;
  int64_t dim_;
  double eps_;
  Tensor weight_, bias_;
  [[no_unique_address]] detail::DirectLayer<P, detail::LayerNormStepOf> direct_;
};

// Causal multi-head self-attention over x [B, T, C]: one fused QKV projection (c_attn), the
// heads' causal scaled dot-product attention (one fused op), and the output projection (c_proj).
template <class P>
class CausalSelfAttention final : public Module {
 public:
  CausalSelfAttention(const P& p, const GptConfig& c);
  ~CausalSelfAttention() override;
  std::string_view type_name() const override { return "CausalSelfAttention"; }
  Tensor forward(const Tensor& x) override { return forward(x, nullptr, 0); }
  // With a cache, x is the tokens after the cached ones: their keys and values join layer
  // `layer`'s, and each attends to every cached token and to the new ones up to itself. Direct
  // mode takes a static cache (Gpt::static_cache) only, forward only. residual (optional, x's
  // shape): added to the output in c_proj's product (its gradient, dy, is the caller's). norm
  // (inference with a static cache): x's layer norm, run in c_attn's product's prologue.
  Tensor forward(const Tensor& x, KvCache* cache, size_t layer, const Tensor& residual = Tensor(),
                 const LayerNorm<P>* norm = nullptr);
  Tensor backward(const Tensor& dy) override;
  int64_t plans_made() const;  // the attention's own (its projections count theirs)

 private:
  Tensor forward_cached(const Tensor& qkv, KvCache& cache, size_t layer);

  P p_;
  int64_t n_head_, n_embd_;
  Linear<P>& c_attn_;
  Linear<P>& c_proj_;
  detail::LastDimLinear<P> qkv_, proj_;
  [[no_unique_address]] detail::DirectLayer<P, detail::AttentionStepOf> attend_;
  [[no_unique_address]] detail::DirectLayer<P, detail::CachedAttentionStepOf> attend_cached_;
  bool decoded_ = false;  // direct mode: the latest forward read a cache (no backward follows it)
};

// c_fc (C -> 4C), GELU (the tanh approximation GPT-2 uses), c_proj (4C -> C), over x's rows
// as one fused op in every mode (autograd::mlp; direct mode's MlpStep): GELU runs in c_fc's
// product's epilogue and its derivative in c_proj's data-gradient product's where the backend
// has them (cuBLASLt, f16/bf16), and a residual, when given, in c_proj's product. c_fc and
// c_proj hold the parameters (and their names).
template <class P>
class GptMlp final : public Module {
 public:
  GptMlp(const P& p, const GptConfig& c);
  ~GptMlp() override;
  std::string_view type_name() const override { return "MLP"; }
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()); }
  // + residual (x's shape), whose gradient (dy) is the caller's in direct mode. norm (inference):
  // x's layer norm, run in c_fc's product's prologue.
  Tensor forward(const Tensor& x, const Tensor& residual, const LayerNorm<P>* norm = nullptr);
  Tensor backward(const Tensor& dy) override;
  int64_t plans_made() const { return mlp_.plans_made(); }  // c_fc and c_proj plan none of their own

 private:
  P p_;
  Linear<P>& c_fc_;
  Linear<P>& c_proj_;
  detail::EvalCast w1_cast_, b1_cast_, w2_cast_, b2_cast_;  // mixed-precision evaluation in the tape modes
  detail::LastDimRows<P> rows_;
  [[no_unique_address]] detail::DirectLayer<P, detail::MlpStepOf> mlp_, mlp_normed_;
  bool normed_ = false;  // the latest forward ran the layer norm in its prologue (no backward follows)
};

template <class P>
class GptBlock final : public Module {
 public:
  GptBlock(const P& p, const GptConfig& c);
  std::string_view type_name() const override { return "Block"; }
  Tensor forward(const Tensor& x) override { return forward(x, nullptr, 0); }
  Tensor forward(const Tensor& x, KvCache* cache, size_t layer);
  // The residual adds run in the output projections' products (attention's c_proj, the MLP's);
  // direct mode sums each one's gradients as identity + branch (nn/layers/residual_add.h).
  Tensor backward(const Tensor& dy) override;

 private:
  P p_;
  LayerNorm<P>& ln_1_;
  CausalSelfAttention<P>& attn_;
  LayerNorm<P>& ln_2_;
  GptMlp<P>& mlp_;
  ResidualAdd<P> attn_add_, mlp_add_;
};

// ids i64 [B, T] (T <= block_size) -> logits [B, T, vocab_size].
template <class P>
class Gpt final : public Module {
 public:
  Gpt(const P& p, const GptConfig& c);
  ~Gpt() override;
  std::string_view type_name() const override { return "GPT"; }
  Tensor forward(const Tensor& ids) override { return forward(ids, nullptr); }
  // With a cache (tape modes), ids are the tokens after the cached ones (positions continue
  // from its length, which with them may not pass block_size); the cache takes their keys and
  // values.
  Tensor forward(const Tensor& ids, KvCache* cache);
  // Direct mode: every parameter's gradient from dL/dlogits; ids have none (undefined).
  Tensor backward(const Tensor& dlogits) override;
  int64_t plans_made() const;  // the output projection's (each layer counts its own)
  const GptConfig& config() const { return c_; }
  const P& policy() const { return p_; }
  // A static key/value cache of `capacity` (<= block_size) positions for `batch` sequences
  // on the model's device, in its compute dtype (KvCache); a new sequence takes a new one.
  KvCache static_cache(int64_t batch, int64_t capacity) const;

 private:
  P p_;
  GptConfig c_;
  Embedding<P>& wte_;
  Embedding<P>& wpe_;
  std::vector<GptBlock<P>*> h_;
  LayerNorm<P>* ln_f_ = nullptr;
  std::vector<Tensor> positions_;  // direct mode: arange(T) on the device, per length T, made once
  [[no_unique_address]] detail::DirectLayer<P, detail::EmbeddingSumStepOf> embed_sum_;
  [[no_unique_address]] detail::DirectLayer<P, detail::TiedProjectionStepOf> lm_head_;
};

}  // namespace strata::nn
