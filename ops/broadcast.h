#pragma once
// Internal to the element-wise front ends (ops/tensor_ops.cpp, ops/pointwise_formula_ops.cpp):
// two operands broadcast to one shape, and the output beside them.
#include <string_view>

#include "strata/core/tensor.h"

namespace strata::ops {

struct Broadcast {
  Shape sizes;
  Tensor a, b;  // views of the operands with `sizes` (stride 0 where they repeat)
};
// Checks both defined and broadcast (an error naming the op and both shapes otherwise).
Broadcast broadcast(std::string_view op, const Tensor& a, const Tensor& b);
// A new output of `sizes` beside operands a and b: in the layout of one that has those sizes.
Tensor output_like(const Tensor& a, const Tensor& b, const Shape& sizes, DType dt);

}  // namespace strata::ops
