#pragma once
// What the cuda emitter's tests use to record a step by hand, without a GPU: views over host
// buffers laid out as an arena and a state, and the library records the cuda backend would give
// (the tests take them with `using namespace testing`).
#include <string>

#include "strata/backends/cuda/call_observer.h"
#include "strata/ops/table/tensor_view.h"

namespace strata::testing {

using backends::cuda::LibraryCall;
using Kind = LibraryCall::Kind;
using ops::OpId;
using ops::TensorView;

// A dense (row-major) view of `sizes` at p.
inline TensorView view(void* p, const Shape& sizes, DType dt = DType::f32) {
  TensorView v;
  v.data = p;
  v.sizes = sizes;
  v.strides = contiguous_strides(sizes);
  v.dtype = dt;
  v.device = Device::cpu();
  v.defined = true;
  return v;
}

inline LibraryCall lib(Kind k, int64_t mode = 0) {
  LibraryCall l;
  l.kind = k;
  l.mode = mode;
  return l;
}

// cublasGemmEx as the backend reports it (CUBLAS_COMPUTE_32F), in cuBLAS's column-major terms.
inline LibraryCall gemm(int op_a, int op_b, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                        const void* a, const void* b, const void* c) {
  LibraryCall l = lib(Kind::gemm, 68);
  l.op_a = op_a, l.op_b = op_b, l.m = m, l.n = n, l.k = k, l.lda = lda, l.ldb = ldb, l.ldc = ldc;
  l.a = a, l.b = b, l.c = c;
  return l;
}

inline bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace strata::testing
