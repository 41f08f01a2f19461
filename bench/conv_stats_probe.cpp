// Can cuDNN produce a convolution's batch-norm statistics in the pass that writes its output?
// NVIDIA's MLPerf ResNet-50 trains that way (cuDNN's fused-ops patterns: the convolution writes
// the per-channel sum and sum of squares of its output, and the previous batch norm's scale,
// bias and ReLU are applied as the convolution reads its input), where strata's training step
// runs a separate statistics pass over each convolution's output and a separate apply pass
// (docs/results/gpu_fused_train.md: 6.3 and 10.5 ms of a 39 ms step at batch 256).
//
// For ResNet-50's convolution shapes at batch N, bf16 (or f16) channels-last, this asks cuDNN (heuristics
// mode A, then its fallback list) for engines that take each of four graphs, builds the first few,
// times each (CUDA events, median of --repeat) and checks the statistics against the host:
//   conv         the convolution alone (what strata runs today)
//   genstats     conv -> y, and GEN_STATS(y) -> sum, sum of squares (f32 [1, K, 1, 1])
//   reduce       conv -> y, REDUCTION add over y and over y*y (the generic form of the same)
//   prologue     relu(x * scale + bias) -> conv -> y, GEN_STATS(y) (ConvBNfprop)
// One JSON line per shape and graph. It uses backends/cuda's internal graph helpers (cudnn_util.h,
// conv_graph.h) and its handle: a probe of what that backend could build, linked to cuDNN itself
// for the descriptors it makes.
//
//   conv_stats_probe [--batch 256] [--repeat 10] [--candidates 3] [--shapes all|quick] [--deadline S]
//                    [--dtype bf16|f16]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "strata/backends/api/registry.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "strata/backends/cuda/conv_graph.h"
#include "strata/backends/cuda/cudnn_util.h"

namespace {

using strata::backends::cuda::Context;
using strata::backends::cuda::graph_candidates;
using strata::backends::cuda::graph_tensor;
using strata::backends::cuda::GraphCandidate;
using Desc = strata::backends::cuda::GraphDesc;
using nlohmann::json;

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// One convolution of ResNet-50 (torchvision's, stride in the 3x3): input channels, output
// channels, input side, kernel side, stride, and how many times the network has it.
struct Shape {
  int64_t c, k, h, r, stride, count;
  int64_t out() const { return (h + 2 * (r / 2) - r) / stride + 1; }
};
const std::vector<Shape> kResNet50 = {
    {64, 64, 56, 1, 1, 1},     {256, 64, 56, 1, 1, 2},    {64, 64, 56, 3, 1, 3},      {64, 256, 56, 1, 1, 4},
    {256, 128, 56, 1, 1, 1},   {128, 128, 56, 3, 2, 1},   {512, 128, 28, 1, 1, 3},    {128, 128, 28, 3, 1, 3},
    {128, 512, 28, 1, 1, 4},   {256, 512, 56, 1, 2, 1},   {512, 256, 28, 1, 1, 1},    {256, 256, 28, 3, 2, 1},
    {1024, 256, 14, 1, 1, 5},  {256, 256, 14, 3, 1, 5},   {256, 1024, 14, 1, 1, 6},   {512, 1024, 28, 1, 2, 1},
    {1024, 512, 14, 1, 1, 1},  {512, 512, 14, 3, 2, 1},   {2048, 512, 7, 1, 1, 2},    {512, 512, 7, 3, 1, 2},
    {512, 2048, 7, 1, 1, 3},   {1024, 2048, 14, 1, 2, 1},
};

constexpr int64_t kX = 'x', kW = 'w', kY = 'y', kSum = 's', kSq = 'q', kScale = 'a', kBias = 'b';

// A dense NHWC tensor [n, c, h, w] (dims in NCHW order, as cuDNN's graph takes them).
Desc nhwc(cudnnDataType_t dt, int64_t n, int64_t c, int64_t h, int64_t w, int64_t uid, bool is_virtual = false) {
  const int64_t dims[4] = {n, c, h, w}, strides[4] = {h * w * c, 1, w * c, c};
  return graph_tensor(dt, dims, strides, uid, 16, is_virtual);
}
// A per-channel [1, c, 1, 1] tensor.
Desc channel(cudnnDataType_t dt, int64_t c, int64_t uid) {
  const int64_t dims[4] = {1, c, 1, 1}, strides[4] = {c, 1, c, c};
  return graph_tensor(dt, dims, strides, uid, 16);
}

bool runtime_compiled(cudnnBackendDescriptor_t cfg, int64_t* global_index) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0;
  cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e);
  cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, global_index);
  cudnnBackendBehaviorNote_t notes[16];
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, 16, &n, notes) !=
      CUDNN_STATUS_SUCCESS)
    return false;
  return std::find(notes, notes + n, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) != notes + n;
}

