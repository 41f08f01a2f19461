// The cuda emitter's GPT forward: the calls the cuda backend runs for a GPT's prediction in f32 that
// a prediction of images does not. Its lookups, layer norms, attention, GELU and broadcast add are
// strata's own kernels (the codegen:begin cuda_kernels blocks of tensor_ops.cu, layer_norm.cu,
// attention.cu, elementwise.cu, the GELU row of pointwise.def), launched in the form the backend
// reported (which orders a row's sums); the tied output projection is the backend's
// cublasGemmStridedBatchedEx as called. The linear layers are emitter.cpp's: a linear's GELU or
// residual the backend composes in f32 of a plain linear and these ops (backends/api/
// linear_epilogue.h), and reports as those.
#include <algorithm>
#include <sstream>

#include "strata/backends/cuda/strided.h"
#include "strata/codegen/cuda/call_text.h"
#include "strata/codegen/cuda/launchers.h"
#include "strata/core/error.h"
#include "strata/ops/table/pointwise.h"

namespace strata::codegen::cuda {

using backends::cuda::LibraryCall;
using Kind = LibraryCall::Kind;
using ops::OpId;
using ops::TensorView;

namespace {

std::string i64(int64_t v) { return std::to_string(v); }

std::string op_of(const RecordedCall& c) { return std::string(ops::op_name(c.op)) + " (" + c.layer + ")"; }

void require_f32(const TensorView& v, const std::string& what) {
  STRATA_CHECK(v.dtype == DType::f32, "strata_codegen: ", what, " is ", dtype_name(v.dtype),
               "; the cuda emitter writes out f32 GPTs only");
}

// The coalesced indexing of strata's element-wise launch (strided_by_output: the last view's
// memory order) as the arrays a launcher takes.
template <int N>
std::string indexing(const Shape& sizes, const std::array<Shape, N>& strides) {
  std::array<Shape, N> st = strides;
  const auto s = backends::cuda::make_strided_in_memory_order<N>(sizes, st, N - 1);
  std::string r = "    const int64_t sizes[] = " + ints(std::vector<int64_t>(s.sizes, s.sizes + s.nd));
  for (int i = 0; i < N; ++i)
    r += ", s" + std::to_string(i) + "[] = " + ints(std::vector<int64_t>(s.strides[i], s.strides[i] + s.nd));
  return r + ";\n    const int nd = " + std::to_string(s.nd) + ";\n    const int64_t n = " + i64(s.n) + ";\n";
}

CallText index_select(const RecordedCall& c, Places& p) {
  const auto& a = std::get<ops::IndexSelectArgs>(c.args);
  const std::string op = op_of(c);
  only(c, Kind::own_kernel, "strata's lookup kernel");
  require_f32(a.x, op + " x");
  STRATA_CHECK(a.index.dtype == DType::i64 && a.index.dim() == 1, "strata_codegen: ", op, " looks up ",
               dtype_name(a.index.dtype), " indices; the cuda emitter writes out i64 ones only");
  if (const auto host = p.step().host_bytes.find(a.index.data); host != p.step().host_bytes.end())
    for (int64_t i = 0; i < a.index.numel(); ++i) {
      const int64_t v = reinterpret_cast<const int64_t*>(host->second.data())[i * a.index.strides[0]];
      STRATA_CHECK(v >= 0 && v < a.x.sizes[a.dim], "strata_codegen: ", op, ": index ", i, " is ", v,
                   ", out of range [0, ", a.x.sizes[a.dim], ")");
    }
  // y's elements: x at the indexed dim's origin, the position along it, y (tensor_ops.cu).
  Shape x_strides = a.x.strides, pos;
  x_strides[a.dim] = 0;
  for (int d = 0; d < a.y.dim(); ++d) pos.push_back(d == a.dim ? 1 : 0);
  CallText t;
  t.run = "  {\n" + indexing<3>(a.y.sizes, {x_strides, pos, a.y.strides}) +
          "    kernels::index_select(stream, nd, n, sizes, s0, s1, s2, " + p.fptr(a.x, op + " x") +
          ", reinterpret_cast<const int64_t*>(" + p.ptr(a.index, op + " index") + "), " + i64(a.index.strides[0]) +
          ", " + i64(a.x.strides[a.dim]) + ", " + i64(a.x.sizes[a.dim]) + ", " + p.fptr(a.y, op + " y") +
          ");\n  }\n";
  t.how = "strata's lookup kernel";
  return t;
}

// y = a + b where an operand is read broadcast (GPT's positions over the batch): strata's strided
// form of the add (the dense one is emitter.cpp's).
CallText add_strided(const RecordedCall& c, Places& p) {
  const auto& a = std::get<ops::AddArgs>(c.args);
  const std::string op = op_of(c);
  only(c, Kind::own_kernel, "strata's kernel");
  for (const TensorView* v : {&a.a, &a.b, &a.y}) require_f32(*v, op);
  CallText t;
  t.run = "  {\n" + indexing<3>(a.y.sizes, {a.a.strides, a.b.strides, a.y.strides}) +
          "    kernels::add_strided(stream, nd, n, sizes, s0, s1, s2, " + p.fptr(a.a, op + " a") + ", " +
          p.fptr(a.b, op + " b") + ", " + p.fptr(a.y, op + " y") + ");\n  }\n";
  t.how = "strata's element-wise kernel, strided";
  return t;
}

CallText layer_norm(const RecordedCall& c, Places& p) {
  const auto& a = std::get<ops::LayerNormFwdArgs>(c.args);
  const std::string op = op_of(c);
  const LibraryCall& l = only(c, Kind::layer_norm, "strata's layer-norm kernel");
  for (const TensorView* v : {&a.x, &a.y, &a.mean, &a.rstd}) require_f32(*v, op);
  STRATA_CHECK(l.mode == 32 || l.mode == 256 || (l.mode <= -1 && l.mode >= -4), "strata_codegen: ", op,
               ": an unknown layer-norm form ", l.mode, " (internal error)");
  // Its 16-byte loads where strata's were: the same values either way, but the alignment must hold.
  for (const TensorView* v : {&a.x, &a.y}) p.align(*v, op);
  const auto vec = [&](const TensorView& v, const char* name) {
    return v.defined ? p.fptr(v, op + " " + name) + ", " + i64(v.strides[0]) : std::string("nullptr, 0");
  };
  CallText t;
  t.run = "  kernels::layer_norm(stream, " + i64(l.mode) + ", " + p.fptr(a.x, op + " x") + ", " +
          i64(a.x.strides[0]) + ", " + i64(a.x.strides[1]) + ", " + vec(a.weight, "weight") + ", " +
          vec(a.bias, "bias") + ",\n                     " + p.fptr(a.y, op + " y") + ", " + i64(a.y.strides[0]) +
          ", " + i64(a.y.strides[1]) + ", " + p.fptr(a.mean, op + " mean") + ", " + i64(a.mean.strides[0]) + ", " +
          p.fptr(a.rstd, op + " rstd") + ", " + i64(a.rstd.strides[0]) + ", " + i64(a.x.sizes[0]) + ", " +
          i64(a.x.sizes[1]) + ", " + num_text(a.eps) + ");\n";
  t.how = l.mode < 0 ? "strata's kernel, a warp a row in registers" : l.mode == 32 ? "strata's kernel, a warp a row"
                                                                                  : "strata's kernel, a block a row";
  return t;
}

// "ptr, {strides}"
std::string view4(const TensorView& v, const std::string& ptr) { return ptr + ", " + strides_of(v); }

CallText attention(const RecordedCall& c, Places& p) {
  const auto& a = std::get<ops::AttentionFwdArgs>(c.args);
  const std::string op = op_of(c);
  refuse_staging(c);
  for (const LibraryCall& l : c.library)
    STRATA_CHECK(l.kind != Kind::attention_other, "strata_codegen: ", op, " ran as ",
                 l.mode == 1   ? "strata's split-keys kernel"
                 : l.mode == 2 ? "strata's decoding kernel"
                 : l.mode == 3 ? "cuBLAS products around strata's softmax"
                               : "cuDNN's fused attention",
                 " in strata's cuda backend; the cuda emitter writes out the whole-row attention kernel only (a "
                 "sequence of fewer than 64 tokens over more than 4 queries)");
  const LibraryCall& l = only(c, Kind::attention, "strata's attention kernel");
  STRATA_CHECK(!a.kv_len.defined && !a.k_new.defined, "strata_codegen: ", op, " reads a key/value cache; the cuda "
               "emitter writes out attention over a whole sequence only (no cache)");
  for (const TensorView* v : {&a.q, &a.k, &a.v, &a.y, &a.lse}) require_f32(*v, op);
  CallText t;
  t.run = "  kernels::attention(stream, " + i64(l.m) + ", " + i64(l.k) + ", " +
          view4(a.q, p.fptr(a.q, op + " q")) + ", " + view4(a.k, p.fptr(a.k, op + " k")) + ",\n                    " +
          view4(a.v, p.fptr(a.v, op + " v")) + ", " + view4(a.y, p.fptr(a.y, op + " y")) + ",\n                    " +
          view4(a.lse, p.fptr(a.lse, op + " lse")) + ", " + i64(a.q.sizes[0]) + ", " + i64(a.q.sizes[1]) + ", " + i64(a.q.sizes[2]) +
          ", " + i64(a.k.sizes[2]) + ", " + i64(a.q.sizes[3]) + ", " + (a.causal ? "true" : "false") + ", " +
          num_text(a.scale) + ");\n";
  t.how = "strata's attention kernel, " + i64(l.m) + " threads a query";
  return t;
}

CallText unary(const RecordedCall& c, Places& p) {
  const auto& a = std::get<ops::UnaryFwdArgs>(c.args);
  const std::string op = op_of(c);
  only(c, Kind::unary, "strata's element-wise formula");
  STRATA_CHECK(a.fn == ops::UnaryFn::gelu_tanh, "strata_codegen: ", op, " computes ", ops::unary_name(a.fn),
               "; the cuda emitter writes out GELU (tanh form) only");
  require_dense_f32(a.x, op + " x");
  require_dense_f32(a.y, op + " y");
  CallText t;
  t.run = "  kernels::gelu_tanh(stream, " + p.fptr(a.x, op + " x") + ", " + p.fptr(a.y, op + " y") + ", " +
          i64(a.y.numel()) + ", " + num_text(a.p0) + ", " + num_text(a.p1) + ");\n";
  t.how = "the GELU row of strata's formulas";
  return t;
}

// y[i] = alpha a[i] b[i]: cublasGemmStridedBatchedEx with the arguments the backend passed.
CallText bmm(const RecordedCall& c, Places& p) {
  const auto& a = std::get<ops::BmmArgs>(c.args);
  const std::string op = op_of(c);
  const LibraryCall& g = only(c, Kind::gemm_batched, "cublasGemmStridedBatchedEx");
  for (const TensorView* v : {&a.a, &a.b, &a.y}) require_f32(*v, op);
  const auto operand = [&](const void* ptr, const char* role) -> std::string {
    for (const auto& [v, name] : {std::pair{&a.a, "a"}, std::pair{&a.b, "b"}, std::pair{&a.y, "y"}})
      if (v->data == ptr) {
        p.align(*v, op + " " + name);
        return p.ptr(*v, op + " " + name);
      }
    STRATA_FAIL("strata_codegen: ", op, ": cuBLAS's ", role, " is none of the call's operands (internal error)");
  };
  const auto trans = [](int o) { return o == 0 ? "CUBLAS_OP_N" : "CUBLAS_OP_T"; };
  CallText t;
  t.run = "  {\n    const float alpha = static_cast<float>(" + num_text(g.alpha) + "), beta = 0.f;\n" +
          "    CHECK(cublasGemmStridedBatchedEx(cublas, " + trans(g.op_a) + ", " + trans(g.op_b) + ", " + i64(g.m) +
          ", " + i64(g.n) + ", " + i64(g.k) + ", &alpha,\n        " + operand(g.a, "A") + ", CUDA_R_32F, " +
          i64(g.lda) + ", " + i64(g.stride_a) + ", " + operand(g.b, "B") + ", CUDA_R_32F, " + i64(g.ldb) + ", " +
          i64(g.stride_b) + ",\n        &beta, " + operand(g.c, "C") + ", CUDA_R_32F, " + i64(g.ldc) + ", " +
          i64(g.stride_c) + ", " + i64(g.batch) + ", static_cast<cublasComputeType_t>(" + i64(g.mode) +
          "), CUBLAS_GEMM_DEFAULT));\n  }\n";
  t.how = "cublasGemmStridedBatchedEx (CUBLAS_GEMM_DEFAULT)";
  return t;
}

}  // namespace

std::string num_text(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  std::string r = s.str();
  if (r.find_first_of(".en") == std::string::npos) r += ".0";
  return r;
}

bool is_gpt_call(const RecordedCall& c) {
  switch (c.op) {
    case OpId::index_select:
    case OpId::layer_norm_fwd:
    case OpId::attention_fwd:
    case OpId::unary_fwd:
    case OpId::bmm: return true;
    case OpId::add: {
      const auto& a = std::get<ops::AddArgs>(c.args);
      return !(a.a.is_contiguous() && a.b.is_contiguous() && a.y.is_contiguous());
    }
    default: return false;
  }
}

CallText gpt_text(const RecordedCall& c, Places& p) {
  switch (c.op) {
    case OpId::index_select: return index_select(c, p);
    case OpId::layer_norm_fwd: return layer_norm(c, p);
    case OpId::attention_fwd: return attention(c, p);
    case OpId::unary_fwd: return unary(c, p);
    case OpId::bmm: return bmm(c, p);
    case OpId::add: return add_strided(c, p);
    default: break;
  }
  STRATA_FAIL("strata_codegen: ", op_of(c), " is not a GPT call the cuda emitter writes out (internal error)");
}

const std::vector<Launcher>& transformer_launchers() {
  static const std::vector<Launcher> table = {
      {"index_select", {"index_select"}, {"strided_of"}, R"cg(
// y's rows = x's rows at the ids (each in [0, extent)), over strata's indexing of (x at the row's
// origin, the position, y).
void index_select(cudaStream_t s, int nd, int64_t n, const int64_t* sizes, const int64_t* s0, const int64_t* s1,
                  const int64_t* s2, const float* x, const int64_t* ids, int64_t id_stride, int64_t x_stride,
                  int64_t extent, float* y);
)cg", R"cg(
void index_select(cudaStream_t s, int nd, int64_t n, const int64_t* sizes, const int64_t* s0, const int64_t* s1,
                  const int64_t* s2, const float* x, const int64_t* ids, int64_t id_stride, int64_t x_stride,
                  int64_t extent, float* y) {
  if (n <= 0) return;
  // No error word: run() refuses ids out of range before any call, and the generator checked the
  // model's own indices (the positions), so the kernel never finds one.
  unsigned long long* const bad = nullptr;
  using K = IndexSelectK<float, int64_t>;
  elementwise_kernel<3, K><<<grid(n), kThreads, 0, s>>>(strided_of<3>(nd, n, sizes, {s0, s1, s2}),
                                                        K{x, y, ids, id_stride, x_stride, extent, bad});
  check_launch("elementwise_kernel (index_select)");
}
)cg"},
      {"add_strided", {"binary", "binary_strided"}, {"strided_of"}, R"cg(
// y = a + b over strata's indexing of (a, b, y), any strides (0 broadcasts).
void add_strided(cudaStream_t s, int nd, int64_t n, const int64_t* sizes, const int64_t* s0, const int64_t* s1,
                 const int64_t* s2, const float* a, const float* b, float* y);
)cg", R"cg(
void add_strided(cudaStream_t s, int nd, int64_t n, const int64_t* sizes, const int64_t* s0, const int64_t* s1,
                 const int64_t* s2, const float* a, const float* b, float* y) {
  if (n <= 0) return;
  using F = BinaryFn<float, AddOp<float>>;
  elementwise_kernel<3, F><<<grid(n), kThreads, 0, s>>>(strided_of<3>(nd, n, sizes, {s0, s1, s2}), F{a, b, y, {}});
  check_launch("elementwise_kernel (add)");
}
)cg"},
      {"layer_norm", {"chunk8", "layer_norm", "row_views"}, {}, R"cg(
// Layer norm over the n rows of x [n, c] in the form strata ran (`form`: the threads a row takes, 32
// or 256, or -K: a warp a row held in registers, K chunks of 256 columns a lane): each row's sums in
// that form's order. The grid only spreads the rows.
void layer_norm(cudaStream_t s, int form, const float* x, int64_t xs0, int64_t xs1, const float* w, int64_t sw,
                const float* b, int64_t sb, float* y, int64_t ys0, int64_t ys1, float* mean, int64_t sm, float* rstd,
                int64_t sr, int64_t n, int64_t c, double eps);
)cg", R"cg(
void layer_norm(cudaStream_t s, int form, const float* x, int64_t xs0, int64_t xs1, const float* w, int64_t sw,
                const float* b, int64_t sb, float* y, int64_t ys0, int64_t ys1, float* mean, int64_t sm, float* rstd,
                int64_t sr, int64_t n, int64_t c, double eps) {
  if (n <= 0) return;
  const View2<const float> xv{x, xs0, xs1};
  const View2<float> yv{y, ys0, ys1};
  const bool xvec = chunk8_vectorizable<float>(x, xs0, xs1), yvec = chunk8_vectorizable<float>(y, ys0, ys1);
  const bool wvec = w && chunk8_vectorizable<float>(w, 0, sw), bvec = b && chunk8_vectorizable<float>(b, 0, sb);
  const auto blocks = [&](int64_t threads) {
    return static_cast<unsigned>(std::clamp<int64_t>((n * threads + kThreads - 1) / kThreads, 1, 4096));
  };
  // G threads a row; or a warp a row holding K chunks of 256 columns a lane in registers.
  const auto launch = [&](auto g) {
    constexpr int G = decltype(g)::value;
    layer_norm_fwd_kernel<G, float, float><<<blocks(G), kThreads, 0, s>>>(xv, xvec, w, sw, wvec, b, sb, bvec, yv, yvec,
                                                                        mean, sm, rstd, sr, n, c, eps);
  };
  const auto rows = [&](auto k) {
    constexpr int K = decltype(k)::value;
    layer_norm_fwd_rows_kernel<K, float, float><<<blocks(32), kThreads, 0, s>>>(xv, w, sw, wvec, b, sb, bvec, yv, mean,
                                                                              sm, rstd, sr, n, c, eps);
  };
  switch (form) {
    case 32: launch(std::integral_constant<int, 32>{}); break;
    case kThreads: launch(std::integral_constant<int, kThreads>{}); break;
    case -1: rows(std::integral_constant<int, 1>{}); break;
    case -2: rows(std::integral_constant<int, 2>{}); break;
    case -3: rows(std::integral_constant<int, 3>{}); break;
    case -4: rows(std::integral_constant<int, 4>{}); break;
    default: throw std::runtime_error("layer_norm: unknown form " + std::to_string(form));
  }
  check_launch("layer_norm_fwd_kernel");
}
)cg"},
      {"attention", {"attention", "row_views"}, {}, R"cg(
// Attention over q, k, v [B, H, T, D] (any strides) into y and the rows' log-sum-exp: strata's
// whole-row kernel, a block of `threads` per query (which orders the row's sums), `smem` bytes of
// dynamic shared memory, as strata launched it.
void attention(cudaStream_t s, int threads, int64_t smem, const float* q, const int64_t (&qs)[4], const float* k,
               const int64_t (&ks)[4], const float* v, const int64_t (&vs)[4], float* y, const int64_t (&ys)[4],
               float* lse, const int64_t (&ls)[3], int64_t B, int64_t H, int64_t tq, int64_t tk, int64_t D,
               bool causal, double scale);
)cg", R"cg(
void attention(cudaStream_t s, int threads, int64_t smem, const float* q, const int64_t (&qs)[4], const float* k,
               const int64_t (&ks)[4], const float* v, const int64_t (&vs)[4], float* y, const int64_t (&ys)[4],
               float* lse, const int64_t (&ls)[3], int64_t B, int64_t H, int64_t tq, int64_t tk, int64_t D,
               bool causal, double scale) {
  const int64_t rows = B * H * tq;
  if (rows == 0) return;
  auto kernel = attention_fwd_kernel<float, float>;
  if (smem > 48 * 1024 &&
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)) != cudaSuccess)
    throw std::runtime_error("attention: " + std::to_string(smem) + " bytes of shared memory are not available");
  const auto v4c = [](const float* p, const int64_t (&st)[4]) {
    return View4<const float>{p, st[0], st[1], st[2], st[3]};
  };
  kernel<<<static_cast<unsigned>(rows), threads, static_cast<size_t>(smem), s>>>(
      v4c(q, qs), v4c(k, ks), v4c(v, vs), View4<float>{y, ys[0], ys[1], ys[2], ys[3]},
      View3<float>{lse, ls[0], ls[1], ls[2]}, AttnShape{B, H, tq, tk, D, causal, nullptr}, scale);
  check_launch("attention_fwd_kernel");
}
)cg"},
      // Element by element where strata may have packed four elements a thread (the unary record's
      // mode 1): the packing changes which thread computes an element, not how. Each element is
      // UnaryFunctor<gelu_tanh>::fwd's expression, the same pointwise.def row, in float with the
      // device library's tanhf, stored as float; both are compiled by nvcc with its default
      // --fmad=true and neither with --use_fast_math, so the same products and sums are contracted
      // into FMAs. The bits are strata's when the program is built with the toolkit strata was built
      // with (another toolkit's tanhf or contraction may differ); not yet compared on a GPU.
      {"gelu_tanh", {"gelu"}, {}, R"cg(
// y = GELU(x) (tanh form) over n dense elements: strata's row of its formulas, element by element.
void gelu_tanh(cudaStream_t s, const float* x, float* y, int64_t n, double p0, double p1);
)cg", R"cg(
__global__ void __launch_bounds__(kThreads) gelu_tanh_kernel(const float* x, float* y, int64_t n, double p0,
                                                             double p1) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    y[i] = store<float>(pointwise::gelu_tanh(load(x[i]), p0, p1));
}

void gelu_tanh(cudaStream_t s, const float* x, float* y, int64_t n, double p0, double p1) {
  if (n <= 0) return;
  gelu_tanh_kernel<<<grid(n), kThreads, 0, s>>>(x, y, n, p0, p1);
  check_launch("gelu_tanh_kernel");
}
)cg"},
  };
  return table;
}

}  // namespace strata::codegen::cuda
