// RMSprop, Adagrad and Adadelta's steps: the element updates of ops/table/optim_args.h
// in double over f32 storage, a tensor's step as a strided element-wise kernel and a
// list's steps in multi-tensor launches (multi_tensor.cuh). The learning rate (and
// Adagrad's count) is read when the kernel runs where graph mode gives it, and loss
// scaling's state where it is given, as for SGD and Adam (optim.cu).
#include <optional>

#include "strata/backends/cuda/multi_tensor.cuh"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

// What a step reads once per block or thread at run time: loss scaling's 1/scale (0: the
// step is skipped), graph mode's {lr, step}, the skipped steps Adagrad's count discounts.
__device__ __forceinline__ double run_time_lr(double lr, const double* hyper) { return hyper ? hyper[0] : lr; }
__device__ __forceinline__ double adagrad_run_time_step(double step, const double* hyper, const double* amp) {
  return (hyper ? hyper[1] : step) - (amp ? amp[ops::kAmpSkipped] : 0.0);
}

// ---- one tensor, any strides ----
struct RmspropFn {
  float *p, *sq, *buf, *avg;  // buf, avg: null without momentum / unless centered
  const float* g;
  ops::RmspropOptions opt;
  const double *hyper, *amp;
  __device__ void operator()(int64_t, const int64_t* o) const {
    const double gs = amp ? amp[ops::kAmpInvScale] : 1.0;
    if (gs == 0.0) return;
    const auto k = RmspropCoeffs<double>::of(opt, run_time_lr(opt.lr, hyper));
    rmsprop_element<double>(p[o[0]], g[o[1]], gs, sq[o[2]], buf ? &buf[o[3]] : nullptr, avg ? &avg[o[4]] : nullptr,
                            k);
  }
};

struct AdagradFn {
  float *p, *sum;
  const float* g;
  ops::AdagradOptions opt;
  double step;
  const double *hyper, *amp;
  __device__ void operator()(int64_t, const int64_t* o) const {
    const double gs = amp ? amp[ops::kAmpInvScale] : 1.0;
    if (gs == 0.0) return;
    const auto k = AdagradCoeffs<double>::of(opt, run_time_lr(opt.lr, hyper), adagrad_run_time_step(step, hyper, amp));
    adagrad_element<double>(p[o[0]], g[o[1]], gs, sum[o[2]], k);
  }
};

struct AdadeltaFn {
  float *p, *sq, *acc;
  const float* g;
  ops::AdadeltaOptions opt;
  const double *hyper, *amp;
  __device__ void operator()(int64_t, const int64_t* o) const {
    const double gs = amp ? amp[ops::kAmpInvScale] : 1.0;
    if (gs == 0.0) return;
    const auto k = AdadeltaCoeffs<double>::of(opt, run_time_lr(opt.lr, hyper));
    adadelta_element<double>(p[o[0]], g[o[1]], gs, sq[o[2]], acc[o[3]], k);
  }
};

// ---- the lists' entries (multi_tensor.cuh) ----
struct RmspropTensor {
  using Options = ops::RmspropOptions;
  static constexpr int kMax = 40;
  float *p, *sq, *buf, *avg;
  const float* g;
  const double* hyper;
  int64_t n, first_block;
  __device__ RmspropCoeffs<double> run_time(const Options& opt, const double*) const {
    return RmspropCoeffs<double>::of(opt, run_time_lr(opt.lr, hyper));
  }
  __device__ void update(int64_t i, const Options&, const RmspropCoeffs<double>& k, double gs) const {
    rmsprop_element<double>(p[i], g[i], gs, sq[i], buf ? &buf[i] : nullptr, avg ? &avg[i] : nullptr, k);
  }
};

struct AdagradTensor {
  using Options = ops::AdagradOptions;
  static constexpr int kMax = 48;
  float *p, *sum;
  const float* g;
  const double* hyper;
  int64_t n, first_block;
  double step;  // the host's count
  __device__ AdagradCoeffs<double> run_time(const Options& opt, const double* amp) const {
    return AdagradCoeffs<double>::of(opt, run_time_lr(opt.lr, hyper), adagrad_run_time_step(step, hyper, amp));
  }
  __device__ void update(int64_t i, const Options&, const AdagradCoeffs<double>& k, double gs) const {
    adagrad_element<double>(p[i], g[i], gs, sum[i], k);
  }
};

