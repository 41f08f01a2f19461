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

// The same for one Model::train_step(x, labels, opt) (the model in training mode): the first
// step plans the memory and each call's cuDNN plan, the second, run on that plan as every later
// step is, is recorded. `names` also receives the gradients, momentum buffers, the labels buffer
// and the loss's buffers (codegen/record_util.h); step.host_bytes their bytes after the step.
RecordedStep record_train_step(nn::Model& model, const Tensor& x, const Tensor& labels, nn::Optimizer& opt,
                               std::map<const void*, std::string>& names);

// `bytes` bytes at `data` on `device`, copied to the host now (a training state after further steps).
std::string device_bytes(const void* data, int64_t bytes, Device device);

}  // namespace strata::codegen::cuda
