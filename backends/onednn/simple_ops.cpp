// The onednn backend's ops without a oneDNN primitive: the shared plain loops of
// backends/cpu (header-only, no BLAS), for f32 and f64; optimizer steps on
// large tensors run them in parts over the OpenMP threads. copy between two
// f32 views of different layouts (NCHW <-> NHWC) is a cached reorder primitive.
#include <cstddef>
#include <tuple>

#include "strata/backends/onednn/context.h"
#include "strata/backends/cpu/adaptive_optim.h"
#include "strata/backends/cpu/copy.h"
#include "strata/backends/cpu/elementwise.h"
#include "strata/backends/cpu/loss.h"
#include "strata/backends/cpu/optim.h"
#include "strata/backends/cpu/reduce.h"
#include "strata/backends/cpu/space_to_depth.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using namespace onednn;  // NOLINT: this backend's internal vocabulary
using loops::visit_float;

void OneDnnBackend::axpy(const AxpyArgs& a) {
  visit_float(kName, "axpy", a.x.dtype, [&](auto t) { loops::axpy<decltype(t)>(a); });
}
void OneDnnBackend::dropout_fwd(const DropoutFwdArgs& a) {
  observe_call(OpId::dropout_fwd, a);
  visit_float(kName, "dropout_fwd", a.x.dtype, [&](auto t) { loops::dropout_fwd<decltype(t)>(a); });
}
void OneDnnBackend::dropout_bwd(const DropoutBwdArgs& a) {
  observe_call(OpId::dropout_bwd, a);
  visit_float(kName, "dropout_bwd", a.dy.dtype, [&](auto t) { loops::dropout_bwd<decltype(t)>(a); });
}
// oneDNN's softmax primitive would write the [N, C] softmax the forward no longer keeps: both
// directions are the shared loops, one pass over the logits each.
void OneDnnBackend::softmax_xent_fwd(const SoftmaxXentFwdArgs& a) {
  observe_call(OpId::softmax_xent_fwd, a);
  visit_float(kName, "softmax_xent_fwd", a.logits.dtype, [&](auto t) { loops::softmax_xent_fwd<decltype(t)>(a); });
}
void OneDnnBackend::softmax_xent_bwd(const SoftmaxXentBwdArgs& a) {
  observe_call(OpId::softmax_xent_bwd, a);
  visit_float(kName, "softmax_xent_bwd", a.logits.dtype, [&](auto t) { loops::softmax_xent_bwd<decltype(t)>(a); });
}
void OneDnnBackend::bce_logits_fwd(const BceLogitsFwdArgs& a) {
  visit_float(kName, "bce_logits_fwd", a.logits.dtype, [&](auto t) { loops::bce_logits_fwd<decltype(t)>(a); });
}
void OneDnnBackend::bce_logits_bwd(const BceLogitsBwdArgs& a) {
  visit_float(kName, "bce_logits_bwd", a.logits.dtype, [&](auto t) { loops::bce_logits_bwd<decltype(t)>(a); });
}
void OneDnnBackend::argmax(const ArgmaxArgs& a) {
  visit_float(kName, "argmax", a.x.dtype, [&](auto t) { loops::argmax<decltype(t)>(a); });
}

namespace {
// elements [begin, begin + n) of a contiguous view, as a 1-D view
TensorView flat_part(const TensorView& v, int64_t begin, int64_t n) {
  if (!v.defined) return v;
  TensorView p = v;
  p.data = static_cast<std::byte*>(v.data) + begin * static_cast<int64_t>(dtype_size(v.dtype));
  p.sizes = Shape{n};
  p.strides = Shape{1};
  return p;
}

// Optimizer steps read and write every parameter once per step (ResNet-50: 25.6 M
// floats in five streams for SGD with momentum), so large contiguous tensors are
// cut into parts run on the OpenMP threads. Each element's update is the same
// arithmetic either way: results do not depend on the thread count.
template <class A, class... Views>
bool run_in_parts(const A& a, const TensorView& first, const std::tuple<Views...>& views) {
  const int64_t n = first.numel();
  bool ok = n >= kParallelAbove && loops::contiguous(first);
  auto fits = [&](const TensorView& v) { return !v.defined || (loops::contiguous(v) && v.numel() == n); };
  std::apply([&](const auto&... v) { ((ok = ok && fits(a.*v)), ...); }, views);
  if (!ok) return false;
  constexpr int64_t kPart = 16384;  // elements: a multiple of any vector width
  const int64_t parts = (n + kPart - 1) / kPart;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < parts; ++i) {
    A part = a;
    const int64_t begin = i * kPart, len = std::min(kPart, n - begin);
    std::apply([&](const auto&... v) { ((part.*v = flat_part(a.*v, begin, len)), ...); }, views);
    if (a.param.dtype == DType::f32)
      loops::step_of<float>(part);
    else
      loops::step_of<double>(part);
  }
  return true;
}
}  // namespace

