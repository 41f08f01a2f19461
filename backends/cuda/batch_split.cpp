// How cuDNN calls on activations past its 32-bit limits are cut along the batch (cudnn_util.h).
#include "strata/backends/cuda/cudnn_util.h"

namespace strata::backends::cuda {

using namespace strata::ops;  // the op table's argument types

int64_t span_of(const TensorView& v) {
  if (v.numel() == 0) return 0;
  int64_t last = 0;
  for (int i = 0; i < v.dim(); ++i) last += (v.sizes[i] - 1) * v.strides[i];
  return last + 1;
}

int64_t samples_per_call(const char* op, const char* name, const TensorView& v) {
  if (fits_cudnn(v)) return v.sizes[0];
  const int64_t sample = span_of(narrow_batch(v, 0, 1));
  STRATA_CHECK(sample <= kCudnnMaxSpan, op, ": one sample of ", name, " ", v.sizes.str(), " spans ", sample,
               " elements, past cuDNN's limit of ", kCudnnMaxSpan,
               " per tensor; cuDNN cannot run it even one sample at a time (use smaller images or fewer channels)");
  // A batch stride of at least one sample's span: samples do not overlap, so pieces stay independent.
  STRATA_CHECK(v.strides[0] >= sample, op, ": ", name, " ", v.sizes.str(), " with strides ", v.strides.str(),
               " is past cuDNN's limit of ", kCudnnMaxSpan,
               " elements and its samples overlap in memory, so it cannot be split along the batch");
  return (kCudnnMaxSpan - sample) / v.strides[0] + 1;
}

TensorView narrow_batch(const TensorView& v, int64_t n0, int64_t n) {
  TensorView r = v;
  r.sizes[0] = n;
  r.data = static_cast<char*>(v.data) + n0 * v.strides[0] * static_cast<int64_t>(dtype_size(v.dtype));
  return r;
}

}  // namespace strata::backends::cuda
