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
#include "strata/ops/direct/steps/cached_attention_step.h"
#include "strata/ops/direct/steps/transformer_steps.h"
#include "strata/ops/tensor_ops.h"
#include "strata/ops/transformer_ops.h"

namespace strata::nn {

namespace {

// t ~ N(0, std^2) from the default generator (GPT-2's initialisation).
void normal_(const Tensor& t, double std) {
  std::vector<double> v = randn(t.sizes(), DType::f64).to_vector<double>();
  for (double& x : v) x *= std;
  detail::assign_host(t, v);
}

// Direct mode refuses a growing key/value cache: it decodes over a static one.
template <class P>
void no_growing_cache_in_direct_mode(std::string_view layer, const KvCache* cache) {
  if constexpr (is_direct_v<P>)
    STRATA_CHECK(cache == nullptr || cache->is_static(), layer,
                 ": a growing key/value cache runs in the tape modes (virtual, static); direct mode plans its steps "
                 "once per length, so it decodes over a static cache (Gpt::static_cache)");
}

// The tape modes' attention over qkv [B, T, 3C]: slice i (q, k, v) as the heads' [B, H, T, D],
// and the heads' outputs [B, H, T, D] side by side as [B, T, H * D].
template <class Tape>
Tensor heads_of(const Tape& tape, const Tensor& qkv, int i, int64_t heads) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  const Tensor part = autograd::slice(tape, qkv, 2, i * C, (i + 1) * C);
  return autograd::transpose(tape, autograd::reshape(tape, part, {B, T, heads, C / heads}), 1, 2);
}
template <class Tape>
Tensor side_by_side(const Tape& tape, const Tensor& y) {
  return autograd::reshape(tape, autograd::transpose(tape, y, 1, 2), {y.size(0), y.size(2), y.size(1) * y.size(3)});
}

}  // namespace

template <class P>
template <class F>
Tensor detail::LastDimRows<P>::forward(const P& p, const Tensor& x, int64_t out, const Tensor& z, F&& f) {
  const Shape rows{x.numel() / x.size(x.dim() - 1), x.size(x.dim() - 1)}, out_rows{rows[0], out};
  Shape back = x.sizes();
  back[back.size() - 1] = out;
  const Tensor in = rows_.forward(p, x, [&](const auto& tape) { return autograd::reshape(tape, x, rows); }, rows);
  Tensor zr;
  if (z.defined())
    zr = z_rows_.forward(p, z, [&](const auto& tape) { return autograd::reshape(tape, z, out_rows); }, out_rows);
  const Tensor y = f(in, zr);
  return unfold_.forward(p, y, [&](const auto& tape) { return autograd::reshape(tape, y, back); }, back);
}

template <class P>
template <class F>
Tensor detail::LastDimRows<P>::backward(const Module& m, const Tensor& dy, F&& back) {
  if constexpr (is_direct_v<P>)
    return rows_.backward(m, back(unfold_.backward(m, dy)));
  else
    STRATA_FAIL(m.type_name(), "::backward runs in direct mode only; in the tape modes call autograd::backward(loss)");
}

template <class P>
Tensor detail::LastDimLinear<P>::forward(const P& p, Linear<P>& lin, const Tensor& x, int64_t out, const Tensor& z) {
  return rows_.forward(p, x, out, z, [&](const Tensor& in, const Tensor& zr) {
    return zr.defined() ? lin.forward_add(in, zr) : lin.forward(in);
  });
}

template <class P>
Tensor detail::LastDimLinear<P>::forward_normed(const P& p, Linear<P>& lin, const Tensor& x, int64_t out,
                                                const LayerNorm<P>& norm) {
  return rows_.forward(p, x, out, Tensor(), [&](const Tensor& in, const Tensor&) {
    return lin.forward_normed(in, norm.weight(), norm.bias(), norm.eps());
  });
}

template <class P>
Tensor detail::LastDimLinear<P>::backward(const Module& m, Linear<P>& lin, const Tensor& dy) {
  return rows_.backward(m, dy, [&](const Tensor& d) { return lin.backward(d); });
}

template <class P>
Embedding<P>::Embedding(const P& p, int64_t num, int64_t dim, DType dt) : p_(p), num_(num), dim_(dim) {
  STRATA_CHECK(num > 0 && dim > 0, "Embedding: invalid configuration num=", num, " dim=", dim);
  weight_ = register_parameter("weight", detail::make_filled(p_.device(), Shape{num, dim}, dt, 0.0));
  normal_(weight_, 1.0);  // torch.nn.Embedding's N(0, 1)
}

