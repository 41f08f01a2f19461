#include <cmath>

#include "strata/backends/reference/reference_backend.h"
#include "strata/backends/reference/strided.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using ref::for_each_element;
using ref::visit_float;

void ReferenceBackend::relu_fwd(const ReluFwdArgs& a) {
  visit_float(a.x.dtype, "relu_fwd", [&](auto t) {
    using T = decltype(t);
    const T* x = a.x.ptr<T>();
    T* y = a.y.ptr<T>();
    for_each_element([&](int64_t, int64_t ox, int64_t oy) { y[oy] = x[ox] > T(0) ? x[ox] : T(0); }, a.x, a.y);
  });
}

void ReferenceBackend::relu_bwd(const ReluBwdArgs& a) {
  visit_float(a.dy.dtype, "relu_bwd", [&](auto t) {
    using T = decltype(t);
    const T* y = a.y.ptr<T>();
    const T* dy = a.dy.ptr<T>();
    T* dx = a.dx.ptr<T>();
    for_each_element([&](int64_t, int64_t oy, int64_t ody, int64_t odx) { dx[odx] = y[oy] > T(0) ? dy[ody] : T(0); },
                     a.y, a.dy, a.dx);
  });
}

void ReferenceBackend::add(const AddArgs& a) {
  visit_float(a.a.dtype, "add", [&](auto t) {
    using T = decltype(t);
    const T* pa = a.a.ptr<T>();
    const T* pb = a.b.ptr<T>();
    T* y = a.y.ptr<T>();
    for_each_element([&](int64_t, int64_t oa, int64_t ob, int64_t oy) { y[oy] = pa[oa] + pb[ob]; }, a.a, a.b, a.y);
  });
}

void ReferenceBackend::scale(const ScaleArgs& a) {
  visit_float(a.x.dtype, "scale", [&](auto t) {
    using T = decltype(t);
    const T* x = a.x.ptr<T>();
    T* y = a.y.ptr<T>();
    const T alpha = static_cast<T>(a.alpha);
    for_each_element([&](int64_t, int64_t ox, int64_t oy) { y[oy] = alpha * x[ox]; }, a.x, a.y);
  });
}

void ReferenceBackend::axpy(const AxpyArgs& a) {
  visit_float(a.x.dtype, "axpy", [&](auto t) {
    using T = decltype(t);
    const T* x = a.x.ptr<T>();
    T* y = a.y.ptr<T>();
    const T alpha = static_cast<T>(a.alpha);
    for_each_element([&](int64_t, int64_t ox, int64_t oy) { y[oy] += alpha * x[ox]; }, a.x, a.y);
  });
}

void ReferenceBackend::fill(const FillArgs& a) {
  visit_float(a.y.dtype, "fill", [&](auto t) {
    using T = decltype(t);
    T* y = a.y.ptr<T>();
    const T v = static_cast<T>(a.value);
    for_each_element([&](int64_t, int64_t oy) { y[oy] = v; }, a.y);
  });
}

void ReferenceBackend::dropout_fwd(const DropoutFwdArgs& args) {
  const DropoutFwdArgs a = with_rng_read(args);
  visit_float(a.x.dtype, "dropout_fwd", [&](auto t) {
    using T = decltype(t);
    const T* x = a.x.ptr<T>();
    T* y = a.y.ptr<T>();
    uint8_t* m = a.mask.ptr<uint8_t>();
    const double inv_keep = a.p < 1.0 ? 1.0 / (1.0 - a.p) : 0.0;
    for_each_element(
        [&](int64_t k, int64_t ox, int64_t oy, int64_t om) {
          const bool keep = ops::dropout_keep(a.seed, a.offset + static_cast<uint64_t>(k), a.p);
          m[om] = keep ? 1 : 0;
          y[oy] = keep ? static_cast<T>(x[ox] * inv_keep) : T(0);
        },
        a.x, a.y, a.mask);
  });
}

void ReferenceBackend::dropout_bwd(const DropoutBwdArgs& a) {
  visit_float(a.dy.dtype, "dropout_bwd", [&](auto t) {
    using T = decltype(t);
    const T* dy = a.dy.ptr<T>();
    const uint8_t* m = a.mask.ptr<uint8_t>();
    T* dx = a.dx.ptr<T>();
    const double inv_keep = a.p < 1.0 ? 1.0 / (1.0 - a.p) : 0.0;
    for_each_element([&](int64_t, int64_t ody, int64_t om, int64_t odx) {
      dx[odx] = m[om] ? static_cast<T>(dy[ody] * inv_keep) : T(0);
    }, a.dy, a.mask, a.dx);
  });
}

}  // namespace strata::backends
