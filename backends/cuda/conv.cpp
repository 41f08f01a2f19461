// conv2d forward, backward-data and backward-weight on cuDNN's convolution API.
// Each shape key gets a plan once: descriptors, the algorithm (heuristics, or
// cudnnFind*Ex timing in benchmark mode), its math type and workspace size. The
// workspace comes from the context's shared arena. Operands are used in place when
// dense in the call's layout (that of x, or dy for backward-data); anything else
// (a weight in the other layout, a strided view) is staged through a temporary.
#include <string>

#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/conv_graph.h"
#include "strata/backends/cuda/cudnn_util.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

enum class ConvKind : int64_t { fwd = 2001, bwd_data = 2002, bwd_weight = 2003 };

struct ConvPlan : Plan {
  TensorDesc x, y;  // input side, output side (dx and dy for the backward passes)
  FilterDesc w;
  ConvDesc conv;
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t ws = 0;
  std::string unusable;  // why no algorithm fits (then the op retries in NCHW, or fails)
};

// A direction's operands in cuDNN's roles: the input side x (x, or dx for backward-data),
// the filter w (w, or dw for backward-weight) and the output side y (y, or dy for the
// backward passes). One of them is what the direction writes.
enum class Role { x, w, y };

// The three directions differ only in which cuDNN functions they call and which
// operand they write.
struct FwdOps {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static constexpr const char* kName = "conv2d_fwd";
  static constexpr ConvKind kKind = ConvKind::fwd;
  static constexpr ConvDir kDir = ConvDir::fwd;
  static constexpr Role kWrites = Role::y;
  static cudnnStatus_t heuristics(cudnnHandle_t h, ConvPlan& p, int* n, Perf* r) {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, p.x.get(), p.w.get(), p.conv.get(), p.y.get(), kCount, n, r);
  }
  static cudnnStatus_t find(cudnnHandle_t h, ConvPlan& p, void* x, void* w, void* y, int* n, Perf* r, void* ws,
                            size_t wsz) {
    return cudnnFindConvolutionForwardAlgorithmEx(h, p.x.get(), x, p.w.get(), w, p.conv.get(), p.y.get(), y, kCount,
                                                  n, r, ws, wsz);
  }
  static cudnnStatus_t ws_size(cudnnHandle_t h, ConvPlan& p, int algo, size_t* s) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, p.x.get(), p.w.get(), p.conv.get(), p.y.get(),
                                                   static_cast<cudnnConvolutionFwdAlgo_t>(algo), s);
  }
  static void run(cudnnHandle_t h, const ConvPlan& p, const Scalars& s, void* ws, void* x, void* w, void* y) {
    STRATA_CUDNN_CHECK(cudnnConvolutionForward(h, s.one(), p.x.get(), x, p.w.get(), w, p.conv.get(),
                                               static_cast<cudnnConvolutionFwdAlgo_t>(p.algo), ws, p.ws, s.zero(),
                                               p.y.get(), y));
  }
};
struct BwdDataOps {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static constexpr const char* kName = "conv2d_bwd_data";
  static constexpr ConvKind kKind = ConvKind::bwd_data;
  static constexpr ConvDir kDir = ConvDir::bwd_data;
  static constexpr Role kWrites = Role::x;
  static cudnnStatus_t heuristics(cudnnHandle_t h, ConvPlan& p, int* n, Perf* r) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w.get(), p.y.get(), p.conv.get(), p.x.get(), kCount, n,
                                                       r);
  }
  static cudnnStatus_t find(cudnnHandle_t h, ConvPlan& p, void* x, void* w, void* y, int* n, Perf* r, void* ws,
                            size_t wsz) {
    return cudnnFindConvolutionBackwardDataAlgorithmEx(h, p.w.get(), w, p.y.get(), y, p.conv.get(), p.x.get(), x,
                                                       kCount, n, r, ws, wsz);
  }
  static cudnnStatus_t ws_size(cudnnHandle_t h, ConvPlan& p, int algo, size_t* s) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w.get(), p.y.get(), p.conv.get(), p.x.get(),
                                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), s);
  }
  static void run(cudnnHandle_t h, const ConvPlan& p, const Scalars& s, void* ws, void* x, void* w, void* y) {
    STRATA_CUDNN_CHECK(cudnnConvolutionBackwardData(h, s.one(), p.w.get(), w, p.y.get(), y, p.conv.get(),
                                                    static_cast<cudnnConvolutionBwdDataAlgo_t>(p.algo), ws, p.ws,
                                                    s.zero(), p.x.get(), x));
  }
};
struct BwdFilterOps {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static constexpr const char* kName = "conv2d_bwd_weight";
  static constexpr ConvKind kKind = ConvKind::bwd_weight;
  static constexpr ConvDir kDir = ConvDir::bwd_weight;
  static constexpr Role kWrites = Role::w;
  static cudnnStatus_t heuristics(cudnnHandle_t h, ConvPlan& p, int* n, Perf* r) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x.get(), p.y.get(), p.conv.get(), p.w.get(), kCount,
                                                         n, r);
  }
  static cudnnStatus_t find(cudnnHandle_t h, ConvPlan& p, void* x, void* w, void* y, int* n, Perf* r, void* ws,
                            size_t wsz) {
    return cudnnFindConvolutionBackwardFilterAlgorithmEx(h, p.x.get(), x, p.y.get(), y, p.conv.get(), p.w.get(), w,
                                                         kCount, n, r, ws, wsz);
  }
  static cudnnStatus_t ws_size(cudnnHandle_t h, ConvPlan& p, int algo, size_t* s) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x.get(), p.y.get(), p.conv.get(), p.w.get(),
                                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), s);
  }
  static void run(cudnnHandle_t h, const ConvPlan& p, const Scalars& s, void* ws, void* x, void* w, void* y) {
    STRATA_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, s.one(), p.x.get(), x, p.y.get(), y, p.conv.get(),
                                                      static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.algo), ws, p.ws,
                                                      s.zero(), p.w.get(), w));
  }
};

