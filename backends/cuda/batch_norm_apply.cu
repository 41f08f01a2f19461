// The apply pass of strata's own batch norm: each value through its channel's
// coefficients (the finish kernels' coef[4c..4c+3]), with the forward's fusions (residual
// add, ReLU, and the ReLU mask where a thread owns whole mask bytes: 8 values, f16/bf16
// vectors; elsewhere batch_norm_epilogue.cu's second pass does it) or the backward's dy
// read through the mask.
#include "strata/backends/cuda/batch_norm_passes.cuh"

namespace strata::backends::cuda {
namespace {

// One value through the per-channel coefficients k (the finish kernels' coef[4c..]):
// forward y = ((x - k.x) - k.y) * k.z + k.w; backward dx = k.y * dy - k.w + k.z * (x - k.x).
template <bool Bwd>
__device__ __forceinline__ float bn_apply_one(const float4& k, float x, float dy) {
  return Bwd ? k.y * dy - k.w + k.z * (x - k.x) : ((x - k.x) - k.y) * k.z + k.w;
}

// The coefficients an apply thread keeps per channel. f32 keeps the four above, whose
// shifted forms stay exact when |mean| >> std; f16/bf16 results are rounded far more
// coarsely than folding the shift into one fma loses, and fold them: forward y = x * s + t,
// backward dx = a * dy + (b * x + e'), two or three registers per channel instead of four
// (the apply kernels' occupancy is bound by these registers).
template <class T, bool Bwd, bool kFold = sizeof(T) == 2>
struct BnCoef {
  float4 k;
  __device__ void set(const float4& c) { k = c; }
  __device__ float apply(float x, float dy) const { return bn_apply_one<Bwd>(k, x, dy); }
};
template <class T>
struct BnCoef<T, false, true> {
  float s, t;
  __device__ void set(const float4& c) { s = c.z, t = fmaf(-(c.x + c.y), c.z, c.w); }
  __device__ float apply(float x, float) const { return fmaf(x, s, t); }
};
template <class T>
struct BnCoef<T, true, true> {
  float a, b, e;
  __device__ void set(const float4& c) { a = c.y, b = c.z, e = fmaf(-c.z, c.x, -c.w); }
  __device__ float apply(float x, float dy) const { return fmaf(a, dy, fmaf(b, x, e)); }
};

// V values at offset i0 through coefficients k[j] (one per value): Bwd=false y from x,
// true dx from x and dy; with the fusion f: the forward's epilogue rounded step by step as
// the separate ops round it (`bits`: where the result is > 0), or the backward's masked dy.
template <class T, int V, bool Bwd>
__device__ __forceinline__ Pack<T, V> bn_apply_vec(const BnCoef<T, Bwd>* k, const T* x, const T* dy, const BnFusion<T>& f,
                                                  int64_t i0, uint32_t& bits) {
  const Pack<T, V> xv = *reinterpret_cast<const Pack<T, V>*>(x + i0);
  Pack<T, V> ov;
  if constexpr (Bwd) {
    const Pack<T, V> gv = *reinterpret_cast<const Pack<T, V>*>(dy + i0);
    const uint32_t keep = f.mask ? mask_bits<V>(f.mask, i0) : ~0u;
    bits = 0;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float d = (keep >> j) & 1u ? load(gv.v[j]) : 0.f;
      ov.v[j] = store<T>(k[j].apply(load(xv.v[j]), d));
    }
  } else {
    Pack<T, V> zv{};
    if (f.z) zv = *reinterpret_cast<const Pack<T, V>*>(f.z + i0);
    bits = 0;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const T b = store<T>(k[j].apply(load(xv.v[j]), 0.f));
      if (!f.z && !f.relu) {
        ov.v[j] = b;
        continue;
      }
      float v = load(b);
      if (f.z) v = load(store<T>(v + load(zv.v[j])));
      if (f.relu && !(v > 0.f)) v = 0.f;
      bits |= static_cast<uint32_t>(v > 0.f) << j;
      ov.v[j] = store<T>(v);
    }
  }
  return ov;
}
// The forward's mask byte of values i0 .. i0 + 7 (only a thread with 8 values writes one).
template <class T, int V, bool Bwd>
__device__ __forceinline__ void bn_store_bits(const BnFusion<T>& f, int64_t i0, uint32_t bits) {
  if constexpr (!Bwd && V == 8)
    if (f.mask) f.mask[i0 >> 3] = static_cast<uint8_t>(bits);
}

