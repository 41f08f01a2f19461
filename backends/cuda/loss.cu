// Losses: softmax cross-entropy (mean over the batch) and binary cross-entropy with
// logits (mean over all elements). The upstream gradient dloss is read on the device:
// no host synchronisation. A label outside [0, C) makes its row's loss NaN (the
// device cannot throw); the front end checks labels where it can.
#include "strata/backends/cuda/kernels.cuh"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

__device__ __forceinline__ float block_max(float v) {
  __shared__ float warp_max[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  const int nwarps = (blockDim.x + 31) >> 5;
  v = threadIdx.x < nwarps ? warp_max[threadIdx.x] : -INFINITY;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  return v;
}

// One block per row: max, sum of exponentials, probabilities, the row's loss.
__global__ void __launch_bounds__(512) softmax_xent_fwd_kernel(const float* x, int64_t cols, int64_t xs0, int64_t xs1, const int64_t* labels,
                                        int64_t ls, float* probs, int64_t ps0, int64_t ps1, double* row_loss) {
  __shared__ float bcast;
  const int64_t row = blockIdx.x;
  const float* xr = x + row * xs0;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j * xs1]);
  m = block_max(m);
  if (threadIdx.x == 0) bcast = m;
  __syncthreads();
  m = bcast;
  double s = 0.0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += exp(static_cast<double>(xr[j * xs1] - m));
  s = block_sum(s);
  __shared__ double total;
  if (threadIdx.x == 0) total = s;
  __syncthreads();
  s = total;
  float* pr = probs + row * ps0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    pr[j * ps1] = static_cast<float>(exp(static_cast<double>(xr[j * xs1] - m)) / s);
  if (threadIdx.x == 0) {
    const int64_t l = labels[row * ls];
    row_loss[row] = (l >= 0 && l < cols) ? log(s) + m - static_cast<double>(xr[l * xs1]) : NAN;
  }
}

struct RowLoss {
  const double* v;
  __device__ double operator()(int64_t k) const { return v[k]; }
};

struct SoftmaxXentBwdFn {
  const float* probs;
  const int64_t* labels;
  int64_t ls, cols;
  const float* dloss;
  float* dx;
  double inv_n;
  __device__ void operator()(int64_t k, const int64_t* o) const {
    const int64_t row = k / cols, col = k - row * cols;
    const double onehot = labels[row * ls] == col ? 1.0 : 0.0;
    dx[o[1]] = static_cast<float>((static_cast<double>(probs[o[0]]) - onehot) * static_cast<double>(*dloss) * inv_n);
  }
};

struct BceTerm {
  const float* x;
  const float* t;
  Strided<2> s;
  __device__ double operator()(int64_t k) const {
    int64_t o[2];
    s.offsets(k, o);
    const double v = x[o[0]], tv = t[o[1]];
    return fmax(v, 0.0) - v * tv + log1p(exp(-fabs(v)));
  }
};

struct BceBwdFn {
  const float* x;
  const float* t;
  const float* dloss;
  float* dx;
  double inv_n;
  __device__ void operator()(int64_t, const int64_t* o) const {
    const double v = x[o[0]];
    const double sig = v >= 0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v));
    dx[o[2]] = static_cast<float>((sig - static_cast<double>(t[o[1]])) * static_cast<double>(*dloss) * inv_n);
  }
};

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::softmax_xent_fwd(const SoftmaxXentFwdArgs& a) {
  dispatch_f32(a.logits.dtype, "softmax_xent_fwd", [&](auto) {
    const int64_t rows = a.logits.sizes[0], cols = a.logits.sizes[1];
    STRATA_CHECK(rows > 0 && cols > 0, "softmax_xent_fwd: empty logits ", a.logits.sizes.str());
    DeviceBuffer row_loss(*ctx_, sizeof(double) * rows);
    const int threads = cols >= 1024 ? 512 : cols >= 256 ? 256 : 128;
    softmax_xent_fwd_kernel<<<static_cast<unsigned>(rows), threads, 0, ctx_->stream>>>(
        a.logits.ptr<float>(), cols, a.logits.strides[0], a.logits.strides[1], a.labels.ptr<int64_t>(),
        a.labels.strides[0], a.probs.ptr<float>(), a.probs.strides[0], a.probs.strides[1], row_loss.as<double>());
    STRATA_CUDA_CHECK_LAUNCH("softmax_xent_fwd_kernel");
    reduce_all(*ctx_, rows, RowLoss{row_loss.as<double>()}, 1.0 / static_cast<double>(rows), a.loss.ptr<float>());
  });
}

void CudaBackend::softmax_xent_bwd(const SoftmaxXentBwdArgs& a) {
  dispatch_f32(a.probs.dtype, "softmax_xent_bwd", [&](auto) {
    const int64_t rows = a.probs.sizes[0], cols = a.probs.sizes[1];
    if (rows == 0) return;
    launch_elementwise(*ctx_, strided_of(a.probs.sizes, a.probs, a.dlogits),
                       SoftmaxXentBwdFn{a.probs.ptr<float>(), a.labels.ptr<int64_t>(), a.labels.strides[0], cols,
                                        a.dloss.ptr<float>(), a.dlogits.ptr<float>(), 1.0 / static_cast<double>(rows)});
  });
}

void CudaBackend::bce_logits_fwd(const BceLogitsFwdArgs& a) {
  dispatch_f32(a.logits.dtype, "bce_logits_fwd", [&](auto) {
    const int64_t n = a.logits.numel();
    reduce_all(*ctx_, n, BceTerm{a.logits.ptr<float>(), a.targets.ptr<float>(), strided_of(a.logits.sizes, a.logits, a.targets)},
               n ? 1.0 / static_cast<double>(n) : NAN, a.loss.ptr<float>());
  });
}

void CudaBackend::bce_logits_bwd(const BceLogitsBwdArgs& a) {
  dispatch_f32(a.logits.dtype, "bce_logits_bwd", [&](auto) {
    const int64_t n = a.logits.numel();
    if (n == 0) return;
    launch_elementwise(*ctx_, strided_of(a.logits.sizes, a.logits, a.targets, a.dlogits),
                       BceBwdFn{a.logits.ptr<float>(), a.targets.ptr<float>(), a.dloss.ptr<float>(),
                                a.dlogits.ptr<float>(), 1.0 / static_cast<double>(n)});
  });
}

}  // namespace strata::backends
