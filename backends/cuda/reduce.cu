// Reductions: sum, mean, argmax, global average pooling, per-channel sums (conv bias
// backward). All in a fixed order, accumulating in double: deterministic.
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/channel_reduce.cuh"
#include "strata/backends/cuda/cudnn_util.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

template <class T>
struct ValueAt {
  const T* x;
  Strided<1> s;
  __device__ double operator()(int64_t k) const {
    int64_t off;
    s.offsets(k, &off);
    return static_cast<double>(load(x[off]));
  }
};

// codegen:begin cuda_train_kernels channel_sums
template <class T>
struct ChannelValue {
  const T* x;
  __device__ void operator()(int64_t, const int64_t* off, double* v) const { v[0] = static_cast<double>(load(x[off[0]])); }
};

template <class T>
__global__ void store_sums_kernel(const double* sums, int64_t n, double scale, T* out, int64_t out_stride) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i * out_stride] = store<T>(sums[i] * scale);
}
// codegen:end

// One warp per row: the first maximum wins (a later element must be strictly greater);
// NaN counts as the maximum (the first NaN wins), as in PyTorch and the reference.
template <class T>
__global__ void argmax_kernel(const T* x, int64_t rows, int64_t cols, int64_t s0, int64_t s1, int64_t* y,
                              int64_t ys) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  float best = -INFINITY;
  int64_t best_i = -1;
  for (int64_t j = lane; j < cols; j += 32) {
    const float v = load(x[row * s0 + j * s1]);
    if (best_i < 0 || v > best || (isnan(v) && !isnan(best))) {
      best = v;
      best_i = j;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_down_sync(0xffffffffu, best, o);
    const int64_t oi = __shfl_down_sync(0xffffffffu, best_i, o);
    // Prefer the larger value (NaN above all); on ties the smaller index.
    const bool take = oi >= 0 && (best_i < 0 || ov > best || (isnan(ov) && !isnan(best)) ||
                                  ((ov == best || (isnan(ov) && isnan(best))) && oi < best_i));
    if (take) {
      best = ov;
      best_i = oi;
    }
  }
  if (lane == 0) y[row * ys] = best_i;
}

// codegen:begin cuda_kernels global_avg_pool
// Global average pooling forward: one warp per (n, c); lanes walk the H*W plane.
template <class T>
__global__ void gap_fwd_kernel(const T* x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t sn, int64_t sc,
                               int64_t sh, int64_t sw, T* y, int64_t yn, int64_t yc) {
  const int64_t plane = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (plane >= n * c) return;
  const int64_t in = plane / c, ic = plane % c;
  const T* base = x + in * sn + ic * sc;
  acc_t<T> acc = 0;
  for (int64_t k = lane; k < h * w; k += 32) acc += load(base[(k / w) * sh + (k % w) * sw]);
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (lane == 0) y[in * yn + ic * yc] = store<T>(acc / static_cast<acc_t<T>>(h * w));
}
// codegen:end

// codegen:begin cuda_kernels global_avg_pool_nhwc
// Channels-last: one thread per (n, c), neighbouring threads read neighbouring channels.
template <class T>
__global__ void gap_fwd_nhwc_kernel(const T* x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t sn,
                                    int64_t sc, int64_t sh, int64_t sw, T* y, int64_t yn, int64_t yc) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * c) return;
  const int64_t in = i / c, ic = i % c;
  const T* base = x + in * sn + ic * sc;
  acc_t<T> acc = 0;
  for (int64_t a = 0; a < h; ++a)
    for (int64_t b = 0; b < w; ++b) acc += load(base[a * sh + b * sw]);
  y[in * yn + ic * yc] = store<T>(acc / static_cast<acc_t<T>>(h * w));
}
// codegen:end

// codegen:begin cuda_train_kernels global_avg_pool_bwd
template <class T>
struct GapBwdFn {
  const T* dy;
  T* dx;
  float inv;
  __device__ void operator()(int64_t, const int64_t* o) const { dx[o[1]] = store<T>(load(dy[o[0]]) * inv); }
};
// codegen:end

