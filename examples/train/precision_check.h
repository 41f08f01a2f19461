#pragma once
// Before a mixed-precision run trains: can the model train on its backend in this
// precision? Today the answer comes from running it: one training step of a throwaway
// copy of the model (same spec, dispatch mode and backend) on two blank images. Every
// front-end call and every direct-mode plan asks the backend's supports() for its op
// and dtype before it runs, so the first op the backend lacks in this precision fails
// here, named with its dtype, instead of at the first step of training (LeNet's dropout
// in bf16 on onednn, for one). The backends' support answers are all it relies on, so
// when they come from capability tables this check follows them unchanged; a table
// that also lists each model's ops could answer without the trial step, here.
#include <string>

#include "strata/core/shape.h"
#include "examples/train/presets.h"
#include "strata/ops/dispatch.h"

namespace strata::train {

// Throws UsageError (examples/train/options.h) naming the precision, the model, the
// backend, the dispatch mode and the op that failed. fp32 is not checked (every
// backend runs it). image_chw: the model's input; targets as the dataset gives them.
void check_precision_trains(const ModelSpec& spec, ops::DispatchMode mode, const std::string& backend,
                            const Shape& image_chw, const Shape& target_shape, DType target_dtype);

}  // namespace strata::train
