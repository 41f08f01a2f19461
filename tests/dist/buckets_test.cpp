#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "strata/dist/buckets.h"

namespace strata::dist {
namespace {

TEST(Buckets, ReverseOrderAndCap) {
  // Parameters of 10, 20, 30, 40, 50 bytes, cap 60: from the last, 50 + 40 reaches it,
  // then 30 + 20 + 10.
  const auto b = plan_buckets({10, 20, 30, 40, 50}, 60);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<size_t>{4, 3}));
  EXPECT_EQ(b[1], (std::vector<size_t>{2, 1, 0}));
}

TEST(Buckets, EveryParameterOnceInReverseOrder) {
  std::vector<size_t> bytes;
  for (size_t i = 0; i < 161; ++i) bytes.push_back(4 * ((i * 7919) % 100000 + 1));
  for (size_t cap : {size_t{0}, size_t{1}, size_t{4096}, kDefaultBucketBytes, size_t{1} << 40}) {
    const auto buckets = plan_buckets(bytes, cap);
    std::vector<size_t> flat;
    for (const auto& b : buckets) {
      ASSERT_FALSE(b.empty());
      size_t total = 0;
      for (size_t i : b) total += bytes[i];
      // A bucket closes as soon as it reaches the cap: without its last parameter it was below.
      EXPECT_LT(total - bytes[b.back()], std::max<size_t>(cap, 1)) << "cap " << cap;
      flat.insert(flat.end(), b.begin(), b.end());
    }
    std::vector<size_t> expect(bytes.size());
    std::iota(expect.rbegin(), expect.rend(), size_t{0});
    EXPECT_EQ(flat, expect) << "cap " << cap;
  }
}

TEST(Buckets, CapZeroIsOneBucketPerParameterAndHugeCapIsOne) {
  EXPECT_EQ(plan_buckets({8, 8, 8}, 0).size(), 3u);
  EXPECT_EQ(plan_buckets({8, 8, 8}, 1000).size(), 1u);
  EXPECT_TRUE(plan_buckets({}, 1000).empty());
}

TEST(Buckets, LargeParameterGetsItsOwnBucket) {
  const auto b = plan_buckets({4, 1000, 4}, 100);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<size_t>{2, 1}));  // 4 + 1000 reaches the cap
  EXPECT_EQ(b[1], (std::vector<size_t>{0}));
}

}  // namespace
}  // namespace strata::dist
