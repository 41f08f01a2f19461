// The openblas backend's element-wise ops, losses, reductions, copy and optimizer
// steps: the shared plain loops of backends/openblas/loops, for f32 and f64.
#include "strata/backends/openblas/loops/copy.h"
#include "strata/backends/openblas/loops/elementwise.h"
#include "strata/backends/openblas/loops/loss.h"
#include "strata/backends/openblas/loops/optim.h"
#include "strata/backends/openblas/loops/reduce.h"
#include "strata/backends/openblas/openblas_backend.h"

namespace strata::backends {

using loops::visit_float;

// One forwarding body per op: dispatch on the dtype of `arg`, call loops::fn<T>.
#define STRATA_OPENBLAS_LOOP(op, Args, arg, call)                                      \
  void OpenBlasBackend::op(const Args& a) {                                             \
    visit_float(kName, #op, a.arg.dtype, [&](auto t) { loops::call<decltype(t)>(a); }); \
  }

STRATA_OPENBLAS_LOOP(relu_fwd, ReluFwdArgs, x, relu_fwd)
STRATA_OPENBLAS_LOOP(relu_bwd, ReluBwdArgs, dy, relu_bwd)
STRATA_OPENBLAS_LOOP(add, AddArgs, a, add)
STRATA_OPENBLAS_LOOP(scale, ScaleArgs, x, scale)
STRATA_OPENBLAS_LOOP(axpy, AxpyArgs, x, axpy)
STRATA_OPENBLAS_LOOP(dropout_fwd, DropoutFwdArgs, x, dropout_fwd)
STRATA_OPENBLAS_LOOP(dropout_bwd, DropoutBwdArgs, dy, dropout_bwd)
STRATA_OPENBLAS_LOOP(softmax_xent_bwd, SoftmaxXentBwdArgs, probs, softmax_xent_bwd)
STRATA_OPENBLAS_LOOP(bce_logits_fwd, BceLogitsFwdArgs, logits, bce_logits_fwd)
STRATA_OPENBLAS_LOOP(bce_logits_bwd, BceLogitsBwdArgs, logits, bce_logits_bwd)
STRATA_OPENBLAS_LOOP(sum, ReduceArgs, x, sum)
STRATA_OPENBLAS_LOOP(mean, ReduceArgs, x, mean)
STRATA_OPENBLAS_LOOP(argmax, ArgmaxArgs, x, argmax)
STRATA_OPENBLAS_LOOP(sgd_step, SgdStepArgs, param, sgd_step)
STRATA_OPENBLAS_LOOP(adam_step, AdamStepArgs, param, adam_step)
#undef STRATA_OPENBLAS_LOOP

void OpenBlasBackend::softmax_xent_fwd(const SoftmaxXentFwdArgs& a) {
  visit_float(kName, "softmax_xent_fwd", a.logits.dtype,
              [&](auto t) { loops::softmax_xent_fwd<decltype(t)>(a, /*write_probs=*/true); });
}

void OpenBlasBackend::fill(const FillArgs& a) { loops::fill(a); }
void OpenBlasBackend::copy(const CopyArgs& a) { loops::copy(kName, a); }

}  // namespace strata::backends
