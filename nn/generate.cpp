#include "strata/nn/generate.h"

#include <algorithm>
#include <memory>
#include <type_traits>
#include <cmath>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/factories.h"
#include "strata/core/random.h"
#include "strata/nn/policy.h"
#include "strata/ops/direct/graph_capture.h"
#include "strata/ops/functional.h"
#include "strata/ops/tensor_ops.h"

namespace strata::nn {

namespace {
// A token from one row of logits: the first largest (greedy), or a draw from the softmax of the
// k largest divided by the temperature.
int64_t pick(std::vector<double> row, const GenerateOptions& o, Generator& gen) {
  const int64_t v = static_cast<int64_t>(row.size());
  const auto largest = std::max_element(row.begin(), row.end());
  if (o.temperature == 0.0) return largest - row.begin();
  if (o.top_k > 0 && o.top_k < v) {
    std::vector<double> sorted = row;
    std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(), std::greater<>());
    const double kth = sorted[static_cast<size_t>(o.top_k - 1)];
    for (double& x : row)
      if (x < kth) x = -INFINITY;
  }
  const double mx = *largest;
  double total = 0;
  for (double& x : row) total += (x = std::exp((x - mx) / o.temperature));
  double u = gen.uniform() * total;
  for (int64_t i = 0; i < v; ++i) {
    if (u < row[static_cast<size_t>(i)]) return i;
    u -= row[static_cast<size_t>(i)];
  }
  return largest - row.begin();  // rounding left u past the last weight
}

// The last position's logits of each row, as host rows.
std::vector<std::vector<double>> last_rows(const Tensor& logits) {
  const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
  const std::vector<double> last = logits.narrow(1, T - 1, 1).to(Device::cpu()).contiguous().to_vector<double>();
  std::vector<std::vector<double>> r(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) r[b].assign(last.begin() + b * V, last.begin() + (b + 1) * V);
  return r;
}

// The dispatch of the decoding loop's own ops (the greedy argmax, its copy into the next step's
// input): the model's in the tape modes, its backend's static dispatch in direct mode (a front-end
// call per token beside the planned step).
template <class P>
auto loop_dispatch(const P& p) {
  if constexpr (is_direct_v<P>)
    return ops::StaticDispatch<typename P::Backend>(*p.impl);
  else
    return p;
}

template <class P>
constexpr bool kCapturable = [] {
  if constexpr (requires { *std::declval<P>().impl; })
    return ops::direct::CapturesGraphs<std::remove_pointer_t<decltype(std::declval<P>().impl)>>;
  else
    return false;
}();

// Decoding over a static cache: the prompt's step, then one step per token, captured once
// after the first of them when o.graph asks for it (generate.h).
template <class P>
void decode_static(Gpt<P>& m, const Tensor& prompt, const GenerateOptions& o, Generator& gen,
                   std::vector<std::vector<int64_t>>& rows) {
  const int64_t B = prompt.size(0);
  const auto p = loop_dispatch(m.policy());
  KvCache cache = m.static_cache(B, prompt.size(1) + o.new_tokens);
  auto take = [&](const std::vector<std::vector<double>>& last) {
    for (int64_t b = 0; b < B; ++b) rows[b].push_back(pick(last[b], o, gen));
  };
  take(last_rows(m.forward(prompt, &cache)));
  const bool greedy = o.temperature == 0.0;
  const Tensor ids = zeros(Shape{B, 1}, DType::i64, prompt.device());  // the step's input
  auto write_ids = [&] {
    std::vector<int64_t> v;
    for (const auto& r : rows) v.push_back(r.back());
    copy_into(Tensor::from_vector(v, Shape{B, 1}), ids);
  };
  Tensor logits;  // the step's output (the graph's memory once captured)
  auto step = [&] {
    logits = m.forward(ids, &cache);
    // Greedy: the token picked on the device and fed to the next step without the host.
    if (greedy) ops::copy_(p, ops::reduce(p, ops::ReduceFn::argmax, logits, std::vector<int>{2}, false), ids);
  };
  std::unique_ptr<ops::direct::CapturedGraph> graph;
  write_ids();
  for (int64_t t = 1; t < o.new_tokens; ++t) {
    if (!greedy && t > 1) write_ids();
    if (!o.graph || t == 1) {
      step();  // advances the cache itself
    } else {
      if constexpr (kCapturable<P>) {
        if (!graph) graph = ops::direct::capture_step(*m.policy().impl, step);
        cache.advance(1);
        graph->launch();
      }
    }
    if (greedy) {
      const std::vector<int64_t> v = ids.to(Device::cpu()).to_vector<int64_t>();
      for (int64_t b = 0; b < B; ++b) rows[b].push_back(v[b]);
    } else {
      take(last_rows(logits));
    }
  }
}

}  // namespace

