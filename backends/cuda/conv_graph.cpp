#include "strata/backends/cuda/conv_graph.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/cudnn_util.h"

namespace strata::backends::cuda {

using namespace strata::ops;  // the op table's argument types

namespace {

using Desc = GraphDesc;

constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y', kUidB = 'b', kUidZ = 'z';
// The epilogue's intermediates: virtual tensors that never reach memory.
constexpr int64_t kUidVirtual = 1000;

int64_t alignment_of(const void* p) { return byte_alignment(p); }

// virtual: an intermediate of the graph, in f32, that no kernel writes to memory.
Desc tensor_desc(const TensorView& v, int64_t uid, bool is_virtual = false) {
  const cudnnDataType_t dt = is_virtual ? CUDNN_DATA_FLOAT : cudnn_dtype(v.dtype, "conv2d");
  int64_t dims[4], strides[4];
  for (int i = 0; i < 4; ++i) {
    dims[i] = v.sizes[i];
    // cuDNN rejects zero strides; a size-1 dimension's stride is arbitrary anyway.
    strides[i] = (dims[i] == 1 && v.strides[i] == 0) ? 1 : v.strides[i];
  }
  return graph_tensor(dt, dims, strides, uid, alignment_of(v.data), is_virtual);
}

// The bias [K] as the graph's [1, K, 1, 1] operand, broadcast over N, H and W.
TensorView bias_4d(const TensorView& b) {
  TensorView v = b;
  const int64_t k = b.sizes[0], st = b.strides[0];
  v.sizes = Shape{1, k, 1, 1};
  v.strides = Shape{k * st, st, st, st};
  return v;
}

// A pointwise node y = mode(x[, b]) of the epilogue, computed in f32.
Desc pointwise_op(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y, std::vector<Desc>& keep) {
  Desc pw = pointwise_mode(mode);
  Desc op = pointwise_node(pw, x, b, nullptr, y);
  keep.push_back(std::move(pw));
  return op;
}

// The buffers one execution binds, by unique id: x, w, y and the epilogue's.
struct Bound {
  int64_t n = 0;
  void* ptrs[5];
  int64_t uids[5];
  void add(int64_t uid, void* p) {
    uids[n] = uid;
    ptrs[n++] = p;
  }
};
Bound bound(const TensorView& x, const TensorView& w, const TensorView& y, const GraphEpilogue* e) {
  Bound b;
  b.add(kUidX, x.data);
  b.add(kUidW, w.data);
  b.add(kUidY, y.data);
  if (e && e->bias.defined) b.add(kUidB, e->bias.data);
  if (e && e->z.defined) b.add(kUidZ, e->z.data);
  return b;
}

struct GraphPlan : Plan {
  std::vector<Desc> keep;  // everything the execution plan refers to
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t ws = 0;
  std::string unusable;
  cudnnBackendDescriptor_t cfg = nullptr;  // the chosen engine config (in keep)
  bool fused = false;
  // The chosen engine as a code generator recreates it (call_observer.h), read from cfg when a
  // call is first observed: nothing is read where nobody watches.
  LibraryCall chosen;
};

// The engine config's engine index and knob choices: what names an engine config within
// one cuDNN version, so that a program built without strata can ask for the same one.
LibraryCall engine_choice(cudnnBackendDescriptor_t cfg, int64_t ws) {
  LibraryCall c;
  c.kind = LibraryCall::Kind::conv_graph;
  c.workspace = ws;
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0;
  STRATA_CUDNN_CHECK(
      cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e));
  STRATA_CUDNN_CHECK(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &c.engine));
  std::vector<Desc> knobs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
    knobs.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    raw.push_back(knobs.back().get());
  }
  STRATA_CUDNN_CHECK(cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                              static_cast<int64_t>(raw.size()), &n, raw.data()));
  for (int64_t i = 0; i < n; ++i) {
    cudnnBackendKnobType_t type{};
    int64_t value = 0, got = 0;
    STRATA_CUDNN_CHECK(cudnnBackendGetAttribute(raw[static_cast<size_t>(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                                CUDNN_TYPE_KNOB_TYPE, 1, &got, &type));
    STRATA_CUDNN_CHECK(cudnnBackendGetAttribute(raw[static_cast<size_t>(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                                CUDNN_TYPE_INT64, 1, &got, &value));
    c.knobs.emplace_back(static_cast<int64_t>(type), value);
  }
  return c;
}

template <class T>
bool has_note(cudnnBackendDescriptor_t engine, cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type,
              T note) {
  std::array<T, 16> notes{};
  int64_t n = 0;
  if (cudnnBackendGetAttribute(engine, attr, type, static_cast<int64_t>(notes.size()), &n, notes.data()) !=
      CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < n; ++i)
    if (notes[static_cast<size_t>(i)] == note) return true;
  return false;
}

// Why this engine config is not acceptable ("" if it is), with the same policy as the
// legacy path and PyTorch: deterministic engines only when asked, no down-converted
// inputs, no tensor cores for f32 unless TF32 is allowed; and no engines that compile
// kernels at run time (their first call takes seconds and needs NVRTC on the host).
std::string rejected(cudnnBackendDescriptor_t cfg, DType dt, const Settings& s) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) !=
      CUDNN_STATUS_SUCCESS)
    return "engine unreadable";
  const auto numerical = [&](cudnnBackendNumericalNote_t note) {
    return has_note(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, note);
  };
  if (s.deterministic && numerical(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)) return "nondeterministic";
  if (numerical(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)) return "down-converts inputs";
  if (dt == DType::f32 && !s.allow_tf32 && numerical(CUDNN_NUMERICAL_NOTE_TENSOR_CORE)) return "TF32 tensor cores";
  if (has_note(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION))
    return "runtime compilation";
  return {};
}

