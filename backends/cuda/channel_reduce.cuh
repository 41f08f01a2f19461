#pragma once
// Per-channel reductions: for every c along one dimension ("the channel"), M sums
// over all other elements of f(c, offsets), in double and in a fixed order
// (deterministic). Used by conv bias backward, linear bias backward and batch norm's
// eval-mode backward. Two kernels: one for channels that are innermost in memory
// (NHWC, [N,C] matrices: a warp reads 32 neighbouring channels), one for the rest
// (NCHW: a block walks one channel's contiguous planes). Internal to backends/cuda.
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/kernels.cuh"

namespace strata::backends::cuda {

// codegen:begin cuda_train_kernels channel_sums
struct ChannelGeometry {
  int64_t channels = 0;  // size of the channel dimension
  int64_t rest = 0;      // elements per channel
  int splits = 1;        // blocks along `rest` per channel (tile)
  int64_t chunk = 0;     // elements of `rest` per split
  bool inner = false;    // channel stride 1 in every operand
};

// Offsets: cstride[i] * c + rest.offsets(e)[i].
template <int N>
struct ChannelIndex {
  Strided<N> rest;
  int64_t cstride[N];
  __device__ void offsets(int64_t c, int64_t e, int64_t* off) const {
    rest.offsets(e, off);
#pragma unroll
    for (int i = 0; i < N; ++i) off[i] += c * cstride[i];
  }
};

// f(c, off, vals) writes M values for one element.
template <int N, int M, class F>
__global__ void __launch_bounds__(256) channel_reduce_outer_kernel(ChannelIndex<N> idx, ChannelGeometry g, F f, double* partial) {
  const int64_t c = blockIdx.x;
  const int split = blockIdx.y;
  const int64_t begin = split * g.chunk;
  const int64_t end = begin + g.chunk < g.rest ? begin + g.chunk : g.rest;
  double acc[M];
#pragma unroll
  for (int j = 0; j < M; ++j) acc[j] = 0.0;
  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x) {
    int64_t off[N];
    idx.offsets(c, e, off);
    double v[M];
    f(c, off, v);
#pragma unroll
    for (int j = 0; j < M; ++j) acc[j] += v[j];
  }
#pragma unroll
  for (int j = 0; j < M; ++j) {
    const double s = block_sum(acc[j]);
    if (threadIdx.x == 0) partial[(static_cast<int64_t>(split) * M + j) * g.channels + c] = s;
  }
}

// blockDim (32, 8): x picks the channel within a tile of 32, y walks `rest`.
template <int N, int M, class F>
__global__ void __launch_bounds__(256) channel_reduce_inner_kernel(ChannelIndex<N> idx, ChannelGeometry g, F f, double* partial) {
  __shared__ double sh[M][8][33];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int split = blockIdx.y;
  const int64_t begin = split * g.chunk;
  const int64_t end = begin + g.chunk < g.rest ? begin + g.chunk : g.rest;
  double acc[M];
#pragma unroll
  for (int j = 0; j < M; ++j) acc[j] = 0.0;
  if (c < g.channels) {
    for (int64_t e = begin + threadIdx.y; e < end; e += blockDim.y) {
      int64_t off[N];
      idx.offsets(c, e, off);
      double v[M];
      f(c, off, v);
#pragma unroll
      for (int j = 0; j < M; ++j) acc[j] += v[j];
    }
  }
#pragma unroll
  for (int j = 0; j < M; ++j) sh[j][threadIdx.y][threadIdx.x] = acc[j];
  __syncthreads();
  if (threadIdx.y == 0 && c < g.channels) {
#pragma unroll
    for (int j = 0; j < M; ++j) {
      double s = 0.0;
      for (int r = 0; r < 8; ++r) s += sh[j][r][threadIdx.x];
      partial[(static_cast<int64_t>(split) * M + j) * g.channels + c] = s;
    }
  }
}

// sums[j*C + c] = sum over splits, in order.
template <int M>
__global__ void channel_reduce_final_kernel(const double* partial, ChannelGeometry g, double* sums) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= g.channels) return;
#pragma unroll
  for (int j = 0; j < M; ++j) {
    double s = 0.0;
    for (int k = 0; k < g.splits; ++k) s += partial[(static_cast<int64_t>(k) * M + j) * g.channels + c];
    sums[j * g.channels + c] = s;
  }
}

// codegen:end
// Runs the reduction of f over `views` (all of `shape`) along `dim`. Returns the
// [M][C] sums in a device buffer of doubles.
template <int M, class F, class... V>
DeviceBuffer channel_sums(Context& ctx, const Shape& shape, int dim, const F& f, const V&... views) {
  constexpr int N = sizeof...(V);
  const std::array<const ops::TensorView*, N> vs{&views...};
  Shape rest_sizes;
  std::array<Shape, N> rest_strides;
  ChannelIndex<N> idx;
  ChannelGeometry g;
  g.channels = shape[dim];
  g.inner = true;
  for (int i = 0; i < N; ++i) {
    idx.cstride[i] = vs[i]->strides[dim];
    if (vs[i]->strides[dim] != 1) g.inner = false;
  }
  for (int d = 0; d < shape.size(); ++d) {
    if (d == dim) continue;
    rest_sizes.push_back(shape[d]);
    for (int i = 0; i < N; ++i) rest_strides[i].push_back(vs[i]->strides[d]);
  }
  if (g.channels == 1) g.inner = false;
  idx.rest = make_strided<N>(rest_sizes, rest_strides);
  g.rest = rest_sizes.numel();
  const int64_t tiles = g.inner ? (g.channels + 31) / 32 : g.channels;
  const int64_t want_blocks = int64_t{ctx.sm_count} * 8;
  int64_t splits = std::max<int64_t>(1, want_blocks / std::max<int64_t>(tiles, 1));
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, (g.rest + 255) / 256));
  splits = std::min<int64_t>(splits, 65535);
  g.splits = static_cast<int>(splits);
  g.chunk = (g.rest + splits - 1) / splits;
  STRATA_CHECK(tiles <= 0x7fffffff, "channel reduction: too many channels (", g.channels, ")");

  if (observing())
    observe_library({.kind = LibraryCall::Kind::channel_sums, .mode = g.inner ? 1 : 0, .m = g.splits, .k = g.chunk});
  DeviceBuffer partial(ctx, sizeof(double) * M * g.channels * g.splits);
  DeviceBuffer sums(ctx, sizeof(double) * M * std::max<int64_t>(g.channels, 1));
  if (g.channels == 0) return sums;
  if (g.inner) {
    channel_reduce_inner_kernel<N, M, F><<<dim3(static_cast<unsigned>(tiles), g.splits), dim3(32, 8), 0, ctx.stream>>>(
        idx, g, f, partial.as<double>());
  } else {
    channel_reduce_outer_kernel<N, M, F><<<dim3(static_cast<unsigned>(tiles), g.splits), 256, 0, ctx.stream>>>(
        idx, g, f, partial.as<double>());
  }
  STRATA_CUDA_CHECK_LAUNCH("channel_reduce kernel");
  channel_reduce_final_kernel<M><<<static_cast<unsigned>((g.channels + 255) / 256), 256, 0, ctx.stream>>>(
      partial.as<double>(), g, sums.as<double>());
  STRATA_CUDA_CHECK_LAUNCH("channel_reduce_final_kernel");
  return sums;
}

}  // namespace strata::backends::cuda
