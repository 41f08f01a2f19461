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
  // Separable: each source row the output needs is interpolated horizontally once, into a cache of two
  // rows (C x OW floats each, the `top` and `bot` of the 2-D formula), then pairs of rows vertically.
  // Each value sees the same products and sums, in the same float order, as the direct formula
  // top * (1 - wy) + bot * wy; rows shared by neighbouring outputs (enlarging) are computed once.
  std::vector<float> cache(static_cast<size_t>(2 * C * OW));
  int64_t tag[2] = {-1, -1};  // the source row each half of the cache holds
  auto fill = [&](int k, int64_t r) {
    tag[k] = r;
    float* h = cache.data() + k * C * OW;
    const T* line = origin + r * sh;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t x = 0; x < OW; ++x) {
        const Tap& t = tx[x];
        const float wx = t.w1;
        h[c * OW + x] = static_cast<float>(line[c * sc + t.i0 * sw]) * (1 - wx) +
                        static_cast<float>(line[c * sc + t.i1 * sw]) * wx;
      }
  };
  auto find = [&](int64_t r) { return tag[0] == r ? 0 : tag[1] == r ? 1 : -1; };
  for (int64_t y = 0; y < OH; ++y) {
    const float wy = ty[y].w1;
    int k0 = find(ty[y].i0);
    if (k0 < 0) fill(k0 = find(ty[y].i1) == 0 ? 1 : 0, ty[y].i0);  // keep the half holding i1
    int k1 = find(ty[y].i1);
    if (k1 < 0) fill(k1 = 1 - k0, ty[y].i1);
    const float* top = cache.data() + k0 * C * OW;
    const float* bot = cache.data() + k1 * C * OW;
    for (int64_t c = 0; c < C; ++c) {
      T* out = dst + (c * OH + y) * OW;
      const float* a = top + c * OW;
      const float* b = bot + c * OW;
      for (int64_t x = 0; x < OW; ++x) {
        const float v = a[x] * (1 - wy) + b[x] * wy;
        if constexpr (std::is_same_v<T, uint8_t>) {
          // v is a convex combination of u8 values, so in [0, 255]: adding 0.5 in double and truncating
          // rounds exactly as std::lround does, without its library call per value.
          out[x] = static_cast<uint8_t>(std::min(static_cast<double>(v) + 0.5, 255.0));
        } else {
          out[x] = v;
        }
      }
    }
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