struct Buffers {
  void *x = nullptr, *w = nullptr, *y = nullptr, *sum = nullptr, *sq = nullptr, *scale = nullptr, *bias = nullptr,
       *ws = nullptr;
  size_t ws_bytes = 0;
};

// The four graphs of one shape; each returns its operations (kept alive in `keep`).
struct Graph {
  std::vector<Desc> keep;
  std::vector<cudnnBackendDescriptor_t> ops;
  std::vector<int64_t> uids;
};

void add_conv(Graph& g, const Desc& x, const Desc& w, const Desc& y, const Shape& s) {
  strata::ops::Conv2dParams p;
  p.pad_h = p.pad_w = static_cast<int>(s.r / 2);
  p.stride_h = p.stride_w = static_cast<int>(s.stride);
  Desc conv = strata::backends::cuda::conv_descriptor(p);
  const float alpha = 1.f, beta = 0.f;
  Desc op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x)
      .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w)
      .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y)
      .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  op.finalize();
  g.ops.push_back(op.get());
  g.keep.push_back(std::move(conv));
  g.keep.push_back(std::move(op));
}

void add_genstats(Graph& g, const Desc& y, const Desc& sum, const Desc& sq) {
  const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  Desc op(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode)
      .set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec)
      .set_desc(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, y)
      .set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum)
      .set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, sq);
  op.finalize();
  g.ops.push_back(op.get());
  g.keep.push_back(std::move(op));
}

void add_reduce(Graph& g, const Desc& x, const Desc& out) {
  Desc red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  const cudnnReduceTensorOp_t add = CUDNN_REDUCE_TENSOR_ADD;
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &add)
      .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec);
  red.finalize();
  Desc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, out)
      .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red);
  op.finalize();
  g.ops.push_back(op.get());
  g.keep.push_back(std::move(red));
  g.keep.push_back(std::move(op));
}

void add_pointwise(Graph& g, cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y) {
  Desc pw = strata::backends::cuda::pointwise_mode(mode);
  Desc op = strata::backends::cuda::pointwise_node(pw, x, b, nullptr, y);
  g.ops.push_back(op.get());
  g.keep.push_back(std::move(pw));
  g.keep.push_back(std::move(op));
}

// The graph named `kind` for shape s at batch n; throws (a cuDNN status) where cuDNN refuses to
// finalize a descriptor of it.
Graph make_graph(const std::string& kind, const Shape& s, int64_t n, cudnnDataType_t dt) {
  Graph g;
  g.keep.reserve(32);  // at most 19 descriptors: the references taken below stay valid
  const int64_t p = s.out();
  g.keep.push_back(nhwc(dt, n, s.c, s.h, s.h, kX));
  g.keep.push_back(nhwc(dt, s.k, s.c, s.r, s.r, kW));
  g.keep.push_back(nhwc(dt, n, s.k, p, p, kY));
  const Desc &x = g.keep[0], &w = g.keep[1], &y = g.keep[2];
  g.uids = {kX, kW, kY};
  const Desc* conv_in = &x;
  if (kind == "prologue") {
    g.keep.push_back(channel(dt, s.c, kScale));
    g.keep.push_back(channel(dt, s.c, kBias));
    g.keep.push_back(nhwc(CUDNN_DATA_FLOAT, n, s.c, s.h, s.h, 100, true));
    g.keep.push_back(nhwc(CUDNN_DATA_FLOAT, n, s.c, s.h, s.h, 101, true));
    g.keep.push_back(nhwc(CUDNN_DATA_FLOAT, n, s.c, s.h, s.h, 102, true));
    const size_t b = g.keep.size() - 5;
    add_pointwise(g, CUDNN_POINTWISE_MUL, x, &g.keep[b], g.keep[b + 2]);
    add_pointwise(g, CUDNN_POINTWISE_ADD, g.keep[b + 2], &g.keep[b + 1], g.keep[b + 3]);
    add_pointwise(g, CUDNN_POINTWISE_RELU_FWD, g.keep[b + 3], nullptr, g.keep[b + 4]);
    conv_in = &g.keep[b + 4];
    g.uids.push_back(kScale);
    g.uids.push_back(kBias);
  }
  add_conv(g, *conv_in, w, y, s);
  if (kind == "conv") return g;
  g.keep.push_back(channel(CUDNN_DATA_FLOAT, s.k, kSum));
  g.keep.push_back(channel(CUDNN_DATA_FLOAT, s.k, kSq));
  const size_t st = g.keep.size() - 2;
  g.uids.push_back(kSum);
  g.uids.push_back(kSq);
  if (kind == "reduce") {
    g.keep.push_back(nhwc(CUDNN_DATA_FLOAT, n, s.k, p, p, 200, true));
    const size_t squares = g.keep.size() - 1;
    add_reduce(g, y, g.keep[st]);
    add_pointwise(g, CUDNN_POINTWISE_MUL, y, &y, g.keep[squares]);
    add_reduce(g, g.keep[squares], g.keep[st + 1]);
  } else {
    add_genstats(g, y, g.keep[st], g.keep[st + 1]);
  }
  return g;
}

