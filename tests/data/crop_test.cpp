// data/crop.h: torchvision's RandomResizedCrop boxes (hand-computed where the draws cannot matter,
// replayed draw by draw where they do), Resize(shorter side) + CenterCrop, the cropped resize against
// crop-then-resize and the 2-D formula written out, and refused parameters.
#include "strata/data/crop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "strata/core/random.h"
#include "data_test_util.h"

namespace strata::data {
namespace {

CropBox rrc_box(RandomResizedCrop p, int64_t h, int64_t w, uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  return random_resized_crop_box(p, h, w, rng);
}

TEST(RandomResizedCrop, WholeImageWhenScaleAndRatioAreOne) {
  RandomResizedCrop p;
  p.scale_min = p.scale_max = 1.0;
  p.ratio_min = p.ratio_max = 1.0;
  for (uint64_t seed = 0; seed < 5; ++seed) EXPECT_EQ(rrc_box(p, 8, 8, seed), (CropBox{0, 0, 8, 8}));
}

TEST(RandomResizedCrop, FixedSizeBoxVisitsEveryPosition) {
  RandomResizedCrop p;
  p.scale_min = p.scale_max = 0.25;  // 16 of 64 pixels: a 4x4 box
  p.ratio_min = p.ratio_max = 1.0;
  std::set<std::pair<int64_t, int64_t>> seen;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const CropBox b = rrc_box(p, 8, 8, seed);
    ASSERT_EQ(b.height, 4);
    ASSERT_EQ(b.width, 4);
    ASSERT_TRUE(b.top >= 0 && b.top <= 4 && b.left >= 0 && b.left <= 4) << b.top << "," << b.left;
    seen.emplace(b.top, b.left);
  }
  EXPECT_EQ(seen.size(), 25u);  // uniform over 0..4 in each direction
}

TEST(RandomResizedCrop, FallbackClampsTheRatioAndCentres) {
  RandomResizedCrop p;
  p.scale_min = p.scale_max = 1.0;
  p.ratio_min = p.ratio_max = 1.0;
  // 6x10: a square of area 60 (side round(7.75) = 8) never fits, so the central crop of the widest
  // ratio-1 box: 6x6 at left (10 - 6) / 2 = 2.
  EXPECT_EQ(rrc_box(p, 6, 10), (CropBox{0, 2, 6, 6}));
  EXPECT_EQ(rrc_box(p, 10, 6), (CropBox{2, 0, 6, 6}));
  EXPECT_EQ(rrc_box(p, 7, 10), (CropBox{0, 1, 7, 7}));  // (10 - 7) // 2 = 1: floor, as torchvision
  // A ratio range that holds the image's own: the whole image (an area-60 box of ratio within [1/2, 2]
  // fits 6x10 only at ratio exactly 5/3, which no draw hits).
  p.ratio_min = 0.5;
  p.ratio_max = 2.0;
  EXPECT_EQ(rrc_box(p, 6, 10), (CropBox{0, 0, 6, 10}));
}

TEST(RandomResizedCrop, ReplaysTorchvisionDrawOrder) {
  const RandomResizedCrop p;  // ImageNet's defaults
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::mt19937_64 rng(seed);
    const int64_t H = 375, W = 500;
    // By hand: area fraction, then log-ratio, rounded to nearest (ties to even), then top, then left.
    CropBox want{};
    bool found = false;
    for (int k = 0; k < 10 && !found; ++k) {
      const double area = H * W * (0.08 + (1.0 - 0.08) * uniform01(rng));
      const double lr = std::log(3.0 / 4.0) + (std::log(4.0 / 3.0) - std::log(3.0 / 4.0)) * uniform01(rng);
      const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(area * std::exp(lr))));
      const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(area / std::exp(lr))));
      if (w > 0 && w <= W && h > 0 && h <= H) {
        const auto top = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(H - h + 1)));
        want = CropBox{top, static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(W - w + 1))), h, w};
        found = true;
      }
    }
    ASSERT_TRUE(found);
    EXPECT_EQ(rrc_box(p, H, W, seed), want) << "seed " << seed;
  }
}