void OneDnnBackend::sgd_step(const SgdStepArgs& a) {
  observe_call(OpId::sgd_step, a);
  const bool buffer_ok = a.o.momentum == 0.0 || a.momentum_buf.defined;  // else the loop's own error
  if (buffer_ok && (a.param.dtype == DType::f32 || a.param.dtype == DType::f64) &&
      run_in_parts(a, a.param, std::make_tuple(&SgdStepArgs::param, &SgdStepArgs::grad, &SgdStepArgs::momentum_buf)))
    return;
  visit_float(kName, "sgd_step", a.param.dtype, [&](auto t) { loops::sgd_step<decltype(t)>(a); });
}

void OneDnnBackend::adam_step(const AdamStepArgs& a) {
  if ((a.param.dtype == DType::f32 || a.param.dtype == DType::f64) &&
      run_in_parts(a, a.param,
                   std::make_tuple(&AdamStepArgs::param, &AdamStepArgs::grad, &AdamStepArgs::exp_avg,
                                   &AdamStepArgs::exp_avg_sq)))
    return;
  visit_float(kName, "adam_step", a.param.dtype, [&](auto t) { loops::adam_step<decltype(t)>(a); });
}

// A list: each parameter's single step (a loop over tensors costs a CPU nothing a kernel launch would).
void OneDnnBackend::multi_sgd_step(const MultiSgdStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) sgd_step(step_of(a, i));
}

void OneDnnBackend::multi_adam_step(const MultiAdamStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) adam_step(step_of(a, i));
}

// RMSprop, Adagrad, Adadelta: in parts over the threads as above, else one loop.
namespace {
template <class A, class... Views>
void loop_step(const A& a, std::string_view op, Views... views) {
  const bool loop_dtype = a.param.dtype == DType::f32 || a.param.dtype == DType::f64;
  if (loop_dtype && run_in_parts(a, a.param, std::make_tuple(views...))) return;
  loops::step_in(OneDnnBackend::kName, op, a);
}
}  // namespace

void OneDnnBackend::rmsprop_step(const RmspropStepArgs& a) {
  using A = RmspropStepArgs;
  loop_step(a, "rmsprop_step", &A::param, &A::grad, &A::square_avg, &A::momentum_buf, &A::grad_avg);
}
void OneDnnBackend::adagrad_step(const AdagradStepArgs& a) {
  using A = AdagradStepArgs;
  loop_step(a, "adagrad_step", &A::param, &A::grad, &A::sum);
}
void OneDnnBackend::adadelta_step(const AdadeltaStepArgs& a) {
  using A = AdadeltaStepArgs;
  loop_step(a, "adadelta_step", &A::param, &A::grad, &A::square_avg, &A::acc_delta);
}
void OneDnnBackend::multi_rmsprop_step(const MultiRmspropStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) rmsprop_step(step_of(a, i));
}
void OneDnnBackend::multi_adagrad_step(const MultiAdagradStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) adagrad_step(step_of(a, i));
}
void OneDnnBackend::multi_adadelta_step(const MultiAdadeltaStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) adadelta_step(step_of(a, i));
}

void OneDnnBackend::amp_update_scale(const AmpUpdateScaleArgs& a) {
  visit_float(kName, "amp_update_scale", a.grad_sums.dtype, [&](auto t) { loops::amp_update_scale<decltype(t)>(a); });
}

void OneDnnBackend::fill(const FillArgs& a) {
  observe_call(OpId::fill, a);
  loops::fill(a);
}
void OneDnnBackend::space_to_depth_fwd(const SpaceToDepthArgs& a) { loops::space_to_depth_fwd(a); }
void OneDnnBackend::space_to_depth_bwd(const SpaceToDepthBwdArgs& a) { loops::space_to_depth_bwd(a); }

namespace {
struct ReorderPlan : Plan {
  dnnl::reorder prim;
  memory src, dst;
};
}  // namespace

void OneDnnBackend::copy(const CopyArgs& a) {
  observe_call(OpId::copy, a);
  const bool relayout = a.x.dtype == DType::f32 && a.y.dtype == DType::f32 && a.x.device.is_cpu() &&
                        a.y.device.is_cpu() && a.x.numel() > 1 && !loops::same_layout(a.x, a.y);
  if (!relayout) return loops::copy(kName, a);
  guarded("copy", loops::elementwise_work(a.x.numel()), [&] {
    Context& c = *ctx_;
    Key key(OpId::copy);
    key.views(a.x, a.y);
    auto& pl = c.plan<ReorderPlan>(key, [&] {
      auto p = std::make_unique<ReorderPlan>();
      p->src = memory(md_of(a.x), c.eng, DNNL_MEMORY_NONE);
      p->dst = memory(md_of(a.y), c.eng, DNNL_MEMORY_NONE);
      p->prim = dnnl::reorder(p->src, p->dst);
      return p;
    });
    pl.src.set_data_handle(a.x.data);
    pl.dst.set_data_handle(a.y.data);
    pl.prim.execute(c.strm, pl.src, pl.dst);
    c.strm.wait();
  });
}

}  // namespace strata::backends
