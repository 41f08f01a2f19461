#include "strata/data/idx.h"

#include <gtest/gtest.h>

#include "strata/data/file_io.h"
#include "data_test_util.h"

namespace strata::data {
namespace {

using testing::idx_bytes;
using testing::TempDir;
using testing::write_file;

std::vector<uint8_t> pixels(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  return v;
}

void expect_images(const Tensor& t, int64_t n, int64_t rows, int64_t cols) {
  ASSERT_EQ(t.dtype(), DType::u8);
  ASSERT_EQ(t.sizes(), (Shape{n, 1, rows, cols}));
  EXPECT_EQ(t.to_vector<uint8_t>(), pixels(static_cast<size_t>(n * rows * cols)));
}

TEST(Idx, ReadsPlainImagesAndLabels) {
  TempDir dir;
  write_file(dir / "img", idx_bytes({3, 4, 5}, pixels(60)));
  write_file(dir / "lab", idx_bytes({3}, {0, 9, 4}));
  expect_images(read_idx_images(dir / "img"), 3, 4, 5);
  const Tensor y = read_idx_labels(dir / "lab");
  EXPECT_EQ(y.dtype(), DType::i64);
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{0, 9, 4}));
}

TEST(Idx, ReadsGzipImagesAndLabels) {
  TempDir dir;
  write_file(dir / "img.gz", testing::gzip_bytes(idx_bytes({2, 28, 28}, pixels(2 * 28 * 28))));
  write_file(dir / "lab.gz", testing::gzip_bytes(idx_bytes({2}, {7, 1})));
  expect_images(read_idx_images(dir / "img.gz"), 2, 28, 28);
  const InMemoryDataset ds = read_idx_dataset(dir / "img.gz", dir / "lab.gz", "tiny");
  EXPECT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.image_shape(), (Shape{1, 28, 28}));
  const Example ex = ds.get(1);
  EXPECT_EQ(ex.target.to_vector<int64_t>(), std::vector<int64_t>{1});
  EXPECT_EQ(ex.image.sizes(), (Shape{1, 28, 28}));
  EXPECT_EQ(ex.image.to_vector<uint8_t>()[0], pixels(2 * 28 * 28)[28 * 28]);
}

TEST(Idx, ReadsConcatenatedGzipMembers) {
  TempDir dir;
  const std::vector<uint8_t> raw = idx_bytes({2, 3, 3}, pixels(18));
  const std::vector<uint8_t> a(raw.begin(), raw.begin() + 10), b(raw.begin() + 10, raw.end());
  std::vector<uint8_t> gz = testing::gzip_bytes(a);
  const std::vector<uint8_t> gz2 = testing::gzip_bytes(b);
  gz.insert(gz.end(), gz2.begin(), gz2.end());
  write_file(dir / "img.gz", gz);
  expect_images(read_idx_images(dir / "img.gz"), 2, 3, 3);
}

TEST(Idx, LoadsMnistDirectoryLayout) {
  TempDir dir;
  write_file(dir / "t10k-images-idx3-ubyte.gz", testing::gzip_bytes(idx_bytes({2, 2, 2}, pixels(8))));
  write_file(dir / "t10k-labels-idx1-ubyte", idx_bytes({2}, {3, 5}));
  const InMemoryDataset ds = load_fashion_mnist(dir.path(), Split::test);
  EXPECT_EQ(ds.name(), "fashion-mnist test");
  EXPECT_EQ(ds.labels().to_vector<int64_t>(), (std::vector<int64_t>{3, 5}));
  EXPECT_ERROR_MENTIONS(load_fashion_mnist(dir.path(), Split::train), "train-images-idx3-ubyte");
}

TEST(Idx, MissingFileNamesIt) {
  TempDir dir;
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "nope-images"), "nope-images");
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "nope-images"), "no such file");
  EXPECT_ERROR_MENTIONS(read_idx_images(dir.path()), "not a regular file");
}

TEST(Idx, TruncatedFileIsAnError) {
  TempDir dir;
  std::vector<uint8_t> b = idx_bytes({3, 4, 5}, pixels(60));
  b.pop_back();
  write_file(dir / "short-images", b);
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "short-images"), "short-images");
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "short-images"), "truncated");
  write_file(dir / "header-only", {0, 0, 8, 3, 0, 0});
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "header-only"), "truncated header");
  write_file(dir / "empty", {});
  EXPECT_ERROR_MENTIONS(read_idx_labels(dir / "empty"), "empty");
}

