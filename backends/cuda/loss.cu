// Losses: softmax cross-entropy (mean over the rows not ignored; op_args.h) and binary
// cross-entropy with logits (mean over all elements). The upstream gradient dloss and the
// count of kept rows are read on the device. A label neither in [0, C) nor ignore_index is
// recorded by the forward's kernel and raised at the host's next look, without a
// synchronisation per call (index_errors.h); its row's loss and gradient are NaN.
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/index_errors.h"
#include "strata/backends/cuda/kernels.cuh"
#include "strata/ops/table/xent_labels.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

// codegen:begin cuda_train_kernels softmax_xent
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

// A thread takes a row's columns in chunks of eight (kernels.cuh's load_chunk8: chunk c = thread,
// thread + blockDim, ...), in every dtype: f32 logits and f16/bf16 ones that widen to the same
// floats give the same sums in the same order, so the loss and gradients of bf16 logits are
// bitwise those of their f32 cast (mixed-precision training reads the network's bf16 output as it
// is), whatever the rows' alignment.
//
// One block per row, in one read of it: each thread keeps a running maximum and its sum of
// exponentials (each in float, summed in double), rescaled when the maximum grows (Milakov and
// Gimelshein, "Online normalizer calculation for softmax", 2018); then the block's maximum, the
// threads' sums rescaled to it and added in a fixed order, the row's lse (saved) and its loss term
// (0 on an ignored row); a bad label's row recorded in *bad. The two passes it replaces (maximum,
// then sum) read GPT-2's 16,384 x 50,257 bf16 logits twice: 1.35 ms on an H200.
template <class T>
__global__ void __launch_bounds__(512)
    softmax_xent_fwd_kernel(const T* x, int64_t cols, int64_t xs0, int64_t xs1, bool vec, const int64_t* labels,
                            int64_t ls, int64_t ignore_index, float* lse, int64_t lse_s, double* row_loss,
                            unsigned long long* bad) {
  __shared__ float bcast;
  const int64_t row = blockIdx.x;
  const T* xr = x + row * xs0;
  const int64_t chunks = (cols + kChunk8 - 1) / kChunk8;
  float v[kChunk8];
  float m = -INFINITY;
  double s = 0.0;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int n = load_chunk8(xr, xs1, vec, c, cols, v);
    float cm = m;
#pragma unroll
    for (int i = 0; i < kChunk8; ++i)
      if (i < n) cm = fmaxf(cm, v[i]);
    if (cm > m) {  // never from -inf to -inf: exp(-inf - -inf) would be NaN
      s *= exp(static_cast<double>(m) - static_cast<double>(cm));
      m = cm;
    }
#pragma unroll
    for (int i = 0; i < kChunk8; ++i)
      if (i < n) s += static_cast<double>(expf(v[i] - m));
  }
  const float tm = m;
  m = block_max(m);
  if (threadIdx.x == 0) bcast = m;
  __syncthreads();
  m = bcast;
  if (tm != m) s *= exp(static_cast<double>(tm) - static_cast<double>(m));  // tm = -inf: s is 0
  s = block_sum(s);
  if (threadIdx.x == 0) {
    const double row_lse = log(s) + m;
    lse[row * lse_s] = static_cast<float>(row_lse);
    const int64_t l = labels[row * ls];
    if (!ops::xent_label_valid(l, cols, ignore_index)) {
      atomicMin(bad, static_cast<unsigned long long>(row));
      row_loss[row] = NAN;
    } else {
      row_loss[row] = l == ignore_index ? 0.0 : row_lse - static_cast<double>(load(xr[l * xs1]));
    }
  }
}

// The sum of the kept rows' terms over their count, in one block (a fixed order: the loss
// does not depend on timing); 0/0 = NaN when every row is ignored.
__global__ void __launch_bounds__(kReduceThreads)
    softmax_xent_mean_kernel(const double* row_loss, const int64_t* labels, int64_t ls, int64_t rows,
                             int64_t ignore_index, float* loss) {
  double total = 0.0, kept = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    if (labels[r * ls] != ignore_index) {
      total += row_loss[r];
      kept += 1.0;
    }
  total = block_sum(total);  // both sums are valid in thread 0
  kept = block_sum(kept);
  if (threadIdx.x == 0) *loss = static_cast<float>(total / kept);
}

// *g = dloss / (the count of kept rows), for the backward's elements to read.
__global__ void __launch_bounds__(kReduceThreads)
    softmax_xent_grad_scale_kernel(const int64_t* labels, int64_t ls, int64_t rows, int64_t ignore_index,
                                   const float* dloss, double* g) {
  double kept = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) kept += labels[r * ls] != ignore_index ? 1.0 : 0.0;
  kept = block_sum(kept);
  if (threadIdx.x == 0) *g = static_cast<double>(*dloss) / kept;
}

