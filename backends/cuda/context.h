#pragma once
// Per-device state shared by every CudaBackend of the process: the stream, the
// cuDNN and cuBLAS handles bound to it, the allocators, the cuDNN workspace arena
// and the plan caches (descriptors + algorithm per shape key). Created once, never
// destroyed (static destructors would race the CUDA runtime's own teardown).
// Ops are issued from one thread at a time (the plan cache and workspace are not
// locked); the allocators are, so copies and tensor allocation may come from other
// threads (a data loader). Internal to backends/cuda.
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strata/backends/cuda/caching_allocator.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "strata/backends/cuda/cuda_check.h"
#include "strata/ops/table/tensor_view.h"

namespace strata::backends::cuda {

using ops::TensorView;

// A plan-cache key: a fixed-capacity list of integers (op kind, sizes, strides,
// parameters, dtype, settings), compared and hashed as a whole.
struct PlanKey {
  std::array<int64_t, 64> v{};
  int n = 0;
  PlanKey& add(int64_t x) {
    STRATA_CHECK(n < static_cast<int>(v.size()), "cuda backend: plan key overflow");
    v[n++] = x;
    return *this;
  }
  PlanKey& add(const Shape& s) {
    add(s.size());
    for (int64_t x : s) add(x);
    return *this;
  }
  friend bool operator==(const PlanKey& a, const PlanKey& b) {
    if (a.n != b.n) return false;
    for (int i = 0; i < a.n; ++i)
      if (a.v[i] != b.v[i]) return false;
    return true;
  }
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < k.n; ++i) h = (h ^ static_cast<uint64_t>(k.v[i])) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

struct Plan {
  virtual ~Plan() = default;
};

struct Context {
  int device = 0;
  int sm_count = 0;
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublaslt = nullptr;  // gemm_lt.h
  void* cublas_workspace = nullptr;     // cuBLAS's fixed workspace, cuBLASLt's too (context.cpp)
  size_t cublas_workspace_bytes = 0;
  CachingAllocator* allocator = nullptr;
  PinnedAllocator* pinned = nullptr;
  size_t layout_fallbacks = 0;  // see cuda_backend.h
  size_t staging_copies = 0;    // see cuda_backend.h
  size_t graph_convs = 0;       // convolutions run from cached graph-API plans
  size_t legacy_convs = 0;      // convolutions run through cudnnConvolution* (v7 API)
  size_t fused_epilogues = 0;   // conv2d epilogues (bias, residual, ReLU) run inside a cuDNN graph
  size_t epilogue_kernels = 0;  // ... and run by strata's kernel after the convolution
  size_t fused_attentions = 0;  // attention ops (forward, backward: one each) on cuDNN's fused engine
  size_t gemm_attentions = 0;   // ... as cuBLAS GEMMs around strata's softmax rows (attention_gemm.h)
  size_t own_attentions = 0;    // ... by strata's row kernels (attention.cu)

  // The cuDNN workspace arena: one buffer, grown on demand, shared by every call. Each
  // buffer it takes is a generation. A replaced buffer goes back to the caching
  // allocator at once, as in direct mode (work queued before still finishes first: the
  // allocator reuses blocks in stream order), so a CUDA graph captured with it is stale
  // (cuda::CudaGraph::stale) and must be captured again before its next launch; graph mode
  // does. Keeping old buffers for such graphs instead held 432 MiB beside the current one
  // in a trainer whose evaluation grew the workspace. (A buffer replaced during a
  // capture goes to that graph's pool.)
  void* workspace(size_t bytes);
  // Gives the arena and the scratch (below) back to the caching allocator
  // (empty_cache()); graphs captured with them are stale.
  void release_workspace();
  uint64_t workspace_generation() const { return ws_generation_; }
  size_t capture_pool = 0;   // the allocator's pool of the capture in progress
  size_t workspace_bytes() const { return ws_bytes_; }