struct AdadeltaTensor {
  using Options = ops::AdadeltaOptions;
  static constexpr int kMax = 48;
  float *p, *sq, *acc;
  const float* g;
  const double* hyper;
  int64_t n, first_block;
  __device__ AdadeltaCoeffs<double> run_time(const Options& opt, const double*) const {
    return AdadeltaCoeffs<double>::of(opt, run_time_lr(opt.lr, hyper));
  }
  __device__ void update(int64_t i, const Options&, const AdadeltaCoeffs<double>& k, double gs) const {
    adadelta_element<double>(p[i], g[i], gs, sq[i], acc[i], k);
  }
};

static_assert(sizeof(TensorList<RmspropTensor>) <= 4096, "an RMSprop list must fit a kernel's parameters");
static_assert(sizeof(TensorList<AdagradTensor>) <= 4096, "an Adagrad list must fit a kernel's parameters");
static_assert(sizeof(TensorList<AdadeltaTensor>) <= 4096, "an Adadelta list must fit a kernel's parameters");

float* ptr_or_null(const TensorView& v) { return v.defined ? v.ptr<float>() : nullptr; }

// A state tensor the options leave out: the kernel walks the parameter's strides in its place.
const TensorView& or_param(const TensorView& state, const TensorView& param) { return state.defined ? state : param; }

