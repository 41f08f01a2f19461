// Max pooling's backward on dense channels-last tensors in strata's kernels: cuDNN's took
// five times the time of its memory traffic (docs/tuning.md). Two passes, a few samples at a
// time: each output window's first maximum per channel, as its index inside the window (one
// byte), then each input value gathers the gradients of the windows whose maximum it is, in a
// fixed window order
// (deterministic). The first maximum in row-major order takes the gradient, NaN
// propagating, as the reference.
#include "strata/backends/cuda/kernels.cuh"
#include "strata/backends/cuda/pool_kernels.h"

namespace strata::backends::cuda {

using namespace strata::ops;  // the op table's argument types
namespace {

constexpr uint8_t kNoMax = 255;  // a window wholly in the padding (no input value)
constexpr size_t kIndexChunkBytes = Context::kScratchMax / 4;

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};
template <int V>
struct alignas(V) Bytes {
  uint8_t v[V];
};

template <class I>
struct PoolGeom {
  I n, h, w, c, oh, ow;
  int kh, kw, sh, sw, ph, pw;
};

// Thread t's pixel (n, h, w) of an [N, H, W] grid and its group of V channels: both kernels
// give a thread V neighbouring channels of one pixel, consecutive threads consecutive groups.
template <class I>
struct PixelGroup {
  I n, h, w, cg;
};
template <class I>
__device__ __forceinline__ PixelGroup<I> pixel_group(I t, I groups, I height, I width) {
  const I pix = t / groups;
  return {pix / (width * height), (pix / width) % height, pix % width, t % groups};
}

// Whether v replaces m as a window's maximum: strictly larger, or the first NaN.
__device__ __forceinline__ bool beats(float v, float m) { return v > m || (isnan(v) && !isnan(m)); }

// One thread per output pixel and V channels: the window's first maximum per channel.
// I: the index type, 32 bits when the tensors allow (64-bit division costs more than the
// loads here).
template <class T, int V, class I>
__global__ void max_pool_argmax_kernel(const T* x, uint8_t* idx, PoolGeom<I> g, I count) {
  using S = std::make_signed_t<I>;
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  const I groups = g.c / V;
  for (I t = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; t < count; t += step) {
    const auto [n, oh, ow, cg] = pixel_group(t, groups, g.oh, g.ow);
    const S h0 = static_cast<S>(oh * g.sh) - g.ph, w0 = static_cast<S>(ow * g.sw) - g.pw;
    float m[V];
    Bytes<V> best;
#pragma unroll
    for (int j = 0; j < V; ++j) m[j] = 0.f, best.v[j] = kNoMax;
    for (int i = 0; i < g.kh; ++i) {
      const S h = h0 + i;
      if (h < 0 || h >= static_cast<S>(g.h)) continue;
      for (int k = 0; k < g.kw; ++k) {
        const S w = w0 + k;
        if (w < 0 || w >= static_cast<S>(g.w)) continue;
        const I at = ((n * g.h + static_cast<I>(h)) * g.w + static_cast<I>(w)) * g.c + cg * V;
        const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(x + at);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float v = load(xv.v[j]);
          if (best.v[j] == kNoMax || beats(v, m[j])) m[j] = v, best.v[j] = static_cast<uint8_t>(i * g.kw + k);
        }
      }
    }
    reinterpret_cast<Bytes<V>*>(idx)[t] = best;
  }
}

// The first and one-past-last output index whose window covers input index i.
template <class I>
__device__ __forceinline__ void covering(I i, int k, int s, int p, I out, I& lo, I& hi) {
  using S = std::make_signed_t<I>;
  const S a = static_cast<S>(i) + p - k + 1;  // o * s >= a
  lo = a <= 0 ? 0 : static_cast<I>((a + s - 1) / s);
  hi = min(out, static_cast<I>((static_cast<S>(i) + p) / s + 1));
}

