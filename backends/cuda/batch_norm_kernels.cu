// strata's own batch norm kernels: every channels-last batch norm, and every f16/bf16
// one (activations in f16/bf16, statistics and affine parameters in f32, as mixed
// precision wants them). cuDNN keeps f32 NCHW, where it is fast; its f32 NHWC kernels
// take ~8x their NCHW time on an H100 ([32,64,56,56]: 0.48/0.75 vs 0.06/0.16 ms
// fwd/bwd), which made channels-last training 3.3x slower than NCHW.
//
// Three passes, each one read of the activation: per-channel sums (fixed-order
// partials in double, then a per-channel finish: deterministic, independent of
// timing), and an element-wise apply. Channel-innermost data (NHWC, [N,C], NCHW with
// 1x1 planes) is read as rows of C with 16-byte vectors across channels; NCHW planes
// are read plane by plane.
//
// Synchronised batch norm (op_args.h: sync): between the sums and the per-channel finish,
// this replica's sums are gathered (bn_group_sums_kernel) and summed over the replicas by
// the reducer, enqueued on the stream; the apply pass is the same.
//
// Fusion (op_args.h): the apply pass adds the residual z, applies the ReLU and writes
// the ReLU mask (relu_mask.h) where a thread owns whole mask bytes (8 values: f16/bf16
// vectors); elsewhere a second pass over y does it (batch_norm_epilogue.cu). The backward's
// sums and apply passes read dy through the mask, and the sums pass writes the masked dy
// to dz, the residual's gradient.
#include "strata/backends/cuda/batch_norm_kernels.h"
#include "strata/backends/cuda/kernels.cuh"
#include "strata/backends/cuda/cudnn_util.h"
#include "strata/ops/table/relu_mask.h"

