#include "strata/codegen/cuda/support_files.h"

namespace strata::codegen::cuda {

// The generated model.cpp's own helpers (not strata's code: strata builds its plans through its
// context and plan cache, which a standalone program does not have): checked calls, the
// convolution's graph planned by engine, the legacy API's descriptors.
std::string model_prologue() {
  return R"cg(#include "model.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels.h"
#include "weights.h"

namespace generated {
namespace {

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(e));
}
void check(cudnnStatus_t s, const char* call) {
  if (s != CUDNN_STATUS_SUCCESS) throw std::runtime_error(std::string(call) + ": " + cudnnGetErrorString(s));
}
void check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(call) + ": " + cublasGetStatusString(s));
}
#define CHECK(call) check((call), #call)

// cuDNN 9 keeps these attribute names only as deprecated enumerators; strata uses the values.
constexpr auto kGraphHandle = static_cast<cudnnBackendAttributeName_t>(800);  // OPERATIONGRAPH_HANDLE
constexpr auto kPlanHandle = static_cast<cudnnBackendAttributeName_t>(400);   // EXECUTION_PLAN_HANDLE

// A cuDNN graph-API descriptor that destroys itself.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t t) { CHECK(cudnnBackendCreateDescriptor(t, &d_)); }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc& operator=(Desc&&) = delete;
  Desc& set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n, const void* v) {
    CHECK(cudnnBackendSetAttribute(d_, a, t, n, v));
    return *this;
  }
  Desc& set_desc(cudnnBackendAttributeName_t a, const Desc& o) {
    cudnnBackendDescriptor_t v = o.d_;
    return set(a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
  }
  cudnnStatus_t finalize() { return cudnnBackendFinalize(d_); }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// A buffer as a graph sees it: sizes, strides (elements) and its address's alignment (at most 16
// bytes, as strata gives it).
struct Tensor4 {
  int64_t dims[4];
  int64_t strides[4];
  int64_t align;
};

// f32 in memory; a virtual tensor is an f32 intermediate of the graph that never reaches memory.
Desc graph_tensor(const Tensor4& t, int64_t uid, bool is_virtual) {
  const cudnnDataType_t dt = CUDNN_DATA_FLOAT;
  int64_t strides[4];
  for (int i = 0; i < 4; ++i) strides[i] = (t.dims[i] == 1 && t.strides[i] == 0) ? 1 : t.strides[i];
  Desc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, t.dims)
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &t.align);
  if (is_virtual) d.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  CHECK(d.finalize());
  return d;
}

struct Knob {
  int64_t type, value;  // cudnnBackendKnobType_t and its choice
};

// A convolution's execution plan and what it refers to.
struct ConvGraph {
  std::vector<Desc> keep;
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace = 0;
};

constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y', kUidB = 'b', kUidZ = 'z', kUidVirtual = 1000;

