// linear's forward for a few rows: one warp per output column (gemv.h says why).
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/gemv.h"
#include "strata/backends/cuda/kernels.cuh"

namespace strata::backends::cuda {

using namespace strata::ops;  // the op table's argument types

namespace {

// codegen:begin cuda_kernels
constexpr int kGemvThreads = 128;  // 4 warps, 4 output columns, per block

template <class T>
struct GemvParams {
  const T* x;
  const T* w;
  const T* b;  // null: no bias
  T* y;
  int64_t m, n, k, ldx, ldw, bs, ys0, ys1;
};

// Lane l reads elements [l V, l V + V) of every 32 V along K, for the M rows at once, so the
// weights are read once; x's few rows come from the caches. V elements per load (16 bytes when
// the rows allow it, else 1).
template <class T, int V, int M>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(GemvParams<T> p) {
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (col >= p.n) return;
  const T* w = p.w + col * p.ldw;
  float acc[M];
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = 0.f;
#pragma unroll 4
  for (int64_t k = static_cast<int64_t>(lane) * V; k < p.k; k += 32 * V) {
    const Pack<T, V> wv = *reinterpret_cast<const Pack<T, V>*>(w + k);
#pragma unroll
    for (int r = 0; r < M; ++r) {
      const Pack<T, V> xv = *reinterpret_cast<const Pack<T, V>*>(p.x + r * p.ldx + k);
#pragma unroll
      for (int j = 0; j < V; ++j) acc[r] = fmaf(load(xv.v[j]), load(wv.v[j]), acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = warp_sum(acc[r]);
  if (lane != 0) return;
  const float bias = p.b ? static_cast<float>(load(p.b[col * p.bs])) : 0.f;
#pragma unroll
  for (int r = 0; r < M; ++r) p.y[r * p.ys0 + col * p.ys1] = store<T>(acc[r] + bias);
}
// codegen:end

template <class T, int V>
void launch_rows(Context& ctx, const GemvParams<T>& p) {
  const int64_t blocks = (p.n * 32 + kGemvThreads - 1) / kGemvThreads;
  const dim3 grid(static_cast<unsigned>(blocks));
  switch (p.m) {
    case 1: gemv_kernel<T, V, 1><<<grid, kGemvThreads, 0, ctx.stream>>>(p); break;
    case 2: gemv_kernel<T, V, 2><<<grid, kGemvThreads, 0, ctx.stream>>>(p); break;
    case 3: gemv_kernel<T, V, 3><<<grid, kGemvThreads, 0, ctx.stream>>>(p); break;
    default: gemv_kernel<T, V, 4><<<grid, kGemvThreads, 0, ctx.stream>>>(p); break;
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
                    a.y.strides[1]};
    const bool vec = vector_loads(p);
    if (observing())  // the V it ran with, for a code generator (call_observer.h)
      observe_library({.kind = LibraryCall::Kind::gemv, .mode = vec ? static_cast<int64_t>(16 / sizeof(T)) : 1});
    if (vec)
      launch_rows<T, 16 / sizeof(T)>(ctx, p);
    else
      launch_rows<T, 1>(ctx, p);
  });
}

}  // namespace strata::backends::cuda
