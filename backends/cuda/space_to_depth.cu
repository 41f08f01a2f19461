// space_to_depth and its adjoint (op_args.h): one thread per element of the tensor
// written, visited in that tensor's memory order (channels innermost when it is
// channels-last), so writes coalesce; a channels-last block tensor whose pixels are whole
// 16-byte vectors gets one thread per pixel instead, writing vectors (one element per thread
// was bound by its index arithmetic: docs/tuning.md). Data movement only: the kernel is
// chosen by the element's width, not its dtype (zero bits are +0 in every dtype).
#include <cstdint>

#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "strata/backends/cuda/kernels.cuh"
#include "strata/core/dtype_dispatch.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

// codegen:begin cuda_kernels space_to_depth
// The two tensors' sizes and strides (elements) and the block geometry. I: the index
// type, 32-bit when every offset fits.
template <class I>
struct S2dGeom {
  I n, c, h, w;                   // the image [N, C, H, W]
  I k, ho, wo;                    // the block tensor [N, K, Ho, Wo]
  I is0, is1, is2, is3;           // the image's strides
  I bs0, bs1, bs2, bs3;           // the block tensor's strides
  I block, pad_h, pad_w;
  bool channels_inner;            // the written tensor is visited with its channels innermost
};

// Element t of a [N, C, H, W] tensor visited in memory order: channels innermost, or
// outermost after the batch. Returns {n, c, h, w}.
template <class I>
struct Coords {
  I n, c, h, w;
};
template <class I>
__device__ __forceinline__ Coords<I> coords(I t, bool channels_inner, I c_count, I h_count, I w_count) {
  Coords<I> o;
  if (channels_inner) {
    o.c = t % c_count, t /= c_count;
    o.w = t % w_count, t /= w_count;
    o.h = t % h_count, o.n = t / h_count;
  } else {
    o.w = t % w_count, t /= w_count;
    o.h = t % h_count, t /= h_count;
    o.c = t % c_count, o.n = t / c_count;
  }
  return o;
}

// Forward: every block-tensor element, read from the image or zero.
template <class E, class I>
__global__ void __launch_bounds__(kThreads) space_to_depth_kernel(const E* __restrict__ im, E* __restrict__ bt,
                                                                   S2dGeom<I> g, I total) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I t = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += step) {
    const auto [n, k, i, j] = coords(t, g.channels_inner, g.k, g.ho, g.wo);
    const I slot = k / g.c, c = k - slot * g.c;
    const I dy = slot / g.block, dx = slot - dy * g.block;
    // Unsigned-safe: the padded coordinate first, then the image's.
    const I hp = i * g.block + dy, wp = j * g.block + dx;
    const bool inside = slot < g.block * g.block && hp >= g.pad_h && hp - g.pad_h < g.h && wp >= g.pad_w &&
                        wp - g.pad_w < g.w;
    E v{0};
    if (inside) v = im[n * g.is0 + c * g.is1 + (hp - g.pad_h) * g.is2 + (wp - g.pad_w) * g.is3];
    bt[n * g.bs0 + k * g.bs1 + i * g.bs2 + j * g.bs3] = v;
  }
}
// codegen:end

// Forward, one thread per block-tensor pixel (its channels dense, K a multiple of V, every
// pixel 16-byte aligned): the pixel's K channels walked in order, V to a store.
template <class E, class I>
__global__ void __launch_bounds__(kThreads) space_to_depth_pixels_kernel(const E* __restrict__ im,
                                                                          E* __restrict__ bt, S2dGeom<I> g,
                                                                          I pixels) {
  constexpr int V = 16 / sizeof(E);
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I t = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; t < pixels; t += step) {
    const I j = t % g.wo, r = t / g.wo;
    const I i = r % g.ho, n = r / g.ho;
    E* out = bt + n * g.bs0 + i * g.bs2 + j * g.bs3;
    const E* in = im + n * g.is0;
    I c = 0, dy = 0, dx = 0;
    for (I k0 = 0; k0 < g.k; k0 += V) {
      Pack<E, V> v;
#pragma unroll
      for (int q = 0; q < V; ++q) {
        E e{0};
        if (dy < g.block) {
          const I hp = i * g.block + dy, wp = j * g.block + dx;
          if (hp >= g.pad_h && hp - g.pad_h < g.h && wp >= g.pad_w && wp - g.pad_w < g.w)
            e = in[c * g.is1 + (hp - g.pad_h) * g.is2 + (wp - g.pad_w) * g.is3];
          if (++c == g.c) {
            c = 0;
            if (++dx == g.block) dx = 0, ++dy;
          }
        }
        v.v[q] = e;
      }
      *reinterpret_cast<Pack<E, V>*>(out + k0) = v;
    }
  }
}

