#include "strata/codegen/onednn/record.h"

#include <cstring>
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
    calls.push_back(std::move(c));
  }
  void on_primitive(const backends::loops::Work& work) override {
    STRATA_CHECK(!calls.empty(), "strata_codegen: a primitive ran before any reported call (internal error)");
    calls.back().primitive = true;
    calls.back().work_units = work.units;
    calls.back().work_grain = work.grain;
  }
  std::vector<RecordedCall> calls;
};

using OneDnnConv = nn::Conv2d<nn::Direct<backends::OneDnnBackend>>;

// A step's calls as this backend reports them (record_util.h's record_calls).
template <class Step>
std::vector<RecordedCall> record(const char* what, Step&& step) {
  return record_calls<backends::onednn::ScopedCallObserver, Recorder>(what, "onednn", std::forward<Step>(step));
}

void check_input(const nn::Model& model, const Tensor& x) {
  STRATA_CHECK(x.dim() == 4 && x.dtype() == model.dtype() && x.is_contiguous() && x.device().is_cpu(),
               "strata_codegen: the input must be a contiguous [N, C, H, W] ", dtype_name(model.dtype()),
               " tensor on the CPU, and it is ", x.str(), " (", dtype_name(x.dtype()), ")");
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

  // Predict's result is the last call's output, copied out of the arena.
  find_input(step, x, "prediction");
  step.output = output_of(step.calls.back());
  const int64_t out_bytes = step.output.numel() * static_cast<int64_t>(dtype_size(step.output.dtype));
  STRATA_CHECK(result.sizes() == step.output.sizes && result.dtype() == step.output.dtype && result.is_contiguous() &&
                   step.output.is_contiguous() &&
                   std::memcmp(result.data_ptr(), step.output.data, static_cast<size_t>(out_bytes)) == 0,
               "strata_codegen: predict's result ", result.str(), " is not the last kernel call's output (",
               ops::op_name(step.calls.back().op), "): the generator cannot find the output");

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
  name_training_state(step, model.module(), names);
  name_layers(step.calls, names);
  return step;
}

}  // namespace strata::codegen::onednn