  // strata's own kernel temporaries (DeviceBuffer: channel sums, staged copies, masked
  // gradients) come from a second kept buffer, handed out as a stack, so that a step
  // makes no allocation for them: from the caching allocator they sat on top of direct
  // mode's constant arena at the step's peak, where static mode's free lists hid them.
  // A request that does not fit (larger than kScratchMax, or beyond the space left
  // while others are live) goes to the caching allocator; the scratch then grows to the
  // most that was asked of it, at the next call that finds it empty. Growth, like the
  // workspace's, is a new generation: graphs captured with the old buffer are stale.
  // Locked: copies from a loader thread stage through it too (same stream, so the
  // buffer is reused in stream order).
  static constexpr size_t kScratchMax = size_t{16} << 20;
  void* scratch_take(size_t bytes);  // nullptr: not from the scratch
  void scratch_give(void* p);
  size_t scratch_bytes() const { return sc_bytes_; }

  // Plans by key; `make` builds one on a miss. Plans live as long as the context.
  template <class P, class Make>
  P& plan(const PlanKey& key, Make&& make) {
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, make()).first;
    return static_cast<P&>(*it->second);
  }

 private:
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
  std::atomic<uint64_t> ws_generation_{0};  // scratch growth may come from a loader thread's copy
  void release_arena();  // the workspace's buffer alone
  void release_scratch_locked();
  void give_back_kept(void*& p, size_t& bytes);  // one of the two kept buffers; a new generation
  std::mutex sc_mutex_;
  void* sc_ = nullptr;
  size_t sc_bytes_ = 0, sc_want_ = 0;
  struct ScratchPiece {
    size_t begin, end;
    bool live;
  };
  std::vector<ScratchPiece> sc_stack_;  // in address order; dead pieces above the last live one are popped
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans_;
};

// The device context, initialised on first call; throws strata::Error (with the
// reason) when no GPU is usable.
Context& context();
// nullptr and the reason when no GPU is usable; never throws, never prints.
Context* try_context(std::string* why);
// Why there is no device to initialise ("" when the driver counts one or more): the
// driver's device count only, no context (the registry's probe, and try_context's first
// check).
std::string no_device_reason();

// Device memory for the duration of one op: from the context's scratch, else from the
// caching allocator. Both are reused in stream order, so no synchronisation is needed.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Context& ctx, size_t bytes) : ctx_(&ctx), bytes_(bytes) {
    p_ = ctx.scratch_take(bytes);
    scratch_ = p_ != nullptr;
    if (!scratch_) p_ = ctx.allocator->allocate(bytes);
  }
  ~DeviceBuffer() { give_back(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ctx_(o.ctx_), p_(o.p_), bytes_(o.bytes_), scratch_(o.scratch_) {
    o.ctx_ = nullptr;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      give_back();
      ctx_ = o.ctx_;
      p_ = o.p_;
      bytes_ = o.bytes_;
      scratch_ = o.scratch_;
      o.ctx_ = nullptr;
    }
    return *this;
  }
  void* get() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void give_back() noexcept {
    if (!ctx_) return;
    if (scratch_)
      ctx_->scratch_give(p_);
    else
      ctx_->allocator->deallocate(p_, bytes_);
  }
  Context* ctx_ = nullptr;
  void* p_ = nullptr;
  size_t bytes_ = 0;
  bool scratch_ = false;
};

enum class Layout { nchw, nhwc };

// A device tensor view that may own a temporary: `view` is what the library call
// sees. Built by stage_in/stage_out when an argument is not already dense in the
// layout a call needs (or has the wrong dtype); finish() copies a staged output back.
struct Staged {
  ops::TensorView view;
  DeviceBuffer buf;
  const ops::TensorView* orig = nullptr;
  bool temp = false;
  void finish(Context& ctx);
};
bool is_dense_in(const ops::TensorView& v, Layout l);
Layout layout_of(const ops::TensorView& v);  // nhwc for channels-last rank-4 views, else nchw
Staged stage_in(Context& ctx, const ops::TensorView& v, Layout l);
Staged stage_out(Context& ctx, const ops::TensorView& v, Layout l);
// A fresh dense device view (dtype, sizes, layout) over `buf`.
ops::TensorView make_temp(Context& ctx, DeviceBuffer& buf, const Shape& sizes, DType dt, Layout l);

// Any view to any view: dtypes, strides and devices (host<->device, device<->device).
void copy_views(Context& ctx, const ops::TensorView& src, const ops::TensorView& dst);
// Page-locked host memory (cudaHostAlloc, or registered): the device reads it by DMA after
// an asynchronous copy returns.
bool host_memory_is_pinned(const void* p);

}  // namespace strata::backends::cuda
