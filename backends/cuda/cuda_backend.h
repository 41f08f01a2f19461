#pragma once
// The cuda backend: cuDNN for convolution, batch norm, pooling and 4-D relu; cuBLAS
// for linear; strata's own kernels (sm_90) for everything else. One stream per
// device; every op is queued on it and returns without waiting. This header
// compiles without any CUDA header: the device state lives in backends/cuda/.
//
// Memory: Tensor::empty(..., Device::cuda()) takes blocks from a caching allocator
// (size-binned free lists, cudaMalloc only when a bin is empty); copies between host
// and device go through the copy hook this backend installs (copy_into). Host
// destinations are complete when copy_into returns; so are copies from pinned
// (page-locked) host memory, as with PyTorch's non_blocking=False.
//
// Numerics: f32 by default runs without TF32 (results match the reference backend
// to ~1e-5); allow_tf32 trades that for the tensor cores. deterministic (on by
// default) restricts cuDNN to algorithms that give the same bits on every run,
// which the dispatch modes' bitwise-equality tests rely on.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/backends/api/backend.h"
#include "strata/core/allocator.h"

namespace strata::backends {

class CudaBackend;

namespace cuda {

// Number of CUDA devices visible; 0 when there is no GPU or no driver (never throws,
// never prints).
int device_count();
// Why the cuda backend cannot run here ("" when it can).
std::string unavailable_reason();

// The caching allocator's counters and controls (device 0). Throw strata::Error when
// there is no GPU.
AllocatorStats allocator_stats();
// Returns every cached, unused block to the driver (cudaFree), the cuDNN workspace
// arena included (it regrows on the next call that needs one). Blocks in use stay.
void empty_cache();
// Bytes a request is rounded up to by the allocator's bins.
size_t allocation_bin(size_t bytes);
// The pinned host allocator's counters.
AllocatorStats pinned_stats();
// How many conv/batch-norm calls cuDNN refused in NHWC and ran through NCHW copies
// instead (a performance diagnostic: 0 means channels-last ran natively).
size_t layout_fallbacks();
// How many arguments were copied into a temporary because a library call or kernel
// needed them dense in another layout or dtype (a performance diagnostic).
size_t staging_copies();
// How many convolutions ran from cached cuDNN graph-API execution plans, and how many
// through the legacy cudnnConvolution* calls (grouped, cudnnFind mode, or no engine).
// Of the forward convolutions with an inference epilogue (op_args.h: residual or ReLU),
// how many ran it inside the cuDNN graph (fused) and how many as strata's kernel after
// the convolution (epilogue_kernels: no engine under the policy, or the setting is off).
struct ConvApiCounts {
  size_t graph = 0, legacy = 0;
  size_t fused = 0, epilogue_kernels = 0;
};
ConvApiCounts conv_api_counts();
// How many attention ops (forward and backward count one each) ran on cuDNN's fused
// flash-attention engine (f16/bf16 shapes it takes), as cuBLAS GEMMs around strata's
// softmax rows (other sequences of 64 and more), and by strata's row kernels (the rest:
// decoding, short rows, f64).
struct AttentionPathCounts {
  size_t cudnn = 0, gemm = 0, own_kernels = 0;
};
AttentionPathCounts attention_path_counts();
// The buffers the context keeps between calls (part of every peak): the cuDNN workspace
// (the most any call needed, up to Settings::max_workspace_bytes) and the scratch of
// strata's kernel temporaries (up to 16 MiB), in bytes.
struct KeptBuffers {
  size_t workspace = 0, scratch = 0;
};
KeptBuffers kept_buffers();

struct Settings {
  bool allow_tf32 = false;     // f32 conv/linear on the tensor cores (TF32 inputs)
  bool deterministic = true;   // only algorithms that are bitwise reproducible
  // Conv engines chosen by timing (up to 8 graph-API candidates, or cudnnFind*Ex on the
  // legacy path) instead of heuristics, once per shape.
  bool benchmark = false;
  // Channels-last batch-norm training in cuDNN's SPATIAL_PERSISTENT mode (as PyTorch);
  // off: plain SPATIAL mode, many times slower on NHWC.
  bool persistent_batch_norm = true;
  // Channels-last f32 batch norm through cuDNN (off: strata's own kernels, which are
  // what f16/bf16 batch norm always runs; cuDNN's NHWC f32 path is ~8x its NCHW time).
  bool cudnn_nhwc_batch_norm = false;
  // f32 NCHW batch norm on strata's own kernels instead of cuDNN's (for A/B timing).
  bool own_nchw_batch_norm = false;
  size_t max_workspace_bytes = size_t{1} << 30;  // cuDNN workspace cap per call
  // Convolutions from cached cuDNN graph-API execution plans (off: the legacy
  // cudnnConvolution* calls, ~85 µs of host time each under cuDNN 9).
  bool cudnn_graph = true;
  // conv2d's inference epilogue (residual add, ReLU; with the bias) inside the
  // convolution's cuDNN graph when an engine qualifies (off, or none: the convolution,
  // then strata's one-pass epilogue kernel).
  bool cudnn_fused_epilogue = true;
  // f16/bf16 attention on cuDNN's fused flash-attention engine where it takes the shape
  // (off: cuBLAS GEMMs or strata's kernels, as f32 always runs; for A/B timing).
  bool cudnn_attention = true;
  // Few query rows (a decoding step) over a cache of at least this many keys split the keys
  // over blocks (flash-decoding); shorter caches run one block per row, the faster of the two
  // for GPT-2's caches on an H200 (docs/results/gpt2_vs_pytorch.md; longer ones unmeasured).
  int64_t attention_split_min_keys = 2048;
};

struct Context;  // per-device state: stream, handles, plans (backends/cuda/context.h)

// The backend's calls between CudaBackend::begin_capture() and end_capture(), recorded
// by stream capture into a CUDA graph and run again by launch() as one submission, with
// the pointers they were captured with. Memory allocated or freed during the capture is
// the graph's own (the allocator's private pool) until the graph is destroyed.
class CudaGraph {
 public:
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph();
  // Throws when stale. Copies from pinned host memory captured in the step (the
  // optimizer's learning rates and step counts, RunTimeHypers in optim.cu) copy what that
  // memory holds at this call, as a direct-mode call would: each launch snapshots it into
  // a slot of a ring of its own and points the copy's node there (a replay otherwise reads
  // the host memory whenever it runs, after later writes of a host running ahead).
  void launch();
  // Whether the cuDNN workspace it replays was given back since its capture (it grew, or
  // empty_cache() ran): the step must be captured again (Context::workspace).
  bool stale() const;

