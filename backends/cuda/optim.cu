// Fused optimizer steps, one pass over param/grad/state, PyTorch's formulas
// (torch.optim.SGD and Adam/AdamW), arithmetic in double: a tensor's step, and a list's
// steps in one multi-tensor launch (multi_tensor.cuh).
#include <cmath>
#include <optional>

#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/multi_tensor.cuh"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

// codegen:begin cuda_train_kernels sgd
// One element's SGD step: what the single and the multi-tensor kernels both run, so
// that the two give the same bits.
__device__ __forceinline__ void sgd_update(float& p, float g, float* buf, const ops::SgdOptions& opt, double lr,
                                           double gs) {
  double d = static_cast<double>(g) * gs;
  const double pv = p;
  if (opt.weight_decay != 0.0) d += opt.weight_decay * pv;
  if (opt.momentum != 0.0) {
    const double b = opt.momentum * static_cast<double>(*buf) + d;
    *buf = static_cast<float>(b);
    d = opt.nesterov ? d + opt.momentum * b : b;
  }
  p = static_cast<float>(pv - lr * d);
}
// codegen:end

struct SgdFn {
  float* p;
  const float* g;
  float* buf;
  ops::SgdOptions opt;
  const double* hyper;  // {lr, step} read at run time (graph mode), or null
  const double* amp;    // dynamic loss scaling's state (ops::AmpUpdateScaleArgs), or null
  __device__ void operator()(int64_t, const int64_t* o) const {
    const double gs = amp ? amp[ops::kAmpInvScale] : 1.0;
    if (gs == 0.0) return;  // a gradient was not finite: the step is skipped
    sgd_update(p[o[0]], g[o[1]], buf ? &buf[o[2]] : nullptr, opt, hyper ? hyper[0] : opt.lr, gs);
  }
};

// One element's Adam step (ss: lr / (1 - beta1^t), bc2s: sqrt(1 - beta2^t)).
__device__ __forceinline__ void adam_update(float& p, float g, float& m, float& v, const ops::AdamOptions& opt,
                                            double lr, double ss, double bc2s, double gs) {
  double pv = p;
  double gv = static_cast<double>(g) * gs;
  if (opt.weight_decay != 0.0) {
    if (opt.decoupled_weight_decay) {
      pv *= 1.0 - lr * opt.weight_decay;
    } else {
      gv += opt.weight_decay * pv;
    }
  }
  const double mv = opt.beta1 * static_cast<double>(m) + (1.0 - opt.beta1) * gv;
  const double vv = opt.beta2 * static_cast<double>(v) + (1.0 - opt.beta2) * gv * gv;
  m = static_cast<float>(mv);
  v = static_cast<float>(vv);
  const double denom = sqrt(vv) / bc2s + opt.eps;
  p = static_cast<float>(pv - ss * mv / denom);
}

// Adam's learning rate and bias corrections at run time, from graph mode's {lr, step}
// and loss scaling's skipped steps (the host's values hold without either).
__device__ __forceinline__ void adam_run_time_hyper(const ops::AdamOptions& opt, const double* hyper,
                                                    const double* amp, double step, double& lr, double& ss,
                                                    double& bc2s) {
  if (!hyper && !amp) return;
  lr = hyper ? hyper[0] : opt.lr;
  const double t = (hyper ? hyper[1] : step) - (amp ? amp[ops::kAmpSkipped] : 0.0);
  ss = lr / (1.0 - pow(opt.beta1, t));
  bc2s = sqrt(1.0 - pow(opt.beta2, t));
}

struct AdamFn {
  float* p;
  const float* g;
  float* m;
  float* v;
  ops::AdamOptions opt;
  double step_size, bc2_sqrt;
  const double* hyper;  // {lr, step} read at run time (graph mode), or null: step_size and bc2_sqrt hold
  const double* amp;    // dynamic loss scaling's state (ops::AmpUpdateScaleArgs), or null
  double step;          // the host's step, for amp without hyper
  __device__ void operator()(int64_t, const int64_t* o) const {
    const double gs = amp ? amp[ops::kAmpInvScale] : 1.0;
    if (gs == 0.0) return;  // a gradient was not finite: the step is skipped
    double lr = opt.lr, ss = step_size, bc2s = bc2_sqrt;
    adam_run_time_hyper(opt, hyper, amp, step, lr, ss, bc2s);
    adam_update(p[o[0]], g[o[1]], m[o[2]], v[o[3]], opt, lr, ss, bc2s, gs);
  }
};

