#pragma once
// Helpers for the reference backend's tests: tensors built around a ReferenceBackend
// called directly (no front end), and central finite differences in f64.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "strata/backends/reference/reference_backend.h"
#include "strata/core/tensor.h"
#include "support/compare.h"
#include "support/random.h"

namespace strata::testing {

using backends::ReferenceBackend;
using ops::Conv2dParams;
using ops::Pool2dParams;

inline constexpr MemoryFormat kNCHW = MemoryFormat::contiguous;
inline constexpr MemoryFormat kNHWC = MemoryFormat::channels_last;

// An f64 tensor filled with NaN, so a test notices any element an op fails to write.
inline Tensor nan_tensor(const Shape& sizes, DType dt = DType::f64, MemoryFormat fmt = kNCHW) {
  Tensor t = Tensor::empty(sizes, dt, Device::cpu(), fmt);
  ReferenceBackend{}.fill({t, NAN});
  return t;
}

inline Tensor scalar_tensor(double v, DType dt = DType::f64) {
  Tensor t = Tensor::empty(Shape{}, dt);
  ReferenceBackend{}.fill({t, v});
  return t;
}

inline Tensor from_values(const std::vector<double>& v, const Shape& sizes, DType dt = DType::f64,
                          MemoryFormat fmt = kNCHW) {
  Tensor src = Tensor::from_vector(v, sizes);
  Tensor out = Tensor::empty(sizes, dt, Device::cpu(), fmt);
  copy_into(src, out);
  return out;
}

// Distinct values spread evenly over [-1, 1) in random order: no ties and no two
// values closer than 2/numel, so a finite-difference step never changes an argmax.
inline Tensor distinct_tensor(const Shape& sizes, uint64_t seed, MemoryFormat fmt = kNCHW) {
  const int64_t n = sizes.numel();
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n);
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  return from_values(v, sizes, DType::f64, fmt);
}

// Storage offsets (in elements, from data_ptr()) of every element in row-major order.
inline std::vector<int64_t> element_offsets(const Tensor& t) {
  const Shape& s = t.sizes();
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(t.numel()));
  std::vector<int64_t> idx(static_cast<size_t>(s.size()), 0);
  for (int64_t k = 0; k < t.numel(); ++k) {
    int64_t o = 0;
    for (int d = 0; d < s.size(); ++d) o += idx[d] * t.strides()[d];
    out.push_back(o);
    for (int d = s.size() - 1; d >= 0; --d) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// sum(a * b) over all elements, in double.
inline double dot(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  double s = 0.0;
  for (size_t i = 0; i < va.size(); ++i) s += va[i] * vb[i];
  return s;
}

// d loss / d t by central differences, one element of the f64 tensor t at a time
// (t is perturbed in place and restored). Returns a contiguous f64 tensor.
inline Tensor numeric_grad(const Tensor& t, const std::function<double()>& loss, double eps = 1e-6) {
  double* p = t.data<double>();
  std::vector<double> g;
  for (int64_t o : element_offsets(t)) {
    const double orig = p[o];
    p[o] = orig + eps;
    const double up = loss();
    p[o] = orig - eps;
    const double down = loss();
    p[o] = orig;
    g.push_back((up - down) / (2.0 * eps));
  }
  return Tensor::from_vector(g, t.sizes());
}

// Gradient-check tolerance: relative (norm-wise) error of the analytic gradient.
inline constexpr double kGradTol = 1e-6;

inline ::testing::AssertionResult grad_matches(const char* what, const Tensor& analytic, const Tensor& numeric) {
  auto r = close(analytic, numeric, kGradTol);
  if (!r) r << " [" << what << "]";
  return r;
}

}  // namespace strata::testing
