// The batch norm's fusions (op_args.h) as passes of their own, for what strata's apply
// pass cannot fuse: beside cuDNN's f32 NCHW batch norm (the forward's residual add, ReLU
// and mask after it; the backward's masked gradient before it), and in strata's forward
// where a thread does not own whole mask bytes (relu_mask.h).
#include "strata/backends/cuda/batch_norm_kernels.h"
#include "strata/backends/cuda/kernels.cuh"
#include "strata/ops/table/relu_mask.h"

namespace strata::backends::cuda {

using namespace strata::ops;  // the op table's argument types
namespace {

// codegen:begin cuda_train_kernels batch_norm
// The forward's epilogue over y in place: a warp per 32 consecutive values (coalesced),
// its ballot the mask's 4 bytes; y and z dense in one memory order.
template <class T>
__global__ void __launch_bounds__(kThreads)
    bn_epilogue_kernel(T* y, const T* z, uint8_t* mask, int64_t n, bool relu) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32), chunks = (n + 31) / 32;
  for (int64_t q = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; q < chunks; q += warps) {
    const int64_t i = q * 32 + lane;
    float v = 0.f;
    if (i < n) {
      v = load(y[i]);
      if (z) v = load(store<T>(v + load(z[i])));
      if (relu && !(v > 0.f)) v = 0.f;
      y[i] = store<T>(v);
    }
    const uint32_t bits = __ballot_sync(0xffffffffu, i < n && v > 0.f);
    if (mask && lane < 4 && q * 4 + lane < (n + 7) / 8) mask[q * 4 + lane] = static_cast<uint8_t>(bits >> (8 * lane));
  }
}

// g = dy where the mask is set, else 0, for cuDNN's backward (a value per thread).
template <class T>
__global__ void __launch_bounds__(kThreads)
    bn_mask_grad_kernel(const T* dy, const uint8_t* mask, T* g, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    g[i] = ops::relu_mask_bit(mask, i) ? dy[i] : store<T>(0.f);
}
// codegen:end

}  // namespace

void batch_norm_epilogue(Context& ctx, const TensorView& y, const TensorView& z, const TensorView& mask, bool relu) {
  dispatch_float_no_f64(y.dtype, "batch_norm_fwd", [&](auto t) {
    using T = decltype(t);
    const int64_t n = y.numel();
    bn_epilogue_kernel<T><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(
        y.ptr<T>(), z.defined ? z.ptr<const T>() : nullptr, mask.defined ? mask.ptr<uint8_t>() : nullptr, n, relu);
    STRATA_CUDA_CHECK_LAUNCH("bn_epilogue_kernel");
  });
}

DeviceBuffer masked_grad(Context& ctx, const BatchNormBwdArgs& a, BatchNormBwdArgs& plain) {
  plain = a;
  plain.relu_mask = {};
  plain.dz = {};
  DeviceBuffer tmp;
  dispatch_float_no_f64(a.dy.dtype, "batch_norm_bwd", [&](auto t) {
    using T = decltype(t);
    const int64_t n = a.dy.numel();
    // Into dz when asked for, else into dx: cuDNN's backward then reads dy where it writes
    // dx (tests/cuda check it), and no temporary the size of the activation is needed.
    T* g = a.dz.defined ? a.dz.ptr<T>() : a.dx.defined ? a.dx.ptr<T>() : nullptr;
    if (!g) {
      tmp = DeviceBuffer(ctx, sizeof(T) * n);
      g = tmp.as<T>();
    }
    bn_mask_grad_kernel<T><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(
        a.dy.ptr<const T>(), a.relu_mask.ptr<const uint8_t>(), g, n);
    STRATA_CUDA_CHECK_LAUNCH("bn_mask_grad_kernel");
    plain.dy.data = g;
  });
  return tmp;
}

}  // namespace strata::backends::cuda
