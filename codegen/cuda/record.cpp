#include "strata/codegen/cuda/record.h"

#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "strata/codegen/buffer_map.h"
#include "strata/codegen/record_util.h"
#include "strata/core/error.h"
#include "strata/nn/layers/conv2d.h"
#include "strata/nn/policy.h"
#include "strata/ops/table/arg_views.h"
#include "strata/ops/trace.h"

#include <algorithm>
#include <set>
#include <utility>

namespace strata::codegen::cuda {

namespace {

using backends::cuda::LibraryCall;
using ops::OpId;

class Recorder final : public backends::cuda::CallObserver {
 public:
  void on_call(OpId op, const void* args) override {
    RecordedCall c{op, ops::CopyArgs{}, false, 0, 1, {}, {}};
    c.args = recorded_args(op, args, "cuda");
    groups_.mark(c);
    calls.push_back(std::move(c));
  }
  void on_composed(OpId op, bool begin) override { groups_.on_composed(op, begin); }
  void on_library(const LibraryCall& l) override {
    // A backend-internal copy before any reported call (none today) would have no call to belong to.
    STRATA_CHECK(!calls.empty(), "strata_codegen: the cuda backend ran a library call before any reported op "
                                 "(internal error)");
    calls.back().library.push_back(l);
  }
  std::vector<RecordedCall> calls;

