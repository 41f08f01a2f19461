// The arena planner: buffers alive at the same position never share bytes, the arena is
// never below the bytes alive at once, and for a network's forward/backward pattern it
// reaches that bound.
#include "strata/ops/direct/arena_plan.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "strata/core/error.h"

namespace strata::ops::direct {
namespace {

void expect_valid(const std::vector<BufferLifetime>& b, const ArenaPlan& p, int64_t alignment) {
  ASSERT_EQ(p.offsets.size(), b.size());
  int64_t sum = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const int64_t size_i = (b[i].bytes + alignment - 1) / alignment * alignment;
    sum += size_i;
    EXPECT_EQ(p.offsets[i] % alignment, 0) << "buffer " << i;
    EXPECT_LE(p.offsets[i] + size_i, p.arena_bytes) << "buffer " << i;
    for (size_t j = 0; j < i; ++j) {
      const int64_t size_j = (b[j].bytes + alignment - 1) / alignment * alignment;
      const bool alive_together = b[i].first <= b[j].last && b[j].first <= b[i].last;
      const bool share_bytes = p.offsets[i] < p.offsets[j] + size_j && p.offsets[j] < p.offsets[i] + size_i;
      EXPECT_FALSE(alive_together && share_bytes && size_i > 0 && size_j > 0)
          << "buffers " << j << " and " << i << " are alive together and share bytes";
    }
  }
  EXPECT_GE(p.arena_bytes, p.lower_bound);
  EXPECT_LE(p.arena_bytes, sum);
}

TEST(ArenaPlan, NothingToPlan) {
  const ArenaPlan p = plan_arena({});
  EXPECT_EQ(p.arena_bytes, 0);
  EXPECT_EQ(p.lower_bound, 0);
}

TEST(ArenaPlan, BuffersAliveAtDifferentTimesShareTheArena) {
  // Three buffers one after the other: one slot of the largest size.
  const std::vector<BufferLifetime> b{{1000, 0, 0}, {4000, 1, 1}, {2000, 2, 2}};
  const ArenaPlan p = plan_arena(b);
  expect_valid(b, p, 256);
  EXPECT_EQ(p.arena_bytes, 4096);
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{0, 0, 0}));
}

TEST(ArenaPlan, AChainOfLayersReusesEveryOtherBuffer) {
  // y_i = f(y_{i-1}): each output is alive from its writing to its reading by the next layer.
  std::vector<BufferLifetime> b;
  for (int i = 0; i < 10; ++i) b.push_back({1 << 20, i, i + 1});
  const ArenaPlan p = plan_arena(b);
  expect_valid(b, p, 256);
  EXPECT_EQ(p.lower_bound, 2 << 20);
  EXPECT_EQ(p.arena_bytes, 2 << 20) << "two buffers in turn, as a hand-written network ping-pongs";
}

TEST(ArenaPlan, ATrainingStepReachesTheLowerBound) {
  // A forward of L layers whose activations backward reads in reverse (activation i alive
  // from i to 2L - i), and gradients each alive for one backward position.
  constexpr int kLayers = 12;
  std::vector<BufferLifetime> b;
  for (int i = 0; i < kLayers; ++i) b.push_back({(i % 3 + 1) * 300000, i, 2 * kLayers - i});
  for (int i = 0; i < kLayers; ++i) b.push_back({(i % 3 + 1) * 300000, 2 * kLayers - i - 1, 2 * kLayers - i});
  const ArenaPlan p = plan_arena(b, 512);
  expect_valid(b, p, 512);
  EXPECT_EQ(p.arena_bytes, p.lower_bound);
}

TEST(ArenaPlan, RandomLifetimesNeverCollide) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BufferLifetime> b(1 + rng() % 120);
    for (auto& x : b) {
      x.bytes = static_cast<int64_t>(rng() % (1 << 20));
      x.first = static_cast<int64_t>(rng() % 60);
      x.last = x.first + static_cast<int64_t>(rng() % 20);
    }
    if (trial % 5 == 0) b[0].bytes = 0;
    const int64_t alignment = int64_t{1} << (rng() % 10);
    const ArenaPlan p = plan_arena(b, alignment);
    expect_valid(b, p, alignment);
    const ArenaPlan again = plan_arena(b, alignment);
    EXPECT_EQ(again.offsets, p.offsets) << "the plan is deterministic";
  }
}

TEST(ArenaPlan, BadLifetimesNameTheBuffer) {
  auto message = [](const std::vector<BufferLifetime>& b, int64_t alignment = 256) {
    try {
      plan_arena(b, alignment);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({{10, 0, 1}, {-5, 0, 1}}), "plan_arena: buffer 1 has a negative size (-5 bytes)");
  EXPECT_EQ(message({{10, 4, 3}}), "plan_arena: buffer 0 is last used at 3, before its first use at 4");
  EXPECT_EQ(message({{10, 0, 0}}, 48), "plan_arena: alignment 48 is not a positive power of two");
  EXPECT_EQ(message({{10, 0, 0}}, 0), "plan_arena: alignment 0 is not a positive power of two");
}

}  // namespace
}  // namespace strata::ops::direct
