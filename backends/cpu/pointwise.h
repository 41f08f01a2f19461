#pragma once
// The element-wise formulas of ops/table/pointwise.def as loops over any strides, each
// element computed in A (T itself on the CPU backends; double on the reference backend, the
// oracle) from the one functor the CUDA kernels instantiate too (ops/table/pointwise.h).
#include <cstdint>

#include "strata/backends/cpu/strided.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::loops {

template <class T, class A = T>
void unary_fwd(const ops::UnaryFwdArgs& a) {
  ops::visit_unary(a.fn, [&](auto fn) {
    using F = ops::UnaryFunctor<decltype(fn)::value>;
    const T* x = a.x.ptr<const T>();
    T* y = a.y.ptr<T>();
    const double p0 = a.p0, p1 = a.p1;
    for_each_unordered([=](int64_t, int64_t ox, int64_t oy) { y[oy] = static_cast<T>(F::fwd(A(x[ox]), p0, p1)); },
                       a.x, a.y);
  });
}

template <class T, class A = T>
void unary_bwd(const ops::UnaryBwdArgs& a) {
  ops::visit_unary(a.fn, [&](auto fn) {
    using F = ops::UnaryFunctor<decltype(fn)::value>;
    const T* x = a.x.ptr<const T>();
    const T* y = a.y.ptr<const T>();
    const T* dy = a.dy.ptr<const T>();
    T* dx = a.dx.ptr<T>();
    const double p0 = a.p0, p1 = a.p1;
    for_each_unordered([=](int64_t, int64_t ox, int64_t oy, int64_t ody, int64_t odx) {
      dx[odx] = static_cast<T>(F::bwd(A(x[ox]), A(y[oy]), A(dy[ody]), p0, p1));
    }, a.x, a.y, a.dy, a.dx);
  });
}

template <class T, class A = T>
void binary_fwd(const ops::BinaryFwdArgs& a) {
  ops::visit_binary(a.fn, [&](auto fn) {
    using F = ops::BinaryFunctor<decltype(fn)::value>;
    const T* pa = a.a.ptr<const T>();
    const T* pb = a.b.ptr<const T>();
    T* y = a.y.ptr<T>();
    for_each_unordered([=](int64_t, int64_t oa, int64_t ob, int64_t oy) {
      y[oy] = static_cast<T>(F::fwd(A(pa[oa]), A(pb[ob])));
    }, a.a, a.b, a.y);
  });
}

// da and db each where asked for (defined), in one pass over the operands per gradient.
template <class T, class A = T>
void binary_bwd(const ops::BinaryBwdArgs& a) {
  ops::visit_binary(a.fn, [&](auto fn) {
    using F = ops::BinaryFunctor<decltype(fn)::value>;
    const T* pa = a.a.ptr<const T>();
    const T* pb = a.b.ptr<const T>();
    const T* y = a.y.ptr<const T>();
    const T* dy = a.dy.ptr<const T>();
    if (a.da.defined) {
      T* da = a.da.ptr<T>();
      for_each_unordered([=](int64_t, int64_t oa, int64_t ob, int64_t oy, int64_t ody, int64_t oda) {
        da[oda] = static_cast<T>(F::bwd_a(A(pa[oa]), A(pb[ob]), A(y[oy]), A(dy[ody])));
      }, a.a, a.b, a.y, a.dy, a.da);
    }
    if (a.db.defined) {
      T* db = a.db.ptr<T>();
      for_each_unordered([=](int64_t, int64_t oa, int64_t ob, int64_t oy, int64_t ody, int64_t odb) {
        db[odb] = static_cast<T>(F::bwd_b(A(pa[oa]), A(pb[ob]), A(y[oy]), A(dy[ody])));
      }, a.a, a.b, a.y, a.dy, a.db);
    }
  });
}

}  // namespace strata::backends::loops

// The four pointwise members of a CPU backend class whose body is these loops in f32 and f64
// (openblas, eigen, onednn: none of their libraries has the whole family), defined once; unary_fwd and
// unary_bwd first call observe(op, args) (loops::unobserved, or the backend's call observer).
#define STRATA_CPU_POINTWISE_MEMBERS(Backend) STRATA_CPU_POINTWISE_MEMBERS_OBSERVED(Backend, loops::unobserved)
#define STRATA_CPU_POINTWISE_MEMBERS_OBSERVED(Backend, observe)                                           \
  void Backend::unary_fwd(const ::strata::ops::UnaryFwdArgs& a) {                                         \
    observe(::strata::ops::OpId::unary_fwd, a);                                                           \
    loops::visit_float(kName, "unary_fwd", a.x.dtype, [&](auto t) { loops::unary_fwd<decltype(t)>(a); }); \
  }                                                                                                       \
  void Backend::unary_bwd(const ::strata::ops::UnaryBwdArgs& a) {                                         \
    observe(::strata::ops::OpId::unary_bwd, a);                                                           \
    loops::visit_float(kName, "unary_bwd", a.x.dtype, [&](auto t) { loops::unary_bwd<decltype(t)>(a); }); \
  }                                                                                                       \
  void Backend::binary_fwd(const ::strata::ops::BinaryFwdArgs& a) {                                       \
    loops::visit_float(kName, "binary_fwd", a.a.dtype, [&](auto t) { loops::binary_fwd<decltype(t)>(a); }); \
  }                                                                                                       \
  void Backend::binary_bwd(const ::strata::ops::BinaryBwdArgs& a) {                                       \
    loops::visit_float(kName, "binary_bwd", a.a.dtype, [&](auto t) { loops::binary_bwd<decltype(t)>(a); }); \
  }
