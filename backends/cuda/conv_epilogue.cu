// conv2d's epilogue when cuDNN does not run it (op_args.h: y = relu?(conv(x, w) + b + z)):
// the convolution has written y; one pass adds the bias and the residual and applies the
// ReLU, instead of a bias kernel, an add and a ReLU (three passes over y, two over z).
// Each step is rounded to y's dtype as the separate ops round it, so a bf16 result is
// that of conv, add and relu called one after another.
#include "strata/backends/cuda/cudnn_util.h"
#include "strata/backends/cuda/kernels.cuh"

namespace strata::backends::cuda {

using ops::TensorView;

namespace {

// codegen:begin cuda_kernels conv_epilogue
template <class T>
__device__ __forceinline__ T finish(acc_t<T> v, const T* b, const T* z, bool relu) {
  using A = acc_t<T>;
  if (b) v = load(store<T>(v + load(*b)));
  if (z) v = load(store<T>(v + load(*z)));
  if (relu && !(v > A(0))) v = A(0);
  return store<T>(v);
}

// Any strides: offsets of bias (broadcast along channels), z and y.
template <class T>
struct ConvEpilogue {
  const T* b;
  const T* z;
  T* y;
  bool relu;
  __device__ void operator()(int64_t, const int64_t* o) const {
    y[o[2]] = finish<T>(load(y[o[2]]), b ? b + o[0] : nullptr, z ? z + o[1] : nullptr, relu);
  }
};

// Dense y and z of one layout, indexed directly (the strided form's offsets cost more
// than the arithmetic at ResNet sizes).
template <class T, bool kChannelsLast>
__global__ void __launch_bounds__(kThreads)
    conv_epilogue_dense_kernel(T* y, const T* b, const T* z, uint32_t n, uint32_t c, uint32_t hw, bool relu) {
  const uint32_t step = gridDim.x * blockDim.x;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    const uint32_t k = kChannelsLast ? i % c : (i / hw) % c;
    y[i] = finish<T>(load(y[i]), b ? b + k : nullptr, z ? z + i : nullptr, relu);
  }
}
// codegen:end

// Channels-last, C a multiple of V, 16-byte aligned buffers: V channels per thread,
// one 16-byte access per operand (ResNet's activations in bf16 NHWC all qualify).
template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    conv_epilogue_nhwc_vec_kernel(T* y, const T* b, const T* z, uint32_t packs, uint32_t c, bool relu) {
  const uint32_t step = gridDim.x * blockDim.x;
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += step) {
    const uint32_t k0 = (p * V) % c;
    const Pack<T, V> yv = reinterpret_cast<const Pack<T, V>*>(y)[p];
    Pack<T, V> bv{}, zv{};
    if (b) bv = *reinterpret_cast<const Pack<T, V>*>(b + k0);
    if (z) zv = reinterpret_cast<const Pack<T, V>*>(z)[p];
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = finish<T>(load(yv.v[j]), b ? &bv.v[j] : nullptr, z ? &zv.v[j] : nullptr, relu);
    reinterpret_cast<Pack<T, V>*>(y)[p] = out;
  }
}

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void conv_epilogue(Context& ctx, const TensorView& y, const TensorView& bias, const TensorView& z, bool relu) {
  if (y.numel() == 0 || (!bias.defined && !z.defined && !relu)) return;
  dispatch_float(y.dtype, "conv2d_fwd epilogue", [&](auto t) {
    using T = decltype(t);
    const T* bp = bias.defined ? bias.ptr<T>() : nullptr;
    const T* zp = z.defined ? z.ptr<T>() : nullptr;
    T* yp = y.ptr<T>();
    const bool dense = y.dim() == 4 && (!bias.defined || bias.strides[0] == 1) &&
                       (!z.defined || z.strides == y.strides) && (y.is_contiguous() || y.is_channels_last()) &&
                       y.numel() < (int64_t{1} << 31);
    if (!dense) {
      const TensorView bb = bias.defined ? broadcast_along(bias, y.sizes, 1) : y;
      const TensorView& zz = z.defined ? z : y;
      return launch_elementwise(ctx, strided_by_output(y.sizes, bb, zz, y), ConvEpilogue<T>{bp, zp, yp, relu});
    }
    const bool cl = !y.is_contiguous();
    const auto n = static_cast<uint32_t>(y.numel()), c = static_cast<uint32_t>(y.sizes[1]),
               hw = static_cast<uint32_t>(y.sizes[2] * y.sizes[3]);
    constexpr int V = static_cast<int>(16 / sizeof(T));
    if (cl && c % V == 0 && aligned16(yp) && aligned16(bp) && aligned16(zp)) {
      const uint32_t packs = n / V;
      conv_epilogue_nhwc_vec_kernel<T, V><<<grid_for(ctx, packs), kThreads, 0, ctx.stream>>>(yp, bp, zp, packs, c, relu);
      STRATA_CUDA_CHECK_LAUNCH("conv_epilogue_nhwc_vec_kernel");
      return;
    }
    const auto kernel = cl ? conv_epilogue_dense_kernel<T, true> : conv_epilogue_dense_kernel<T, false>;
    kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(yp, bp, zp, n, c, hw, relu);
    STRATA_CUDA_CHECK_LAUNCH("conv_epilogue_dense_kernel");
  });
}

}  // namespace strata::backends::cuda
