#pragma once
// The cuda emitter's pieces (internal to codegen/cuda): where each buffer lives in the
// generated program, and each call's text: a member of the model's state, its making at load
// and its run in the forward pass.
#include <initializer_list>
#include <string>
#include <utility>
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
// A convolution's backward (data or weight) as the backend ran it: a graph-API plan of the engine
// it chose, or the legacy call with its algorithm.
CallText conv_bwd_text(const RecordedCall& c, const std::string& member, Places& p);
// A GPT's calls (transformer_text.cpp): the lookups, layer norm, attention, GELU, the tied output
// projection and an add of a broadcast operand, as the cuda backend ran them.
bool is_gpt_call(const RecordedCall& c);
CallText gpt_text(const RecordedCall& c, Places& p);
// A double as C++ source that reads back as the same value.
std::string num_text(double v);
// A forward call (a prediction's, or a training step's forward): "c<i>_<layer>" members.
CallText forward_text(const RecordedCall& c, const std::string& member, Places& p);
std::string member_name(size_t i, const RecordedCall& c);
// "layer: op [sizes] -> [sizes]"'s sizes part.
std::string io_of(const RecordedCall& c);
// One cublasGemmEx as the backend called it, its A, B and C found among `views` by address
// (each aligned in the program as in strata: cuBLAS picks its kernel by that too).
std::string gemm_text(const backends::cuda::LibraryCall& gemm,
                      std::initializer_list<std::pair<const ops::TensorView*, const char*>> views,
                      const std::string& op, Places& p);
// The same as a recorded call's only library call of kind `want` (refusing staging and others).
const backends::cuda::LibraryCall& only(const RecordedCall& c, backends::cuda::LibraryCall::Kind want,
                                        const char* name);

// A training step's project (model_train) and its state file (the constants' host_bytes, then
// dropout's counters after `steps_done` steps since the recorded one began).
std::vector<GeneratedFile> emit_train_project(const RecordedStep& step, BufferMap& buffers);
std::string train_state_file(const RecordedStep& step, const BufferMap& buffers, int64_t steps_done);
// The weights file of `payload` (header: magic, size, checksum), its checksum in `checksum`.
std::string weights_file_of(const std::string& payload, uint64_t& checksum);
// The constants' bytes at their file offsets, from the host copies the recorder made.
std::string constants_payload(const RecordedStep& step, const BufferMap& buffers);

// The project's files from the calls' texts: model.h, model.cpp (the state, made at load, and
// forward(), the calls in order), kernels.h/.cu, weights.h/.cpp, main.cpp, CMakeLists.txt and
// weights.bin. `input_at` and `output_at`: the input buffer's and the output's places.
std::vector<GeneratedFile> assemble(const RecordedStep& step, const BufferMap& buffers,
                                    const std::vector<CallText>& texts, const std::string& input_at,
                                    const std::string& output_at);

}  // namespace strata::codegen::cuda
