// Layer norm over the rows of a matrix and its backward on the GPU, strata's own kernels
// (backends/cpu/transformer_ops.h holds the definitions, the loops these match). Every operand
// takes any strides; f16 and bf16 compute in float with float statistics, f64 in double. Every
// sum runs in a fixed order (no atomics), so results are the same bits from run to run.
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/cudnn_util.h"
#include "strata/backends/cuda/gemv.h"
#include "strata/backends/cuda/kernels.cuh"
#include "strata/backends/cuda/row_views.cuh"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

// ---- layer norm -------------------------------------------------------------------------
// G threads per row (a warp, or the block when there are few rows: a decoding step's one row
// on one warp was latency-bound, 16 us for 768 values); a thread takes the row's columns in
// chunks of eight (kernels.cuh: 16-byte loads where the rows allow them, the same order either
// way; one element per thread per load ran GPT-2's 16,384 x 768 bf16 rows at a fraction of the
// memory's bandwidth); the row is read three times (mean, variance, output), from L1/L2 after
// the first.
// codegen:begin cuda_kernels layer_norm
template <int G, class A>
__device__ __forceinline__ A row_sum(A v, A* red) {
  if constexpr (G == 32)
    return warp_sum(v);
  else
    return block_reduce<false>(v, red);
}

template <int G, class T, class S>
__global__ void __launch_bounds__(kThreads) layer_norm_fwd_kernel(View2<const T> x, bool xvec, const T* w, int64_t sw,
                                                                  bool wvec, const T* b, int64_t sb, bool bvec,
                                                                  View2<T> y, bool yvec,
                                                                  S* mean, int64_t sm, S* rstd, int64_t sr, int64_t n,
                                                                  int64_t c, double eps) {
  using A = acc_t<T>;
  __shared__ A red[32];
  const int lane = threadIdx.x % G;
  const int64_t step = static_cast<int64_t>(gridDim.x) * (kThreads / G);
  const int64_t chunks = (c + kChunk8 - 1) / kChunk8;
  A v[kChunk8];
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (kThreads / G) + threadIdx.x / G; r < n; r += step) {
    const T* xr = x.p + r * x.s0;
    A s = 0;
    for (int64_t k = lane; k < chunks; k += G) {
      const int m = load_chunk8(xr, x.s1, xvec, k, c, v);
#pragma unroll
      for (int i = 0; i < kChunk8; ++i)
        if (i < m) s += v[i];
    }
    const A mu = row_sum<G>(s, red) / static_cast<A>(c);
    A q = 0;
    for (int64_t k = lane; k < chunks; k += G) {
      const int m = load_chunk8(xr, x.s1, xvec, k, c, v);
#pragma unroll
      for (int i = 0; i < kChunk8; ++i)
        if (i < m) q = add_square(q, v[i] - mu);
    }
    const A rs = A(1) / sqrt(row_sum<G>(q, red) / static_cast<A>(c) + static_cast<A>(eps));
    for (int64_t k = lane; k < chunks; k += G) {
      const int m = load_chunk8(xr, x.s1, xvec, k, c, v);
      A wk[kChunk8], bk[kChunk8];
      if (w) load_chunk8(w, sw, wvec, k, c, wk);
      if (b) load_chunk8(b, sb, bvec, k, c, bk);
#pragma unroll
      for (int i = 0; i < kChunk8; ++i)
        if (i < m) v[i] = layer_norm_value(v[i], mu, rs, w != nullptr, w ? wk[i] : A(0), b != nullptr, b ? bk[i] : A(0));
      store_chunk8(y.p + r * y.s0, y.s1, yvec, k, m, v);
    }
    if (lane == 0) {
      mean[r * sm] = static_cast<S>(mu);
      rstd[r * sr] = static_cast<S>(rs);
    }
  }
}

