#include <gtest/gtest.h>

#include "strata/data/cifar10.h"
#include "strata/data/stl10.h"
#include "data_test_util.h"

namespace strata::data {
namespace {

using testing::TempDir;
using testing::write_file;

uint8_t cifar_pixel(int64_t item, int64_t i) { return static_cast<uint8_t>((item * 131 + i * 7) % 251); }

std::vector<uint8_t> cifar_records(int64_t first_item, const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> b;
  for (size_t r = 0; r < labels.size(); ++r) {
    b.push_back(labels[r]);
    for (int64_t i = 0; i < 3072; ++i) b.push_back(cifar_pixel(first_item + static_cast<int64_t>(r), i));
  }
  return b;
}

TEST(Cifar10, ReadsAndConcatenatesBatches) {
  TempDir dir;
  write_file(dir / "a.bin", cifar_records(0, {3, 9}));
  write_file(dir / "b.bin", cifar_records(2, {0, 5, 7}));
  const InMemoryDataset ds = read_cifar10_batches({dir / "a.bin", dir / "b.bin"}, "cifar");
  ASSERT_EQ(ds.images().sizes(), (Shape{5, 3, 32, 32}));
  EXPECT_EQ(ds.labels().to_vector<int64_t>(), (std::vector<int64_t>{3, 9, 0, 5, 7}));
  // What a trainer must not write over.
  EXPECT_EQ(ds.source_files(), (std::vector<std::filesystem::path>{dir / "a.bin", dir / "b.bin"}));
  const std::vector<uint8_t> px = ds.images().to_vector<uint8_t>();
  for (int64_t item = 0; item < 5; ++item)
    for (int64_t i = 0; i < 3072; i += 97) ASSERT_EQ(px[item * 3072 + i], cifar_pixel(item, i)) << item << " " << i;
  // CHW: channel 1 (green), row 2, column 5 of item 4.
  EXPECT_EQ(ds.get(4).image.to_vector<uint8_t>()[1 * 1024 + 2 * 32 + 5], cifar_pixel(4, 1024 + 69));
}

TEST(Cifar10, LoadsStandardFileNames) {
  TempDir dir;
  const auto sub = dir.path() / "cifar-10-batches-bin";
  for (int i = 1; i <= 5; ++i) write_file(sub / ("data_batch_" + std::to_string(i) + ".bin"), cifar_records(i, {1}));
  write_file(sub / "test_batch.bin", cifar_records(0, {2, 4}));
  EXPECT_EQ(load_cifar10(dir.path(), Split::train).size(), 5);
  EXPECT_EQ(load_cifar10(sub, Split::test).labels().to_vector<int64_t>(), (std::vector<int64_t>{2, 4}));
  std::filesystem::remove(sub / "data_batch_3.bin");
  EXPECT_ERROR_MENTIONS(load_cifar10(dir.path(), Split::train), "data_batch_3.bin");
}

TEST(Cifar10, BrokenFilesAreErrors) {
  TempDir dir;
  std::vector<uint8_t> b = cifar_records(0, {1, 2});
  b.resize(b.size() - 5);
  write_file(dir / "cut.bin", b);
  EXPECT_ERROR_MENTIONS(read_cifar10_batches({dir / "cut.bin"}, "c"), "cut.bin");
  EXPECT_ERROR_MENTIONS(read_cifar10_batches({dir / "cut.bin"}, "c"), "whole number of 3073-byte records");
  write_file(dir / "label.bin", cifar_records(0, {1, 10}));
  EXPECT_ERROR_MENTIONS(read_cifar10_batches({dir / "label.bin"}, "c"), "label.bin");
  EXPECT_ERROR_MENTIONS(read_cifar10_batches({dir / "label.bin"}, "c"), "record 1 has label 10");
  write_file(dir / "empty.bin", {});
  EXPECT_ERROR_MENTIONS(read_cifar10_batches({dir / "empty.bin"}, "c"), "empty.bin");
  EXPECT_ERROR_MENTIONS(read_cifar10_batches({dir / "missing.bin"}, "c"), "missing.bin");
}

// Value of STL-10 image n, channel c, row r, column col.
uint8_t stl_pixel(int64_t n, int64_t c, int64_t r, int64_t col) {
  return static_cast<uint8_t>((n * 53 + c * 101 + r * 3 + col * 7) % 256);
}

// The distributed layout: per image, per channel, column-major.
std::vector<uint8_t> stl_images(int64_t count) {
  std::vector<uint8_t> b(static_cast<size_t>(count * kStl10ImageBytes));
  for (int64_t n = 0; n < count; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t col = 0; col < 96; ++col)
        for (int64_t r = 0; r < 96; ++r) b[n * kStl10ImageBytes + c * 96 * 96 + col * 96 + r] = stl_pixel(n, c, r, col);
  return b;
}

TEST(Stl10, TransposesColumnMajorPlanesAndMapsLabels) {
  TempDir dir;
  write_file(dir / "train_X.bin", stl_images(3));
  write_file(dir / "train_y.bin", {1, 10, 4});
  const InMemoryDataset ds = load_stl10(dir.path(), Split::train);
  ASSERT_EQ(ds.images().sizes(), (Shape{3, 3, 96, 96}));
  EXPECT_EQ(ds.labels().to_vector<int64_t>(), (std::vector<int64_t>{0, 9, 3}));
  const std::vector<uint8_t> px = ds.images().to_vector<uint8_t>();
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t r = 0; r < 96; ++r)
        for (int64_t col = 0; col < 96; ++col)
          ASSERT_EQ(px[((n * 3 + c) * 96 + r) * 96 + col], stl_pixel(n, c, r, col)) << n << c << r << col;
}

TEST(Stl10, BrokenFilesAreErrors) {
  TempDir dir;
  std::vector<uint8_t> x = stl_images(2);
  write_file(dir / "x.bin", x);
  write_file(dir / "y_bad.bin", {1, 11});
  EXPECT_ERROR_MENTIONS(read_stl10(dir / "x.bin", dir / "y_bad.bin", "s"), "y_bad.bin");
  EXPECT_ERROR_MENTIONS(read_stl10_labels(dir / "y_bad.bin"), "label 11 of item 1 is outside 1..10");
  write_file(dir / "y_zero.bin", {0, 1});
  EXPECT_ERROR_MENTIONS(read_stl10_labels(dir / "y_zero.bin"), "label 0 of item 0");
  write_file(dir / "y3.bin", {1, 2, 3});
  EXPECT_ERROR_MENTIONS(read_stl10(dir / "x.bin", dir / "y3.bin", "s"), "has 2 images but label file");
  x.resize(x.size() - 1);
  write_file(dir / "x_cut.bin", x);
  EXPECT_ERROR_MENTIONS(read_stl10_images(dir / "x_cut.bin"), "x_cut.bin");
  EXPECT_ERROR_MENTIONS(read_stl10_images(dir / "x_cut.bin"), "truncated");
  EXPECT_ERROR_MENTIONS(load_stl10(dir.path(), Split::test), "test_X.bin");
}

}  // namespace
}  // namespace strata::data
