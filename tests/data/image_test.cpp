// data/image.h: binary PGM/PPM decoding and image files told apart by content.
#include "strata/data/image.h"

#include <gtest/gtest.h>

#include "strata/data/jpeg.h"
#include "data_test_util.h"

namespace strata::data {
namespace {

using testing::TempDir;
using testing::write_file;

std::vector<uint8_t> bytes(const std::string& header, const std::vector<uint8_t>& pixels = {}) {
  std::vector<uint8_t> b(header.begin(), header.end());
  b.insert(b.end(), pixels.begin(), pixels.end());
  return b;
}

Tensor pnm(const std::vector<uint8_t>& b) { return decode_pnm(b.data(), b.size(), "'test.pnm'"); }

TEST(Image, DecodesPgmAndPpmWithComments) {
  const Tensor g = pnm(bytes("P5\n# made by hand\n3 2\n255\n", {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(g.sizes(), (Shape{1, 2, 3}));
  EXPECT_EQ(g.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
  // PPM: interleaved RGB in the file, planes (CHW) in the tensor.
  const Tensor c = pnm(bytes("P6 2 1 255\n", {10, 20, 30, 40, 50, 60}));
  EXPECT_EQ(c.sizes(), (Shape{3, 1, 2}));
  EXPECT_EQ(c.to_vector<uint8_t>(), (std::vector<uint8_t>{10, 40, 20, 50, 30, 60}));
}

TEST(Image, ASmallerMaxvalIsRescaledTo255) {
  // maxval 15: 15 is white, not almost black.
  EXPECT_EQ(pnm(bytes("P5 3 1 15\n", {0, 7, 15})).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 119, 255}));
}

TEST(Image, BadPgmHeadersSayWhatIsWrong) {
  // No pixels is not "not 8-bit".
  EXPECT_ERROR_MENTIONS(pnm(bytes("P5 0 0 255\n")), "the image has no pixels (0x0)");
  EXPECT_ERROR_MENTIONS(pnm(bytes("P5 4 0 255\n")), "no pixels (4x0)");
  EXPECT_ERROR_MENTIONS(pnm(bytes("P5 1 1 0\n", {0})), "maxval 0 is invalid");
  EXPECT_ERROR_MENTIONS(pnm(bytes("P5 1 1 65535\n", {0, 0})), "only 8-bit PGM/PPM is supported (maxval 65535");
  EXPECT_ERROR_MENTIONS(pnm(bytes("P5 2 2\n")), "no maxval");
  EXPECT_ERROR_MENTIONS(pnm(bytes("P5 x")), "no width");
  EXPECT_ERROR_MENTIONS(pnm(bytes("P5 99999999999999999999 1 255\n")), "width is larger than 2^24");
  EXPECT_ERROR_MENTIONS(pnm(bytes("P5 1 1 255")), "no whitespace after maxval");
  EXPECT_ERROR_MENTIONS(pnm(bytes("P6 2 2 255\n", {1, 2, 3})), "truncated PGM/PPM: 2x2x3 needs 12 bytes");
  EXPECT_ERROR_MENTIONS(pnm(bytes("P6 2 2 255\n", {1, 2, 3})), "'test.pnm'");
}

TEST(Image, FilesAreToldApartByContentAndNamedInErrors) {
  TempDir dir;
  Tensor img = Tensor::empty(Shape{3, 8, 8}, DType::u8);
  for (int64_t i = 0; i < img.numel(); ++i) img.data<uint8_t>()[i] = static_cast<uint8_t>(i * 5);
  write_file(dir / "photo.pgm", encode_jpeg(img));  // a JPEG, whatever its name
  EXPECT_EQ(read_image_file(dir / "photo.pgm").sizes(), (Shape{3, 8, 8}));
  write_file(dir / "grey.jpg", bytes("P5 2 2 255\n", {0, 1, 2, 3}));
  EXPECT_EQ(read_image_file(dir / "grey.jpg").sizes(), (Shape{1, 2, 2}));
  write_file(dir / "anim.gif", bytes("GIF89a"));
  EXPECT_ERROR_MENTIONS(read_image_file(dir / "anim.gif"), "anim.gif': not a JPEG, PNG or binary PGM/PPM image");
  write_file(dir / "empty.jpg", {});
  EXPECT_ERROR_MENTIONS(read_image_file(dir / "empty.jpg"), "the file is empty");
  EXPECT_ERROR_MENTIONS(read_image_file(dir.path()), "is a directory, not a regular file");
  EXPECT_ERROR_MENTIONS(read_image_file(dir / "absent.jpg"), "absent.jpg': no such file");
}

}  // namespace
}  // namespace strata::data
