// Batch norm: f32 NCHW (and channels-last when Settings::cudnn_nhwc_batch_norm) on
// cuDNN; the rest, and every synchronised one, on strata's own kernels
// (batch_norm_own.cu). On cuDNN: training forward (batch statistics; running statistics
// updated in place with the unbiased variance, as PyTorch), eval forward, and training
// backward from the saved mean and inverse standard deviation. Channels-last training
// uses CUDNN_BATCHNORM_SPATIAL_PERSISTENT when Settings::persistent_batch_norm is on
// (PyTorch's choice too; the plain spatial mode is many times slower on NHWC), else
// CUDNN_BATCHNORM_SPATIAL. Eval-mode backward (statistics were constants) and the
// eval-mode save_mean/save_invstd are strata's own kernels. f32.
#include "strata/backends/cuda/batch_norm_kernels.h"
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/channel_reduce.cuh"
#include "strata/backends/cuda/cudnn_util.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

struct BnPlan : Plan {
  TensorDesc x, y, bn;
};

BnPlan& bn_plan(Context& ctx, const TensorView& x, const TensorView& y, cudnnBatchNormMode_t mode) {
  PlanKey key;
  key.add(3001).add(static_cast<int64_t>(mode)).add(static_cast<int64_t>(x.dtype)).add(x.sizes).add(x.strides).add(y.strides);
  return ctx.plan<BnPlan>(key, [&] {
    auto p = std::make_unique<BnPlan>();
    p->x.set(x, "batch_norm");
    p->y.set(y, "batch_norm");
    STRATA_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p->bn.get(), p->x.get(), mode));
    return p;
  });
}

// A per-channel parameter as cuDNN wants it: dense f32 on the device. A missing
// optional one (no affine gamma/beta) becomes a constant.
Staged param_in(Context& ctx, const TensorView& v, int64_t c, double if_absent) {
  if (v.defined) return stage_in(ctx, v, Layout::nchw);
  Staged s;
  s.view = make_temp(ctx, s.buf, Shape{c}, DType::f32, Layout::nchw);
  fill_view(ctx, s.view, if_absent);
  return s;
}
Staged param_out(Context& ctx, const TensorView& v, int64_t c) {
  if (v.defined) return stage_out(ctx, v, Layout::nchw);
  Staged s;
  s.view = make_temp(ctx, s.buf, Shape{c}, DType::f32, Layout::nchw);
  return s;
}

__global__ void eval_stats_kernel(const float* rm, int64_t rms, const float* rv, int64_t rvs, double eps, int64_t c,
                                  float* mean, int64_t ms, float* invstd, int64_t is) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= c) return;
  if (mean) mean[i * ms] = rm[i * rms];
  if (invstd) invstd[i * is] = static_cast<float>(1.0 / sqrt(static_cast<double>(rv[i * rvs]) + eps));
}

// Sums for eval-mode backward: dy, and dy * (x - mean) * invstd.
struct BnEvalSums {
  const float* dy;
  const float* x;
  const float* mean;
  int64_t ms;
  const float* invstd;
  int64_t is;
  __device__ void operator()(int64_t c, const int64_t* off, double* v) const {
    const double g = dy[off[0]];
    v[0] = g;
    v[1] = g * (static_cast<double>(x[off[1]]) - mean[c * ms]) * static_cast<double>(invstd[c * is]);
  }
};

__global__ void bn_eval_param_grads_kernel(const double* sums, int64_t c, float* dgamma, int64_t gs, float* dbeta,
                                           int64_t bs) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= c) return;
  if (dbeta) dbeta[i * bs] = static_cast<float>(sums[i]);
  if (dgamma) dgamma[i * gs] = static_cast<float>(sums[c + i]);
}

// dx = dy * gamma[c] * invstd[c] (gamma, invstd broadcast along dim 1).
struct BnEvalDx {
  const float* dy;
  const float* gamma;
  const float* invstd;
  float* dx;
  __device__ void operator()(int64_t, const int64_t* o) const {
    const double g = gamma ? static_cast<double>(gamma[o[1]]) : 1.0;
    dx[o[3]] = static_cast<float>(static_cast<double>(dy[o[0]]) * g * static_cast<double>(invstd[o[2]]));
  }
};

}  // namespace
}  // namespace cuda

using namespace cuda;