// A warp per row of at most 32 * 8 * K columns, a multiple of 8, in rows x and y whose chunks
// of eight are aligned 16-byte vectors: the row is read once into registers where the general
// kernel reads it three times (from L1 after the first). Its sums run in the general kernel's
// order, so the bits are the same whichever of the two a row's alignment picks.
template <int K, class T, class S>
__global__ void __launch_bounds__(kThreads, 3)
    layer_norm_fwd_rows_kernel(View2<const T> x, const T* w, int64_t sw, bool wvec, const T* b, int64_t sb,
                               bool bvec, View2<T> y, S* mean, int64_t sm, S* rstd, int64_t sr, int64_t n, int64_t c,
                               double eps) {
  using A = acc_t<T>;
  constexpr int per = 16 / static_cast<int>(sizeof(T));
  using P = Pack<T, per>;
  const int lane = threadIdx.x % 32;
  const int64_t step = static_cast<int64_t>(gridDim.x) * (kThreads / 32);
  const int64_t chunks = c / kChunk8;
  A v[K][kChunk8];
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32; r < n; r += step) {
    const P* xr = reinterpret_cast<const P*>(x.p + r * x.s0);
    A s = 0;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int64_t k = lane + 32 * j;
      if (k < chunks) {
#pragma unroll
        for (int q = 0; q < kChunk8 / per; ++q) {
          const P pk = xr[k * (kChunk8 / per) + q];
#pragma unroll
          for (int i = 0; i < per; ++i) v[j][q * per + i] = static_cast<A>(load(pk.v[i]));
        }
#pragma unroll
        for (int i = 0; i < kChunk8; ++i) s += v[j][i];
      }
    }
    const A mu = warp_sum(s) / static_cast<A>(c);
    A q2 = 0;
#pragma unroll
    for (int j = 0; j < K; ++j)
      if (lane + 32 * j < chunks) {
#pragma unroll
        for (int i = 0; i < kChunk8; ++i) q2 = add_square(q2, v[j][i] - mu);
      }
    const A rs = A(1) / sqrt(warp_sum(q2) / static_cast<A>(c) + static_cast<A>(eps));
    P* yr = reinterpret_cast<P*>(y.p + r * y.s0);
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int64_t k = lane + 32 * j;
      if (k >= chunks) break;
      // The chunk's weights and biases in one 16-byte load each where they are dense (eight scalar
      // loads each were most of the kernel's instructions); the same values either way.
      A wk[kChunk8], bk[kChunk8];
      if (w) load_chunk8(w, sw, wvec, k, c, wk);
      if (b) load_chunk8(b, sb, bvec, k, c, bk);
#pragma unroll
      for (int q = 0; q < kChunk8 / per; ++q) {
        P pk;
#pragma unroll
        for (int i = 0; i < per; ++i)
          pk.v[i] = store<T>(layer_norm_value(v[j][q * per + i], mu, rs, w != nullptr, w ? wk[q * per + i] : A(0),
                                              b != nullptr, b ? bk[q * per + i] : A(0)));
        yr[k * (kChunk8 / per) + q] = pk;
      }
    }
    if (lane == 0) {
      mean[r * sm] = static_cast<S>(mu);
      rstd[r * sr] = static_cast<S>(rs);
    }
  }
}
// codegen:end

// dy times the weight of column j (no weight: dy itself), the g of the backward's formulas.
template <class A, class T>
__device__ __forceinline__ A weighted(A dy, const T* w, int64_t sw, int64_t j) {
  return dy * (w ? static_cast<A>(load(w[j * sw])) : A(1));
}

