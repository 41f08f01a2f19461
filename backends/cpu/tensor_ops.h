#pragma once
// The tensor API's ops as loops over any strides, each computed in A (T on the CPU backends,
// double on the reference backend, the oracle): comparisons, where, reductions over dims,
// softmax, the batched matrix product (for the dtypes a backend's GEMM library lacks), and
// index_select / index_add. openblas, onednn and eigen run these (none of their libraries has
// the whole family); the CUDA kernels of backends/cuda compute the same definitions.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "strata/backends/cpu/strided.h"
#include "strata/core/error.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::loops {

namespace detail {
// v with the sizes of `sizes` where v has size 1 and stride 0 there: a kept-dims view
// walked beside x, or the reduced dims alone.
inline ops::TensorView with_sizes(const ops::TensorView& v, const Shape& sizes, const Shape& strides) {
  ops::TensorView r = v;
  r.sizes = sizes;
  r.strides = strides;
  return r;
}
template <class T>
inline bool is_nan(T v) {
  return v != v;  // NOLINT: integers never are
}
}  // namespace detail

// Calls f(T{}) for the dtypes comparisons read: every numeric dtype the CPU stores.
template <class F>
decltype(auto) visit_numeric(std::string_view backend, std::string_view op, DType dt, F&& f) {
  switch (dt) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::u8: return f(uint8_t{});
    default: break;
  }
  unsupported_dtype(backend, op, dt, "f32, f64, i32, i64, u8");
}

template <class T, class A = T>
void compare(const ops::CompareArgs& a) {
  ops::visit_compare(a.fn, [&](auto fn) {
    using F = ops::CompareFunctor<decltype(fn)::value>;
    const T* pa = a.a.ptr<const T>();
    const T* pb = a.b.ptr<const T>();
    uint8_t* y = a.y.ptr<uint8_t>();
    for_each_unordered([=](int64_t, int64_t oa, int64_t ob, int64_t oy) { y[oy] = F::fwd(A(pa[oa]), A(pb[ob])) ? 1 : 0; },
                       a.a, a.b, a.y);
  });
}

template <class T>
void where(const ops::WhereArgs& a) {
  const uint8_t* c = a.cond.ptr<const uint8_t>();
  const T* pa = a.a.ptr<const T>();
  const T* pb = a.b.ptr<const T>();
  T* y = a.y.ptr<T>();
  for_each_unordered([=](int64_t, int64_t oc, int64_t oa, int64_t ob, int64_t oy) { y[oy] = c[oc] ? pa[oa] : pb[ob]; },
                     a.cond, a.a, a.b, a.y);
}

// A sum over one dim, shared with generated training steps (a GPT's position gradient: codegen/
// writes the code between "codegen:begin" and "codegen:end" into its programs as it is).
// codegen:begin transformer_loops
// The sum of n values at x[k * stride], from 0 in k order, computed in A.
template <class T, class A = T>
A sum_strided(const T* x, int64_t stride, int64_t n) {
  A acc = 0;
  for (int64_t k = 0; k < n; ++k) acc += A(x[k * stride]);
  return acc;
}
// codegen:end

// One pass per output element over its reduced elements, in row-major order (argmax's
// position counts in that order).
template <class T, class A = T>
void reduce_dims(const ops::ReduceDimsArgs& a) {
  const int nd = a.x.dim();
  Shape reduced = a.x.sizes;  // the reduced dims' extents, 1 on the kept ones
  int summed = -1;            // a sum over one dim only: that dim (sum_strided)
  for (int d = 0; d < nd; ++d) {
    if (a.y.sizes[d] == a.x.sizes[d])
      reduced[d] = 1;
    else
      summed = summed == -1 ? d : -2;
  }
  if (a.fn != ops::ReduceFn::sum) summed = -2;
  const ops::TensorView kept = detail::with_sizes(a.x, a.y.sizes, a.x.strides);
  const ops::TensorView inner = detail::with_sizes(a.x, reduced, a.x.strides);
  const int64_t count = reduced.numel();
  const T* x = a.x.ptr<const T>();
  const ops::ReduceFn fn = a.fn;
  for_each_element([&](int64_t, int64_t oy, int64_t ox) {
    const T* base = x + ox;
    A acc = fn == ops::ReduceFn::max || fn == ops::ReduceFn::argmax ? -std::numeric_limits<A>::infinity()
            : fn == ops::ReduceFn::min || fn == ops::ReduceFn::argmin ? std::numeric_limits<A>::infinity()
                                                                        : A(0);
    int64_t at = 0;
    bool nan = false;
    if (summed >= 0) {
      a.y.ptr<T>()[oy] = static_cast<T>(sum_strided<T, A>(base, a.x.strides[summed], a.x.sizes[summed]));
      return;
    }
    for_each_element([&](int64_t k, int64_t o) {
      const A v = A(base[o]);
      switch (fn) {
        case ops::ReduceFn::sum:
        case ops::ReduceFn::mean: acc += v; break;
        case ops::ReduceFn::max:
        case ops::ReduceFn::argmax:
          if (!nan && (detail::is_nan(v) || v > acc || (k == 0 && v == acc))) {
            acc = v;
            at = k;
            nan = detail::is_nan(v);
          }
          break;
        case ops::ReduceFn::min:
        case ops::ReduceFn::argmin:
          if (!nan && (detail::is_nan(v) || v < acc || (k == 0 && v == acc))) {
            acc = v;
            at = k;
            nan = detail::is_nan(v);
          }
          break;
      }
    }, inner);
    if (fn == ops::ReduceFn::argmax || fn == ops::ReduceFn::argmin) {
      a.y.ptr<int64_t>()[oy] = at;
    } else {
      if (fn == ops::ReduceFn::mean) acc = count > 0 ? acc / A(count) : std::numeric_limits<A>::quiet_NaN();
      a.y.ptr<T>()[oy] = static_cast<T>(acc);
    }
  }, a.y, kept);
}

