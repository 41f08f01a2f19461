// The statistics of strata's own batch norm: per-channel sums over the rows (fixed-order
// partials in double, independent of timing), a synchronised batch norm's exchange of them,
// and the per-channel finish into the apply pass's coefficients. Channel-innermost data
// (NHWC, [N,C], NCHW with 1x1 planes) is read as rows of C with 16-byte vectors across
// channels; NCHW planes are read plane by plane.
#include "strata/backends/cuda/batch_norm_passes.cuh"
#include "strata/ops/table/relu_mask.h"

namespace strata::backends::cuda {
namespace {

// Rows a statistics thread loads before it uses them (memory-level parallelism: one
// 16-byte load in flight per thread kept the forward's statistics latency-bound; more
// spill in the backward, whose loop holds twice the loads), and the rows it sums in float
// before adding to its double sums (docs/tuning.md).
constexpr int kSumRowsFwd = 4, kSumRowsBwd = 1;
constexpr int kRunFwd = 4, kRunBwd = 16;
static_assert(kRunFwd % kSumRowsFwd == 0 && kRunBwd % kSumRowsBwd == 0);

// What the sums pass adds per value: two terms, into the float runs a and b that become
// partial[(split*2 + 0)*C + c] and partial[(split*2 + 1)*C + c]; `k` is the channel's
// centre(). Both sums kernels take one of these, so each direction's arithmetic is written
// once.
//
// Forward: x - k and (x - k)^2, k the channel's first value, so E[(x-k)^2] - E[x-k]^2 does
// not cancel when |mean| >> std.
struct ShiftedMoments {
  static constexpr bool kReadsGrad = false;
  static constexpr int kRun = kRunFwd, kSumRows = kSumRowsFwd;
  template <class T>
  __device__ static float centre(const T* x, int64_t first, const float*, int64_t, int64_t) {
    return load(x[first]);
  }
  __device__ static void add(float x, float, float k, float& a, float& b) {
    const float v = x - k;
    a += v;
    b = fmaf(v, v, b);
  }
};
// Backward: dy and dy * (x - mean), centred on the batch mean.
struct GradMoments {
  static constexpr bool kReadsGrad = true;
  static constexpr int kRun = kRunBwd, kSumRows = kSumRowsBwd;
  template <class T>
  __device__ static float centre(const T*, int64_t, const float* mean, int64_t ms, int64_t c) {
    return mean[c * ms];
  }
  __device__ static void add(float x, float dy, float k, float& a, float& b) {
    a += dy;
    b = fmaf(dy, x - k, b);
  }
};

// The per-channel kernels after the sums pass (the group's exchange and both finish kernels): a block is kFinishChannels channels
// (threadIdx.x) by kFinishLanes lanes (threadIdx.y) that share the summing of each channel's
// splits (one thread per channel summing them in sequence was slow: docs/tuning.md).
constexpr int kFinishChannels = 32, kFinishLanes = 16;
unsigned finish_blocks(int64_t c) { return static_cast<unsigned>((c + kFinishChannels - 1) / kFinishChannels); }
const dim3 kFinishThreads(kFinishChannels, kFinishLanes);

// Channel c's sums over the splits (lane k adds splits k, k + kFinishLanes, ..., then lane 0
// adds the lanes in order: a fixed order), valid in lane 0; every thread of the block calls
// it, c past the channels included.
__device__ __forceinline__ void sum_splits(const double* partial, int splits, int64_t channels, int64_t c, double& s,
                                           double& q) {
  __shared__ double lanes[2][kFinishLanes][kFinishChannels];
  s = 0.0, q = 0.0;
  if (c < channels)
    for (int k = threadIdx.y; k < splits; k += kFinishLanes)
      s += partial[(k * 2 + 0) * channels + c], q += partial[(k * 2 + 1) * channels + c];
  lanes[0][threadIdx.y][threadIdx.x] = s;
  lanes[1][threadIdx.y][threadIdx.x] = q;
  __syncthreads();
  if (threadIdx.y != 0) return;
  for (int l = 1; l < kFinishLanes; ++l) s += lanes[0][l][threadIdx.x], q += lanes[1][l][threadIdx.x];
}
// This thread's channel in a finishing kernel (the lanes past 0 and channels past C have
// nothing more to do after sum_splits).
__device__ __forceinline__ int64_t finish_channel() {
  return static_cast<int64_t>(blockIdx.x) * kFinishChannels + threadIdx.x;
}

// Per-channel sums over one split of the rows (Terms: what is summed; GradMoments reads
// dy, through the mask when given, and writes the masked dy to gout if given).
template <class T, int V, class Terms>
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
#pragma unroll
    for (int j = 0; j < V; ++j) mu[j] = Terms::centre(x, c0 + j, mean, ms, c0 + j);
    // kSumRows rows loaded at a time; runs of kRun rows summed in float, then added to
    // the double totals.
    constexpr int kRun = Terms::kRun, kSumRows = Terms::kSumRows;
    const int64_t step = rows_per_step;
    float f0[V], f1[V];
#pragma unroll
    for (int j = 0; j < V; ++j) f0[j] = f1[j] = 0.f;
    int in_run = 0;
    for (int64_t row = begin + r; row < end; row += step * kSumRows) {
      Pack<T, V> xv[kSumRows], gv[kSumRows];
      uint32_t bits[kSumRows];
#pragma unroll
      for (int u = 0; u < kSumRows; ++u) {
        const int64_t i = (row + u * step) * g.c + c0;
        if (row + u * step >= end) continue;
        xv[u] = *reinterpret_cast<const Pack<T, V>*>(x + i);
        if constexpr (Terms::kReadsGrad) {
          gv[u] = *reinterpret_cast<const Pack<T, V>*>(dy + i);
          bits[u] = mask ? mask_bits<V>(mask, i) : ~0u;
        }
      }
#pragma unroll
      for (int u = 0; u < kSumRows; ++u) {
        const int64_t i = (row + u * step) * g.c + c0;
        if (row + u * step >= end) continue;
        if constexpr (Terms::kReadsGrad) {
          if (mask) {
#pragma unroll
            for (int j = 0; j < V; ++j)
              if (!((bits[u] >> j) & 1u)) gv[u].v[j] = store<T>(0.f);
            if (gout) *reinterpret_cast<Pack<T, V>*>(gout + i) = gv[u];
          }
        }
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float d = Terms::kReadsGrad ? load(gv[u].v[j]) : 0.f;
          Terms::add(load(xv[u].v[j]), d, mu[j], f0[j], f1[j]);
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
template <class T, class Terms>
__global__ void __launch_bounds__(kBnThreads)
    bn_sums_outer_kernel(const T* x, const T* dy, const float* mean, int64_t ms, BnShape g, int64_t chunk,
                         const uint8_t* mask, T* gout, double* partial) {
  const int64_t c = blockIdx.x;
  const int64_t begin = blockIdx.y * chunk, end = min(begin + chunk, g.m);
  const float mu = Terms::centre(x, c * g.s, mean, ms, c);
  double a = 0.0, b = 0.0;
  constexpr int kRun = Terms::kRun;
  for (int64_t run = begin + threadIdx.x; run < end; run += int64_t{blockDim.x} * kRun) {
    const int64_t stop = min(end, run + int64_t{blockDim.x} * kRun);
    float fa = 0.f, fb = 0.f;
    for (int64_t e = run; e < stop; e += blockDim.x) {
      const int64_t img = e / g.s, off = (img * g.c + c) * g.s + (e - img * g.s);
      const float v = load(x[off]);
      float d = 0.f;
      if constexpr (Terms::kReadsGrad) {
        d = load(dy[off]);
        if (mask) {
          if (!ops::relu_mask_bit(mask, off)) d = 0.f;
          if (gout) gout[off] = store<T>(d);
        }
      }
      Terms::add(v, d, mu, fa, fb);
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
FloatVec fvec(const ops::TensorView& v) {
  return v.defined ? FloatVec{static_cast<float*>(v.data), v.strides[0]} : FloatVec{};
}

// A synchronised batch norm's sums of this replica's rows (op_args.h), from the sums
// passes' partials: group[c], group[C + c] and group[2C] = M. Forward: sum x and sum x^2,
// unshifted in double (the sums pass shifts by the channel's first value, which differs
// between replicas); backward: sum dy and sum dy * (x - mean) as they are (the mean is the
// group's).
template <class T, bool Bwd>
__global__ void bn_group_sums_kernel(const T* x, const double* partial, int splits, BnShape g, double* group) {
  const int64_t c = finish_channel();
  double s, q;
  sum_splits(partial, splits, g.c, c, s, q);
  if (threadIdx.y != 0 || c >= g.c) return;
  if (c == 0) group[2 * g.c] = static_cast<double>(g.m);
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
  const int64_t c = finish_channel();
  double s = 0.0, q = 0.0;
  if (training && !group) sum_splits(partial, splits, g.c, c, s, q);  // the same branch for the whole block
  if (threadIdx.y != 0 || c >= g.c) return;
  double mean, invstd, shift = 0.0;
  if (training) {
    shift = load(x[g.inner ? c : c * g.s]);
    double m, var;
    if (group) {
      m = group[2 * g.c];
      mean = group[c] / m;
      var = fmax(group[g.c + c] / m - mean * mean, 0.0);
    } else {
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
  const int64_t c = finish_channel();
  double s, q;
  sum_splits(partial, splits, g.c, c, s, q);
  if (threadIdx.y != 0 || c >= g.c) return;
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

}  // namespace

// Two blocks per SM, each thread at least 8 rows: the blocks the kernel's registers keep
// resident at once, so the grid runs in one wave (two waves left a tail: docs/tuning.md).
template <class T, bool Bwd>
BnSums bn_sums(Context& ctx, const T* x, const T* dy, const ops::TensorView& mean, const BnShape& g, int v,
               const uint8_t* mask, T* gout) {
  using Terms = std::conditional_t<Bwd, GradMoments, ShiftedMoments>;
  const BnGrid b = bn_grid(ctx, g, v, 2, 8);
  BnSums s;
  s.splits = static_cast<int>(b.splits);
  s.partial = DeviceBuffer(ctx, sizeof(double) * 2 * g.c * b.splits);
  const float* mp = Bwd ? mean.ptr<float>() : nullptr;
  const int64_t ms = Bwd ? mean.strides[0] : 0;
  constexpr int kV = 16 / sizeof(T);
  if (!g.inner)
    bn_sums_outer_kernel<T, Terms><<<b.dims(), kBnThreads, 0, ctx.stream>>>(x, dy, mp, ms, g, b.chunk, mask, gout,
                                                                            s.partial.as<double>());
  else if (v == kV)
    bn_sums_inner_kernel<T, kV, Terms><<<b.dims(), kBnThreads, 0, ctx.stream>>>(x, dy, mp, ms, g, b.lanes, b.chunk,
                                                                                mask, gout, s.partial.as<double>());
  else
    bn_sums_inner_kernel<T, 1, Terms><<<b.dims(), kBnThreads, 0, ctx.stream>>>(x, dy, mp, ms, g, b.lanes, b.chunk,
                                                                               mask, gout, s.partial.as<double>());
  STRATA_CUDA_CHECK_LAUNCH("batch norm sums kernel");
  return s;
}

template <class T, bool Bwd>
DeviceBuffer bn_group_sums(Context& ctx, ops::ChannelSumReducer* sync, const T* x, const BnSums& s, const BnShape& g) {
  if (!sync) return {};
  DeviceBuffer group(ctx, sizeof(double) * (2 * g.c + 1));
  bn_group_sums_kernel<T, Bwd><<<finish_blocks(g.c), kFinishThreads, 0, ctx.stream>>>(
      x, s.partial.as<double>(), s.splits, g, group.as<double>());
  STRATA_CUDA_CHECK_LAUNCH("bn_group_sums_kernel");
  sync->all_reduce_sum(group.get(), static_cast<size_t>(2 * g.c + 1), DType::f64);
  return group;
}

template <class T>
void bn_fwd_finish(Context& ctx, const ops::BatchNormFwdArgs& a, const T* x, const BnSums& s,
                   const DeviceBuffer& group, const BnShape& g, float* coef) {
  bn_fwd_finish_kernel<T><<<finish_blocks(g.c), kFinishThreads, 0, ctx.stream>>>(
      x, a.training ? s.partial.as<double>() : nullptr, s.splits, group.as<double>(), g, a.training, a.eps,
      a.momentum, fvec(a.gamma), fvec(a.beta), fvec(a.running_mean), fvec(a.running_var), fvec(a.save_mean),
      fvec(a.save_invstd), coef);
  STRATA_CUDA_CHECK_LAUNCH("bn_fwd_finish_kernel");
}

void bn_bwd_finish(Context& ctx, const ops::BatchNormBwdArgs& a, const BnSums& s, const DeviceBuffer& group,
                   const BnShape& g, float* coef) {
  bn_bwd_finish_kernel<<<finish_blocks(g.c), kFinishThreads, 0, ctx.stream>>>(
      s.partial.as<double>(), s.splits, group.as<double>(), g, a.training, fvec(a.gamma), fvec(a.save_mean),
      fvec(a.save_invstd), fvec(a.dgamma), fvec(a.dbeta), coef);
  STRATA_CUDA_CHECK_LAUNCH("bn_bwd_finish_kernel");
}

template BnSums bn_sums<float, false>(Context&, const float*, const float*, const ops::TensorView&, const BnShape&,
                                      int, const uint8_t*, float*);
template BnSums bn_sums<float, true>(Context&, const float*, const float*, const ops::TensorView&, const BnShape&,
                                     int, const uint8_t*, float*);
template BnSums bn_sums<__half, false>(Context&, const __half*, const __half*, const ops::TensorView&,
                                       const BnShape&, int, const uint8_t*, __half*);
template BnSums bn_sums<__half, true>(Context&, const __half*, const __half*, const ops::TensorView&, const BnShape&,
                                      int, const uint8_t*, __half*);
template BnSums bn_sums<__nv_bfloat16, false>(Context&, const __nv_bfloat16*, const __nv_bfloat16*,
                                              const ops::TensorView&, const BnShape&, int, const uint8_t*,
                                              __nv_bfloat16*);
template BnSums bn_sums<__nv_bfloat16, true>(Context&, const __nv_bfloat16*, const __nv_bfloat16*,
                                             const ops::TensorView&, const BnShape&, int, const uint8_t*,
                                             __nv_bfloat16*);
template DeviceBuffer bn_group_sums<float, false>(Context&, ops::ChannelSumReducer*, const float*, const BnSums&,
                                                  const BnShape&);
template DeviceBuffer bn_group_sums<float, true>(Context&, ops::ChannelSumReducer*, const float*, const BnSums&,
                                                 const BnShape&);
template DeviceBuffer bn_group_sums<__half, false>(Context&, ops::ChannelSumReducer*, const __half*, const BnSums&,
                                                   const BnShape&);
template DeviceBuffer bn_group_sums<__half, true>(Context&, ops::ChannelSumReducer*, const __half*, const BnSums&,
                                                  const BnShape&);
template DeviceBuffer bn_group_sums<__nv_bfloat16, false>(Context&, ops::ChannelSumReducer*, const __nv_bfloat16*,
                                                          const BnSums&, const BnShape&);
template DeviceBuffer bn_group_sums<__nv_bfloat16, true>(Context&, ops::ChannelSumReducer*, const __nv_bfloat16*,
                                                         const BnSums&, const BnShape&);
template void bn_fwd_finish<float>(Context&, const ops::BatchNormFwdArgs&, const float*, const BnSums&,
                                   const DeviceBuffer&, const BnShape&, float*);
template void bn_fwd_finish<__half>(Context&, const ops::BatchNormFwdArgs&, const __half*, const BnSums&,
                                    const DeviceBuffer&, const BnShape&, float*);
template void bn_fwd_finish<__nv_bfloat16>(Context&, const ops::BatchNormFwdArgs&, const __nv_bfloat16*,
                                           const BnSums&, const DeviceBuffer&, const BnShape&, float*);

}  // namespace strata::backends::cuda
