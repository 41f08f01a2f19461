// The onednn backend's ops without a oneDNN primitive: the shared plain loops of
// backends/openblas/loops (header-only, no BLAS), for f32 and f64. copy between two
// f32 views of different layouts (NCHW <-> NHWC) is a cached reorder primitive.
#include "backends/onednn/context.h"
#include "backends/openblas/loops/copy.h"
#include "backends/openblas/loops/elementwise.h"
#include "backends/openblas/loops/loss.h"
#include "backends/openblas/loops/optim.h"
#include "backends/openblas/loops/reduce.h"

namespace strata::backends {

using namespace onednn;  // NOLINT: this backend's internal vocabulary
using loops::visit_float;

#define STRATA_ONEDNN_LOOP(op, Args, arg)                                              \
  void OneDnnBackend::op(const Args& a) {                                               \
    visit_float(kName, #op, a.arg.dtype, [&](auto t) { loops::op<decltype(t)>(a); }); \
  }

STRATA_ONEDNN_LOOP(axpy, AxpyArgs, x)
STRATA_ONEDNN_LOOP(dropout_fwd, DropoutFwdArgs, x)
STRATA_ONEDNN_LOOP(dropout_bwd, DropoutBwdArgs, dy)
STRATA_ONEDNN_LOOP(softmax_xent_bwd, SoftmaxXentBwdArgs, probs)
STRATA_ONEDNN_LOOP(bce_logits_fwd, BceLogitsFwdArgs, logits)
STRATA_ONEDNN_LOOP(bce_logits_bwd, BceLogitsBwdArgs, logits)
STRATA_ONEDNN_LOOP(argmax, ArgmaxArgs, x)
STRATA_ONEDNN_LOOP(sgd_step, SgdStepArgs, param)
STRATA_ONEDNN_LOOP(adam_step, AdamStepArgs, param)
#undef STRATA_ONEDNN_LOOP

void OneDnnBackend::fill(const FillArgs& a) { loops::fill(a); }

namespace {
struct ReorderPlan : Plan {
  dnnl::reorder prim;
  memory src, dst;
};
}  // namespace

void OneDnnBackend::copy(const CopyArgs& a) {
  const bool relayout = a.x.dtype == DType::f32 && a.y.dtype == DType::f32 && a.x.device.is_cpu() &&
                        a.y.device.is_cpu() && a.x.numel() > 1 && !loops::same_layout(a.x, a.y);
  if (!relayout) return loops::copy(kName, a);
  guarded("copy", [&] {
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
