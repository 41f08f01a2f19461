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
    if (depth_ > 0) {
      c.composed = group_;
      c.composed_op = composed_op_;
    }
    calls.push_back(std::move(c));
  }
  // The outermost composed call groups its parts (a composition may nest: a layer-norm prologue,
  // then the product with its epilogue).
  void on_composed(OpId op, bool begin) override {
    if (begin && depth_++ == 0) {
      ++group_;
      composed_op_ = op;
    } else if (!begin) {
      --depth_;
    }
  }
  void on_primitive(const backends::loops::Work& work) override {
    STRATA_CHECK(!calls.empty(), "strata_codegen: a primitive ran before any reported call (internal error)");
    calls.back().primitive = true;
    calls.back().work_units = work.units;
    calls.back().work_grain = work.grain;
  }
  std::vector<RecordedCall> calls;

 private:
  int depth_ = 0, group_ = -1;
  OpId composed_op_{};
};

using OneDnnConv = nn::Conv2d<nn::Direct<backends::OneDnnBackend>>;

// A step's calls as this backend reports them (record_util.h's record_calls).
template <class Step>
std::vector<RecordedCall> record(const char* what, Step&& step) {
  return record_calls<backends::onednn::ScopedCallObserver, Recorder>(what, "onednn", std::forward<Step>(step));
}

// Images [N, C, H, W] in the model's dtype, or a language model's token ids, i64 [B, T].
void check_input(const nn::Model& model, const Tensor& x) {
  const bool images = x.dim() == 4 && x.dtype() == model.dtype(), tokens = x.dim() == 2 && x.dtype() == DType::i64;
  STRATA_CHECK((images || tokens) && x.is_contiguous() && x.device().is_cpu(),
               "strata_codegen: the input must be a contiguous [N, C, H, W] ", dtype_name(model.dtype()),
               " tensor (or i64 token ids [B, T]) on the CPU, and it is ", x.str(), " (", dtype_name(x.dtype()), ")");
}

// A lookup's indices that are neither the input nor planned (GPT's positions, made once per
// length) are the model's constants: named after the table, their bytes go to the weights file.
void name_lookup_indices(const RecordedStep& step, std::map<const void*, std::string>& names) {
  for (const RecordedCall& c : step.calls)
    if (const auto* a = std::get_if<ops::IndexSelectArgs>(&c.args)) {
      const auto* p = static_cast<const std::byte*>(a->index.data);
      const auto* base = static_cast<const std::byte*>(step.arena.base);
      const bool planned = base && p >= base && p < base + step.arena.bytes;
      auto table = names.find(a->x.data);
      if (!planned && a->index.data != step.input_buffer.data && !names.count(a->index.data) && table != names.end())
        names[a->index.data] = module_of(table->second) + " indices (" + std::to_string(a->index.numel()) + ")";
    }
}

// The view of `out` (the last call's output) that holds `result`: out itself in result's sizes, or
// the first columns of its rows. Checked byte for byte; throws naming `op` when neither holds it.
ops::TensorView result_view(const ops::TensorView& out, const Tensor& result, std::string_view op) {
  ops::TensorView v = out;
  const int64_t cols = result.dim() > 0 ? result.size(result.dim() - 1) : 1;
  const int64_t row = out.dim() > 0 ? out.sizes[out.dim() - 1] : 1, rows = result.numel() / std::max<int64_t>(cols, 1);
  const bool fits = result.dtype() == out.dtype && result.is_contiguous() && out.is_contiguous() && cols <= row &&
                    rows * row == out.numel();
  STRATA_CHECK(fits, "strata_codegen: predict's result ", result.str(), " is not the last kernel call's output (", op,
               " writes ", out.sizes.str(), "): the generator cannot find the output");
  v.sizes = result.sizes();
  v.strides = result.strides();
  for (int d = 0; d + 1 < v.dim(); ++d) v.strides[d] = v.strides[d] / cols * row;  // rows of `row` values
  const size_t elem = dtype_size(out.dtype), row_bytes = static_cast<size_t>(cols) * elem;
  for (int64_t r = 0; r < rows; ++r)
    STRATA_CHECK(std::memcmp(static_cast<const std::byte*>(result.data_ptr()) + r * row_bytes,
                             static_cast<const std::byte*>(out.data) + r * row * elem, row_bytes) == 0,
                 "strata_codegen: predict's result ", result.str(), " differs from the last kernel call's output (",
                 op, ") in row ", r, ": the generator cannot find the output");
  return v;
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
  step.output = result_view(output_of(step.calls.back()), result, ops::op_name(step.calls.back().op));
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
