// data/image.h: PNG (every colour type stb_image_write writes), binary PGM/PPM
// and JPEG decode to the pixels that were written, in CHW order; bad files are
// strata::Errors naming the file.
#include <stb_image_write.h>

#include "strata/data/file_io.h"
#include "strata/data/image.h"
#include "strata/data/jpeg.h"
#include "data_test_util.h"

namespace strata::data::testing {
namespace {

// h x w pixels of `comp` interleaved channels, every value distinct enough to catch
// a transposition or a channel swap.
std::vector<uint8_t> pattern(int h, int w, int comp) {
  std::vector<uint8_t> px(static_cast<size_t>(h * w * comp));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < comp; ++c) px[static_cast<size_t>((y * w + x) * comp + c)] = uint8_t(17 * y + 5 * x + 60 * c);
  return px;
}

std::filesystem::path write_png(const TempDir& dir, const std::string& name, int h, int w, int comp) {
  const auto path = dir / name;
  const std::vector<uint8_t> px = pattern(h, w, comp);
  EXPECT_NE(stbi_write_png(path.c_str(), w, h, comp, px.data(), w * comp), 0) << path;
  return path;
}

// The colour channels of pattern(h, w, comp) in CHW order.
void expect_pattern(const Tensor& t, int h, int w, int comp, int channels) {
  ASSERT_EQ(t.dtype(), DType::u8);
  ASSERT_EQ(t.sizes(), (Shape{channels, h, w}));
  const uint8_t* d = t.data<uint8_t>();
  const std::vector<uint8_t> px = pattern(h, w, comp);
  for (int c = 0; c < channels; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        ASSERT_EQ(d[(c * h + y) * w + x], px[static_cast<size_t>((y * w + x) * comp + c)])
            << "channel " << c << " y " << y << " x " << x;
}

TEST(ImageFile, PngRgbDecodesToChw) {
  TempDir dir;
  expect_pattern(read_image_file(write_png(dir, "rgb.png", 3, 5, 3)), 3, 5, 3, 3);
}

TEST(ImageFile, PngGreyIsOneChannel) {
  TempDir dir;
  expect_pattern(read_image_file(write_png(dir, "grey.png", 7, 4, 1)), 7, 4, 1, 1);
}

TEST(ImageFile, PngAlphaIsDropped) {
  TempDir dir;
  expect_pattern(read_image_file(write_png(dir, "rgba.png", 2, 6, 4)), 2, 6, 4, 3);
  expect_pattern(read_image_file(write_png(dir, "grey_alpha.png", 4, 3, 2)), 4, 3, 2, 1);
}

TEST(ImageFile, TheFormatComesFromTheContentNotTheName) {
  TempDir dir;
  const auto png = write_png(dir, "picture.jpg", 3, 3, 3);
  expect_pattern(read_image_file(png), 3, 3, 3, 3);
}

TEST(ImageFile, BinaryPgmAndPpm) {
  TempDir dir;
  std::vector<uint8_t> pgm = {'P', '5', '\n', '#', ' ', 'c', '\n', '4', ' ', '2', '\n', '2', '5', '5', '\n'};
  const std::vector<uint8_t> grey = pattern(2, 4, 1);
  pgm.insert(pgm.end(), grey.begin(), grey.end());
  write_file(dir / "a.pgm", pgm);
  expect_pattern(read_image_file(dir / "a.pgm"), 2, 4, 1, 1);

  std::vector<uint8_t> ppm = {'P', '6', ' ', '3', ' ', '2', ' ', '2', '5', '5', '\n'};
  const std::vector<uint8_t> rgb = pattern(2, 3, 3);
  ppm.insert(ppm.end(), rgb.begin(), rgb.end());
  write_file(dir / "a.ppm", ppm);
  expect_pattern(read_image_file(dir / "a.ppm"), 2, 3, 3, 3);
}

TEST(ImageFile, JpegGoesThroughLibjpegTurbo) {
  TempDir dir;
  Tensor img = Tensor::empty(Shape{3, 8, 8}, DType::u8);
  for (int64_t i = 0; i < img.numel(); ++i) img.data<uint8_t>()[i] = uint8_t(100 + (i % 8));
  write_file(dir / "a.jpg", encode_jpeg(img, 100));
  const Tensor t = read_image_file(dir / "a.jpg");
  ASSERT_EQ(t.sizes(), (Shape{3, 8, 8}));
  // The very pixels data/jpeg.h decodes, as the VOC reader sees them.
  const std::vector<uint8_t> bytes = encode_jpeg(img, 100);
  const Tensor ref = decode_jpeg_chw(bytes.data(), bytes.size(), "ref");
  EXPECT_EQ(t.to_vector<uint8_t>(), ref.to_vector<uint8_t>());
}

TEST(ImageFile, BadFilesNameTheFileAndTheProblem) {
  TempDir dir;
  EXPECT_ERROR_MENTIONS(read_image_file(dir / "missing.png"), "missing.png");
  write_file(dir / "notes.txt", {'h', 'e', 'l', 'l', 'o'});
  EXPECT_ERROR_MENTIONS(read_image_file(dir / "notes.txt"), "not a JPEG, PNG or binary PGM/PPM image");
  const auto png = write_png(dir, "whole.png", 16, 16, 3);
  std::vector<uint8_t> bytes = read_regular_file(png);
  bytes.resize(bytes.size() / 2);
  write_file(dir / "cut.png", bytes);
  EXPECT_ERROR_MENTIONS(read_image_file(dir / "cut.png"), "cut.png");
  EXPECT_ERROR_MENTIONS(read_image_file(dir / "cut.png"), "corrupt or truncated PNG");
  write_file(dir / "cut.pgm", {'P', '5', ' ', '9', ' ', '9', ' ', '2', '5', '5', '\n', 1, 2, 3});
  EXPECT_ERROR_MENTIONS(read_image_file(dir / "cut.pgm"), "PGM/PPM");
}

}  // namespace
}  // namespace strata::data::testing
