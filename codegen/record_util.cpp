#include "strata/codegen/record_util.h"

#include <cstring>
#include <type_traits>

#include "strata/core/error.h"
#include "strata/ops/table/pointwise.h"

namespace strata::codegen {

using ops::OpId;

namespace {

class ArenaReader final : public ops::direct::ArenaObserver {
 public:
  void on_arena(const ops::direct::PlannedArena& a) override { arenas.push_back(a); }
  std::vector<ops::direct::PlannedArena> arenas;
};

// The parameter a call belongs to: the weight it reads, or the gradient or parameter it writes.
const ops::TensorView* weight_of(const RecordedCall& c) {
  if (const auto* a = std::get_if<ops::Conv2dFwdArgs>(&c.args)) return &a->w;
  if (const auto* a = std::get_if<ops::LinearFwdArgs>(&c.args)) return &a->w;
  if (const auto* a = std::get_if<ops::Conv2dBwdDataArgs>(&c.args)) return &a->w;
  if (const auto* a = std::get_if<ops::Conv2dBwdWeightArgs>(&c.args)) return &a->dw;
  if (const auto* a = std::get_if<ops::Conv2dBwdBiasArgs>(&c.args)) return &a->db;
  if (const auto* a = std::get_if<ops::LinearBwdDataArgs>(&c.args)) return &a->w;
  if (const auto* a = std::get_if<ops::LinearBwdWeightArgs>(&c.args)) return &a->dw;
  if (const auto* a = std::get_if<ops::SgdStepArgs>(&c.args)) return &a->param;
  if (const auto* a = std::get_if<ops::BatchNormFwdArgs>(&c.args)) return &a->gamma;
  if (const auto* a = std::get_if<ops::BatchNormBwdArgs>(&c.args)) return &a->dgamma;
  // A stem over pixel blocks rearranges its weight, and gives its gradient back, each step.
  if (const auto* a = std::get_if<ops::SpaceToDepthArgs>(&c.args)) return &a->x;
  if (const auto* a = std::get_if<ops::SpaceToDepthBwdArgs>(&c.args)) return &a->dx;
  // A GPT's lookups read their tables; its layer norms their weights.
  if (const auto* a = std::get_if<ops::IndexSelectArgs>(&c.args)) return &a->x;
  if (const auto* a = std::get_if<ops::LayerNormFwdArgs>(&c.args)) return &a->weight;
  if (const auto* a = std::get_if<ops::LayerNormBwdArgs>(&c.args)) return &a->dweight;
  return nullptr;
}

}  // namespace

ops::direct::PlannedArena planned_arena(const Tensor& x, const char* did, const char* done, const char* what,
                                        const std::function<void()>& step) {
  ArenaReader arena;
  ops::direct::ScopedArenaObserver watch(&arena);
  step();
  STRATA_CHECK(!arena.arenas.empty(), "strata_codegen: the model ", did, " ", x.str(),
               " before, so its memory plan was made then and cannot be read now; generate from a model "
               "that has not yet ", done, " at this shape");
  STRATA_CHECK(arena.arenas.size() == 1, "strata_codegen: the ", what, " for ", x.str(), " laid out ",
               arena.arenas.size(), " arenas where the generator expects one (internal error)");
  return arena.arenas.front();
}

RecordedArgs recorded_args(ops::OpId op, const void* args, const char* backend) {
  using ops::OpId;
  RecordedArgs r = ops::CopyArgs{};
  auto take = [&]<class A>(std::type_identity<A>) { r = *static_cast<const A*>(args); };
  switch (op) {
    case OpId::conv2d_fwd: take(std::type_identity<ops::Conv2dFwdArgs>{}); break;
    case OpId::linear_fwd: take(std::type_identity<ops::LinearFwdArgs>{}); break;
    case OpId::relu_fwd: take(std::type_identity<ops::ReluFwdArgs>{}); break;
    case OpId::max_pool2d_fwd: take(std::type_identity<ops::MaxPool2dFwdArgs>{}); break;
    case OpId::avg_pool2d_fwd: take(std::type_identity<ops::AvgPool2dFwdArgs>{}); break;
    case OpId::global_avg_pool_fwd: take(std::type_identity<ops::GlobalAvgPoolFwdArgs>{}); break;
    case OpId::add: take(std::type_identity<ops::AddArgs>{}); break;
    case OpId::copy: take(std::type_identity<ops::CopyArgs>{}); break;
    case OpId::space_to_depth_fwd: take(std::type_identity<ops::SpaceToDepthArgs>{}); break;
    case OpId::conv2d_bwd_data: take(std::type_identity<ops::Conv2dBwdDataArgs>{}); break;
    case OpId::conv2d_bwd_weight: take(std::type_identity<ops::Conv2dBwdWeightArgs>{}); break;
    case OpId::conv2d_bwd_bias: take(std::type_identity<ops::Conv2dBwdBiasArgs>{}); break;
    case OpId::linear_bwd_data: take(std::type_identity<ops::LinearBwdDataArgs>{}); break;
    case OpId::linear_bwd_weight: take(std::type_identity<ops::LinearBwdWeightArgs>{}); break;
    case OpId::relu_bwd: take(std::type_identity<ops::ReluBwdArgs>{}); break;
    case OpId::max_pool2d_bwd: take(std::type_identity<ops::MaxPool2dBwdArgs>{}); break;
    case OpId::softmax_xent_fwd: take(std::type_identity<ops::SoftmaxXentFwdArgs>{}); break;
    case OpId::softmax_xent_bwd: take(std::type_identity<ops::SoftmaxXentBwdArgs>{}); break;
    case OpId::dropout_fwd: take(std::type_identity<ops::DropoutFwdArgs>{}); break;
    case OpId::dropout_bwd: take(std::type_identity<ops::DropoutBwdArgs>{}); break;
    case OpId::fill: take(std::type_identity<ops::FillArgs>{}); break;
    case OpId::sgd_step: take(std::type_identity<ops::SgdStepArgs>{}); break;
    case OpId::batch_norm_fwd: take(std::type_identity<ops::BatchNormFwdArgs>{}); break;
    case OpId::batch_norm_bwd: take(std::type_identity<ops::BatchNormBwdArgs>{}); break;
    case OpId::global_avg_pool_bwd: take(std::type_identity<ops::GlobalAvgPoolBwdArgs>{}); break;
    case OpId::space_to_depth_bwd: take(std::type_identity<ops::SpaceToDepthBwdArgs>{}); break;
    case OpId::index_select: take(std::type_identity<ops::IndexSelectArgs>{}); break;
    case OpId::layer_norm_fwd: take(std::type_identity<ops::LayerNormFwdArgs>{}); break;
    case OpId::attention_fwd: take(std::type_identity<ops::AttentionFwdArgs>{}); break;
    case OpId::unary_fwd: take(std::type_identity<ops::UnaryFwdArgs>{}); break;
    case OpId::bmm: take(std::type_identity<ops::BmmArgs>{}); break;
    case OpId::layer_norm_bwd: take(std::type_identity<ops::LayerNormBwdArgs>{}); break;
    case OpId::attention_bwd: take(std::type_identity<ops::AttentionBwdArgs>{}); break;
    case OpId::unary_bwd: take(std::type_identity<ops::UnaryBwdArgs>{}); break;
    case OpId::index_add: take(std::type_identity<ops::IndexAddArgs>{}); break;
    case OpId::reduce_dims: take(std::type_identity<ops::ReduceDimsArgs>{}); break;
    default:
      STRATA_FAIL("strata_codegen: the ", backend, " backend reported op ", ops::op_name(op),
                  ", which the generator does not record (internal error)");
  }
  return r;
}

void check_against_trace(const std::vector<ops::TraceEvent>& trace, const std::vector<RecordedCall>& calls,
                         const char* what, const char* backend) {
  size_t seen = 0;
  for (const ops::TraceEvent& e : trace) {
    // The optimizer's list step reports the single step of each parameter it runs.
    if (e.op == OpId::multi_sgd_step && seen < calls.size() && calls[seen].op == OpId::sgd_step) {
      while (seen < calls.size() && calls[seen].op == OpId::sgd_step) ++seen;
      continue;
    }
    // A call the backend composed of its own ops: the trace lists it once, the backend its parts.
    if (seen < calls.size() && calls[seen].composed >= 0) {
      const int group = calls[seen].composed;
      STRATA_CHECK(calls[seen].composed_op == e.op, "strata_codegen: the ", backend, " backend composed ",
                   ops::op_name(calls[seen].composed_op), " where the trace shows ", ops::op_name(e.op), " (kernel call ",
                   seen + 1, ", internal error)");
      while (seen < calls.size() && calls[seen].composed == group) ++seen;
      continue;
    }
    STRATA_CHECK(seen < calls.size() && calls[seen].op == e.op, "strata_codegen: the model's ", what, " runs op ",
                 ops::op_name(e.op), " (kernel call ", seen + 1, "), which the ", backend, " emitter does not "
                 "support (the ", backend, " backend does not report it to the generator)");
    ++seen;
  }
  STRATA_CHECK(seen == calls.size() && !calls.empty(), "strata_codegen: the ", backend, " backend reported ",
               calls.size(), " calls where the trace shows ", seen, " (internal error)");
}

void refuse_linear_extras(const ops::LinearFwdArgs& a, const std::string& op, const char* emitter) {
  STRATA_CHECK(!a.act, "strata_codegen: ", op, " has an activation epilogue (", ops::unary_name(*a.act), "), which the ",
               emitter, " emitter does not write out yet");
  STRATA_CHECK(!a.z.defined, "strata_codegen: ", op, " adds a residual in its product, which the ", emitter,
               " emitter does not write out yet");
  STRATA_CHECK(!a.norm_eps, "strata_codegen: ", op, " layer-normalises its input in the product's prologue, which the ",
               emitter, " emitter does not write out yet");
}

void check_direct_model(const nn::Model& model, const char* backend) {
  STRATA_CHECK(model.mode() == ops::DispatchMode::direct && model.backend_name() == backend, "strata_codegen: the ",
               backend, " emitter writes out direct mode's plans on the ", backend, " backend, and the model runs in "
               "another mode or on backend ", model.backend_name());
}

std::string module_of(const std::string& tensor) {
  const std::string plain = tensor.substr(0, tensor.find(' '));
  const size_t dot = plain.rfind('.');
  return dot == std::string::npos ? plain : plain.substr(0, dot);
}

void name_parameters(nn::Module& m, std::map<const void*, std::string>& names) {
  for (const auto& [name, t] : m.named_parameters())
    if (t.defined()) names[t.data_ptr()] = name;
  for (const auto& [name, t] : m.named_buffers())
    if (t.defined()) names[t.data_ptr()] = name;
}

void name_layers(std::vector<RecordedCall>& calls, const std::map<const void*, std::string>& names) {
  std::string last = "input";
  for (RecordedCall& c : calls) {
    const ops::TensorView* w = weight_of(c);
    auto it = w ? names.find(w->data) : names.end();
    if (it != names.end()) {
      c.layer = module_of(it->second);
      last = c.layer;
    } else {
      c.layer = "after " + last;
    }
  }
  calls.front().layer = "input";
}

const ops::TensorView& output_of(const RecordedCall& c) {
  const auto* y = std::visit([](const auto& a) -> const ops::TensorView* {
    if constexpr (requires { a.y; }) return &a.y;
    return nullptr;
  }, c.args);
  STRATA_CHECK(y, "strata_codegen: the step ends with ", ops::op_name(c.op),
               ", which writes no output y (internal error)");
  return *y;
}

void find_input(RecordedStep& step, const Tensor& x, const char* what) {
  const auto* first = std::get_if<ops::CopyArgs>(&step.calls.front().args);
  STRATA_CHECK(first && first->x.data == x.data_ptr(), "strata_codegen: the ", what, " does not start by copying "
               "its input into the planned buffer (it starts with ", ops::op_name(step.calls.front().op),
               "): the generator cannot find the input");
  step.input = first->x;
  const auto* y = static_cast<const std::byte*>(first->y.data);
  const auto* arena = static_cast<const std::byte*>(step.arena.base);
  if (!(arena && y >= arena && y < arena + step.arena.bytes)) step.input_buffer = first->y;
}

void name_training_state(RecordedStep& step, nn::Module& module, std::map<const void*, std::string>& names) {
  for (const auto& [name, t] : module.named_parameters())
    if (t.defined() && t.grad().defined()) names[t.grad().data_ptr()] = name + " (gradient)";
  // The optimizer's momentum buffers, named after their parameters: state the program keeps.
  for (const RecordedCall& c : step.calls)
    if (const auto* sgd = std::get_if<ops::SgdStepArgs>(&c.args); sgd && sgd->momentum_buf.defined) {
      auto p = names.find(sgd->param.data);
      if (p != names.end()) names[sgd->momentum_buf.data] = p->second + " (momentum)";
    }
  // The loss is what the loss's forward wrote; the labels are what it read.
  for (const RecordedCall& c : step.calls)
    if (const auto* xent = std::get_if<ops::SoftmaxXentFwdArgs>(&c.args)) {
      step.output = xent->loss;
      step.labels = xent->labels;
    }
  // The model's own labels buffer (outside the arena, as its input buffer is): the program keeps
  // it with its state, and copies the caller's labels into it as the step does.
  // So are the loss's buffers that outlive the step (its result and the gradient seed).
  auto keep = [&](const ops::TensorView& v, const char* name) {
    if (v.defined && !names.count(v.data)) names[v.data] = name;
  };
  keep(step.labels, "labels (the step's copy)");
  for (const RecordedCall& c : step.calls) {
    if (const auto* f = std::get_if<ops::SoftmaxXentFwdArgs>(&c.args)) {
      keep(f->loss, "loss");
      keep(f->lse, "loss (logsumexp per row)");
    } else if (const auto* b = std::get_if<ops::SoftmaxXentBwdArgs>(&c.args)) {
      keep(b->dloss, "loss (gradient seed)");
      keep(b->dlogits, "logits (gradient)");
    }
  }
  STRATA_CHECK(step.output.defined, "strata_codegen: the training step computes no softmax cross-entropy loss "
               "(softmax_xent_fwd); the generator writes out that loss only");
}

std::vector<const ops::DropoutFwdArgs*> dropouts(const RecordedStep& step) {
  std::vector<const ops::DropoutFwdArgs*> d;
  for (const RecordedCall& c : step.calls)
    if (const auto* a = std::get_if<ops::DropoutFwdArgs>(&c.args)) d.push_back(a);
  return d;
}

void check_train_inputs(const nn::Model& model, const Tensor& x, const Tensor& labels) {
  STRATA_CHECK(model.module().is_training(), "strata_codegen: the model is in evaluation mode; a training step "
                                             "is generated from a model in training mode (call train() first)");
  // A GPT's tokens [B, T] predict the next ids, a label per position; images a class per sample.
  const bool tokens = x.dim() == 2 && x.dtype() == DType::i64;
  STRATA_CHECK((tokens || (x.dim() == 4 && x.dtype() == model.dtype())) && x.is_contiguous() && x.device().is_cpu(),
               "strata_codegen: the input must be a contiguous [N, C, H, W] ", dtype_name(model.dtype()),
               " tensor (or i64 token ids [B, T]) on the CPU, and it is ", x.str(), " (", dtype_name(x.dtype()), ")");
  const Shape want = tokens ? x.sizes() : Shape{x.size(0)};
  STRATA_CHECK(labels.sizes() == want && labels.dtype() == DType::i64 && labels.is_contiguous() &&
                   labels.device().is_cpu(),
               "strata_codegen: the labels must be a contiguous i64 ", want.str(), " tensor on the CPU (",
               tokens ? "the next token at each position" : "one class a sample", "), and they are ", labels.str(),
               " (", dtype_name(labels.dtype()), ")");
}

void check_input(const nn::Model& model, const Tensor& x) {
  const bool images = x.dim() == 4 && x.dtype() == model.dtype(), tokens = x.dim() == 2 && x.dtype() == DType::i64;
  STRATA_CHECK((images || tokens) && x.is_contiguous() && x.device().is_cpu(),
               "strata_codegen: the input must be a contiguous [N, C, H, W] ", dtype_name(model.dtype()),
               " tensor (or i64 token ids [B, T]) on the CPU, and it is ", x.str(), " (", dtype_name(x.dtype()), ")");
}

// A lookup's indices that are neither the input nor planned (GPT's positions, made once per
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

ops::TensorView result_view(const ops::TensorView& out, const std::byte* out_bytes, const Tensor& result,
                            std::string_view op) {
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
                             out_bytes + r * row * elem, row_bytes) == 0,
                 "strata_codegen: predict's result ", result.str(), " differs from the last kernel call's output (",
                 op, ") in row ", r, ": the generator cannot find the output");
  return v;
}

void ComposedGroups::mark(RecordedCall& c) const {
  if (depth_ > 0) {
    c.composed = group_;
    c.composed_op = op_;
  }
}

void ComposedGroups::on_composed(ops::OpId op, bool begin) {
  if (begin && depth_++ == 0) {
    ++group_;
    op_ = op;
  } else if (!begin) {
    --depth_;
  }
}

}  // namespace strata::codegen
