#pragma once
// Records a model's planned prediction on the cuda backend (codegen/recorded_step.h), with
// what the backend ran for each call (backends/cuda/call_observer.h). Built where the cuda
// backend is; needs a GPU to run.
#include <map>
#include <string>

#include "strata/codegen/recorded_step.h"
#include "strata/nn/model.h"

namespace strata::codegen::cuda {

// Runs model.predict(x) twice in direct mode on cuda: the first plans the step's memory (and
// each call's cuDNN plan), the second is recorded call by call. Throws naming the op when the
// step runs one the backend does not report, naming the mode or backend when they are not
// direct mode on cuda, and refusing a model that predicted for x's shape before. `names`
// receives the model's tensors by address (parameters, and batch norm's folded copies).
RecordedStep record_predict(nn::Model& model, const Tensor& x, std::map<const void*, std::string>& names);

}  // namespace strata::codegen::cuda
