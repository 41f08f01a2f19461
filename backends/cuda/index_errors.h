#pragma once
// Bad indices found on the device (an index_select or index_add entry out of range, a
// cross-entropy label neither a class nor ignore_index) and raised on the host without a
// synchronisation per call. A kernel cannot throw; reading a device word after every such call
// made each training step wait for the GPU in the middle, so the host could no longer run ahead
// (ResNet-50's host time per step went from 4.6 to 42 ms, docs/results/one_definition_compare.md).
// Instead the op's kernel marks the first bad position in a device word, a one-thread kernel
// after it copies that position and its value into page-locked host memory the device writes
// directly, and the host raises the op's error at its next look: the next call of such an op,
// CudaBackend::synchronize(), or a copy to the host (which waits for the stream anyway: reading
// a loss). The message names the op, the position and the value as before; the result is
// meanwhile NaN for a label's row, and a bad index's rows are left out. Captured steps report
// theirs too. Internal to backends/cuda.
#include <cstdint>

#include "strata/backends/cuda/context.h"
#include "strata/ops/table/tensor_view.h"

namespace strata::backends::cuda {

constexpr unsigned long long kNoBadIndex = ~0ull;

enum class IndexCheck : int { xent_label = 1, index_select = 2, index_add = 3 };

// The device word an op's kernel atomicMin's its first bad position into (kNoBadIndex when none).
unsigned long long* bad_index_word(Context& ctx);
// After the op's kernel: the first bad position of `index` (i64 or i32; the labels for
// xent_label), if any, noted for the host with its value, the word reset for the next call.
// `extent`: the indexed dim's size, or the classes; `ignore_index` for labels. Never waits.
void note_bad_index(Context& ctx, IndexCheck op, const ops::TensorView& index, int64_t extent,
                    int64_t ignore_index = 0);
// Throws the earliest noted bad index not yet raised (each is raised once). Reads host memory
// only: a kernel still running is seen at a later look.
void raise_bad_index(Context& ctx);

}  // namespace strata::backends::cuda
