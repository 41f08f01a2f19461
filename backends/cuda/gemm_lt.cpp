// cuBLASLt's GEMM with the bias epilogue (gemm_lt.h). Descriptors and the heuristic's algorithm
// are made once per shape, layout, dtype and operand alignment (the context's plan cache): a call
// then sets the pointers and runs cublasLtMatmul on the context's stream with the cuBLAS
// workspace (the same fixed buffer: cuBLAS and cuBLASLt run in stream order on one stream).
#include "strata/backends/cuda/gemm_lt.h"

#include <cublasLt.h>

#include "strata/backends/cuda/call_observer.h"

namespace strata::backends::cuda {

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

namespace {

// The largest power of two dividing a pointer, at most 16: cuBLASLt's heuristic must only offer
// algorithms that work at the operands' actual alignment, and no more than 16 bytes is what direct
// mode's arena guarantees (step_memory.h's buffer_alignment): a buffer from the allocator and the
// same buffer in the arena then get the same algorithm, and the dispatch modes the same bits.
int64_t alignment(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  int64_t a = 16;
  while (a > 1 && u % static_cast<uintptr_t>(a) != 0) a /= 2;
  return a;
}

struct LtPlan : Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
  ~LtPlan() override {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

}  // namespace

bool gemm_bias_lt(Context& ctx, const TensorView& a, const TensorView& b, const TensorView& bias,
                  const TensorView& d) {
  if (d.dtype != DType::bf16 && d.dtype != DType::f16) return false;
  if (a.dtype != d.dtype || b.dtype != d.dtype || bias.dtype != d.dtype) return false;
  const MatLayout la = mat_layout(a), lb = mat_layout(b), lc = mat_layout(d);
  if (!la.ok || !lb.ok || !lc.ok || !lc.row_major) return false;
  if (bias.dim() != 1 || (bias.sizes[0] > 1 && bias.strides[0] != 1)) return false;
  const int64_t m = d.sizes[0], n = d.sizes[1], k = a.sizes[1];
  if (m == 0 || n == 0 || k == 0) return false;
  // Row-major D = A B is column-major D^T = B^T A^T: cuBLASLt's "A" is our b and its "B" our a
  // (linear.cu's gemm does the same with cublasGemmEx); the bias, one value per row of D^T.
  const cublasOperation_t opa = lb.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t opb = la.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cudaDataType_t dt = d.dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  PlanKey key;
  key.add(5000).add(static_cast<int64_t>(d.dtype)).add(m).add(n).add(k).add(opa).add(opb);
  key.add(lb.ld).add(la.ld).add(lc.ld);
  key.add(alignment(a.data)).add(alignment(b.data)).add(alignment(d.data)).add(alignment(bias.data));
  LtPlan& p = ctx.plan<LtPlan>(key, [&] {
    auto plan = std::make_unique<LtPlan>();
    STRATA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    STRATA_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
    STRATA_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    STRATA_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    const void* bias_ptr = bias.data;  // the heuristic may look at it; each call sets its own
    STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr,
                                                       sizeof(bias_ptr)));
    // Column-major shapes as stored: cuBLASLt's A is n x k (op N) or k x n (op T), B k x m or m x k.
    const auto rows_cols = [](cublasOperation_t o, int64_t r, int64_t c) {
      return o == CUBLAS_OP_N ? std::pair<uint64_t, uint64_t>(r, c) : std::pair<uint64_t, uint64_t>(c, r);
    };
    const auto [ar, ac] = rows_cols(opa, n, k);
    const auto [br, bc] = rows_cols(opb, k, m);
    STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->la, dt, ar, ac, lb.ld));
    STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->lb, dt, br, bc, la.ld));
    STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->ld, dt, static_cast<uint64_t>(n), static_cast<uint64_t>(m),
                                                   lc.ld));
    cublasLtMatmulPreference_t pref = nullptr;
    STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = ctx.cublas_workspace_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    const uint32_t al_a = static_cast<uint32_t>(alignment(b.data)), al_b = static_cast<uint32_t>(alignment(a.data)),
                   al_d = static_cast<uint32_t>(alignment(d.data));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof(al_d));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof(al_d));
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt, plan->op, plan->la, plan->lb, plan->ld,
                                                             plan->ld, pref, 1, &result, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    plan->found = st == CUBLAS_STATUS_SUCCESS && count > 0;
    if (plan->found) plan->algo = result.algo;
    return plan;
  });
  if (!p.found) return false;
  if (observing()) observe_library(LibraryCall::Kind::gemm_lt);
  const void* bias_ptr = bias.data;
  STRATA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)));
  const float one = 1.f, zero = 0.f;
  STRATA_CUBLAS_CHECK(cublasLtMatmul(ctx.cublaslt, p.op, &one, b.data, p.la, a.data, p.lb, &zero, d.data, p.ld,
                                     d.data, p.ld, &p.algo, ctx.cublas_workspace, ctx.cublas_workspace_bytes,
                                     ctx.stream));
  return true;
}

}  // namespace strata::backends::cuda
