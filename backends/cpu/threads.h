#pragma once
// How many threads a CPU op's work is worth: the library's default for small work
// (docs/threads.md, "Small work runs on one thread").
//
// A parallel region costs a wake-up of the pool's threads whatever the size of the work
// (0.7-8 us for an empty two-thread region under libgomp's default wait policy, 39-90 us
// under OMP_WAIT_POLICY=passive, on the 2-vCPU VM: bench/cpu_peak), and on a machine busy
// with other processes every region waits for its slowest thread to be scheduled. Tiny
// models then ran several times slower on two threads than on one. So an op gets one thread
// per `grain` units of its work, at least one and at most the pool's size, with LibTorch's
// rule for at::parallel_for (num_threads = min(max_threads, ceil(work / grain))): below one
// grain the op runs on the calling thread alone.
//
// Pure functions, no OpenMP here: a backend applies the count to its own pool (the onednn
// backend: backends/onednn/context.h).
#include <algorithm>
#include <cstdint>

namespace strata::backends::loops {

// Element-wise work, counted in elements of the largest tensor the op reads or writes:
// LibTorch's grain size, and the onednn backend's threshold for its own loops (kLoopBelow,
// kParallelAbove).
inline constexpr int64_t kElementsPerThread = 32768;
// Products (convolution, matmul), counted in multiply-adds: about 2^20, 20-40 us of one
// core's work on small shapes, several times the wake-up cost under either wait policy.
inline constexpr int64_t kMultiplyAddsPerThread = int64_t{1} << 20;

// The code between "codegen:begin" and "codegen:end" is also written, as it is, into the programs
// codegen/ generates, so that they apply the same rule.
// codegen:begin thread_rule
struct Work {
  int64_t units = 0;  // the op's size
  int64_t grain = 1;  // units worth one thread
};
// codegen:end
inline Work elementwise_work(int64_t elements) { return {elements, kElementsPerThread}; }
inline Work product_work(int64_t multiply_adds) { return {multiply_adds, kMultiplyAddsPerThread}; }

// The threads `w` is worth when the pool has `max_threads`: min(max_threads, ceil(units / grain)),
// at least 1.
// codegen:begin thread_rule
inline int threads_for(const Work& w, int max_threads) {
  if (max_threads <= 1 || w.units <= w.grain) return 1;
  const int64_t chunks = (w.units - 1) / w.grain + 1;
  return static_cast<int>(std::min<int64_t>(max_threads, chunks));
}
// codegen:end

}  // namespace strata::backends::loops
