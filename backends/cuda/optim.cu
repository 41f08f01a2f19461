// Fused optimizer steps, one pass over param/grad/state, PyTorch's formulas
// (torch.optim.SGD and Adam/AdamW, single-tensor path), arithmetic in double.
#include <cmath>

#include "strata/backends/cuda/kernels.cuh"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

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
    const double lr = hyper ? hyper[0] : opt.lr;
    double d = static_cast<double>(g[o[1]]) * gs;
    const double pv = p[o[0]];
    if (opt.weight_decay != 0.0) d += opt.weight_decay * pv;
    if (opt.momentum != 0.0) {
      const double b = opt.momentum * static_cast<double>(buf[o[2]]) + d;
      buf[o[2]] = static_cast<float>(b);
      d = opt.nesterov ? d + opt.momentum * b : b;
    }
    p[o[0]] = static_cast<float>(pv - lr * d);
  }
};

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
    if (hyper || amp) {
      lr = hyper ? hyper[0] : opt.lr;
      const double t = (hyper ? hyper[1] : step) - (amp ? amp[ops::kAmpSkipped] : 0.0);
      ss = lr / (1.0 - pow(opt.beta1, t));
      bc2s = sqrt(1.0 - pow(opt.beta2, t));
    }
    double pv = p[o[0]];
    double gv = static_cast<double>(g[o[1]]) * gs;
    if (opt.weight_decay != 0.0) {
      if (opt.decoupled_weight_decay) {
        pv *= 1.0 - lr * opt.weight_decay;
      } else {
        gv += opt.weight_decay * pv;
      }
    }
    const double mv = opt.beta1 * static_cast<double>(m[o[2]]) + (1.0 - opt.beta1) * gv;
    const double vv = opt.beta2 * static_cast<double>(v[o[3]]) + (1.0 - opt.beta2) * gv * gv;
    m[o[2]] = static_cast<float>(mv);
    v[o[3]] = static_cast<float>(vv);
    const double denom = sqrt(vv) / bc2s + opt.eps;
    p[o[0]] = static_cast<float>(pv - ss * mv / denom);
  }
};

// Dynamic loss scaling's update: one thread (a model has a few hundred gradients).
template <class T>
__global__ void amp_update_scale_kernel(const T* sums, int64_t count, int64_t stride, double* state,
                                        int64_t state_stride, double growth, double backoff, int64_t interval) {
  ops::amp_update_scale_state(
      state, state_stride, count, [&](int64_t i) { return static_cast<double>(load(sums[i * stride])); }, growth,
      backoff, interval);
}

// The loss-scaling state of a step's arguments, or null.
const double* amp_of(const TensorView& s, const char* op) {
  if (!s.defined) return nullptr;
  STRATA_CHECK(s.device.is_cuda() && s.dtype == DType::f64 && s.numel() == 4 && s.is_contiguous(), op,
               ": amp must be a dense f64 [4] loss-scaling state on the device, got ", s.sizes.str(), " ",
               dtype_name(s.dtype), " on ", s.device.str());
  return s.ptr<const double>();
}

// The device {lr, step} of a step's arguments, or null.
const double* hyper_of(const TensorView& h) {
  if (!h.defined) return nullptr;
  STRATA_CHECK(h.device.is_cuda() && h.dtype == DType::f64 && h.numel() == 2 && h.is_contiguous(),
               "optimizer step: hyper must be a dense f64 {lr, step} on the device, got ", h.sizes.str(), " ",
               dtype_name(h.dtype), " on ", h.device.str());
  return h.ptr<const double>();
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::sgd_step(const SgdStepArgs& a) {
  dispatch_f32(a.param.dtype, "sgd_step", [&](auto) {
    const bool mom = a.o.momentum != 0.0;
    STRATA_CHECK(!mom || a.momentum_buf.defined, "sgd_step: momentum ", a.o.momentum, " needs a momentum buffer");
    const TensorView& buf = mom ? a.momentum_buf : a.param;  // unused without momentum
    launch_elementwise(*ctx_, make_strided_in_memory_order<3>(a.param.sizes, {a.param.strides, a.grad.strides, buf.strides}, 0),
                       SgdFn{a.param.ptr<float>(), a.grad.ptr<float>(), mom ? buf.ptr<float>() : nullptr, a.o,
                             hyper_of(a.hyper), amp_of(a.amp, "sgd_step")});
  });
}

void CudaBackend::adam_step(const AdamStepArgs& a) {
  dispatch_f32(a.param.dtype, "adam_step", [&](auto) {
    STRATA_CHECK(a.hyper.defined || a.amp.defined || a.step >= 1, "adam_step: step is 1-based, got ", a.step);
    const double bc1 = 1.0 - std::pow(a.o.beta1, static_cast<double>(a.step));
    const double bc2 = 1.0 - std::pow(a.o.beta2, static_cast<double>(a.step));
    launch_elementwise(*ctx_,
                       make_strided_in_memory_order<4>(
                           a.param.sizes, {a.param.strides, a.grad.strides, a.exp_avg.strides, a.exp_avg_sq.strides}, 0),
                       AdamFn{a.param.ptr<float>(), a.grad.ptr<float>(), a.exp_avg.ptr<float>(),
                              a.exp_avg_sq.ptr<float>(), a.o, a.o.lr / bc1, std::sqrt(bc2), hyper_of(a.hyper),
                              amp_of(a.amp, "adam_step"), static_cast<double>(a.step)});
  });
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
