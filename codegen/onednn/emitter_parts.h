#pragma once
// The onednn emitter's parts that its prediction (emitter.cpp) and training-step
// (emitter_training.cpp) halves share: the emitter class, the text of one call, and the helpers
// both write with. Internal to codegen/onednn.
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "strata/backends/onednn/descriptor_rules.h"
#include "strata/codegen/onednn/emitter.h"
#include "strata/codegen/onednn/record.h"
#include "strata/core/error.h"

namespace strata::codegen::onednn::detail {

using backends::onednn::DescLayout;
using ops::OpId;
using ops::TensorView;

std::string ints(const std::vector<int64_t>& v);
std::string shape(const TensorView& v);
std::string desc(const DescLayout& l);
std::string desc_of(const TensorView& v);
const char* kind_name(BufferKind k);
// A C++ identifier from a module name ("layer1.0.conv1" -> "layer1_0_conv1").
std::string identifier(const std::string& s);

// The text of one call: its member, its block at load and its block at run time.
struct CallText {
  std::string member;  // empty: no primitive (a plain loop or a copy)
  std::string load, run;
  std::string after;   // run after the primitive (a training step's bias gradient)
  bool train_call = false;  // a TrainCall (every operand staged), not a prediction's Call
};

class OneDnnEmitter final : public Emitter {
 public:
  std::string_view backend() const override { return "onednn"; }
  RecordedStep record(nn::Model& model, const Tensor& x, std::map<const void*, std::string>& names) override {
    return record_predict(model, x, names);
  }
  RecordedStep record_train(nn::Model& model, const Tensor& x, const Tensor& labels, nn::Optimizer& opt,
                            std::map<const void*, std::string>& names) override {
    return record_train_step(model, x, labels, opt, names);
  }
  std::vector<GeneratedFile> emit(const RecordedStep& step, BufferMap& buffers) override;

