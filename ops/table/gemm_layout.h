#pragma once
// How a GEMM library reads one matrix of a batched product's operand (BmmArgs): rows x cols
// with unit stride along one of them, as a row-major matrix (trans false, leading dimension
// the row stride) or the transpose of one (trans true, leading dimension the column stride).
// The front end copies an operand that has neither; the backends read the layout from here,
// so that the two never disagree.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "strata/ops/table/tensor_view.h"

namespace strata::ops {

struct GemmLayout {
  bool trans = false;
  int64_t ld = 1;
};

// v is rank 3 ([batch, rows, cols]); nullopt when neither inner dim has unit stride. A dim of
// extent 1 takes any stride, so a row or column vector always has a layout.
inline std::optional<GemmLayout> gemm_layout(const TensorView& v) {
  const int64_t rows = v.sizes[1], cols = v.sizes[2], s1 = v.strides[1], s2 = v.strides[2];
  if ((s2 == 1 || cols <= 1) && (rows <= 1 || s1 >= std::max<int64_t>(cols, 1)))
    return GemmLayout{false, rows <= 1 ? std::max<int64_t>(cols, 1) : s1};
  if ((s1 == 1 || rows <= 1) && (cols <= 1 || s2 >= std::max<int64_t>(rows, 1)))
    return GemmLayout{true, cols <= 1 ? std::max<int64_t>(rows, 1) : s2};
  return std::nullopt;
}

}  // namespace strata::ops