template <class P>
Embedding<P>::~Embedding() = default;

template <class P>
std::string Embedding<P>::extra_repr() const {
  return std::to_string(num_) + ", " + std::to_string(dim_);
}

template <class P>
Tensor Embedding<P>::forward(const Tensor& ids) {
  STRATA_CHECK(ids.defined(), "Embedding: ids are an undefined tensor");
  return direct_.forward(
      p_, ids,
      [&](const auto& tape) {
        const Tensor flat = ids.contiguous().view(Shape{ids.numel()});
        Shape out = ids.sizes();
        out.push_back(dim_);
        return autograd::reshape(tape, autograd::index_select(tape, weight_, 0, flat), out);
      },
      weight_);
}

template <class P>
Tensor Embedding<P>::backward(const Tensor& dy) {
  return backward_tied(dy, Tensor());
}

template <class P>
Tensor Embedding<P>::backward_tied(const Tensor& dy, const Tensor& later) {
  if constexpr (is_direct_v<P>) {
    direct_.latest_step("Embedding").backward(dy, later);
    return Tensor();
  } else {
    return Module::backward(dy);
  }
}

template <class P>
int64_t Embedding<P>::plans_made() const {
  return direct_.plans_made();
}

template <class P>
LayerNorm<P>::LayerNorm(const P& p, int64_t dim, double eps, DType dt) : p_(p), dim_(dim), eps_(eps) {
  STRATA_CHECK(dim > 0 && eps > 0, "LayerNorm: invalid configuration dim=", dim, " eps=", eps);
  weight_ = register_parameter("weight", detail::make_filled(p_.device(), Shape{dim}, dt, 1.0));
  bias_ = register_parameter("bias", detail::make_filled(p_.device(), Shape{dim}, dt, 0.0));
}

template <class P>
LayerNorm<P>::~LayerNorm() = default;

template <class P>
std::string LayerNorm<P>::extra_repr() const {
  std::string s = "(";  // appended, not "(" + ...: GCC 12 warns falsely (-Wrestrict) on that form
  s += std::to_string(dim_) + ",), eps=" + std::to_string(eps_);
  return s;
}

template <class P>
Tensor LayerNorm<P>::forward(const Tensor& x) {
  STRATA_CHECK(x.defined() && x.dim() >= 1 && x.size(x.dim() - 1) == dim_, "LayerNorm: input ",
               x.defined() ? x.str() : "(undefined)", " does not end in ", dim_);
  return direct_.forward(
      p_, x,
      [&](const auto& tape) {  // the parameters in x's dtype (mixed precision), as WeightedStep plans them
        return autograd::layer_norm(tape, x, detail::compute_cast(tape, weight_, x),
                                    detail::compute_cast(tape, bias_, x), eps_);
      },
      weight_, bias_, eps_);
}

template <class P>
Tensor LayerNorm<P>::backward(const Tensor& dy) {
  return direct_.backward(*this, dy);
}

template <class P>
int64_t LayerNorm<P>::plans_made() const {
  return direct_.plans_made();
}

template <class P>
CausalSelfAttention<P>::CausalSelfAttention(const P& p, const GptConfig& c)
    : p_(p), n_head_(c.n_head), n_embd_(c.n_embd),
      c_attn_(register_module("c_attn", std::make_unique<Linear<P>>(p, c.n_embd, 3 * c.n_embd, LinearOptions{true, c.dtype}))),
      c_proj_(register_module("c_proj", std::make_unique<Linear<P>>(p, c.n_embd, c.n_embd, LinearOptions{true, c.dtype}))) {
  STRATA_CHECK(c.n_head > 0 && c.n_embd % c.n_head == 0, "CausalSelfAttention: n_embd ", c.n_embd,
               " is not a multiple of n_head ", c.n_head);
}

template <class P>
CausalSelfAttention<P>::~CausalSelfAttention() = default;

