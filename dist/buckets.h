#pragma once
// Gradient buckets for data-parallel training: the parameters grouped, in reverse
// registration order (the order backward produces their gradients), into buckets of
// about `cap_bytes` each, so that one all-reduce moves many small gradients and the
// first buckets can start while later layers are still differentiating (Li et al.,
// "PyTorch Distributed: Experiences on Accelerating Data Parallel Training", 2020;
// PyTorch's default cap is 25 MB). Pure logic, tested on any machine.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::dist {

// PyTorch DDP's bucket_cap_mb default.
inline constexpr size_t kDefaultBucketBytes = 25u * 1024u * 1024u;

// bytes[i]: the gradient size of parameter i (registration order). Returns buckets of
// parameter indices; bucket 0 holds the last parameters. A bucket closes once it holds
// at least cap_bytes, so a parameter larger than the cap gets a bucket of its own and
// no bucket exceeds cap_bytes by more than its last parameter. cap_bytes 0: one
// bucket per parameter. Every index appears exactly once.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<size_t>& bytes, size_t cap_bytes);

// Where each gradient lies in its bucket's flat buffer (gradients as views of the
// buckets, dist/grad_buckets.h).
struct BucketLayout {
  std::vector<size_t> params;   // parameter indices, as plan_buckets gives them
  std::vector<size_t> offsets;  // byte offset of each, a multiple of the alignment
  size_t bytes = 0;             // the buffer: the last gradient's end, rounded up to the alignment
};
// plan_buckets(bytes, cap_bytes), each bucket's gradients placed one after the other in
// that order, each at the next multiple of `alignment` (a power of two that is a
// multiple of the element size), so that a kernel writing a gradient into its bucket
// sees the alignment it sees in an arena (ops/direct/step_memory.h's buffer_alignment).
std::vector<BucketLayout> lay_out_buckets(const std::vector<size_t>& bytes, size_t cap_bytes, size_t alignment);

}  // namespace strata::dist
