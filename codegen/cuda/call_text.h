#pragma once
// The cuda emitter's pieces (internal to codegen/cuda): where each buffer lives in the
// generated program, and each call's text: a member of the model's state, its making at load
// and its run in the forward pass.
#include <string>
#include <vector>

#include "strata/codegen/buffer_map.h"
#include "strata/codegen/emitter.h"
#include "strata/codegen/recorded_step.h"

namespace strata::codegen::cuda {

struct CallText {
  std::string member;  // "ConvGraph c3_layer1_0_conv1;" or "" (nothing made at load)
  std::string load;    // statements in the state's constructor
  std::string run;     // statements in forward()
  std::string how;     // what runs it: "cuDNN graph, engine 12"
  std::string comment; // the layer, the op, its shapes and `how`
};

// The generated program's pointer for each view of the step: "a + 1024" (the arena), "w + 64"
// (the weights), "in + 0" (the model's input buffer), each in the form a call takes.
class Places {
 public:
  Places(const RecordedStep& step, BufferMap& buffers) : step_(step), buffers_(buffers) {}
  // void* / const void* expression of v (its first element); throws naming `what`.
  std::string ptr(const ops::TensorView& v, const std::string& what);
  // The same as float* (or const float* for a constant).
  std::string fptr(const ops::TensorView& v, const std::string& what);
  // The byte alignment cuDNN is told (at most 16, as strata gives it): the generated place's,
  // which must be the recorded address's, or the engine strata chose (or cuBLAS's kernel) might
  // not apply.
  int64_t align(const ops::TensorView& v, const std::string& what);
  const RecordedStep& step() const { return step_; }

 private:
  const RecordedStep& step_;
  BufferMap& buffers_;
};

// "{1, 64, 32, 32}"
std::string dims_of(const ops::TensorView& v);
std::string strides_of(const ops::TensorView& v);
std::string ints(const std::vector<int64_t>& v);
std::string pairs(int64_t a, int64_t b);  // "{a, b}"
// Refuses a call whose library record says it went through a temporary or ran in pieces.
void refuse_staging(const RecordedCall& c);
// Refuses an operand that is not f32 and dense in NCHW (row-major) order.
void require_dense_f32(const ops::TensorView& v, const std::string& what);

CallText conv_text(const RecordedCall& c, const std::string& member, Places& p);

// The project's files from the calls' texts: model.h, model.cpp (the state, made at load, and
// forward(), the calls in order), kernels.h/.cu, weights.h/.cpp, main.cpp, CMakeLists.txt and
// weights.bin. `input_at` and `output_at`: the input buffer's and the output's places.
std::vector<GeneratedFile> assemble(const RecordedStep& step, const BufferMap& buffers,
                                    const std::vector<CallText>& texts, const std::string& input_at,
                                    const std::string& output_at);

}  // namespace strata::codegen::cuda
