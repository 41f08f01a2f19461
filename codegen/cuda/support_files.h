#pragma once
// The parts of the cuda emitter's project that do not depend on the model: model.cpp's
// helpers (checked calls, the convolution plans by engine, the legacy descriptors), the
// kernels' launchers around strata's own kernels, model_run and the build file.
#include <string>

namespace strata::codegen::cuda {

// model.cpp's opening after its header comment: includes and helpers; a training step's after it.
std::string model_prologue();
std::string train_model_prologue();
// main.cpp: model_run WEIGHTS INPUT.npy OUTPUT.npy [REPEAT] [--no-graph]; `token_ids`: the input is
// int64 token ids in [0, generated::kInputLimit), each checked.
std::string main_cpp(bool token_ids = false);
// CMakeLists.txt: a static library and model_run, needing the CUDA runtime, cuDNN and cuBLAS only.
std::string cmake_lists(const std::string& project, const std::string& program = "model_run");

}  // namespace strata::codegen::cuda