// codegen:begin cuda_train_kernels column_sums
// Column sums of a [rows, cols] matrix of contiguous rows `ld` elements apart (linear's bias
// gradient, summed over the batch): a thread sums V neighbouring columns, 32 threads side by side
// and 8 rows apart, over the block's share of the rows; in double, in a fixed order (per thread,
// then the 8 row groups, then the shares across a warp). Rows of whole aligned 16-byte packs are
// read a pack at a time (Vec), others an element at a time, in the same order: the bits do not
// depend on the rows' alignment. The channel reduction's generic kernel read 2 bytes per thread
// per row (about 100 us for GPT-2's 16,384 x 768 bf16 gradient on an H200, where the memory takes
// 5 us).
template <class T, bool Vec>
__global__ void __launch_bounds__(256)
    column_partial_kernel(const T* x, int64_t rows, int64_t cols, int64_t ld, int64_t chunk, double* partial) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  __shared__ double sh[8][32 * V + 1];
  const int64_t tile0 = static_cast<int64_t>(blockIdx.x) * 32 * V;
  const int64_t c0 = tile0 + static_cast<int64_t>(threadIdx.x) * V;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t r1 = r0 + chunk < rows ? r0 + chunk : rows;
  double acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = 0.0;
  if (Vec && c0 < cols) {
#pragma unroll 4
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
      const Pack<T, V> p = *reinterpret_cast<const Pack<T, V>*>(x + r * ld + c0);
#pragma unroll
      for (int i = 0; i < V; ++i) acc[i] += static_cast<double>(load(p.v[i]));
    }
  } else if (c0 < cols) {
    const int n = cols - c0 < V ? static_cast<int>(cols - c0) : V;
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
      const T* row = x + r * ld + c0;
#pragma unroll
      for (int i = 0; i < V; ++i)
        if (i < n) acc[i] += static_cast<double>(load(row[i]));
    }
  }
#pragma unroll
  for (int i = 0; i < V; ++i) sh[threadIdx.y][threadIdx.x * V + i] = acc[i];
  __syncthreads();
  const int tid = threadIdx.y * 32 + threadIdx.x;
  for (int j = tid; j < 32 * V; j += 256) {
    const int64_t c = tile0 + j;
    if (c >= cols) continue;
    double v = 0.0;
    for (int y = 0; y < 8; ++y) v += sh[y][j];
    partial[static_cast<int64_t>(blockIdx.y) * cols + c] = v;
  }
}

// A warp per column sums the shares' partials (lanes 32 apart, then a fixed butterfly).
template <class O>
__global__ void column_final_kernel(const double* partial, int splits, int64_t cols, O* out, int64_t os) {
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (c >= cols) return;  // a whole warp: c is the warp's
  double v = 0.0;
  for (int k = lane; k < splits; k += 32) v += partial[static_cast<int64_t>(k) * cols + c];
  v = warp_sum(v);
  if (lane == 0) out[c * os] = store<O>(v);
}
// codegen:end

}  // namespace

bool column_sums(Context& ctx, const TensorView& x, const TensorView& out) {
  if (x.dim() != 2 || x.strides[1] != 1 || x.dtype != out.dtype || x.sizes[0] == 0 || x.sizes[1] == 0)
    return false;
  bool done = false;
  dispatch_float(x.dtype, "column sums", [&](auto t) {
    using T = decltype(t);
    constexpr int V = 16 / static_cast<int>(sizeof(T));
    const int64_t rows = x.sizes[0], cols = x.sizes[1], ld = x.strides[0];
    const bool vec = cols % V == 0 && ld % V == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
    const int64_t tiles = (cols + 32 * V - 1) / (32 * V);
    int64_t splits = std::max<int64_t>(1, int64_t{ctx.sm_count} * 8 / tiles);
    splits = std::min<int64_t>(splits, std::max<int64_t>(1, (rows + 63) / 64));
    splits = std::min<int64_t>(splits, 65535);
    const int64_t chunk = (rows + splits - 1) / splits;
    splits = (rows + chunk - 1) / chunk;
    if (observing())
      observe_library({.kind = LibraryCall::Kind::column_sums, .mode = vec ? 1 : 0, .m = splits, .k = chunk});
    DeviceBuffer partial(ctx, sizeof(double) * splits * cols);
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(splits));
    if (vec)
      column_partial_kernel<T, true><<<grid, dim3(32, 8), 0, ctx.stream>>>(x.ptr<T>(), rows, cols, ld, chunk,
                                                                          partial.as<double>());
    else
      column_partial_kernel<T, false><<<grid, dim3(32, 8), 0, ctx.stream>>>(x.ptr<T>(), rows, cols, ld, chunk,
                                                                           partial.as<double>());
    STRATA_CUDA_CHECK_LAUNCH("column_partial_kernel");
    column_final_kernel<T><<<static_cast<unsigned>((cols * 32 + 255) / 256), 256, 0, ctx.stream>>>(
        partial.as<double>(), static_cast<int>(splits), cols, out.ptr<T>(), out.strides[0]);
    STRATA_CUDA_CHECK_LAUNCH("column_final_kernel");
    done = true;
  });
  return done;
}

void sum_along(Context& ctx, const TensorView& x, int dim, const TensorView& out, double scale) {
  dispatch_float(x.dtype, "channel sum", [&](auto t) {
    using T = decltype(t);
    DeviceBuffer sums = channel_sums<1>(ctx, x.sizes, dim, ChannelValue<T>{x.ptr<T>()}, x);
    const int64_t c = x.sizes[dim];
    dispatch_float(out.dtype, "channel sum", [&](auto o) {
      using O = decltype(o);
      if (c == 0) return;
      store_sums_kernel<O><<<static_cast<unsigned>((c + 255) / 256), 256, 0, ctx.stream>>>(
          sums.as<double>(), c, scale, out.ptr<O>(), out.strides[0]);
      STRATA_CUDA_CHECK_LAUNCH("store_sums_kernel");
    });
  });
}

}  // namespace cuda

