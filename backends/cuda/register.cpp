// The backend object, its dtype support table, and the factory the registry calls.
#include "strata/backends/cuda/context.h"

namespace strata::backends {

namespace cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

std::string unavailable_reason() {
  std::string why;
  return try_context(&why) ? std::string() : why;
}

AllocatorStats allocator_stats() { return context().allocator->stats(); }
void empty_cache() {
  context().release_workspace();
  context().allocator->empty_cache();
}
size_t allocation_bin(size_t bytes) { return bin_size(bytes); }
AllocatorStats pinned_stats() { return context().pinned->stats(); }
size_t layout_fallbacks() { return context().layout_fallbacks; }
size_t staging_copies() { return context().staging_copies; }
ConvApiCounts conv_api_counts() { return {context().graph_convs, context().legacy_convs}; }

}  // namespace cuda

CudaBackend::CudaBackend(cuda::Settings settings) : settings_(settings), ctx_(&cuda::context()) {}

bool CudaBackend::supports(OpId op, DType dt) const {
  const bool f32 = dt == DType::f32;
  const bool half = dt == DType::f16 || dt == DType::bf16;
  switch (op) {
    case OpId::copy:
    case OpId::fill:
      return true;
    case OpId::conv2d_fwd:
    case OpId::conv2d_bwd_data:
    case OpId::conv2d_bwd_weight:
    case OpId::conv2d_bwd_bias:
    case OpId::linear_fwd:
    case OpId::linear_bwd_data:
    case OpId::linear_bwd_weight:
    case OpId::global_avg_pool_fwd:
    case OpId::global_avg_pool_bwd:
    case OpId::sum:
    case OpId::mean:
    case OpId::argmax:
      return f32 || half;
    case OpId::relu_fwd:
    case OpId::relu_bwd:
    case OpId::add:
    case OpId::scale:
    case OpId::axpy:
    case OpId::dropout_fwd:
    case OpId::dropout_bwd:
      return f32 || half || dt == DType::f64;
    case OpId::batch_norm_fwd:  // f16/bf16 activations with f32 parameters and statistics
    case OpId::batch_norm_bwd:
    case OpId::max_pool2d_fwd:
    case OpId::max_pool2d_bwd:
    case OpId::avg_pool2d_fwd:
    case OpId::avg_pool2d_bwd:
      return f32 || half;
    default:
      // losses, optimizer steps
      return f32;
  }
}

void CudaBackend::synchronize() { STRATA_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream)); }

void CudaBackend::copy(const CopyArgs& a) { cuda::copy_views(*ctx_, a.x, a.y); }

void* CudaBackend::stream() const { return ctx_->stream; }
void* CudaBackend::cudnn_handle() const { return ctx_->cudnn; }
void* CudaBackend::cublas_handle() const { return ctx_->cublas; }

BackendFactoryResult make_backend_cuda() {
  std::string why;
  if (!cuda::try_context(&why)) return {nullptr, why};
  try {
    return {std::make_unique<BackendAdapter<CudaBackend>>(), {}};
  } catch (const Error& e) {
    return {nullptr, e.what()};
  }
}

}  // namespace strata::backends
