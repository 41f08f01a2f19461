#pragma once
// Offsets in one arena for buffers whose lifetimes are known in advance: the memory plan
// of a whole step (forward, loss, backward, optimizer) in direct and graph mode. Buffers
// live over an inclusive range of step positions; two buffers whose ranges overlap never
// share bytes, and any others may.
//
// The assignment is greedy, as TensorFlow Lite's planner is (Pisarchyk & Lee, "Efficient
// Memory Management for Deep Neural Net Inference", 2020): buffers are placed one by one,
// each at the lowest offset where it fits between the buffers already placed that are
// alive at the same time (best fit among the gaps, else above them), in three orders —
// by breadth (the buffers of the fullest positions first), largest first, longest-lived
// first — of which the smallest arena is kept; when none reaches the lower bound (the
// largest sum of sizes alive at one position), the first two are refined by squeaky-wheel
// optimisation (the buffers that ended above the bound placed earlier, for up to 64
// placements each). The result is at least the lower bound (also returned) and at most
// the sum of all sizes. Direct mode's step memory (step_memory.h) lays its arenas out
// with it.
#include <cstdint>
#include <span>
#include <vector>

namespace strata::ops::direct {

struct BufferLifetime {
  int64_t bytes = 0;
  int64_t first = 0, last = 0;  // positions of the first and last use, inclusive
};

struct ArenaPlan {
  std::vector<int64_t> offsets;  // one per buffer, in the order given, multiples of the alignment
  int64_t arena_bytes = 0;       // the arena's size
  int64_t lower_bound = 0;       // the most bytes alive at one position (each rounded up)
};

// Throws naming the buffer when a size is negative or a lifetime ends before it starts, and
// when the alignment is not a positive power of two.
ArenaPlan plan_arena(std::span<const BufferLifetime> buffers, int64_t alignment = 256);

}  // namespace strata::ops::direct
