// The tensor API's ops: bmm in f32 as one dnnl_sgemm per batch (oneDNN's row-major GEMM; the
// layout each operand's strides give, ops/table/gemm_layout.h), in f64 the shared loop; the
// rest, and the transformer ops, the shared CPU loops in f32 and f64.
#include <oneapi/dnnl/dnnl.h>

#include "strata/backends/cpu/tensor_ops.h"
#include "strata/backends/cpu/transformer_ops.h"
#include "strata/backends/onednn/call_observer.h"
#include "strata/backends/onednn/onednn_backend.h"
#include "strata/ops/table/gemm_layout.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

// The forward ops a generated program writes out report to the call observer (call_observer.h).
STRATA_CPU_TENSOR_MEMBERS_OBSERVED(OneDnnBackend, onednn::observe_call)
STRATA_CPU_TRANSFORMER_MEMBERS_OBSERVED(OneDnnBackend, onednn::observe_call)

void OneDnnBackend::bmm(const BmmArgs& a) {
  onednn::observe_call(OpId::bmm, a);
  if (a.a.dtype == DType::f64) {
    loops::bmm<double>(a);
    return;
  }
  loops::visit_float(kName, "bmm", a.a.dtype, [&](auto) {
    const int64_t B = a.y.sizes[0], M = a.y.sizes[1], N = a.y.sizes[2], K = a.a.sizes[2];
    const GemmLayout la = *gemm_layout(a.a), lb = *gemm_layout(a.b);
    const int64_t ldc = std::max<int64_t>(a.y.strides[1], std::max<int64_t>(N, 1));
    for (int64_t i = 0; i < B; ++i) {
      const dnnl_status_t st = dnnl_sgemm(la.trans ? 'T' : 'N', lb.trans ? 'T' : 'N', M, N, K,
                                          static_cast<float>(a.alpha), a.a.ptr<const float>() + i * a.a.strides[0],
                                          la.ld, a.b.ptr<const float>() + i * a.b.strides[0], lb.ld, 0.0f,
                                          a.y.ptr<float>() + i * a.y.strides[0], ldc);
      STRATA_CHECK(st == dnnl_success, "onednn: bmm: dnnl_sgemm failed with status ", static_cast<int>(st), " for ",
                   a.a.sizes.str(), " x ", a.b.sizes.str());
    }
  });
}

}  // namespace strata::backends
