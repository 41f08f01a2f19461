// Scaled dot-product attention and its backward on the GPU, strata's own kernels
// (backends/cpu/transformer_ops.h holds the definitions, the loops these match; layer norm is
// layer_norm.cu). Every operand takes any strides; f16
// and bf16 compute in float with float statistics, f64 in double. Every sum runs in a fixed
// order (no atomics), so results are the same bits from run to run.
//
// Attention keeps one query's (or, in the backward, one key's) row of scores in shared
// memory and recomputes the probabilities from the forward's log-sum-exp in the backward,
// so it never holds the [Tq, Tk] matrix in global memory. These kernels are the correct
// form for every dtype and the fast one for decoding and short rows; longer sequences go
// through cuBLAS (attention_gemm.h), where a block per row re-read every key per query
// (95 % of a GPT-2 small bf16 training step at T = 1024: docs/results/gpt_training.md).
#include <cmath>
#include <type_traits>

#include "strata/backends/cuda/attention_cudnn.h"
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/attention_decode.h"
#include "strata/backends/cuda/attention_gemm.h"
#include "strata/backends/cuda/cudnn_util.h"
#include "strata/backends/cuda/kernels.cuh"
#include "strata/backends/cuda/attention_shape.cuh"
#include "strata/backends/cuda/row_views.cuh"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

// Threads per attention block: 128 while there are blocks enough to fill the GPU (training:
// a block per query), 1024 when there are few (a decoding step: one per head), where a block's
// loops over the keys are chains of memory latencies that only more warps shorten.
// A generated program takes the kernels' launch bound only: it launches with the threads strata
// chose, which the recorded call carries (an unused constant there is a compiler warning).
constexpr int kAttnThreads = 128;
// codegen:begin cuda_kernels attention
constexpr int kAttnMaxThreads = 1024;
// codegen:end
int attn_threads(const Context& ctx, int64_t blocks) {
  return blocks < int64_t{ctx.sm_count} * 4 ? kAttnMaxThreads : kAttnThreads;
}

// ---- attention ----------------------------------------------------------------------------
// codegen:begin cuda_kernels attention

// out[d] = sum over n of w[n] * rows(n, d) for d < D, the threads split as (d, part): part p
// sums n = p, p + P, ... and the parts' sums are added in part order. `part` holds
// blockDim.x values.
template <class A, class Row>
__device__ void weighted_row_sum(const A* w, int64_t n0, int64_t n1, int64_t D, Row&& rows, A* part, A* out) {
  for (int64_t d0 = 0; d0 < D; d0 += blockDim.x) {
    const int64_t width = min(static_cast<int64_t>(blockDim.x), D - d0);
    const int parts = static_cast<int>(blockDim.x / width);
    const int64_t d = d0 + threadIdx.x % width;
    const int p = static_cast<int>(threadIdx.x / width);
    A acc = 0;
    if (p < parts)
#pragma unroll 4
      for (int64_t n = n0 + p; n < n1; n += parts) acc += w[n - n0] * rows(n, d);
    __syncthreads();
    part[threadIdx.x] = p < parts ? acc : A(0);
    __syncthreads();
    if (threadIdx.x < width) {
      A s = 0;
      for (int k = 0; k < parts; ++k) s += part[k * width + threadIdx.x];
      out[d0 + threadIdx.x] = s;
    }
    __syncthreads();
  }
}

// The dot products of two rows of D values each, a warp per pair: the lanes read D-long rows
// side by side (coalesced, where a thread per key read its row alone: 45 us for a decoding
// step's 12 heads), and each warp sums in a fixed order; every lane gets the sums.
template <class A>
struct Two {
  A x, y;
};
template <class A, class RowA, class RowB>
__device__ __forceinline__ void warp_dot2(int64_t D, RowA&& a, RowB&& b, A& ab, A& cd) {
  const int lane = threadIdx.x % 32;
  A s = 0, t = 0;
  for (int64_t d = lane; d < D; d += 32) {
    const auto [x0, x1] = a(d);
    const auto [y0, y1] = b(d);
    s += x0 * x1;
    t += y0 * y1;
  }
  ab = warp_sum(s);
  cd = warp_sum(t);
}

