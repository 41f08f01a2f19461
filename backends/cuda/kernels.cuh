#pragma once
// Device-side helpers shared by the backend's .cu files: element types and their
// conversions (bit-identical to core's CPU conversions), dtype dispatch, and the
// launch helpers for element-wise and reduction kernels. Internal to backends/cuda.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "strata/backends/cuda/context.h"
#include "strata/backends/cuda/strided.h"

namespace strata::backends::cuda {

// ---- element types -------------------------------------------------------------
// codegen:begin cuda_kernels
// Arithmetic type for an element type: float for f32/f16/bf16, double for f64.
template <class T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <class T> using acc_t = typename AccOf<T>::type;

// Element -> arithmetic / double (no rounding for any supported type).
template <class T>
__device__ __forceinline__ auto load(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return v;
  }
}

// float -> f16/bf16 with round-to-nearest-even and core's NaN encoding, so device
// conversions give the same bits as strata::to_f16 / to_bf16 on the CPU.
__device__ __forceinline__ __half f32_to_f16(float f) {
  if (isnan(f)) {
    const unsigned short sign = (__float_as_uint(f) >> 16) & 0x8000u;
    return __ushort_as_half(static_cast<unsigned short>(sign | 0x7e00u));
  }
  return __float2half_rn(f);
}
__device__ __forceinline__ __nv_bfloat16 f32_to_bf16(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __ushort_as_bfloat16(static_cast<unsigned short>((u >> 16) | 0x40u));
  u += 0x7fffu + ((u >> 16) & 1u);
  return __ushort_as_bfloat16(static_cast<unsigned short>(u >> 16));
}

// Any arithmetic value -> element type T, as core's convert_element does it:
// half types go through float; everything else is a static_cast.
template <class T, class V>
__device__ __forceinline__ T store(V v) {
  if constexpr (std::is_same_v<T, __half>) {
    return f32_to_f16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return f32_to_bf16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}
// codegen:end

// ---- dtype dispatch (host) -------------------------------------------------------
// f(T{}) with T the device element type of `t`, for the floating dtypes.
template <class F>
void dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::f16: f(__half{}); return;
    case DType::bf16: f(__nv_bfloat16{}); return;
    default: break;
  }
  STRATA_FAIL(op, ": the cuda backend does not support dtype ", dtype_name(t));
}
// f32, f16 and bf16: strata's kernels that have no f64 form (batch norm's).
template <class F>
void dispatch_float_no_f64(DType t, const char* op, F&& f) {
  STRATA_CHECK(t != DType::f64, op, ": the cuda backend has no f64 kernel for it (f32, f16 or bf16)");
  dispatch_float(t, op, [&](auto v) {
    if constexpr (!std::is_same_v<decltype(v), double>) f(v);
  });
}
// f32 only (ops whose cuda implementation is f32-only; supports() says so).
template <class F>
void dispatch_f32(DType t, const char* op, F&& f) {
  STRATA_CHECK(t == DType::f32, op, ": the cuda backend supports f32 here, got ", dtype_name(t));
  f(float{});
}
// Every dtype (copy, fill).
template <class F>
void dispatch_all(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::f16: f(__half{}); return;
    case DType::bf16: f(__nv_bfloat16{}); return;
    case DType::i32: f(int32_t{}); return;
    case DType::i64: f(int64_t{}); return;
    case DType::u8: f(uint8_t{}); return;
  }
  STRATA_FAIL("cuda backend: unknown dtype");
}

// ---- launches --------------------------------------------------------------------
// codegen:begin cuda_kernels
constexpr int kThreads = 256;
// codegen:end

// V neighbouring elements moved as one 16-byte load or store (channels-last kernels
// take V channels per thread when C is a multiple of V and the buffers are aligned).
// codegen:begin cuda_kernels
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};
// codegen:end

inline int grid_for(const Context& ctx, int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t{ctx.sm_count} * 16)));
}

