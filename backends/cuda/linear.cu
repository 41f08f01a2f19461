// linear on cuBLAS (cublasGemmEx): y = x w^T + b (a few rows: gemv.cu; f16/bf16 with the bias in
// cuBLASLt's epilogue: gemm_lt.h, with GELU and its derivative there too and a residual as its C
// operand), dx = dy w, dw = dy^T x, db = sum_n dy;
// and bmm (cublasGemmStridedBatchedEx): y[i] = alpha a[i] b[i].
// Matrices may be row-major or column-major views (a transpose is a flag, not a
// copy); other strides are staged. f32 computes in f32 (TF32 only when allowed);
// f16/bf16 multiply on the tensor cores and accumulate in f32; f64 (bmm) in f64.
#include "strata/backends/api/linear_epilogue.h"
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/cudnn_util.h"
#include "strata/backends/cuda/gemm_lt.h"
#include "strata/backends/cuda/gemv.h"
#include "strata/backends/cuda/kernels.cuh"
#include "strata/ops/table/gemm_layout.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

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
  if (a.temp || b.temp || c.temp) observe_library(LibraryCall::Kind::staged);
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
    if (observing())
      observe_library({.kind = LibraryCall::Kind::gemm, .mode = static_cast<int64_t>(compute), .op_a = opb,
                       .op_b = opa, .m = n, .n = m, .k = k, .lda = lb.ld, .ldb = la.ld, .ldc = lc.ld, .beta = beta,
                       .a = b.view.data, .b = a.view.data, .c = c.view.data});
    STRATA_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, opb, opa, blas_int(n), blas_int(m), blas_int(k), &alpha, b.view.data,
                                     dt, blas_int(lb.ld), a.view.data, dt, blas_int(la.ld), &beta, c.view.data, dt,
                                     blas_int(lc.ld), compute, CUBLAS_GEMM_DEFAULT));
  }
  c.finish(ctx);
}

// A bmm operand's layout (ops::gemm_layout), staged dense row-major when it has none
// (the front end copies such operands first; this keeps a direct call correct).
GemmLayout bmm_operand(Context& ctx, const TensorView& v, Staged& staged) {
  staged.view = v;
  if (const auto l = gemm_layout(v)) return *l;
  staged = stage_in(ctx, v, Layout::nchw);
  return *gemm_layout(staged.view);
}

int bmm_int(int64_t v, const char* what) {
  STRATA_CHECK(v >= 0 && v <= 0x7fffffff, "bmm: ", what, " ", v, " does not fit cuBLAS's int");
  return static_cast<int>(v);
}

}  // namespace
}  // namespace cuda

using namespace cuda;

// Row-major y[i] = a[i] b[i] is column-major y[i]^T = b[i]^T a[i]^T: cuBLAS's "A" is our b
// and its "B" our a, each with op N when row-major (it then reads as its transpose) and
// op T when column-major. A batch stride of 0 reads one matrix for every batch.
void CudaBackend::bmm(const BmmArgs& a) {
  observe_call(OpId::bmm, a);
  const int64_t batch = a.y.sizes[0], m = a.y.sizes[1], n = a.y.sizes[2], k = a.a.sizes[2];
  if (a.y.numel() == 0) return;
  STRATA_CHECK(a.a.dtype == a.y.dtype && a.b.dtype == a.y.dtype, "bmm: operands of one dtype, got ",
               dtype_name(a.a.dtype), ", ", dtype_name(a.b.dtype), " and ", dtype_name(a.y.dtype));
  Staged y;
  y.view = a.y;
  const auto ly0 = gemm_layout(a.y);
  if (!ly0 || ly0->trans) {  // y is dense row-major per matrix (op_args.h); else through a temporary
    y.view = make_temp(*ctx_, y.buf, a.y.sizes, a.y.dtype, Layout::nchw);
    y.orig = &a.y;
    y.temp = true;
  }
  const GemmLayout ly = *gemm_layout(y.view);
  if (k == 0) {
    fill_view(*ctx_, y.view, 0.0);
  } else {
    Staged sa, sb;
    const GemmLayout la = bmm_operand(*ctx_, a.a, sa), lb = bmm_operand(*ctx_, a.b, sb);
    const cublasOperation_t opb = lb.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opa = la.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    // A batch of one takes any batch stride; cuBLAS reads none of them then.
    const auto batch_stride = [&](const TensorView& v) -> long long { return batch > 1 ? v.strides[0] : 0; };
    cudaDataType_t dt = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    const float alpha_f = static_cast<float>(a.alpha), beta_f = 0.f;
    const double alpha_d = a.alpha, beta_d = 0.0;
    const void* alpha = &alpha_f;
    const void* beta = &beta_f;
    switch (a.y.dtype) {
      case DType::f32:
        compute = settings_.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        break;
      case DType::f16: dt = CUDA_R_16F; break;
      case DType::bf16: dt = CUDA_R_16BF; break;
      case DType::f64:
        dt = CUDA_R_64F;
        compute = CUBLAS_COMPUTE_64F;
        alpha = &alpha_d;
        beta = &beta_d;
        break;
      default: STRATA_FAIL("bmm: the cuda backend supports f32, f64, f16 and bf16, got ", dtype_name(a.y.dtype));
    }
    if (observing()) {
      if (sa.temp || sb.temp || y.temp) observe_library(LibraryCall::Kind::staged);
      observe_library({.kind = LibraryCall::Kind::gemm_batched, .mode = static_cast<int64_t>(compute), .op_a = opb,
                       .op_b = opa, .m = n, .n = m, .k = k, .lda = lb.ld, .ldb = la.ld, .ldc = ly.ld, .beta = 0.f,
                       .alpha = a.alpha, .batch = batch, .stride_a = batch_stride(sb.view),
                       .stride_b = batch_stride(sa.view), .stride_c = batch_stride(y.view), .a = sb.view.data,
                       .b = sa.view.data, .c = y.view.data});
    }
    STRATA_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        ctx_->cublas, opb, opa, bmm_int(n, "N"), bmm_int(m, "M"), bmm_int(k, "K"), alpha, sb.view.data, dt,
        bmm_int(lb.ld, "leading dimension"), batch_stride(sb.view), sa.view.data, dt, bmm_int(la.ld, "leading dimension"),
        batch_stride(sa.view), beta, y.view.data, dt, bmm_int(ly.ld, "leading dimension"), batch_stride(y.view),
        bmm_int(batch, "batch"), compute, CUBLAS_GEMM_DEFAULT));
  }
  y.finish(*ctx_);
}