// The scores of up to U keys j, j + 1, ... below j1, one warp for all of them: their loads are in
// flight together (a decoding step's warp otherwise waits on one key's row at a time), and each
// key's sum runs in warp_dot2's order, so a score does not depend on U or on which warp took it.
template <int U, class A, class KeyRow>
__device__ __forceinline__ void warp_dots(int64_t D, int64_t j, int64_t j1, const A* qi, KeyRow&& key, A* s) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int u = 0; u < U; ++u) s[u] = 0;
  for (int64_t d = lane; d < D; d += 32) {
    const A x = qi[d];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (j + u < j1) s[u] += x * key(j + u, d);
  }
#pragma unroll
  for (int u = 0; u < U; ++u) s[u] = warp_sum(s[u]);
}

// Query i's keys [j0, j1) by one block: q_i into qi, the scaled scores into p (p[j - j0]), their
// max *mx, the sum *sum of exp(score - max) and the unnormalised sum_j exp(score_j - max) v_j into
// out. Shared by the whole-row kernel and the split-keys one, so both compute a chunk alike.
template <class T, class A>
__device__ void attend_keys(View4<const T> q, View4<const T> k, View4<const T> v, int64_t b, int64_t h, int64_t i,
                            int64_t j0, int64_t j1, int64_t D, double scale, A* p, A* qi, A* out, A* part, A* red,
                            A* mx_out, A* sum_out) {
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) qi[d] = static_cast<A>(load(q(b, h, i, d)));
  __syncthreads();
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  A mx = -static_cast<A>(INFINITY);
  constexpr int U = 4;
  for (int64_t j = j0 + warp * U; j < j1; j += warps * U) {
    A s[U];
    warp_dots<U>(D, j, j1, qi, [&](int64_t key, int64_t d) { return static_cast<A>(load(k(b, h, key, d))); }, s);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (j + u >= j1) break;
      const A su = s[u] * static_cast<A>(scale);
      if (threadIdx.x % 32 == 0) p[j + u - j0] = su;
      mx = max(mx, su);
    }
  }
  mx = block_reduce<true>(mx, red);  // its barriers publish p
  A sum = 0;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) sum += (p[j - j0] = exp(p[j - j0] - mx));
  sum = block_reduce<false>(sum, red);
  __syncthreads();
  weighted_row_sum(p, j0, j1, D, [&](int64_t j, int64_t d) { return static_cast<A>(load(v(b, h, j, d))); }, part, out);
  *mx_out = mx;
  *sum_out = sum;
}

// One block per (b, h, query). Shared: scores [tk], q [D], out [D], part [blockDim], red [32].
template <class T, class S>
__global__ void __launch_bounds__(kAttnMaxThreads)
    attention_fwd_kernel(View4<const T> q, View4<const T> k, View4<const T> v, View4<T> y, View3<S> lse, AttnShape sh,
                         double scale) {
  using A = acc_t<T>;
  extern __shared__ unsigned char smem_raw[];
  A* p = reinterpret_cast<A*>(smem_raw);
  A* qi = p + sh.tk;
  A* out = qi + sh.D;
  A* part = out + sh.D;
  A* red = part + blockDim.x;
  const int64_t row = blockIdx.x, i = row % sh.tq, h = (row / sh.tq) % sh.H, b = row / (sh.tq * sh.H);
  const int64_t keys = sh.keys(i);
  A mx, sum;
  attend_keys(q, k, v, b, h, i, 0, keys, sh.D, scale, p, qi, out, part, red, &mx, &sum);
  for (int64_t d = threadIdx.x; d < sh.D; d += blockDim.x) y(b, h, i, d) = store<T>(keys > 0 ? out[d] / sum : A(0));
  if (threadIdx.x == 0)
    lse(b, h, i) = static_cast<S>(keys > 0 ? mx + log(sum) : -static_cast<A>(INFINITY));
}
// codegen:end

