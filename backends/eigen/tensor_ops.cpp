// The tensor API's ops: bmm as Eigen matrix products over strided maps of each batch's
// matrices (Eigen's GEMM reads any strides), the rest and the transformer ops the shared
// CPU loops in f32 and f64.
#include <Eigen/Core>

#include "strata/backends/cpu/tensor_ops.h"
#include "strata/backends/cpu/transformer_ops.h"
#include "strata/backends/eigen/eigen_backend.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

STRATA_CPU_TENSOR_MEMBERS(EigenBackend)
STRATA_CPU_TRANSFORMER_MEMBERS(EigenBackend)

void EigenBackend::bmm(const BmmArgs& a) {
  loops::visit_float(kName, "bmm", a.a.dtype, [&](auto t) {
    using T = decltype(t);
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using Strides = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
    const int64_t B = a.y.sizes[0], M = a.y.sizes[1], N = a.y.sizes[2], K = a.a.sizes[2];
    for (int64_t i = 0; i < B; ++i) {
      Eigen::Map<const Mat, 0, Strides> ma(a.a.ptr<const T>() + i * a.a.strides[0], M, K,
                                           Strides(a.a.strides[1], a.a.strides[2]));
      Eigen::Map<const Mat, 0, Strides> mb(a.b.ptr<const T>() + i * a.b.strides[0], K, N,
                                           Strides(a.b.strides[1], a.b.strides[2]));
      Eigen::Map<Mat, 0, Strides> my(a.y.ptr<T>() + i * a.y.strides[0], M, N, Strides(a.y.strides[1], a.y.strides[2]));
      my.noalias() = static_cast<T>(a.alpha) * (ma * mb);
    }
  });
}

}  // namespace strata::backends
