#pragma once
// The cuda emitter (codegen/emitter.h): a prediction recorded on the cuda backend written out
// as cuDNN graph-API and cuBLAS calls in one function, strata's own kernels as a .cu file, a
// CUDA graph captured at load, the weights and a loader (docs/codegen.md, "The cuda emitter").
#include <memory>
#include <vector>

#include "strata/codegen/emitter.h"

namespace strata::codegen::cuda {

std::unique_ptr<Emitter> make_cuda_emitter();

// The project for a recorded prediction: pure text (no GPU, no cuda backend needed), so that
// a test can build a RecordedStep by hand and compile what comes out. Throws naming the op,
// argument or library choice the emitter does not write out.
std::vector<GeneratedFile> emit_project(const RecordedStep& step, BufferMap& buffers);

}  // namespace strata::codegen::cuda
