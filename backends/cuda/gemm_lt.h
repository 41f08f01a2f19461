#pragma once
// GEMMs with a fused epilogue through cuBLASLt (cublasLtMatmul): row-major D = A B + bias, the
// bias added to every row inside the GEMM's own epilogue where cublasGemmEx needed the bias
// broadcast into D first (a pass over D, 1.4 ms of a GPT-2 small training step on an H200), and
// GELU and its derivative there too, where each was a pass of its own over D.
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

// What cuBLASLt does to D = A B: adds c (beta = 1) and the bias (one value per column of D,
// broadcast along its rows), either optional; or adds the bias when given, stores that sum to aux
// and writes GELU of it (the tanh approximation, as GPT-2's); or multiplies D by GELU's derivative
// at aux (the backward's).
struct LtEpilogue {
  enum class Kind { bias, gelu, dgelu };
  Kind kind = Kind::bias;
  const TensorView* bias = nullptr;  // bias, gelu: optional
  const TensorView* aux = nullptr;   // gelu: written; dgelu: read (D's shape, dense rows)
  const TensorView* c = nullptr;     // bias: optional (D's shape, row-major)
};

// D[M,N] = A[M,K] B[K,N] with epilogue e, D row-major, A and B as mat_layout reads them, every
// operand of D's dtype (f16 or bf16: f32 keeps cublasGemmEx, the path the generated programs
// reproduce), the bias dense, c row-major, aux row-major with rows of a multiple of 8 elements
// (cuBLASLt's rule). Returns false, having done nothing, where these do not hold or cuBLASLt offers no
// algorithm; the caller then takes its general path.
bool gemm_lt(Context& ctx, const TensorView& a, const TensorView& b, const TensorView& d, const LtEpilogue& e);
// Whether gemm_lt takes these operands, so that a caller can tell before it runs whether the product
// will be fused (gemm_lt also returns false where this holds but cuBLASLt offers no algorithm).
bool gemm_lt_fits(const TensorView& a, const TensorView& b, const TensorView& d, const LtEpilogue& e);

}  // namespace strata::backends::cuda
