#include "strata/nn/layers/transformer.h"

#include <cmath>
#include <span>
#include <string>

#include "strata/autograd/functions.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/factories.h"
#include "strata/nn/layers/layer_util.h"
#include "strata/nn/policy.h"
#include "strata/ops/direct/graph_capture.h"
#include "strata/ops/tensor_ops.h"

namespace strata::nn {

namespace {

template <class P>
void tape_modes_only(std::string_view layer) {
  if constexpr (is_direct_v<P>)
    STRATA_FAIL(layer, ": the transformer layers run in the virtual and static modes for now; direct and graph "
                       "modes need their plans, which are not written yet");
}

// x [..., in] through a Linear (which takes [N, in]): the leading dims folded into N and back.
template <class P>
Tensor linear_last(const P& p, Linear<P>& lin, const Tensor& x, int64_t out) {
  Shape rows{x.numel() / x.size(x.dim() - 1), x.size(x.dim() - 1)};
  Shape back = x.sizes();
  back[back.size() - 1] = out;
  return autograd::reshape(p, lin.forward(autograd::reshape(p, x, rows)), back);
}

// t ~ N(0, std^2) from the default generator (GPT-2's initialisation).
void normal_(const Tensor& t, double std) {
  std::vector<double> v = randn(t.sizes(), DType::f64).to_vector<double>();
  for (double& x : v) x *= std;
  detail::assign_host(t, v);
}

}  // namespace

template <class P>
Embedding<P>::Embedding(const P& p, int64_t num, int64_t dim, DType dt) : p_(p), num_(num), dim_(dim) {
  tape_modes_only<P>("Embedding");
  STRATA_CHECK(num > 0 && dim > 0, "Embedding: invalid configuration num=", num, " dim=", dim);
  weight_ = register_parameter("weight", detail::make_filled(p_.device(), Shape{num, dim}, dt, 0.0));
  normal_(weight_, 1.0);  // torch.nn.Embedding's N(0, 1)
}

template <class P>
std::string Embedding<P>::extra_repr() const {
  return std::to_string(num_) + ", " + std::to_string(dim_);
}

template <class P>
Tensor Embedding<P>::forward(const Tensor& ids) {
  if constexpr (is_direct_v<P>) {
    STRATA_FAIL("Embedding: direct mode is not supported yet");
  } else {
    STRATA_CHECK(ids.defined(), "Embedding: ids are an undefined tensor");
    const Tensor flat = ids.contiguous().view(Shape{ids.numel()});
    Shape out = ids.sizes();
    out.push_back(dim_);
    return autograd::reshape(p_, autograd::index_select(p_, weight_, 0, flat), out);
  }
}

template <class P>
LayerNorm<P>::LayerNorm(const P& p, int64_t dim, double eps, DType dt) : p_(p), dim_(dim), eps_(eps) {
  tape_modes_only<P>("LayerNorm");
  STRATA_CHECK(dim > 0 && eps > 0, "LayerNorm: invalid configuration dim=", dim, " eps=", eps);
  weight_ = register_parameter("weight", detail::make_filled(p_.device(), Shape{dim}, dt, 1.0));
  bias_ = register_parameter("bias", detail::make_filled(p_.device(), Shape{dim}, dt, 0.0));
}

template <class P>
std::string LayerNorm<P>::extra_repr() const {
  std::string s = "(";  // appended, not "(" + ...: GCC 12 warns falsely (-Wrestrict) on that form
  s += std::to_string(dim_) + ",), eps=" + std::to_string(eps_);
  return s;
}

template <class P>
Tensor LayerNorm<P>::forward(const Tensor& x) {
  if constexpr (is_direct_v<P>) {
    STRATA_FAIL("LayerNorm: direct mode is not supported yet");
  } else {
    STRATA_CHECK(x.defined() && x.dim() >= 1 && x.size(x.dim() - 1) == dim_, "LayerNorm: input ",
                 x.defined() ? x.str() : "(undefined)", " does not end in ", dim_);
    return autograd::layer_norm(p_, x, weight_, bias_, eps_);
  }
}

template <class P>
CausalSelfAttention<P>::CausalSelfAttention(const P& p, const GptConfig& c)
    : p_(p), n_head_(c.n_head), n_embd_(c.n_embd),
      c_attn_(register_module("c_attn", std::make_unique<Linear<P>>(p, c.n_embd, 3 * c.n_embd, LinearOptions{true, c.dtype}))),
      c_proj_(register_module("c_proj", std::make_unique<Linear<P>>(p, c.n_embd, c.n_embd, LinearOptions{true, c.dtype}))) {
  tape_modes_only<P>("CausalSelfAttention");
  STRATA_CHECK(c.n_head > 0 && c.n_embd % c.n_head == 0, "CausalSelfAttention: n_embd ", c.n_embd,
               " is not a multiple of n_head ", c.n_head);
}

template <class P>
Tensor CausalSelfAttention<P>::forward(const Tensor& x, KvCache* cache, size_t layer) {
  if constexpr (is_direct_v<P>) {
    STRATA_FAIL("CausalSelfAttention: direct mode is not supported yet");
  } else {
    STRATA_CHECK(x.defined() && x.dim() == 3 && x.size(2) == n_embd_, "CausalSelfAttention: input ",
                 x.defined() ? x.str() : "(undefined)", " is not [B, T, ", n_embd_, "]");
    const int64_t B = x.size(0), T = x.size(1), C = n_embd_, H = n_head_, D = C / H;
    const Tensor qkv = linear_last(p_, c_attn_, x, 3 * C);
    auto head = [&](int i) {  // [B, T, C] slice i of q, k, v as [B, H, T, D]
      const Tensor part = autograd::slice(p_, qkv, 2, i * C, (i + 1) * C);
      return autograd::transpose(p_, autograd::reshape(p_, part, {B, T, H, D}), 1, 2);
    };
    const Tensor q = head(0);
    Tensor k = head(1), v = head(2);
    if (cache != nullptr && cache->is_static()) {
      // The new rows written at their positions; the keys are the first `held` rows.
      ops::index_add_(p_, cache->k[layer], 2, cache->positions(T), k);
      ops::index_add_(p_, cache->v[layer], 2, cache->positions(T), v);
      const Tensor y = autograd::scaled_dot_product_attention(p_, q, cache->k[layer], cache->v[layer], true,
                                                              std::nullopt, cache->held(T));
      return linear_last(p_, c_proj_, autograd::reshape(p_, autograd::transpose(p_, y, 1, 2), {B, T, C}), C);
    }
    if (cache != nullptr) {
      if (cache->k.size() <= layer) cache->k.resize(layer + 1), cache->v.resize(layer + 1);
      if (cache->k[layer].defined()) {
        const Tensor ks[] = {cache->k[layer], k}, vs[] = {cache->v[layer], v};
        k = autograd::cat(p_, std::span<const Tensor>(ks), 2);
        v = autograd::cat(p_, std::span<const Tensor>(vs), 2);
      }
      cache->k[layer] = k;
      cache->v[layer] = v;
    }
    // Query i of these T sees the cached keys and the new ones up to itself: the causal rule
    // with the queries as the last T of the past + T keys.
    const Tensor y = autograd::scaled_dot_product_attention(p_, q, k, v, true);  // [B, H, T, D]
    return linear_last(p_, c_proj_, autograd::reshape(p_, autograd::transpose(p_, y, 1, 2), {B, T, C}), C);
  }
}

template <class P>
GptMlp<P>::GptMlp(const P& p, const GptConfig& c)
    : p_(p),
      c_fc_(register_module("c_fc", std::make_unique<Linear<P>>(p, c.n_embd, 4 * c.n_embd, LinearOptions{true, c.dtype}))),
      c_proj_(register_module("c_proj", std::make_unique<Linear<P>>(p, 4 * c.n_embd, c.n_embd, LinearOptions{true, c.dtype}))) {
  tape_modes_only<P>("MLP");
}

template <class P>
Tensor GptMlp<P>::forward(const Tensor& x) {
  if constexpr (is_direct_v<P>) {
    STRATA_FAIL("MLP: direct mode is not supported yet");
  } else {
    const int64_t C = x.size(x.dim() - 1);
    return linear_last(p_, c_proj_, autograd::gelu_tanh(p_, linear_last(p_, c_fc_, x, 4 * C)), C);
  }
}

template <class P>
GptBlock<P>::GptBlock(const P& p, const GptConfig& c)
    : p_(p),
      ln_1_(register_module("ln_1", std::make_unique<LayerNorm<P>>(p, c.n_embd, c.layer_norm_eps, c.dtype))),
      attn_(register_module("attn", std::make_unique<CausalSelfAttention<P>>(p, c))),
      ln_2_(register_module("ln_2", std::make_unique<LayerNorm<P>>(p, c.n_embd, c.layer_norm_eps, c.dtype))),
      mlp_(register_module("mlp", std::make_unique<GptMlp<P>>(p, c))) {}

template <class P>
Tensor GptBlock<P>::forward(const Tensor& x, KvCache* cache, size_t layer) {
  if constexpr (is_direct_v<P>) {
    STRATA_FAIL("Block: direct mode is not supported yet");
  } else {
    const Tensor h = autograd::add(p_, x, attn_.forward(ln_1_.forward(x), cache, layer));
    return autograd::add(p_, h, mlp_.forward(ln_2_.forward(h)));
  }
}

template <class P>
Gpt<P>::Gpt(const P& p, const GptConfig& c)
    : p_(p), c_(c),
      wte_(register_module("wte", std::make_unique<Embedding<P>>(p, c.vocab_size, c.n_embd, c.dtype))),
      wpe_(register_module("wpe", std::make_unique<Embedding<P>>(p, c.block_size, c.n_embd, c.dtype))) {
  STRATA_CHECK(c.n_layer > 0 && c.block_size > 0 && c.vocab_size > 0, "GPT: invalid configuration");
  for (int64_t i = 0; i < c.n_layer; ++i)
    h_.push_back(&register_module("h." + std::to_string(i), std::make_unique<GptBlock<P>>(p, c)));
  ln_f_ = &register_module("ln_f", std::make_unique<LayerNorm<P>>(p, c.n_embd, c.layer_norm_eps, c.dtype));
  // GPT-2's initialisation (as nanoGPT writes it): weights N(0, 0.02), the residual projections
  // N(0, 0.02 / sqrt(2 n_layer)), biases 0; layer norms keep 1 and 0.
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  for (auto& [name, t] : named_parameters()) {
    if (name.find("ln_") != std::string::npos) continue;
    if (name.ends_with(".bias"))
      detail::assign_host(t, std::vector<double>(static_cast<size_t>(t.numel()), 0.0));
    else
      normal_(t, name.ends_with("c_proj.weight") ? proj_std : 0.02);
  }
}

template <class P>
Tensor Gpt<P>::forward(const Tensor& ids, KvCache* cache) {
  if constexpr (is_direct_v<P>) {
    STRATA_FAIL("GPT: direct mode is not supported yet");
  } else {
    STRATA_CHECK(ids.defined() && ids.dim() == 2, "GPT: ids must be [B, T], got ",
                 ids.defined() ? ids.str() : "an undefined tensor");
    const int64_t T = ids.size(1), past = cache != nullptr ? cache->length() : 0;
    STRATA_CHECK(T >= 1 && past + T <= c_.block_size, "GPT: a sequence of ", past + T, " tokens",
                 past > 0 ? " (with the cache's)" : "", " is longer than block_size ", c_.block_size);
    Tensor pos;
    if (cache != nullptr && cache->is_static()) {
      STRATA_CHECK(!autograd::GradMode::enabled(), "GPT: a static key/value cache is for inference; run it under "
                                                   "autograd::NoGradGuard");
      STRATA_CHECK(static_cast<int64_t>(cache->k.size()) == c_.n_layer && cache->k[0].size(0) == ids.size(0),
                   "GPT: the static cache was made for another model or batch (", cache->k.size(), " layers, batch ",
                   cache->k.empty() ? 0 : cache->k[0].size(0), ")");
      // Inside a capture the step's host writes are the caller's, before each launch.
      if (!ops::direct::capturing()) cache->advance(T);
      pos = cache->positions(T);
    } else {
      pos = arange(past, past + T).to(ids.device());
    }
    Tensor x = autograd::add(p_, wte_.forward(ids), wpe_.forward(pos));  // [B, T, C] + [T, C]
    for (size_t i = 0; i < h_.size(); ++i) x = h_[i]->forward(x, cache, i);
    x = ln_f_->forward(x);
    return autograd::matmul(p_, x, autograd::transpose(p_, wte_.weight(), 0, 1));  // tied output projection
  }
}

template <class P>
KvCache Gpt<P>::static_cache(int64_t batch, int64_t capacity) const {
  STRATA_CHECK(batch >= 1 && capacity >= 1 && capacity <= c_.block_size, "GPT: a static cache of batch ", batch,
               " and ", capacity, " positions (1 to block_size ", c_.block_size, ")");
  const Device dev = wte_.weight().device();
  KvCache c;
  c.capacity = capacity;
  const Shape rows{batch, c_.n_head, capacity, c_.n_embd / c_.n_head};
  for (int64_t i = 0; i < c_.n_layer; ++i) {
    c.k.push_back(zeros(rows, c_.dtype, dev));
    c.v.push_back(zeros(rows, c_.dtype, dev));
  }
  c.slots = zeros(Shape{capacity + 1}, DType::i64, dev);
  return c;
}

void KvCache::advance(int64_t tokens) {
  STRATA_CHECK(is_static(), "KvCache::advance: a growing cache advances by itself");
  STRATA_CHECK(tokens >= 1 && filled + tokens <= capacity, "KvCache: ", tokens, " more tokens after ", filled,
               " do not fit its ", capacity, " positions");
  std::vector<int64_t> v(static_cast<size_t>(tokens) + 1);
  for (int64_t i = 0; i < tokens; ++i) v[static_cast<size_t>(i)] = filled + i;
  filled += tokens;
  v.back() = filled;
  copy_into(Tensor::from_vector(v, Shape{tokens + 1}), slots.narrow(0, 0, tokens + 1));
}

#define STRATA_NN_INSTANTIATE(P) \
  template class Embedding<P>;   \
  template class LayerNorm<P>;   \
  template class CausalSelfAttention<P>; \
  template class GptMlp<P>;      \
  template class GptBlock<P>;    \
  template class Gpt<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
