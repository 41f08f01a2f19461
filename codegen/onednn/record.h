#pragma once
// Records a model's planned prediction on the onednn backend (codegen/recorded_step.h).
#include <map>
#include <string>

#include "strata/codegen/recorded_step.h"
#include "strata/nn/model.h"

namespace strata::codegen::onednn {

// Runs model.predict(x) twice in direct mode on onednn: the first plans the step's memory
// (the arena is read then), the second is recorded call by call. Throws naming the op when
// the step runs one the generator does not support, and naming the model's mode or backend
// when they are not direct mode on onednn, and refusing a model that predicted for x's
// shape before (its memory plan was made then, and is read as it is made). `names` receives the model's tensors by address
// (parameters, and the folded copies of batch-norm folding) for the weights file.
RecordedStep record_predict(nn::Model& model, const Tensor& x, std::map<const void*, std::string>& names);

// The same for one Model::train_step(x, labels, opt) (the model in training mode): the first
// step plans the memory, the second, run on that plan as every later step is, is recorded.
// Both update the model's parameters and the optimizer's state. `names` also receives each
// parameter's gradient.
RecordedStep record_train_step(nn::Model& model, const Tensor& x, const Tensor& labels, nn::Optimizer& opt,
                               std::map<const void*, std::string>& names);

}  // namespace strata::codegen::onednn