namespace strata::backends::cuda {

using namespace strata::ops;  // the op table's argument types
namespace {

constexpr int kBnThreads = 256;
// Rows a statistics thread loads before it uses them (memory-level parallelism: one
// 16-byte load in flight per thread kept the forward's statistics latency-bound; more
// spill in the backward, whose loop holds twice the loads), and the rows it sums in float
// before adding to its double sums (docs/tuning.md).
constexpr int kSumRowsFwd = 4, kSumRowsBwd = 1;
constexpr int kRunFwd = 4, kRunBwd = 16;
static_assert(kRunFwd % kSumRowsFwd == 0 && kRunBwd % kSumRowsBwd == 0);

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// The mask bits of values i0 .. i0 + V - 1 (V divides 8 and i0): one byte read.
template <int V>
__device__ __forceinline__ uint32_t mask_bits(const uint8_t* mask, int64_t i0) {
  return (static_cast<uint32_t>(mask[i0 >> 3]) >> (i0 & 7)) & ((1u << V) - 1u);
}

// What the apply pass fuses. Forward: y = relu?(bn(x) + z), and the mask's bits written
// (only where V == 8: a thread's byte). Backward: dy read through the mask.
template <class T>
struct BnFusion {
  const T* z = nullptr;
  uint8_t* mask = nullptr;
  bool relu = false;
};

// The geometry of one batch norm: M values per channel, in `rows` rows of C
// (inner) or N planes of S per channel (outer).
struct BnShape {
  int64_t c = 0, m = 0;  // channels, values per channel
  int64_t n = 0, s = 0;  // outer: images, plane size
  bool inner = false;
};

// Per-channel sums over one split of the rows: Bwd=false: x-k and (x-k)^2 with k the
// channel's first value; Bwd=true: dy and dy*(x - mean[c]). partial[(split*2 + j)*C + c].
template <class T, int V, bool Bwd>
__global__ void __launch_bounds__(kBnThreads, 2)  // at most 128 registers: two blocks per SM at least
    bn_sums_inner_kernel(const T* x, const T* dy, const float* mean, int64_t ms, BnShape g, int lanes, int64_t chunk,
                         const uint8_t* mask, T* gout, double* partial) {
  __shared__ double sh[2][kBnThreads * V];
  const int lane = threadIdx.x % lanes, r = threadIdx.x / lanes, rows_per_step = blockDim.x / lanes;
  const int tile = lanes * V;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * tile + lane * V;
  const int64_t begin = blockIdx.y * chunk, end = min(begin + chunk, g.m);
  double s0[V], s1[V];
  float mu[V];
#pragma unroll
  for (int j = 0; j < V; ++j) s0[j] = s1[j] = 0.0, mu[j] = 0.f;
  if (c0 < g.c) {
    // Backward: centred on the batch mean. Forward: shifted by the channel's first
    // value, so E[(x-k)^2] - E[x-k]^2 does not cancel when |mean| >> std.
#pragma unroll
    for (int j = 0; j < V; ++j) mu[j] = Bwd ? mean[(c0 + j) * ms] : load(x[c0 + j]);
    // kSumRows rows loaded at a time; runs of kRun rows summed in float, then added to
    // the double totals.
    constexpr int kRun = Bwd ? kRunBwd : kRunFwd, kSumRows = Bwd ? kSumRowsBwd : kSumRowsFwd;
    const int64_t step = rows_per_step;
    float f0[V], f1[V];
#pragma unroll
    for (int j = 0; j < V; ++j) f0[j] = f1[j] = 0.f;
    int in_run = 0;
    for (int64_t row = begin + r; row < end; row += step * kSumRows) {
      Vec<T, V> xv[kSumRows], gv[kSumRows];
      uint32_t bits[kSumRows];
#pragma unroll
      for (int u = 0; u < kSumRows; ++u) {
        const int64_t i = (row + u * step) * g.c + c0;
        if (row + u * step >= end) continue;
        xv[u] = *reinterpret_cast<const Vec<T, V>*>(x + i);
        if constexpr (Bwd) {
          gv[u] = *reinterpret_cast<const Vec<T, V>*>(dy + i);
          bits[u] = mask ? mask_bits<V>(mask, i) : ~0u;
        }
      }
#pragma unroll
      for (int u = 0; u < kSumRows; ++u) {
        const int64_t i = (row + u * step) * g.c + c0;
        if (row + u * step >= end) continue;
        if constexpr (Bwd) {
          if (mask) {
#pragma unroll
            for (int j = 0; j < V; ++j)
              if (!((bits[u] >> j) & 1u)) gv[u].v[j] = store<T>(0.f);
            if (gout) *reinterpret_cast<Vec<T, V>*>(gout + i) = gv[u];
          }
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const float d = load(gv[u].v[j]);
            f0[j] += d;
            f1[j] = fmaf(d, load(xv[u].v[j]) - mu[j], f1[j]);
          }
        } else {
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const float v = load(xv[u].v[j]) - mu[j];
            f0[j] += v;
            f1[j] = fmaf(v, v, f1[j]);
          }
        }
      }
      if ((in_run += kSumRows) == kRun) {
#pragma unroll
        for (int j = 0; j < V; ++j) s0[j] += f0[j], s1[j] += f1[j], f0[j] = f1[j] = 0.f;
        in_run = 0;
      }
    }
#pragma unroll
    for (int j = 0; j < V; ++j) s0[j] += f0[j], s1[j] += f1[j];
  }
#pragma unroll
  for (int j = 0; j < V; ++j) {
    sh[0][r * tile + lane * V + j] = s0[j];
    sh[1][r * tile + lane * V + j] = s1[j];
  }
  __syncthreads();
  for (int t = threadIdx.x; t < tile; t += blockDim.x) {
    const int64_t c = static_cast<int64_t>(blockIdx.x) * tile + t;
    if (c >= g.c) continue;
    double a = 0.0, b = 0.0;
    for (int k = 0; k < rows_per_step; ++k) a += sh[0][k * tile + t], b += sh[1][k * tile + t];
    partial[(blockIdx.y * 2 + 0) * g.c + c] = a;
    partial[(blockIdx.y * 2 + 1) * g.c + c] = b;
  }
}

