#pragma once
// Gradient clipping to a global norm (torch.nn.utils.clip_grad_norm_): every gradient times
// min(1, max_norm / (total_norm + 1e-6)), total_norm the 2-norm of all gradients together.
// Written with tensor ops on the gradients' device and read by none on the host, so the clip can
// run inside a step that is captured (a Model's gradient hook, which train_step calls between
// backward and the optimizer's step in every dispatch mode). The gradients are scaled in place
// (their buffers, planned or bucket views, stay theirs). With dynamic loss scaling the hook sees
// the scaled gradients: clip only without it.
#include <span>

#include "strata/core/tensor.h"

namespace strata::nn {

// Parameters without a gradient are skipped. Returns the total norm (rank 0, in the first
// gradient's dtype, on its device), or an undefined tensor when no parameter has a gradient.
// max_norm must be finite and > 0 (strata::Error otherwise).
Tensor clip_grad_norm_(std::span<const Tensor> params, double max_norm);

}  // namespace strata::nn