// codegen:begin cuda_kernels
// f(k, off) for every element k; off[i] is operand i's element offset.
template <int N, class F>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(Strided<N> s, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < s.n; k += step) {
    int64_t off[N];
    s.offsets(k, off);
    f(k, off);
  }
}
// codegen:end

template <int N, class F>
void launch_elementwise(Context& ctx, const Strided<N>& s, const F& f) {
  if (s.n == 0) return;
  elementwise_kernel<N, F><<<grid_for(ctx, s.n), kThreads, 0, ctx.stream>>>(s, f);
  STRATA_CUDA_CHECK_LAUNCH("elementwise kernel");
}

// Strided indexing over `shape` for the given views' strides.
template <class... V>
Strided<sizeof...(V)> strided_of(const Shape& shape, const V&... views) {
  return make_strided<sizeof...(V)>(shape, {views.strides...});
}

// The same in the last view's memory order (strided.h): for element-wise kernels that
// ignore the element index k, so channels-last operands are read and written
// contiguously instead of one channel stride apart per thread.
template <class... V>
Strided<sizeof...(V)> strided_by_output(const Shape& shape, const V&... views) {
  return make_strided_in_memory_order<sizeof...(V)>(shape, {views.strides...}, sizeof...(V) - 1);
}

// A view of `v` broadcast to `shape` along dimension `dim` (v is 1-D of size
// shape[dim]); strides are 0 elsewhere.
inline ops::TensorView broadcast_along(const ops::TensorView& v, const Shape& shape, int dim) {
  ops::TensorView b = v;
  b.sizes = shape;
  Shape st;
  for (int i = 0; i < shape.size(); ++i) st.push_back(i == dim ? v.strides[0] : 0);
  b.strides = st;
  return b;
}

// ---- rows read in chunks of eight ---------------------------------------------------
// Columns 8k .. 8k+7 of a row as one chunk: loaded (stored) as 16-byte vectors where the row is
// contiguous and 16-byte aligned (`vec`), else element by element, the same values either way.
// Kernels that give a thread whole chunks therefore sum in an order that depends on the row's
// length only, not on its alignment or strides (which differ between the dispatch modes' buffers).
// codegen:begin cuda_kernels chunk8
constexpr int kChunk8 = 8;

// Whether rows starting at `base`, `row_stride` elements apart, with columns `col_stride` apart,
// can be read in 16-byte vectors.
template <class T>
inline bool chunk8_vectorizable(const void* base, int64_t row_stride, int64_t col_stride) {
  return col_stride == 1 && reinterpret_cast<uintptr_t>(base) % 16 == 0 &&
         (row_stride * static_cast<int64_t>(sizeof(T))) % 16 == 0;
}

// Loads chunk k of a row of `cols` elements into v (as A); returns how many columns it holds.
template <class A, class T>
__device__ __forceinline__ int load_chunk8(const T* row, int64_t stride, bool vec, int64_t k, int64_t cols,
                                           A (&v)[kChunk8]) {
  const int64_t j0 = k * kChunk8;
  const int n = static_cast<int>(cols - j0 < kChunk8 ? cols - j0 : kChunk8);
  if (vec && n == kChunk8) {
    constexpr int per = 16 / static_cast<int>(sizeof(T));
#pragma unroll
    for (int p = 0; p < kChunk8 / per; ++p) {
      const Pack<T, per> pk = reinterpret_cast<const Pack<T, per>*>(row + j0)[p];
#pragma unroll
      for (int i = 0; i < per; ++i) v[p * per + i] = static_cast<A>(load(pk.v[i]));
    }
  } else {
    // Unrolled with a guard rather than a loop to n: a loop bound known only at run time would
    // index v dynamically and put the caller's arrays in local memory.
#pragma unroll
    for (int i = 0; i < kChunk8; ++i)
      if (i < n) v[i] = static_cast<A>(load(row[(j0 + i) * stride]));
  }
  return n;
}