namespace {

// Whether cuDNN refused the layout/mode it was asked for (NOT_SUPPORTED for NHWC or
// the persistent mode): the op then retries in plain spatial mode, then with NCHW
// staging. A refused call leaves its arguments untouched.
bool refused(cudnnStatus_t st, Layout l, cudnnBatchNormMode_t mode) {
  if (st == CUDNN_STATUS_SUCCESS) return false;
  const bool retry = l == Layout::nhwc || mode != CUDNN_BATCHNORM_SPATIAL;
  if (retry && (st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM)) return true;
  STRATA_FAIL("cudnn: batch norm failed: ", cudnnGetErrorString(st));
}

// f(layout, mode) -> whether it ran; tries the fast mode, then the fallbacks.
template <class F>
void with_bn_fallback(Context& ctx, Layout l, bool persistent, F&& f) {
  if (l == Layout::nhwc && persistent && f(l, CUDNN_BATCHNORM_SPATIAL_PERSISTENT)) return;
  if (f(l, CUDNN_BATCHNORM_SPATIAL)) return;
  ++ctx.layout_fallbacks;
  f(Layout::nchw, CUDNN_BATCHNORM_SPATIAL);  // NCHW spatial never reports a refusal
}

bool bn_fwd_in(Context& ctx, const BatchNormFwdArgs& a, Layout l, cudnnBatchNormMode_t mode) {
  const int64_t c = a.x.sizes[1];
  Staged x = stage_in(ctx, a.x, l);
  Staged y = stage_out(ctx, a.y, l);
  Staged gamma = param_in(ctx, a.gamma, c, 1.0);
  Staged beta = param_in(ctx, a.beta, c, 0.0);
  BnPlan& p = bn_plan(ctx, x.view, y.view, mode);
  const Scalars s(DType::f32);
  const bool have_running = a.running_mean.defined && a.running_var.defined;
  if (a.training) {
    Staged rm, rv;
    if (have_running) {
      rm = stage_in(ctx, a.running_mean, Layout::nchw);
      rv = stage_in(ctx, a.running_var, Layout::nchw);
    }
    Staged sm = param_out(ctx, a.save_mean, c);
    Staged si = param_out(ctx, a.save_invstd, c);
    // cuDNN: running = (1 - factor) * running + factor * batch, with the unbiased
    // batch variance for running_var; save_* are the batch mean and 1/sqrt(var + eps).
    const cudnnStatus_t st = cudnnBatchNormalizationForwardTraining(
        ctx.cudnn, mode, s.one(), s.zero(), p.x.get(), x.view.data, p.y.get(), y.view.data,
        p.bn.get(), gamma.view.data, beta.view.data, a.momentum, have_running ? rm.view.data : nullptr,
        have_running ? rv.view.data : nullptr, a.eps, sm.view.data, si.view.data);
    if (refused(st, l, mode)) return false;
    if (observing()) observe_library({.kind = LibraryCall::Kind::batch_norm, .mode = static_cast<int64_t>(mode)});
    if (have_running) {
      rm.finish(ctx);
      rv.finish(ctx);
    }
    if (a.save_mean.defined) sm.finish(ctx);
    if (a.save_invstd.defined) si.finish(ctx);
  } else {
    STRATA_CHECK(have_running, "batch_norm_fwd: eval mode needs running_mean and running_var");
    Staged rm = stage_in(ctx, a.running_mean, Layout::nchw);
    Staged rv = stage_in(ctx, a.running_var, Layout::nchw);
    const cudnnStatus_t st = cudnnBatchNormalizationForwardInference(
        ctx.cudnn, mode, s.one(), s.zero(), p.x.get(), x.view.data, p.y.get(), y.view.data,
        p.bn.get(), gamma.view.data, beta.view.data, rm.view.data, rv.view.data, a.eps);
    if (refused(st, l, mode)) return false;
    observe_library(LibraryCall::Kind::own_batch_norm);  // evaluation: not written out
    if (a.save_mean.defined || a.save_invstd.defined) {
      const TensorView& sm = a.save_mean;
      const TensorView& si = a.save_invstd;
      eval_stats_kernel<<<static_cast<unsigned>((c + 255) / 256), 256, 0, ctx.stream>>>(
          rm.view.ptr<float>(), rm.view.strides[0], rv.view.ptr<float>(), rv.view.strides[0], a.eps, c,
          sm.defined ? sm.ptr<float>() : nullptr, sm.defined ? sm.strides[0] : 0,
          si.defined ? si.ptr<float>() : nullptr, si.defined ? si.strides[0] : 0);
      STRATA_CUDA_CHECK_LAUNCH("eval_stats_kernel");
    }
  }
  y.finish(ctx);
  return true;
}

bool bn_bwd_train_in(Context& ctx, const BatchNormBwdArgs& a, Layout l, cudnnBatchNormMode_t mode) {
  const int64_t c = a.x.sizes[1];
  Staged x = stage_in(ctx, a.x, l);
  Staged dy = stage_in(ctx, a.dy, l);
  Staged dx;
  if (a.dx.defined) {
    dx = stage_out(ctx, a.dx, l);
  } else {
    dx.view = make_temp(ctx, dx.buf, a.x.sizes, a.x.dtype, l);
  }
  Staged gamma = param_in(ctx, a.gamma, c, 1.0);
  Staged mean = stage_in(ctx, a.save_mean, Layout::nchw);
  Staged invstd = stage_in(ctx, a.save_invstd, Layout::nchw);
  Staged dgamma = param_out(ctx, a.dgamma, c);
  Staged dbeta = param_out(ctx, a.dbeta, c);
  BnPlan& p = bn_plan(ctx, x.view, dx.view, mode);  // dy is dense in l like x: x's descriptor fits it
  const Scalars s(DType::f32);
  // With saved statistics cuDNN does not use epsilon; it only must be valid.
  const cudnnStatus_t st = cudnnBatchNormalizationBackward(
      ctx.cudnn, mode, s.one(), s.zero(), s.one(), s.zero(), p.x.get(), x.view.data, p.x.get(),
      dy.view.data, p.y.get(), dx.view.data, p.bn.get(), gamma.view.data, dgamma.view.data, dbeta.view.data, 1e-5,
      mean.view.data, invstd.view.data);
  if (refused(st, l, mode)) return false;
  if (observing()) observe_library({.kind = LibraryCall::Kind::batch_norm_bwd, .mode = static_cast<int64_t>(mode)});
  if (a.dx.defined) dx.finish(ctx);
  if (a.dgamma.defined) dgamma.finish(ctx);
  if (a.dbeta.defined) dbeta.finish(ctx);
  return true;
}

}  // namespace