void* pointer_of(const Buffers& b, int64_t uid) {
  switch (uid) {
    case kX: return b.x;
    case kW: return b.w;
    case kY: return b.y;
    case kSum: return b.sum;
    case kSq: return b.sq;
    case kScale: return b.scale;
    default: return b.bias;
  }
}

// 16-bit values to and from float on the host, in the probe's dtype (bf16 or f16).
uint16_t to_16(float v, bool half) {
  if (half) return static_cast<__half_raw>(__float2half(v)).x;
  return static_cast<__nv_bfloat16_raw>(__float2bfloat16(v)).x;
}
float from_16(uint16_t bits, bool half) {
  if (half) {
    __half_raw r;
    r.x = bits;
    return __half2float(__half(r));
  }
  __nv_bfloat16_raw r;
  r.x = bits;
  return __bfloat162float(__nv_bfloat16(r));
}

// The statistics of y (16-bit NHWC, k channels) on the host, and the largest relative error of the
// device's sum and sum of squares against them.
double stats_error(const Buffers& b, int64_t elems, int64_t k, bool half) {
  std::vector<uint16_t> y(static_cast<size_t>(elems));
  std::vector<float> sum(static_cast<size_t>(k)), sq(static_cast<size_t>(k));
  check_cuda(cudaMemcpy(y.data(), b.y, y.size() * 2, cudaMemcpyDeviceToHost), "copy y");
  check_cuda(cudaMemcpy(sum.data(), b.sum, sum.size() * 4, cudaMemcpyDeviceToHost), "copy sum");
  check_cuda(cudaMemcpy(sq.data(), b.sq, sq.size() * 4, cudaMemcpyDeviceToHost), "copy sum of squares");
  std::vector<double> rs(static_cast<size_t>(k)), rq(static_cast<size_t>(k)), ra(static_cast<size_t>(k));
  for (int64_t i = 0; i < elems; ++i) {
    const double v = from_16(y[static_cast<size_t>(i)], half);
    const size_t c = static_cast<size_t>(i % k);
    rs[c] += v;
    ra[c] += std::fabs(v);
    rq[c] += v * v;
  }
  double worst = 0;
  for (size_t c = 0; c < static_cast<size_t>(k); ++c) {
    worst = std::max(worst, std::fabs(sum[c] - rs[c]) / std::max(ra[c], 1e-30));
    worst = std::max(worst, std::fabs(sq[c] - rq[c]) / std::max(rq[c], 1e-30));
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conv_stats_probe: cuDNN's engines for a convolution that also writes its output's statistics"};
  int64_t batch = 256, repeat = 10, want = 3;
  double deadline = 240;
  std::string which = "all", dtype = "bf16";
  app.add_option("--batch", batch, "images per batch")->check(CLI::Range(1, 4096));
  app.add_option("--repeat", repeat, "timed runs per plan")->check(CLI::Range(1, 1000));
  app.add_option("--candidates", want, "plans built and timed per graph")->check(CLI::Range(1, 32));
  app.add_option("--shapes", which, "all: ResNet-50's 22 shapes; quick: one per stage")
      ->check(CLI::IsMember({"all", "quick"}));
  app.add_option("--deadline", deadline, "start no shape after this many seconds");
  app.add_option("--dtype", dtype, "the tensors' type: bf16, or f16 (the type cuDNN documents ConvBNfprop for)")
      ->check(CLI::IsMember({"bf16", "f16"}));
  CLI11_PARSE(app, argc, argv);
  try {
    // The backend's own handle and stream: plans are built and run as its convolutions are.
    Context& ctx = strata::backends::registry().impl<strata::backends::CudaBackend>().context();
    std::vector<Shape> shapes = kResNet50;
    if (which == "quick") shapes = {kResNet50[2], kResNet50[8], kResNet50[13], kResNet50[20]};
    const bool half = dtype == "f16";
    const cudnnDataType_t dt = half ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    const auto t0 = std::chrono::steady_clock::now();
    std::mt19937 gen(1);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    cudaEvent_t a, z;
    check_cuda(cudaEventCreate(&a), "event");
    check_cuda(cudaEventCreate(&z), "event");
    for (const Shape& s : shapes) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > deadline) break;
      const int64_t p = s.out();
      const int64_t nx = batch * s.c * s.h * s.h, nw = s.k * s.c * s.r * s.r, ny = batch * s.k * p * p;
      Buffers b;
      const auto fill = [&](void** ptr, int64_t count) {
        std::vector<uint16_t> h(static_cast<size_t>(count));
        for (auto& v : h) v = to_16(u(gen), half);
        check_cuda(cudaMalloc(ptr, h.size() * 2), "cudaMalloc");
        check_cuda(cudaMemcpy(*ptr, h.data(), h.size() * 2, cudaMemcpyHostToDevice), "copy in");
      };
      fill(&b.x, nx);
      fill(&b.w, nw);
      fill(&b.scale, s.c);
      fill(&b.bias, s.c);
      check_cuda(cudaMalloc(&b.y, static_cast<size_t>(ny) * 2), "cudaMalloc");
      check_cuda(cudaMalloc(&b.sum, static_cast<size_t>(s.k) * 4), "cudaMalloc");
      check_cuda(cudaMalloc(&b.sq, static_cast<size_t>(s.k) * 4), "cudaMalloc");
      for (const char* kind : {"conv", "genstats", "reduce", "prologue"}) {
        json r = {{"c", s.c}, {"k", s.k}, {"h", s.h}, {"r", s.r}, {"stride", s.stride}, {"count", s.count},
                  {"batch", batch}, {"graph", kind}, {"y_bytes", ny * 2}, {"dtype", dtype}};
        try {
          Graph g = make_graph(kind, s, batch, dt);
          Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
          graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(g.ops.size()),
                    g.ops.data())
              .set(strata::backends::cuda::kGraphHandle, CUDNN_TYPE_HANDLE, 1, &ctx.cudnn);
          graph.finalize();
          std::string tried;
          const auto c0 = std::chrono::steady_clock::now();
          std::vector<GraphCandidate> found = graph_candidates(
              ctx, graph, static_cast<size_t>(want), size_t{1} << 31, [](cudnnBackendDescriptor_t) { return ""; },
              tried);
          r["plan_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
          r["skipped"] = tried;
          json plans = json::array();
          for (GraphCandidate& f : found) {
            int64_t index = -1;
            const bool rtc = runtime_compiled(f.cfg.get(), &index);
            if (static_cast<size_t>(f.ws) > b.ws_bytes) {
              if (b.ws) cudaFree(b.ws);
              check_cuda(cudaMalloc(&b.ws, static_cast<size_t>(f.ws)), "workspace");
              b.ws_bytes = static_cast<size_t>(f.ws);
            }
            std::vector<void*> ptrs;
            for (int64_t uid : g.uids) ptrs.push_back(pointer_of(b, uid));
            const auto run = [&] {
              strata::backends::cuda::execute_graph(ctx, f.plan.get(), b.ws, static_cast<int64_t>(ptrs.size()),
                                                    ptrs.data(), g.uids.data());
            };
            run();
            check_cuda(cudaStreamSynchronize(ctx.stream), "first run");
            std::vector<float> ms;
            for (int64_t i = 0; i < repeat; ++i) {
              check_cuda(cudaEventRecord(a, ctx.stream), "record");
              run();
              check_cuda(cudaEventRecord(z, ctx.stream), "record");
              check_cuda(cudaEventSynchronize(z), "run");
              float t = 0;
              cudaEventElapsedTime(&t, a, z);
              ms.push_back(t);
            }
            std::sort(ms.begin(), ms.end());
            json pl = {{"engine", index}, {"runtime_compiled", rtc}, {"workspace", f.ws},
                       {"ms", ms[ms.size() / 2]}};
            if (std::string(kind) == "genstats" || std::string(kind) == "reduce")
              pl["stats_rel_error"] = stats_error(b, ny, s.k, half);
            plans.push_back(pl);
          }
          r["plans"] = plans;
        } catch (const std::exception& e) {
          r["refused"] = e.what();
        }
        std::printf("%s\n", r.dump().c_str());
        std::fflush(stdout);
      }
      for (void* v : {b.x, b.w, b.y, b.sum, b.sq, b.scale, b.bias}) cudaFree(v);
      if (b.ws) cudaFree(b.ws);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "conv_stats_probe: error: %s\n", e.what());
    return 1;
  }
}