// Stores the first n values of chunk k (rounded to T).
template <class T, class A>
__device__ __forceinline__ void store_chunk8(T* row, int64_t stride, bool vec, int64_t k, int n,
                                             const A (&v)[kChunk8]) {
  const int64_t j0 = k * kChunk8;
  if (vec && n == kChunk8) {
    constexpr int per = 16 / static_cast<int>(sizeof(T));
#pragma unroll
    for (int p = 0; p < kChunk8 / per; ++p) {
      Pack<T, per> pk;
#pragma unroll
      for (int i = 0; i < per; ++i) pk.v[i] = store<T>(v[p * per + i]);
      reinterpret_cast<Pack<T, per>*>(row + j0)[p] = pk;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kChunk8; ++i)
      if (i < n) row[(j0 + i) * stride] = store<T>(v[i]);
  }
}

// codegen:end

// A layer norm's output ((v - mean) * rstd, then times the weight, then plus the bias, each with
// its own rounding: no contraction into a fused multiply-add), and a variance term's d * d + q as
// one fma: the layer-norm kernels and the few-rows product's layer-norm prologue (gemv.cu), which
// normalises a row as it reads it, give the same bits because neither leaves the choice to the
// compiler.
// codegen:begin cuda_kernels layer_norm
__device__ __forceinline__ float ln_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float ln_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float ln_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double ln_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ double ln_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double ln_add(double a, double b) { return __dadd_rn(a, b); }
template <class A>
__device__ __forceinline__ A layer_norm_value(A v, A mu, A rs, bool has_w, A w, bool has_b, A b) {
  A o = ln_mul(ln_sub(v, mu), rs);
  if (has_w) o = ln_mul(o, w);
  if (has_b) o = ln_add(o, b);
  return o;
}
template <class A>
__device__ __forceinline__ A add_square(A q, A d) {
  return fma(d, d, q);
}
// codegen:end

// ---- reductions ------------------------------------------------------------------
// A warp's sum (or max) of v, in every lane, in a fixed butterfly order.
// codegen:begin cuda_kernels
template <class A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}
// codegen:end
// codegen:begin cuda_kernels row_views
template <class A>
__device__ __forceinline__ A warp_max(A v) {
  for (int m = 16; m > 0; m >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}
// codegen:end
// codegen:begin cuda_train_kernels
// Block-wide sum of a double per thread (blockDim.x a multiple of 32, at most 1024).
// Fixed order: the result depends only on the inputs, never on timing.
__device__ __forceinline__ double block_sum(double v) {
  __shared__ double warp_sums[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // warp_sums may still be read by a previous call
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int nwarps = (blockDim.x + 31) >> 5;
  v = threadIdx.x < nwarps ? warp_sums[threadIdx.x] : 0.0;
  if (warp == 0) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;  // valid in thread 0
}

// Sum over k of f(k) for k in [0, n), times `scale`, written to *out as T.
// Two passes (block partials, then one block over the partials): deterministic.
constexpr int kReduceThreads = 256;
// codegen:end

template <class F>
__global__ void __launch_bounds__(kReduceThreads) reduce_partial_kernel(int64_t n, F f, double* partial) {
  double acc = 0.0;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += step) acc += f(k);
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

template <class T>
__global__ void __launch_bounds__(kReduceThreads) reduce_final_kernel(const double* partial, int count, double scale, T* out) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *out = store<T>(acc * scale);
}

template <class T, class F>
void reduce_all(Context& ctx, int64_t n, const F& f, double scale, T* out) {
  const int64_t want = (n + kReduceThreads * 4 - 1) / (kReduceThreads * 4);
  const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, int64_t{ctx.sm_count} * 8)));
  DeviceBuffer partial(ctx, sizeof(double) * blocks);
  reduce_partial_kernel<F><<<blocks, kReduceThreads, 0, ctx.stream>>>(n, f, partial.as<double>());
  STRATA_CUDA_CHECK_LAUNCH("reduce_partial_kernel");
  reduce_final_kernel<T><<<1, kReduceThreads, 0, ctx.stream>>>(partial.as<double>(), blocks, scale, out);
  STRATA_CUDA_CHECK_LAUNCH("reduce_final_kernel");
}

}  // namespace strata::backends::cuda