template <class P>
Tensor CausalSelfAttention<P>::forward(const Tensor& x, KvCache* cache, size_t layer, const Tensor& residual,
                                       const LayerNorm<P>* norm) {
  STRATA_CHECK(x.defined() && x.dim() == 3 && x.size(2) == n_embd_, "CausalSelfAttention: input ",
               x.defined() ? x.str() : "(undefined)", " is not [B, T, ", n_embd_, "]");
  no_growing_cache_in_direct_mode<P>("CausalSelfAttention", cache);
  STRATA_CHECK(cache == nullptr || !cache->is_static() || layer < cache->k.size(), "CausalSelfAttention: layer ",
               layer, " of a static cache of ", cache ? cache->k.size() : 0, " layers");
  const int64_t C = n_embd_;
  const Tensor qkv = norm ? qkv_.forward_normed(p_, c_attn_, x, 3 * C, *norm) : qkv_.forward(p_, c_attn_, x, 3 * C);
  decoded_ = cache != nullptr;
  if (cache != nullptr) return proj_.forward(p_, c_proj_, forward_cached(qkv, *cache, layer), C, residual);
  const Tensor y = attend_.forward(
      p_, qkv,
      [&](const auto& tape) {
        // In this order (the tape's node order, which orders the slices' gradient sum).
        const Tensor q = heads_of(tape, qkv, 0, n_head_), k = heads_of(tape, qkv, 1, n_head_),
                     v = heads_of(tape, qkv, 2, n_head_);
        return side_by_side(tape, autograd::scaled_dot_product_attention(tape, q, k, v, true));
      },
      n_head_);
  return proj_.forward(p_, c_proj_, y, C, residual);
}

// The tape modes' decoding: the new tokens' keys and values join the cache's, and each query
// attends over them (y [B, T, C], the heads side by side).
template <class P>
Tensor CausalSelfAttention<P>::forward_cached(const Tensor& qkv, KvCache& cache, size_t layer) {
  const int64_t T = qkv.size(1);
  if constexpr (is_direct_v<P>) {  // a static cache (a growing one is refused in forward)
    return attend_cached_.forward_keyed(
        p_, qkv, detail::plan_key_of(cache.k[layer]), [](const auto&) { return Tensor(); }, n_head_, cache.k[layer],
        cache.v[layer], cache.positions(T), cache.held(T));
  } else {
    const Tensor q = heads_of(p_, qkv, 0, n_head_);
    Tensor k = heads_of(p_, qkv, 1, n_head_), v = heads_of(p_, qkv, 2, n_head_);
    if (cache.is_static()) {
      // The new rows written at their positions by the attention op; the keys are the first
      // `held` rows. No tape: a static cache is for inference (checked in Gpt::forward).
      const double scale = 1.0 / std::sqrt(static_cast<double>(k.size(3)));
      return side_by_side(p_, ops::attention(p_, q, cache.k[layer], cache.v[layer], true, scale, cache.held(T), k, v,
                                             cache.positions(T))
                                  .y);
    }
    if (cache.k.size() <= layer) cache.k.resize(layer + 1), cache.v.resize(layer + 1);
    if (cache.k[layer].defined()) {
      const Tensor ks[] = {cache.k[layer], k}, vs[] = {cache.v[layer], v};
      k = autograd::cat(p_, std::span<const Tensor>(ks), 2);
      v = autograd::cat(p_, std::span<const Tensor>(vs), 2);
    }
    cache.k[layer] = k;
    cache.v[layer] = v;
    // Query i of these T sees the cached keys and the new ones up to itself: the causal rule
    // with the queries as the last T of the past + T keys.
    return side_by_side(p_, autograd::scaled_dot_product_attention(p_, q, k, v, true));
  }
}

template <class P>
Tensor CausalSelfAttention<P>::backward(const Tensor& dy) {
  if constexpr (is_direct_v<P>)
    STRATA_CHECK(!decoded_, "CausalSelfAttention: no backward through a decoding step over a key/value cache (a "
                            "cache is for inference)");
  return detail::explicit_backward<P>(*this, dy, [&] {
    const Tensor dqkv = attend_.backward(*this, proj_.backward(*this, c_proj_, dy));
    return qkv_.backward(*this, c_attn_, dqkv);
  });
}

template <class P>
int64_t CausalSelfAttention<P>::plans_made() const {
  return attend_.plans_made();
}

template <class P>
GptMlp<P>::GptMlp(const P& p, const GptConfig& c)
    : p_(p),
      c_fc_(register_module("c_fc", std::make_unique<Linear<P>>(p, c.n_embd, 4 * c.n_embd, LinearOptions{true, c.dtype}))),
      c_proj_(register_module("c_proj", std::make_unique<Linear<P>>(p, 4 * c.n_embd, c.n_embd, LinearOptions{true, c.dtype}))) {}

template <class P>
GptMlp<P>::~GptMlp() = default;

