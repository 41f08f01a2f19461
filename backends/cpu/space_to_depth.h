#pragma once
// space_to_depth and its adjoint (op_args.h) as loops over any strides. They move
// elements and compute nothing, so every dtype runs the loop of its width (all-zero bits
// are +0 in every dtype strata has).
#include <cstdint>

#include "strata/core/dtype_dispatch.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::loops {

namespace detail {

// One pass over the block tensor bt [N, K, Ho, Wo]: forward writes it from the image im
// [N, C, H, W], backward writes im from it (each image element sits in at most one block
// position, so nothing accumulates; one outside every block is zero).
template <class E>
void space_to_depth_pass(const ops::TensorView& im, const ops::TensorView& bt, const ops::SpaceToDepthParams& p,
                         bool forward) {
  const int64_t n_count = im.sizes[0], c_count = im.sizes[1], h_count = im.sizes[2], w_count = im.sizes[3];
  const int64_t k_count = bt.sizes[1], ho = bt.sizes[2], wo = bt.sizes[3], b = p.block;
  const int64_t is[4] = {im.strides[0], im.strides[1], im.strides[2], im.strides[3]};
  const int64_t bs[4] = {bt.strides[0], bt.strides[1], bt.strides[2], bt.strides[3]};
  E* imp = im.ptr<E>();
  E* btp = bt.ptr<E>();
  if (forward) {
    for (int64_t n = 0; n < n_count; ++n)
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j)
          for (int64_t k = 0; k < k_count; ++k) {
            const int64_t c = k % c_count, slot = k / c_count;
            const int64_t h = i * b + slot / b - p.pad_h, w = j * b + slot % b - p.pad_w;
            const bool inside = slot < b * b && h >= 0 && h < h_count && w >= 0 && w < w_count;
            btp[n * bs[0] + k * bs[1] + i * bs[2] + j * bs[3]] =
                inside ? imp[n * is[0] + c * is[1] + h * is[2] + w * is[3]] : E{0};
          }
    return;
  }
  for (int64_t n = 0; n < n_count; ++n)
    for (int64_t h = 0; h < h_count; ++h)
      for (int64_t w = 0; w < w_count; ++w)
        for (int64_t c = 0; c < c_count; ++c) {
          const int64_t i = (h + p.pad_h) / b, j = (w + p.pad_w) / b;
          const int64_t k = (((h + p.pad_h) % b) * b + (w + p.pad_w) % b) * c_count + c;
          imp[n * is[0] + c * is[1] + h * is[2] + w * is[3]] =
              i < ho && j < wo ? btp[n * bs[0] + k * bs[1] + i * bs[2] + j * bs[3]] : E{0};
        }
}

inline void space_to_depth_by_width(const ops::TensorView& im, const ops::TensorView& bt,
                                    const ops::SpaceToDepthParams& p, bool forward) {
  visit_bits(im.dtype, [&](auto e) { space_to_depth_pass<decltype(e)>(im, bt, p, forward); });
}

}  // namespace detail

inline void space_to_depth_fwd(const ops::SpaceToDepthArgs& a) { detail::space_to_depth_by_width(a.x, a.y, a.p, true); }
inline void space_to_depth_bwd(const ops::SpaceToDepthBwdArgs& a) {
  detail::space_to_depth_by_width(a.dx, a.dy, a.p, false);
}

}  // namespace strata::backends::loops
