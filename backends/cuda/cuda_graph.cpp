// Graph mode's capture (cuda_backend.h): stream capture of the backend's own stream in
// relaxed mode, so that a kernel's scratch allocation may still reach cudaMalloc (the
// block then belongs to the graph's pool); a call that cannot be captured (waiting for
// the stream, a copy through the legacy stream) invalidates the capture, which
// capture_broken() reports after the op that did it.
#include <cstring>
#include <utility>
#include <vector>

#include "strata/backends/cuda/context.h"

namespace strata::backends {

namespace cuda {

CudaGraph::~CudaGraph() {
  // A launch in flight may still copy from the ring.
  for (void* e : slot_done_) (void)cudaEventSynchronize(static_cast<cudaEvent_t>(e));
  for (void* e : slot_done_) (void)cudaEventDestroy(static_cast<cudaEvent_t>(e));
  if (ring_) ctx_->pinned->deallocate(ring_, kRingSlots * slot_bytes_);
  if (exec_) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  (void)cudaGetLastError();
  if (ctx_) {
    ctx_->allocator->release_pool(pool_);
  }
}

bool CudaGraph::stale() const { return ctx_->workspace_generation() != workspace_generation_; }

void CudaGraph::find_host_reads() {
  auto* graph = static_cast<cudaGraph_t>(graph_);
  size_t n = 0;
  STRATA_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  STRATA_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    STRATA_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeMemcpy) continue;
    cudaMemcpy3DParms p{};
    STRATA_CUDA_CHECK(cudaGraphMemcpyNodeGetParams(node, &p));
    if (p.srcArray || !p.srcPtr.ptr || !host_memory_is_pinned(p.srcPtr.ptr)) continue;
    STRATA_CHECK(p.extent.height <= 1 && p.extent.depth <= 1 && !p.dstArray,
                 "cuda: a captured copy from host memory must be one-dimensional (graph mode refreshes it from the "
                 "host at each launch), got ", p.extent.width, " x ", p.extent.height, " x ", p.extent.depth);
    const size_t bytes = p.extent.width;
    host_reads_.push_back({node, p.srcPtr.ptr, p.dstPtr.ptr, bytes, slot_bytes_});
    slot_bytes_ += (bytes + 15) / 16 * 16;
  }
  if (host_reads_.empty()) return;
  ring_ = static_cast<char*>(ctx_->pinned->allocate(kRingSlots * slot_bytes_));
  for (size_t i = 0; i < kRingSlots; ++i) {
    cudaEvent_t e = nullptr;
    STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    slot_done_.push_back(e);
  }
}

void CudaGraph::launch() {
  STRATA_CHECK(!stale(), "cuda: a graph whose cuDNN workspace was given back since its capture (the workspace grew, "
                         "or empty_cache() ran) cannot be launched; capture the step again");
  auto* exec = static_cast<cudaGraphExec_t>(exec_);
  cudaEvent_t done = nullptr;
  if (!host_reads_.empty()) {
    const size_t k = launches_++ % kRingSlots;
    done = static_cast<cudaEvent_t>(slot_done_[k]);
    STRATA_CUDA_CHECK(cudaEventSynchronize(done));  // the launch kRingSlots back has copied it
    char* slot = ring_ + k * slot_bytes_;
    for (const HostRead& r : host_reads_) {
      std::memcpy(slot + r.offset, r.src, r.bytes);
      STRATA_CUDA_CHECK(cudaGraphExecMemcpyNodeSetParams1D(exec, static_cast<cudaGraphNode_t>(r.node), r.dst,
                                                           slot + r.offset, r.bytes, cudaMemcpyHostToDevice));
    }
  }
  STRATA_CUDA_CHECK(cudaGraphLaunch(exec, ctx_->stream));
  if (done) STRATA_CUDA_CHECK(cudaEventRecord(done, ctx_->stream));
}

}  // namespace cuda

void CudaBackend::begin_capture() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  STRATA_CUDA_CHECK(cudaStreamIsCapturing(ctx_->stream, &status));
  STRATA_CHECK(status == cudaStreamCaptureStatusNone, "cuda: a graph capture started inside another");
  // Work queued before the capture is not part of it; finishing it first keeps the
  // blocks it frees out of the graph's pool.
  STRATA_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream));
  ctx_->capture_pool = ctx_->allocator->begin_pool();
  const cudaError_t e = cudaStreamBeginCapture(ctx_->stream, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) {
    ctx_->allocator->end_pool_capture();
    ctx_->allocator->release_pool(std::exchange(ctx_->capture_pool, 0));
    STRATA_CUDA_CHECK(e);
  }
}

bool CudaBackend::capture_broken() const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(ctx_->stream, &status);
  return e != cudaSuccess || status == cudaStreamCaptureStatusInvalidated;
}

std::unique_ptr<cuda::CudaGraph> CudaBackend::end_capture() {
  // The graph owns its pool from here: its destructor gives the pool back.
  std::unique_ptr<cuda::CudaGraph> g(new cuda::CudaGraph());
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(ctx_->stream, &graph);
  ctx_->allocator->end_pool_capture();
  g->ctx_ = ctx_;
  g->pool_ = std::exchange(ctx_->capture_pool, 0);
  g->workspace_generation_ = ctx_->workspace_generation();
  g->graph_ = graph;
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    STRATA_FAIL("cuda: the graph capture failed: ", cudaGetErrorString(e),
                " (a call synchronised with the host or used another stream while it was captured)");
  }
  cudaGraphExec_t exec = nullptr;
  STRATA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  g->exec_ = exec;
  g->find_host_reads();
  return g;
}

void CudaBackend::abort_capture() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(ctx_->stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
    cudaGraph_t graph = nullptr;
    (void)cudaStreamEndCapture(ctx_->stream, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
  }
  (void)cudaGetLastError();
  ctx_->allocator->end_pool_capture();
  ctx_->allocator->release_pool(std::exchange(ctx_->capture_pool, 0));
}

}  // namespace strata::backends
