// linear's forward for a few rows: one warp per output column (gemv.h says why).
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/gemv.h"
#include "strata/backends/cuda/kernels.cuh"

namespace strata::backends::cuda {

using namespace strata::ops;  // the op table's argument types

namespace {

// codegen:begin cuda_kernels gemv
constexpr int kGemvThreads = 128;  // 4 warps, 4 output columns, per block

template <class T>
struct GemvParams {
  const T* x;
  const T* w;
  const T* b;  // null: no bias
  T* y;
  int64_t m, n, k, ldx, ldw, bs, ys0, ys1;
  const T* z = nullptr;  // a residual added to y (null: none)
  int64_t zs0 = 0, zs1 = 0;
};

// How the product reads x's values: as they are stored (a layer-norm prologue reads them
// normalised: GemvNormX). chunk(k) comes before the values of elements [k, k + V).
template <class T, int V>
struct GemvPlainX {
  __device__ __forceinline__ void chunk(int64_t) {}
  __device__ __forceinline__ float operator()(int, const Pack<T, V>& xv, int j) const { return load(xv.v[j]); }
};

// Column col's sums over K for the M rows, in every lane: lane l reads elements [l V, l V + V) of
// every 32 V along K, for the M rows at once, so the weights are read once; x's few rows come
// from the caches. V elements per load (16 bytes when the rows allow it, else 1).
template <class T, int V, int M, class X = GemvPlainX<T, V>>
__device__ __forceinline__ void gemv_sums(const GemvParams<T>& p, int64_t col, int lane, float (&acc)[M], X xs = X{}) {
  const T* w = p.w + col * p.ldw;
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = 0.f;
#pragma unroll 4
  for (int64_t k = static_cast<int64_t>(lane) * V; k < p.k; k += 32 * V) {
    const Pack<T, V> wv = *reinterpret_cast<const Pack<T, V>*>(w + k);
    xs.chunk(k);
#pragma unroll
    for (int r = 0; r < M; ++r) {
      const Pack<T, V> xv = *reinterpret_cast<const Pack<T, V>*>(p.x + r * p.ldx + k);
#pragma unroll
      for (int j = 0; j < V; ++j) acc[r] = fmaf(xs(r, xv, j), load(wv.v[j]), acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = warp_sum(acc[r]);
}

// y's element (r, col) from its sum: plus the bias (0 without one), plus the residual where given.
template <class T>
__device__ __forceinline__ float gemv_out(const GemvParams<T>& p, int r, int64_t col, float sum) {
  float v = sum + (p.b ? static_cast<float>(load(p.b[col * p.bs])) : 0.f);
  if (p.z) v += static_cast<float>(load(p.z[r * p.zs0 + col * p.zs1]));
  return v;
}

// This warp's output column and its sums; true in the lane that writes them (lane 0 of a warp
// that has a column).
template <class T, int V, int M, class X = GemvPlainX<T, V>>
__device__ __forceinline__ bool gemv_column(const GemvParams<T>& p, int64_t& col, float (&acc)[M], X xs = X{}) {
  col = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (col >= p.n) return false;
  gemv_sums<T, V, M>(p, col, lane, acc, xs);
  return lane == 0;
}

template <class T, int M>
__device__ __forceinline__ void gemv_store(const GemvParams<T>& p, int64_t col, const float (&acc)[M]) {
#pragma unroll
  for (int r = 0; r < M; ++r) p.y[r * p.ys0 + col * p.ys1] = store<T>(gemv_out(p, r, col, acc[r]));
}

template <class T, int V, int M>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(GemvParams<T> p) {
  int64_t col;
  float acc[M];
  if (gemv_column<T, V, M>(p, col, acc)) gemv_store<T, M>(p, col, acc);
}
// codegen:end

// With GELU (linear_fwd's act, gemv.h): pre written as gemv_kernel writes y, and y GELU of pre's
// rounded value as the unary op computes it (pointwise.cu's functor, in float): the bits of the
// product followed by the formula, in one kernel where they were two.
template <class T, int M>
__device__ __forceinline__ void gemv_store_gelu(const GemvParams<T>& p, int64_t col, const float (&acc)[M], T* pre,
                                                int64_t ps0, int64_t ps1) {
#pragma unroll
  for (int r = 0; r < M; ++r) {
    const T v = store<T>(gemv_out(p, r, col, acc[r]));
    pre[r * ps0 + col * ps1] = v;
    p.y[r * p.ys0 + col * p.ys1] = store<T>(UnaryFunctor<UnaryFn::gelu_tanh>::fwd(load(v), 0.0, 0.0));
  }
}

template <class T, int V, int M>
__global__ void __launch_bounds__(kGemvThreads) gemv_gelu_kernel(GemvParams<T> p, T* pre, int64_t ps0, int64_t ps1) {
  int64_t col;
  float acc[M];
  if (gemv_column<T, V, M>(p, col, acc)) gemv_store_gelu<T, M>(p, col, acc, pre, ps0, ps1);
}

// ---- the layer-norm prologue (LinearFwdArgs::norm_eps) ----------------------------------
template <class T>
struct GemvNorm {
  const T* w;  // the layer norm's weight and bias (null: none), dense
  const T* b;
  float eps;
  bool vec;  // x's rows read in 16-byte chunks of eight (layer_norm_fwd's own loads)
};

// x's values normalised as layer_norm_fwd writes them: each row's mean and rstd summed as its
// warp-per-row kernels sum them (a lane's chunks of eight k = lane + 32 j in order, its values in
// order, then the warp's butterfly), every value by layer_norm_value and rounded to T. So the
// product reads the bits the separate layer norm would have written (tested).
template <class T, int V, int M>
struct GemvNormX {
  GemvNorm<T> n;
  float mu[M], rs[M];
  Pack<T, V> wk, bk;
  __device__ __forceinline__ void stats(const GemvParams<T>& p) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int64_t chunks = (p.k + kChunk8 - 1) / kChunk8;
    float v[kChunk8];
#pragma unroll
    for (int r = 0; r < M; ++r) {
      const T* xr = p.x + r * p.ldx;
      float s = 0.f;
      for (int64_t c = lane; c < chunks; c += 32) {
        const int m = load_chunk8(xr, 1, n.vec, c, p.k, v);
#pragma unroll
        for (int i = 0; i < kChunk8; ++i)
          if (i < m) s += v[i];
      }
      mu[r] = warp_sum(s) / static_cast<float>(p.k);
      float q = 0.f;
      for (int64_t c = lane; c < chunks; c += 32) {
        const int m = load_chunk8(xr, 1, n.vec, c, p.k, v);
#pragma unroll
        for (int i = 0; i < kChunk8; ++i)
          if (i < m) q = add_square(q, v[i] - mu[r]);
      }
      rs[r] = 1.f / sqrt(warp_sum(q) / static_cast<float>(p.k) + n.eps);
    }
  }
  __device__ __forceinline__ void chunk(int64_t k) {
    if (n.w) wk = *reinterpret_cast<const Pack<T, V>*>(n.w + k);
    if (n.b) bk = *reinterpret_cast<const Pack<T, V>*>(n.b + k);
  }
  __device__ __forceinline__ float operator()(int r, const Pack<T, V>& xv, int j) const {
    const float o = layer_norm_value(static_cast<float>(load(xv.v[j])), mu[r], rs[r], n.w != nullptr,
                                     n.w ? static_cast<float>(load(wk.v[j])) : 0.f, n.b != nullptr,
                                     n.b ? static_cast<float>(load(bk.v[j])) : 0.f);
    return load(store<T>(o));  // rounded to x's dtype, as the layer norm stores it
  }
};

// Every warp normalises the few rows itself (no barrier, no shared memory: they are a few
// kilobytes from the caches), then runs the product as gemv_kernel or gemv_gelu_kernel does.
template <class T, int V, int M, bool Gelu>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_norm_kernel(GemvParams<T> p, GemvNorm<T> n, T* pre, int64_t ps0, int64_t ps1) {
  GemvNormX<T, V, M> xs{n};
  xs.stats(p);
  int64_t col;
  float acc[M];
  if (!gemv_column<T, V, M>(p, col, acc, xs)) return;
  if constexpr (Gelu)
    gemv_store_gelu<T, M>(p, col, acc, pre, ps0, ps1);
  else
    gemv_store<T, M>(p, col, acc);
}

// pre (null: no activation): GELU's input, written beside y (gemv_gelu_kernel); norm (null: none):
// the layer-norm prologue (gemv_norm_kernel).
template <class T, int V>
void launch_rows(Context& ctx, const GemvParams<T>& p, T* pre, int64_t ps0, int64_t ps1, const GemvNorm<T>* norm) {
  const int64_t blocks = (p.n * 32 + kGemvThreads - 1) / kGemvThreads;
  const dim3 grid(static_cast<unsigned>(blocks));
  const auto run = [&](auto rows) {
    constexpr int M = decltype(rows)::value;
    if (norm && pre)
      gemv_norm_kernel<T, V, M, true><<<grid, kGemvThreads, 0, ctx.stream>>>(p, *norm, pre, ps0, ps1);
    else if (norm)
      gemv_norm_kernel<T, V, M, false><<<grid, kGemvThreads, 0, ctx.stream>>>(p, *norm, nullptr, 0, 0);
    else if (pre)
      gemv_gelu_kernel<T, V, M><<<grid, kGemvThreads, 0, ctx.stream>>>(p, pre, ps0, ps1);
    else
      gemv_kernel<T, V, M><<<grid, kGemvThreads, 0, ctx.stream>>>(p);
  };
  switch (p.m) {
    case 1: run(std::integral_constant<int, 1>{}); break;
    case 2: run(std::integral_constant<int, 2>{}); break;
    case 3: run(std::integral_constant<int, 3>{}); break;
    default: run(std::integral_constant<int, 4>{}); break;
  }
  STRATA_CUDA_CHECK_LAUNCH("linear (few rows)");
}

// 16-byte loads need the rows' starts 16-byte aligned and K a whole number of them.
template <class T>
bool vector_loads(const GemvParams<T>& p) {
  constexpr int64_t v = 16 / sizeof(T);
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return p.k % v == 0 && (p.m == 1 || p.ldx % v == 0) && (p.n == 1 || p.ldw % v == 0) && aligned(p.x) &&
         aligned(p.w);
}

}  // namespace

bool gemv_fits(const LinearFwdArgs& a) {
  const DType t = a.y.dtype;
  if (t != DType::f32 && t != DType::f16 && t != DType::bf16) return false;
  if (a.x.dtype != t || a.w.dtype != t || (a.b.defined && a.b.dtype != t)) return false;
  if (a.z.defined && a.z.dtype != t) return false;
  if (a.norm_eps)  // the layer norm's weight and bias dense, in x's dtype
    for (const TensorView* v : {&a.norm_w, &a.norm_b})
      if (v->defined && (v->dtype != t || (v->sizes[0] > 1 && v->strides[0] != 1))) return false;
  const int64_t m = a.y.sizes[0], k = a.x.sizes[1];
  if (m < 1 || m > kGemvMaxRows || k < 1) return false;
  const bool x_rows = k == 1 || a.x.strides[1] == 1;
  const bool w_rows = k == 1 || a.w.strides[1] == 1;
  return x_rows && w_rows;
}

void gemv_rows(Context& ctx, const LinearFwdArgs& a) {
  dispatch_float_no_f64(a.y.dtype, "linear", [&](auto tv) {
    using T = decltype(tv);
    GemvParams<T> p{static_cast<const T*>(a.x.data),
                    static_cast<const T*>(a.w.data),
                    a.b.defined ? static_cast<const T*>(a.b.data) : nullptr,
                    static_cast<T*>(a.y.data),
                    a.y.sizes[0],
                    a.y.sizes[1],
                    a.x.sizes[1],
                    a.x.strides[0],
                    a.w.strides[0],
                    a.b.defined ? a.b.strides[0] : 0,
                    a.y.strides[0],
                    a.y.strides[1],
                    a.z.defined ? static_cast<const T*>(a.z.data) : nullptr,
                    a.z.defined ? a.z.strides[0] : 0,
                    a.z.defined ? a.z.strides[1] : 0};
    const auto aligned = [](const TensorView& v) {
      return !v.defined || reinterpret_cast<uintptr_t>(v.data) % 16 == 0;
    };
    const bool vec = vector_loads(p) && (!a.norm_eps || (aligned(a.norm_w) && aligned(a.norm_b)));
    const GemvNorm<T> norm{a.norm_eps && a.norm_w.defined ? static_cast<const T*>(a.norm_w.data) : nullptr,
                           a.norm_eps && a.norm_b.defined ? static_cast<const T*>(a.norm_b.data) : nullptr,
                           static_cast<float>(a.norm_eps.value_or(0.0)),
                           chunk8_vectorizable<T>(a.x.data, a.x.strides[0], a.x.strides[1])};
    if (observing())  // the V it ran with, for a code generator (call_observer.h)
      observe_library({.kind = LibraryCall::Kind::gemv, .mode = vec ? static_cast<int64_t>(16 / sizeof(T)) : 1});
    STRATA_CHECK(!a.act || *a.act == UnaryFn::gelu_tanh, "linear: the few-rows kernel's activation is GELU's only "
                 "(internal error)");
    T* pre = a.act ? static_cast<T*>(a.pre.data) : nullptr;
    const int64_t ps0 = a.act ? a.pre.strides[0] : 0, ps1 = a.act ? a.pre.strides[1] : 0;
    const GemvNorm<T>* prologue = a.norm_eps ? &norm : nullptr;
    if (vec)
      launch_rows<T, 16 / sizeof(T)>(ctx, p, pre, ps0, ps1, prologue);
    else
      launch_rows<T, 1>(ctx, p, pre, ps0, ps1, prologue);
  });
}

}  // namespace strata::backends::cuda
