// cuBLASLt's GEMM with a C operand and the bias, GELU and GELU-derivative epilogues (gemm_lt.h).
// Descriptors and the heuristic's algorithm are made once per shape, layout, dtype and operand
// alignment (the context's plan cache): a call then sets the pointers and runs cublasLtMatmul on the
// context's stream with the cuBLAS workspace (the same fixed buffer: cuBLAS and cuBLASLt run in
// stream order on one stream).
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
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
  ~LtPlan() override {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

cublasLtEpilogue_t epilogue_of(const LtEpilogue& e) {
  switch (e.kind) {
    case LtEpilogue::Kind::bias: return e.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    case LtEpilogue::Kind::gelu: return e.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    case LtEpilogue::Kind::dgelu: return CUBLASLT_EPILOGUE_DGELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The epilogue's operands as cuBLASLt takes them, or false where it takes none of these.
bool epilogue_fits(const LtEpilogue& e, const TensorView& d) {
  if ((e.kind == LtEpilogue::Kind::bias) != (e.aux == nullptr)) return false;
  if (e.kind != LtEpilogue::Kind::bias && e.c) return false;
  if (e.kind == LtEpilogue::Kind::dgelu && e.bias) return false;
  if (e.c) {
    const TensorView& c = *e.c;
    const MatLayout l = mat_layout(c);
    if (c.dtype != d.dtype || c.sizes != d.sizes || !l.ok || !l.row_major) return false;
  }
  if (e.bias) {
    const TensorView& b = *e.bias;
    if (b.dtype != d.dtype || b.dim() != 1 || (b.sizes[0] > 1 && b.strides[0] != 1)) return false;
  }
  if (e.aux) {
    const TensorView& x = *e.aux;
    if (x.dtype != d.dtype || x.sizes != d.sizes) return false;
    const MatLayout l = mat_layout(x);
    if (!l.ok || !l.row_major || l.ld % 8 != 0) return false;
  }
  return true;
}

// Sets the pointers the epilogue reads or writes (per call: a plan serves any buffers of its key).
void set_epilogue_pointers(cublasLtMatmulDesc_t op, const LtEpilogue& e) {
  if (e.bias) {
    const void* p = e.bias->data;
    STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, sizeof(p)));
  }
  if (e.aux) {
    void* p = e.aux->data;
    STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p, sizeof(p)));
  }
}

}  // namespace

bool gemm_lt_fits(const TensorView& a, const TensorView& b, const TensorView& d, const LtEpilogue& e) {
  if (d.dtype != DType::bf16 && d.dtype != DType::f16) return false;
  if (a.dtype != d.dtype || b.dtype != d.dtype) return false;
  const MatLayout la = mat_layout(a), lb = mat_layout(b), lc = mat_layout(d);
  if (!la.ok || !lb.ok || !lc.ok || !lc.row_major || !epilogue_fits(e, d)) return false;
  return d.sizes[0] != 0 && d.sizes[1] != 0 && a.sizes[1] != 0;
}

bool gemm_lt(Context& ctx, const TensorView& a, const TensorView& b, const TensorView& d, const LtEpilogue& e) {
  if (!gemm_lt_fits(a, b, d, e)) return false;
  const MatLayout la = mat_layout(a), lb = mat_layout(b), lc = mat_layout(d);
  const int64_t m = d.sizes[0], n = d.sizes[1], k = a.sizes[1];
  // Row-major D = A B is column-major D^T = B^T A^T: cuBLASLt's "A" is our b and its "B" our a
  // (linear.cu's gemm does the same with cublasGemmEx); the bias, one value per row of D^T, and
  // aux, D^T's shape with D's row stride as its leading dimension.
  const cublasOperation_t opa = lb.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t opb = la.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cudaDataType_t dt = d.dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const cublasLtEpilogue_t epi = epilogue_of(e);
  const int64_t aux_ld = e.aux ? mat_layout(*e.aux).ld : 0, c_ld = e.c ? mat_layout(*e.c).ld : 0;
  PlanKey key;
  key.add(5000).add(static_cast<int64_t>(d.dtype)).add(m).add(n).add(k).add(opa).add(opb);
  key.add(lb.ld).add(la.ld).add(lc.ld).add(static_cast<int64_t>(epi)).add(aux_ld).add(c_ld);
  key.add(alignment(a.data)).add(alignment(b.data)).add(alignment(d.data));
  key.add(e.bias ? alignment(e.bias->data) : 0).add(e.aux ? alignment(e.aux->data) : 0);
  key.add(e.c ? alignment(e.c->data) : 0);
  LtPlan& p = ctx.plan<LtPlan>(key, [&] {
    auto plan = std::make_unique<LtPlan>();
    STRATA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    STRATA_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
    STRATA_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
    STRATA_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (e.aux)
      STRATA_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    set_epilogue_pointers(plan->op, e);  // the heuristic reads their alignment
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
    if (e.c)
      STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->lc, dt, static_cast<uint64_t>(n), static_cast<uint64_t>(m),
                                                     c_ld));
    cublasLtMatmulPreference_t pref = nullptr;
    STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = ctx.cublas_workspace_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    const uint32_t al_a = static_cast<uint32_t>(alignment(b.data)), al_b = static_cast<uint32_t>(alignment(a.data)),
                   al_d = static_cast<uint32_t>(alignment(d.data)),
                   al_c = e.c ? static_cast<uint32_t>(alignment(e.c->data)) : al_d;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof(al_d));
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        ctx.cublaslt, plan->op, plan->la, plan->lb, plan->lc ? plan->lc : plan->ld, plan->ld, pref, 1, &result, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    plan->found = st == CUBLAS_STATUS_SUCCESS && count > 0;
    if (plan->found) plan->algo = result.algo;
    return plan;
  });
  if (!p.found) return false;
  if (observing()) observe_library(LibraryCall::Kind::gemm_lt);
  set_epilogue_pointers(p.op, e);
  const float one = 1.f, beta = e.c ? 1.f : 0.f;
  const void* c = e.c ? e.c->data : d.data;
  STRATA_CUBLAS_CHECK(cublasLtMatmul(ctx.cublaslt, p.op, &one, b.data, p.la, a.data, p.lb, &beta, c,
                                     p.lc ? p.lc : p.ld, d.data, p.ld, &p.algo, ctx.cublas_workspace,
                                     ctx.cublas_workspace_bytes, ctx.stream));
  return true;
}

}  // namespace strata::backends::cuda
