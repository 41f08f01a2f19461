#pragma once
// Order statistics of a sample of step times, shared by strata's study driver,
// resnet50_gpu and the LibTorch peer (standard library only, so the peer can build
// against nothing but LibTorch). Quantiles interpolate linearly between order
// statistics, as numpy.quantile's default and bench/peers/study_torch.py do, so the
// three report comparable numbers.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <vector>

namespace strata::study {

inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

struct Summary {
  size_t n = 0;
  double median = NAN, p10 = NAN, p90 = NAN, p99 = NAN, min = NAN, max = NAN, mean = NAN;
};

inline Summary summarize(const std::vector<double>& v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  s.median = quantile(v, 0.5);
  s.p10 = quantile(v, 0.1);
  s.p90 = quantile(v, 0.9);
  s.p99 = quantile(v, 0.99);
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return s;
}

// When a timed loop may stop: never before min_repeats steps (the seed's 10), then
// once min_seconds have passed, so that NVML's utilisation and energy counters, which
// update a few times a second, see a window they can resolve; max_repeats bounds the
// tiny points. Big points thus take min_repeats steps and no more.
struct RepeatPolicy {
  int min_repeats = 10;
  int max_repeats = 200;
  double min_seconds = 0.6;

  bool done(int n, double elapsed_s) const {
    if (n >= max_repeats) return true;
    return n >= min_repeats && elapsed_s >= min_seconds;
  }
};

}  // namespace strata::study