// Few query rows over many keys (a decoding step: one query per head, 12 blocks on a GPU of
// 132 SMs) split the keys into chunks of kSplitKeys across blocks, as flash-decoding does
// (Dao, Haziza, Massa & Sizov, "Flash-Decoding for long-context inference", 2023): each block
// writes its chunk's max, sum of exponentials and unnormalised output, and a second kernel
// combines the chunks of a row in chunk order. The split is fixed by the cache's capacity tk,
// not by the keys it holds, so a captured step replays over a growing cache; chunks past the
// held keys write an empty part. Shared: scores [kSplitKeys], q [D], out [D], part [blockDim], red [32].
constexpr int64_t kSplitKeys = 64;
constexpr int kSplitThreads = 128;

template <class T, class A>
__global__ void __launch_bounds__(kSplitThreads)
    attention_fwd_split_kernel(View4<const T> q, View4<const T> k, View4<const T> v, AttnShape sh, double scale,
                               int64_t splits, A* part_m, A* part_l, A* part_o) {
  extern __shared__ unsigned char smem_raw[];
  A* p = reinterpret_cast<A*>(smem_raw);
  A* qi = p + kSplitKeys;
  A* out = qi + sh.D;
  A* part = out + sh.D;
  A* red = part + blockDim.x;
  const int64_t row = blockIdx.x / splits, split = blockIdx.x % splits;
  const int64_t i = row % sh.tq, h = (row / sh.tq) % sh.H, b = row / (sh.tq * sh.H);
  const int64_t keys = sh.keys(i), j0 = split * kSplitKeys, j1 = min(keys, j0 + kSplitKeys);
  A* o = part_o + blockIdx.x * sh.D;
  if (j0 >= j1) {
    for (int64_t d = threadIdx.x; d < sh.D; d += blockDim.x) o[d] = 0;
    if (threadIdx.x == 0) {
      part_m[blockIdx.x] = -static_cast<A>(INFINITY);
      part_l[blockIdx.x] = 0;
    }
    return;
  }
  A mx, sum;
  attend_keys(q, k, v, b, h, i, j0, j1, sh.D, scale, p, qi, out, part, red, &mx, &sum);
  for (int64_t d = threadIdx.x; d < sh.D; d += blockDim.x) o[d] = out[d];
  if (threadIdx.x == 0) {
    part_m[blockIdx.x] = mx;
    part_l[blockIdx.x] = sum;
  }
}

// One block per row: the chunks' parts rescaled to the row's max and added in chunk order.
template <class T, class S, class A>
__global__ void attention_fwd_combine_kernel(const A* part_m, const A* part_l, const A* part_o, View4<T> y,
                                             View3<S> lse, AttnShape sh, int64_t splits) {
  const int64_t row = blockIdx.x, i = row % sh.tq, h = (row / sh.tq) % sh.H, b = row / (sh.tq * sh.H);
  const A* m = part_m + row * splits;
  const A* l = part_l + row * splits;
  A mx = -static_cast<A>(INFINITY);
  for (int64_t s = 0; s < splits; ++s) mx = max(mx, m[s]);
  A sum = 0;
  for (int64_t s = 0; s < splits; ++s)
    if (l[s] > 0) sum += l[s] * exp(m[s] - mx);
  for (int64_t d = threadIdx.x; d < sh.D; d += blockDim.x) {
    A acc = 0;
    for (int64_t s = 0; s < splits; ++s)
      if (l[s] > 0) acc += part_o[(row * splits + s) * sh.D + d] * exp(m[s] - mx);
    y(b, h, i, d) = store<T>(sum > 0 ? acc / sum : A(0));
  }
  if (threadIdx.x == 0) lse(b, h, i) = static_cast<S>(sum > 0 ? mx + log(sum) : -static_cast<A>(INFINITY));
}

