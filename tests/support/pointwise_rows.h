#pragma once
// The rows of ops/table/pointwise.def as test data: each formula's name, parameters to call
// it with, the inputs to draw (its domain), and an independent double-precision formula from
// <cmath> that the reference backend's values are checked against (the row's own functor
// cannot be its own oracle). A row of the .def without an entry here fails
// PointwiseRows.EveryRowHasAnIndependentFormula.
#include <cmath>
#include <functional>
#include <string_view>
#include <vector>

#include "strata/ops/table/pointwise.h"
#include "support/random.h"

namespace strata::testing {

struct UnaryRow {
  ops::UnaryFn fn;
  double p0 = 0.0, p1 = 0.0;
  std::function<double(double)> expect;  // y = f(x), independently of pointwise.def
};
struct BinaryRow {
  ops::BinaryFn fn;
  std::function<double(double, double)> expect;
};

inline const std::vector<UnaryRow>& unary_rows() {
  using ops::UnaryFn;
  static const std::vector<UnaryRow> rows = {
      {UnaryFn::neg, 0, 0, [](double x) { return -x; }},
      {UnaryFn::exp, 0, 0, [](double x) { return std::exp(x); }},
      {UnaryFn::log, 0, 0, [](double x) { return std::log(x); }},
      {UnaryFn::sqrt, 0, 0, [](double x) { return std::sqrt(x); }},
      {UnaryFn::rsqrt, 0, 0, [](double x) { return 1.0 / std::sqrt(x); }},
      {UnaryFn::sigmoid, 0, 0, [](double x) { return 0.5 * (1.0 + std::tanh(0.5 * x)); }},
      {UnaryFn::tanh, 0, 0, [](double x) { return std::tanh(x); }},
      {UnaryFn::abs, 0, 0, [](double x) { return std::fabs(x); }},
      {UnaryFn::gelu_tanh, 0, 0,
       [](double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }},
      {UnaryFn::gelu, 0, 0, [](double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); }},
      {UnaryFn::pow_scalar, 2.5, 0, [](double x) { return std::pow(x, 2.5); }},
      {UnaryFn::clamp, -0.3, 0.4, [](double x) { return std::fmin(std::fmax(x, -0.3), 0.4); }},
  };
  return rows;
}

inline const std::vector<BinaryRow>& binary_rows() {
  using ops::BinaryFn;
  static const std::vector<BinaryRow> rows = {
      {BinaryFn::sub, [](double a, double b) { return a - b; }},
      {BinaryFn::mul, [](double a, double b) { return a * b; }},
      {BinaryFn::div, [](double a, double b) { return a / b; }},
      {BinaryFn::maximum, [](double a, double b) { return std::fmax(a, b); }},
      {BinaryFn::minimum, [](double a, double b) { return std::fmin(a, b); }},
      {BinaryFn::pow, [](double a, double b) { return std::exp(b * std::log(a)); }},
  };
  return rows;
}

inline ops::PointwiseDomain domain_of(ops::UnaryFn fn) {
  return ops::visit_unary(fn, [](auto f) { return ops::UnaryFunctor<decltype(f)::value>::kDomain; });
}
inline ops::PointwiseDomain domain_of(ops::BinaryFn fn) {
  return ops::visit_binary(fn, [](auto f) { return ops::BinaryFunctor<decltype(f)::value>::kDomain; });
}

// Random inputs in an op's domain: any in [-2, 2], positive in [0.2, 2], nonzero with
// magnitudes in [0.2, 2] (signs mixed).
inline Tensor domain_tensor(ops::PointwiseDomain dom, const Shape& sizes, DType dt, uint64_t seed,
                            MemoryFormat fmt = MemoryFormat::contiguous) {
  if (dom == ops::PointwiseDomain::any) return random_tensor(sizes, dt, seed, -2.0, 2.0, fmt);
  Tensor t = random_tensor(sizes, DType::f64, seed, 0.2, 2.0);
  if (dom == ops::PointwiseDomain::nonzero) {
    double* p = t.data<double>();
    for (int64_t i = 0; i < t.numel(); i += 2) p[i] = -p[i];
  }
  Tensor out = Tensor::empty(sizes, dt, Device::cpu(), fmt);
  copy_into(t, out);
  return out;
}

}  // namespace strata::testing
