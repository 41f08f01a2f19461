// Graph mode's capture (cuda_backend.h): stream capture of the backend's own stream in
// relaxed mode, so that a kernel's scratch allocation may still reach cudaMalloc (the
// block then belongs to the graph's pool); a call that cannot be captured (waiting for
// the stream, a copy through the legacy stream) invalidates the capture, which
// capture_broken() reports after the op that did it.
#include <utility>

#include "strata/backends/cuda/context.h"

namespace strata::backends {

namespace cuda {

Graph::~Graph() {
  if (exec_) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  (void)cudaGetLastError();
  if (ctx_) {
    ctx_->allocator->release_pool(pool_);
  }
}

bool Graph::stale() const { return ctx_->workspace_generation() != workspace_generation_; }

void Graph::launch() {
  STRATA_CHECK(!stale(), "cuda: a graph whose cuDNN workspace was given back since its capture (the workspace grew, "
                         "or empty_cache() ran) cannot be launched; capture the step again");
  STRATA_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), ctx_->stream));
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

std::unique_ptr<cuda::Graph> CudaBackend::end_capture() {
  // The graph owns its pool from here: its destructor gives the pool back.
  std::unique_ptr<cuda::Graph> g(new cuda::Graph());
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