TEST(Idx, TrailingBytesAreAnError) {
  TempDir dir;
  std::vector<uint8_t> b = idx_bytes({3}, {1, 2, 3});
  b.push_back(0);
  write_file(dir / "long-labels", b);
  EXPECT_ERROR_MENTIONS(read_idx_labels(dir / "long-labels"), "long-labels");
  EXPECT_ERROR_MENTIONS(read_idx_labels(dir / "long-labels"), "longer");
}

TEST(Idx, BadMagicIsAnError) {
  TempDir dir;
  std::vector<uint8_t> b = idx_bytes({3, 4, 5}, pixels(60));
  b[0] = 0x12;
  write_file(dir / "bad-images", b);
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "bad-images"), "bad magic");
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "bad-images"), "bad-images");
  // A label file given as images: 1 dimension where 3 are expected.
  write_file(dir / "labels-as-images", idx_bytes({3}, {1, 2, 3}));
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "labels-as-images"), "bad magic");
  // Element type 0x0D (float) is not supported.
  b = idx_bytes({1}, {0, 0, 0, 0});
  b[2] = 0x0D;
  write_file(dir / "float-labels", b);
  EXPECT_ERROR_MENTIONS(read_idx_labels(dir / "float-labels"), "unsupported element type");
}

TEST(Idx, ZeroSizedDimensionIsAnError) {
  TempDir dir;
  write_file(dir / "zero-rows", idx_bytes({2, 0, 5}, {}));
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "zero-rows"), "has size 0");
}

TEST(Idx, HugeDimsAreTruncationNotOverflow) {
  TempDir dir;
  write_file(dir / "huge", idx_bytes({0x7fffffff, 0x7fffffff, 0x7fffffff}, pixels(10)));
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "huge"), "truncated");
}

TEST(Idx, CountMismatchNamesBothFiles) {
  TempDir dir;
  write_file(dir / "img3", idx_bytes({3, 2, 2}, pixels(12)));
  write_file(dir / "lab2", idx_bytes({2}, {1, 2}));
  EXPECT_ERROR_MENTIONS(read_idx_dataset(dir / "img3", dir / "lab2", "x"), "img3");
  EXPECT_ERROR_MENTIONS(read_idx_dataset(dir / "img3", dir / "lab2", "x"), "lab2");
}

TEST(Idx, LabelOutOfRangeIsAnError) {
  TempDir dir;
  write_file(dir / "lab", idx_bytes({3}, {1, 10, 2}));
  EXPECT_ERROR_MENTIONS(read_idx_labels(dir / "lab"), "label 10 of item 1");
  EXPECT_NO_THROW(read_idx_labels(dir / "lab", 11));
}

TEST(Idx, CorruptGzipIsAnError) {
  TempDir dir;
  const std::vector<uint8_t> gz = testing::gzip_bytes(idx_bytes({4, 16, 16}, pixels(1024)));
  write_file(dir / "cut.gz", std::vector<uint8_t>(gz.begin(), gz.begin() + gz.size() / 2));
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "cut.gz"), "truncated gzip");
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "cut.gz"), "cut.gz");
  std::vector<uint8_t> bad = gz;
  for (size_t i = 20; i < 40; ++i) bad[i] ^= 0x5a;
  write_file(dir / "bad.gz", bad);
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "bad.gz"), "bad.gz");
  std::vector<uint8_t> trailing = gz;
  trailing.insert(trailing.end(), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20});
  write_file(dir / "trailing.gz", trailing);
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "trailing.gz"), "trailing.gz");
}

TEST(Idx, AGzipFileInflatesOnlyAsFarAsItsHeaderAllows) {
  // 1x4x4 images followed by 16 MB of zeros: about 16 KB compressed. The reader stops
  // one byte past what the dims need (the message says "at least"), instead of
  // inflating everything and then finding the file too long.
  TempDir dir;
  std::vector<uint8_t> raw = idx_bytes({1, 4, 4}, pixels(16));
  raw.resize(raw.size() + (size_t{16} << 20), 0);
  const std::vector<uint8_t> gz = testing::gzip_bytes(raw);
  write_file(dir / "bomb.gz", gz);
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "bomb.gz"), "longer than its dims say");
  EXPECT_ERROR_MENTIONS(read_idx_images(dir / "bomb.gz"), "need 16 data bytes but the file has at least 17");
  // The same bound inside gunzip itself.
  EXPECT_EQ(gunzip(gz, "bomb", 100).size(), 101u);
  EXPECT_EQ(gunzip(testing::gzip_bytes(pixels(50)), "small", 100), pixels(50));
}

}  // namespace
}  // namespace strata::data
