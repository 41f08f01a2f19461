#pragma once
// The parts of the onednn emitter's project that do not depend on the model: the
// helpers model.cpp opens with, the weights loader, the command-line program and the
// build file, as text with a few values filled in.
#include <cstdint>
#include <string>

#include "strata/codegen/project_files.h"

namespace strata::codegen::onednn {

// model.cpp's opening: includes and the helpers its calls use (the thread-count rule,
// staged buffers, constants re-laid out at load, the convolution's descriptor).
std::string model_cpp_prologue(const std::string& includes = "");
// What a training step's model.cpp adds: strata's plain loops and dropout's mask (snippets),
// and TrainCall, a primitive call with every operand staged.
std::string train_prologue();
// What a GPT's prediction adds after train_prologue(): strata's loops for layer norm and attention
// and the element-wise formulas' rows (snippets), and the index walk of a strided add.
std::string transformer_prologue();
// main.cpp: reads a .npy input, checks its shape and dtype, runs the model, writes a .npy output.
// token_ids: the input is i64 token ids in [0, generated::kInputLimit), each checked and named.
std::string main_cpp(bool token_ids = false);
// CMakeLists.txt: a static library and the program, needing oneDNN (and OpenMP) only.
std::string cmake_lists(const std::string& project, const std::string& program = "model_run");

}  // namespace strata::codegen::onednn