// f32 without TF32 must stay on FMA units: cuDNN's default math type would allow
// TF32 tensor cores on sm_80+ (as PyTorch does for allow_tf32=False, use FMA math).
bool fma_only(DType dt, const Settings& s) { return dt == DType::f32 && !s.allow_tf32; }

cudnnMathType_t base_math(DType dt, const Settings& s) {
  if (fma_only(dt, s)) return CUDNN_FMA_MATH;
  if (dt == DType::f16 || dt == DType::bf16) return CUDNN_TENSOR_OP_MATH;
  return CUDNN_DEFAULT_MATH;
}

template <class Ops>
bool acceptable(const typename Ops::Perf& r, DType dt, const Settings& s) {
  if (r.status != CUDNN_STATUS_SUCCESS) return false;
  if (s.deterministic && r.determinism != CUDNN_DETERMINISTIC) return false;
  if (r.memory > s.max_workspace_bytes) return false;
  if (fma_only(dt, s) && r.mathType != CUDNN_FMA_MATH && r.mathType != CUDNN_DEFAULT_MATH) return false;
  return true;
}

std::string conv_shapes(const TensorView& x, const TensorView& w, const TensorView& y) {
  return std::string(dtype_name(x.dtype)) + " x " + x.sizes.str() + ", w " + w.sizes.str() + ", y " + y.sizes.str();
}

template <class Ops>
void choose_algo(Context& ctx, ConvPlan& p, DType dt, const Settings& s, void* x, void* w, void* y,
                 const std::string& shapes) {
  typename Ops::Perf res[Ops::kCount];
  int n = 0;
  const cudnnStatus_t hs = Ops::heuristics(ctx.cudnn, p, &n, res);
  if (hs != CUDNN_STATUS_SUCCESS) {
    p.unusable = strata::detail::concat(Ops::kName, ": cuDNN's algorithm heuristics failed for ", shapes, ": ",
                                cudnnGetErrorString(hs));
    return;
  }
  if (s.benchmark) {
    // Time the candidates on the real buffers (outputs are about to be overwritten
    // anyway) with as much workspace as the largest acceptable candidate wants.
    size_t ws = 0;
    for (int i = 0; i < n; ++i)
      if (acceptable<Ops>(res[i], dt, s) && res[i].memory > ws) ws = res[i].memory;
    void* wsp = ws ? ctx.workspace(ws) : nullptr;
    typename Ops::Perf timed[Ops::kCount];
    int m = 0;
    const cudnnStatus_t fs = Ops::find(ctx.cudnn, p, x, w, y, &m, timed, wsp, ws);
    if (fs != CUDNN_STATUS_SUCCESS) {
      p.unusable = strata::detail::concat(Ops::kName, ": cudnnFind for ", shapes, " failed: ", cudnnGetErrorString(fs));
      return;
    }
    for (int i = 0; i < m; ++i) res[i] = timed[i];
    n = m;
  }
  for (int i = 0; i < n; ++i) {
    if (!acceptable<Ops>(res[i], dt, s)) continue;
    const cudnnMathType_t math = fma_only(dt, s) ? CUDNN_FMA_MATH : res[i].mathType;
    STRATA_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), math));
    size_t ws = 0;
    if (Ops::ws_size(ctx.cudnn, p, static_cast<int>(res[i].algo), &ws) != CUDNN_STATUS_SUCCESS) continue;
    p.algo = static_cast<int>(res[i].algo);
    p.math = math;
    p.ws = std::max(ws, res[i].memory);
    return;
  }
  p.unusable = strata::detail::concat(Ops::kName, ": cuDNN offers no algorithm for ", shapes,
                              s.deterministic ? " that is deterministic" : "", " within a workspace of ",
                              s.max_workspace_bytes, " bytes", fma_only(dt, s) ? " without TF32" : "");
}

