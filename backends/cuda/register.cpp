// The backend object, its dtype support table, and the factory the registry calls.
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/context.h"
#include "strata/backends/cuda/index_errors.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

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
ConvApiCounts conv_api_counts() {
  const Context& c = context();
  return {c.graph_convs, c.legacy_convs, c.fused_epilogues, c.epilogue_kernels};
}
AttentionPathCounts attention_path_counts() {
  const Context& c = context();
  return {c.fused_attentions, c.gemm_attentions, c.own_attentions};
}
KeptBuffers kept_buffers() {
  const Context& c = context();
  return {c.workspace_bytes(), c.scratch_bytes()};
}

}  // namespace cuda

CudaBackend::CudaBackend(cuda::Settings settings) : settings_(settings), ctx_(&cuda::context()) {}

MemoryFormat CudaBackend::preferred_memory_format(DType compute) const {
  const bool tensor_cores = compute == DType::f16 || compute == DType::bf16 ||
                            (compute == DType::f32 && settings_.allow_tf32);
  return tensor_cores ? MemoryFormat::channels_last : MemoryFormat::contiguous;
}

// Batch norm takes f16/bf16 activations with f32 parameters and statistics; cross-entropy
// takes f16/bf16 logits (its loss in f32); the other losses and the optimizer steps are f32
// (mixed-precision training keeps them in f32). The reduce kind's
// older rows (sum, mean, argmax) have no f64 form; reduce_dims and softmax do.
const Capabilities& CudaBackend::capabilities() const {
  static constexpr Capabilities kTable = [] {
    const DTypeSet f32_half = kFloat32 | kHalf;
    Capabilities c;
    c.all(kFloat32)
        .kind(OpKind::memory, kAnyDType)
        .kind(OpKind::conv, f32_half)
        .kind(OpKind::linear, f32_half)
        .kind(OpKind::pool, f32_half)
        .kind(OpKind::norm, f32_half)
        .kind(OpKind::reduce, f32_half)
        .kind(OpKind::activation, kFloat | kHalf)
        .kind(OpKind::elementwise, kFloat | kHalf)
        // The tensor API's ops (tensor_ops.cu; bmm on cuBLAS in linear.cu): every float dtype,
        // comparisons of every dtype, index_select moving any (the memory kind's row).
        .op({OpId::reduce_dims, OpId::softmax_fwd, OpId::softmax_bwd, OpId::bmm, OpId::index_add}, kFloat | kHalf)
        // Layer norm and attention (layer_norm.cu, attention.cu): every float dtype.
        .op({OpId::layer_norm_fwd, OpId::layer_norm_bwd, OpId::attention_fwd, OpId::attention_bwd}, kFloat | kHalf)
        // Cross-entropy reads f16/bf16 logits as they are (loss.cu; the loss and lse in f32).
        .op({OpId::softmax_xent_fwd, OpId::softmax_xent_bwd}, f32_half)
        .op({OpId::compare}, kAnyDType);
    return c;
  }();
  return kTable;
}

void CudaBackend::synchronize() {
  STRATA_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream));
  cuda::raise_bad_index(*ctx_);
}

void CudaBackend::copy(const CopyArgs& a) {
  cuda::observe_call(ops::OpId::copy, a);
  const cuda::ScopedCopyObservation report;
  cuda::copy_views(*ctx_, a.x, a.y);
}

void* CudaBackend::stream() const { return ctx_->stream; }
void* CudaBackend::cudnn_handle() const { return ctx_->cudnn; }
void* CudaBackend::cublas_handle() const { return ctx_->cublas; }

std::string probe_backend_cuda() { return cuda::no_device_reason(); }

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