namespace detail {
// Calls fn(x_offset, y_offset, ...) once per row along `dim` of the first view (with the
// row's base offset in each view).
template <class Fn, class... Views>
void for_each_row(int dim, Fn&& fn, const ops::TensorView& first, const Views&... rest) {
  Shape outer = first.sizes;
  outer[dim] = 1;
  for_each_element([&](int64_t, int64_t o0, auto... os) { fn(o0, os...); }, with_sizes(first, outer, first.strides),
                   with_sizes(rest, outer, rest.strides)...);
}
}  // namespace detail

template <class T, class A = T>
void softmax_fwd(const ops::SoftmaxArgs& a) {
  const int64_t n = a.x.sizes[a.dim];
  const int64_t sx = a.x.strides[a.dim], sy = a.y.strides[a.dim];
  const T* x = a.x.ptr<const T>();
  T* y = a.y.ptr<T>();
  detail::for_each_row(a.dim, [&](int64_t ox, int64_t oy) {
    A mx = -std::numeric_limits<A>::infinity();
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, A(x[ox + i * sx]));
    if (!std::isfinite(mx)) mx = A(0);  // a row of -inf stays NaN-free where it can
    A s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(A(x[ox + i * sx]) - mx);
    const A log_s = std::log(s);
    for (int64_t i = 0; i < n; ++i) {
      const A v = A(x[ox + i * sx]) - mx;
      y[oy + i * sy] = static_cast<T>(a.log ? v - log_s : std::exp(v) / s);
    }
  }, a.x, a.y);
}

template <class T, class A = T>
void softmax_bwd(const ops::SoftmaxBwdArgs& a) {
  const int64_t n = a.y.sizes[a.dim];
  const int64_t sy = a.y.strides[a.dim], sdy = a.dy.strides[a.dim], sdx = a.dx.strides[a.dim];
  const T* y = a.y.ptr<const T>();
  const T* dy = a.dy.ptr<const T>();
  T* dx = a.dx.ptr<T>();
  detail::for_each_row(a.dim, [&](int64_t oy, int64_t ody, int64_t odx) {
    A s = 0;
    for (int64_t i = 0; i < n; ++i) s += a.log ? A(dy[ody + i * sdy]) : A(dy[ody + i * sdy]) * A(y[oy + i * sy]);
    for (int64_t i = 0; i < n; ++i) {
      const A yv = A(y[oy + i * sy]), g = A(dy[ody + i * sdy]);
      dx[odx + i * sdx] = static_cast<T>(a.log ? g - std::exp(yv) * s : yv * (g - s));
    }
  }, a.y, a.dy, a.dx);
}

// The batched product by definition, each dot product summed in A in k order.
template <class T, class A = T>
void bmm(const ops::BmmArgs& a) {
  const int64_t B = a.y.sizes[0], M = a.y.sizes[1], N = a.y.sizes[2], K = a.a.sizes[2];
  const T* pa = a.a.ptr<const T>();
  const T* pb = a.b.ptr<const T>();
  T* y = a.y.ptr<T>();
  const auto& sa = a.a.strides;
  const auto& sb = a.b.strides;
  const auto& sy = a.y.strides;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        A acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += A(pa[b * sa[0] + i * sa[1] + k * sa[2]]) * A(pb[b * sb[0] + k * sb[1] + j * sb[2]]);
        y[b * sy[0] + i * sy[1] + j * sy[2]] = static_cast<T>(A(a.alpha) * acc);
      }
}

namespace detail {
// The index's i-th entry, checked against the indexed dim's extent.
inline int64_t index_at(std::string_view op, const ops::TensorView& index, int64_t i, int64_t extent) {
  const int64_t v = index.dtype == DType::i32 ? index.ptr<const int32_t>()[i * index.strides[0]]
                                              : index.ptr<const int64_t>()[i * index.strides[0]];
  STRATA_CHECK(v >= 0 && v < extent, op, ": argument 'index': index[", i, "] = ", v,
               " is out of range for a dim of size ", extent);
  return v;
}
// The slice at position p of `dim`: v without that dim's extent (size 1 there).
inline ops::TensorView slice(const ops::TensorView& v, int dim, int64_t p, size_t elem) {
  ops::TensorView s = v;
  s.sizes[dim] = 1;
  s.data = static_cast<char*>(v.data) + p * v.strides[dim] * static_cast<int64_t>(elem);
  return s;
}
}  // namespace detail