// NCHW: block (c, split) walks its share of the N*S values of channel c.
template <class T, bool Bwd>
__global__ void __launch_bounds__(kBnThreads)
    bn_sums_outer_kernel(const T* x, const T* dy, const float* mean, int64_t ms, BnShape g, int64_t chunk,
                         const uint8_t* mask, T* gout, double* partial) {
  const int64_t c = blockIdx.x;
  const int64_t begin = blockIdx.y * chunk, end = min(begin + chunk, g.m);
  const float mu = Bwd ? mean[c * ms] : load(x[c * g.s]);  // as the inner kernel: centre or shift
  double a = 0.0, b = 0.0;
  constexpr int kRun = Bwd ? kRunBwd : kRunFwd;
  for (int64_t run = begin + threadIdx.x; run < end; run += int64_t{blockDim.x} * kRun) {
    const int64_t stop = min(end, run + int64_t{blockDim.x} * kRun);
    float fa = 0.f, fb = 0.f;
    for (int64_t e = run; e < stop; e += blockDim.x) {
      const int64_t img = e / g.s, off = (img * g.c + c) * g.s + (e - img * g.s);
      const float v = load(x[off]);
      if constexpr (Bwd) {
        float d = load(dy[off]);
        if (mask) {
          if (!ops::relu_mask_bit(mask, off)) d = 0.f;
          if (gout) gout[off] = store<T>(d);
        }
        fa += d;
        fb = fmaf(d, v - mu, fb);
      } else {
        fa += v - mu;
        fb = fmaf(v - mu, v - mu, fb);
      }
    }
    a += fa;
    b += fb;
  }
  a = block_sum(a);
  b = block_sum(b);
  if (threadIdx.x == 0) {
    partial[(blockIdx.y * 2 + 0) * g.c + c] = a;
    partial[(blockIdx.y * 2 + 1) * g.c + c] = b;
  }
}

struct FloatVec {  // an optional strided f32 vector
  float* p = nullptr;
  int64_t s = 0;
  __device__ float get(int64_t i, float absent) const { return p ? p[i * s] : absent; }
  __device__ void set(int64_t i, float v) const {
    if (p) p[i * s] = v;
  }
};
FloatVec fvec(const TensorView& v) { return v.defined ? FloatVec{static_cast<float*>(v.data), v.strides[0]} : FloatVec{}; }

// A synchronised batch norm's sums of this replica's rows (op_args.h), from the sums
// passes' partials: group[c], group[C + c] and group[2C] = M. Forward: sum x and sum x^2,
// unshifted in double (the sums pass shifts by the channel's first value, which differs
// between replicas); backward: sum dy and sum dy * (x - mean) as they are (the mean is the
// group's).
template <class T, bool Bwd>
__global__ void bn_group_sums_kernel(const T* x, const double* partial, int splits, BnShape g, double* group) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c == 0) group[2 * g.c] = static_cast<double>(g.m);
  if (c >= g.c) return;
  double s = 0.0, q = 0.0;
  for (int k = 0; k < splits; ++k) s += partial[(k * 2 + 0) * g.c + c], q += partial[(k * 2 + 1) * g.c + c];
  if constexpr (!Bwd) {
    const double k = load(x[g.inner ? c : c * g.s]), m = static_cast<double>(g.m);
    q += k * (2.0 * s + m * k);
    s += m * k;
  }
  group[c] = s;
  group[g.c + c] = q;
}

