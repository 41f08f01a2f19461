#include "strata/codegen/onednn/record.h"

#include <cstring>

#include "strata/backends/onednn/call_observer.h"
#include "strata/backends/onednn/onednn_backend.h"
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
    RecordedCall c{op, ops::CopyArgs{}, false, 0, 1, {}};
    switch (op) {
      case OpId::conv2d_fwd: c.args = *static_cast<const ops::Conv2dFwdArgs*>(args); break;
      case OpId::linear_fwd: c.args = *static_cast<const ops::LinearFwdArgs*>(args); break;
      case OpId::relu_fwd: c.args = *static_cast<const ops::ReluFwdArgs*>(args); break;
      case OpId::max_pool2d_fwd: c.args = *static_cast<const ops::MaxPool2dFwdArgs*>(args); break;
      case OpId::avg_pool2d_fwd: c.args = *static_cast<const ops::AvgPool2dFwdArgs*>(args); break;
      case OpId::global_avg_pool_fwd: c.args = *static_cast<const ops::GlobalAvgPoolFwdArgs*>(args); break;
      case OpId::add: c.args = *static_cast<const ops::AddArgs*>(args); break;
      case OpId::copy: c.args = *static_cast<const ops::CopyArgs*>(args); break;
      default:
        STRATA_FAIL("strata_codegen: the onednn backend reported op ", ops::op_name(op),
                    ", which the generator does not record (internal error)");
    }
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

class ArenaReader final : public ops::direct::ArenaObserver {
 public:
  void on_arena(const ops::direct::PlannedArena& a) override { arenas.push_back(a); }
  std::vector<ops::direct::PlannedArena> arenas;
};

using OneDnnConv = nn::Conv2d<nn::Direct<backends::OneDnnBackend>>;

// The model's tensors by address: parameters under their state-dict names, and each
// convolution's folded copies (not parameters: nn/layers/conv2d.h).
void name_tensors(nn::Module& m, std::map<const void*, std::string>& names) {
  for (const auto& [name, t] : m.named_parameters())
    if (t.defined()) names[t.data_ptr()] = name;
  for (const auto& [name, t] : m.named_buffers())
    if (t.defined()) names[t.data_ptr()] = name;
  for (const auto& [name, mod] : m.named_modules())
    if (const auto* conv = dynamic_cast<const OneDnnConv*>(mod)) {
      if (conv->folded_weight().defined()) names[conv->folded_weight().data_ptr()] = name + ".weight (folded)";
      if (conv->folded_bias().defined()) names[conv->folded_bias().data_ptr()] = name + ".bias (folded)";
    }
}

// The module a tensor name belongs to: "layer1.0.conv1.weight (folded)" -> "layer1.0.conv1".
std::string module_of(const std::string& tensor) {
  const std::string plain = tensor.substr(0, tensor.find(' '));
  const size_t dot = plain.rfind('.');
  return dot == std::string::npos ? plain : plain.substr(0, dot);
}

const ops::TensorView* weight_of(const RecordedCall& c) {
  if (const auto* a = std::get_if<ops::Conv2dFwdArgs>(&c.args)) return &a->w;
  if (const auto* a = std::get_if<ops::LinearFwdArgs>(&c.args)) return &a->w;
  return nullptr;
}

const ops::TensorView& output_of(const RecordedCall& c) {
  return std::visit([](const auto& a) -> const ops::TensorView& { return a.y; }, c.args);
}

}  // namespace

