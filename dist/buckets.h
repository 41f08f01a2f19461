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

}  // namespace strata::dist