 private:
  friend class strata::backends::CudaBackend;
  CudaGraph() = default;
  Context* ctx_ = nullptr;
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
  size_t pool_ = 0;
  uint64_t workspace_generation_ = 0;
  void find_host_reads();
  struct HostRead {
    void* node;  // cudaGraphNode_t
    const void* src;
    void* dst;
    size_t bytes, offset;  // offset: in a ring slot
  };
  static constexpr size_t kRingSlots = 8;
  std::vector<HostRead> host_reads_;
  char* ring_ = nullptr;  // kRingSlots slots of slot_bytes_ (pinned)
  size_t slot_bytes_ = 0, launches_ = 0;
  std::vector<void*> slot_done_;  // cudaEvent_t per slot: after the launch that last read it
};

}  // namespace cuda

class CudaBackend {
 public:
  static constexpr std::string_view kName = "cuda";
  static constexpr DeviceType kDevice = DeviceType::cuda;

  // Initialises the device (stream, cuDNN and cuBLAS handles, allocator, copy hook)
  // on first use. Throws strata::Error when no GPU is usable.
  explicit CudaBackend(cuda::Settings settings = {});

  const Capabilities& capabilities() const;  // the table in register.cpp
  void synchronize();

#define STRATA_OP(name, Args, kind) void name(const ops::Args& args);
#include "strata/ops/table/op_table.def"
#undef STRATA_OP

  const cuda::Settings& settings() const { return settings_; }
  // channels_last where cuDNN's convolutions run on the tensor cores (f16, bf16, and f32 with
  // TF32): their NHWC kernels are the fast ones (ResNet-50 at batch 1, f32 with TF32, on an H200:
  // 0.46 ms a prediction in NHWC, 0.79 in NCHW; docs/results/gpu_resnet50_layout.md); NCHW in
  // strict f32 and f64.
  MemoryFormat preferred_memory_format(DType compute) const;
  void set_allow_tf32(bool on) { settings_.allow_tf32 = on; }
  void set_deterministic(bool on) { settings_.deterministic = on; }
  void set_benchmark(bool on) { settings_.benchmark = on; }
  void set_persistent_batch_norm(bool on) { settings_.persistent_batch_norm = on; }
  void set_cudnn_nhwc_batch_norm(bool on) { settings_.cudnn_nhwc_batch_norm = on; }
  void set_own_nchw_batch_norm(bool on) { settings_.own_nchw_batch_norm = on; }
  void set_cudnn_graph(bool on) { settings_.cudnn_graph = on; }
  void set_cudnn_fused_epilogue(bool on) { settings_.cudnn_fused_epilogue = on; }
  void set_cudnn_attention(bool on) { settings_.cudnn_attention = on; }
  void set_attention_split_min_keys(int64_t keys) { settings_.attention_split_min_keys = keys; }

  // Graph mode: the calls that follow begin_capture() are recorded, not run, until
  // end_capture() returns them as a graph (throws naming the CUDA error when the
  // capture broke); abort_capture() ends a capture that failed and drops what it held.
  // capture_broken(): whether the capture in progress was invalidated (a call
  // synchronised or did something a graph cannot hold).
  void begin_capture();
  std::unique_ptr<cuda::CudaGraph> end_capture();
  void abort_capture();
  bool capture_broken() const;

  // Raw handles for direct-mode plans (cudaStream_t, cudnnHandle_t, cublasHandle_t).
  void* stream() const;
  void* cudnn_handle() const;
  void* cublas_handle() const;
  cuda::Context& context() const { return *ctx_; }

 private:
  cuda::Settings settings_;
  cuda::Context* ctx_;  // process-lifetime, shared by every CudaBackend of the device
};

// The registry's factory for this backend: no backend and the reason when no GPU
// (or no driver) is usable. Never throws, never prints.
BackendFactoryResult make_backend_cuda();

}  // namespace strata::backends
