#pragma once
// space_to_depth's parameters for tests, and the shapes of the backends' comparisons with the
// reference (tests/cpu_backends, tests/cuda): the ResNet stem's block and padding at odd sizes,
// a 3x3 block, and blocks that stop short of the image.
#include <vector>

#include "strata/core/shape.h"
#include "strata/ops/table/op_args.h"

namespace strata::testing {

// The op's parameters, the same padding both ways.
inline ops::SpaceToDepthParams s2d_params(int block, int pad, int64_t channels, int64_t out_h, int64_t out_w) {
  ops::SpaceToDepthParams p;
  p.block = block;
  p.pad_h = p.pad_w = pad;
  p.channels = channels;
  p.out_h = out_h;
  p.out_w = out_w;
  return p;
}

struct SpaceToDepthCase {
  Shape x;
  int block, pad;
  int64_t channels, out_h, out_w;

  ops::SpaceToDepthParams params() const { return s2d_params(block, pad, channels, out_h, out_w); }
  Shape y() const { return Shape{x[0], channels, out_h, out_w}; }
};

inline const std::vector<SpaceToDepthCase>& space_to_depth_cases() {
  static const std::vector<SpaceToDepthCase> cases = {{{1, 3, 15, 13}, 2, 3, 16, 10, 9},
                                                      {{2, 2, 7, 5}, 3, 2, 20, 3, 3},
                                                      {{3, 4, 6, 6}, 2, 0, 16, 2, 3}};
  return cases;
}

}  // namespace strata::testing
