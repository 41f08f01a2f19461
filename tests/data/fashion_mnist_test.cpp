// Reads Debian's dataset-fashion-mnist if installed (the default dataset of the main
// command); skipped otherwise.
#include <gtest/gtest.h>

#include <filesystem>

#include "strata/data/idx.h"

namespace strata::data {
namespace {

void check_split(Split split, int64_t n) {
  const InMemoryDataset ds = load_fashion_mnist(kDebianFashionMnistDir, split);
  EXPECT_EQ(ds.size(), n);
  EXPECT_EQ(ds.images().sizes(), (Shape{n, 1, 28, 28}));
  std::vector<int64_t> per_class(10, 0);
  for (int64_t y : ds.labels().to_vector<int64_t>()) {
    ASSERT_GE(y, 0);
    ASSERT_LT(y, 10);
    ++per_class[y];
  }
  for (int64_t c : per_class) EXPECT_EQ(c, n / 10);  // Fashion-MNIST is balanced
}

TEST(FashionMnist, DebianPackageReadsCompletely) {
  if (!std::filesystem::exists(std::filesystem::path(kDebianFashionMnistDir) / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << kDebianFashionMnistDir << " not installed (Debian package dataset-fashion-mnist)";
  check_split(Split::train, 60000);
  check_split(Split::test, 10000);
}

}  // namespace
}  // namespace strata::data