// The lists' entries (multi_tensor.cuh).
// codegen:begin cuda_train_kernels sgd_list
struct SgdTensor {
  using Options = ops::SgdOptions;
  static constexpr int kMax = 64;
  float* p;
  const float* g;
  float* buf;           // null without momentum
  const double* hyper;  // {lr, step} (graph mode), or null
  int64_t n, first_block;
  __device__ double run_time(const Options& opt, const double*) const { return hyper ? hyper[0] : opt.lr; }
  __device__ void update(int64_t i, const Options& opt, double lr, double gs) const {
    sgd_update(p[i], g[i], buf ? &buf[i] : nullptr, opt, lr, gs);
  }
};
// codegen:end

struct AdamTensor {
  using Options = ops::AdamOptions;
  static constexpr int kMax = 40;
  float *p, *m, *v;
  const float* g;
  const double* hyper;
  int64_t n, first_block;
  double step_size, bc2_sqrt, step;  // the host's, see AdamFn
  struct RunTime {
    double lr, ss, bc2s;
  };
  __device__ RunTime run_time(const Options& opt, const double* amp) const {
    RunTime r{opt.lr, step_size, bc2_sqrt};
    adam_run_time_hyper(opt, hyper, amp, step, r.lr, r.ss, r.bc2s);
    return r;
  }
  __device__ void update(int64_t i, const Options& opt, const RunTime& r, double gs) const {
    adam_update(p[i], g[i], m[i], v[i], opt, r.lr, r.ss, r.bc2s, gs);
  }
};

static_assert(sizeof(TensorList<SgdTensor>) <= 4096, "an SGD list must fit a kernel's parameters");
static_assert(sizeof(TensorList<AdamTensor>) <= 4096, "an Adam list must fit a kernel's parameters");