// The three directions are one operation with different attribute names.
struct OpAttrs {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};
constexpr OpAttrs kOpAttrs[3] = {
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
};

PlanKey graph_key(ConvDir dir, const TensorView& x, const TensorView& w, const TensorView& y,
                  const ops::Conv2dParams& p, const Settings& s, const GraphEpilogue* e) {
  PlanKey k;
  k.add(3000 + static_cast<int64_t>(dir)).add(static_cast<int64_t>(x.dtype));
  const TensorView none;
  const TensorView b = e && e->bias.defined ? bias_4d(e->bias) : none;
  const TensorView& z = e ? e->z : none;
  for (const TensorView* v : {&x, &w, &y, &b, &z}) {
    if (!v->defined) {
      k.add(-1);
      continue;
    }
    for (int i = 0; i < 4; ++i) k.add(v->sizes[i]);
    for (int i = 0; i < 4; ++i) k.add(v->strides[i]);
    k.add(alignment_of(v->data));
  }
  k.add(e != nullptr).add(e && e->relu);
  k.add(p.stride_h).add(p.stride_w).add(p.pad_h).add(p.pad_w).add(p.dilation_h).add(p.dilation_w);
  k.add(s.allow_tf32).add(s.deterministic).add(s.benchmark).add(static_cast<int64_t>(s.max_workspace_bytes));
  return k;
}

void execute(Context& ctx, cudnnBackendDescriptor_t plan, int64_t ws_bytes, const Bound& b) {
  void* ws = ws_bytes ? ctx.workspace(static_cast<size_t>(ws_bytes)) : nullptr;
  execute_graph(ctx, plan, ws, b.n, b.ptrs, b.uids);
}