RecordedStep record_predict(nn::Model& model, const Tensor& x, std::map<const void*, std::string>& names) {
  STRATA_CHECK(model.mode() == ops::DispatchMode::direct && model.backend_name() == "onednn",
               "strata_codegen: the onednn emitter writes out direct mode's plans on the onednn backend, and the "
               "model runs in another mode or on backend ", model.backend_name());
  STRATA_CHECK(!model.module().is_training(), "strata_codegen: the model is in training mode; the generator "
                                              "writes out inference (call eval() first)");
  STRATA_CHECK(x.dim() == 4 && x.dtype() == model.dtype() && x.is_contiguous() && x.device().is_cpu(),
               "strata_codegen: the input must be a contiguous [N, C, H, W] ", dtype_name(model.dtype()),
               " tensor on the CPU, and it is ", x.str(), " (", dtype_name(x.dtype()), ")");
  RecordedStep step;
  {
    ArenaReader arena;
    ops::direct::ScopedArenaObserver watch(&arena);
    model.predict(x);
    // The plan is read as direct mode makes it, at the first prediction for a shape.
    STRATA_CHECK(!arena.arenas.empty(), "strata_codegen: the model predicted for ", x.str(),
                 " before, so its memory plan was made then and cannot be read now; generate from a model "
                 "that has not yet predicted at this shape");
    STRATA_CHECK(arena.arenas.size() == 1, "strata_codegen: the prediction for ", x.str(), " laid out ",
                 arena.arenas.size(), " arenas where the generator expects one (internal error)");
    step.arena = arena.arenas.front();
  }
  Recorder rec;
  const bool traced = ops::trace_enabled();
  ops::take_trace();
  ops::set_trace_enabled(true);
  Tensor result;
  {
    backends::onednn::ScopedCallObserver watch(&rec);
    result = model.predict(x);
  }
  const std::vector<ops::TraceEvent> trace = ops::take_trace();
  ops::set_trace_enabled(traced);
  // Every kernel the step ran must have been seen with its arguments: an op the onednn
  // backend does not report is one the generator cannot write out.
  size_t seen = 0;
  for (const ops::TraceEvent& e : trace) {
    STRATA_CHECK(seen < rec.calls.size() && rec.calls[seen].op == e.op, "strata_codegen: the model's prediction "
                 "runs op ", ops::op_name(e.op), " (kernel call ", seen + 1, " of ", trace.size(),
                 "), which the onednn emitter does not support (it writes out conv2d_fwd, linear_fwd, relu_fwd, "
                 "max_pool2d_fwd, avg_pool2d_fwd, global_avg_pool_fwd and copy)");
    ++seen;
  }
  STRATA_CHECK(seen == rec.calls.size() && !rec.calls.empty(), "strata_codegen: the onednn backend reported ",
               rec.calls.size(), " calls where the trace shows ", seen, " (internal error)");
  step.calls = std::move(rec.calls);
  name_tensors(model.module(), names);

  // The first call copies the caller's input into the planned input buffer; predict's
  // result is the last call's output, copied out of the arena.
  const auto* first = std::get_if<ops::CopyArgs>(&step.calls.front().args);
  STRATA_CHECK(first && first->x.data == x.data_ptr(), "strata_codegen: the prediction does not start by copying "
               "its input into the planned buffer (it starts with ", ops::op_name(step.calls.front().op),
               "): the generator cannot find the input");
  step.input = first->x;
  const auto* y = static_cast<const std::byte*>(first->y.data);
  const auto* arena = static_cast<const std::byte*>(step.arena.base);
  if (!(arena && y >= arena && y < arena + step.arena.bytes)) step.input_buffer = first->y;
  step.output = output_of(step.calls.back());
  const int64_t out_bytes = step.output.numel() * static_cast<int64_t>(dtype_size(step.output.dtype));
  STRATA_CHECK(result.sizes() == step.output.sizes && result.dtype() == step.output.dtype && result.is_contiguous() &&
                   step.output.is_contiguous() &&
                   std::memcmp(result.data_ptr(), step.output.data, static_cast<size_t>(out_bytes)) == 0,
               "strata_codegen: predict's result ", result.str(), " is not the last kernel call's output (",
               ops::op_name(step.calls.back().op), "): the generator cannot find the output");

  std::string last = "input";
  for (RecordedCall& c : step.calls) {
    const ops::TensorView* w = weight_of(c);
    auto it = w ? names.find(w->data) : names.end();
    if (it != names.end()) {
      c.layer = module_of(it->second);
      last = c.layer;
    } else {
      c.layer = "after " + last;
    }
  }
  step.calls.front().layer = "input";
  return step;
}

}  // namespace strata::codegen::onednn