// The forward's per-channel coefficients: y = ((x - k) - d) * scale + beta with mean =
// k + d (k the shift of the sums, so x - k is exact in float near the mean),
// coef[4c..4c+3] = k, d, scale, beta. Training: statistics from the sums (the group's when
// `group` is given: bn_group_sums_kernel's, summed over the replicas), running statistics
// updated with the unbiased variance. Eval: from the running statistics.
template <class T>
__global__ void bn_fwd_finish_kernel(const T* x, const double* partial, int splits, const double* group, BnShape g,
                                     bool training, double eps, double momentum, FloatVec gamma, FloatVec beta,
                                     FloatVec rm, FloatVec rv, FloatVec save_mean, FloatVec save_invstd, float* coef) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= g.c) return;
  double mean, invstd, shift = 0.0;
  if (training) {
    shift = load(x[g.inner ? c : c * g.s]);
    double m, var;
    if (group) {
      m = group[2 * g.c];
      mean = group[c] / m;
      var = fmax(group[g.c + c] / m - mean * mean, 0.0);
    } else {
      double s = 0.0, q = 0.0;
      for (int k = 0; k < splits; ++k) s += partial[(k * 2 + 0) * g.c + c], q += partial[(k * 2 + 1) * g.c + c];
      m = static_cast<double>(g.m);
      const double d = s / m;
      mean = shift + d;
      var = fmax(q / m - d * d, 0.0);
    }
    invstd = 1.0 / sqrt(var + eps);
    if (rm.p) rm.set(c, static_cast<float>((1.0 - momentum) * rm.get(c, 0.f) + momentum * mean));
    if (rv.p) rv.set(c, static_cast<float>((1.0 - momentum) * rv.get(c, 0.f) + momentum * var * m / (m - 1.0)));
  } else {
    mean = shift = rm.get(c, 0.f);
    invstd = 1.0 / sqrt(static_cast<double>(rv.get(c, 1.f)) + eps);
  }
  save_mean.set(c, static_cast<float>(mean));
  save_invstd.set(c, static_cast<float>(invstd));
  coef[4 * c + 0] = static_cast<float>(shift);
  coef[4 * c + 1] = static_cast<float>(mean - shift);
  coef[4 * c + 2] = static_cast<float>(gamma.get(c, 1.f) * invstd);
  coef[4 * c + 3] = beta.get(c, 0.f);
}

// The backward's: dx = a * dy - e + b * (x - mean), coef[4c..4c+3] = mean, a, b, e;
// dgamma = sum(dy * (x - mean)) * invstd, dbeta = sum(dy), of this replica's rows. The
// coefficients take the group's sums and rows when `group` is given. Eval mode (constant
// statistics): b = e = 0.
__global__ void bn_bwd_finish_kernel(const double* partial, int splits, const double* group, BnShape g, bool training,
                                     FloatVec gamma, FloatVec mean_v, FloatVec invstd_v, FloatVec dgamma,
                                     FloatVec dbeta, float* coef) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= g.c) return;
  double s = 0.0, q = 0.0;
  for (int k = 0; k < splits; ++k) s += partial[(k * 2 + 0) * g.c + c], q += partial[(k * 2 + 1) * g.c + c];
  const double invstd = invstd_v.get(c, 1.f);
  double m = static_cast<double>(g.m);
  const double a = gamma.get(c, 1.f) * invstd;
  dbeta.set(c, static_cast<float>(s));
  dgamma.set(c, static_cast<float>(q * invstd));
  if (group) s = group[c], q = group[g.c + c], m = group[2 * g.c];
  coef[4 * c + 0] = mean_v.get(c, 0.f);
  coef[4 * c + 1] = static_cast<float>(a);
  coef[4 * c + 2] = training ? static_cast<float>(-a * invstd * invstd * q / m) : 0.f;
  coef[4 * c + 3] = training ? static_cast<float>(a * s / m) : 0.f;
}

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
__device__ __forceinline__ Vec<T, V> bn_apply_vec(const BnCoef<T, Bwd>* k, const T* x, const T* dy, const BnFusion<T>& f,
                                                  int64_t i0, uint32_t& bits) {
  const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(x + i0);
  Vec<T, V> ov;
  if constexpr (Bwd) {
    const Vec<T, V> gv = *reinterpret_cast<const Vec<T, V>*>(dy + i0);
    const uint32_t keep = f.mask ? mask_bits<V>(f.mask, i0) : ~0u;
    bits = 0;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float d = (keep >> j) & 1u ? load(gv.v[j]) : 0.f;
      ov.v[j] = store<T>(k[j].apply(load(xv.v[j]), d));
    }
  } else {
    Vec<T, V> zv{};
    if (f.z) zv = *reinterpret_cast<const Vec<T, V>*>(f.z + i0);
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
    reinterpret_cast<Vec<T, V>*>(out)[i] = bn_apply_vec<T, V, Bwd>(k, x, dy, f, i * V, bits);
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
    *reinterpret_cast<Vec<T, V>*>(out + row * g.c + c0) = bn_apply_vec<T, V, Bwd>(k, x, dy, f, row * g.c + c0, bits);
    bn_store_bits<T, V, Bwd>(f, row * g.c + c0, bits);
  }
}