 private:
  ComposedGroups groups_;
};

using CudaConv = nn::Conv2d<nn::Direct<backends::CudaBackend>>;

// A step's calls as this backend reports them (record_util.h's record_calls).
template <class Step>
std::vector<RecordedCall> record(const char* what, Step&& step) {
  return record_calls<backends::cuda::ScopedCallObserver, Recorder>(what, "cuda", std::forward<Step>(step));
}

void keep_bytes(const Tensor& t, RecordedStep& step) {
  if (!t.defined() || !t.device().is_cuda()) return;
  STRATA_CHECK(t.is_contiguous(), "strata_codegen: the model's tensor ", t.str(), " is not contiguous; the weights "
               "file holds contiguous tensors only");
  const Tensor h = t.to(Device::cpu());
  step.host_bytes[t.data_ptr()] =
      std::string(static_cast<const char*>(h.data_ptr()), static_cast<size_t>(h.numel()) * dtype_size(h.dtype()));
}

}  // namespace

RecordedStep record_predict(nn::Model& model, const Tensor& x, std::map<const void*, std::string>& names) {
  check_direct_model(model, "cuda");
  STRATA_CHECK(!model.module().is_training(), "strata_codegen: the model is in training mode; the generator "
                                              "writes out inference (call eval() first)");
  check_input(model, x);
  STRATA_CHECK(model.dtype() == DType::f32, "strata_codegen: the cuda emitter writes out f32 models; the model is ",
               dtype_name(model.dtype()));
  RecordedStep step;
  step.arena = planned_arena(x, "predicted for", "predicted", "prediction", [&] { model.predict(x); });
  Tensor result;
  step.calls = record("prediction", [&] { result = model.predict(x); });
  // Predict's clone of its result, out of the arena, is the caller's, not the step's.
  std::vector<LibraryCall>& last = step.calls.back().library;
  while (!last.empty() && last.back().kind == LibraryCall::Kind::outside_copy &&
         last.back().a == output_of(step.calls.back()).data)
    last.pop_back();
  step.cudnn_version = backends::cuda::cudnn_runtime_version();
  name_tensors<CudaConv>(model.module(), names);

  find_input(step, x, "prediction");
  step.device = std::get<ops::CopyArgs>(step.calls.front().args).y.device;
  // The weights file is written from host copies of the model's device tensors.
  for (const auto& [name, t] : model.module().named_parameters())
    keep_bytes(t, step);
  for (const auto& [name, t] : model.module().named_buffers())
    keep_bytes(t, step);
  for (const auto& [name, mod] : model.module().named_modules())
    if (const auto* conv = dynamic_cast<const CudaConv*>(mod)) {
      keep_bytes(conv->folded_weight(), step);
      keep_bytes(conv->folded_bias(), step);
    }
  // Predict's result is the last call's output, copied out of the arena: a view of it in the result's
  // sizes (a GPT's logits [B, T, V] are its output projection's rows). Its bytes are on the device:
  // the generated program's comparison with strata's (tools/gpu/codegen_cuda.sh) checks them again.
  const ops::TensorView& out = output_of(step.calls.back());
  const std::string out_bytes = device_bytes(out.data, view_span_bytes(out), step.device);
  step.output = result_view(out, reinterpret_cast<const std::byte*>(out_bytes.data()), result.to(Device::cpu()),
                            ops::op_name(step.calls.back().op));
  name_lookup_indices(step, names);
  // The positions a lookup reads are the model's constants, on the device.
  for (const RecordedCall& c : step.calls)
    if (const auto* a = std::get_if<ops::IndexSelectArgs>(&c.args); a && names.count(a->index.data))
      step.host_bytes[a->index.data] = device_bytes(a->index.data, view_span_bytes(a->index), step.device);
  name_layers(step.calls, names);
  return step;
}

RecordedStep record_train_step(nn::Model& model, const Tensor& x, const Tensor& labels, nn::Optimizer& opt,
                               std::map<const void*, std::string>& names) {
  check_direct_model(model, "cuda");
  check_train_inputs(model, x, labels);
  STRATA_CHECK(model.dtype() == DType::f32, "strata_codegen: the cuda emitter writes out f32 training steps; the "
               "model is ", dtype_name(model.dtype()));
  RecordedStep step;
  step.training = true;
  // The first step for a shape plans its memory (and each call's cuDNN plan); the plan is read as it is made.
  step.arena = planned_arena(x, "ran a training step for", "trained", "training step",
                             [&] { model.train_step(x, labels, opt); });
  // The second step runs on that plan, as every later one does: it is the one recorded.
  step.calls = record("training step", [&] { model.train_step(x, labels, opt); });
  step.cudnn_version = backends::cuda::cudnn_runtime_version();
  name_tensors<CudaConv>(model.module(), names);
  find_input(step, x, "training step");
  step.device = std::get<ops::CopyArgs>(step.calls.front().args).y.device;
  name_training_state(step, model.module(), names);
  // The loss copied out and the caller's labels copied in: train_step() in the program does both.
  // The loss and the logits leave the arena as train_step's clones (Model's owned results), which
  // the loss's item() then reads: every copy of them, and of those copies, is the caller's.
  std::set<const void*> loss_copies{step.output.data};
  for (const RecordedCall& c : step.calls)
    if (const auto* xent = std::get_if<ops::SoftmaxXentFwdArgs>(&c.args)) loss_copies.insert(xent->logits.data);
  for (RecordedCall& c : step.calls)
    std::erase_if(c.library, [&](const LibraryCall& l) {
      if (l.kind != LibraryCall::Kind::outside_copy) return false;
      if (loss_copies.count(l.a)) {
        loss_copies.insert(l.c);
        return true;
      }
      return l.c == step.labels.data;
    });
  // The state after the recorded step, from the device: what the weights file starts from.
  std::map<const void*, int64_t> spans;
  for (const RecordedCall& c : step.calls)
    std::visit([&](const auto& a) {
      ops::for_each_view(a, [&](const ops::TensorView& v) {
        if (v.defined && v.device.is_cuda() && names.count(v.data))
          spans[v.data] = std::max(spans[v.data], view_span_bytes(v));
      });
    }, c.args);
  for (const auto& [data, bytes] : spans) step.host_bytes[data] = device_bytes(data, bytes, step.device);
  name_layers(step.calls, names);
  return step;
}

std::string device_bytes(const void* data, int64_t bytes, Device device) {
  const Tensor h = Tensor::borrow(const_cast<void*>(data), Shape{bytes}, DType::u8, device).to(Device::cpu());
  return std::string(static_cast<const char*>(h.data_ptr()), static_cast<size_t>(bytes));
}

}  // namespace strata::codegen::cuda
