#pragma once
// Random test data: never zeros, always from a fixed seed so failures reproduce.
#include <cstdint>

#include "strata/core/tensor.h"

namespace strata::testing {

// Uniform in [lo, hi) (lo < 0 < hi by default), any float dtype, given memory format.
Tensor random_tensor(const Shape& sizes, DType dt, uint64_t seed, double lo = -1.0, double hi = 1.0,
                     MemoryFormat fmt = MemoryFormat::contiguous);
// Integer labels uniform in [0, classes).
Tensor random_labels(int64_t n, int64_t classes, uint64_t seed);
// The same, with every `every`-th row (rows 0, every, 2 every, ...) set to `ignore_index`:
// cross-entropy's left-out rows at known positions.
Tensor labels_with_ignored(int64_t n, int64_t classes, uint64_t seed, int64_t every, int64_t ignore_index = -100);

}  // namespace strata::testing
