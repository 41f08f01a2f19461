#pragma once
// GEMMs with a fused epilogue through cuBLASLt (cublasLtMatmul): row-major D = A B + bias, the
// bias added to every row inside the GEMM's own epilogue where cublasGemmEx needed the bias
// broadcast into D first (a pass over D, 1.4 ms of a GPT-2 small training step on an H200).
// Internal to backends/cuda.
#include "strata/backends/cuda/context.h"

namespace strata::backends::cuda {

// How a [rows, cols] view is read by BLAS: row-major with leading dimension ld (stride of rows),
// or column-major (stride of cols); ok false when neither.
struct MatLayout {
  bool ok = false;
  bool row_major = true;
  int64_t ld = 0;
};
MatLayout mat_layout(const TensorView& v);

// D[M,N] = A[M,K] B[K,N] + bias[N] (broadcast along the rows), D row-major, A and B as
// mat_layout reads them, every operand of D's dtype (f16 or bf16: f32 keeps cublasGemmEx, the
// path the generated programs reproduce), bias dense. Returns false, having done nothing, where
// these do not hold or cuBLASLt offers no algorithm; the caller then takes its general path.
bool gemm_bias_lt(Context& ctx, const TensorView& a, const TensorView& b, const TensorView& bias,
                  const TensorView& d);

}  // namespace strata::backends::cuda