// One thread per input pixel and V channels: the sum, over the windows covering it in
// row-major order, of the gradients of those whose maximum it is.
template <class T, int V, class I>
__global__ void max_pool_gather_kernel(const uint8_t* idx, const T* dy, T* dx, PoolGeom<I> g, I count) {
  using S = std::make_signed_t<I>;
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  const I groups = g.c / V;
  for (I t = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; t < count; t += step) {
    const auto [n, h, w, cg] = pixel_group(t, groups, g.h, g.w);
    I oh0, oh1, ow0, ow1;
    covering(h, g.kh, g.sh, g.ph, g.oh, oh0, oh1);
    covering(w, g.kw, g.sw, g.pw, g.ow, ow0, ow1);
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = 0.f;
    for (I oh = oh0; oh < oh1; ++oh)
      for (I ow = ow0; ow < ow1; ++ow) {
        const S dh = static_cast<S>(h) - (static_cast<S>(oh * g.sh) - g.ph);
        const S dw = static_cast<S>(w) - (static_cast<S>(ow * g.sw) - g.pw);
        const auto pos = static_cast<uint8_t>(dh * g.kw + dw);
        const I o = ((n * g.oh + oh) * g.ow + ow) * groups + cg;
        const Bytes<V> b = reinterpret_cast<const Bytes<V>*>(idx)[o];
        const Vec<T, V> d = reinterpret_cast<const Vec<T, V>*>(dy)[o];
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (b.v[j] == pos) acc[j] += load(d.v[j]);
      }
    Vec<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = store<T>(acc[j]);
    reinterpret_cast<Vec<T, V>*>(dx)[t] = out;
  }
}

bool channels_last_dense(const TensorView& v) { return v.dim() == 4 && v.is_channels_last(); }

}  // namespace

bool max_pool2d_bwd_channels_last(Context& ctx, const MaxPool2dBwdArgs& a) {
  if (!channels_last_dense(a.x) || !channels_last_dense(a.dy) || !channels_last_dense(a.dx)) return false;
  if (!(a.dx.strides == a.x.strides) || a.p.kernel_h * a.p.kernel_w > kNoMax) return false;
  bool done = false;
  dispatch_float(a.x.dtype, "max_pool2d_bwd", [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same_v<T, double>) {
      constexpr int V = 16 / sizeof(T);
      const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
      if (a.x.sizes[1] % V != 0 || !aligned(a.x.data) || !aligned(a.dy.data) || !aligned(a.dx.data)) return;
      // The indices of a few samples at a time, so that they fit the context's kept scratch:
      // from the caching allocator, one index per output (25.7 MB for a [128, 64, 112, 112]
      // stem) sat on top of direct mode's constant arena, where static mode's free lists hid it.
      const int64_t batch = a.x.sizes[0];
      const int64_t in_sample = a.x.numel() / std::max<int64_t>(batch, 1);
      const int64_t out_sample = a.dy.numel() / std::max<int64_t>(batch, 1);
      const int64_t per_chunk =
          std::clamp<int64_t>(static_cast<int64_t>(kIndexChunkBytes) / std::max<int64_t>(out_sample, 1), 1, batch);
      DeviceBuffer idx(ctx, static_cast<size_t>(per_chunk * out_sample));
      const auto run = [&](auto index) {
        using I = decltype(index);
        for (int64_t n0 = 0; n0 < batch; n0 += per_chunk) {
          const int64_t nb = std::min(per_chunk, batch - n0);
          const PoolGeom<I> g{static_cast<I>(nb),          static_cast<I>(a.x.sizes[2]),  static_cast<I>(a.x.sizes[3]),
                              static_cast<I>(a.x.sizes[1]), static_cast<I>(a.dy.sizes[2]), static_cast<I>(a.dy.sizes[3]),
                              a.p.kernel_h,                 a.p.kernel_w,                  a.p.stride_h,
                              a.p.stride_w,                 a.p.pad_h,                     a.p.pad_w};
          const auto outs = static_cast<I>(nb * out_sample / V), ins = static_cast<I>(nb * in_sample / V);
          const T* x = a.x.ptr<T>() + n0 * in_sample;
          max_pool_argmax_kernel<T, V, I><<<grid_for(ctx, outs), kThreads, 0, ctx.stream>>>(x, idx.as<uint8_t>(), g, outs);
          STRATA_CUDA_CHECK_LAUNCH("max_pool_argmax_kernel");
          max_pool_gather_kernel<T, V, I><<<grid_for(ctx, ins), kThreads, 0, ctx.stream>>>(
              idx.as<uint8_t>(), a.dy.ptr<T>() + n0 * out_sample, a.dx.ptr<T>() + n0 * in_sample, g, ins);
          STRATA_CUDA_CHECK_LAUNCH("max_pool_gather_kernel");
        }
      };
      // 32-bit indices when every element offset fits (grid-stride steps included).
      if (a.x.numel() < (int64_t{1} << 31) && a.dy.numel() < (int64_t{1} << 31))
        run(uint32_t{});
      else
        run(uint64_t{});
      done = true;
    }
  });
  return done;
}

}  // namespace strata::backends::cuda