// NCHW apply over V-wide vectors, each in one channel's plane (S % V == 0, or V == 1).
template <class T, int V, bool Bwd>
__global__ void __launch_bounds__(kBnThreads)
    bn_apply_outer_kernel(const T* x, const T* dy, T* out, const float* coef, BnShape g, int64_t nvec,
                          BnFusion<T> f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < nvec; i += step) {
    BnCoef<T, Bwd> k[V];
    const float4 kc = reinterpret_cast<const float4*>(coef)[(i * V / g.s) % g.c];
#pragma unroll
    for (int j = 0; j < V; ++j) k[j].set(kc);
    uint32_t bits;
    reinterpret_cast<Pack<T, V>*>(out)[i] = bn_apply_vec<T, V, Bwd>(k, x, dy, f, i * V, bits);
    bn_store_bits<T, V, Bwd>(f, i * V, bits);
  }
}

// Channel-innermost apply: each thread owns V channels for a run of rows, so their
// coefficients are loaded once (per element, 16 bytes of coefficients per value kept
// the forward at half of the bandwidth).
template <class T, int V, bool Bwd>
__global__ void __launch_bounds__(kBnThreads)
    bn_apply_inner_kernel(const T* x, const T* dy, T* out, const float* coef, BnShape g, int lanes, int64_t chunk,
                          BnFusion<T> f) {
  const int lane = threadIdx.x % lanes, r = threadIdx.x / lanes, rows_per_step = blockDim.x / lanes;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * (lanes * V) + lane * V;
  if (c0 >= g.c) return;
  BnCoef<T, Bwd> k[V];
#pragma unroll
  for (int j = 0; j < V; ++j) k[j].set(reinterpret_cast<const float4*>(coef)[c0 + j]);
  const int64_t begin = blockIdx.y * chunk, end = min(begin + chunk, g.m);
  // One row at a time: two in flight raised the registers past four blocks per SM and
  // measured slower (docs/tuning.md).
  for (int64_t row = begin + r; row < end; row += rows_per_step) {
    uint32_t bits;
    *reinterpret_cast<Pack<T, V>*>(out + row * g.c + c0) = bn_apply_vec<T, V, Bwd>(k, x, dy, f, row * g.c + c0, bits);
    bn_store_bits<T, V, Bwd>(f, row * g.c + c0, bits);
  }
}

// bn_apply with V values a thread. Inner: eight blocks per SM, each thread at least 4
// rows; NCHW: a grid-stride loop over vectors.
template <class T, int V, bool Bwd>
void launch_apply(Context& ctx, const T* x, const T* dy, T* out, const float* coef, const BnShape& g,
                  const BnFusion<T>& f) {
  if (g.inner) {
    const BnGrid b = bn_grid(ctx, g, V, 8, 4);
    bn_apply_inner_kernel<T, V, Bwd><<<b.dims(), kBnThreads, 0, ctx.stream>>>(x, dy, out, coef, g, b.lanes, b.chunk,
                                                                              f);
  } else {
    const int64_t nvec = g.m * g.c / V;
    bn_apply_outer_kernel<T, V, Bwd><<<grid_for(ctx, nvec, kBnThreads), kBnThreads, 0, ctx.stream>>>(x, dy, out, coef,
                                                                                                     g, nvec, f);
  }
  STRATA_CUDA_CHECK_LAUNCH("batch norm apply kernel");
}

}  // namespace

template <class T, bool Bwd>
void bn_apply(Context& ctx, const T* x, const T* dy, T* out, const float* coef, const BnShape& g, int v,
              const BnFusion<T>& f) {
  if (v == 1)
    launch_apply<T, 1, Bwd>(ctx, x, dy, out, coef, g, f);
  else
    launch_apply<T, 16 / sizeof(T), Bwd>(ctx, x, dy, out, coef, g, f);
}

template void bn_apply<float, false>(Context&, const float*, const float*, float*, const float*, const BnShape&, int,
                                     const BnFusion<float>&);
template void bn_apply<float, true>(Context&, const float*, const float*, float*, const float*, const BnShape&, int,
                                    const BnFusion<float>&);
template void bn_apply<__half, false>(Context&, const __half*, const __half*, __half*, const float*, const BnShape&,
                                      int, const BnFusion<__half>&);
template void bn_apply<__half, true>(Context&, const __half*, const __half*, __half*, const float*, const BnShape&,
                                     int, const BnFusion<__half>&);
template void bn_apply<__nv_bfloat16, false>(Context&, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                                             const float*, const BnShape&, int, const BnFusion<__nv_bfloat16>&);
template void bn_apply<__nv_bfloat16, true>(Context&, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                                            const float*, const BnShape&, int, const BnFusion<__nv_bfloat16>&);

}  // namespace strata::backends::cuda