// One untimed run (first-launch costs), then the best of three timed runs.
float time_plan(Context& ctx, cudnnBackendDescriptor_t plan, int64_t ws, const Bound& bufs) {
  cudaEvent_t a, b;
  STRATA_CUDA_CHECK(cudaEventCreate(&a));
  STRATA_CUDA_CHECK(cudaEventCreate(&b));
  execute(ctx, plan, ws, bufs);
  float best = std::numeric_limits<float>::max();
  for (int r = 0; r < 3; ++r) {
    STRATA_CUDA_CHECK(cudaEventRecord(a, ctx.stream));
    execute(ctx, plan, ws, bufs);
    STRATA_CUDA_CHECK(cudaEventRecord(b, ctx.stream));
    STRATA_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    STRATA_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    best = std::min(best, ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

std::unique_ptr<GraphPlan> build(Context& ctx, ConvDir dir, const TensorView& x, const TensorView& w,
                                 const TensorView& y, const ops::Conv2dParams& cp, const Settings& s,
                                 const GraphEpilogue* e) {
  auto g = std::make_unique<GraphPlan>();
  auto& keep = g->keep;
  keep.reserve(32);  // dx/dw/dy and the epilogue's tensors below are references into it
  keep.push_back(tensor_desc(x, kUidX));
  keep.push_back(tensor_desc(w, kUidW));
  keep.push_back(tensor_desc(y, kUidY));
  const Desc &dx = keep[0], &dw = keep[1], &y_mem = keep[2];
  // With an epilogue the convolution writes a virtual tensor and the chain of pointwise
  // nodes after it writes y: conv -> [+ bias] -> [+ z] -> [relu] -> y.
  int steps = 0;
  if (e) steps = int{e->bias.defined} + int{e->z.defined} + int{e->relu};
  int64_t next_virtual = kUidVirtual;
  const auto out_of = [&](int remaining) -> const Desc& {
    if (remaining == 0) return y_mem;
    keep.push_back(tensor_desc(y, next_virtual++, true));
    return keep.back();
  };
  const Desc& dy = out_of(steps);

  Desc conv = conv_descriptor(cp);

  const float alpha = 1.f, beta = 0.f;
  const OpAttrs& at = kOpAttrs[static_cast<int>(dir)];
  auto op = std::make_unique<Desc>(at.type);
  op->set_desc(at.x, dx)
      .set_desc(at.w, dw)
      .set_desc(at.y, dy)
      .set_desc(at.conv, conv)
      .set(at.alpha, CUDNN_TYPE_FLOAT, 1, &alpha)
      .set(at.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  op->finalize();

  std::vector<Desc> chain;  // the epilogue's pointwise nodes, in order
  if (e) {
    const Desc* cur = &dy;
    int left = steps;
    const auto step = [&](cudnnPointwiseMode_t mode, const Desc* operand) {
      const Desc& out = out_of(--left);
      chain.push_back(pointwise_op(mode, *cur, operand, out, keep));
      cur = &out;
    };
    // The residual before the bias: in this order cuDNN's pre-compiled engines run the
    // whole graph on sm_90 (bias first, only runtime-compiled engines took it, which the
    // policy rejects: docs/results/gpu_fused_eval.md, "The residual before the bias").
    if (e->z.defined) {
      keep.push_back(tensor_desc(e->z, kUidZ));
      step(CUDNN_POINTWISE_ADD, &keep.back());
    }
    if (e->bias.defined) {
      keep.push_back(tensor_desc(bias_4d(e->bias), kUidB));
      step(CUDNN_POINTWISE_ADD, &keep.back());
    }
    if (e->relu) step(CUDNN_POINTWISE_RELU_FWD, nullptr);
  }

  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  std::vector<cudnnBackendDescriptor_t> ops_list{op->get()};
  for (const Desc& d : chain) ops_list.push_back(d.get());
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops_list.size()),
            ops_list.data())
      .set(kGraphHandle, CUDNN_TYPE_HANDLE, 1, &ctx.cudnn);
  graph.finalize();

  // Candidates in heuristic order: the first acceptable one, or in benchmark mode up
  // to kMaxTimed of them, timed on the call's own buffers (outputs are about to be
  // overwritten anyway), as cudnnFind does for the legacy API.
  constexpr size_t kMaxTimed = 8;
  std::string tried;
  std::vector<GraphCandidate> found =
      graph_candidates(ctx, graph, s.benchmark ? kMaxTimed : 1, s.max_workspace_bytes,
                       [&](cudnnBackendDescriptor_t cfg) { return rejected(cfg, x.dtype, s); }, tried);
  if (found.empty()) {
    g->unusable = "cuDNN graph API: no acceptable engine (" + (tried.empty() ? std::string("none offered") : tried) +
                  ")";
    return g;
  }
  size_t best = 0;
  if (found.size() > 1) {
    std::vector<float> ms(found.size());
    const Bound bufs = bound(x, w, y, e);
    for (size_t i = 0; i < found.size(); ++i) ms[i] = time_plan(ctx, found[i].plan.get(), found[i].ws, bufs);
    best = static_cast<size_t>(std::min_element(ms.begin(), ms.end()) - ms.begin());
  }
  g->ws = found[best].ws;
  g->plan = found[best].plan.get();
  g->cfg = found[best].cfg.get();
  g->fused = e != nullptr;
  keep.push_back(std::move(conv));
  keep.push_back(std::move(*op));
  for (Desc& d : chain) keep.push_back(std::move(d));
  keep.push_back(std::move(graph));
  keep.push_back(std::move(found[best].cfg));
  keep.push_back(std::move(found[best].plan));
  return g;
}

}  // namespace

GraphDesc conv_descriptor(const ops::Conv2dParams& p) {
  GraphDesc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  const int64_t pad[2] = {p.pad_h, p.pad_w}, stride[2] = {p.stride_h, p.stride_w},
                dil[2] = {p.dilation_h, p.dilation_w};
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims)
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad)
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad)
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
  conv.finalize();
  return conv;
}