// Any dtype: elements moved as bytes of their size.
inline void index_select(const ops::IndexSelectArgs& a) {
  const int64_t n = a.index.numel(), extent = a.x.sizes[a.dim];
  const size_t elem = dtype_size(a.x.dtype);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = detail::index_at("index_select", a.index, i, extent);
    const ops::TensorView src = detail::slice(a.x, a.dim, r, elem), dst = detail::slice(a.y, a.dim, i, elem);
    const char* s = static_cast<const char*>(src.data);
    char* d = static_cast<char*>(dst.data);
    for_each_element([&](int64_t, int64_t os, int64_t od) { std::memcpy(d + od * elem, s + os * elem, elem); }, src,
                     dst);
  }
}

// The row loop of index_add over a matrix's rows, shared with generated training steps (an
// embedding's gradient: codegen/ writes the code between "codegen:begin" and "codegen:end" into
// its programs as it is).
// codegen:begin transformer_loops
// y's c values += x's, each sum computed in A.
template <class T, class A = T>
void add_row_into(const T* x, int64_t x_stride, T* y, int64_t y_stride, int64_t c) {
  for (int64_t j = 0; j < c; ++j) y[j * y_stride] = static_cast<T>(A(y[j * y_stride]) + A(x[j * x_stride]));
}
// codegen:end

template <class T, class A = T>
void index_add(const ops::IndexAddArgs& a) {
  const int64_t n = a.index.numel(), extent = a.y.sizes[a.dim];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = detail::index_at("index_add", a.index, i, extent);
    if (a.dim == 0 && a.x.dim() == 2) {  // rows of a matrix (an embedding's gradient)
      add_row_into<T, A>(a.x.ptr<const T>() + i * a.x.strides[0], a.x.strides[1], a.y.ptr<T>() + r * a.y.strides[0],
                         a.y.strides[1], a.x.sizes[1]);
      continue;
    }
    const ops::TensorView src = detail::slice(a.x, a.dim, i, sizeof(T)), dst = detail::slice(a.y, a.dim, r, sizeof(T));
    const T* s = src.ptr<const T>();
    T* d = dst.ptr<T>();
    for_each_element([&](int64_t, int64_t os, int64_t od) { d[od] = static_cast<T>(A(d[od]) + A(s[os])); }, src, dst);
  }
}

}  // namespace strata::backends::loops

// The tensor-API members of a CPU backend class whose body is these loops (openblas, eigen,
// onednn), defined once; bmm stays each backend's own (its GEMM library). index_select, index_add and
// reduce_dims first call observe(op, args) (loops::unobserved, or the backend's call observer).
#define STRATA_CPU_TENSOR_MEMBERS(Backend) STRATA_CPU_TENSOR_MEMBERS_OBSERVED(Backend, loops::unobserved)
#define STRATA_CPU_TENSOR_MEMBERS_OBSERVED(Backend, observe)                                                 \
  void Backend::compare(const ::strata::ops::CompareArgs& a) {                                               \
    loops::visit_numeric(kName, "compare", a.a.dtype, [&](auto t) { loops::compare<decltype(t)>(a); });    \
  }                                                                                                          \
  void Backend::where(const ::strata::ops::WhereArgs& a) {                                                   \
    loops::visit_float(kName, "where", a.a.dtype, [&](auto t) { loops::where<decltype(t)>(a); });          \
  }                                                                                                          \
  void Backend::reduce_dims(const ::strata::ops::ReduceDimsArgs& a) {                                        \
    observe(::strata::ops::OpId::reduce_dims, a);                                                            \
    loops::visit_float(kName, "reduce_dims", a.x.dtype, [&](auto t) { loops::reduce_dims<decltype(t)>(a); }); \
  }                                                                                                          \
  void Backend::softmax_fwd(const ::strata::ops::SoftmaxArgs& a) {                                           \
    loops::visit_float(kName, "softmax_fwd", a.x.dtype, [&](auto t) { loops::softmax_fwd<decltype(t)>(a); }); \
  }                                                                                                          \
  void Backend::softmax_bwd(const ::strata::ops::SoftmaxBwdArgs& a) {                                        \
    loops::visit_float(kName, "softmax_bwd", a.y.dtype, [&](auto t) { loops::softmax_bwd<decltype(t)>(a); }); \
  }                                                                                                          \
  void Backend::index_select(const ::strata::ops::IndexSelectArgs& a) {                                      \
    observe(::strata::ops::OpId::index_select, a);                                                           \
    loops::index_select(a);                                                                                  \
  }                                                                                                          \
  void Backend::index_add(const ::strata::ops::IndexAddArgs& a) {                                            \
    observe(::strata::ops::OpId::index_add, a);                                                              \
    loops::visit_float(kName, "index_add", a.x.dtype, [&](auto t) { loops::index_add<decltype(t)>(a); });  \
  }