// codegen:begin cuda_train_kernels space_to_depth_bwd
// Backward: every image element, from its block position or zero.
template <class E, class I>
__global__ void __launch_bounds__(kThreads) depth_to_space_kernel(const E* __restrict__ bt, E* __restrict__ im,
                                                                   S2dGeom<I> g, I total) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I t = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += step) {
    const auto [n, c, h, w] = coords(t, g.channels_inner, g.c, g.h, g.w);
    const I hp = h + g.pad_h, wp = w + g.pad_w;
    const I i = hp / g.block, j = wp / g.block;
    const I k = ((hp - i * g.block) * g.block + (wp - j * g.block)) * g.c + c;
    E v{0};
    if (i < g.ho && j < g.wo) v = bt[n * g.bs0 + k * g.bs1 + i * g.bs2 + j * g.bs3];
    im[n * g.is0 + c * g.is1 + h * g.is2 + w * g.is3] = v;
  }
}
// codegen:end

// The largest offset a view reaches, plus one: below 2^31 for 32-bit indexing.
int64_t extent(const TensorView& v) {
  int64_t e = 1;
  for (int d = 0; d < v.dim(); ++d) e += (v.sizes[d] - 1) * v.strides[d];
  return e;
}

template <class I>
S2dGeom<I> geom_of(const TensorView& im, const TensorView& bt, const SpaceToDepthParams& p, bool channels_inner) {
  const auto c = [](int64_t v) { return static_cast<I>(v); };
  return {c(im.sizes[0]),   c(im.sizes[1]),   c(im.sizes[2]),   c(im.sizes[3]),   c(bt.sizes[1]),
          c(bt.sizes[2]),   c(bt.sizes[3]),   c(im.strides[0]), c(im.strides[1]), c(im.strides[2]),
          c(im.strides[3]), c(bt.strides[0]), c(bt.strides[1]), c(bt.strides[2]), c(bt.strides[3]),
          c(p.block),       c(p.pad_h),       c(p.pad_w),       channels_inner};
}

template <class E>
void run(Context& ctx, const TensorView& im, const TensorView& bt, const SpaceToDepthParams& p, bool forward) {
  const TensorView& written = forward ? bt : im;
  const int64_t total = written.numel();
  if (total == 0) return;
  const bool channels_inner = written.strides[1] == 1 && written.sizes[1] > 1;
  constexpr int V = 16 / static_cast<int>(sizeof(E));
  const bool pixels = forward && channels_inner && bt.sizes[1] % V == 0 &&
                      reinterpret_cast<uintptr_t>(bt.data) % 16 == 0 && bt.strides[0] % V == 0 &&
                      bt.strides[2] % V == 0 && bt.strides[3] % V == 0;
  const auto launch = [&](auto index) {
    using I = decltype(index);
    const S2dGeom<I> g = geom_of<I>(im, bt, p, channels_inner);
    if (pixels) {
      const int64_t count = total / bt.sizes[1];
      space_to_depth_pixels_kernel<E, I><<<grid_for(ctx, count), kThreads, 0, ctx.stream>>>(
          im.ptr<const E>(), bt.ptr<E>(), g, static_cast<I>(count));
      STRATA_CUDA_CHECK_LAUNCH("space_to_depth_pixels_kernel");
    } else if (forward) {
      space_to_depth_kernel<E, I><<<grid_for(ctx, total), kThreads, 0, ctx.stream>>>(im.ptr<const E>(), bt.ptr<E>(), g,
                                                                                     static_cast<I>(total));
      STRATA_CUDA_CHECK_LAUNCH("space_to_depth_kernel");
    } else {
      depth_to_space_kernel<E, I><<<grid_for(ctx, total), kThreads, 0, ctx.stream>>>(bt.ptr<const E>(), im.ptr<E>(), g,
                                                                                     static_cast<I>(total));
      STRATA_CUDA_CHECK_LAUNCH("depth_to_space_kernel");
    }
  };
  // Grid-stride steps stay below 2^31 too: the grid is at most sm_count * 16 blocks.
  const int64_t limit = int64_t{1} << 31;
  if (extent(im) < limit && extent(bt) < limit && total + int64_t{ctx.sm_count} * 16 * kThreads < limit)
    launch(uint32_t{});
  else
    launch(uint64_t{});
}

void by_width(Context& ctx, const TensorView& im, const TensorView& bt, const SpaceToDepthParams& p, bool forward) {
  visit_bits(im.dtype, [&](auto e) { run<decltype(e)>(ctx, im, bt, p, forward); });
}

}  // namespace
}  // namespace cuda

void CudaBackend::space_to_depth_fwd(const SpaceToDepthArgs& a) {
  cuda::observe_call(OpId::space_to_depth_fwd, a);
  cuda::observe_library(cuda::LibraryCall::Kind::own_kernel);
  cuda::by_width(*ctx_, a.x, a.y, a.p, true);
}
void CudaBackend::space_to_depth_bwd(const SpaceToDepthBwdArgs& a) {
  cuda::observe_call(OpId::space_to_depth_bwd, a);
  cuda::observe_library(cuda::LibraryCall::Kind::own_kernel);
  cuda::by_width(*ctx_, a.dx, a.dy, a.p, false);
}

}  // namespace strata::backends