using namespace cuda;

void CudaBackend::sum(const ReduceArgs& a) {
  dispatch_float(a.x.dtype, "sum", [&](auto t) {
    using T = decltype(t);
    reduce_all(*ctx_, a.x.numel(), ValueAt<T>{a.x.ptr<T>(), strided_of(a.x.sizes, a.x)}, 1.0, a.y.ptr<T>());
  });
}

void CudaBackend::mean(const ReduceArgs& a) {
  const int64_t n = a.x.numel();
  dispatch_float(a.x.dtype, "mean", [&](auto t) {
    using T = decltype(t);
    reduce_all(*ctx_, n, ValueAt<T>{a.x.ptr<T>(), strided_of(a.x.sizes, a.x)}, n ? 1.0 / static_cast<double>(n) : NAN,
               a.y.ptr<T>());
  });
}

void CudaBackend::argmax(const ArgmaxArgs& a) {
  const int64_t rows = a.x.sizes[0], cols = a.x.sizes[1];
  if (rows == 0) return;
  STRATA_CHECK(cols > 0, "argmax: no columns in ", a.x.sizes.str());
  dispatch_float(a.x.dtype, "argmax", [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, double>) {
      STRATA_FAIL("argmax: the cuda backend supports f32, f16 and bf16, got f64");
    } else {
      const int64_t threads = rows * 32;
      argmax_kernel<T><<<static_cast<unsigned>((threads + 255) / 256), 256, 0, ctx_->stream>>>(
          a.x.ptr<T>(), rows, cols, a.x.strides[0], a.x.strides[1], a.y.ptr<int64_t>(), a.y.strides[0]);
      STRATA_CUDA_CHECK_LAUNCH("argmax_kernel");
    }
  });
}

void CudaBackend::global_avg_pool_fwd(const GlobalAvgPoolFwdArgs& a) {
  observe_call(OpId::global_avg_pool_fwd, a);
  const auto& s = a.x.sizes;
  const auto& st = a.x.strides;
  const int64_t planes = s[0] * s[1];
  if (planes == 0) return;
  dispatch_float(a.x.dtype, "global_avg_pool_fwd", [&](auto t) {
    using T = decltype(t);
    const bool nhwc = st[1] == 1 && s[1] > 1;
    if (observing()) observe_library({.kind = LibraryCall::Kind::gap_kernel, .mode = nhwc ? 1 : 0});
    if (nhwc) {
      gap_fwd_nhwc_kernel<T><<<static_cast<unsigned>((planes + 255) / 256), 256, 0, ctx_->stream>>>(
          a.x.ptr<T>(), s[0], s[1], s[2], s[3], st[0], st[1], st[2], st[3], a.y.ptr<T>(), a.y.strides[0],
          a.y.strides[1]);
    } else {
      gap_fwd_kernel<T><<<static_cast<unsigned>((planes * 32 + 255) / 256), 256, 0, ctx_->stream>>>(
          a.x.ptr<T>(), s[0], s[1], s[2], s[3], st[0], st[1], st[2], st[3], a.y.ptr<T>(), a.y.strides[0],
          a.y.strides[1]);
    }
    STRATA_CUDA_CHECK_LAUNCH("gap_fwd_kernel");
  });
}

void CudaBackend::global_avg_pool_bwd(const GlobalAvgPoolBwdArgs& a) {
  observe_call(OpId::global_avg_pool_bwd, a);
  observe_library(LibraryCall::Kind::own_kernel);
  // dx[n,c,h,w] = dy[n,c] / (H*W): dy broadcast over h, w with zero strides.
  TensorView dyb = a.dy;
  dyb.sizes = a.dx.sizes;
  dyb.strides = Shape{a.dy.strides[0], a.dy.strides[1], 0, 0};
  const float inv = 1.f / static_cast<float>(a.dx.sizes[2] * a.dx.sizes[3]);
  dispatch_float(a.dx.dtype, "global_avg_pool_bwd", [&](auto t) {
    using T = decltype(t);
    launch_elementwise(*ctx_, strided_by_output(a.dx.sizes, dyb, a.dx), GapBwdFn<T>{dyb.ptr<T>(), a.dx.ptr<T>(), inv});
  });
}

void CudaBackend::conv2d_bwd_bias(const Conv2dBwdBiasArgs& a) {
  observe_call(OpId::conv2d_bwd_bias, a);
  sum_along(*ctx_, a.dy, 1, a.db);
}

}  // namespace strata::backends