// One block per (b, h, query): delta_i, then dq_i = scale sum_j dS_ij k_j.
// Shared: ds [tk], dy_i [D], q_i [D], out [D], part [blockDim], red [32].
template <class T, class S>
__global__ void __launch_bounds__(kAttnMaxThreads)
    attention_bwd_dq_kernel(View4<const T> q, View4<const T> k, View4<const T> v, View4<const T> y,
                            View3<const S> lse, View4<const T> dy, View3<S> delta, View4<T> dq, AttnShape sh,
                            double scale) {
  using A = acc_t<T>;
  extern __shared__ unsigned char smem_raw[];
  A* ds = reinterpret_cast<A*>(smem_raw);
  A* gi = ds + sh.tk;
  A* qi = gi + sh.D;
  A* out = qi + sh.D;
  A* part = out + sh.D;
  A* red = part + blockDim.x;
  const int64_t row = blockIdx.x, i = row % sh.tq, h = (row / sh.tq) % sh.H, b = row / (sh.tq * sh.H);
  A dd = 0;
  for (int64_t d = threadIdx.x; d < sh.D; d += blockDim.x) {
    gi[d] = static_cast<A>(load(dy(b, h, i, d)));
    qi[d] = static_cast<A>(load(q(b, h, i, d)));
    dd += gi[d] * static_cast<A>(load(y(b, h, i, d)));
  }
  const A di = block_reduce<false>(dd, red);  // its barriers publish gi and qi
  if (threadIdx.x == 0) delta(b, h, i) = static_cast<S>(di);
  const A li = static_cast<A>(lse(b, h, i)), sc = static_cast<A>(scale);
  const int64_t keys = sh.keys(i);
  for (int64_t j = threadIdx.x / 32; j < keys; j += blockDim.x / 32) {
    A s, dp;
    warp_dot2<A>(
        sh.D, [&](int64_t d) { return Two<A>{qi[d], static_cast<A>(load(k(b, h, j, d)))}; },
        [&](int64_t d) { return Two<A>{gi[d], static_cast<A>(load(v(b, h, j, d)))}; }, s, dp);
    if (threadIdx.x % 32 == 0) ds[j] = exp(s * sc - li) * (dp - di);
  }
  __syncthreads();
  weighted_row_sum(ds, 0, keys, sh.D, [&](int64_t j, int64_t d) { return static_cast<A>(load(k(b, h, j, d))); }, part,
                   out);
  for (int64_t d = threadIdx.x; d < sh.D; d += blockDim.x) dq(b, h, i, d) = store<T>(sc * out[d]);
}

// One block per (b, h, key): dv_j = sum_i P_ij dy_i, dk_j = scale sum_i dS_ij q_i.
// Shared: p [tq], ds [tq], k_j [D], v_j [D], out [D], part [blockDim].
template <class T, class S>
__global__ void __launch_bounds__(kAttnMaxThreads)
    attention_bwd_dkv_kernel(View4<const T> q, View4<const T> k, View4<const T> v, View3<const S> lse,
                             View4<const T> dy, View3<const S> delta, View4<T> dk, View4<T> dv, AttnShape sh,
                             double scale) {
  using A = acc_t<T>;
  extern __shared__ unsigned char smem_raw[];
  A* p = reinterpret_cast<A*>(smem_raw);
  A* ds = p + sh.tq;
  A* kj = ds + sh.tq;
  A* vj = kj + sh.D;
  A* out = vj + sh.D;
  A* part = out + sh.D;
  const int64_t row = blockIdx.x, j = row % sh.tk, h = (row / sh.tk) % sh.H, b = row / (sh.tk * sh.H);
  for (int64_t d = threadIdx.x; d < sh.D; d += blockDim.x) {
    kj[d] = static_cast<A>(load(k(b, h, j, d)));
    vj[d] = static_cast<A>(load(v(b, h, j, d)));
  }
  __syncthreads();
  const A sc = static_cast<A>(scale);
  const int64_t i0 = sh.first_query(j);
  for (int64_t i = i0 + threadIdx.x / 32; i < sh.tq; i += blockDim.x / 32) {
    A s, dp;
    warp_dot2<A>(
        sh.D, [&](int64_t d) { return Two<A>{static_cast<A>(load(q(b, h, i, d))), kj[d]}; },
        [&](int64_t d) { return Two<A>{static_cast<A>(load(dy(b, h, i, d))), vj[d]}; }, s, dp);
    if (threadIdx.x % 32 == 0) {
      const A pij = exp(s * sc - static_cast<A>(lse(b, h, i)));
      p[i - i0] = pij;
      ds[i - i0] = pij * (dp - static_cast<A>(delta(b, h, i)));
    }
  }
  __syncthreads();
  weighted_row_sum(p, i0, sh.tq, sh.D, [&](int64_t i, int64_t d) { return static_cast<A>(load(dy(b, h, i, d))); },
                   part, out);
  for (int64_t d = threadIdx.x; d < sh.D; d += blockDim.x) dv(b, h, j, d) = store<T>(out[d]);
  __syncthreads();
  weighted_row_sum(ds, i0, sh.tq, sh.D, [&](int64_t i, int64_t d) { return static_cast<A>(load(q(b, h, i, d))); },
                   part, out);
  for (int64_t d = threadIdx.x; d < sh.D; d += blockDim.x) dk(b, h, j, d) = store<T>(sc * out[d]);
}

