// linear on cuBLAS (cublasGemmEx): y = x w^T + b, dx = dy w, dw = dy^T x, db = sum_n dy.
// Matrices may be row-major or column-major views (a transpose is a flag, not a
// copy); other strides are staged. f32 computes in f32 (TF32 only when allowed);
// f16/bf16 multiply on the tensor cores and accumulate in f32.
#include "strata/backends/cuda/cudnn_util.h"
#include "strata/backends/cuda/kernels.cuh"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

// How a [rows, cols] view sits in memory for BLAS: row-major with leading dimension
// ld (stride of rows), or column-major (stride of cols).
struct MatLayout {
  bool ok = false;
  bool row_major = true;
  int64_t ld = 0;
};

MatLayout mat_layout(const TensorView& v) {
  const int64_t r = v.sizes[0], c = v.sizes[1], s0 = v.strides[0], s1 = v.strides[1];
  MatLayout m;
  if ((c == 1 || s1 == 1) && (r == 1 || s0 >= std::max<int64_t>(c, 1))) {
    m.ok = true;
    m.row_major = true;
    m.ld = r == 1 ? std::max<int64_t>(c, 1) : s0;
  } else if ((r == 1 || s0 == 1) && (c == 1 || s1 >= std::max<int64_t>(r, 1))) {
    m.ok = true;
    m.row_major = false;
    m.ld = c == 1 ? std::max<int64_t>(r, 1) : s1;
  }
  return m;
}

TensorView transposed(const TensorView& v) {
  TensorView t = v;
  t.sizes = Shape{v.sizes[1], v.sizes[0]};
  t.strides = Shape{v.strides[1], v.strides[0]};
  return t;
}

cudaDataType_t blas_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: break;
  }
  STRATA_FAIL("linear: the cuda backend supports f32, f16 and bf16, got ", dtype_name(t));
}

int blas_int(int64_t v) {
  STRATA_CHECK(v >= 0 && v <= 0x7fffffff, "linear: dimension ", v, " does not fit cuBLAS's int");
  return static_cast<int>(v);
}

// C[M,N] = A[M,K] B[K,N] + beta C, all row-major-logical views on the device.
void gemm(Context& ctx, const Settings& s, const TensorView& a_in, const TensorView& b_in, const TensorView& c_in,
          float beta) {
  const int64_t m = c_in.sizes[0], n = c_in.sizes[1], k = a_in.sizes[1];
  // Operands BLAS cannot read in place are staged row-major; so is C unless it is
  // row-major (then beta's C is copied in first).
  Staged a, b, c;
  MatLayout la = mat_layout(a_in), lb = mat_layout(b_in), lc = mat_layout(c_in);
  a.view = a_in;
  b.view = b_in;
  c.view = c_in;
  if (!la.ok) {
    a = stage_in(ctx, a_in, Layout::nchw);
    la = mat_layout(a.view);
  }
  if (!lb.ok) {
    b = stage_in(ctx, b_in, Layout::nchw);
    lb = mat_layout(b.view);
  }
  if (!lc.ok || !lc.row_major) {
    c.view = make_temp(ctx, c.buf, c_in.sizes, c_in.dtype, Layout::nchw);
    c.orig = &c_in;
    c.temp = true;
    if (beta != 0.f) copy_views(ctx, c_in, c.view);
    lc = mat_layout(c.view);
  }
  if (m == 0 || n == 0) return;
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS computes the latter with
  // its "A" = our B and "B" = our A. A row-major operand already reads as its
  // transpose in column-major, so it needs no op; a column-major one needs op T.
  const cublasOperation_t opb = lb.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t opa = la.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cudaDataType_t dt = blas_type(c_in.dtype);
  const cublasComputeType_t compute =
      c_in.dtype == DType::f32 && s.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float alpha = 1.f;
  if (k == 0) {
    if (beta == 0.f) fill_view(ctx, c.view, 0.0);
  } else {
    STRATA_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, opb, opa, blas_int(n), blas_int(m), blas_int(k), &alpha, b.view.data,
                                     dt, blas_int(lb.ld), a.view.data, dt, blas_int(la.ld), &beta, c.view.data, dt,
                                     blas_int(lc.ld), compute, CUBLAS_GEMM_DEFAULT));
  }
  c.finish(ctx);
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::linear_fwd(const LinearFwdArgs& a) {
  if (a.y.numel() == 0) return;
  float beta = 0.f;
  if (a.b.defined) {
    // y = broadcast(b), then y += x w^T through beta = 1: one pass less than adding after.
    copy_views(*ctx_, broadcast_along(a.b, a.y.sizes, 1), a.y);
    beta = 1.f;
  }
  gemm(*ctx_, settings_, a.x, transposed(a.w), a.y, beta);
}

void CudaBackend::linear_bwd_data(const LinearBwdDataArgs& a) {
  if (a.dx.numel() == 0) return;
  gemm(*ctx_, settings_, a.dy, a.w, a.dx, 0.f);
}

void CudaBackend::linear_bwd_weight(const LinearBwdWeightArgs& a) {
  if (a.dw.numel() > 0) gemm(*ctx_, settings_, transposed(a.dy), a.x, a.dw, 0.f);
  if (a.db.defined && a.db.numel() > 0) sum_along(*ctx_, a.dy, 1, a.db);
}

}  // namespace strata::backends
