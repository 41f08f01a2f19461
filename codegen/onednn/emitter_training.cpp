#include "strata/codegen/onednn/emitter_parts.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "strata/backends/onednn/call_observer.h"
#include "strata/backends/onednn/descriptor_rules.h"
#include "strata/codegen/onednn/record.h"
#include "strata/codegen/record_util.h"
#include "strata/codegen/onednn/support_files.h"
#include "strata/codegen/project_files.h"
#include "strata/core/error.h"

// The onednn emitter's training step (record_train_step's recording written out): strata's loops
// for what runs no primitive (emitter_train_primitives.cpp writes those), the state file, the project.
namespace strata::codegen::onednn::detail {

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

CallText OneDnnEmitter::train_call(const RecordedCall& c, const RecordedStep& step, BufferMap& b, int dropout_index) {
  const std::string op = std::string(ops::op_name(c.op)) + " (" + c.layer + ")";
  auto dense = [&](std::initializer_list<const TensorView*> views) {
    for (const TensorView* v : views)
      STRATA_CHECK(v->is_contiguous(), "strata_codegen: ", op, " reads or writes ", shape(*v),
                   " with strides; the onednn emitter writes out its plain loop on contiguous buffers only");
  };
  std::ostringstream r;
  // out[i] = f(in0[i], in1[i]) over dense buffers, each named as its argument.
  struct Named {
    const TensorView* v;
    const char* name;
  };
  auto two_inputs = [&](const char* f, Named in0, Named in1, Named out) {
    dense({in0.v, in1.v, out.v});
    for (const Named& n : {in0, in1})
      r << "    const float* " << n.name << " = " << fptr(b, *n.v, op + " argument " + n.name, false) << ";\n";
    r << "    float* " << out.name << " = " << fptr(b, *out.v, op + " argument " + out.name, true) << ";\n";
    r << "    for (int64_t i = 0; i < " << out.v->numel() << "; ++i) " << out.name << "[i] = " << f << "(" << in0.name
      << "[i], " << in1.name << "[i]);\n";
  };
  switch (c.op) {
    case OpId::relu_fwd: {
      if (c.primitive) return unary(c, "c", b);
      const auto& a = std::get<ops::ReluFwdArgs>(c.args);
      dense({&a.x, &a.y});
      r << "    const float* x = " << fptr(b, a.x, op + " argument x", false) << ";\n";
      r << "    float* y = " << fptr(b, a.y, op + " argument y", true) << ";\n";
      r << "    for (int64_t i = 0; i < " << a.x.numel() << "; ++i) y[i] = relu_of(x[i]);\n";
      break;
    }
    case OpId::relu_bwd: {
      if (c.primitive) return train_primitive(c, b);
      const auto& a = std::get<ops::ReluBwdArgs>(c.args);
      two_inputs("relu_grad_of", {&a.y, "y"}, {&a.dy, "dy"}, {&a.dx, "dx"});
      break;
    }
    case OpId::max_pool2d_fwd:
    case OpId::global_avg_pool_fwd: return unary(c, "c", b);
    case OpId::add: {
      if (c.primitive) return train_primitive(c, b);
      const auto& a = std::get<ops::AddArgs>(c.args);
      // A GPT's position embeddings are read broadcast over the batch (stride 0).
      if (!dense_same_layout(a.a, a.y) || !dense_same_layout(a.b, a.y)) return add_loop(c, b);
      two_inputs("add_of", {&a.a, "x0"}, {&a.b, "x1"}, {&a.y, "y"});  // (a is the arena)
      break;
    }
    case OpId::copy: {
      const auto& a = std::get<ops::CopyArgs>(c.args);
      // A GPT's wte gradient laid out from the output projection's transposed product: the backend's
      // reorder primitive moves f32 values, which a strided loop moves to the same bytes.
      if (a.x.dtype == DType::f32 && a.y.dtype == DType::f32 && !dense_same_layout(a.x, a.y))
        return transformer_backward(c, b);
      // The caller's labels into the step's planned labels buffer.
      if (a.y.data != step.labels.data) return copy(c, step, b);
      STRATA_CHECK(a.x.dtype == DType::i64 && a.y.dtype == DType::i64 && a.y.is_contiguous(), "strata_codegen: ", op,
                   " copies ", dtype_name(a.x.dtype), " labels; the onednn emitter writes out contiguous i64 ones only");
      r << "    std::memcpy(" << state(b, a.y, op + " argument y") << ", labels, " << a.y.numel() * 8 << ");\n";
      break;
    }
    case OpId::conv2d_fwd:
    case OpId::conv2d_bwd_data:
    case OpId::conv2d_bwd_weight:
    case OpId::linear_fwd:
    case OpId::linear_bwd_data:
    case OpId::max_pool2d_bwd:
    case OpId::global_avg_pool_bwd:
    case OpId::batch_norm_fwd:
    case OpId::batch_norm_bwd: return train_primitive(c, b);
    case OpId::linear_bwd_weight: {
      CallText t = train_primitive(c, b);
      const auto& a = std::get<ops::LinearBwdWeightArgs>(c.args);
      if (a.db.defined) {
        t.after = "    // the bias gradient: strata's column sums (oneDNN 2.6 reduces a kept dim with its reference "
                  "kernel only)\n    column_sums_of(" +
                  fptr(b, a.dy, op + " argument dy", false) + ", int64_t{" + std::to_string(a.dy.sizes[0]) +
                  "}, int64_t{" + std::to_string(a.dy.sizes[1]) + "}, int64_t{" + std::to_string(a.dy.strides[0]) +
                  "}, int64_t{" + std::to_string(a.dy.strides[1]) + "}, " + fptr(b, a.db, op + " argument db", true) +
                  ", int64_t{" + std::to_string(a.db.strides[0]) + "});\n";
      }
      return t;
    }
    case OpId::conv2d_bwd_bias: {
      const auto& a = std::get<ops::Conv2dBwdBiasArgs>(c.args);
      r << "    const int64_t sizes[4] = " << ints({a.dy.sizes.begin(), a.dy.sizes.end()}) << ";\n";
      r << "    const int64_t strides[4] = " << ints({a.dy.strides.begin(), a.dy.strides.end()}) << ";\n";
      r << "    channel_sums(" << fptr(b, a.dy, op + " argument dy", false) << ", sizes, strides, "
        << fptr(b, a.db, op + " argument db", true) << ", int64_t{" << a.db.strides[0] << "});\n";
      break;
    }
    case OpId::fill: {
      const auto& a = std::get<ops::FillArgs>(c.args);
      dense({&a.y});
      r << "    fill_dense(" << fptr(b, a.y, op + " argument y", true) << ", int64_t{" << a.y.numel()
        << "}, static_cast<float>(" << num(a.value) << "));\n";
      break;
    }
    case OpId::dropout_fwd: {
      const auto& a = std::get<ops::DropoutFwdArgs>(c.args);
      dense({&a.x, &a.y, &a.mask});
      STRATA_CHECK(!a.rng.defined, "strata_codegen: ", op, " reads its seed from device memory (internal error)");
      r << "    // {seed, offset} in the state: each step draws the next numel(x) counters, as strata's layer does\n";
      r << "    uint64_t* counter = reinterpret_cast<uint64_t*>(w + kCountersAt + " << 16 * dropout_index << ");\n";
      r << "    const uint64_t seed = counter[0], offset = counter[1];\n";
      r << "    counter[1] += " << a.x.numel() << ";\n";
      r << "    const float* x = " << fptr(b, a.x, op + " argument x", false) << ";\n";
      r << "    float* y = " << fptr(b, a.y, op + " argument y", true) << ";\n";
      r << "    uint8_t* m = reinterpret_cast<uint8_t*>(" << state(b, a.mask, op + " argument mask") << ");\n";
      r << "    const double p = " << num(a.p) << ", inv_keep = dropout_inv_keep(p);\n";
      r << "    for (int64_t k = 0; k < " << a.x.numel() << "; ++k) {\n";
      r << "      const bool keep = dropout_keep(seed, offset + static_cast<uint64_t>(k), p);\n";
      r << "      m[k] = keep ? 1 : 0;\n      y[k] = dropout_of(x[k], keep, inv_keep);\n    }\n";
      break;
    }
    case OpId::dropout_bwd: {
      const auto& a = std::get<ops::DropoutBwdArgs>(c.args);
      dense({&a.dy, &a.mask, &a.dx});
      r << "    const float* dy = " << fptr(b, a.dy, op + " argument dy", false) << ";\n";
      r << "    const uint8_t* m = reinterpret_cast<const uint8_t*>(" << state(b, a.mask, op + " argument mask")
        << ");\n";
      r << "    float* dx = " << fptr(b, a.dx, op + " argument dx", true) << ";\n";
      r << "    const double inv_keep = dropout_inv_keep(" << num(a.p) << ");\n";
      r << "    for (int64_t i = 0; i < " << a.dy.numel() << "; ++i) dx[i] = dropout_grad_of(dy[i], m[i], inv_keep);\n";
      break;
    }
    case OpId::softmax_xent_fwd: {
      const auto& a = std::get<ops::SoftmaxXentFwdArgs>(c.args);
      r << "    const int64_t* l = reinterpret_cast<const int64_t*>(" << state(b, a.labels, op + " argument labels")
        << ");\n";
      r << "    *" << fptr(b, a.loss, op + " argument loss", true) << " = softmax_xent_rows("
        << fptr(b, a.logits, op + " argument logits", false) << ", int64_t{" << a.logits.sizes[0] << "}, int64_t{"
        << a.logits.sizes[1] << "}, int64_t{" << a.logits.strides[0] << "}, int64_t{" << a.logits.strides[1] << "}, "
        << fptr(b, a.lse, op + " argument lse", true) << ", int64_t{" << a.lse.strides[0] << "}, int64_t{"
        << a.ignore_index << "}, [&](int64_t i) { return l[i * " << a.labels.strides[0] << "]; });\n";
      break;
    }
    case OpId::softmax_xent_bwd: {
      const auto& a = std::get<ops::SoftmaxXentBwdArgs>(c.args);
      r << "    const int64_t* l = reinterpret_cast<const int64_t*>(" << state(b, a.labels, op + " argument labels")
        << ");\n";
      r << "    softmax_xent_grad_rows(" << fptr(b, a.logits, op + " argument logits", false) << ", int64_t{"
        << a.logits.sizes[0] << "}, int64_t{" << a.logits.sizes[1] << "}, int64_t{" << a.logits.strides[0]
        << "}, int64_t{" << a.logits.strides[1] << "}, " << fptr(b, a.lse, op + " argument lse", false) << ", int64_t{"
        << a.lse.strides[0] << "}, *" << fptr(b, a.dloss, op + " argument dloss", false) << ", "
        << fptr(b, a.dlogits, op + " argument dlogits", true) << ", int64_t{" << a.dlogits.strides[0] << "}, int64_t{"
        << a.dlogits.strides[1] << "}, int64_t{" << a.ignore_index << "}, [&](int64_t i) { return l[i * "
        << a.labels.strides[0] << "]; });\n";
      break;
    }
    case OpId::sgd_step: {
      const auto& a = std::get<ops::SgdStepArgs>(c.args);
      STRATA_CHECK(!a.hyper.defined && !a.amp.defined, "strata_codegen: ", op, " follows a schedule or loss "
                   "scaling read from memory; the onednn emitter writes out a fixed learning rate only");
      dense({&a.param, &a.grad});
      r << "    float* p = " << fptr(b, a.param, op + " argument param", true) << ";\n";
      r << "    const float* g = " << fptr(b, a.grad, op + " argument grad", false) << ";\n";
      r << "    const float lr = static_cast<float>(" << num(a.o.lr) << "), wd = static_cast<float>("
        << num(a.o.weight_decay) << "), gs = 1.f;\n";
      if (a.o.momentum == 0.0) {
        r << "    for (int64_t i = 0; i < " << a.param.numel() << "; ++i) sgd_update(p[i], g[i], lr, wd, gs);\n";
      } else {
        dense({&a.momentum_buf});
        r << "    float* buf = " << fptr(b, a.momentum_buf, op + " argument momentum_buf", true) << ";\n";
        r << "    const float mom = static_cast<float>(" << num(a.o.momentum) << ");\n";
        r << "    for (int64_t i = 0; i < " << a.param.numel() << "; ++i) sgd_momentum_update(p[i], g[i], buf[i], lr, "
             "wd, mom, gs, "
          << (a.o.nesterov ? "true" : "false") << ");\n";
      }
      break;
    }
    case OpId::index_select:
    case OpId::layer_norm_fwd:
    case OpId::attention_fwd:
    case OpId::unary_fwd:
    case OpId::bmm: return transformer_call(c, step, b);
    default:
      if (is_transformer_backward_op(c.op)) return transformer_backward(c, b);
      STRATA_FAIL("strata_codegen: op ", op, " of the training step is not supported by the onednn emitter (it "
                  "writes out LeNet-5's, ResNet-18/50's and a GPT's: convolution, linear, ReLU, max pooling, global "
                  "average pooling, batch norm, add, dropout, softmax cross-entropy, the lookups, layer norm, "
                  "attention, GELU, the batched product, their backward, fill and SGD)");
  }
  CallText t;
  t.run = r.str();
  return t;
}

std::string OneDnnEmitter::state_file(const RecordedStep& step, const BufferMap& buffers, int64_t steps_done) {
  std::string payload(static_cast<size_t>(buffers.constants_bytes()), '\0');
  for (const Constant& k : buffers.constants())
    std::memcpy(payload.data() + k.file_offset, k.data, static_cast<size_t>(k.bytes));
  for (const ops::DropoutFwdArgs* d : dropouts(step)) {
    const uint64_t counter[2] = {d->seed, d->offset + static_cast<uint64_t>(steps_done * d->x.numel())};
    payload.append(reinterpret_cast<const char*>(counter), sizeof counter);
  }
  return weights_file(payload);
}

std::vector<GeneratedFile> OneDnnEmitter::emit_train(const RecordedStep& step, BufferMap& buffers) {
  // A GPT's step reads token ids [B, T] and a label per token; an image model's f32 images, a label per image.
  const bool tokens = std::any_of(step.calls.begin(), step.calls.end(), [&](const RecordedCall& c) {
    const auto* s = std::get_if<ops::IndexSelectArgs>(&c.args);
    return s && (s->index.data == step.input.data || s->index.data == step.input_buffer.data);
  });
  STRATA_CHECK((tokens ? step.input.dtype == DType::i64 && step.input.dim() == 2 : step.input.dtype == DType::f32) &&
                   step.output.dtype == DType::f32 && step.labels.dtype == DType::i64 &&
                   step.labels.dim() == 1 && step.labels.is_contiguous() &&
                   (!tokens || step.labels.numel() == step.input.numel()),
               "strata_codegen: the training step takes ", dtype_name(step.input.dtype), " input and ",
               dtype_name(step.labels.dtype), " labels; the onednn emitter writes out f32 images or i64 token ids "
               "with contiguous i64 labels only");
  // The ids' table (wte): its rows bound the tokens model_train reads.
  int64_t token_limit = 0;
  for (const RecordedCall& c : step.calls)
    if (const auto* s = std::get_if<ops::IndexSelectArgs>(&c.args))
      if (s->index.data == step.input.data || s->index.data == step.input_buffer.data) token_limit = s->x.sizes[0];
  const std::vector<std::string> members = member_names(step);
  std::vector<CallText> texts;
  int dropout_index = 0;
  for (size_t i = 0; i < step.calls.size(); ++i) {
    const RecordedCall& c = step.calls[i];
    CallText t = train_call(c, step, buffers, dropout_index);
    if (c.op == OpId::dropout_fwd) ++dropout_index;
    if (!t.member.empty()) {
      const bool trains = t.train_call;
      t.member = members[i];
      t.load = std::string("    ") + (trains ? "TrainCall" : "Call") + "& c = " + t.member + ";\n" + t.load;
      t.run = std::string("    ") + (trains ? "TrainCall" : "Call") + "& c = s." + t.member + ";\n" + t.run;
    }
    texts.push_back(std::move(t));
  }
  // Where the step reads the labels (a buffer the caller's are copied into) and writes the loss.
  const std::string labels_at = state(buffers, step.labels, "the labels");
  bool copies_labels = false;
  for (const RecordedCall& c : step.calls)
    if (const auto* cp = std::get_if<ops::CopyArgs>(&c.args)) copies_labels |= cp->y.data == step.labels.data;
  const std::string loss_at = state(buffers, step.output, "the loss");
  const int64_t counters_at = buffers.constants_bytes();
  const std::string weights = state_file(step, buffers, 1);
  const int64_t payload_bytes = static_cast<int64_t>(weights.size()) - 24;
  const int64_t batch = step.labels.numel();
  // A GPT's labels are the loss's rows [B * T], which the caller gives as the tokens' [B, T].
  const Shape& label_shape = tokens ? step.input.sizes : step.labels.sizes;
  const std::vector<int64_t> label_sizes(label_shape.begin(), label_shape.end());
  int64_t classes = 0;
  for (const RecordedCall& c : step.calls)
    if (const auto* x = std::get_if<ops::SoftmaxXentFwdArgs>(&c.args)) classes = x->logits.sizes[1];

  const std::string version = backends::onednn::library_version();
  std::ostringstream h;
  h << "#pragma once\n// Generated by strata_codegen: a training step of " << step.model << ", input "
    << shape(step.input) << (tokens ? " token ids" : " f32") << ", backend onednn.\n// Needs oneDNN only; bitwise equal to strata's direct mode on its "
       "onednn backend with oneDNN "
    << version << " on the same CPU and thread count.\n#include <cstdint>\n#include <memory>\n#include <string>\n\n"
    << "namespace generated {\n\n"
    << "inline constexpr int64_t kInputSizes[" << step.input.dim() << "] = "
    << ints(std::vector<int64_t>(step.input.sizes.begin(), step.input.sizes.end())) << ";\n"
    << "inline constexpr int64_t kLabelSizes[" << label_sizes.size() << "] = " << ints(label_sizes) << ";\n"
    << "inline constexpr int64_t kClasses = " << classes << ";\n"
    << (tokens ? "inline constexpr int64_t kInputLimit = " + std::to_string(token_limit) + ";  // token ids in [0, kInputLimit)\n" : "")
    << "inline constexpr const char* kOneDnnVersion = \"" << version << "\";  // generated with\n\n"
    << "class Model {\n public:\n"
    << "  // Reads the state (parameters, gradients, momentum buffers, dropout's counters) and makes every\n"
    << "  // primitive; throws std::runtime_error or dnnl::error.\n"
    << "  explicit Model(const std::string& weights_path);\n  ~Model();\n  Model(const Model&) = delete;\n"
    << "  Model& operator=(const Model&) = delete;\n"
    << (tokens ? "  // One step of SGD on a batch: input kInputSizes i64 token ids, labels kLabelSizes i64 (the next\n"
                 "  // tokens) in [0, kClasses).\n"
               : "  // One step of SGD on a batch: input kInputSizes f32 (NCHW), labels kLabelSizes i64 in [0, kClasses).\n")
    << "  // Returns the batch's mean softmax cross-entropy before the step; throws std::invalid_argument\n"
    << "  // naming a label out of range. Not thread-safe.\n"
    << "  float train_step(const " << (tokens ? "int64_t" : "float") << "* input, const int64_t* labels);\n"
    << "  // Writes the state as it is now, in the format the constructor reads.\n"
    << "  void save(const std::string& weights_path) const;\n\n"
    << " private:\n  struct State;\n  std::unique_ptr<State> s_;\n};\n\n}  // namespace generated\n";

  std::ostringstream cpp;
  cpp << "// Generated by strata_codegen: a training step of " << step.model << ", input " << shape(step.input)
      << (tokens ? " token ids" : " f32") << ", backend onednn (oneDNN " << version << ").\n"
      << "// strata's direct-mode training step written out: every primitive made once at load, as strata's onednn\n"
      << "// backend makes it, then forward, loss, backward and SGD run in order; every intermediate at the offset\n"
      << "// strata's memory planner chose in one arena of " << step.arena.bytes << " bytes. State: "
      << buffers.constants().size() << " tensors and " << dropout_index << " dropout counters, " << payload_bytes
      << " bytes in the weights file:\n";
  for (const Constant& k : buffers.constants())
    cpp << "//   w + " << k.file_offset << ": " << k.name << " (" << k.bytes << " bytes)\n";
  cpp << "//   w + " << counters_at << ": dropout's {seed, offset}, 16 bytes per dropout layer\n";
  cpp << model_cpp_prologue("#include <cmath>\n#include <limits>\n#include <string>\n#include <vector>\n")
      << train_prologue() << (tokens ? transformer_prologue() : std::string());
  cpp << "\nconstexpr int64_t kCountersAt = " << counters_at << ";\n";
  write_state(cpp, step, texts, std::to_string(payload_bytes) + ", 0", false, true);
  cpp << "  }\n};\n\nModel::Model(const std::string& weights_path) : s_(std::make_unique<State>(weights_path)) {}\n"
      << "Model::~Model() = default;\n\n"
      << "void Model::save(const std::string& weights_path) const { s_->weights.save(weights_path); }\n\n"
      << "float Model::train_step(const " << (tokens ? "int64_t" : "float") << "* input, const int64_t* labels) {\n"
      << "  for (int64_t i = 0; i < " << batch << "; ++i)\n"
      << "    if (labels[i] < 0 || labels[i] >= kClasses)\n"
      << "      throw std::invalid_argument(\"label \" + std::to_string(i) + \" is \" + std::to_string(labels[i]) +\n"
      << "                                  \", out of range [0, \" + std::to_string(kClasses) + \")\");\n"
      << "  State& s = *s_;\n  dnnl::stream& strm = s.strm;\n"
      << "  std::byte* a = s.arena.get();\n  std::byte* in = s.input_buffer.get();\n  std::byte* w = s.weights.data();\n"
      << "  (void)in;\n  (void)strm;\n";
  if (!copies_labels) cpp << "  std::memcpy(" << labels_at << ", labels, " << batch * 8 << ");\n";
  for (size_t i = 0; i < texts.size(); ++i) {
    const RecordedCall& c = step.calls[i];
    cpp << "  " << block_open(true) << "  // " << c.layer << ": " << ops::op_name(c.op)
        << (c.primitive || c.op == OpId::copy ? ""
            : c.op == OpId::bmm               ? " (oneDNN's sgemm, as the backend calls it)"
                                              : " (plain loop: strata's own)")
        << "\n";
    cpp << texts[i].run << texts[i].after << "  " << block_close(true) << "\n";
  }
  cpp << "  return *reinterpret_cast<const float*>(" << loss_at << ");\n}\n\n}  // namespace generated\n";

  return {{"model.h", h.str(), false},
          {"model.cpp", cpp.str(), false},
          {"weights.h", weights_h(), false},
          {"weights.cpp", weights_cpp(), false},
          {"main.cpp", train_main_cpp(false, tokens), false},
          {"CMakeLists.txt", cmake_lists("generated_train_step", "model_train"), false},
          {"weights.bin", weights, true}};
}

}  // namespace strata::codegen::onednn::detail