template <class T, class S>
__global__ void __launch_bounds__(kThreads)
    layer_norm_bwd_dx_kernel(View2<const T> x, bool xvec, const T* w, int64_t sw, const S* mean, int64_t sm,
                             const S* rstd, int64_t sr, View2<const T> dy, bool dyvec, View2<T> dx, bool dxvec,
                             int64_t n, int64_t c) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % 32;
  const int64_t step = static_cast<int64_t>(gridDim.x) * (kThreads / 32);
  const int64_t chunks = (c + kChunk8 - 1) / kChunk8;
  A xv[kChunk8], gv[kChunk8];
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32; r < n; r += step) {
    const T* xr = x.p + r * x.s0;
    const T* dyr = dy.p + r * dy.s0;
    const A mu = static_cast<A>(mean[r * sm]), rs = static_cast<A>(rstd[r * sr]);
    A sg = 0, sgx = 0;
    for (int64_t k = lane; k < chunks; k += 32) {
      const int m = load_chunk8(xr, x.s1, xvec, k, c, xv);
      load_chunk8(dyr, dy.s1, dyvec, k, c, gv);
#pragma unroll
      for (int i = 0; i < kChunk8; ++i)
        if (i < m) {
          const A g = weighted(gv[i], w, sw, k * kChunk8 + i);
          sg += g;
          sgx += g * (xv[i] - mu) * rs;
        }
    }
    const A mg = warp_sum(sg) / static_cast<A>(c), mgx = warp_sum(sgx) / static_cast<A>(c);
    for (int64_t k = lane; k < chunks; k += 32) {
      const int m = load_chunk8(xr, x.s1, xvec, k, c, xv);
      load_chunk8(dyr, dy.s1, dyvec, k, c, gv);
#pragma unroll
      for (int i = 0; i < kChunk8; ++i)
        if (i < m) {
          const A g = weighted(gv[i], w, sw, k * kChunk8 + i);
          const A xh = (xv[i] - mu) * rs;
          xv[i] = rs * (g - mg - xh * mgx);
        }
      store_chunk8(dx.p + r * dx.s0, dx.s1, dxvec, k, m, xv);
    }
  }
}

// Training's backward on rows of at most 32 * 8 * K columns (GPT-2's 768: K = 3), in one pass
// over x and dy: a warp takes rows `warps` apart, loads all of a row's chunks before using any
// (their loads in flight together) and keeps them for dx; each lane adds its columns' shares of
// dweight and dbias into its warp's row of shared memory (the chunks a lane reads are the same in
// every row, so no two lanes touch one word). The block's warps are then added in warp order and
// the blocks' partials summed by layer_norm_bwd_sum_kernel: a fixed order throughout. dx is the
// dx kernel's arithmetic, in its order. A separate pass for the weight gradients, a thread per
// column walking 64 rows with 2-byte loads, took longer than dx itself.
// Vec: x, dy and dx (when there is one) in aligned rows of whole chunks, read and written as 16-byte
// vectors with no element-wise path (fewer registers); else load_chunk8's element loads, the same
// arithmetic in the same order.
template <bool Vec, class T, class A>
__device__ __forceinline__ int load_row_chunk(const T* row, int64_t stride, int64_t k, int64_t cols,
                                              A (&v)[kChunk8]) {
  if constexpr (Vec) {
    constexpr int per = 16 / static_cast<int>(sizeof(T));
#pragma unroll
    for (int p = 0; p < kChunk8 / per; ++p) {
      const Pack<T, per> pk = reinterpret_cast<const Pack<T, per>*>(row + k * kChunk8)[p];
#pragma unroll
      for (int i = 0; i < per; ++i) v[p * per + i] = static_cast<A>(load(pk.v[i]));
    }
    return kChunk8;
  } else {
    return load_chunk8(row, stride, false, k, cols, v);
  }
}
constexpr int kFusedWarps = 4;
template <int K, bool Vec, class T, class S>
__global__ void __launch_bounds__(32 * kFusedWarps)
    layer_norm_bwd_fused_kernel(View2<const T> x, const T* w, int64_t sw, bool wvec, const S* mean, int64_t sm,
                                const S* rstd, int64_t sr, View2<const T> dy, View2<T> dx,
                                float* part_w, float* part_b, int64_t n, int64_t c) {
  static_assert(sizeof(acc_t<T>) == sizeof(float), "the fused backward sums in float");
  using A = float;
  // Element i of chunk k at [i][k]: the lanes of a warp, on chunks side by side, touch 32
  // neighbouring words (at [k * 8 + i] they were 8 words apart: 8-way bank conflicts on every add).
  constexpr int kChunks = 32 * K;
  __shared__ A shw[kFusedWarps][kChunk8][kChunks], shb[kFusedWarps][kChunk8][kChunks];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kFusedWarps;
  const int64_t chunks = (c + kChunk8 - 1) / kChunk8;
  A(&aw)[kChunk8][kChunks] = shw[warp];
  A(&ab)[kChunk8][kChunks] = shb[warp];
  for (int q = lane; q < kChunks; q += 32)
#pragma unroll
    for (int i = 0; i < kChunk8; ++i) aw[i][q] = ab[i][q] = 0;
  __syncwarp();
  A xv[K][kChunk8], gv[K][kChunk8];
  // The lane's columns' weights, loaded once for all its rows (two scalar loads per element per
  // row were most of the kernel's instructions); 1 without a weight, as weighted() multiplies.
  A wv[K][kChunk8];
#pragma unroll
  for (int j = 0; j < K; ++j) {
#pragma unroll
    for (int i = 0; i < kChunk8; ++i) wv[j][i] = A(1);
    if (w && lane + 32 * j < chunks) load_chunk8(w, sw, wvec, lane + 32 * j, c, wv[j]);
  }
  int m[K];
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kFusedWarps + warp; r < n; r += step) {
    const T* xr = x.p + r * x.s0;
    const T* dyr = dy.p + r * dy.s0;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int64_t k = lane + 32 * j;
      m[j] = 0;
      if (k < chunks) {
        m[j] = load_row_chunk<Vec>(xr, x.s1, k, c, xv[j]);
        load_row_chunk<Vec>(dyr, dy.s1, k, c, gv[j]);
      }
    }
    const A mu = static_cast<A>(mean[r * sm]), rs = static_cast<A>(rstd[r * sr]);
    A sg = 0, sgx = 0;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int64_t k = lane + 32 * j;