 private:
  // Where a view lives, as an expression of model.cpp (arena `a`, weights `w`), checked to
  // be of the kind the call needs.
  std::string where(BufferMap& buffers, const TensorView& v, const std::string& what, BufferKind want) {
    const BufferRef r = buffers.locate(v, what);
    // The model's input buffer is read where arena buffers are: it is as fixed.
    const bool fits = r.kind == want || (want == BufferKind::arena && r.kind == BufferKind::input_buffer);
    STRATA_CHECK(fits, "strata_codegen: ", what, " is ", kind_name(r.kind), " where the onednn emitter writes out only ",
                 kind_name(want), " (not supported yet)");
    if (r.kind == BufferKind::arena) return "a + " + std::to_string(r.offset);
    if (r.kind == BufferKind::input_buffer) return "in + " + std::to_string(r.offset);
    if (r.kind == BufferKind::input) return "input";
    return "w + " + std::to_string(buffers.constants()[static_cast<size_t>(r.constant)].file_offset);
  }
  void require_f32(const TensorView& v, const std::string& what) {
    STRATA_CHECK(!v.defined || v.dtype == DType::f32, "strata_codegen: ", what, " is ", dtype_name(v.dtype),
                 "; the onednn emitter writes out f32 only (bf16 is not supported yet)");
  }
  std::string threads(const RecordedCall& c) {
    return "ScopedOmpThreads t(threads_of(" + std::to_string(c.work_units) + ", " + std::to_string(c.work_grain) +
           "));\n";
  }
  CallText conv(const RecordedCall& c, const std::string& m, BufferMap& b);
  CallText linear(const RecordedCall& c, const std::string& m, BufferMap& b);
  CallText unary(const RecordedCall& c, const std::string& m, BufferMap& b);
  CallText relu_loop(const RecordedCall& c, BufferMap& b);
  CallText copy(const RecordedCall& c, const RecordedStep& step, BufferMap& b);
  // A GPT's forward (emitter_transformer.cpp): what the onednn backend runs as strata's own loops
  // (the lookups, layer norm, attention, the element-wise formulas, add) and its oneDNN sgemm (bmm).
  CallText transformer_call(const RecordedCall& c, const RecordedStep& step, BufferMap& b);
  CallText index_select(const RecordedCall& c, const RecordedStep& step, BufferMap& b);
  CallText layer_norm(const RecordedCall& c, BufferMap& b);
  CallText attention(const RecordedCall& c, BufferMap& b);
  CallText unary_loop(const RecordedCall& c, BufferMap& b);
  CallText add_loop(const RecordedCall& c, BufferMap& b);
  CallText bmm(const RecordedCall& c, BufferMap& b);
  // A GPT's training step (emitter_transformer.cpp): layer norm's, attention's and GELU's backward,
  // the lookups' index_add, the position gradient's sum over the batch, and a copy between layouts.
  CallText transformer_backward(const RecordedCall& c, BufferMap& b);
  // Where a training step's view lives: the arena, the model's input buffer, or its state (the
  // weights file, which every step reads and writes: parameters, momentum buffers, the loss's
  // buffers outside the arena).
  std::string state(BufferMap& b, const TensorView& v, const std::string& what) {
    const BufferRef r = b.locate(v, what);
    STRATA_CHECK(r.kind == BufferKind::arena || r.kind == BufferKind::constant || r.kind == BufferKind::input_buffer,
                 "strata_codegen: ", what, " is ", kind_name(r.kind), " where the training step reads the arena or "
                 "the model's state only");
    return where(b, v, what, r.kind);
  }
  // The same as a float pointer expression for a plain loop.
  std::string fptr(BufferMap& b, const TensorView& v, const std::string& what, bool writes) {
    require_f32(v, what);
    return std::string("reinterpret_cast<") + (writes ? "float*" : "const float*") + ">(" + state(b, v, what) + ")";
  }
  CallText train_call(const RecordedCall& c, const RecordedStep& step, BufferMap& b, int dropout_index);
  CallText train_primitive(const RecordedCall& c, BufferMap& b);
  CallText batch_norm_fwd(const RecordedCall& c, const ops::BatchNormFwdArgs& a, BufferMap& b);
  CallText batch_norm_bwd(const RecordedCall& c, const ops::BatchNormBwdArgs& a, BufferMap& b);
  // A training primitive's operand `arg` of op: f32, in the arena or the state.
  std::string operand(BufferMap& b, const TensorView& v, const std::string& op, const char* arg) {
    require_f32(v, op);
    return state(b, v, op + " argument " + arg);
  }
  // A batch norm the training step writes out: in training, not synchronised, not fused.
  void require_plain_training(bool training, const ops::ChannelSumReducer* sync, bool fused, const std::string& op) {
    STRATA_CHECK(training && !sync, "strata_codegen: ", op, " runs in evaluation or synchronised; the onednn "
                 "emitter writes out a training step's plain batch norm only");
    STRATA_CHECK(!fused, "strata_codegen: ", op, " is fused with the residual add and ReLU and their mask "
                 "(BatchNormOptions::fuse_train); the onednn emitter writes out the unfused batch norm only (not "
                 "supported yet)");
  }
  // A per-channel view as the batch-norm loops take it (ChannelView{pointer, stride}), or none.
  std::string channel(BufferMap& b, const TensorView& v, const std::string& what) {
    if (!v.defined) return "ChannelView{}";
    return "ChannelView{" + fptr(b, v, what, true) + ", int64_t{" + std::to_string(v.strides[0]) + "}}";
  }
  std::vector<GeneratedFile> emit_train(const RecordedStep& step, BufferMap& buffers);

 public:
  std::string state_file(const RecordedStep& step, const BufferMap& buffers, int64_t steps_done) override;
};

// The run-time block every primitive call shares: pull the staged source, run, push.
std::string run_primitive(const std::string& m, const std::string& threads_line, bool residual = false);
// A call's load block as a block of the constructor, or (out_of_line) a function of its own.
const char* block_open(bool out_of_line);
const char* block_close(bool out_of_line);
// model.cpp's Model::State (emitter.cpp says what it holds).
void write_state(std::ostringstream& cpp, const RecordedStep& step, const std::vector<CallText>& texts,
                 const std::string& weights_args, bool read_only, bool out_of_line);
// A double as C++ source that reads back to the same value (%.17g).
std::string num(double v);
// A weights file: header (magic, payload size, FNV-1a checksum), then the payload.
std::string weights_file(const std::string& payload);
// A member name per call: the layer's, or for a call without weights the layer before it and the op.
std::vector<std::string> member_names(const RecordedStep& step);
// Whether op is one of a GPT's that OneDnnEmitter::transformer_call writes out, and whether a recorded
// prediction runs any (its model.cpp then carries strata's plain loops for them).
bool is_transformer_op(OpId op);
// Whether op is one of a GPT training step's that OneDnnEmitter::transformer_backward writes out.
bool is_transformer_backward_op(OpId op);
bool runs_transformer_ops(const RecordedStep& step);
// Whether two views are dense in one layout alike (a plain loop's flat index fits both).
bool dense_same_layout(const TensorView& x, const TensorView& y);

}  // namespace strata::codegen::onednn::detail