PlanKey conv_key(ConvKind kind, const TensorView& x, const TensorView& w, const TensorView& y, Layout l,
                 const Conv2dParams& p, const Settings& s) {
  PlanKey k;
  k.add(static_cast<int64_t>(kind)).add(static_cast<int64_t>(l)).add(static_cast<int64_t>(x.dtype));
  k.add(x.sizes).add(w.sizes).add(y.sizes);
  k.add(p.stride_h).add(p.stride_w).add(p.pad_h).add(p.pad_w).add(p.dilation_h).add(p.dilation_w).add(p.groups);
  k.add(s.allow_tf32).add(s.deterministic).add(s.benchmark).add(static_cast<int64_t>(s.max_workspace_bytes));
  return k;
}

template <class Ops>
ConvPlan& conv_plan(Context& ctx, const TensorView& x, const TensorView& w, const TensorView& y, Layout l,
                    const Conv2dParams& cp, const Settings& s) {
  return ctx.plan<ConvPlan>(conv_key(Ops::kKind, x, w, y, l, cp, s), [&] {
    auto p = std::make_unique<ConvPlan>();
    p->x.set(x, Ops::kName);
    p->y.set(y, Ops::kName);
    p->w.set(w, l, Ops::kName);
    const cudnnDataType_t compute = x.dtype == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    STRATA_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv.get(), cp.pad_h, cp.pad_w, cp.stride_h, cp.stride_w,
                                                       cp.dilation_h, cp.dilation_w, CUDNN_CROSS_CORRELATION,
                                                       compute));
    STRATA_CUDNN_CHECK(cudnnSetConvolutionGroupCount(p->conv.get(), cp.groups));
    STRATA_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv.get(), base_math(x.dtype, s)));
    choose_algo<Ops>(ctx, *p, x.dtype, s, x.data, w.data, y.data, conv_shapes(x, w, y));
    return p;
  });
}

}  // namespace
}  // namespace cuda

using namespace cuda;

namespace {

// The graph API first (cached execution plans; in benchmark mode the engines are
// timed there too); "" when the graph path ran the convolution.
std::string try_graph(Context& ctx, ConvDir dir, const TensorView& x, const TensorView& w, const TensorView& y,
                      Layout l, const Conv2dParams& p, const Settings& st) {
  if (!st.cudnn_graph) return "graph API off";
  return graph_conv(ctx, dir, x, w, y, l, p, st);
}

// Runs `f(layout)`; a layout cuDNN has no algorithm for (NHWC for some f32 shapes)
// falls back to NCHW through staged copies. `f` returns "" or why it could not run.
template <class F>
void with_layout_fallback(Context& ctx, Layout l, F&& f) {
  const std::string why = f(l);
  if (why.empty()) return;
  if (l == Layout::nhwc) {
    ++ctx.layout_fallbacks;
    if (f(Layout::nchw).empty()) return;
  }
  STRATA_FAIL(why);
}

// One direction on its operands in their roles (x, w, y; see Role), staged into layout l:
// the ones it reads staged in, the one it writes staged out and finished after the call.
// The forward direction applies its bias and inference epilogue `e` (op_args.h) to its
// output before finishing it: inside the cuDNN graph when an engine runs the fused graph
// under the engine policy (conv_graph.h), otherwise as one strata kernel after the
// convolution. A bias alone asks for the fused graph too (a downsampling convolution's
// folded batch norm: its own pass over y cost more than the convolution).
template <class Ops>
std::string run_conv_in_layout(Context& ctx, const TensorView& x, const TensorView& w, const TensorView& y,
                    const GraphEpilogue& e, Layout l, const Conv2dParams& cp, const Settings& st) {
  auto stage = [&](const TensorView& v, Role r) {
    return r == Ops::kWrites ? stage_out(ctx, v, l) : stage_in(ctx, v, l);
  };
  Staged sx = stage(x, Role::x), sw = stage(w, Role::w), sy = stage(y, Role::y);
  Staged& out = Ops::kWrites == Role::x ? sx : (Ops::kWrites == Role::w ? sw : sy);
  if (sx.temp || sw.temp || sy.temp) observe_library(LibraryCall::Kind::staged);
  const bool epilogue = e.bias.defined || e.z.defined || e.relu;
  if (epilogue && st.cudnn_graph && st.cudnn_fused_epilogue &&
      graph_conv(ctx, Ops::kDir, sx.view, sw.view, sy.view, l, cp, st, &e).empty()) {
    out.finish(ctx);
    return {};
  }
  if (!try_graph(ctx, Ops::kDir, sx.view, sw.view, sy.view, l, cp, st).empty()) {
    ConvPlan& p = conv_plan<Ops>(ctx, sx.view, sw.view, sy.view, l, cp, st);
    if (!p.unusable.empty()) return p.unusable;
    void* ws = p.ws ? ctx.workspace(p.ws) : nullptr;
    if (observing())
      observe_library({.kind = LibraryCall::Kind::conv_legacy, .workspace = static_cast<int64_t>(p.ws), .algo = p.algo,
                       .math = static_cast<int>(p.math)});
    Ops::run(ctx.cudnn, p, Scalars(x.dtype), ws, sx.view.data, sw.view.data, sy.view.data);
    ++ctx.legacy_convs;
  }
  if (epilogue) {
    observe_library(LibraryCall::Kind::conv_epilogue);
    conv_epilogue(ctx, out.view, e.bias, e.z, e.relu);
    ++ctx.epilogue_kernels;
  }
  out.finish(ctx);
  return {};
}

}  // namespace

