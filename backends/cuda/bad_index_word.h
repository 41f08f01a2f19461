#pragma once
// A device word in which kernels record the first position of a bad index (an index_select
// index out of range, a cross-entropy label neither a class nor ignore_index): the kernel cannot
// throw, so the host reads the word after it and raises the op's own error. Set to kNoBadIndex
// before the kernel; the read waits for the stream, and is skipped while the stream is being
// captured into a CUDA graph (a graph's launches are not checked). Internal to backends/cuda.
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "strata/backends/cuda/context.h"
#include "strata/backends/cuda/cuda_check.h"
#include "strata/ops/table/tensor_view.h"

namespace strata::backends::cuda {

constexpr unsigned long long kNoBadIndex = ~0ull;

class BadIndexWord {
 public:
  explicit BadIndexWord(Context& ctx) : ctx_(ctx), buf_(ctx, sizeof(unsigned long long)) {
    STRATA_CUDA_CHECK(cudaMemsetAsync(buf_.get(), 0xff, sizeof(unsigned long long), ctx.stream));
  }
  unsigned long long* get() const { return buf_.as<unsigned long long>(); }

  // The first bad position, or nullopt (none, or the stream is being captured).
  std::optional<int64_t> first_bad() {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    STRATA_CUDA_CHECK(cudaStreamIsCapturing(ctx_.stream, &status));
    if (status != cudaStreamCaptureStatusNone) return std::nullopt;
    unsigned long long pos = kNoBadIndex;
    STRATA_CUDA_CHECK(cudaMemcpyAsync(&pos, buf_.get(), sizeof(pos), cudaMemcpyDeviceToHost, ctx_.stream));
    STRATA_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    if (pos == kNoBadIndex) return std::nullopt;
    return static_cast<int64_t>(pos);
  }

  // Entry i of a rank-1 i64 or i32 device vector, read back for the message.
  int64_t value_at(const ops::TensorView& index, int64_t i) {
    const size_t elem = dtype_size(index.dtype);
    const char* at = static_cast<const char*>(index.data) + i * index.strides[0] * static_cast<int64_t>(elem);
    int64_t value = 0;
    if (index.dtype == DType::i32) {
      int32_t v32 = 0;
      STRATA_CUDA_CHECK(cudaMemcpyAsync(&v32, at, sizeof(v32), cudaMemcpyDeviceToHost, ctx_.stream));
      STRATA_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
      value = v32;
    } else {
      STRATA_CUDA_CHECK(cudaMemcpyAsync(&value, at, sizeof(value), cudaMemcpyDeviceToHost, ctx_.stream));
      STRATA_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    }
    return value;
  }

 private:
  Context& ctx_;
  DeviceBuffer buf_;
};

}  // namespace strata::backends::cuda
