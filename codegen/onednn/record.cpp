#include "strata/codegen/onednn/record.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

#include "strata/backends/onednn/call_observer.h"
#include "strata/backends/onednn/onednn_backend.h"
#include "strata/codegen/record_util.h"
#include "strata/core/error.h"
#include "strata/nn/layers/conv2d.h"
#include "strata/nn/policy.h"
#include "strata/ops/trace.h"

namespace strata::codegen::onednn {

namespace {

using ops::OpId;

class Recorder final : public backends::onednn::CallObserver {
 public:
  void on_call(OpId op, const void* args) override {
    RecordedCall c{op, ops::CopyArgs{}, false, 0, 1, {}, {}};
    c.args = recorded_args(op, args, "onednn");
    groups_.mark(c);
    calls.push_back(std::move(c));
  }
  void on_composed(OpId op, bool begin) override { groups_.on_composed(op, begin); }
  void on_primitive(const backends::loops::Work& work) override {
    STRATA_CHECK(!calls.empty(), "strata_codegen: a primitive ran before any reported call (internal error)");
    calls.back().primitive = true;
    calls.back().work_units = work.units;
    calls.back().work_grain = work.grain;
  }
  std::vector<RecordedCall> calls;

 private:
  ComposedGroups groups_;
};

using OneDnnConv = nn::Conv2d<nn::Direct<backends::OneDnnBackend>>;

// A step's calls as this backend reports them (record_util.h's record_calls).
template <class Step>
std::vector<RecordedCall> record(const char* what, Step&& step) {
  return record_calls<backends::onednn::ScopedCallObserver, Recorder>(what, "onednn", std::forward<Step>(step));
}

}  // namespace

RecordedStep record_predict(nn::Model& model, const Tensor& x, std::map<const void*, std::string>& names) {
  check_direct_model(model, "onednn");
  STRATA_CHECK(!model.module().is_training(), "strata_codegen: the model is in training mode; the generator "
                                              "writes out inference (call eval() first)");
  check_input(model, x);
  RecordedStep step;
  // The plan is read as direct mode makes it, at the first prediction for a shape.
  step.arena = planned_arena(x, "predicted for", "predicted", "prediction", [&] { model.predict(x); });
  Tensor result;
  step.calls = record("prediction", [&] { result = model.predict(x); });
  name_tensors<OneDnnConv>(model.module(), names);

  // Predict's result is the last call's output, copied out of the arena: a view of it in the
  // result's sizes (GPT's logits [B, T, V] are its output projection's rows [1, B * T, V], or over a
  // padded vocabulary the first V columns of rows of Vp: GptConfig::padded_vocab).
  find_input(step, x, "prediction");
  name_lookup_indices(step, names);
  const ops::TensorView& out = output_of(step.calls.back());
  step.output = result_view(out, static_cast<const std::byte*>(out.data), result, ops::op_name(step.calls.back().op));
  name_layers(step.calls, names);
  return step;
}

RecordedStep record_train_step(nn::Model& model, const Tensor& x, const Tensor& labels, nn::Optimizer& opt,
                               std::map<const void*, std::string>& names) {
  check_direct_model(model, "onednn");
  check_train_inputs(model, x, labels);
  RecordedStep step;
  step.training = true;
  // The first step for a shape plans its memory; the plan is read as it is made.
  step.arena = planned_arena(x, "ran a training step for", "trained", "training step",
                             [&] { model.train_step(x, labels, opt); });
  // The second step runs on that plan, as every later one does: it is the one recorded.
  nn::StepResult r;
  step.calls = record("training step", [&] { r = model.train_step(x, labels, opt); });
  name_tensors<OneDnnConv>(model.module(), names);
  find_input(step, x, "training step");
  name_lookup_indices(step, names);
  name_training_state(step, model.module(), names);
  name_layers(step.calls, names);
  return step;
}

}  // namespace strata::codegen::onednn
