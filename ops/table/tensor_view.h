#pragma once
// What a backend sees of a tensor: a raw pointer (already at the element offset),
// sizes, strides, dtype and device. No refcount, no autograd: backends know
// nothing of either.
#include <cstdint>

#include "strata/core/dtype.h"
#include "strata/core/device.h"
#include "strata/core/shape.h"

namespace strata {
class Tensor;
}

namespace strata::ops {

struct TensorView {
  void* data = nullptr;
  Shape sizes, strides;
  DType dtype = DType::f32;
  Device device;
  bool defined = false;  // false for an absent optional argument (e.g. no bias)

  TensorView() = default;
  TensorView(const Tensor& t);  // NOLINT: implicit on purpose, views are built from tensors everywhere

  int64_t numel() const { return sizes.numel(); }
  int dim() const { return sizes.size(); }
  bool is_contiguous() const;
  bool is_channels_last() const;
  template <class T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
};

}  // namespace strata::ops
