#pragma once
// Strided views, the statistics dtype and a block reduction shared by the transformer's kernels (layer_norm.cu,
// attention.cu). Internal to backends/cuda.
#include "strata/backends/cuda/kernels.cuh"

namespace strata::backends::cuda {

// codegen:begin cuda_kernels row_views
// f32 statistics for the half types, f64 for f64 (the front end allocates them so).
template <class T>
using stats_t = acc_t<T>;

template <class T>
struct View2 {
  T* p;
  int64_t s0, s1;
  __device__ T& operator()(int64_t i, int64_t j) const { return p[i * s0 + j * s1]; }
};
template <class T>
struct View3 {
  T* p;
  int64_t s0, s1, s2;
  __device__ T& operator()(int64_t b, int64_t h, int64_t i) const { return p[b * s0 + h * s1 + i * s2]; }
};
template <class T>
struct View4 {
  T* p;
  int64_t s0, s1, s2, s3;
  __device__ T& operator()(int64_t b, int64_t h, int64_t i, int64_t d) const {
    return p[b * s0 + h * s1 + i * s2 + d * s3];
  }
};
// codegen:end
// Whether a 2-D view's rows can be read in 16-byte chunks (kernels.cuh's load_chunk8).
template <class T>
bool rows_vectorizable(const ops::TensorView& t) {
  return chunk8_vectorizable<T>(t.data, t.strides[0], t.strides[1]);
}
// The same for a 1-D view read in chunks of eight (a weight or bias per column); false when undefined.
template <class T>
bool vector_vectorizable(const ops::TensorView& t) {
  return t.defined && chunk8_vectorizable<T>(t.data, 0, t.strides[0]);
}
template <class T>
View2<T> v2(const ops::TensorView& t) {
  return {t.defined ? t.ptr<T>() : nullptr, t.defined ? t.strides[0] : 0, t.defined ? t.strides[1] : 0};
}
template <class T>
View3<T> v3(const ops::TensorView& t) {
  return {t.ptr<T>(), t.strides[0], t.strides[1], t.strides[2]};
}
template <class T>
View4<T> v4(const ops::TensorView& t) {
  return {t.ptr<T>(), t.strides[0], t.strides[1], t.strides[2], t.strides[3]};
}

// codegen:begin cuda_kernels row_views
// The block's sum (or max) of v in a fixed order, in every thread; `red` holds a value per warp.
template <bool Max, class A>
__device__ A block_reduce(A v, A* red) {
  v = Max ? warp_max(v) : warp_sum(v);
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __syncthreads();  // red may still be read by a previous reduction
  if (threadIdx.x % 32 == 0) red[warp] = v;
  __syncthreads();
  A r = red[0];
  for (int w = 1; w < warps; ++w) r = Max ? max(r, red[w]) : r + red[w];
  return r;
}
// codegen:end

}  // namespace strata::backends::cuda