TEST(ResizeCenterCrop, ShorterSideAndCentralBox) {
  // torchvision Resize(256): int(256 * 500 / 375) = int(341.33) = 341.
  EXPECT_EQ(resize_shorter_side(375, 500, 256), (std::pair<int64_t, int64_t>{256, 341}));
  EXPECT_EQ(resize_shorter_side(500, 375, 256), (std::pair<int64_t, int64_t>{341, 256}));
  EXPECT_EQ(resize_shorter_side(300, 300, 256), (std::pair<int64_t, int64_t>{256, 256}));
  EXPECT_EQ(resize_shorter_side(2, 3, 5), (std::pair<int64_t, int64_t>{5, 7}));  // int(7.5)
  // Offsets round half to even, as Python's round(): 31 / 2 = 15.5 -> 16, 33 / 2 = 16.5 -> 16.
  EXPECT_EQ(center_crop_box(255, 300, 224, 224), (CropBox{16, 38, 224, 224}));
  EXPECT_EQ(center_crop_box(257, 224, 224, 224), (CropBox{16, 0, 224, 224}));
  EXPECT_ERROR_MENTIONS(center_crop_box(100, 300, 224, 224), "cannot crop 224x224 from a 100x300");
}

TEST(ResizeCenterCrop, PixelsOfTheCentralWindow) {
  // 4x6 ramp, shorter side already 4: no resampling, then the central 2x2 at (1, 2).
  std::vector<uint8_t> src(24);
  for (int k = 0; k < 24; ++k) src[k] = static_cast<uint8_t>(10 * k);
  std::vector<uint8_t> dst(4), scratch;
  std::mt19937_64 rng(1);
  apply_crop_geometry(ResizeCenterCrop{4, 2}, src.data(), 1, 4, 6, PixelLayout::chw, dst.data(), rng, scratch);
  EXPECT_EQ(dst, (std::vector<uint8_t>{80, 90, 140, 150}));  // rows 1, 2; columns 2, 3
}

// The 2-D bilinear formula written out directly (half-pixel centres, clamped), per output value: what
// resize.cpp's separable passes must reproduce bit for bit.
std::vector<uint8_t> direct_bilinear(const std::vector<uint8_t>& chw, int64_t C, int64_t H, int64_t W, int64_t OH,
                                     int64_t OW) {
  auto tap = [](int64_t x, int64_t in, int64_t out) {
    double s = std::max(0.0, (static_cast<double>(x) + 0.5) * static_cast<double>(in) / static_cast<double>(out) -
                                 0.5);
    const int64_t i0 = std::min(static_cast<int64_t>(s), in - 1);
    return std::tuple{i0, std::min(i0 + 1, in - 1), static_cast<float>(s - static_cast<double>(i0))};
  };
  std::vector<uint8_t> out(static_cast<size_t>(C * OH * OW));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < OH; ++y)
      for (int64_t x = 0; x < OW; ++x) {
        const auto [y0, y1, wy] = tap(y, H, OH);
        const auto [x0, x1, wx] = tap(x, W, OW);
        auto at = [&](int64_t r, int64_t q) { return static_cast<float>(chw[(c * H + r) * W + q]); };
        const float top = at(y0, x0) * (1 - wx) + at(y0, x1) * wx;
        const float bot = at(y1, x0) * (1 - wx) + at(y1, x1) * wx;
        out[(c * OH + y) * OW + x] = static_cast<uint8_t>(std::lround(top * (1 - wy) + bot * wy));
      }
  return out;
}