// ---- host side ---------------------------------------------------------------------

BnShape shape_of(const TensorView& x, Layout l) {
  BnShape g;
  g.c = x.sizes[1];
  g.n = x.sizes[0];
  g.s = x.dim() == 4 ? x.sizes[2] * x.sizes[3] : 1;
  g.m = g.n * g.s;
  g.inner = l == Layout::nhwc || g.s == 1;
  return g;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The vector width for these pointers: 16 bytes when the channel tiling allows it.
template <class T>
int vec_width(const BnShape& g, std::initializer_list<const void*> ptrs) {
  constexpr int v = 16 / sizeof(T);
  if ((g.inner ? g.c : g.s) % v != 0) return 1;
  for (const void* p : ptrs)
    if (!aligned16(p)) return 1;
  return v;
}

// A grid of (channel tiles) x (splits of the M values): `blocks_per_sm` blocks per SM
// at most, every thread at least `min_steps` rows (or values) of its split.
struct BnGrid {
  int lanes = 1;  // threads across a tile's channels (inner); 1 for NCHW
  int64_t tiles = 0, splits = 1, chunk = 0;
  dim3 dims() const { return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)); }
};
BnGrid bn_grid(const Context& ctx, const BnShape& g, int v, int blocks_per_sm, int min_steps) {
  BnGrid b;
  if (g.inner) {
    while (b.lanes < 32 && b.lanes * v < g.c) b.lanes *= 2;
    b.tiles = (g.c + b.lanes * v - 1) / (b.lanes * v);
  } else {
    b.tiles = g.c;  // a block per channel
  }
  const int64_t steps_per_split = int64_t{kBnThreads / (g.inner ? b.lanes : 1)} * min_steps;
  b.splits = std::max<int64_t>(1, int64_t{ctx.sm_count} * blocks_per_sm / b.tiles);
  b.splits = std::min<int64_t>({b.splits, std::max<int64_t>(1, g.m / steps_per_split), 65535});
  b.chunk = (g.m + b.splits - 1) / b.splits;
  STRATA_CHECK(b.tiles <= 0x7fffffff, "batch_norm: too many channels (", g.c, ")");
  return b;
}

struct Sums {
  DeviceBuffer partial;
  int splits = 1;
};

// Two blocks per SM, each thread at least 8 rows: the blocks the kernel's registers keep
// resident at once, so the grid runs in one wave (four per SM, two waves, left a tail that
// cost 2.2 ms of a ResNet-50 bf16 training step; docs/tuning.md).
// Backward: dy read through `mask` when given, and the masked dy written to gout if given.
template <class T, bool Bwd>
Sums run_sums(Context& ctx, const T* x, const T* dy, const TensorView& mean, const BnShape& g, int v,
              const uint8_t* mask = nullptr, T* gout = nullptr) {
  const BnGrid b = bn_grid(ctx, g, v, 2, 8);
  Sums s;
  s.splits = static_cast<int>(b.splits);
  s.partial = DeviceBuffer(ctx, sizeof(double) * 2 * g.c * b.splits);
  const float* mp = Bwd ? mean.ptr<float>() : nullptr;
  const int64_t ms = Bwd ? mean.strides[0] : 0;
  constexpr int kV = 16 / sizeof(T);
  if (!g.inner)
    bn_sums_outer_kernel<T, Bwd><<<b.dims(), kBnThreads, 0, ctx.stream>>>(x, dy, mp, ms, g, b.chunk, mask, gout,
                                                                          s.partial.as<double>());
  else if (v == kV)
    bn_sums_inner_kernel<T, kV, Bwd><<<b.dims(), kBnThreads, 0, ctx.stream>>>(x, dy, mp, ms, g, b.lanes, b.chunk,
                                                                              mask, gout, s.partial.as<double>());
  else
    bn_sums_inner_kernel<T, 1, Bwd><<<b.dims(), kBnThreads, 0, ctx.stream>>>(x, dy, mp, ms, g, b.lanes, b.chunk,
                                                                             mask, gout, s.partial.as<double>());
  STRATA_CUDA_CHECK_LAUNCH("batch norm sums kernel");
  return s;
}