GraphDesc graph_tensor(cudnnDataType_t dt, const int64_t (&dims)[4], const int64_t (&strides)[4], int64_t uid,
                       int64_t align, bool is_virtual, bool by_value) {
  GraphDesc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims)
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  if (is_virtual) d.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  if (by_value) d.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
  d.finalize();
  return d;
}

GraphDesc pointwise_mode(cudnnPointwiseMode_t mode, cudnnDataType_t prec, int64_t axis) {
  GraphDesc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
  if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
  pw.finalize();
  return pw;
}

GraphDesc pointwise_node(const GraphDesc& pw, const GraphDesc& x, const GraphDesc* b, const GraphDesc* t,
                         const GraphDesc& y) {
  GraphDesc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  if (b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  if (t) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
  op.finalize();
  return op;
}

std::vector<GraphCandidate> graph_candidates(Context& ctx, const GraphDesc& graph, size_t want, size_t max_ws,
                                             const std::function<std::string(cudnnBackendDescriptor_t)>& reject,
                                             std::string& tried) {
  std::vector<GraphCandidate> found;
  const auto note = [&](const std::string& why) { tried += (tried.empty() ? "" : "; ") + why; };
  for (cudnnBackendHeurMode_t mode_h : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    if (!found.empty()) break;
    GraphDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode_h);
    if (cudnnBackendFinalize(heur.get()) != CUDNN_STATUS_SUCCESS) continue;
    int64_t count = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr) != CUDNN_STATUS_SUCCESS)
      continue;
    std::vector<GraphDesc> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(cfgs.back().get());
    }
    int64_t got = 0;
    if (count == 0 || cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()) !=
                          CUDNN_STATUS_SUCCESS)
      continue;
    for (size_t i = 0; i < static_cast<size_t>(got) && found.size() < want; ++i) {
      const std::string why = reject(raw[i]);
      if (!why.empty()) {
        note(why);
        continue;
      }
      GraphDesc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(kPlanHandle, CUDNN_TYPE_HANDLE, 1, &ctx.cudnn)
          .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[i]);
      if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS) {
        note("plan not buildable");
        continue;
      }
      int64_t ws = 0, n = 0;
      STRATA_CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                  CUDNN_TYPE_INT64, 1, &n, &ws));
      if (ws < 0 || static_cast<size_t>(ws) > max_ws) {
        note("workspace too large");
        continue;
      }
      found.push_back({std::move(cfgs[i]), std::move(plan), ws});
    }
  }
  return found;
}

void execute_graph(Context& ctx, cudnnBackendDescriptor_t plan, void* ws, int64_t n, void* const* ptrs,
                   const int64_t* uids) {
  GraphDesc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs)
      .set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids)
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  pack.finalize();
  STRATA_CUDNN_CHECK(cudnnBackendExecute(ctx.cudnn, plan, pack.get()));
}

std::string graph_conv(Context& ctx, ConvDir dir, const TensorView& x, const TensorView& w, const TensorView& y,
                       Layout l, const ops::Conv2dParams& p, const Settings& s, const GraphEpilogue* epilogue) {
  (void)l;  // the strides say it; kept for symmetry with the legacy path's staging
  if (p.groups != 1) return "grouped convolutions use the legacy API";
  STRATA_CHECK(!epilogue || dir == ConvDir::fwd, "graph_conv: an epilogue belongs to the forward convolution");
  GraphPlan& g = ctx.plan<GraphPlan>(graph_key(dir, x, w, y, p, s, epilogue), [&] {
    if (!epilogue) return build(ctx, dir, x, w, y, p, s, nullptr);
    // A fused graph cuDNN does not take at all (a descriptor that does not finalize) is
    // remembered as unusable like one without an engine: the caller falls back.
    try {
      return build(ctx, dir, x, w, y, p, s, epilogue);
    } catch (const strata::Error& err) {
      auto none = std::make_unique<GraphPlan>();
      none->unusable = std::string("cuDNN graph API: the fused epilogue graph: ") + err.what();
      return none;
    }
  });
  if (!g.unusable.empty()) return g.unusable;
  if (observing()) {
    if (g.chosen.engine < 0) {
      g.chosen = engine_choice(g.cfg, g.ws);
      g.chosen.fused = g.fused;
    }
    observe_library(g.chosen);
  }
  execute(ctx, g.plan, g.ws, bound(x, w, y, epilogue));
  ++ctx.graph_convs;
  if (epilogue) ++ctx.fused_epilogues;
  return {};
}

}  // namespace strata::backends::cuda