TEST(ResizeBilinearCrop, EqualsCropThenResize) {
  // Odd sizes, HWC and CHW, shrinking and enlarging windows.
  const int64_t C = 3, H = 13, W = 17;
  std::mt19937_64 rng(3);
  std::vector<uint8_t> chw(static_cast<size_t>(C * H * W)), hwc(chw.size());
  for (auto& v : chw) v = static_cast<uint8_t>(rng());
  for (int64_t c = 0; c < C; ++c)
    for (int64_t p = 0; p < H * W; ++p) hwc[p * C + c] = chw[c * H * W + p];
  for (const CropBox box : {CropBox{2, 3, 7, 11}, CropBox{0, 0, 13, 17}, CropBox{12, 16, 1, 1}, CropBox{5, 1, 8, 5}})
    for (const auto& [oh, ow] : {std::pair<int64_t, int64_t>{5, 9}, {19, 23}, {1, 1}}) {
      std::vector<uint8_t> window(static_cast<size_t>(C * box.height * box.width));
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 0; y < box.height; ++y)
          for (int64_t x = 0; x < box.width; ++x)
            window[(c * box.height + y) * box.width + x] = chw[(c * H + box.top + y) * W + box.left + x];
      std::vector<uint8_t> want(static_cast<size_t>(C * oh * ow)), got_chw(want.size()), got_hwc(want.size());
      resize_bilinear(window.data(), C, box.height, box.width, PixelLayout::chw, want.data(), oh, ow);
      EXPECT_EQ(want, direct_bilinear(window, C, box.height, box.width, oh, ow));
      resize_bilinear_crop(chw.data(), C, H, W, PixelLayout::chw, box, got_chw.data(), oh, ow);
      resize_bilinear_crop(hwc.data(), C, H, W, PixelLayout::hwc, box, got_hwc.data(), oh, ow);
      EXPECT_EQ(got_chw, want) << box.top << "," << box.left << " " << box.height << "x" << box.width;
      EXPECT_EQ(got_hwc, want) << box.top << "," << box.left << " " << box.height << "x" << box.width;
    }
  std::vector<uint8_t> out(4);
  EXPECT_ERROR_MENTIONS(resize_bilinear_crop(chw.data(), C, H, W, PixelLayout::chw, CropBox{10, 0, 4, 4},
                                             out.data(), 2, 2),
                        "does not lie within the 13x17 image");
}

TEST(CropGeometry, RefusesBadParameters) {
  auto rrc = [](auto edit) {
    RandomResizedCrop p;
    edit(p);
    return CropGeometry{p};
  };
  EXPECT_NO_THROW(check_crop_geometry(RandomResizedCrop{}));
  EXPECT_NO_THROW(check_crop_geometry(ResizeCenterCrop{}));
  EXPECT_ERROR_MENTIONS(check_crop_geometry(rrc([](auto& p) { p.size = 0; })), "size must be in 1..8192, got 0");
  EXPECT_ERROR_MENTIONS(check_crop_geometry(rrc([](auto& p) { p.scale_min = 0; })), "scale must satisfy");
  EXPECT_ERROR_MENTIONS(check_crop_geometry(rrc([](auto& p) { p.scale_min = 0.5, p.scale_max = 0.2; })),
                        "got (0.5, 0.2)");
  EXPECT_ERROR_MENTIONS(check_crop_geometry(rrc([](auto& p) { p.scale_max = 1.5; })), "scale must satisfy");
  EXPECT_ERROR_MENTIONS(check_crop_geometry(rrc([](auto& p) { p.ratio_min = -1; })), "ratio must satisfy");
  EXPECT_ERROR_MENTIONS(check_crop_geometry(rrc([](auto& p) { p.ratio_min = 2, p.ratio_max = 1; })),
                        "ratio must satisfy");
  EXPECT_ERROR_MENTIONS(check_crop_geometry(rrc([](auto& p) { p.ratio_max = INFINITY; })), "ratio must satisfy");
  EXPECT_ERROR_MENTIONS(check_crop_geometry(rrc([](auto& p) { p.scale_min = NAN; })), "scale must satisfy");
  EXPECT_ERROR_MENTIONS(check_crop_geometry(rrc([](auto& p) { p.attempts = 0; })), "attempts must be in 1..1000");
  EXPECT_ERROR_MENTIONS(check_crop_geometry(ResizeCenterCrop{200, 224}), "crop 224 is larger than");
  EXPECT_ERROR_MENTIONS(check_crop_geometry(ResizeCenterCrop{-1, 224}), "resize must be in 1..8192");
}

}  // namespace
}  // namespace strata::data