// out = the forward's y (Bwd=false, dy unused) or the backward's dx. Inner: eight
// blocks per SM, each thread at least 4 rows; NCHW: a grid-stride loop over vectors.
template <class T, int V, bool Bwd>
void run_apply(Context& ctx, const T* x, const T* dy, T* out, const float* coef, const BnShape& g,
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

unsigned channel_blocks(int64_t c) { return static_cast<unsigned>((c + 255) / 256); }

// A synchronised batch norm's exchange (op_args.h): this replica's sums from the partials,
// summed over the group by `sync` on the stream. Empty without one.
template <class T, bool Bwd>
DeviceBuffer group_sums(Context& ctx, ops::ChannelSumReducer* sync, const T* x, const Sums& s, const BnShape& g) {
  if (!sync) return {};
  DeviceBuffer group(ctx, sizeof(double) * (2 * g.c + 1));
  bn_group_sums_kernel<T, Bwd><<<channel_blocks(g.c), 256, 0, ctx.stream>>>(x, s.partial.as<double>(), s.splits, g,
                                                                            group.as<double>());
  STRATA_CUDA_CHECK_LAUNCH("bn_group_sums_kernel");
  sync->all_reduce_sum(group.get(), static_cast<size_t>(2 * g.c + 1), DType::f64);
  return group;
}

void check_params(const char* op, std::initializer_list<const TensorView*> params) {
  for (const TensorView* p : params)
    STRATA_CHECK(!p->defined || p->dtype == DType::f32, op, ": the cuda backend keeps batch norm parameters and "
                 "statistics in f32, got ", dtype_name(p->dtype));
}

}  // namespace

bool own_batch_norm(const TensorView& x, const Settings& s) {
  if (x.dtype != DType::f32) return true;
  // Past cuDNN's 32-bit limits: its batch norm cannot be run in pieces along the batch, whose
  // statistics it spans, and strata's kernels index in 64 bits.
  if (!fits_cudnn(x)) return true;
  return layout_of(x) == Layout::nhwc ? !s.cudnn_nhwc_batch_norm : s.own_nchw_batch_norm;
}

void batch_norm_fwd_own(Context& ctx, const BatchNormFwdArgs& a) {
  check_params("batch_norm_fwd", {&a.gamma, &a.beta, &a.running_mean, &a.running_var, &a.save_mean, &a.save_invstd});
  STRATA_CHECK(a.training || (a.running_mean.defined && a.running_var.defined),
               "batch_norm_fwd: eval mode needs running_mean and running_var");
  const Layout l = layout_of(a.x);
  Staged x = stage_in(ctx, a.x, l);
  Staged y = stage_out(ctx, a.y, l);
  Staged z;
  if (a.z.defined) z = stage_in(ctx, a.z, l);
  const BnShape g = shape_of(x.view, l);
  DeviceBuffer coef(ctx, sizeof(float) * 4 * g.c);
  bool second_pass = false;
  dispatch_float(a.x.dtype, "batch_norm_fwd", [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, double>) {
      STRATA_FAIL("batch_norm_fwd: the cuda backend has no f64 batch norm");
    } else {
      const T* xp = x.view.ptr<T>();
      T* yp = y.view.ptr<T>();
      const BnFusion<T> f{a.z.defined ? z.view.ptr<T>() : nullptr,
                          a.relu_mask.defined ? a.relu_mask.ptr<uint8_t>() : nullptr, a.relu};
      const int v = vec_width<T>(g, {xp, yp, f.z ? static_cast<const void*>(f.z) : xp});
      Sums s;
      if (a.training) s = run_sums<T, false>(ctx, xp, nullptr, TensorView{}, g, v);
      const DeviceBuffer group = group_sums<T, false>(ctx, a.training ? a.sync : nullptr, xp, s, g);
      bn_fwd_finish_kernel<T><<<channel_blocks(g.c), 256, 0, ctx.stream>>>(
          xp, a.training ? s.partial.as<double>() : nullptr, s.splits, group.as<double>(), g, a.training, a.eps,
          a.momentum, fvec(a.gamma), fvec(a.beta), fvec(a.running_mean), fvec(a.running_var), fvec(a.save_mean),
          fvec(a.save_invstd), coef.as<float>());
      STRATA_CUDA_CHECK_LAUNCH("bn_fwd_finish_kernel");
      constexpr int kV = 16 / sizeof(T);
      // The mask's bytes need a thread's 8 values: f16/bf16 vectors. Else a second pass.
      second_pass = f.mask && !(kV == 8 && v == kV);
      const BnFusion<T> in_apply = second_pass ? BnFusion<T>{} : f;
      if (v == 1)
        run_apply<T, 1, false>(ctx, xp, nullptr, yp, coef.as<float>(), g, in_apply);
      else
        run_apply<T, kV, false>(ctx, xp, nullptr, yp, coef.as<float>(), g, in_apply);
    }
  });
  if (second_pass) batch_norm_epilogue(ctx, y.view, a.z.defined ? z.view : TensorView{}, a.relu_mask, a.relu);
  y.finish(ctx);
}

