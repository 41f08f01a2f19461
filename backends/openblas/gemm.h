#pragma once
// Row-major GEMM through OpenBLAS's CBLAS: C = alpha op(A) op(B) + beta C, with
// op(A) [m,k], op(B) [k,n]. Internal to backends/openblas.
#include <cblas.h>

#include <cstdint>
#include <limits>

#include "strata/core/error.h"

namespace strata::backends::openblas {

inline blasint blas_int(int64_t v) {
  STRATA_CHECK(v >= 0 && v <= std::numeric_limits<blasint>::max(), "openblas: GEMM dimension ", v,
               " does not fit OpenBLAS's integer type");
  return static_cast<blasint>(v);
}

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blas_int(m), blas_int(n),
              blas_int(k), alpha, a, blas_int(lda), b, blas_int(ldb), beta, c, blas_int(ldc));
}

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blas_int(m), blas_int(n),
              blas_int(k), alpha, a, blas_int(lda), b, blas_int(ldb), beta, c, blas_int(ldc));
}

}  // namespace strata::backends::openblas
