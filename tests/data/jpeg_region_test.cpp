// data/jpeg.h's decode_jpeg_region: the rows and columns it decodes hold exactly the pixels of a full
// decode, for 4:2:0, 4:4:4 and greyscale JPEGs of odd sizes and boxes at every edge; bad input is refused.
#include <gtest/gtest.h>

#include <random>

#include "strata/core/random.h"
#include "strata/data/jpeg.h"
#include "data_test_util.h"

namespace strata::data {
namespace {

// Smooth ramps plus noise, so that every 8x8 block differs and chroma varies.
Tensor picture(int64_t c, int64_t h, int64_t w, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(static_cast<size_t>(c * h * w));
  for (int64_t k = 0; k < c; ++k)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        v[(k * h + y) * w + x] = static_cast<uint8_t>((40 * k + 3 * x + 2 * y + uniform_below(rng, 40)) % 256);
  return Tensor::from_vector(v, Shape{c, h, w});
}

void expect_region_matches(const std::vector<uint8_t>& jpg, const CropBox& box) {
  const DecodedImage full = decode_jpeg(jpg.data(), jpg.size(), "full");
  DecodedImage part;
  const CropBox at = decode_jpeg_region(jpg.data(), jpg.size(), "part", full.height, full.width, box, part);
  ASSERT_EQ(part.height, at.height);
  ASSERT_EQ(part.width, at.width);
  ASSERT_TRUE(at.top <= box.top && at.left <= box.left && at.top + at.height >= box.top + box.height &&
              at.left + at.width >= box.left + box.width);
  for (int64_t y = box.top; y < box.top + box.height; ++y)
    for (int64_t x = box.left * 3; x < (box.left + box.width) * 3; ++x)
      ASSERT_EQ(part.pixels[(y - at.top) * at.width * 3 + x - at.left * 3], full.pixels[y * full.width * 3 + x])
          << "box (" << box.top << "," << box.left << ") " << box.height << "x" << box.width << " row " << y
          << " byte " << x;
}

TEST(JpegRegion, SamePixelsAsAFullDecode) {
  struct Case {
    int64_t c, h, w;
    JpegChroma chroma;
  };
  for (const Case& k : {Case{3, 61, 93, JpegChroma::half}, Case{3, 40, 37, JpegChroma::full},
                        Case{1, 45, 50, JpegChroma::half}, Case{3, 375, 500, JpegChroma::half}}) {
    SCOPED_TRACE(std::to_string(k.c) + "x" + std::to_string(k.h) + "x" + std::to_string(k.w));
    const std::vector<uint8_t> jpg = encode_jpeg(picture(k.c, k.h, k.w, 5), 90, k.chroma);
    expect_region_matches(jpg, {0, 0, k.h, k.w});             // the whole image
    expect_region_matches(jpg, {k.h - 1, k.w - 1, 1, 1});     // the last pixel
    expect_region_matches(jpg, {0, k.w - 5, k.h, 5});         // the right edge
    expect_region_matches(jpg, {k.h / 2, 3, k.h - k.h / 2, 7});  // the bottom half, near the left edge
    std::mt19937_64 rng(k.h);
    for (int n = 0; n < 20; ++n) {
      const auto h = 1 + static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(k.h)));
      const auto w = 1 + static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(k.w)));
      const auto top = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(k.h - h + 1)));
      const auto left = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(k.w - w + 1)));
      expect_region_matches(jpg, {top, left, h, w});
    }
  }
}

TEST(JpegRegion, RefusesBadInput) {
  std::vector<uint8_t> jpg = encode_jpeg(picture(3, 40, 48, 1), 90, JpegChroma::half);
  DecodedImage out;
  EXPECT_ERROR_MENTIONS(decode_jpeg_region(jpg.data(), jpg.size(), "a.jpg", 40, 48, {0, 40, 8, 9}, out),
                        "is not within the 40x48 image a.jpg");
  EXPECT_ERROR_MENTIONS(decode_jpeg_region(jpg.data(), jpg.size(), "a.jpg", 40, 48, {36, 0, 8, 8}, out),
                        "is not within the 40x48 image a.jpg");
  EXPECT_ERROR_MENTIONS(decode_jpeg_region(jpg.data(), jpg.size(), "a.jpg", 60, 48, {44, 0, 8, 8}, out),
                        "corrupt JPEG a.jpg");  // a wrong height: rows past the bottom
  const std::vector<uint8_t> cut(jpg.begin(), jpg.begin() + static_cast<std::ptrdiff_t>(jpg.size() / 2));
  EXPECT_ERROR_MENTIONS(decode_jpeg_region(cut.data(), cut.size(), "cut.jpg", 40, 48, {30, 0, 10, 48}, out),
                        "corrupt JPEG cut.jpg");
  EXPECT_ERROR_MENTIONS(decode_jpeg_region(jpg.data(), 0, "empty.jpg", 40, 48, {0, 0, 1, 1}, out),
                        "file is empty");
  EXPECT_ERROR_MENTIONS(jpeg_dimensions(jpg.data(), 10, "short.jpg"), "corrupt JPEG short.jpg");
  EXPECT_EQ(jpeg_dimensions(jpg.data(), jpg.size(), "a.jpg"), (std::pair<int64_t, int64_t>{40, 48}));
  // CMYK (print files; a few in ImageNet): refused by every decoder, naming the file.
  const std::vector<uint8_t> cmyk = encode_jpeg(picture(4, 16, 16, 2), 90);
  EXPECT_ERROR_MENTIONS(jpeg_dimensions(cmyk.data(), cmyk.size(), "c.jpg"), "JPEG c.jpg is in CMYK");
  EXPECT_ERROR_MENTIONS(decode_jpeg(cmyk.data(), cmyk.size(), "c.jpg"), "JPEG c.jpg is in CMYK");
  EXPECT_ERROR_MENTIONS(decode_jpeg_region(cmyk.data(), cmyk.size(), "c.jpg", 16, 16, {0, 0, 4, 4}, out),
                        "JPEG c.jpg is in CMYK");
}

}  // namespace
}  // namespace strata::data
