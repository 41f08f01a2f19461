#include "support/compare.h"

#include <cmath>
#include <cstring>

namespace strata::testing {

double relative_error(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector<double>();
  const auto vb = b.to_vector<double>();
  double num = 0, den = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    num += (va[i] - vb[i]) * (va[i] - vb[i]);
    den += vb[i] * vb[i];
  }
  if (std::isnan(num)) return INFINITY;
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector<double>();
  const auto vb = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    const double d = std::fabs(va[i] - vb[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << "shapes/dtypes differ: " << a.str() << " vs " << b.str();
  // Dense host copies (a device tensor's bytes are read through a copy).
  const auto host = [](const Tensor& t) {
    if (t.device().is_cpu()) return t.contiguous();
    Tensor h = Tensor::empty(t.sizes(), t.dtype(), Device::cpu());
    copy_into(t, h);
    return h;
  };
  const Tensor ca = host(a), cb = host(b);
  // Empty tensors have no storage: memcmp with a null pointer is undefined even for 0 bytes.
  if (ca.nbytes() != 0 && std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) != 0)
    return ::testing::AssertionFailure() << "values differ bitwise (" << a.str() << "), max |diff| "
                                         << max_abs_diff(a, b);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult close(const Tensor& a, const Tensor& b, double tol) {
  if (a.sizes() != b.sizes())
    return ::testing::AssertionFailure() << "shapes differ: " << a.str() << " vs " << b.str();
  const double e = relative_error(a, b);
  if (e <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative error " << e << " > " << tol << " for " << a.str()
                                       << " (max |diff| " << max_abs_diff(a, b) << ")";
}

}  // namespace strata::testing
