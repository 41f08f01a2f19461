#pragma once
// Index helpers for the reference backend: element offsets from strides, and
// dtype dispatch over f32/f64. Internal to backends/reference.
#include <array>
#include <cstdint>

#include "strata/core/error.h"
#include "strata/ops/table/tensor_view.h"

namespace strata::backends::ref {

using ops::TensorView;

inline int64_t off4(const ops::TensorView& v, int64_t n, int64_t c, int64_t h, int64_t w) {
  return n * v.strides[0] + c * v.strides[1] + h * v.strides[2] + w * v.strides[3];
}
inline int64_t off2(const ops::TensorView& v, int64_t i, int64_t j) { return i * v.strides[0] + j * v.strides[1]; }

// Calls fn(k, off_0, off_1, ...) for every element k (row-major order of sizes) with
// the element offset in each view. All views must have the sizes of the first.
template <class Fn, class... Views>
void for_each_element(Fn&& fn, const ops::TensorView& first, const Views&... rest) {
  const Shape& s = first.sizes;
  const int nd = s.size();
  const int64_t n = s.numel();
  std::array<int64_t, kMaxDims> idx{};
  for (int64_t k = 0; k < n; ++k) {
    auto offset = [&](const ops::TensorView& v) {
      int64_t o = 0;
      for (int d = 0; d < nd; ++d) o += idx[d] * v.strides[d];
      return o;
    };
    fn(k, offset(first), offset(rest)...);
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
}

// Calls f(T{}) with T = float or double for the view's dtype.
template <class F>
decltype(auto) visit_float(DType t, const char* op, F&& f) {
  if (t == DType::f32) return f(float{});
  if (t == DType::f64) return f(double{});
  STRATA_FAIL(op, ": the reference backend supports f32 and f64, got ", dtype_name(t));
}

}  // namespace strata::backends::ref