template <class P>
Tensor generate(Gpt<P>& m, const Tensor& prompt, const GenerateOptions& o) {
  STRATA_CHECK(prompt.defined() && prompt.dim() == 2 && prompt.size(1) >= 1 &&
                   (prompt.dtype() == DType::i64 || prompt.dtype() == DType::i32),
               "generate: the prompt must be integer token ids [B, T] with T >= 1, got ",
               prompt.defined() ? prompt.str() : "an undefined tensor");
  STRATA_CHECK(o.new_tokens >= 0 && o.temperature >= 0 && std::isfinite(o.temperature) && o.top_k >= 0,
               "generate: new_tokens ", o.new_tokens, ", temperature ", o.temperature, " and top_k ", o.top_k,
               " must be >= 0 (temperature finite)");
  if constexpr (!kCapturable<P>)
    STRATA_CHECK(!o.graph, "generate: graph decoding captures the decoding step, so it needs a model in static or "
                           "direct mode on a backend with graphs (cuda)");
  autograd::NoGradGuard no_grad;
  const int64_t B = prompt.size(0), block = m.config().block_size, vocab = m.config().vocab_size;
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(B));
  const std::vector<int64_t> flat = prompt.to(Device::cpu()).contiguous().to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    rows[b].assign(flat.begin() + b * prompt.size(1), flat.begin() + (b + 1) * prompt.size(1));
  Generator gen(o.seed);
  const Device dev = m.named_parameters().front().second.device();
  if (o.graph || o.static_cache || is_direct_v<P>) {  // direct mode plans its steps: a static cache always
    STRATA_CHECK(prompt.size(1) + o.new_tokens <= block, "generate: a static cache",
                 is_direct_v<P> ? " (direct mode decodes over one)" : "", " holds block_size ", block,
                 " positions, fewer than the prompt's ", prompt.size(1), " and ", o.new_tokens, " new tokens");
    if (o.new_tokens > 0) decode_static(m, Tensor::from_vector(flat, prompt.sizes()).to(dev), o, gen, rows);
    std::vector<int64_t> out;
    for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
    return Tensor::from_vector(out, Shape{B, static_cast<int64_t>(rows[0].size())});
  }
  // While the whole sequence fits the context, the keys and values of the tokens so far are
  // cached and each step runs the newest token alone; past block_size the window slides and
  // every step runs it again.
  KvCache cache;
  const bool cached = prompt.size(1) + o.new_tokens <= block;
  for (int64_t step = 0; step < o.new_tokens; ++step) {
    const int64_t len = static_cast<int64_t>(rows[0].size());
    const int64_t window = cached ? (step == 0 ? len : 1) : std::min(len, block);
    std::vector<int64_t> ids;
    for (const auto& r : rows) ids.insert(ids.end(), r.end() - window, r.end());
    const Tensor in = Tensor::from_vector(ids, Shape{B, window}).to(dev);
    const Tensor logits = cached ? m.forward(in, &cache) : m.forward(in);  // [B, window, vocab]
    const std::vector<double> last = logits.slice(1, window - 1, window).to(Device::cpu()).contiguous().to_vector<double>();
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> row(last.begin() + b * vocab, last.begin() + (b + 1) * vocab);
      rows[b].push_back(pick(std::move(row), o, gen));
    }
  }
  std::vector<int64_t> out;
  for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
  return Tensor::from_vector(out, Shape{B, static_cast<int64_t>(rows[0].size())});
}

#define STRATA_NN_INSTANTIATE(P) template Tensor generate<P>(Gpt<P>&, const Tensor&, const GenerateOptions&);
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
