// Reductions: sum and mean of all elements to a rank-0 y; argmax along the last
// dim of x [N,C] (the first maximum wins).
#include <cmath>

#include "strata/backends/reference/reference_backend.h"
#include "strata/backends/reference/strided.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using ref::for_each_element;
using ref::off2;
using ref::visit_float;

namespace {

template <class T>
double total(const TensorView& v) {
  const T* x = v.ptr<T>();
  double acc = 0.0;
  for_each_element([&](int64_t, int64_t o) { acc += static_cast<double>(x[o]); }, v);
  return acc;
}

}  // namespace

void ReferenceBackend::sum(const ReduceArgs& a) {
  visit_float(a.x.dtype, "sum", [&](auto tag) {
    using T = decltype(tag);
    *a.y.ptr<T>() = static_cast<T>(total<T>(a.x));
  });
}

void ReferenceBackend::mean(const ReduceArgs& a) {
  visit_float(a.x.dtype, "mean", [&](auto tag) {
    using T = decltype(tag);
    // The mean of no elements is NaN, as in PyTorch.
    *a.y.ptr<T>() = static_cast<T>(total<T>(a.x) / static_cast<double>(a.x.numel()));
  });
}

void ReferenceBackend::argmax(const ArgmaxArgs& a) {
  visit_float(a.x.dtype, "argmax", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.x.ptr<T>();
    int64_t* y = a.y.ptr<int64_t>();
    const int64_t N = a.x.sizes[0], C = a.x.sizes[1];
    for (int64_t n = 0; n < N; ++n) {
      int64_t best = 0;
      T m = x[off2(a.x, n, 0)];
      for (int64_t c = 1; c < C; ++c) {
        const T v = x[off2(a.x, n, c)];
        // A strictly larger value, or the first NaN (NaN is the maximum, as in PyTorch).
        if (v > m || (std::isnan(v) && !std::isnan(m))) {
          m = v;
          best = c;
        }
      }
      y[n * a.y.strides[0]] = best;
    }
  });
}

}  // namespace strata::backends
