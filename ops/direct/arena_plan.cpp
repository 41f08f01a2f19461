#include "strata/ops/direct/arena_plan.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "strata/core/error.h"

namespace strata::ops::direct {

namespace {

int64_t round_up(int64_t v, int64_t alignment) { return (v + alignment - 1) / alignment * alignment; }

int64_t peak_alive(std::span<const BufferLifetime> buffers, const std::vector<int64_t>& sizes) {
  std::map<int64_t, int64_t> delta;  // position -> change of the bytes alive
  for (size_t i = 0; i < buffers.size(); ++i) {
    delta[buffers[i].first] += sizes[i];
    delta[buffers[i].last + 1] -= sizes[i];
  }
  int64_t alive = 0, peak = 0;
  for (const auto& [pos, d] : delta) peak = std::max(peak, alive += d);
  return peak;
}

}  // namespace

ArenaPlan plan_arena(std::span<const BufferLifetime> buffers, int64_t alignment) {
  STRATA_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, "plan_arena: alignment ", alignment,
               " is not a positive power of two");
  std::vector<int64_t> sizes(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const BufferLifetime& b = buffers[i];
    STRATA_CHECK(b.bytes >= 0, "plan_arena: buffer ", i, " has a negative size (", b.bytes, " bytes)");
    STRATA_CHECK(b.first <= b.last, "plan_arena: buffer ", i, " is last used at ", b.last,
                 ", before its first use at ", b.first);
    sizes[i] = round_up(b.bytes, alignment);
  }

  // Largest first; ties by earlier first use, then by index, so the plan is deterministic.
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (sizes[a] != sizes[b]) return sizes[a] > sizes[b];
    return buffers[a].first < buffers[b].first;
  });

  ArenaPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of placed buffers alive with this one
  for (size_t i : order) {
    if (sizes[i] == 0) continue;
    busy.clear();
    for (size_t j : placed)
      if (buffers[j].first <= buffers[i].last && buffers[i].first <= buffers[j].last)
        busy.emplace_back(plan.offsets[j], plan.offsets[j] + sizes[j]);
    std::sort(busy.begin(), busy.end());
    // The smallest gap between busy ranges that holds the buffer; else above them all.
    int64_t best = -1, best_gap = 0, cursor = 0;
    for (const auto& [begin, end] : busy) {
      const int64_t gap = begin - cursor;
      if (gap >= sizes[i] && (best < 0 || gap < best_gap)) best = cursor, best_gap = gap;
      cursor = std::max(cursor, end);
    }
    plan.offsets[i] = best >= 0 ? best : cursor;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[i] + sizes[i]);
    placed.push_back(i);
  }
  plan.lower_bound = peak_alive(buffers, sizes);
  return plan;
}

}  // namespace strata::ops::direct
