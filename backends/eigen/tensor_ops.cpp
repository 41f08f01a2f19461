// The tensor API's ops: bmm as Eigen matrix products over maps of each batch's matrices in
// their GEMM layout, the rest and the transformer ops the shared CPU loops in f32 and f64.
#include <Eigen/Core>

#include <optional>
#include <type_traits>

#include "strata/backends/cpu/tensor_ops.h"
#include "strata/backends/cpu/transformer_ops.h"
#include "strata/backends/eigen/eigen_backend.h"
#include "strata/ops/table/gemm_layout.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

STRATA_CPU_TENSOR_MEMBERS(EigenBackend)
STRATA_CPU_TRANSFORMER_MEMBERS(EigenBackend)

namespace {

// f(map) with v's matrix of batch i as the Eigen map of its GEMM layout (ops::gemm_layout, the
// rule the front end copies operands by): row- or column-major with a unit inner stride, as
// Eigen's GEMM and GEMV kernels need it at compile time (a map with a run-time inner stride falls
// back to a coefficient-wise product, ten times slower for a decoding step's LM head over the
// transposed embedding); any strides for what has no GEMM layout.
template <class T, bool kWritten, class F>
void with_matrix(const TensorView& v, int64_t i, int64_t rows, int64_t cols, F&& f) {
  using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  using Row = std::conditional_t<kWritten, RowMat, const RowMat>;
  using Col = std::conditional_t<kWritten, ColMat, const ColMat>;
  using Outer = Eigen::OuterStride<>;
  using Any = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
  T* p = v.ptr<T>() + i * v.strides[0];
  const std::optional<GemmLayout> l = gemm_layout(v);
  if (l && !l->trans)
    f(Eigen::Map<Row, 0, Outer>(p, rows, cols, Outer(l->ld)));
  else if (l)
    f(Eigen::Map<Col, 0, Outer>(p, rows, cols, Outer(l->ld)));
  else
    f(Eigen::Map<Row, 0, Any>(p, rows, cols, Any(v.strides[1], v.strides[2])));
}

}  // namespace

void EigenBackend::bmm(const BmmArgs& a) {
  loops::visit_float(kName, "bmm", a.a.dtype, [&](auto t) {
    using T = decltype(t);
    const int64_t B = a.y.sizes[0], M = a.y.sizes[1], N = a.y.sizes[2], K = a.a.sizes[2];
    const T alpha = static_cast<T>(a.alpha);
    for (int64_t i = 0; i < B; ++i)
      with_matrix<T, false>(a.a, i, M, K, [&](const auto& ma) {
        with_matrix<T, false>(a.b, i, K, N, [&](const auto& mb) {
          with_matrix<T, true>(a.y, i, M, N, [&](auto my) { my.noalias() = alpha * (ma * mb); });
        });
      });
  });
}

}  // namespace strata::backends