void check_rmsprop_state(const RmspropStepArgs& a, const char* op) {
  STRATA_CHECK(a.o.momentum == 0.0 || a.momentum_buf.defined, op, ": momentum ", a.o.momentum,
               " needs a momentum_buf");
  STRATA_CHECK(!a.o.centered || a.grad_avg.defined, op, ": centered needs a grad_avg");
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::rmsprop_step(const RmspropStepArgs& args) {
  const RunTimeHypers hyper(*ctx_, {&args.hyper, 1}, "rmsprop_step");
  dispatch_f32(args.param.dtype, "rmsprop_step", [&](auto) {
    check_rmsprop_state(args, "rmsprop_step");
    RmspropStepArgs a = args;
    if (a.o.momentum == 0.0) a.momentum_buf = TensorView();
    if (!a.o.centered) a.grad_avg = TensorView();
    const TensorView &b = or_param(a.momentum_buf, a.param), &m = or_param(a.grad_avg, a.param);
    launch_elementwise(*ctx_,
                       make_strided_in_memory_order<5>(
                           a.param.sizes, {a.param.strides, a.grad.strides, a.square_avg.strides, b.strides, m.strides},
                           0),
                       RmspropFn{a.param.ptr<float>(), a.square_avg.ptr<float>(), ptr_or_null(a.momentum_buf),
                                 ptr_or_null(a.grad_avg), a.grad.ptr<float>(), a.o, hyper[0],
                                 amp_of(a.amp, "rmsprop_step")});
  });
}

void CudaBackend::adagrad_step(const AdagradStepArgs& a) {
  const RunTimeHypers hyper(*ctx_, {&a.hyper, 1}, "adagrad_step");
  dispatch_f32(a.param.dtype, "adagrad_step", [&](auto) {
    STRATA_CHECK(a.hyper.defined || a.amp.defined || a.step >= 1, "adagrad_step: step is 1-based, got ", a.step);
    launch_elementwise(
        *ctx_, make_strided_in_memory_order<3>(a.param.sizes, {a.param.strides, a.grad.strides, a.sum.strides}, 0),
        AdagradFn{a.param.ptr<float>(), a.sum.ptr<float>(), a.grad.ptr<float>(), a.o, static_cast<double>(a.step),
                  hyper[0], amp_of(a.amp, "adagrad_step")});
  });
}

void CudaBackend::adadelta_step(const AdadeltaStepArgs& a) {
  const RunTimeHypers hyper(*ctx_, {&a.hyper, 1}, "adadelta_step");
  dispatch_f32(a.param.dtype, "adadelta_step", [&](auto) {
    launch_elementwise(*ctx_,
                       make_strided_in_memory_order<4>(
                           a.param.sizes, {a.param.strides, a.grad.strides, a.square_avg.strides, a.acc_delta.strides},
                           0),
                       AdadeltaFn{a.param.ptr<float>(), a.square_avg.ptr<float>(), a.acc_delta.ptr<float>(),
                                  a.grad.ptr<float>(), a.o, hyper[0], amp_of(a.amp, "adadelta_step")});
  });
}

void CudaBackend::multi_rmsprop_step(const MultiRmspropStepArgs& a) {
  const RunTimeHypers hypers(*ctx_, a.hypers, "multi_rmsprop_step");
  const auto entry = [&](size_t i) -> std::optional<RmspropTensor> {
    RmspropStepArgs s = step_of(a, i);
    dispatch_f32(s.param.dtype, "multi_rmsprop_step", [](auto) {});
    check_rmsprop_state(s, "multi_rmsprop_step");
    if (a.o.momentum == 0.0) s.momentum_buf = TensorView();
    if (!a.o.centered) s.grad_avg = TensorView();
    if (s.param.numel() == 0) return std::nullopt;
    if (!listable(s.param, {&s.grad, &s.square_avg, &or_param(s.momentum_buf, s.param),
                            &or_param(s.grad_avg, s.param)})) {
      rmsprop_step(s);
      return std::nullopt;
    }
    return RmspropTensor{s.param.ptr<float>(),        s.square_avg.ptr<float>(), ptr_or_null(s.momentum_buf),
                         ptr_or_null(s.grad_avg),     s.grad.ptr<const float>(), a.hypers.empty() ? nullptr : hypers[i],
                         s.param.numel(),             0};
  };
  step_lists<RmspropTensor>(*ctx_, a.params.size(), a.o, amp_of(a.amp, "multi_rmsprop_step"), entry);
}

void CudaBackend::multi_adagrad_step(const MultiAdagradStepArgs& a) {
  const RunTimeHypers hypers(*ctx_, a.hypers, "multi_adagrad_step");
  const auto entry = [&](size_t i) -> std::optional<AdagradTensor> {
    const AdagradStepArgs s = step_of(a, i);
    dispatch_f32(s.param.dtype, "multi_adagrad_step", [](auto) {});
    STRATA_CHECK(s.hyper.defined || s.amp.defined || s.step >= 1, "multi_adagrad_step: steps[", i,
                 "] is 1-based, got ", s.step);
    if (s.param.numel() == 0) return std::nullopt;
    if (!listable(s.param, {&s.grad, &s.sum})) {
      adagrad_step(s);
      return std::nullopt;
    }
    return AdagradTensor{s.param.ptr<float>(), s.sum.ptr<float>(), s.grad.ptr<const float>(),
                         a.hypers.empty() ? nullptr : hypers[i], s.param.numel(), 0, static_cast<double>(s.step)};
  };
  step_lists<AdagradTensor>(*ctx_, a.params.size(), a.o, amp_of(a.amp, "multi_adagrad_step"), entry);
}

void CudaBackend::multi_adadelta_step(const MultiAdadeltaStepArgs& a) {
  const RunTimeHypers hypers(*ctx_, a.hypers, "multi_adadelta_step");
  const auto entry = [&](size_t i) -> std::optional<AdadeltaTensor> {
    const AdadeltaStepArgs s = step_of(a, i);
    dispatch_f32(s.param.dtype, "multi_adadelta_step", [](auto) {});
    if (s.param.numel() == 0) return std::nullopt;
    if (!listable(s.param, {&s.grad, &s.square_avg, &s.acc_delta})) {
      adadelta_step(s);
      return std::nullopt;
    }
    return AdadeltaTensor{s.param.ptr<float>(),      s.square_avg.ptr<float>(),
                          s.acc_delta.ptr<float>(),  s.grad.ptr<const float>(),
                          a.hypers.empty() ? nullptr : hypers[i], s.param.numel(), 0};
  };
  step_lists<AdadeltaTensor>(*ctx_, a.params.size(), a.o, amp_of(a.amp, "multi_adadelta_step"), entry);
}

}  // namespace strata::backends