template <class P>
Tensor GptMlp<P>::forward(const Tensor& x, const Tensor& residual, const LayerNorm<P>* norm) {
  constexpr ops::UnaryFn act = ops::UnaryFn::gelu_tanh;
  const Tensor &w1 = c_fc_.weight(), &b1 = c_fc_.bias(), &w2 = c_proj_.weight(), &b2 = c_proj_.bias();
  normed_ = norm != nullptr;
  if (norm) {  // inference: the layer norm in c_fc's prologue; no tape (ops::, not autograd::)
    STRATA_CHECK(!autograd::GradMode::enabled(), "MLP: a product with a layer-norm prologue is for inference");
    const Tensor &nw = norm->weight(), &nb = norm->bias();
    return rows_.forward(p_, x, x.size(x.dim() - 1), residual, [&](const Tensor& in, const Tensor& z) {
      return mlp_normed_.forward_keyed(
          p_, in, z.defined() ? detail::plan_key_of(z) : 0,
          [&](const auto& d) {
            const Tensor h = ops::linear_norm(d, in, detail::compute_cast(d, nw, in), detail::compute_cast(d, nb, in),
                                              norm->eps(), w1_cast_(d, w1, in), b1_cast_(d, b1, in), act);
            const Tensor w2c = w2_cast_(d, w2, in), b2c = b2_cast_(d, b2, in);
            return z.defined() ? ops::linear_add(d, h, w2c, b2c, z) : ops::linear(d, h, w2c, b2c);
          },
          w1, b1, w2, b2, act, z, nw, nb, std::optional<double>(norm->eps()));
    });
  }
  return rows_.forward(p_, x, x.size(x.dim() - 1), residual, [&](const Tensor& in, const Tensor& z) {
    return mlp_.forward_keyed(
        p_, in, z.defined() ? detail::plan_key_of(z) : 0,
        [&](const auto& tape) {
          return autograd::mlp(tape, in, w1_cast_(tape, w1, in), b1_cast_(tape, b1, in), w2_cast_(tape, w2, in),
                               b2_cast_(tape, b2, in), act, z);
        },
        w1, b1, w2, b2, act, z);
  });
}

template <class P>
Tensor GptMlp<P>::backward(const Tensor& dy) {
  if constexpr (is_direct_v<P>)
    if (normed_) ops::direct::no_normed_backward("MLP");
  return detail::explicit_backward<P>(
      *this, dy, [&] { return rows_.backward(*this, dy, [&](const Tensor& d) { return mlp_.backward(*this, d); }); });
}

template <class P>
GptBlock<P>::GptBlock(const P& p, const GptConfig& c)
    : p_(p),
      ln_1_(register_module("ln_1", std::make_unique<LayerNorm<P>>(p, c.n_embd, c.layer_norm_eps, c.dtype))),
      attn_(register_module("attn", std::make_unique<CausalSelfAttention<P>>(p, c))),
      ln_2_(register_module("ln_2", std::make_unique<LayerNorm<P>>(p, c.n_embd, c.layer_norm_eps, c.dtype))),
      mlp_(register_module("mlp", std::make_unique<GptMlp<P>>(p, c))), attn_add_(p), mlp_add_(p) {}

template <class P>
Tensor GptBlock<P>::forward(const Tensor& x, KvCache* cache, size_t layer) {
  if (cache != nullptr && cache->is_static()) {
    // Inference (a static cache has no tape): each layer norm runs in the prologue of the product
    // that reads it, where a decoding step's one row paid a layer-norm kernel before each.
    const Tensor h = attn_.forward(x, cache, layer, x, &ln_1_);
    return mlp_.forward(h, h, &ln_2_);
  }
  const Tensor h = attn_.forward(ln_1_.forward(x), cache, layer, x);
  return mlp_.forward(ln_2_.forward(h), h);
}

template <class P>
Tensor GptBlock<P>::backward(const Tensor& dy) {
  return detail::explicit_backward<P>(*this, dy, [&] {
    const Tensor dh = mlp_add_.accumulate(dy, ln_2_.backward(mlp_.backward(dy)));
    return attn_add_.accumulate(dh, ln_1_.backward(attn_.backward(dh)));
  });
}