// A direction's operation and its operands' attribute names: forward (x, w -> y), backward data
// (w, dy -> dx, dx in x's place, dy in y's), backward filter (x, dy -> dw, in w's place).
struct ConvOpAttrs {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};
constexpr ConvOpAttrs kConvOps[3] = {
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

// The convolution's graph as strata's cuda backend builds it (conv, then + z, + bias, ReLU, on
// f32 virtual tensors: only y reaches memory; a backward direction `dir` alone), planned with
// exactly the engine strata chose by heuristics or timing: its global index and knob choices.
// Refuses, naming the layer, an engine this cuDNN and GPU do not offer: another engine would give
// other bits.
ConvGraph conv_graph(cudnnHandle_t h, const char* layer, const Tensor4& x, const Tensor4& w, const Tensor4& y,
                     const Tensor4* z, const Tensor4* bias, bool relu, const int64_t (&pad)[2],
                     const int64_t (&stride)[2], const int64_t (&dilation)[2], int64_t engine,
                     const std::vector<Knob>& knobs, int dir = 0) {
  ConvGraph g;
  std::vector<Desc>& keep = g.keep;
  keep.reserve(32);  // references into it are held below
  keep.push_back(graph_tensor(x, kUidX, false));
  keep.push_back(graph_tensor(w, kUidW, false));
  keep.push_back(graph_tensor(y, kUidY, false));
  const Desc &dx = keep[0], &dw = keep[1], &y_mem = keep[2];
  const int steps = int{z != nullptr} + int{bias != nullptr} + int{relu};
  int64_t next_virtual = kUidVirtual;
  const auto out_of = [&](int remaining) -> const Desc& {
    if (remaining == 0) return y_mem;
    keep.push_back(graph_tensor(y, next_virtual++, true));
    return keep.back();
  };
  const Desc& dy = out_of(steps);
  Desc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims)
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad)
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad)
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation);
  CHECK(conv.finalize());
  const float alpha = 1.f, beta = 0.f;
  const ConvOpAttrs& at = kConvOps[dir];
  Desc op(at.type);
  op.set_desc(at.x, dx).set_desc(at.w, dw).set_desc(at.y, dy).set_desc(at.conv, conv);
  op.set(at.alpha, CUDNN_TYPE_FLOAT, 1, &alpha).set(at.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  CHECK(op.finalize());
  std::vector<cudnnBackendDescriptor_t> ops{op.get()};
  const Desc* cur = &dy;
  int left = steps;
  // The residual before the bias, as strata orders them (its pre-compiled engines take that order).
  const auto step = [&](cudnnPointwiseMode_t pw_mode, const Desc* operand) {
    const Desc& out = out_of(--left);
    Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &pw_mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    CHECK(pw.finalize());
    Desc node(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    node.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *cur)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, out);
    if (operand) node.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *operand);
    CHECK(node.finalize());
    ops.push_back(node.get());
    keep.push_back(std::move(pw));
    keep.push_back(std::move(node));
    cur = &out;
  };
  if (z) {
    keep.push_back(graph_tensor(*z, kUidZ, false));
    step(CUDNN_POINTWISE_ADD, &keep.back());
  }
  if (bias) {
    keep.push_back(graph_tensor(*bias, kUidB, false));
    step(CUDNN_POINTWISE_ADD, &keep.back());
  }
  if (relu) step(CUDNN_POINTWISE_RELU_FWD, nullptr);
  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops.size()), ops.data())
      .set(kGraphHandle, CUDNN_TYPE_HANDLE, 1, &h);
  CHECK(graph.finalize());

  const auto refuse = [&](const char* what) {
    throw std::runtime_error(std::string(layer) + ": cuDNN " + std::to_string(cudnnGetVersion()) + " on this GPU " +
                             what + " engine " + std::to_string(engine) + " with the knob choices strata's cuda " +
                             "backend chose (generated with cuDNN " + std::to_string(kCudnnVersion) +
                             "); another engine would not give strata's bits, so the model is not made");
  };
  Desc eng(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  eng.set_desc(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &engine);
  if (eng.finalize() != CUDNN_STATUS_SUCCESS) refuse("does not offer");
  std::vector<cudnnBackendDescriptor_t> chosen;
  for (const Knob& k : knobs) {
    Desc choice(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    const auto type = static_cast<cudnnBackendKnobType_t>(k.type);
    choice.set(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &type)
        .set(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &k.value);
    if (choice.finalize() != CUDNN_STATUS_SUCCESS) refuse("does not take a knob choice of");
    chosen.push_back(choice.get());
    keep.push_back(std::move(choice));
  }
  Desc cfg(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  cfg.set_desc(CUDNN_ATTR_ENGINECFG_ENGINE, eng);
  if (!chosen.empty())
    cfg.set(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(chosen.size()),
            chosen.data());
  if (cfg.finalize() != CUDNN_STATUS_SUCCESS) refuse("does not configure");
  Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  cudnnBackendDescriptor_t raw_cfg = cfg.get();
  plan.set(kPlanHandle, CUDNN_TYPE_HANDLE, 1, &h)
      .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw_cfg);
  if (plan.finalize() != CUDNN_STATUS_SUCCESS) refuse("cannot plan");
  int64_t n = 0;
  CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                 &g.workspace));
  g.plan = plan.get();
  keep.push_back(std::move(conv));
  keep.push_back(std::move(op));
  keep.push_back(std::move(graph));
  keep.push_back(std::move(eng));
  keep.push_back(std::move(cfg));
  keep.push_back(std::move(plan));
  return g;
}

