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

// The inference epilogue of batch norm and conv2d (op_args.h): y = relu?(y + z) in place,
// each step rounded to T as the separate add and ReLU ops round it, so the fused call is
// bitwise those ops.
template <class T, class Args>
void residual_relu_epilogue(const Args& a) {
  T* y = a.y.template ptr<T>();
  const auto relu = [&](double v) { return static_cast<T>(a.relu && !(v > 0.0) ? 0.0 : v); };
  if (a.z.defined) {
    const T* z = a.z.template ptr<T>();
    for_each_element(
        [&](int64_t, int64_t oy, int64_t oz) {
          y[oy] = relu(static_cast<double>(static_cast<T>(static_cast<double>(y[oy]) + static_cast<double>(z[oz]))));
        },
        a.y, a.z);
  } else if (a.relu) {
    for_each_element([&](int64_t, int64_t oy) { y[oy] = relu(static_cast<double>(y[oy])); }, a.y);
  }
}

}  // namespace strata::backends::ref