// Activations past cuDNN's 32-bit limits run as several calls along the batch (cudnn_util.h);
// backward-weight sums the pieces' weight gradients.
void CudaBackend::conv2d_fwd(const Conv2dFwdArgs& a) {
  observe_call(OpId::conv2d_fwd, a);
  if (a.y.numel() == 0) return;
  const auto run = [&](Conv2dFwdArgs& b, int64_t n0) {
    if (n0 > 0) observe_library(LibraryCall::Kind::split);
    with_layout_fallback(*ctx_, layout_of(b.x), [&](Layout l) {
      return run_conv_in_layout<FwdOps>(*ctx_, b.x, b.w, b.y, GraphEpilogue{b.b, b.z, b.relu}, l, b.p, settings_);
    });
  };
  if (a.z.defined)
    along_batch("conv2d_fwd", a, {{&Conv2dFwdArgs::x, "x"}, {&Conv2dFwdArgs::y, "y"}, {&Conv2dFwdArgs::z, "z"}},
                run);
  else
    along_batch("conv2d_fwd", a, {{&Conv2dFwdArgs::x, "x"}, {&Conv2dFwdArgs::y, "y"}}, run);
}

void CudaBackend::conv2d_bwd_data(const Conv2dBwdDataArgs& a) {
  observe_call(OpId::conv2d_bwd_data, a);
  if (a.dx.numel() == 0) return;
  along_batch("conv2d_bwd_data", a, {{&Conv2dBwdDataArgs::dy, "dy"}, {&Conv2dBwdDataArgs::dx, "dx"}},
              [&](Conv2dBwdDataArgs& b, int64_t n0) {
                if (n0 > 0) observe_library(LibraryCall::Kind::split);
                with_layout_fallback(*ctx_, layout_of(b.dy), [&](Layout l) {
                  return run_conv_in_layout<BwdDataOps>(*ctx_, b.dx, b.w, b.dy, GraphEpilogue{}, l, b.p, settings_);
                });
              });
}

void CudaBackend::conv2d_bwd_weight(const Conv2dBwdWeightArgs& a) {
  observe_call(OpId::conv2d_bwd_weight, a);
  if (a.dw.numel() == 0) return;
  if (a.x.numel() == 0) return fill_view(*ctx_, a.dw, 0.0);
  DeviceBuffer piece_buf;
  TensorView piece;
  along_batch("conv2d_bwd_weight", a, {{&Conv2dBwdWeightArgs::x, "x"}, {&Conv2dBwdWeightArgs::dy, "dy"}},
              [&](Conv2dBwdWeightArgs& b, int64_t n0) {
                if (n0 > 0) {
                  observe_library(LibraryCall::Kind::split);
                  if (!piece.defined) piece = make_temp(*ctx_, piece_buf, a.dw.sizes, a.dw.dtype, layout_of(a.dw));
                  b.dw = piece;
                }
                with_layout_fallback(*ctx_, layout_of(b.x), [&](Layout l) {
                  return run_conv_in_layout<BwdFilterOps>(*ctx_, b.x, b.dw, b.dy, GraphEpilogue{}, l, b.p, settings_);
                });
                if (n0 > 0) add_into(*ctx_, a.dw, piece);
              });
}

}  // namespace strata::backends
