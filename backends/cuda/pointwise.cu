// The element-wise formulas of ops/table/pointwise.def on the GPU: the functors the CPU loops
// instantiate, over any strides, in f32, f64, f16 and bf16 (computed in float, f64 in double).
#include "strata/backends/cuda/cudnn_util.h"
#include "strata/backends/cuda/kernels.cuh"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

template <UnaryFn Fn, class T>
struct UnaryFwdK {
  const T* x;
  T* y;
  double p0, p1;
  __device__ void operator()(int64_t, const int64_t* o) const {
    y[o[1]] = store<T>(UnaryFunctor<Fn>::fwd(load(x[o[0]]), p0, p1));
  }
};
template <UnaryFn Fn, class T>
struct UnaryBwdK {
  const T* x;
  const T* y;
  const T* dy;
  T* dx;
  double p0, p1;
  __device__ void operator()(int64_t, const int64_t* o) const {
    dx[o[3]] = store<T>(UnaryFunctor<Fn>::bwd(load(x[o[0]]), load(y[o[1]]), load(dy[o[2]]), p0, p1));
  }
};
template <BinaryFn Fn, class T>
struct BinaryFwdK {
  const T* a;
  const T* b;
  T* y;
  __device__ void operator()(int64_t, const int64_t* o) const {
    y[o[2]] = store<T>(BinaryFunctor<Fn>::fwd(load(a[o[0]]), load(b[o[1]])));
  }
};
// One operand's gradient: bwd_a (which_b false) or bwd_b.
template <BinaryFn Fn, class T, bool which_b>
struct BinaryBwdK {
  const T* a;
  const T* b;
  const T* y;
  const T* dy;
  T* d;
  __device__ void operator()(int64_t, const int64_t* o) const {
    const auto av = load(a[o[0]]), bv = load(b[o[1]]), yv = load(y[o[2]]), dyv = load(dy[o[3]]);
    if constexpr (which_b)
      d[o[4]] = store<T>(BinaryFunctor<Fn>::bwd_b(av, bv, yv, dyv));
    else
      d[o[4]] = store<T>(BinaryFunctor<Fn>::bwd_a(av, bv, yv, dyv));
  }
};

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::unary_fwd(const UnaryFwdArgs& a) {
  dispatch_float(a.x.dtype, "unary_fwd", [&](auto t) {
    using T = decltype(t);
    visit_unary(a.fn, [&](auto fn) {
      launch_elementwise(*ctx_, strided_by_output(a.y.sizes, a.x, a.y),
                         UnaryFwdK<decltype(fn)::value, T>{a.x.ptr<T>(), a.y.ptr<T>(), a.p0, a.p1});
    });
  });
}

void CudaBackend::unary_bwd(const UnaryBwdArgs& a) {
  dispatch_float(a.x.dtype, "unary_bwd", [&](auto t) {
    using T = decltype(t);
    visit_unary(a.fn, [&](auto fn) {
      launch_elementwise(*ctx_, strided_by_output(a.dx.sizes, a.x, a.y, a.dy, a.dx),
                         UnaryBwdK<decltype(fn)::value, T>{a.x.ptr<T>(), a.y.ptr<T>(), a.dy.ptr<T>(), a.dx.ptr<T>(),
                                                           a.p0, a.p1});
    });
  });
}

void CudaBackend::binary_fwd(const BinaryFwdArgs& a) {
  dispatch_float(a.a.dtype, "binary_fwd", [&](auto t) {
    using T = decltype(t);
    visit_binary(a.fn, [&](auto fn) {
      launch_elementwise(*ctx_, strided_by_output(a.y.sizes, a.a, a.b, a.y),
                         BinaryFwdK<decltype(fn)::value, T>{a.a.ptr<T>(), a.b.ptr<T>(), a.y.ptr<T>()});
    });
  });
}

void CudaBackend::binary_bwd(const BinaryBwdArgs& a) {
  dispatch_float(a.a.dtype, "binary_bwd", [&](auto t) {
    using T = decltype(t);
    visit_binary(a.fn, [&](auto fn) {
      constexpr BinaryFn F = decltype(fn)::value;
      if (a.da.defined)
        launch_elementwise(*ctx_, strided_by_output(a.da.sizes, a.a, a.b, a.y, a.dy, a.da),
                           BinaryBwdK<F, T, false>{a.a.ptr<T>(), a.b.ptr<T>(), a.y.ptr<T>(), a.dy.ptr<T>(),
                                                   a.da.ptr<T>()});
      if (a.db.defined)
        launch_elementwise(*ctx_, strided_by_output(a.db.sizes, a.a, a.b, a.y, a.dy, a.db),
                           BinaryBwdK<F, T, true>{a.a.ptr<T>(), a.b.ptr<T>(), a.y.ptr<T>(), a.dy.ptr<T>(),
                                                  a.db.ptr<T>()});
    });
  });
}

}  // namespace strata::backends