// Fusions (op_args.h): strata's kernels run them in their apply pass, and run every fused
// evaluation; after cuDNN's forward a pass of its own, before its backward the masking.
void CudaBackend::batch_norm_fwd(const BatchNormFwdArgs& a) {
  observe_call(OpId::batch_norm_fwd, a);
  if (a.x.numel() == 0) return;
  const bool fused = a.z.defined || a.relu;
  // cuDNN's training forward computes and applies its statistics in one call: a synchronised
  // one (op_args.h) needs strata's kernels, which exchange the sums between the two.
  if (a.sync || own_batch_norm(a.x, settings_) || (fused && !a.training)) {
    observe_library(LibraryCall::Kind::own_batch_norm);
    return batch_norm_fwd_own(*ctx_, a);
  }
  dispatch_f32(a.x.dtype, "batch_norm_fwd", [](auto) {});
  BatchNormFwdArgs plain = a;
  plain.z = plain.relu_mask = {};
  plain.relu = false;
  with_bn_fallback(*ctx_, layout_of(a.x), a.training && settings_.persistent_batch_norm,
                   [&](Layout l, cudnnBatchNormMode_t mode) { return bn_fwd_in(*ctx_, plain, l, mode); });
  if (fused) {
    observe_library(LibraryCall::Kind::batch_norm_epilogue);
    batch_norm_epilogue(*ctx_, a.y, a.z, a.relu_mask, a.relu);
  }
}

void CudaBackend::batch_norm_bwd(const BatchNormBwdArgs& fused) {
  observe_call(OpId::batch_norm_bwd, fused);
  if (fused.x.numel() == 0) return;
  if (fused.sync || own_batch_norm(fused.x, settings_)) {
    observe_library(LibraryCall::Kind::own_batch_norm);
    return batch_norm_bwd_own(*ctx_, fused);
  }
  dispatch_f32(fused.x.dtype, "batch_norm_bwd", [](auto) {});
  BatchNormBwdArgs a = fused;
  DeviceBuffer masked;
  if (fused.relu_mask.defined) {
    observe_library(LibraryCall::Kind::batch_norm_mask);
    masked = masked_grad(*ctx_, fused, a);
  }
  Context& ctx = *ctx_;
  const int64_t c = a.x.sizes[1];
  if (!a.training) observe_library(LibraryCall::Kind::own_batch_norm);  // evaluation: not written out
  if (a.training) {
    with_bn_fallback(ctx, layout_of(a.x), settings_.persistent_batch_norm,
                     [&](Layout l, cudnnBatchNormMode_t mode) { return bn_bwd_train_in(ctx, a, l, mode); });
    return;
  }
  // Eval mode: y = gamma * (x - mean) * invstd + beta with constant statistics.
  const TensorView& m = a.save_mean;
  const TensorView& is = a.save_invstd;
  if (a.dgamma.defined || a.dbeta.defined) {
    DeviceBuffer sums = channel_sums<2>(
        ctx, a.x.sizes, 1, BnEvalSums{a.dy.ptr<float>(), a.x.ptr<float>(), m.ptr<float>(), m.strides[0],
                                      is.ptr<float>(), is.strides[0]},
        a.dy, a.x);
    bn_eval_param_grads_kernel<<<static_cast<unsigned>((c + 255) / 256), 256, 0, ctx.stream>>>(
        sums.as<double>(), c, a.dgamma.defined ? a.dgamma.ptr<float>() : nullptr,
        a.dgamma.defined ? a.dgamma.strides[0] : 0, a.dbeta.defined ? a.dbeta.ptr<float>() : nullptr,
        a.dbeta.defined ? a.dbeta.strides[0] : 0);
    STRATA_CUDA_CHECK_LAUNCH("bn_eval_param_grads_kernel");
  }
  if (a.dx.defined) {
    const TensorView gb = a.gamma.defined ? broadcast_along(a.gamma, a.x.sizes, 1) : broadcast_along(is, a.x.sizes, 1);
    const TensorView ib = broadcast_along(is, a.x.sizes, 1);
    launch_elementwise(ctx, strided_by_output(a.x.sizes, a.dy, gb, ib, a.dx),
                       BnEvalDx{a.dy.ptr<float>(), a.gamma.defined ? a.gamma.ptr<float>() : nullptr, ib.ptr<float>(),
                                a.dx.ptr<float>()});
  }
}

}  // namespace strata::backends
