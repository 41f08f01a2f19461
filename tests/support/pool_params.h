#pragma once
// Square pooling windows and their output sizes, for the pooling tests of every backend
// (tests/backends, tests/cpu_backends, tests/cuda).
#include "strata/core/shape.h"
#include "strata/ops/table/op_args.h"

namespace strata::testing {

// k x k windows, stride s, padding p both ways.
inline ops::Pool2dParams square_pool(int k, int s, int p, bool include_pad = true) {
  ops::Pool2dParams q;
  q.kernel_h = q.kernel_w = k;
  q.stride_h = q.stride_w = s;
  q.pad_h = q.pad_w = p;
  q.count_include_pad = include_pad;
  return q;
}

// The output sizes of pooling an input of sizes x with p.
inline Shape pool_out(const Shape& x, const ops::Pool2dParams& p) {
  return {x[0], x[1], (x[2] + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1,
          (x[3] + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1};
}

}  // namespace strata::testing
