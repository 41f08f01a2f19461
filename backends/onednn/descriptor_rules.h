#pragma once
// The onednn backend's decisions that are not oneDNN calls: the dims and strides it gives
// a view's memory descriptor, and which form of convolution forward it plans. context.h and
// conv.cpp decide with these, and so does a program that writes the same primitives out
// (codegen/), so the two cannot drift apart. No oneDNN header here.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "strata/ops/table/op_args.h"

namespace strata::backends::onednn {

// A memory descriptor's plain layout: dims and strides in elements.
struct DescLayout {
  std::vector<int64_t> dims, strides;
};

// Explicit dims and strides as oneDNN takes them (md_strided): a size-1 dim without a
// usable stride gets one past the others.
inline DescLayout strided_layout(std::vector<int64_t> dims, std::vector<int64_t> strides) {
  int64_t span = 1;
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] != 1) span = std::max<int64_t>(span, strides[d] * dims[d]);
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] == 1 && strides[d] < 1) strides[d] = span;
  return {std::move(dims), std::move(strides)};
}

// A view's strides with those of size-1 dims made its layout's canonical ones when it is
// contiguous or channels-last (as they are, otherwise).
inline Shape canonical_strides(const ops::TensorView& v) {
  if (v.is_contiguous()) return contiguous_strides(v.sizes);
  if (v.is_channels_last()) return channels_last_strides(v.sizes);
  return v.strides;
}

// The layout of a view's descriptor (md_of): rank 0 becomes [1]; contiguous and
// channels-last views get their layout's canonical strides (size-1 dims included), so they
// match oneDNN's plain formats exactly; any other view its own strides, a size-1 dim's
// replaced by one past the others.
inline DescLayout view_layout(const ops::TensorView& v) {
  if (v.dim() == 0) return {{1}, {1}};
  std::vector<int64_t> dims(v.sizes.begin(), v.sizes.end());
  if (v.is_contiguous() || v.is_channels_last()) {
    const Shape st = canonical_strides(v);
    return {std::move(dims), std::vector<int64_t>(st.begin(), st.end())};
  }
  std::vector<int64_t> strides(v.strides.begin(), v.strides.end());
  int64_t span = 1;
  for (int d = 0; d < v.dim(); ++d)
    if (v.sizes[d] != 1) span = std::max<int64_t>(span, v.strides[d] * v.sizes[d]);
  for (int d = 0; d < v.dim(); ++d)
    if (v.sizes[d] == 1) strides[d] = span;
  return {std::move(dims), std::move(strides)};
}

// Global average pooling's output [N,C] as [N,C,1,1] with the same strides. Next to a
// channels-last plane a contiguous [N,C] is described as channels-last too (the same
// bytes), so oneDNN picks its JIT kernel rather than the reference one.
inline DescLayout nc11_layout(const ops::TensorView& v, const ops::TensorView& plane) {
  const int64_t c = v.sizes[1];
  if (plane.is_channels_last() && !plane.is_contiguous() && v.is_contiguous())
    return strided_layout({v.sizes[0], c, 1, 1}, {c, 1, c, c});
  return strided_layout({v.sizes[0], c, 1, 1}, {v.strides[0], v.strides[1], 1, 1});
}

// The smallest output plane (pixels) a Winograd convolution runs on (conv.cpp says why).
inline constexpr int64_t kWinogradPlane = 14 * 14;

// Which convolution forward conv2d_fwd plans for a call (conv.cpp has the measurements):
struct ConvForwardForm {
  bool winograd = false;    // try algorithm::convolution_winograd first (the direct one if refused)
  bool inference = false;   // prop_kind::forward_inference (versioned weights)
  bool gather_1x1 = false;  // a 1x1 stride-s convolution run as the stride-1 one of the pixels it reads
};
inline ConvForwardForm conv_forward_form(const ops::Conv2dFwdArgs& a) {
  ConvForwardForm f;
  f.winograd = a.w_version && a.p.winograd && a.x.dtype == DType::f32 && a.p.groups == 1 && a.w.sizes[2] == 3 &&
               a.w.sizes[3] == 3 && a.p.stride_h == 1 && a.p.stride_w == 1 && a.p.dilation_h == 1 &&
               a.p.dilation_w == 1 && a.y.sizes[2] * a.y.sizes[3] >= kWinogradPlane;
  f.inference = a.w_version && a.x.dim() == 4 && (a.x.is_channels_last() || f.winograd);
  f.gather_1x1 = f.inference && a.p.groups == 1 && a.w.sizes[2] == 1 && a.w.sizes[3] == 1 &&
                 (a.p.stride_h > 1 || a.p.stride_w > 1) && a.p.pad_h == 0 && a.p.pad_w == 0 &&
                 a.p.dilation_h == 1 && a.p.dilation_w == 1;
  return f;
}

// oneDNN 2.6's reorder of 1x1 weights from its blocked ABcd16b16a to plain [O][I] slows down
// several-fold once a plain row is 4 KiB or more (docs/tuning.md): conv2d_bwd_weight then unblocks
// the weight gradient with its own loop (conv.cpp: unblock_1x1) where oneDNN chose that layout for
// plain f32 weights of this shape.
inline constexpr int64_t kUnblockFromInputs = 1024;
inline bool unblock_1x1_shape(const ops::TensorView& w, int groups) {
  return groups == 1 && w.dtype == DType::f32 && w.sizes[2] == 1 && w.sizes[3] == 1 && w.sizes[0] % 16 == 0 &&
         w.sizes[1] % 16 == 0 && w.sizes[1] >= kUnblockFromInputs;
}

// The gathered source of a 1x1 strided convolution (ConvForwardForm::gather_1x1): x's
// pixels as an [N, C, OH, OW] view (y's sizes) with x's strides times the stride along H
// and W. oneDNN may refuse it (rows overlapping the next ones' span): the plain form then.
inline DescLayout strided_pixels_layout(const ops::TensorView& x, const ops::TensorView& y,
                                        const ops::Conv2dParams& p) {
  const Shape st = canonical_strides(x);
  return strided_layout({y.sizes[0], x.sizes[1], y.sizes[2], y.sizes[3]},
                        {st[0], st[1], st[2] * p.stride_h, st[3] * p.stride_w});
}

}  // namespace strata::backends::onednn
