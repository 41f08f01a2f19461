#pragma once
// The text a prediction's model.cpp and a training step's share in their Model::State: the
// members every state has, the constructor's version check, plans and workspace, and the capture
// of the run (`forward` or `step`) into a CUDA graph. Internal to codegen/cuda.
#include <string>
#include <vector>

#include "strata/codegen/cuda/call_text.h"

namespace strata::codegen::cuda {

// From the workspace's members to the end of the struct: the calls' members, the constructor and
// destructor, need_workspace and `void <run>();`.
std::string state_members(const std::vector<CallText>& texts, const std::string& run);
// The constructor's body after its initialisers and up to the capture: the cuDNN version check,
// the copy of the file's bytes (`bytes`, a constant's name) to the device, the calls' plans, the
// workspace, and the return when no graph is asked for.
std::string state_loads(const std::vector<CallText>& texts, const std::string& bytes);
// The capture of `run` in relaxed mode (a partial graph destroyed if it throws), the graph
// instantiated, and the constructor's end.
std::string state_capture(const std::string& run);

}  // namespace strata::codegen::cuda
