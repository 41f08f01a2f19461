// linear: y[N,out] = x[N,in] * w[out,in]^T + b[out], any strides, sums in double.
#include "strata/backends/api/linear_epilogue.h"
#include "strata/backends/reference/reference_backend.h"
#include "strata/backends/reference/strided.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using ref::off2;
using ref::visit_float;

void ReferenceBackend::linear_fwd(const LinearFwdArgs& a) {
  if (a.act || a.z.defined || a.norm_eps) return linear_fwd_composed(*this, a);
  visit_float(a.x.dtype, "linear_fwd", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.x.ptr<T>();
    const T* w = a.w.ptr<T>();
    const T* b = a.b.defined ? a.b.ptr<T>() : nullptr;
    T* y = a.y.ptr<T>();
    const int64_t N = a.x.sizes[0], I = a.x.sizes[1], O = a.w.sizes[0];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o) {
        double acc = b ? static_cast<double>(b[o * a.b.strides[0]]) : 0.0;
        for (int64_t i = 0; i < I; ++i)
          acc += static_cast<double>(x[off2(a.x, n, i)]) * static_cast<double>(w[off2(a.w, o, i)]);
        y[off2(a.y, n, o)] = static_cast<T>(acc);
      }
  });
}

// dx[n,i] = sum_o dy[n,o] * w[o,i]
void ReferenceBackend::linear_bwd_data(const LinearBwdDataArgs& a) {
  if (a.act) return linear_act_bwd_data_composed(*this, a);
  visit_float(a.dy.dtype, "linear_bwd_data", [&](auto tag) {
    using T = decltype(tag);
    const T* dy = a.dy.ptr<T>();
    const T* w = a.w.ptr<T>();
    T* dx = a.dx.ptr<T>();
    const int64_t N = a.dy.sizes[0], O = a.w.sizes[0], I = a.w.sizes[1];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < I; ++i) {
        double acc = 0.0;
        for (int64_t o = 0; o < O; ++o)
          acc += static_cast<double>(dy[off2(a.dy, n, o)]) * static_cast<double>(w[off2(a.w, o, i)]);
        dx[off2(a.dx, n, i)] = static_cast<T>(acc);
      }
  });
}

// dw[o,i] = sum_n dy[n,o] * x[n,i]; db[o] = sum_n dy[n,o]. Both overwritten.
void ReferenceBackend::linear_bwd_weight(const LinearBwdWeightArgs& a) {
  visit_float(a.x.dtype, "linear_bwd_weight", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.x.ptr<T>();
    const T* dy = a.dy.ptr<T>();
    const int64_t N = a.x.sizes[0], I = a.x.sizes[1], O = a.dy.sizes[1];
    if (a.dw.defined) {
      T* dw = a.dw.ptr<T>();
      for (int64_t o = 0; o < O; ++o)
        for (int64_t i = 0; i < I; ++i) {
          double acc = 0.0;
          for (int64_t n = 0; n < N; ++n)
            acc += static_cast<double>(dy[off2(a.dy, n, o)]) * static_cast<double>(x[off2(a.x, n, i)]);
          dw[off2(a.dw, o, i)] = static_cast<T>(acc);
        }
    }
    if (a.db.defined) {
      T* db = a.db.ptr<T>();
      for (int64_t o = 0; o < O; ++o) {
        double acc = 0.0;
        for (int64_t n = 0; n < N; ++n) acc += static_cast<double>(dy[off2(a.dy, n, o)]);
        db[o * a.db.strides[0]] = static_cast<T>(acc);
      }
    }
  });
}

}  // namespace strata::backends
