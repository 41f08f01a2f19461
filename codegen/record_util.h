#pragma once
// What every backend's recorder (codegen/<backend>/record.cpp) does the same way: read the
// arena direct mode plans, check the calls a backend reported against the op trace, find
// the step's input, and name each call after the module it belongs to.
#include <cstddef>
#include <functional>
#include <map>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "strata/codegen/recorded_step.h"
#include "strata/core/tensor.h"
#include "strata/nn/model.h"
#include "strata/nn/module.h"
#include "strata/ops/trace.h"

namespace strata::codegen {

// The arena direct mode lays out while `step` runs for the first time at x's shape; a step
// that ran at that shape before makes no plan, and is refused naming what it did.
ops::direct::PlannedArena planned_arena(const Tensor& x, const char* did, const char* done, const char* what,
                                        const std::function<void()>& step);

// The argument struct a backend's observer handed over for `op` (valid during the call only), kept:
// the ops any recorder records. Another op is named as an internal error of `backend`'s recorder.
RecordedArgs recorded_args(ops::OpId op, const void* args, const char* backend);

// Checks the calls a backend reported against the op trace of the same run: every kernel the
// step ran must have been reported, in order, since an op the backend does not report is one
// the generator cannot write out. `what` names the step, `backend` the emitter.
void check_against_trace(const std::vector<ops::TraceEvent>& trace, const std::vector<RecordedCall>& calls,
                         const char* what, const char* backend);

// The module a tensor name belongs to: "layer1.0.conv1.weight (folded)" -> "layer1.0.conv1".
std::string module_of(const std::string& tensor);
// The model's parameters and buffers by address, under their state-dict names.
void name_parameters(nn::Module& m, std::map<const void*, std::string>& names);
// Names each call after the module whose weight it reads or writes, else after the last one.
void name_layers(std::vector<RecordedCall>& calls, const std::map<const void*, std::string>& names);
// Runs `step` once under a backend's call observer (Observer: its RAII scope, constructed from
// the recorder) and the op trace, and returns the calls the Recorder collected, checked against
// the trace (check_against_trace). `what` names the step, `backend` the emitter.
template <class Observer, class Recorder, class Step>
std::vector<RecordedCall> record_calls(const char* what, const char* backend, Step&& step) {
  Recorder rec;
  const bool traced = ops::trace_enabled();
  ops::take_trace();
  ops::set_trace_enabled(true);
  {
    Observer watch(&rec);
    step();
  }
  const std::vector<ops::TraceEvent> trace = ops::take_trace();
  ops::set_trace_enabled(traced);
  check_against_trace(trace, rec.calls, what, backend);
  return std::move(rec.calls);
}

// The emitters write out direct mode's plans on their own backend: any other model is refused.
void check_direct_model(const nn::Model& model, const char* backend);

// name_parameters, and each convolution's folded copies (Conv: the backend's Conv2d, whose folded
// weight and bias are not parameters: nn/layers/conv2d.h).
template <class Conv>
void name_tensors(nn::Module& m, std::map<const void*, std::string>& names) {
  name_parameters(m, names);
  for (const auto& [name, mod] : m.named_modules())
    if (const auto* conv = dynamic_cast<const Conv*>(mod)) {
      if (conv->folded_weight().defined()) names[conv->folded_weight().data_ptr()] = name + ".weight (folded)";
      if (conv->folded_bias().defined()) names[conv->folded_bias().data_ptr()] = name + ".bias (folded)";
    }
}

// The output y the call writes; throws when it has none.
const ops::TensorView& output_of(const RecordedCall& c);
// The step's first call copies the caller's input into the planned input buffer.
void find_input(RecordedStep& step, const Tensor& x, const char* what);
// A recorded training step's state beyond the parameters, named as the program keeps it: each
// parameter's gradient, the optimizer's momentum buffers (after their parameters), the model's
// labels buffer and the loss's buffers that outlive the step; and step.output (the loss) and
// step.labels (what the loss read). Throws when the step computes no softmax cross-entropy.
void name_training_state(RecordedStep& step, nn::Module& module, std::map<const void*, std::string>& names);
// The dropout calls of a training step, in order: each keeps its {seed, offset} in the state.
std::vector<const ops::DropoutFwdArgs*> dropouts(const RecordedStep& step);
// A linear call with an epilogue (an activation, a residual) or a layer-norm prologue, which no
// emitter writes out yet: refused naming `op` (the call and its layer) and the `emitter`.
void refuse_linear_extras(const ops::LinearFwdArgs& a, const std::string& op, const char* emitter);
// The checks every recorder makes of a training step's model and batch.
void check_train_inputs(const nn::Model& model, const Tensor& x, const Tensor& labels);

// Images [N, C, H, W] in the model's dtype, or a language model's token ids, i64 [B, T], contiguous
// on the CPU; throws naming both otherwise.
void check_input(const nn::Model& model, const Tensor& x);
// A lookup's indices that are neither the input nor planned (GPT's positions, made once per
// length) are the model's constants: named after the table, their bytes go to the weights file.
void name_lookup_indices(const RecordedStep& step, std::map<const void*, std::string>& names);
// The view of `out` (the last call's output, its bytes at out_bytes on the host) that holds `result`:
// out itself in result's sizes, or the first columns of its rows (a padded vocabulary). Checked byte
// for byte; throws naming `op` when neither holds it.
ops::TensorView result_view(const ops::TensorView& out, const std::byte* out_bytes, const Tensor& result,
                            std::string_view op);

// A recorder's grouping of the parts of a call its backend composed of its own ops (the backends'
// on_composed): the outermost composed call groups its parts (a composition may nest: a layer-norm
// prologue, then the product with its epilogue).
class ComposedGroups {
 public:
  void mark(RecordedCall& c) const;  // a call reported now: a part of the open group, if any
  void on_composed(ops::OpId op, bool begin);

 private:
  int depth_ = 0, group_ = -1;
  ops::OpId op_{};
};

}  // namespace strata::codegen