// The dynamic shared memory of a kernel above, opted in beyond the 48 KiB default when the
// rows need it; a row longer than the device allows is an error naming the op.
template <class Kernel>
size_t attention_smem(const Context& ctx, Kernel kernel, const char* op, int64_t rows, int64_t D, size_t elem,
                      int threads) {
  const size_t bytes = (static_cast<size_t>(rows) + 3 * static_cast<size_t>(D) + threads + 32) * elem;
  int dev = 0, most = 0;
  STRATA_CUDA_CHECK(cudaGetDevice(&dev));
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  STRATA_CHECK(bytes <= static_cast<size_t>(most), op, ": a row of ", rows, " keys or queries with head dim ", D,
               " needs ", bytes, " bytes of shared memory, more than the device's ", most,
               " (strata's attention kernel keeps one row of scores on chip)");
  if (bytes > 48 * 1024)
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  (void)ctx;
  return bytes;
}


}  // namespace
}  // namespace cuda

using cuda::kThreads;

void CudaBackend::attention_fwd(const AttentionFwdArgs& a) {
  cuda::observe_call(OpId::attention_fwd, a);
  // Which form ran (call_observer.h); a program writes out the whole-row kernel only.
  const auto other = [](int64_t form) {
    if (cuda::observing()) cuda::observe_library({.kind = cuda::LibraryCall::Kind::attention_other, .mode = form});
  };
  if (cuda::attention_decode(*ctx_, a)) return other(2);
  if (a.k_new.defined) cuda::attention_append(*ctx_, a);
  if (settings_.cudnn_attention && cuda::cudnn_attention_fwd(*ctx_, a, settings_).empty()) return other(4);
  if (cuda::gemm_attention_fwd(*ctx_, settings_, a)) return other(3);
  ++ctx_->own_attentions;
  const cuda::AttnShape sh = cuda::attn_shape(a.q, a.k, a.causal, a.kv_len);
  const int64_t rows = sh.B * sh.H * sh.tq;
  if (rows == 0) return;
  cuda::dispatch_float(a.q.dtype, "attention_fwd", [&](auto t) {
    using T = decltype(t);
    using S = cuda::stats_t<T>;
    using A = cuda::acc_t<T>;
    const int64_t splits = (sh.tk + cuda::kSplitKeys - 1) / cuda::kSplitKeys;
    if (rows < ctx_->sm_count && splits > 1 && sh.tk >= settings_.attention_split_min_keys) {  // few rows, many keys
      const size_t parts = static_cast<size_t>(rows * splits);
      cuda::DeviceBuffer m(*ctx_, parts * sizeof(A)), l(*ctx_, parts * sizeof(A)),
          o(*ctx_, parts * static_cast<size_t>(sh.D) * sizeof(A));
      const size_t smem = (static_cast<size_t>(cuda::kSplitKeys + 2 * sh.D) + cuda::kSplitThreads + 32) * sizeof(A);
      STRATA_CHECK(smem <= 48 * 1024, "attention_fwd: head dim ", sh.D, " is too large for the split-keys kernel");
      cuda::attention_fwd_split_kernel<T, A><<<static_cast<unsigned>(parts), cuda::kSplitThreads, smem, ctx_->stream>>>(
          cuda::v4<const T>(a.q), cuda::v4<const T>(a.k), cuda::v4<const T>(a.v), sh, a.scale, splits, m.as<A>(),
          l.as<A>(), o.as<A>());
      STRATA_CUDA_CHECK_LAUNCH("attention_fwd_split_kernel");
      other(1);
      cuda::attention_fwd_combine_kernel<T, S, A><<<static_cast<unsigned>(rows), cuda::kSplitThreads, 0, ctx_->stream>>>(
          m.as<const A>(), l.as<const A>(), o.as<const A>(), cuda::v4<T>(a.y), cuda::v3<S>(a.lse), sh, splits);
      STRATA_CUDA_CHECK_LAUNCH("attention_fwd_combine_kernel");
      return;
    }
    auto kernel = cuda::attention_fwd_kernel<T, S>;
    const int threads = cuda::attn_threads(*ctx_, rows);
    const size_t smem =
        cuda::attention_smem(*ctx_, kernel, "attention_fwd", sh.tk, sh.D, sizeof(cuda::acc_t<T>), threads);
    if (cuda::observing())
      cuda::observe_library({.kind = cuda::LibraryCall::Kind::attention, .m = threads, .k = static_cast<int64_t>(smem)});
    kernel<<<static_cast<unsigned>(rows), threads, smem, ctx_->stream>>>(
        cuda::v4<const T>(a.q), cuda::v4<const T>(a.k), cuda::v4<const T>(a.v), cuda::v4<T>(a.y), cuda::v3<S>(a.lse),
        sh, a.scale);
    STRATA_CUDA_CHECK_LAUNCH("attention_fwd_kernel");
  });
}

