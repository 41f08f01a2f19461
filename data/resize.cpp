#include "strata/data/resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "strata/core/error.h"

namespace strata::data {

namespace {

struct Tap {
  int64_t i0, i1;
  float w1;  // weight of i1; i0 gets 1 - w1
};

std::vector<Tap> taps(int64_t in, int64_t out) {
  std::vector<Tap> t(static_cast<size_t>(out));
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (int64_t x = 0; x < out; ++x) {
    double s = (static_cast<double>(x) + 0.5) * scale - 0.5;
    if (s < 0) s = 0;
    int64_t i0 = static_cast<int64_t>(s);
    if (i0 > in - 1) i0 = in - 1;
    const int64_t i1 = std::min(i0 + 1, in - 1);
    t[x] = {i0, i1, static_cast<float>(s - static_cast<double>(i0))};
  }
  return t;
}

// Resizes the window `box` of the image; the whole image is the window {0, 0, H, W}.
template <class T>
void resize_impl(const T* src, int64_t C, int64_t H, int64_t W, PixelLayout layout, const CropBox& box, T* dst,
                 int64_t OH, int64_t OW) {
  STRATA_CHECK(C > 0 && H > 0 && W > 0 && OH > 0 && OW > 0, "resize_bilinear: sizes must be positive, got [", C,
               ",", H, ",", W, "] -> [", C, ",", OH, ",", OW, "]");
  STRATA_CHECK(box.top >= 0 && box.left >= 0 && box.height > 0 && box.width > 0 && box.top + box.height <= H &&
                   box.left + box.width <= W,
               "resize_bilinear_crop: window (top ", box.top, ", left ", box.left, ", ", box.height, "x", box.width,
               ") does not lie within the ", H, "x", W, " image");
  const int64_t sc = layout == PixelLayout::chw ? H * W : 1;
  const int64_t sh = layout == PixelLayout::chw ? W : W * C;
  const int64_t sw = layout == PixelLayout::chw ? 1 : C;
  const std::vector<Tap> ty = taps(box.height, OH), tx = taps(box.width, OW);
  const T* origin = src + box.top * sh + box.left * sw;
  // One output value from rows r0, r1 of one channel (the same arithmetic in either loop order below).
  auto sample = [&](const T* r0, const T* r1, const Tap& t, float wy) -> T {
    const float wx = t.w1;
    const float top = static_cast<float>(r0[t.i0 * sw]) * (1 - wx) + static_cast<float>(r0[t.i1 * sw]) * wx;
    const float bot = static_cast<float>(r1[t.i0 * sw]) * (1 - wx) + static_cast<float>(r1[t.i1 * sw]) * wx;
    const float v = top * (1 - wy) + bot * wy;
    if constexpr (std::is_same_v<T, uint8_t>) {
      // v is a convex combination of u8 values, so in [0, 255]: adding 0.5 in double and truncating
      // rounds exactly as std::lround does, without its library call per value (half the crop's time).
      return static_cast<uint8_t>(std::min(static_cast<double>(v) + 0.5, 255.0));
    } else {
      return v;
    }
  };
  if (layout == PixelLayout::hwc) {
    // Interleaved pixels (decoded JPEGs): the channels of a pixel together, reading each source pixel once.
    for (int64_t y = 0; y < OH; ++y) {
      const T* r0 = origin + ty[y].i0 * sh;
      const T* r1 = origin + ty[y].i1 * sh;
      for (int64_t x = 0; x < OW; ++x)
        for (int64_t c = 0; c < C; ++c) dst[(c * OH + y) * OW + x] = sample(r0 + c, r1 + c, tx[x], ty[y].w1);
    }
    return;
  }
  for (int64_t c = 0; c < C; ++c) {
    const T* plane = origin + c * sc;
    T* out = dst + c * OH * OW;
    for (int64_t y = 0; y < OH; ++y)
      for (int64_t x = 0; x < OW; ++x)
        out[y * OW + x] = sample(plane + ty[y].i0 * sh, plane + ty[y].i1 * sh, tx[x], ty[y].w1);
  }
}

}  // namespace

void resize_bilinear(const uint8_t* src, int64_t C, int64_t H, int64_t W, PixelLayout layout, uint8_t* dst,
                     int64_t OH, int64_t OW) {
  resize_impl(src, C, H, W, layout, CropBox{0, 0, H, W}, dst, OH, OW);
}

void resize_bilinear(const float* src, int64_t C, int64_t H, int64_t W, PixelLayout layout, float* dst, int64_t OH,
                     int64_t OW) {
  resize_impl(src, C, H, W, layout, CropBox{0, 0, H, W}, dst, OH, OW);
}

void resize_bilinear_crop(const uint8_t* src, int64_t C, int64_t H, int64_t W, PixelLayout layout,
                          const CropBox& box, uint8_t* dst, int64_t OH, int64_t OW) {
  resize_impl(src, C, H, W, layout, box, dst, OH, OW);
}

}  // namespace strata::data