#pragma unroll
      for (int i = 0; i < kChunk8; ++i)
        if (i < m[j]) {
          const A xh = (xv[j][i] - mu) * rs;
          const A g = gv[j][i] * wv[j][i];
          sg += g;
          sgx += g * (xv[j][i] - mu) * rs;
          aw[i][k] += gv[j][i] * xh;
          ab[i][k] += gv[j][i];
        }
    }
    if (!dx.p) continue;
    const A mg = warp_sum(sg) / static_cast<A>(c), mgx = warp_sum(sgx) / static_cast<A>(c);
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int64_t k = lane + 32 * j;
#pragma unroll
      for (int i = 0; i < kChunk8; ++i)
        if (i < m[j]) {
          const A g = gv[j][i] * wv[j][i];
          const A xh = (xv[j][i] - mu) * rs;
          xv[j][i] = rs * (g - mg - xh * mgx);
        }
      if (m[j] > 0) store_chunk8(dx.p + r * dx.s0, dx.s1, Vec, k, m[j], xv[j]);
    }
  }
  __syncthreads();
  for (int64_t col = threadIdx.x; col < c; col += 32 * kFusedWarps) {
    const int64_t k = col / kChunk8, i = col % kChunk8;
    A vw = shw[0][i][k], vb = shb[0][i][k];
#pragma unroll
    for (int q = 1; q < kFusedWarps; ++q) vw += shw[q][i][k], vb += shb[q][i][k];
    part_w[static_cast<int64_t>(blockIdx.x) * c + col] = vw;
    part_b[static_cast<int64_t>(blockIdx.x) * c + col] = vb;
  }
}

