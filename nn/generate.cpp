#include "strata/nn/generate.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/random.h"
#include "strata/nn/policy.h"

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
  autograd::NoGradGuard no_grad;
  const int64_t B = prompt.size(0), block = m.config().block_size, vocab = m.config().vocab_size;
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(B));
  const std::vector<int64_t> flat = prompt.to(Device::cpu()).contiguous().to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    rows[b].assign(flat.begin() + b * prompt.size(1), flat.begin() + (b + 1) * prompt.size(1));
  Generator gen(o.seed);
  const Device dev = m.named_parameters().front().second.device();
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
