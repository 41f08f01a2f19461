// The tensor API's ops: bmm as one cblas_?gemm per batch (the layout each operand's strides
// give, ops/table/gemm_layout.h), the rest and the transformer ops the shared CPU loops in
// f32 and f64.
#include "strata/backends/cpu/tensor_ops.h"
#include "strata/backends/cpu/transformer_ops.h"
#include "strata/backends/openblas/gemm.h"
#include "strata/backends/openblas/openblas_backend.h"
#include "strata/ops/table/gemm_layout.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

STRATA_CPU_TENSOR_MEMBERS(OpenBlasBackend)
STRATA_CPU_TRANSFORMER_MEMBERS(OpenBlasBackend)

void OpenBlasBackend::bmm(const BmmArgs& a) {
  loops::visit_float(kName, "bmm", a.a.dtype, [&](auto t) {
    using T = decltype(t);
    const int64_t B = a.y.sizes[0], M = a.y.sizes[1], N = a.y.sizes[2], K = a.a.sizes[2];
    const GemmLayout la = *gemm_layout(a.a), lb = *gemm_layout(a.b);
    for (int64_t i = 0; i < B; ++i)
      openblas::gemm(la.trans, lb.trans, M, N, K, static_cast<T>(a.alpha), a.a.ptr<const T>() + i * a.a.strides[0],
                     la.ld, a.b.ptr<const T>() + i * a.b.strides[0], lb.ld, T(0), a.y.ptr<T>() + i * a.y.strides[0],
                     std::max<int64_t>(a.y.strides[1], std::max<int64_t>(N, 1)));
  });
}

}  // namespace strata::backends