// dlogits = (exp(x - lse) - onehot(label)) * g, zero on an ignored row: the softmax
// recomputed from the logits and the saved lse, in one pass, each element computed in float
// and double and rounded once to dlogits' dtype (f16/bf16 dlogits are the f32 ones, rounded).
// A block per row walks its columns in chunks of eight with the row's label, lse and scale
// read once: an element-wise launch over [rows, cols] split every element's index by cols in
// 64-bit integers (6.0 ms for GPT-2's 16,384 x 50,257 logits on an H200, where the pass's
// memory takes about 1.4).
constexpr int kXentBwdThreads = 256;
template <class T>
__global__ void __launch_bounds__(kXentBwdThreads)
    softmax_xent_bwd_kernel(const T* x, int64_t xs0, int64_t xs1, bool xvec, const float* lse, int64_t lse_s,
                            const int64_t* labels, int64_t ls, int64_t cols, int64_t ignore_index, const double* g,
                            T* dx, int64_t ds0, int64_t ds1, bool dvec) {
  const int64_t row = blockIdx.x;
  const int64_t l = labels[row * ls];
  const T* xr = x + row * xs0;
  T* dr = dx + row * ds0;
  const int64_t chunks = (cols + kChunk8 - 1) / kChunk8;
  const bool ignored = l == ignore_index;
  const bool valid = l >= 0 && l < cols;
  const float row_lse = ignored ? 0.0f : lse[row * lse_s];
  const double scale = ignored ? 0.0 : *g;
  float v[kChunk8];
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int64_t j0 = c * kChunk8;
    const int n = ignored ? static_cast<int>(cols - j0 < kChunk8 ? cols - j0 : kChunk8) : load_chunk8(xr, xs1, xvec, c, cols, v);
    // Unrolled with a guard: a loop to n would index v dynamically (local memory).
#pragma unroll
    for (int i = 0; i < kChunk8; ++i) {
      if (i >= n) continue;
      if (ignored) {
        v[i] = 0.0f;
        continue;
      }
      const double p = static_cast<double>(expf(v[i] - row_lse));
      const double onehot = l == j0 + i ? 1.0 : 0.0;
      v[i] = valid ? static_cast<float>((p - onehot) * scale) : NAN;
    }
    store_chunk8(dr, ds1, dvec, c, n, v);
  }
}
// codegen:end

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
  observe_call(OpId::softmax_xent_fwd, a);
  dispatch_float_no_f64(a.logits.dtype, "softmax_xent_fwd", [&](auto t) {
    using T = decltype(t);
    const int64_t rows = a.logits.sizes[0], cols = a.logits.sizes[1];
    STRATA_CHECK(rows > 0 && cols > 0, "softmax_xent_fwd: empty logits ", a.logits.sizes.str());
    STRATA_CHECK(a.labels.dtype == DType::i64, "softmax_xent_fwd: labels must be i64, got ", dtype_name(a.labels.dtype));
    raise_bad_index(*ctx_);  // an earlier call's, found since
    DeviceBuffer row_loss(*ctx_, sizeof(double) * rows);
    const int64_t chunks = (cols + kChunk8 - 1) / kChunk8;
    const int threads = chunks >= 1024 ? 512 : chunks >= 256 ? 256 : 128;
    // The block's size orders the row's sums: a program that wants the bits launches the same.
    if (observing()) observe_library({.kind = LibraryCall::Kind::own_kernel, .mode = threads});
    const T* x = a.logits.ptr<T>();
    softmax_xent_fwd_kernel<T><<<static_cast<unsigned>(rows), threads, 0, ctx_->stream>>>(
        x, cols, a.logits.strides[0], a.logits.strides[1], chunk8_vectorizable<T>(x, a.logits.strides[0], a.logits.strides[1]),
        a.labels.ptr<int64_t>(), a.labels.strides[0], a.ignore_index, a.lse.ptr<float>(), a.lse.strides[0],
        row_loss.as<double>(), bad_index_word(*ctx_));
    STRATA_CUDA_CHECK_LAUNCH("softmax_xent_fwd_kernel");
    softmax_xent_mean_kernel<<<1, kReduceThreads, 0, ctx_->stream>>>(row_loss.as<double>(), a.labels.ptr<int64_t>(),
                                                                     a.labels.strides[0], rows, a.ignore_index,
                                                                     a.loss.ptr<float>());
    STRATA_CUDA_CHECK_LAUNCH("softmax_xent_mean_kernel");
    note_bad_index(*ctx_, IndexCheck::xent_label, a.labels, cols, a.ignore_index);
  });
}

void CudaBackend::softmax_xent_bwd(const SoftmaxXentBwdArgs& a) {
  observe_call(OpId::softmax_xent_bwd, a);
  observe_library(LibraryCall::Kind::own_kernel);
  dispatch_float_no_f64(a.logits.dtype, "softmax_xent_bwd", [&](auto t) {
    using T = decltype(t);
    const int64_t rows = a.logits.sizes[0], cols = a.logits.sizes[1];
    if (rows == 0) return;
    STRATA_CHECK(a.labels.dtype == DType::i64, "softmax_xent_bwd: labels must be i64, got ", dtype_name(a.labels.dtype));
    DeviceBuffer g(*ctx_, sizeof(double));
    softmax_xent_grad_scale_kernel<<<1, kReduceThreads, 0, ctx_->stream>>>(
        a.labels.ptr<int64_t>(), a.labels.strides[0], rows, a.ignore_index, a.dloss.ptr<float>(), g.as<double>());
    STRATA_CUDA_CHECK_LAUNCH("softmax_xent_grad_scale_kernel");
    const T* x = a.logits.ptr<T>();
    T* dx = a.dlogits.ptr<T>();
    softmax_xent_bwd_kernel<T><<<static_cast<unsigned>(rows), kXentBwdThreads, 0, ctx_->stream>>>(
        x, a.logits.strides[0], a.logits.strides[1], chunk8_vectorizable<T>(x, a.logits.strides[0], a.logits.strides[1]),
        a.lse.ptr<float>(), a.lse.strides[0], a.labels.ptr<int64_t>(), a.labels.strides[0], cols, a.ignore_index,
        g.as<double>(), dx, a.dlogits.strides[0], a.dlogits.strides[1],
        chunk8_vectorizable<T>(dx, a.dlogits.strides[0], a.dlogits.strides[1]));
    STRATA_CUDA_CHECK_LAUNCH("softmax_xent_bwd_kernel");
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