// Dynamic loss scaling's update: one thread (a model has a few hundred gradients).
template <class T>
__global__ void amp_update_scale_kernel(const T* sums, int64_t count, int64_t stride, double* state,
                                        int64_t state_stride, double growth, double backoff, int64_t interval) {
  ops::amp_update_scale_state(
      state, state_stride, count, [&](int64_t i) { return static_cast<double>(load(sums[i * stride])); }, growth,
      backoff, interval);
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::sgd_step(const SgdStepArgs& a) {
  observe_call(OpId::sgd_step, a);
  observe_library(LibraryCall::Kind::own_kernel);
  const RunTimeHypers hyper(*ctx_, {&a.hyper, 1}, "sgd_step");
  dispatch_f32(a.param.dtype, "sgd_step", [&](auto) {
    const bool mom = a.o.momentum != 0.0;
    STRATA_CHECK(!mom || a.momentum_buf.defined, "sgd_step: momentum ", a.o.momentum, " needs a momentum buffer");
    const TensorView& buf = mom ? a.momentum_buf : a.param;  // unused without momentum
    launch_elementwise(*ctx_, make_strided_in_memory_order<3>(a.param.sizes, {a.param.strides, a.grad.strides, buf.strides}, 0),
                       SgdFn{a.param.ptr<float>(), a.grad.ptr<float>(), mom ? buf.ptr<float>() : nullptr, a.o,
                             hyper[0], amp_of(a.amp, "sgd_step")});
  });
}

void CudaBackend::adam_step(const AdamStepArgs& a) {
  const RunTimeHypers hyper(*ctx_, {&a.hyper, 1}, "adam_step");
  dispatch_f32(a.param.dtype, "adam_step", [&](auto) {
    STRATA_CHECK(a.hyper.defined || a.amp.defined || a.step >= 1, "adam_step: step is 1-based, got ", a.step);
    const double bc1 = 1.0 - std::pow(a.o.beta1, static_cast<double>(a.step));
    const double bc2 = 1.0 - std::pow(a.o.beta2, static_cast<double>(a.step));
    launch_elementwise(*ctx_,
                       make_strided_in_memory_order<4>(
                           a.param.sizes, {a.param.strides, a.grad.strides, a.exp_avg.strides, a.exp_avg_sq.strides}, 0),
                       AdamFn{a.param.ptr<float>(), a.grad.ptr<float>(), a.exp_avg.ptr<float>(),
                              a.exp_avg_sq.ptr<float>(), a.o, a.o.lr / bc1, std::sqrt(bc2), hyper[0],
                              amp_of(a.amp, "adam_step"), static_cast<double>(a.step)});
  });
}

void CudaBackend::multi_sgd_step(const MultiSgdStepArgs& a) {
  const RunTimeHypers hypers(*ctx_, a.hypers, "multi_sgd_step");
  const bool mom = a.o.momentum != 0.0;
  const auto entry = [&](size_t i) -> std::optional<SgdTensor> {
    const SgdStepArgs s = step_of(a, i);
    dispatch_f32(s.param.dtype, "multi_sgd_step", [](auto) {});
    STRATA_CHECK(!mom || s.momentum_buf.defined, "multi_sgd_step: momentum ", a.o.momentum, " needs momentum_bufs[", i,
                 "]");
    if (s.param.numel() == 0) return std::nullopt;
    if (!listable(s.param, {&s.grad, mom ? &s.momentum_buf : &s.param})) {
      sgd_step(s);
      return std::nullopt;
    }
    // Its step in the list's kernel is the single step's update of each element (sgd_update).
    observe_call(OpId::sgd_step, s);
    observe_library(LibraryCall::Kind::own_kernel);
    return SgdTensor{s.param.ptr<float>(), s.grad.ptr<const float>(), mom ? s.momentum_buf.ptr<float>() : nullptr,
                     a.hypers.empty() ? nullptr : hypers[i], s.param.numel(), 0};
  };
  step_lists<SgdTensor>(*ctx_, a.params.size(), a.o, amp_of(a.amp, "multi_sgd_step"), entry);
}

void CudaBackend::multi_adam_step(const MultiAdamStepArgs& a) {
  const RunTimeHypers hypers(*ctx_, a.hypers, "multi_adam_step");
  const auto entry = [&](size_t i) -> std::optional<AdamTensor> {
    const AdamStepArgs s = step_of(a, i);
    dispatch_f32(s.param.dtype, "multi_adam_step", [](auto) {});
    STRATA_CHECK(s.hyper.defined || s.amp.defined || s.step >= 1, "multi_adam_step: steps[", i,
                 "] is 1-based, got ", s.step);
    if (s.param.numel() == 0) return std::nullopt;
    if (!listable(s.param, {&s.grad, &s.exp_avg, &s.exp_avg_sq})) {
      adam_step(s);
      return std::nullopt;
    }
    const double bc1 = 1.0 - std::pow(a.o.beta1, static_cast<double>(s.step));
    const double bc2 = 1.0 - std::pow(a.o.beta2, static_cast<double>(s.step));
    return AdamTensor{s.param.ptr<float>(), s.exp_avg.ptr<float>(), s.exp_avg_sq.ptr<float>(), s.grad.ptr<const float>(),
                      a.hypers.empty() ? nullptr : hypers[i], s.param.numel(), 0, a.o.lr / bc1, std::sqrt(bc2), static_cast<double>(s.step)};
  };
  step_lists<AdamTensor>(*ctx_, a.params.size(), a.o, amp_of(a.amp, "multi_adam_step"), entry);
}

void CudaBackend::amp_update_scale(const AmpUpdateScaleArgs& a) {
  STRATA_CHECK(a.state.device.is_cuda() && a.state.dtype == DType::f64 && a.state.numel() == 4,
               "amp_update_scale: state must be an f64 [4] loss-scaling state on the device, got ", a.state.sizes.str(),
               " ", dtype_name(a.state.dtype), " on ", a.state.device.str());
  STRATA_CHECK(a.grad_sums.device.is_cuda() && a.grad_sums.sizes.size() == 1, "amp_update_scale: grad_sums must be ",
               "a 1-D tensor on the device, got ", a.grad_sums.sizes.str(), " on ", a.grad_sums.device.str());
  dispatch_float(a.grad_sums.dtype, "amp_update_scale", [&](auto t) {
    using T = decltype(t);
    amp_update_scale_kernel<T><<<1, 1, 0, ctx_->stream>>>(a.grad_sums.ptr<const T>(), a.grad_sums.numel(),
                                                          a.grad_sums.strides[0], a.state.ptr<double>(),
                                                          a.state.strides[0], a.growth, a.backoff, a.interval);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace strata::backends