// One execution of a convolution's plan: a fresh variant pack binds this call's buffers by unique id.
void run_conv(cudnnHandle_t h, const ConvGraph& g, void* workspace, const void* x, const void* w, void* y,
              const void* bias, const void* z) {
  void* ptrs[5];
  int64_t uids[5];
  int64_t n = 0;
  const auto bind = [&](int64_t uid, const void* p) {
    uids[n] = uid;
    ptrs[n++] = const_cast<void*>(p);
  };
  bind(kUidX, x);
  bind(kUidW, w);
  bind(kUidY, y);
  if (bias) bind(kUidB, bias);
  if (z) bind(kUidZ, z);
  void* ws = g.workspace ? workspace : nullptr;
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs)
      .set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids)
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  CHECK(pack.finalize());
  CHECK(cudnnBackendExecute(h, g.plan, pack.get()));
}

// The legacy API's descriptors, destroyed with the model.
struct Legacy {
  std::vector<std::function<void()>> destroy;
  ~Legacy() {
    for (auto it = destroy.rbegin(); it != destroy.rend(); ++it) (*it)();
  }
  // A rank-4 f32 tensor; a size-1 dimension's zero stride becomes 1, as strata gives it to cuDNN.
  cudnnTensorDescriptor_t tensor(const int64_t (&dims)[4], const int64_t (&strides)[4]) {
    cudnnTensorDescriptor_t d;
    CHECK(cudnnCreateTensorDescriptor(&d));
    destroy.push_back([d] { cudnnDestroyTensorDescriptor(d); });
    int st[4];
    for (int i = 0; i < 4; ++i) st[i] = static_cast<int>((dims[i] == 1 && strides[i] == 0) ? 1 : strides[i]);
    CHECK(cudnnSetTensor4dDescriptorEx(d, CUDNN_DATA_FLOAT, static_cast<int>(dims[0]), static_cast<int>(dims[1]),
                                       static_cast<int>(dims[2]), static_cast<int>(dims[3]), st[0], st[1], st[2],
                                       st[3]));
    return d;
  }
  cudnnFilterDescriptor_t filter(const int64_t (&dims)[4]) {
    cudnnFilterDescriptor_t d;
    CHECK(cudnnCreateFilterDescriptor(&d));
    destroy.push_back([d] { cudnnDestroyFilterDescriptor(d); });
    CHECK(cudnnSetFilter4dDescriptor(d, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(dims[0]),
                                     static_cast<int>(dims[1]), static_cast<int>(dims[2]), static_cast<int>(dims[3])));
    return d;
  }
  cudnnConvolutionDescriptor_t conv(const int (&pad)[2], const int (&stride)[2], const int (&dilation)[2],
                                    cudnnMathType_t math) {
    cudnnConvolutionDescriptor_t d;
    CHECK(cudnnCreateConvolutionDescriptor(&d));
    destroy.push_back([d] { cudnnDestroyConvolutionDescriptor(d); });
    CHECK(cudnnSetConvolution2dDescriptor(d, pad[0], pad[1], stride[0], stride[1], dilation[0], dilation[1],
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CHECK(cudnnSetConvolutionGroupCount(d, 1));
    CHECK(cudnnSetConvolutionMathType(d, math));
    return d;
  }
  cudnnPoolingDescriptor_t pooling(cudnnPoolingMode_t mode, const int (&window)[2], const int (&pad)[2],
                                   const int (&stride)[2]) {
    cudnnPoolingDescriptor_t d;
    CHECK(cudnnCreatePoolingDescriptor(&d));
    destroy.push_back([d] { cudnnDestroyPoolingDescriptor(d); });
    CHECK(cudnnSetPooling2dDescriptor(d, mode, CUDNN_PROPAGATE_NAN, window[0], window[1], pad[0], pad[1], stride[0],
                                      stride[1]));
    return d;
  }
  cudnnActivationDescriptor_t relu() {
    cudnnActivationDescriptor_t d;
    CHECK(cudnnCreateActivationDescriptor(&d));
    destroy.push_back([d] { cudnnDestroyActivationDescriptor(d); });
    CHECK(cudnnSetActivationDescriptor(d, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    return d;
  }
};

// A convolution through the legacy API: its descriptors (the algorithm and workspace are the call's).
struct LegacyConv {
  cudnnTensorDescriptor_t x = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnTensorDescriptor_t y = nullptr;
};
// A pooling or ReLU through the legacy API.
struct Pooling {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
};
struct Activation {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnActivationDescriptor_t act = nullptr;
};

float* f32(std::byte* p) { return reinterpret_cast<float*>(p); }
const float* f32(const std::byte* p) { return reinterpret_cast<const float*>(p); }

const float kOne = 1.f, kZero = 0.f;

// Device memory of the model's lifetime (nullptr for 0 bytes).
struct DeviceMemory {
  std::byte* p = nullptr;
  DeviceMemory() = default;
  explicit DeviceMemory(int64_t bytes) {
    if (bytes > 0) CHECK(cudaMalloc(reinterpret_cast<void**>(&p), static_cast<size_t>(bytes)));
  }
  DeviceMemory(DeviceMemory&& o) noexcept : p(o.p) { o.p = nullptr; }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    std::swap(p, o.p);
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    if (p) cudaFree(p);
  }
};

// The stream and the libraries' handles, set up as strata's cuda backend sets up its own
// (backends/cuda/context.cpp): a non-blocking stream, host pointer mode, and cuBLAS's fixed
// workspace of strata's size, with which cuBLAS chooses its kernels (cuBLAS documentation,
// "Results reproducibility"). Made first and destroyed last.
struct Handles {
  static constexpr size_t kCublasWorkspace = size_t{32} << 20;
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublas_workspace = nullptr;
  Handles() {
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK(cudnnCreate(&cudnn));
    CHECK(cudnnSetStream(cudnn, stream));
    CHECK(cublasCreate(&cublas));
    CHECK(cublasSetStream(cublas, stream));
    CHECK(cublasSetPointerMode(cublas, CUBLAS_POINTER_MODE_HOST));
    CHECK(cudaMalloc(&cublas_workspace, kCublasWorkspace));
    CHECK(cublasSetWorkspace(cublas, cublas_workspace, kCublasWorkspace));
  }
  ~Handles() {
    if (cublas) cublasDestroy(cublas);
    if (cudnn) cudnnDestroy(cudnn);
    if (cublas_workspace) cudaFree(cublas_workspace);
    if (stream) cudaStreamDestroy(stream);
  }
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
};

}  // namespace
)cg";
}

// A training step's further helpers: batch norm's descriptors, as strata's cuda backend makes them
// (backends/cuda/batch_norm.cu: x's and y's, and the per-channel one cuDNN derives from x's).
std::string train_model_prologue() {
  return R"cg(
namespace {

struct BatchNorm {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, param = nullptr;
};

BatchNorm batch_norm(Legacy& legacy, const int64_t (&x_dims)[4], const int64_t (&x_strides)[4],
                     const int64_t (&y_dims)[4], const int64_t (&y_strides)[4], cudnnBatchNormMode_t mode) {
  BatchNorm b{legacy.tensor(x_dims, x_strides), legacy.tensor(y_dims, y_strides), nullptr};
  CHECK(cudnnCreateTensorDescriptor(&b.param));
  const cudnnTensorDescriptor_t param = b.param;
  legacy.destroy.push_back([param] { cudnnDestroyTensorDescriptor(param); });
  CHECK(cudnnDeriveBNTensorDescriptor(b.param, b.x, mode));
  return b;
}

}  // namespace
)cg";
}

}  // namespace strata::codegen::cuda