void batch_norm_bwd_own(Context& ctx, const BatchNormBwdArgs& a) {
  check_params("batch_norm_bwd", {&a.gamma, &a.save_mean, &a.save_invstd, &a.dgamma, &a.dbeta});
  STRATA_CHECK(a.save_mean.defined && a.save_invstd.defined, "batch_norm_bwd: needs save_mean and save_invstd");
  const Layout l = layout_of(a.x);
  Staged x = stage_in(ctx, a.x, l);
  Staged dy = stage_in(ctx, a.dy, l);
  Staged dx, dz;
  if (a.dx.defined) dx = stage_out(ctx, a.dx, l);
  if (a.dz.defined) dz = stage_out(ctx, a.dz, l);
  const BnShape g = shape_of(x.view, l);
  DeviceBuffer coef(ctx, sizeof(float) * 4 * g.c);
  dispatch_float(a.x.dtype, "batch_norm_bwd", [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, double>) {
      STRATA_FAIL("batch_norm_bwd: the cuda backend has no f64 batch norm");
    } else {
      const T* xp = x.view.ptr<T>();
      const T* dyp = dy.view.ptr<T>();
      T* dxp = a.dx.defined ? dx.view.ptr<T>() : nullptr;
      T* dzp = a.dz.defined ? dz.view.ptr<T>() : nullptr;
      const uint8_t* mask = a.relu_mask.defined ? a.relu_mask.ptr<const uint8_t>() : nullptr;
      const int v = vec_width<T>(g, {xp, dyp, a.dx.defined ? static_cast<const void*>(dxp) : xp,
                                     dzp ? static_cast<const void*>(dzp) : xp});
      Sums s = run_sums<T, true>(ctx, xp, dyp, a.save_mean, g, v, mask, mask ? dzp : nullptr);
      const DeviceBuffer group = group_sums<T, true>(ctx, a.training ? a.sync : nullptr, xp, s, g);
      bn_bwd_finish_kernel<<<channel_blocks(g.c), 256, 0, ctx.stream>>>(
          s.partial.as<double>(), s.splits, group.as<double>(), g, a.training, fvec(a.gamma), fvec(a.save_mean),
          fvec(a.save_invstd), fvec(a.dgamma), fvec(a.dbeta), coef.as<float>());
      STRATA_CUDA_CHECK_LAUNCH("bn_bwd_finish_kernel");
      if (!a.dx.defined) return;
      // The sums pass wrote the masked dy to dz: the apply pass reads it instead.
      const bool via_dz = mask && dzp;
      BnFusion<T> f;
      f.mask = via_dz ? nullptr : const_cast<uint8_t*>(mask);
      const T* gp = via_dz ? dzp : dyp;
      if (v == 1)
        run_apply<T, 1, true>(ctx, xp, gp, dxp, coef.as<float>(), g, f);
      else
        run_apply<T, 16 / sizeof(T), true>(ctx, xp, gp, dxp, coef.as<float>(), g, f);
    }
  });
  if (a.dx.defined) dx.finish(ctx);
  if (a.dz.defined) dz.finish(ctx);
}

}  // namespace strata::backends::cuda