void CudaBackend::attention_bwd(const AttentionBwdArgs& a) {
  if (settings_.cudnn_attention && cuda::cudnn_attention_bwd(*ctx_, a, settings_).empty()) return;
  if (cuda::gemm_attention_bwd(*ctx_, settings_, a)) return;
  ++ctx_->own_attentions;
  const cuda::AttnShape sh = cuda::attn_shape(a.q, a.k, a.causal, a.kv_len);
  cuda::dispatch_float(a.q.dtype, "attention_bwd", [&](auto t) {
    using T = decltype(t);
    using S = cuda::stats_t<T>;
    const size_t elem = sizeof(cuda::acc_t<T>);
    if (sh.B * sh.H * sh.tq > 0) {
      auto kernel = cuda::attention_bwd_dq_kernel<T, S>;
      const int threads = cuda::attn_threads(*ctx_, sh.B * sh.H * sh.tq);
      const size_t smem = cuda::attention_smem(*ctx_, kernel, "attention_bwd", sh.tk, sh.D, elem, threads);
      kernel<<<static_cast<unsigned>(sh.B * sh.H * sh.tq), threads, smem, ctx_->stream>>>(
          cuda::v4<const T>(a.q), cuda::v4<const T>(a.k), cuda::v4<const T>(a.v), cuda::v4<const T>(a.y),
          cuda::v3<const S>(a.lse), cuda::v4<const T>(a.dy), cuda::v3<S>(a.delta), cuda::v4<T>(a.dq), sh, a.scale);
      STRATA_CUDA_CHECK_LAUNCH("attention_bwd_dq_kernel");
    }
    if (sh.B * sh.H * sh.tk > 0) {
      auto kernel = cuda::attention_bwd_dkv_kernel<T, S>;
      const int threads = cuda::attn_threads(*ctx_, sh.B * sh.H * sh.tk);
      const size_t smem = cuda::attention_smem(*ctx_, kernel, "attention_bwd", 2 * sh.tq, sh.D, elem, threads);
      kernel<<<static_cast<unsigned>(sh.B * sh.H * sh.tk), threads, smem, ctx_->stream>>>(
          cuda::v4<const T>(a.q), cuda::v4<const T>(a.k), cuda::v4<const T>(a.v), cuda::v3<const S>(a.lse),
          cuda::v4<const T>(a.dy), cuda::v3<const S>(a.delta), cuda::v4<T>(a.dk), cuda::v4<T>(a.dv), sh, a.scale);
      STRATA_CUDA_CHECK_LAUNCH("attention_bwd_dkv_kernel");
    }
  });
}

}  // namespace strata::backends
