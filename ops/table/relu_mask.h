#pragma once
// The ReLU mask of a fused batch norm (op_args.h, BatchNormFwdArgs::relu_mask): one bit per
// output element, set where the output is > 0 (where ReLU's backward passes the gradient).
// Bit i % 8 of byte i / 8 belongs to the element at offset i from the output's first
// element, in memory order: the output is dense (NCHW or channels-last, or [N,C]), so the
// offsets are 0 .. numel - 1. A training step keeps 1/16 of a bf16 activation instead of a
// second activation.
#include <cstdint>
#include <memory>

#include "strata/ops/table/op_args.h"

namespace strata::ops {

// codegen:begin cuda_train_ops
STRATA_HOST_DEVICE constexpr int64_t relu_mask_bytes(int64_t numel) { return (numel + 7) / 8; }

STRATA_HOST_DEVICE inline bool relu_mask_bit(const uint8_t* mask, int64_t i) { return (mask[i >> 3] >> (i & 7)) & 1; }
// codegen:end

// Whether a view is dense in memory order (every offset 0 .. numel - 1 used once): what a
// ReLU mask's offsets need.
inline bool dense_for_mask(const TensorView& v) {
  return v.is_contiguous() || (v.dim() == 4 && v.is_channels_last());
}

// Whether b's elements sit at a's offsets (strides of size-1 dimensions do not matter).
inline bool same_memory_order(const TensorView& a, const TensorView& b) {
  if (!(a.sizes == b.sizes)) return false;
  for (int i = 0; i < a.dim(); ++i)
    if (a.sizes[i] != 1 && a.strides[i] != b.strides[i]) return false;
  return true;
}

// ---- host loops for the CPU backends (the outputs are dense: offsets 0 .. n - 1) ----

// Elements from which the mask loops (here and the CPU backends' epilogue) split over the
// OpenMP threads of a backend built with them, as the backends' other loops do.
inline constexpr int64_t kMaskParallelAbove = 32768;

template <class T>
void write_relu_mask(const T* y, int64_t n, uint8_t* mask) {
  for (int64_t b = 0; b < relu_mask_bytes(n); ++b) {
    uint8_t bits = 0;
    for (int64_t j = 0; j < 8 && b * 8 + j < n; ++j) bits |= static_cast<uint8_t>(y[b * 8 + j] > T(0)) << j;
    mask[b] = bits;
  }
}
// A fused forward's mask from its output, after the batch norm and its epilogue ran.
template <class T>
void write_relu_mask(const BatchNormFwdArgs& a) {
  if (a.relu_mask.defined) write_relu_mask(a.y.ptr<const T>(), a.y.numel(), a.relu_mask.ptr<uint8_t>());
}

// A fused backward on a backend's plain one: `plain(b)` with b's dy the masked dy (written
// into dz when asked for, else into a temporary) and no mask. dy and dz are dense in
// x's memory order (validate_batch_norm_bwd). `in_place`: the plain backward allows dx to
// be dy's memory (oneDNN's does); then, without dz, the masked gradient is written into dx
// and the backward runs in place on it, with no temporary.
template <class T, class Plain>
void masked_batch_norm_bwd(const BatchNormBwdArgs& a, Plain&& plain, bool in_place = false) {
  if (!a.relu_mask.defined) return plain(a);
  const int64_t n = a.dy.numel();
  const bool into_dx = in_place && !a.dz.defined && a.dx.defined && same_memory_order(a.dx, a.dy);
  std::unique_ptr<T[]> tmp;  // uninitialised: every value is written below
  if (!a.dz.defined && !into_dx) tmp.reset(new T[static_cast<size_t>(n)]);
  T* g = a.dz.defined ? a.dz.ptr<T>() : into_dx ? a.dx.ptr<T>() : tmp.get();
  const T* dy = a.dy.ptr<const T>();
  const uint8_t* mask = a.relu_mask.ptr<const uint8_t>();
  // A mask byte's eight values at a time (a loop the compiler vectorises), over the OpenMP
  // threads in a backend built with them (onednn, openblas); each value is written alone,
  // so the result does not depend on the threads.
  const int64_t bytes = relu_mask_bytes(n);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n >= kMaskParallelAbove)
#endif
  for (int64_t b = 0; b < bytes; ++b) {
    const unsigned m = mask[b];
    const int64_t i0 = b * 8;
    if (i0 + 8 <= n) {
      for (int j = 0; j < 8; ++j) g[i0 + j] = (m >> j) & 1u ? dy[i0 + j] : T(0);
    } else {
      for (int64_t i = i0; i < n; ++i) g[i] = (m >> (i - i0)) & 1u ? dy[i] : T(0);
    }
  }
  BatchNormBwdArgs b = a;
  b.dy.data = g;
  b.relu_mask = {};
  b.dz = {};
  plain(b);
}

}  // namespace strata::ops
