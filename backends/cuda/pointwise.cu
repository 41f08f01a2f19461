// The element-wise formulas of ops/table/pointwise.def on the GPU: the functors the CPU loops
// instantiate, over any strides, in f32, f64, f16 and bf16 (computed in float, f64 in double).
#include "strata/backends/cuda/call_observer.h"
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

// Dense operands in one layout, 16-byte aligned, a whole number of V-element packs: each thread
// moves V elements at a time with one 16-byte load per operand (the formulas' scalar loads on
// GPT-2's 16,384 x 3,072 GELU ran at about a quarter of the memory's bandwidth). Each element's
// value is the functor's on the same inputs as in the kernels above: the bits do not depend on
// the path.
template <class T>
constexpr int kPack = 16 / static_cast<int>(sizeof(T));

template <class T>
__device__ __forceinline__ Pack<T, kPack<T>> pack_at(const T* p, int64_t k) {
  return reinterpret_cast<const Pack<T, kPack<T>>*>(p)[k];
}

template <int N>
bool packable(const Strided<N>& s, const std::array<const void*, N>& ptrs, int v) {
  if (s.nd != 1 || s.n % v != 0) return false;
  for (int i = 0; i < N; ++i)
    if (s.strides[i][0] != 1 || reinterpret_cast<uintptr_t>(ptrs[i]) % 16 != 0) return false;
  return true;
}

template <class F>
__global__ void __launch_bounds__(kThreads) packed_kernel(int64_t packs, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < packs; k += step) f(k);
}

template <class F>
void launch_packed(Context& ctx, int64_t packs, const F& f) {
  packed_kernel<F><<<grid_for(ctx, packs), kThreads, 0, ctx.stream>>>(packs, f);
  STRATA_CUDA_CHECK_LAUNCH("packed element-wise kernel");
}

template <UnaryFn Fn, class T>
struct UnaryFwdP {
  const T* x;
  T* y;
  double p0, p1;
  __device__ void operator()(int64_t k) const {
    constexpr int V = kPack<T>;
    const Pack<T, V> a = pack_at(x, k);
    Pack<T, V> o;
#pragma unroll
    for (int i = 0; i < V; ++i) o.v[i] = store<T>(UnaryFunctor<Fn>::fwd(load(a.v[i]), p0, p1));
    reinterpret_cast<Pack<T, V>*>(y)[k] = o;
  }
};
template <UnaryFn Fn, class T>
struct UnaryBwdP {
  const T* x;
  const T* y;
  const T* dy;
  T* dx;
  double p0, p1;
  __device__ void operator()(int64_t k) const {
    constexpr int V = kPack<T>;
    const Pack<T, V> a = pack_at(x, k), b = pack_at(y, k), g = pack_at(dy, k);
    Pack<T, V> o;
#pragma unroll
    for (int i = 0; i < V; ++i)
      o.v[i] = store<T>(UnaryFunctor<Fn>::bwd(load(a.v[i]), load(b.v[i]), load(g.v[i]), p0, p1));
    reinterpret_cast<Pack<T, V>*>(dx)[k] = o;
  }
};
template <BinaryFn Fn, class T>
struct BinaryFwdP {
  const T* a;
  const T* b;
  T* y;
  __device__ void operator()(int64_t k) const {
    constexpr int V = kPack<T>;
    const Pack<T, V> u = pack_at(a, k), v = pack_at(b, k);
    Pack<T, V> o;
#pragma unroll
    for (int i = 0; i < V; ++i) o.v[i] = store<T>(BinaryFunctor<Fn>::fwd(load(u.v[i]), load(v.v[i])));
    reinterpret_cast<Pack<T, V>*>(y)[k] = o;
  }
};

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::unary_fwd(const UnaryFwdArgs& a) {
  observe_call(OpId::unary_fwd, a);
  dispatch_float(a.x.dtype, "unary_fwd", [&](auto t) {
    using T = decltype(t);
    visit_unary(a.fn, [&](auto fn) {
      const auto s = strided_by_output(a.y.sizes, a.x, a.y);
      const bool packed = packable<2>(s, {a.x.data, a.y.data}, kPack<T>);
      if (observing()) observe_library({.kind = LibraryCall::Kind::unary, .mode = packed ? 1 : 0});
      if (packed)
        launch_packed(*ctx_, s.n / kPack<T>, UnaryFwdP<decltype(fn)::value, T>{a.x.ptr<T>(), a.y.ptr<T>(), a.p0, a.p1});
      else
        launch_elementwise(*ctx_, s, UnaryFwdK<decltype(fn)::value, T>{a.x.ptr<T>(), a.y.ptr<T>(), a.p0, a.p1});
    });
  });
}

void CudaBackend::unary_bwd(const UnaryBwdArgs& a) {
  dispatch_float(a.x.dtype, "unary_bwd", [&](auto t) {
    using T = decltype(t);
    visit_unary(a.fn, [&](auto fn) {
      const auto s = strided_by_output(a.dx.sizes, a.x, a.y, a.dy, a.dx);
      if (packable<4>(s, {a.x.data, a.y.data, a.dy.data, a.dx.data}, kPack<T>))
        launch_packed(*ctx_, s.n / kPack<T>,
                      UnaryBwdP<decltype(fn)::value, T>{a.x.ptr<T>(), a.y.ptr<T>(), a.dy.ptr<T>(), a.dx.ptr<T>(),
                                                        a.p0, a.p1});
      else
        launch_elementwise(*ctx_, s,
                           UnaryBwdK<decltype(fn)::value, T>{a.x.ptr<T>(), a.y.ptr<T>(), a.dy.ptr<T>(),
                                                             a.dx.ptr<T>(), a.p0, a.p1});
    });
  });
}

void CudaBackend::binary_fwd(const BinaryFwdArgs& a) {
  dispatch_float(a.a.dtype, "binary_fwd", [&](auto t) {
    using T = decltype(t);
    visit_binary(a.fn, [&](auto fn) {
      const auto s = strided_by_output(a.y.sizes, a.a, a.b, a.y);
      if (packable<3>(s, {a.a.data, a.b.data, a.y.data}, kPack<T>))
        launch_packed(*ctx_, s.n / kPack<T>, BinaryFwdP<decltype(fn)::value, T>{a.a.ptr<T>(), a.b.ptr<T>(), a.y.ptr<T>()});
      else
        launch_elementwise(*ctx_, s, BinaryFwdK<decltype(fn)::value, T>{a.a.ptr<T>(), a.b.ptr<T>(), a.y.ptr<T>()});
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