template <class P>
Gpt<P>::Gpt(const P& p, const GptConfig& c)
    : p_(p), c_(c),
      wte_(register_module("wte", std::make_unique<Embedding<P>>(p, c.vocab_size, c.n_embd, c.dtype))),
      wpe_(register_module("wpe", std::make_unique<Embedding<P>>(p, c.block_size, c.n_embd, c.dtype))) {
  STRATA_CHECK(c.n_layer > 0 && c.block_size > 0 && c.vocab_size > 0, "GPT: invalid configuration");
  STRATA_CHECK(c.vocab_multiple >= 1, "GPT: vocab_multiple must be at least 1, got ", c.vocab_multiple);
  STRATA_CHECK(c.pad_head_min_rows >= 0, "GPT: pad_head_min_rows must not be negative, got ", c.pad_head_min_rows);
  STRATA_CHECK(!c.compute_dtype || is_floating(*c.compute_dtype), "GPT: compute_dtype must be floating, got ",
               c.compute_dtype ? dtype_name(*c.compute_dtype) : "");
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
Gpt<P>::~Gpt() = default;

template <class P>
Tensor Gpt<P>::forward(const Tensor& ids, KvCache* cache) {
  STRATA_CHECK(ids.defined() && ids.dim() == 2, "GPT: ids must be [B, T], got ",
               ids.defined() ? ids.str() : "an undefined tensor");
  no_growing_cache_in_direct_mode<P>("GPT", cache);
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
  } else if constexpr (is_direct_v<P>) {
    // Made once per length: the position embedding's plan reads them in place.
    if (positions_.size() <= static_cast<size_t>(T)) positions_.resize(static_cast<size_t>(T) + 1);
    Tensor& made = positions_[static_cast<size_t>(T)];
    if (!made.defined()) made = arange(0, T).to(ids.device());
    pos = made;
  } else {
    pos = arange(past, past + T).to(ids.device());
  }
  const Tensor tok = wte_.forward(ids), at = wpe_.forward(pos);  // [B, T, C] and [T, C]
  const DType compute = c_.compute_dtype.value_or(c_.dtype);
  Tensor x = embed_sum_.forward_keyed(
      p_, tok, detail::plan_key_of(at),
      [&](const auto& tape) { return autograd::cast(tape, autograd::add(tape, tok, at), compute); }, at, compute);
  for (size_t i = 0; i < h_.size(); ++i) x = h_[i]->forward(x, cache, i);
  x = ln_f_->forward(x);
  const Tensor& w = wte_.weight();
  const int64_t v = c_.vocab_size, vp = c_.head_columns(x.numel() / x.size(x.dim() - 1));
  return lm_head_.forward(  // the output projection, tied to wte's weight (in x's dtype)
      p_, x,
      [&](const auto& tape) {
        Tensor wc = detail::compute_cast(tape, w, x);
        if (vp > v) {  // zero rows to the padded vocabulary (GptConfig::vocab_multiple)
          const Tensor rows[] = {wc, ops::full(tape, Shape{vp - v, wc.size(1)}, wc.dtype(), 0.0)};
          wc = autograd::cat(tape, std::span<const Tensor>(rows), 0);
        }
        const Tensor y = autograd::matmul(tape, x, autograd::transpose(tape, wc, 0, 1));
        return vp > v ? autograd::slice(tape, y, -1, 0, v) : y;
      },
      w, vp);
}

template <class P>
Tensor Gpt<P>::backward(const Tensor& dlogits) {
  if constexpr (!is_direct_v<P>) {
    return Module::backward(dlogits);
  } else {
    // Each module's gradients reported complete as soon as they are (grads_ready), in reverse
    // registration order, so that data-parallel training starts each bucket's all-reduce while
    // the blocks below still run backward, where all of them waited for its end.
    auto& head = lm_head_.latest_step("GPT");
    Tensor g = ln_f_->backward(head.backward(dlogits));
    grads_ready(*ln_f_);
    for (auto it = h_.rbegin(); it != h_.rend(); ++it) {
      g = (*it)->backward(g);
      grads_ready(**it);
    }
    auto& sum = embed_sum_.latest_step("GPT");
    const Tensor tok = sum.backward(g);
    wpe_.backward(sum.pos_grad());
    grads_ready(wpe_);
    // The tape reaches wte's weight through the output projection first (the later op).
    wte_.backward_tied(tok, head.weight_grad());
    grads_ready(wte_);
    return Tensor();
  }
}

template <class P>
int64_t Gpt<P>::plans_made() const {
  return lm_head_.plans_made();
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
    c.k.push_back(zeros(rows, c_.compute_dtype.value_or(c_.dtype), dev));
    c.v.push_back(zeros(rows, c_.compute_dtype.value_or(c_.dtype), dev));
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

#define STRATA_NN_INSTANTIATE(P)       \
  template class detail::LastDimLinear<P>; \
  template class Embedding<P>;   \
  template class LayerNorm<P>;   \
  template class CausalSelfAttention<P>; \
  template class GptMlp<P>;      \
  template class GptBlock<P>;    \
  template class Gpt<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
