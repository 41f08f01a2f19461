// The openblas backend's element-wise ops, losses, reductions, copy and optimizer
// steps: the shared plain loops of backends/cpu, for f32 and f64.
#include "strata/backends/cpu/adaptive_optim.h"
#include "strata/backends/cpu/copy.h"
#include "strata/backends/cpu/elementwise.h"
#include "strata/backends/cpu/loss.h"
#include "strata/backends/cpu/optim.h"
#include "strata/backends/cpu/reduce.h"
#include "strata/backends/cpu/space_to_depth.h"
#include "strata/backends/openblas/openblas_backend.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using loops::visit_float;

void OpenBlasBackend::relu_fwd(const ReluFwdArgs& a) {
  visit_float(kName, "relu_fwd", a.x.dtype, [&](auto t) { loops::relu_fwd<decltype(t)>(a); });
}
void OpenBlasBackend::relu_bwd(const ReluBwdArgs& a) {
  visit_float(kName, "relu_bwd", a.dy.dtype, [&](auto t) { loops::relu_bwd<decltype(t)>(a); });
}
void OpenBlasBackend::add(const AddArgs& a) {
  visit_float(kName, "add", a.a.dtype, [&](auto t) { loops::add<decltype(t)>(a); });
}
void OpenBlasBackend::scale(const ScaleArgs& a) {
  visit_float(kName, "scale", a.x.dtype, [&](auto t) { loops::scale<decltype(t)>(a); });
}
void OpenBlasBackend::axpy(const AxpyArgs& a) {
  visit_float(kName, "axpy", a.x.dtype, [&](auto t) { loops::axpy<decltype(t)>(a); });
}
void OpenBlasBackend::dropout_fwd(const DropoutFwdArgs& a) {
  visit_float(kName, "dropout_fwd", a.x.dtype, [&](auto t) { loops::dropout_fwd<decltype(t)>(a); });
}
void OpenBlasBackend::dropout_bwd(const DropoutBwdArgs& a) {
  visit_float(kName, "dropout_bwd", a.dy.dtype, [&](auto t) { loops::dropout_bwd<decltype(t)>(a); });
}
void OpenBlasBackend::softmax_xent_bwd(const SoftmaxXentBwdArgs& a) {
  visit_float(kName, "softmax_xent_bwd", a.logits.dtype, [&](auto t) { loops::softmax_xent_bwd<decltype(t)>(a); });
}
void OpenBlasBackend::bce_logits_fwd(const BceLogitsFwdArgs& a) {
  visit_float(kName, "bce_logits_fwd", a.logits.dtype, [&](auto t) { loops::bce_logits_fwd<decltype(t)>(a); });
}
void OpenBlasBackend::bce_logits_bwd(const BceLogitsBwdArgs& a) {
  visit_float(kName, "bce_logits_bwd", a.logits.dtype, [&](auto t) { loops::bce_logits_bwd<decltype(t)>(a); });
}
void OpenBlasBackend::sum(const ReduceArgs& a) {
  visit_float(kName, "sum", a.x.dtype, [&](auto t) { loops::sum<decltype(t)>(a); });
}
void OpenBlasBackend::mean(const ReduceArgs& a) {
  visit_float(kName, "mean", a.x.dtype, [&](auto t) { loops::mean<decltype(t)>(a); });
}
void OpenBlasBackend::argmax(const ArgmaxArgs& a) {
  visit_float(kName, "argmax", a.x.dtype, [&](auto t) { loops::argmax<decltype(t)>(a); });
}
void OpenBlasBackend::sgd_step(const SgdStepArgs& a) {
  visit_float(kName, "sgd_step", a.param.dtype, [&](auto t) { loops::sgd_step<decltype(t)>(a); });
}
void OpenBlasBackend::adam_step(const AdamStepArgs& a) {
  visit_float(kName, "adam_step", a.param.dtype, [&](auto t) { loops::adam_step<decltype(t)>(a); });
}

// A list: each parameter's single step (a loop over tensors costs a CPU nothing a kernel launch would).
void OpenBlasBackend::multi_sgd_step(const MultiSgdStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) sgd_step(step_of(a, i));
}

void OpenBlasBackend::multi_adam_step(const MultiAdamStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) adam_step(step_of(a, i));
}

void OpenBlasBackend::rmsprop_step(const RmspropStepArgs& a) { loops::step_in(kName, "rmsprop_step", a); }
void OpenBlasBackend::adagrad_step(const AdagradStepArgs& a) { loops::step_in(kName, "adagrad_step", a); }
void OpenBlasBackend::adadelta_step(const AdadeltaStepArgs& a) { loops::step_in(kName, "adadelta_step", a); }
void OpenBlasBackend::multi_rmsprop_step(const MultiRmspropStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) rmsprop_step(step_of(a, i));
}
void OpenBlasBackend::multi_adagrad_step(const MultiAdagradStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) adagrad_step(step_of(a, i));
}
void OpenBlasBackend::multi_adadelta_step(const MultiAdadeltaStepArgs& a) {
  for (size_t i = 0; i < a.params.size(); ++i) adadelta_step(step_of(a, i));
}

void OpenBlasBackend::amp_update_scale(const AmpUpdateScaleArgs& a) {
  visit_float(kName, "amp_update_scale", a.grad_sums.dtype, [&](auto t) { loops::amp_update_scale<decltype(t)>(a); });
}

void OpenBlasBackend::softmax_xent_fwd(const SoftmaxXentFwdArgs& a) {
  visit_float(kName, "softmax_xent_fwd", a.logits.dtype, [&](auto t) { loops::softmax_xent_fwd<decltype(t)>(a); });
}

void OpenBlasBackend::fill(const FillArgs& a) { loops::fill(a); }
void OpenBlasBackend::copy(const CopyArgs& a) { loops::copy(kName, a); }
void OpenBlasBackend::space_to_depth_fwd(const SpaceToDepthArgs& a) { loops::space_to_depth_fwd(a); }
void OpenBlasBackend::space_to_depth_bwd(const SpaceToDepthBwdArgs& a) { loops::space_to_depth_bwd(a); }

}  // namespace strata::backends
