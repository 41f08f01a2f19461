#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "strata/core/error.h"
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

TEST(Buckets, LayoutPlacesEachGradientAlignedAndApart) {
  const std::vector<size_t> bytes{12, 400, 4, 36, 8};
  const auto layout = lay_out_buckets(bytes, 48, 16);
  const auto plan = plan_buckets(bytes, 48);
  ASSERT_EQ(layout.size(), plan.size());
  for (size_t b = 0; b < layout.size(); ++b) {
    const BucketLayout& l = layout[b];
    EXPECT_EQ(l.params, plan[b]);
    ASSERT_EQ(l.offsets.size(), l.params.size());
    size_t end = 0;
    for (size_t k = 0; k < l.params.size(); ++k) {
      EXPECT_EQ(l.offsets[k] % 16, 0u);
      EXPECT_GE(l.offsets[k], end) << "gradients overlap";
      EXPECT_LT(l.offsets[k], end + 16) << "more padding than the alignment needs";
      end = l.offsets[k] + bytes[l.params[k]];
    }
    EXPECT_EQ(l.bytes % 16, 0u);
    EXPECT_GE(l.bytes, end);
    EXPECT_LT(l.bytes, end + 16);
  }
  // From the last: 8, 36, 4 (48 bytes reach the cap) at 0, 16 and 64; then 400 alone; then 12.
  ASSERT_EQ(layout.size(), 3u);
  EXPECT_EQ(layout[0].offsets, (std::vector<size_t>{0, 16, 64}));
  EXPECT_EQ(layout[0].bytes, 80u);
  EXPECT_EQ(layout[1].bytes, 400u);
  EXPECT_EQ(layout[2].bytes, 16u);
}

TEST(Buckets, LayoutRefusesAnAlignmentThatIsNotAPowerOfTwo) {
  EXPECT_THROW(lay_out_buckets({4}, 0, 24), Error);
  EXPECT_THROW(lay_out_buckets({4}, 0, 0), Error);
}

}  // namespace
}  // namespace strata::dist