void CudaBackend::linear_fwd(const LinearFwdArgs& a) {
  if (a.norm_eps) {
    // The layer norm in the few-rows kernel's prologue (a decoding step's row, normalised as the
    // separate kernel would: the same bits); otherwise the layer norm, then the product.
    if (a.y.numel() > 0 && gemv_fits(a) && (!a.act || *a.act == UnaryFn::gelu_tanh)) {
      observe_call(OpId::linear_fwd, a);
      return gemv_rows(*ctx_, a);
    }
    const ComposedCall parts(OpId::linear_fwd);
    return linear_fwd_composed(*this, a);
  }
  // A fused form is reported as the one call it is; a composed one as its parts (ComposedCall).
  if (a.act) {
    // GELU in the few-rows kernel (its bits those of the product, then the formula) or in
    // cuBLASLt's epilogue (f16/bf16); any other case as the product, then the formula.
    if (a.y.numel() > 0 && *a.act == UnaryFn::gelu_tanh) {
      const LtEpilogue gelu{LtEpilogue::Kind::gelu, a.b.defined ? &a.b : nullptr, &a.pre};
      if (gemv_fits(a)) {
        observe_call(OpId::linear_fwd, a);
        return gemv_rows(*ctx_, a);
      }
      if (gemm_lt_fits(a.x, transposed(a.w), a.y, gelu)) {
        observe_call(OpId::linear_fwd, a);
        if (gemm_lt(*ctx_, a.x, transposed(a.w), a.y, gelu)) return;
      }
    }
    const ComposedCall parts(OpId::linear_fwd);
    return linear_fwd_composed(*this, a);
  }
  if (a.z.defined && !gemv_fits(a)) {
    // The residual as cuBLASLt's C operand (f16/bf16, more rows than the few-rows kernel takes,
    // which adds it itself); otherwise the product, then the add.
    if (a.y.numel() > 0) {
      const LtEpilogue sum{LtEpilogue::Kind::bias, a.b.defined ? &a.b : nullptr, nullptr, &a.z};
      if (gemm_lt_fits(a.x, transposed(a.w), a.y, sum)) {
        observe_call(OpId::linear_fwd, a);
        if (gemm_lt(*ctx_, a.x, transposed(a.w), a.y, sum)) return;
      }
    }
    const ComposedCall parts(OpId::linear_fwd);
    return linear_fwd_composed(*this, a);
  }
  observe_call(OpId::linear_fwd, a);
  if (a.y.numel() == 0) return;
  if (gemv_fits(a)) return gemv_rows(*ctx_, a);
  // f16/bf16 with a dense bias: the bias in cuBLASLt's epilogue (gemm_lt.h).
  if (a.b.defined && gemm_lt(*ctx_, a.x, transposed(a.w), a.y, {LtEpilogue::Kind::bias, &a.b})) return;
  float beta = 0.f;
  if (a.b.defined) {
    // y = broadcast(b), then y += x w^T through beta = 1: one pass less than adding after.
    const ScopedCopyObservation report;
    copy_views(*ctx_, broadcast_along(a.b, a.y.sizes, 1), a.y);
    beta = 1.f;
  }
  gemm(*ctx_, settings_, a.x, transposed(a.w), a.y, beta);
}

void CudaBackend::linear_bwd_data(const LinearBwdDataArgs& a) {
  observe_call(OpId::linear_bwd_data, a);
  if (a.dx.numel() == 0) return;
  if (a.act) {
    const LtEpilogue dgelu{LtEpilogue::Kind::dgelu, nullptr, &a.pre};
    if (*a.act == UnaryFn::gelu_tanh && gemm_lt(*ctx_, a.dy, a.w, a.dx, dgelu)) return;
    return linear_act_bwd_data_composed(*this, a);
  }
  gemm(*ctx_, settings_, a.dy, a.w, a.dx, 0.f);
}

void CudaBackend::linear_bwd_weight(const LinearBwdWeightArgs& a) {
  observe_call(OpId::linear_bwd_weight, a);
  if (a.dw.numel() > 0) gemm(*ctx_, settings_, transposed(a.dy), a.x, a.dw, 0.f);
  if (a.db.defined && a.db.numel() > 0 && !column_sums(*ctx_, a.dy, a.db)) sum_along(*ctx_, a.dy, 1, a.db);
}

}  // namespace strata::backends