// dweight and dbias in two passes with a fixed order: partial sums over chunks of kChunk rows
// (one thread per column and chunk), then the chunks' partials summed in chunk order.
constexpr int64_t kChunk = 64;
template <class T, class S, class A>
__global__ void layer_norm_bwd_partial_kernel(View2<const T> x, const S* mean, int64_t sm, const S* rstd, int64_t sr,
                                              View2<const T> dy, A* part_w, A* part_b, int64_t n, int64_t c) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, chunk = blockIdx.y;
  if (j >= c) return;
  A sw = 0, sb = 0;
  const int64_t end = min(n, (chunk + 1) * kChunk);
  for (int64_t r = chunk * kChunk; r < end; ++r) {
    const A g = static_cast<A>(load(dy(r, j)));
    sw += g * (static_cast<A>(load(x(r, j))) - static_cast<A>(mean[r * sm])) * static_cast<A>(rstd[r * sr]);
    sb += g;
  }
  part_w[chunk * c + j] = sw;
  part_b[chunk * c + j] = sb;
}
// A warp per column sums its chunks' partials (lanes 32 apart, then the warp's fixed butterfly):
// a thread per column walking 256 chunks one after another took 56 us for GPT-2's 768 columns.
template <class T, class A>
__global__ void layer_norm_bwd_sum_kernel(const A* part_w, const A* part_b, int64_t chunks, T* dw, int64_t sdw, T* db,
                                          int64_t sdb, int64_t c) {
  const int64_t j = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (j >= c) return;  // a whole warp: j is the warp's
  A sw = 0, sb = 0;
  for (int64_t k = lane; k < chunks; k += 32) {
    sw += part_w[k * c + j];
    sb += part_b[k * c + j];
  }
  sw = warp_sum(sw);
  sb = warp_sum(sb);
  if (lane != 0) return;
  if (dw) dw[j * sdw] = store<T>(sw);
  if (db) db[j * sdb] = store<T>(sb);
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::layer_norm_fwd(const LayerNormFwdArgs& a) {
  observe_call(OpId::layer_norm_fwd, a);
  const int64_t n = a.x.sizes[0], c = a.x.sizes[1];
  if (n == 0) return;
  // The form that ran orders each row's sums: a program repeats it (call_observer.h).
  const auto report = [&](int64_t form) {
    if (observing()) observe_library({.kind = LibraryCall::Kind::layer_norm, .mode = form});
  };
  cuda::dispatch_float(a.x.dtype, "layer_norm_fwd", [&](auto t) {
    using T = decltype(t);
    using S = cuda::stats_t<T>;
    auto launch = [&](auto g) {
      constexpr int G = decltype(g)::value;
      cuda::layer_norm_fwd_kernel<G, T, S><<<cuda::grid_for(*ctx_, n * G), kThreads, 0, ctx_->stream>>>(
          cuda::v2<const T>(a.x), cuda::rows_vectorizable<T>(a.x), a.weight.defined ? a.weight.ptr<const T>() : nullptr,
          a.weight.defined ? a.weight.strides[0] : 0, cuda::vector_vectorizable<T>(a.weight),
          a.bias.defined ? a.bias.ptr<const T>() : nullptr, a.bias.defined ? a.bias.strides[0] : 0,
          cuda::vector_vectorizable<T>(a.bias), cuda::v2<T>(a.y), cuda::rows_vectorizable<T>(a.y), a.mean.ptr<S>(),
          a.mean.strides[0], a.rstd.ptr<S>(), a.rstd.strides[0], n, c, a.eps);
      STRATA_CUDA_CHECK_LAUNCH("layer_norm_fwd_kernel");
    };
    // A block per row while the rows leave SMs idle with a warp each, else a warp per row (held in
    // registers where it fits: up to 1,024 columns in aligned chunks of eight). The few rows a
    // product normalises in its own prologue (gemv.h) keep a warp's order, which that prologue
    // repeats: the same bits whether the layer norm runs alone or in the product.
    const int64_t lanes_chunks = (c + 32 * cuda::kChunk8 - 1) / (32 * cuda::kChunk8);
    auto rows = [&](auto kk) {
      constexpr int K = decltype(kk)::value;
      cuda::layer_norm_fwd_rows_kernel<K, T, S><<<cuda::grid_for(*ctx_, n * 32), kThreads, 0, ctx_->stream>>>(
          cuda::v2<const T>(a.x), a.weight.defined ? a.weight.ptr<const T>() : nullptr,
          a.weight.defined ? a.weight.strides[0] : 0, cuda::vector_vectorizable<T>(a.weight),
          a.bias.defined ? a.bias.ptr<const T>() : nullptr, a.bias.defined ? a.bias.strides[0] : 0,
          cuda::vector_vectorizable<T>(a.bias), cuda::v2<T>(a.y), a.mean.ptr<S>(), a.mean.strides[0],
          a.rstd.ptr<S>(), a.rstd.strides[0], n, c, a.eps);
      STRATA_CUDA_CHECK_LAUNCH("layer_norm_fwd_rows_kernel");
    };
    const bool packed = c % cuda::kChunk8 == 0 && cuda::rows_vectorizable<T>(a.x) && cuda::rows_vectorizable<T>(a.y);
    const bool block = n > cuda::kGemvMaxRows && n * 8 < int64_t{ctx_->sm_count} * (kThreads / 32);
    const bool in_registers = !block && packed && lanes_chunks >= 1 && lanes_chunks <= 4;
    report(block ? kThreads : in_registers ? -lanes_chunks : 32);
    if (block)
      launch(std::integral_constant<int, kThreads>{});
    else if (packed && lanes_chunks == 1)
      rows(std::integral_constant<int, 1>{});
    else if (packed && lanes_chunks == 2)
      rows(std::integral_constant<int, 2>{});
    else if (packed && lanes_chunks == 3)
      rows(std::integral_constant<int, 3>{});
    else if (packed && lanes_chunks == 4)
      rows(std::integral_constant<int, 4>{});
    else
      launch(std::integral_constant<int, 32>{});
  });
}

void CudaBackend::layer_norm_bwd(const LayerNormBwdArgs& a) {
  const int64_t n = a.x.sizes[0], c = a.x.sizes[1];
  cuda::dispatch_float(a.x.dtype, "layer_norm_bwd", [&](auto t) {
    using T = decltype(t);
    using S = cuda::stats_t<T>;
    using A = cuda::acc_t<T>;
    const T* w = a.weight.defined ? a.weight.ptr<const T>() : nullptr;
    const int64_t sw = a.weight.defined ? a.weight.strides[0] : 0;
    // Rows of up to 1,024 columns in float: dx and the weight gradients in one pass.
    const bool fused = sizeof(A) == sizeof(float) && n > 0 && c <= 4 * 32 * cuda::kChunk8 &&
                       (a.dweight.defined || a.dbias.defined);
    if (a.dx.defined && n > 0 && !fused) {
      cuda::layer_norm_bwd_dx_kernel<T, S><<<cuda::grid_for(*ctx_, n * 32), kThreads, 0, ctx_->stream>>>(
          cuda::v2<const T>(a.x), cuda::rows_vectorizable<T>(a.x), w, sw, a.mean.ptr<const S>(), a.mean.strides[0],
          a.rstd.ptr<const S>(), a.rstd.strides[0], cuda::v2<const T>(a.dy), cuda::rows_vectorizable<T>(a.dy),
          cuda::v2<T>(a.dx), cuda::rows_vectorizable<T>(a.dx), n, c);
      STRATA_CUDA_CHECK_LAUNCH("layer_norm_bwd_dx_kernel");
    }
    if (!a.dweight.defined && !a.dbias.defined) return;
    if constexpr (sizeof(A) == sizeof(float)) {
      if (fused) {
        const int64_t lanes_chunks = (c + 32 * cuda::kChunk8 - 1) / (32 * cuda::kChunk8);  // chunks per lane
        // Four blocks an SM, each warp taking several rows (fewer partials to add).
        const int64_t rows_per_block = 4 * cuda::kFusedWarps;
        const int blocks = static_cast<int>(
            std::clamp<int64_t>((n + rows_per_block - 1) / rows_per_block, 1, int64_t{ctx_->sm_count} * 4));
        cuda::DeviceBuffer parts(*ctx_, static_cast<size_t>(2 * blocks * c) * sizeof(float));
        float* part_w = parts.as<float>();
        float* part_b = part_w + blocks * c;
        const bool vec = c % cuda::kChunk8 == 0 && cuda::rows_vectorizable<T>(a.x) &&
                         cuda::rows_vectorizable<T>(a.dy) && (!a.dx.defined || cuda::rows_vectorizable<T>(a.dx));
        auto launch = [&](auto kk) {
          constexpr int K = decltype(kk)::value;
          const auto kernel = vec ? cuda::layer_norm_bwd_fused_kernel<K, true, T, S>
                                  : cuda::layer_norm_bwd_fused_kernel<K, false, T, S>;
          kernel<<<blocks, 32 * cuda::kFusedWarps, 0, ctx_->stream>>>(
              cuda::v2<const T>(a.x), w, sw, cuda::vector_vectorizable<T>(a.weight), a.mean.ptr<const S>(),
              a.mean.strides[0], a.rstd.ptr<const S>(),
              a.rstd.strides[0], cuda::v2<const T>(a.dy), cuda::v2<T>(a.dx), part_w, part_b, n, c);
          STRATA_CUDA_CHECK_LAUNCH("layer_norm_bwd_fused_kernel");
        };
        switch (lanes_chunks) {
          case 1: launch(std::integral_constant<int, 1>{}); break;
          case 2: launch(std::integral_constant<int, 2>{}); break;
          case 3: launch(std::integral_constant<int, 3>{}); break;
          default: launch(std::integral_constant<int, 4>{}); break;
        }
        cuda::layer_norm_bwd_sum_kernel<T, float><<<static_cast<unsigned>((c * 32 + kThreads - 1) / kThreads),
                                                    kThreads, 0, ctx_->stream>>>(
            part_w, part_b, blocks, a.dweight.defined ? a.dweight.ptr<T>() : nullptr,
            a.dweight.defined ? a.dweight.strides[0] : 0, a.dbias.defined ? a.dbias.ptr<T>() : nullptr,
            a.dbias.defined ? a.dbias.strides[0] : 0, c);
        STRATA_CUDA_CHECK_LAUNCH("layer_norm_bwd_sum_kernel");
        return;
      }
    }
    const int64_t chunks = std::max<int64_t>(1, (n + cuda::kChunk - 1) / cuda::kChunk);
    cuda::DeviceBuffer parts(*ctx_, static_cast<size_t>(2 * chunks * c) * sizeof(A));
    A* part_w = parts.as<A>();
    A* part_b = part_w + chunks * c;
    const int cols = static_cast<int>((c + kThreads - 1) / kThreads);
    if (n > 0) {
      cuda::layer_norm_bwd_partial_kernel<T, S, A>
          <<<dim3(cols, static_cast<unsigned>(chunks)), kThreads, 0, ctx_->stream>>>(
              cuda::v2<const T>(a.x), a.mean.ptr<const S>(), a.mean.strides[0], a.rstd.ptr<const S>(),
              a.rstd.strides[0], cuda::v2<const T>(a.dy), part_w, part_b, n, c);
      STRATA_CUDA_CHECK_LAUNCH("layer_norm_bwd_partial_kernel");
    } else {
      STRATA_CUDA_CHECK(cudaMemsetAsync(part_w, 0, static_cast<size_t>(2 * c) * sizeof(A), ctx_->stream));
    }
    cuda::layer_norm_bwd_sum_kernel<T, A><<<static_cast<unsigned>((c * 32 + kThreads - 1) / kThreads), kThreads, 0,
                                            ctx_->stream>>>(
        part_w, part_b, n > 0 ? chunks : 1, a.dweight.defined ? a.dweight.ptr<T>() : nullptr,
        a.dweight.defined ? a.dweight.strides[0] : 0,
        a.dbias.defined ? a.dbias.ptr<T>() : nullptr, a.dbias.defined ? a.dbias.strides[0] : 0, c);
    STRATA_CUDA_CHECK_LAUNCH("layer_norm_bwd_sum_kernel");
  });
}

}  // namespace strata::backends
