#include "strata/codegen/onednn/emitter.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "strata/backends/onednn/call_observer.h"
#include "strata/backends/onednn/descriptor_rules.h"
#include "strata/codegen/onednn/record.h"
#include "strata/codegen/onednn/support_files.h"
#include "strata/core/error.h"

namespace strata::codegen::onednn {

namespace {

using backends::onednn::DescLayout;
using ops::OpId;
using ops::TensorView;

std::string ints(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + "}";
}
std::string shape(const TensorView& v) { return v.sizes.str(); }
std::string desc(const DescLayout& l) { return "memory::desc(" + ints(l.dims) + ", dt::f32, " + ints(l.strides) + ")"; }
std::string desc_of(const TensorView& v) { return desc(backends::onednn::view_layout(v)); }

const char* kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::arena: return "a buffer of the arena";
    case BufferKind::input: return "the caller's input";
    case BufferKind::input_buffer: return "the model's input buffer";
    case BufferKind::constant: return "a constant of the model";
  }
  return "?";
}

// A C++ identifier from a module name ("layer1.0.conv1" -> "layer1_0_conv1").
std::string identifier(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0]))) r = "m_" + r;
  return r;
}

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
std::string run_primitive(const std::string& m, const std::string& threads_line, bool residual = false) {
  std::string r = "    " + threads_line + "    " + m + ".src.pull(strm);\n";
  if (residual) {
    r += "    if (" + m + ".copies_z) {\n      memory into = " + m + ".dst.arg();\n      " + m +
         ".z_into_dst.execute(strm, " + m + ".z, into);\n    }\n";
  }
  r += "    " + m + ".prim.execute(strm, " + m + ".args);\n    " + m + ".dst.push(strm);\n    strm.wait();\n";
  return r;
}

CallText OneDnnEmitter::conv(const RecordedCall& c, const std::string& m, BufferMap& b) {
  const auto& a = std::get<ops::Conv2dFwdArgs>(c.args);
  for (const auto* v : {&a.x, &a.w, &a.b, &a.y, &a.z}) require_f32(*v, "conv2d_fwd (" + c.layer + ")");
  STRATA_CHECK(a.p.groups == 1, "strata_codegen: conv2d_fwd (", c.layer, ") has groups = ", a.p.groups,
               "; the onednn emitter writes out groups = 1 only (grouped weights are not supported yet)");
  STRATA_CHECK(c.primitive, "strata_codegen: conv2d_fwd (", c.layer, ") ran no primitive (internal error)");
  const auto form = backends::onednn::conv_forward_form(a);
  const std::string op = "conv2d_fwd (" + c.layer + ")";
  const std::string x = where(b, a.x, op + " argument x", BufferKind::arena);
  const std::string y = where(b, a.y, op + " argument y", BufferKind::arena);
  const std::string w = where(b, a.w, op + " argument w", BufferKind::constant);
  std::ostringstream l;
  l << "    " << threads(c);
  l << "    memory::desc src = " << desc_of(a.x) << ";\n";
  l << "    const memory::desc wei = " << desc_of(a.w) << ", dst = " << desc_of(a.y) << ";\n";
  l << "    const memory::desc bias = " << (a.b.defined ? desc_of(a.b) : std::string("memory::desc()")) << ";\n";
  l << "    memory::dims strides = {" << a.p.stride_h << ", " << a.p.stride_w << "};\n";
  if (form.gather_1x1) {
    const DescLayout px = backends::onednn::strided_pixels_layout(a.x, a.y, a.p);
    l << "    // 1x1 with stride: the stride-1 convolution of the pixels it reads, gathered by the source's reorder\n";
    l << "    if (auto pixels = try_desc(" << ints(px.dims) << ", " << ints(px.strides) << ")) {\n";
    l << "      src = *pixels;\n      strides = {1, 1};\n    }\n";
  }
  l << "    const auto pd = conv_pd(" << (form.inference ? "prop_kind::forward_inference" : "prop_kind::forward_training")
    << ", " << (form.winograd ? "true" : "false") << ", src, wei, bias, dst, strides, {" << a.p.dilation_h - 1 << ", "
    << a.p.dilation_w - 1 << "}, {" << a.p.pad_h << ", " << a.p.pad_w << "}, post_ops("
    << (a.z.defined ? "true" : "false") << ", " << (a.relu ? "true" : "false") << "), eng);\n";
  l << "    " << m << ".prim = dnnl::convolution_forward(pd);\n";
  l << "    " << m << ".src = Staged::make(src, pd.src_desc(), eng, true);\n";
  l << "    " << m << ".src.bind(" << x << ");\n";
  l << "    " << m << ".dst = Staged::make(dst, pd.dst_desc(), eng, false);\n";
  l << "    " << m << ".dst.bind(" << y << ");\n";
  l << "    " << m << ".args = {{DNNL_ARG_SRC, " << m << ".src.arg()}, {DNNL_ARG_DST, " << m << ".dst.arg()},\n";
  l << "        {DNNL_ARG_WEIGHTS, constant(wei, pd.weights_desc(), " << (a.w_version ? "true" : "false") << ", " << w
    << ", eng, strm)}};\n";
  if (a.b.defined)
    l << "    " << m << ".args.insert({DNNL_ARG_BIAS, constant(bias, pd.bias_desc(), false, "
      << where(b, a.b, op + " argument b", BufferKind::constant) << ", eng, strm)});\n";
  if (a.z.defined) {
    const std::string z = where(b, a.z, op + " argument z", BufferKind::arena);
    l << "    // the residual z goes into dst first, where the sum post-op reads it\n";
    l << "    " << m << ".z = memory(" << desc_of(a.z) << ", eng, " << z << ");\n";
    l << "    " << m << ".z_into_dst = dnnl::reorder(" << m << ".z, " << m << ".dst.arg());\n";
    // (in place, z already is the dst unless the primitive stages its dst elsewhere)
    l << "    " << m << ".copies_z = " << (a.z.data != a.y.data ? std::string("true") : m + ".dst.reorders") << ";\n";
  }
  CallText t;
  t.member = m;
  t.load = l.str();
  t.run = run_primitive(m, threads(c), a.z.defined);
  return t;
}

CallText OneDnnEmitter::linear(const RecordedCall& c, const std::string& m, BufferMap& b) {
  const auto& a = std::get<ops::LinearFwdArgs>(c.args);
  const std::string op = "linear_fwd (" + c.layer + ")";
  for (const auto* v : {&a.x, &a.w, &a.b, &a.y}) require_f32(*v, op);
  STRATA_CHECK(c.primitive, "strata_codegen: ", op, " ran no primitive (internal error)");
  const DescLayout wl = backends::onednn::view_layout(a.w);
  const DescLayout wt = backends::onednn::strided_layout({a.w.sizes[1], a.w.sizes[0]}, {wl.strides[1], wl.strides[0]});
  std::ostringstream l;
  l << "    " << threads(c);
  l << "    // w^T is w read with swapped strides\n";
  l << "    const memory::desc src = " << desc_of(a.x) << ", wei = " << desc(wt) << ", dst = " << desc_of(a.y) << ";\n";
  if (a.b.defined) {
    const DescLayout bl = backends::onednn::strided_layout({1, a.b.sizes[0]}, {a.b.sizes[0] * a.b.strides[0], a.b.strides[0]});
    l << "    const memory::desc bias = " << desc(bl) << ";\n";
    l << "    const memory::desc dense_bias(bias.dims(), dt::f32, memory::format_tag::ab);\n";
  } else {
    l << "    const memory::desc bias, dense_bias;\n";
  }
  l << "    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dense_bias, dst), eng);\n";
  l << "    " << m << ".prim = dnnl::matmul(pd);\n";
  l << "    " << m << ".src = Staged::make(src, pd.src_desc(), eng, true);\n";
  l << "    " << m << ".src.bind(" << where(b, a.x, op + " argument x", BufferKind::arena) << ");\n";
  l << "    " << m << ".dst = Staged::make(dst, pd.dst_desc(), eng, false);\n";
  l << "    " << m << ".dst.bind(" << where(b, a.y, op + " argument y", BufferKind::arena) << ");\n";
  l << "    " << m << ".args = {{DNNL_ARG_SRC, " << m << ".src.arg()}, {DNNL_ARG_DST, " << m << ".dst.arg()},\n";
  l << "        {DNNL_ARG_WEIGHTS, constant(wei, pd.weights_desc(), false, "
    << where(b, a.w, op + " argument w", BufferKind::constant) << ", eng, strm)}};\n";
  if (a.b.defined)
    l << "    " << m << ".args.insert({DNNL_ARG_BIAS, constant(bias, pd.bias_desc(), false, "
      << where(b, a.b, op + " argument b", BufferKind::constant) << ", eng, strm)});\n";
  return {m, l.str(), run_primitive(m, threads(c)), {}, false};
}

// The one-input primitives: pooling (max, average, global average) and ReLU's eltwise.
CallText OneDnnEmitter::unary(const RecordedCall& c, const std::string& m, BufferMap& b) {
  const std::string op = std::string(ops::op_name(c.op)) + " (" + c.layer + ")";
  STRATA_CHECK(c.primitive, "strata_codegen: ", op, " ran no primitive (internal error)");
  std::ostringstream l;
  l << "    " << threads(c);
  const TensorView* x = nullptr;
  const TensorView* y = nullptr;
  auto window = [&](const ops::Pool2dParams& p, const char* alg) {
    l << "    const dnnl::pooling_forward::primitive_desc pd({prop_kind::forward_inference, " << alg
      << ", src, dst, {" << p.stride_h << ", " << p.stride_w << "}, {" << p.kernel_h << ", " << p.kernel_w << "}, {"
      << p.pad_h << ", " << p.pad_w << "}, {" << p.pad_h << ", " << p.pad_w << "}}, eng);\n";
    l << "    " << m << ".prim = dnnl::pooling_forward(pd);\n";
  };
  if (const auto* a = std::get_if<ops::MaxPool2dFwdArgs>(&c.args)) {
    x = &a->x, y = &a->y;
    l << "    const memory::desc src = " << desc_of(*x) << ", dst = " << desc_of(*y) << ";\n";
    window(a->p, "algorithm::pooling_max");
  } else if (const auto* a = std::get_if<ops::AvgPool2dFwdArgs>(&c.args)) {
    x = &a->x, y = &a->y;
    l << "    const memory::desc src = " << desc_of(*x) << ", dst = " << desc_of(*y) << ";\n";
    window(a->p, a->p.count_include_pad ? "algorithm::pooling_avg_include_padding"
                                        : "algorithm::pooling_avg_exclude_padding");
  } else if (const auto* a = std::get_if<ops::GlobalAvgPoolFwdArgs>(&c.args)) {
    x = &a->x, y = &a->y;
    l << "    // the output [N, C] as [N, C, 1, 1]; the window is the whole plane\n";
    l << "    const memory::desc src = " << desc_of(*x) << ", dst = " << desc(backends::onednn::nc11_layout(*y, *x))
      << ";\n";
    ops::Pool2dParams p;
    p.kernel_h = static_cast<int>(x->sizes[2]), p.kernel_w = static_cast<int>(x->sizes[3]);
    p.stride_h = p.stride_w = 1;
    window(p, "algorithm::pooling_avg_include_padding");
  } else {
    const auto& r = std::get<ops::ReluFwdArgs>(c.args);
    x = &r.x, y = &r.y;
    l << "    const memory::desc src = " << desc_of(*x) << ", dst = " << desc_of(*y) << ";\n";
    l << "    const dnnl::eltwise_forward::primitive_desc pd(\n"
         "        dnnl::eltwise_forward::desc(prop_kind::forward_training, algorithm::eltwise_relu, src, 0.f, 0.f), eng);\n";
    l << "    " << m << ".prim = dnnl::eltwise_forward(pd);\n";
  }
  require_f32(*x, op);
  require_f32(*y, op);
  l << "    " << m << ".src = Staged::make(src, pd.src_desc(), eng, true);\n";
  l << "    " << m << ".src.bind(" << where(b, *x, op + " argument x", BufferKind::arena) << ");\n";
  l << "    " << m << ".dst = Staged::make(dst, pd.dst_desc(), eng, false);\n";
  l << "    " << m << ".dst.bind(" << where(b, *y, op + " argument y", BufferKind::arena) << ");\n";
  l << "    " << m << ".args = {{DNNL_ARG_SRC, " << m << ".src.arg()}, {DNNL_ARG_DST, " << m << ".dst.arg()}};\n";
  return {m, l.str(), run_primitive(m, threads(c)), {}, false};
}

bool dense_same_layout(const TensorView& x, const TensorView& y) {
  if (!(x.sizes == y.sizes) || x.dtype != y.dtype) return false;
  const bool dense = (x.is_contiguous() && y.is_contiguous()) || (x.is_channels_last() && y.is_channels_last());
  return dense;
}

// strata's plain loop for a ReLU below the backend's primitive threshold: x > 0 ? x : 0
// (a negative input gives +0 here, where the eltwise primitive gives -0).
CallText OneDnnEmitter::relu_loop(const RecordedCall& c, BufferMap& b) {
  const auto& a = std::get<ops::ReluFwdArgs>(c.args);
  const std::string op = "relu_fwd (" + c.layer + ")";
  require_f32(a.x, op);
  STRATA_CHECK(dense_same_layout(a.x, a.y), "strata_codegen: ", op, " reads ", shape(a.x),
               " and writes in another layout; the onednn emitter writes out the plain loop for one layout only");
  CallText t;
  t.run = "    const float* x = reinterpret_cast<const float*>(" + where(b, a.x, op + " argument x", BufferKind::arena) +
          ");\n    float* y = reinterpret_cast<float*>(" + where(b, a.y, op + " argument y", BufferKind::arena) +
          ");\n    for (int64_t i = 0; i < " + std::to_string(a.x.numel()) + "; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;\n";
  return t;
}

CallText OneDnnEmitter::copy(const RecordedCall& c, const RecordedStep& step, BufferMap& b) {
  const auto& a = std::get<ops::CopyArgs>(c.args);
  const std::string op = "copy (" + c.layer + ")";
  STRATA_CHECK(!c.primitive && dense_same_layout(a.x, a.y), "strata_codegen: ", op, " converts ", shape(a.x), " ",
               dtype_name(a.x.dtype), " into another layout or dtype; the onednn emitter writes out plain copies only");
  const bool from_input = a.x.data == step.input.data;
  CallText t;
  t.run = "    std::memcpy(" + where(b, a.y, op + " argument y", BufferKind::arena) + ", " +
          where(b, a.x, op + " argument x", from_input ? BufferKind::input : BufferKind::arena) + ", " +
          std::to_string(a.x.numel() * static_cast<int64_t>(dtype_size(a.x.dtype))) + ");\n";
  return t;
}

// A call's block: a scope, or (a training step's) a lambda called where it stands and kept out of
// line (model.cpp's OUT_OF_LINE), so that the compiler optimises one small function per call
// rather than two of thousands of lines: GCC 12 -O3 took about a quarter of the CPU time for
// ResNet-18's training step that way (48 s against about 210 s).
const char* block_open(bool out_of_line) { return out_of_line ? "[&]() OUT_OF_LINE {" : "{"; }
const char* block_close(bool out_of_line) { return out_of_line ? "}();" : "}"; }

// model.cpp's Model::State: the engine and stream, the weights (a training step's state), the
// arena, the model's input buffer, one member per primitive call, and the constructor that makes
// every primitive (each call's load block). `weights_args`: the Weights constructor's size and
// checksum; `read_only`: a prediction's constants, which no call writes; `out_of_line`: each
// block a function of its own (block_open).
void write_state(std::ostringstream& cpp, const RecordedStep& step, const std::vector<CallText>& texts,
                 const std::string& weights_args, bool read_only, bool out_of_line) {
  cpp << "\nstruct Model::State {\n  dnnl::engine eng{dnnl::engine::kind::cpu, 0};\n  dnnl::stream strm{eng};\n"
      << "  Weights weights;\n  std::unique_ptr<std::byte[], ArenaDeleter> arena{new (std::align_val_t{64}) std::byte["
      << std::max<int64_t>(step.arena.bytes, 1) << "]};\n";
  const int64_t in_bytes = step.input_buffer.defined ? view_span_bytes(step.input_buffer) : 0;
  cpp << "  // the model's input buffer, apart from the arena as in strata\n"
      << "  std::unique_ptr<std::byte[], ArenaDeleter> input_buffer{new (std::align_val_t{64}) std::byte["
      << std::max<int64_t>(in_bytes, 1) << "]};\n";
  for (const CallText& t : texts)
    if (!t.member.empty()) cpp << "  " << (t.train_call ? "TrainCall " : "Call ") << t.member << ";\n";
  cpp << "\n  explicit State(const std::string& weights_path) : weights(weights_path, " << weights_args << ") {\n"
      << "    std::byte* a = arena.get();\n    std::byte* in = input_buffer.get();\n"
      << "    " << (read_only ? "const " : "") << "std::byte* w = weights.data();\n    (void)a;\n    (void)in;\n"
      << "    (void)w;\n";
  for (size_t i = 0; i < texts.size(); ++i) {
    if (texts[i].member.empty()) continue;
    const RecordedCall& c = step.calls[i];
    // The load blocks sit one level deeper (inside the constructor) than the run blocks.
    std::istringstream lines(texts[i].load);
    cpp << "    " << block_open(out_of_line) << "  // " << c.layer << ": " << ops::op_name(c.op) << "\n";
    for (std::string line; std::getline(lines, line);) cpp << "  " << line << "\n";
    cpp << "    " << block_close(out_of_line) << "\n";
  }
}

// ---- training ----
// A training step's primitives live in a TrainCall (model.cpp's training helpers): every
// operand staged as the backend stages it, inputs pulled at each call (a trained weight changes
// every step, so it is re-laid out at every call as the backend does), the output pushed.

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
std::string dims2(int a, int b) { return "{" + std::to_string(a) + ", " + std::to_string(b) + "}"; }

// Appends "c.in.push_back(...)" for an input operand and returns its argument expression.
struct Operands {
  std::ostringstream& l;
  int n = 0;
  std::string in(const std::string& md, const std::string& want, const std::string& ptr) {
    l << "    c.in.push_back(Staged::make(" << md << ", " << want << ", eng, true));\n";
    l << "    c.in.back().bind(" << ptr << ");\n";
    return "c.in[" + std::to_string(n++) + "].arg()";
  }
  std::string out(const std::string& md, const std::string& want, const std::string& ptr) {
    l << "    c.out = Staged::make(" << md << ", " << want << ", eng, false);\n";
    l << "    c.out.bind(" << ptr << ");\n";
    return "c.out.arg()";
  }
  // One operand of a primitive: its DNNL_ARG_, the descriptor variable and the layout the
  // primitive wants, and where it lives.
  struct Arg {
    const char* arg;
    const char* md;
    const char* want;
    std::string ptr;
  };
  // c.prim = Prim(pd), then the inputs staged in order, the output, and c.args naming them.
  void primitive(const char* prim, std::initializer_list<Arg> ins, const Arg& output) {
    l << "    c.prim = " << prim << "(pd);\n";
    std::string args;
    for (const Arg& a : ins) args += std::string("{") + a.arg + ", " + in(a.md, a.want, a.ptr) + "}, ";
    args += std::string("{") + output.arg + ", " + out(output.md, output.want, output.ptr) + "}";
    l << "    c.args = {" << args << "};\n";
  }
  // The same for a backward primitive whose forward (`fwd`, made of `fwd_desc`) is the hint
  // oneDNN picks its kernel by; `bwd_desc` makes its own descriptor.
  void backward(const char* fwd, const std::string& fwd_desc, const char* prim, const std::string& bwd_desc,
                std::initializer_list<Arg> ins, const Arg& output) {
    l << "    const " << fwd << "::primitive_desc hint(" << fwd_desc << ", eng);\n";
    l << "    const " << prim << "::primitive_desc pd(" << bwd_desc << ", eng, hint);\n";
    primitive(prim, ins, output);
  }
};

CallText OneDnnEmitter::train_primitive(const RecordedCall& c, BufferMap& b) {
  const std::string op = std::string(ops::op_name(c.op)) + " (" + c.layer + ")";
  STRATA_CHECK(c.primitive, "strata_codegen: ", op, " ran no primitive (internal error)");
  std::ostringstream l;
  std::string after;  // strata's loop after the primitive, if any
  Operands o{l};
  auto at = [&](const TensorView& v, const char* arg) {
    require_f32(v, op);
    return state(b, v, op + " argument " + arg);
  };
  l << "    " << threads(c);
  if (const auto* a = std::get_if<ops::Conv2dFwdArgs>(&c.args)) {
    const auto form = backends::onednn::conv_forward_form(*a);
    STRATA_CHECK(a->p.groups == 1 && !a->z.defined && !a->relu && !form.inference && !form.gather_1x1 &&
                     !form.winograd,
                 "strata_codegen: ", op, " in a training step has groups, a fused epilogue or an inference form; "
                 "the onednn emitter writes out a training convolution of groups 1 without epilogue only");
    l << "    const memory::desc src = " << desc_of(a->x) << ", wei = " << desc_of(a->w) << ", dst = " << desc_of(a->y)
      << ";\n";
    l << "    const memory::desc bias = " << (a->b.defined ? desc_of(a->b) : std::string("memory::desc()")) << ";\n";
    l << "    const auto pd = conv_pd(prop_kind::forward_training, false, src, wei, bias, dst, "
      << dims2(a->p.stride_h, a->p.stride_w) << ", " << dims2(a->p.dilation_h - 1, a->p.dilation_w - 1) << ", "
      << dims2(a->p.pad_h, a->p.pad_w) << ", post_ops(false, false), eng);\n";
    l << "    c.prim = dnnl::convolution_forward(pd);\n";
    const std::string x = o.in("src", "pd.src_desc()", at(a->x, "x"));
    const std::string w = o.in("wei", "pd.weights_desc()", at(a->w, "w"));
    const std::string bias = a->b.defined ? o.in("bias", "pd.bias_desc()", at(a->b, "b")) : "";
    const std::string y = o.out("dst", "pd.dst_desc()", at(a->y, "y"));
    l << "    c.args = {{DNNL_ARG_SRC, " << x << "}, {DNNL_ARG_WEIGHTS, " << w << "}, {DNNL_ARG_DST, " << y << "}};\n";
    if (a->b.defined) l << "    c.args.insert({DNNL_ARG_BIAS, " << bias << "});\n";
  } else if (const auto* a = std::get_if<ops::Conv2dBwdDataArgs>(&c.args)) {
    STRATA_CHECK(a->p.groups == 1, "strata_codegen: ", op, " has groups = ", a->p.groups,
                 "; the onednn emitter writes out groups = 1 only");
    l << "    const memory::desc dx = " << desc_of(a->dx) << ", wei = " << desc_of(a->w) << ", dy = " << desc_of(a->dy)
      << ";\n";
    const std::string geom = dims2(a->p.stride_h, a->p.stride_w) + ", " +
                             dims2(a->p.dilation_h - 1, a->p.dilation_w - 1) + ", " + dims2(a->p.pad_h, a->p.pad_w);
    l << "    // the forward's primitive descriptor is the hint oneDNN picks the backward's kernel by\n";
    l << "    const auto hint = conv_pd(prop_kind::forward_training, false, dx, wei, memory::desc(), dy, " << geom
      << ", dnnl::primitive_attr(), eng);\n";
    l << "    const dnnl::convolution_backward_data::primitive_desc pd({algorithm::convolution_direct, any_like(dx), "
         "any_like(wei), any_like(dy), "
      << geom << ", " << dims2(a->p.pad_h, a->p.pad_w) << "}, eng, hint);\n";
    o.primitive("dnnl::convolution_backward_data",
                {{"DNNL_ARG_DIFF_DST", "dy", "pd.diff_dst_desc()", at(a->dy, "dy")},
                 {"DNNL_ARG_WEIGHTS", "wei", "pd.weights_desc()", at(a->w, "w")}},
                {"DNNL_ARG_DIFF_SRC", "dx", "pd.diff_src_desc()", at(a->dx, "dx")});
  } else if (const auto* a = std::get_if<ops::Conv2dBwdWeightArgs>(&c.args)) {
    STRATA_CHECK(a->p.groups == 1, "strata_codegen: ", op, " has groups = ", a->p.groups,
                 "; the onednn emitter writes out groups = 1 only");
    l << "    const memory::desc x = " << desc_of(a->x) << ", dw = " << desc_of(a->dw) << ", dy = " << desc_of(a->dy)
      << ";\n";
    const std::string geom = dims2(a->p.stride_h, a->p.stride_w) + ", " +
                             dims2(a->p.dilation_h - 1, a->p.dilation_w - 1) + ", " + dims2(a->p.pad_h, a->p.pad_w);
    l << "    const auto hint = conv_pd(prop_kind::forward_training, false, x, dw, memory::desc(), dy, " << geom
      << ", dnnl::primitive_attr(), eng);\n";
    l << "    const dnnl::convolution_backward_weights::primitive_desc pd({algorithm::convolution_direct, any_like(x), "
         "any_like(dw), any_like(dy), "
      << geom << ", " << dims2(a->p.pad_h, a->p.pad_w) << "}, eng, hint);\n";
    o.primitive("dnnl::convolution_backward_weights",
                {{"DNNL_ARG_SRC", "x", "pd.src_desc()", at(a->x, "x")},
                 {"DNNL_ARG_DIFF_DST", "dy", "pd.diff_dst_desc()", at(a->dy, "dy")}},
                {"DNNL_ARG_DIFF_WEIGHTS", "dw", "pd.diff_weights_desc()", at(a->dw, "dw")});
    if (backends::onednn::unblock_1x1_shape(a->dw, a->p.groups)) {
      // Where oneDNN chose ABcd16b16a for plain weights, dw leaves it by strata's loop, as in the backend.
      const std::string dims = ints({a->dw.sizes[0], a->dw.sizes[1], 1, 1});
      l << "    c.push = !(dw == memory::desc(" << dims << ", dt::f32, memory::format_tag::abcd) &&\n"
        << "               pd.diff_weights_desc() == memory::desc(" << dims << ", dt::f32, memory::format_tag::ABcd16b16a));\n";
      after = "    if (!c.push)\n      unblock_1x1(static_cast<const float*>(c.out.inner.get_data_handle()), " +
              fptr(b, a->dw, op + " argument dw", true) + ", int64_t{" + std::to_string(a->dw.sizes[0]) + "}, int64_t{" +
              std::to_string(a->dw.sizes[1]) + "});\n";
    }
  } else if (std::holds_alternative<ops::LinearFwdArgs>(c.args) ||
             std::holds_alternative<ops::LinearBwdDataArgs>(c.args) ||
             std::holds_alternative<ops::LinearBwdWeightArgs>(c.args)) {
    // Transposes are strides, as the backend describes them: a 2-D view read transposed.
    auto transposed = [](const TensorView& v) {
      const DescLayout l2 = backends::onednn::view_layout(v);
      return desc(backends::onednn::strided_layout({v.sizes[1], v.sizes[0]}, {l2.strides[1], l2.strides[0]}));
    };
    const TensorView *src = nullptr, *wei = nullptr, *bias = nullptr, *dst = nullptr;
    std::string src_md, wei_md;
    if (const auto* a = std::get_if<ops::LinearFwdArgs>(&c.args)) {
      src = &a->x, wei = &a->w, dst = &a->y, src_md = desc_of(a->x), wei_md = transposed(a->w);
      if (a->b.defined) bias = &a->b;
    } else if (const auto* a = std::get_if<ops::LinearBwdDataArgs>(&c.args)) {
      src = &a->dy, wei = &a->w, dst = &a->dx, src_md = desc_of(a->dy), wei_md = desc_of(a->w);
    } else {
      const auto& g = std::get<ops::LinearBwdWeightArgs>(c.args);
      src = &g.dy, wei = &g.x, dst = &g.dw, src_md = transposed(g.dy), wei_md = desc_of(g.x);
    }
    l << "    const memory::desc src = " << src_md << ", wei = " << wei_md << ", dst = " << desc_of(*dst) << ";\n";
    if (bias) {
      const DescLayout bl =
          backends::onednn::strided_layout({1, bias->sizes[0]}, {bias->sizes[0] * bias->strides[0], bias->strides[0]});
      l << "    const memory::desc bias = " << desc(bl) << ";\n";
      l << "    const memory::desc dense_bias(bias.dims(), dt::f32, memory::format_tag::ab);\n";
    } else {
      l << "    const memory::desc dense_bias;\n";
    }
    l << "    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dense_bias, dst), eng);\n";
    l << "    c.prim = dnnl::matmul(pd);\n";
    const std::string xs = o.in("src", "pd.src_desc()", at(*src, "src"));
    const std::string ws = o.in("wei", "pd.weights_desc()", at(*wei, "weights"));
    const std::string bs = bias ? o.in("bias", "pd.bias_desc()", at(*bias, "b")) : "";
    const std::string ys = o.out("dst", "pd.dst_desc()", at(*dst, "dst"));
    l << "    c.args = {{DNNL_ARG_SRC, " << xs << "}, {DNNL_ARG_WEIGHTS, " << ws << "}, {DNNL_ARG_DST, " << ys << "}};\n";
    if (bias) l << "    c.args.insert({DNNL_ARG_BIAS, " << bs << "});\n";
  } else if (const auto* a = std::get_if<ops::ReluBwdArgs>(&c.args)) {
    l << "    const memory::desc y = " << desc_of(a->y) << ", dy = " << desc_of(a->dy) << ", dx = " << desc_of(a->dx)
      << ";\n";
    l << "    // the gradient from the forward's output: dx = dy where y > 0\n";
    l << "    const algorithm alg = algorithm::eltwise_relu_use_dst_for_bwd;\n";
    o.backward("dnnl::eltwise_forward", "{prop_kind::forward_training, alg, y, 0.f, 0.f}", "dnnl::eltwise_backward",
               "{alg, dx, y, 0.f, 0.f}",
               {{"DNNL_ARG_DST", "y", "pd.dst_desc()", at(a->y, "y")},
                {"DNNL_ARG_DIFF_DST", "dy", "pd.diff_dst_desc()", at(a->dy, "dy")}},
               {"DNNL_ARG_DIFF_SRC", "dx", "pd.diff_src_desc()", at(a->dx, "dx")});
  } else if (const auto* a = std::get_if<ops::BatchNormFwdArgs>(&c.args)) {
    return batch_norm_fwd(c, *a, b);
  } else if (const auto* a = std::get_if<ops::BatchNormBwdArgs>(&c.args)) {
    return batch_norm_bwd(c, *a, b);
  } else if (const auto* a = std::get_if<ops::GlobalAvgPoolBwdArgs>(&c.args)) {
    // dy [N, C] as [N, C, 1, 1] (descriptor_rules.h); the window is the whole plane
    l << "    const memory::desc dx = " << desc_of(a->dx) << ", dy = " << desc(backends::onednn::nc11_layout(a->dy, a->dx))
      << ";\n";
    const std::string win =
        "{1, 1}, " + dims2(static_cast<int>(a->dx.sizes[2]), static_cast<int>(a->dx.sizes[3])) + ", {0, 0}, {0, 0}";
    l << "    const algorithm alg = algorithm::pooling_avg_include_padding;\n";
    o.backward("dnnl::pooling_forward", "{prop_kind::forward_training, alg, dx, dy, " + win + "}",
               "dnnl::pooling_backward", "{alg, dx, dy, " + win + "}",
               {{"DNNL_ARG_DIFF_DST", "dy", "pd.diff_dst_desc()", at(a->dy, "dy")}},
               {"DNNL_ARG_DIFF_SRC", "dx", "pd.diff_src_desc()", at(a->dx, "dx")});
  } else if (const auto* a = std::get_if<ops::AddArgs>(&c.args)) {
    l << "    const memory::desc ma = " << desc_of(a->a) << ", mb = " << desc_of(a->b) << ", my = " << desc_of(a->y)
      << ";\n";
    l << "    dnnl::binary::primitive_desc pd({algorithm::binary_add, ma, mb, my}, eng);\n";
    l << "    // mixed layouts get only the reference kernel: the inputs then go to the output's layout\n";
    l << "    if (std::string(pd.impl_info_str()).compare(0, 3, \"ref\") == 0)\n";
    l << "      pd = dnnl::binary::primitive_desc({algorithm::binary_add, my, my, my}, eng);\n";
    o.primitive("dnnl::binary",
                {{"DNNL_ARG_SRC_0", "ma", "pd.src_desc(0)", at(a->a, "a")},
                 {"DNNL_ARG_SRC_1", "mb", "pd.src_desc(1)", at(a->b, "b")}},
                {"DNNL_ARG_DST", "my", "pd.dst_desc()", at(a->y, "y")});
  } else {
    const auto& mp = std::get<ops::MaxPool2dBwdArgs>(c.args);
    const ops::Pool2dParams& p = mp.p;
    l << "    const memory::desc x = " << desc_of(mp.x) << ", dy = " << desc_of(mp.dy) << ", dx = " << desc_of(mp.dx)
      << ";\n";
    const std::string win = dims2(p.stride_h, p.stride_w) + ", " + dims2(p.kernel_h, p.kernel_w) + ", " +
                            dims2(p.pad_h, p.pad_w) + ", " + dims2(p.pad_h, p.pad_w);
    l << "    // the forward again, for the workspace (where each maximum was) the backward reads\n";
    l << "    const dnnl::pooling_forward::primitive_desc hint({prop_kind::forward_training, algorithm::pooling_max, x, "
         "dy, "
      << win << "}, eng);\n";
    l << "    const dnnl::pooling_backward::primitive_desc pd({algorithm::pooling_max, dx, dy, " << win
      << "}, eng, hint);\n";
    l << "    c.prim = dnnl::pooling_backward(pd);\n";
    l << "    c.pre = dnnl::pooling_forward(hint);\n    c.has_pre = true;\n";
    const std::string x = o.in("x", "hint.src_desc()", at(mp.x, "x"));
    const std::string dy = o.in("dy", "pd.diff_dst_desc()", at(mp.dy, "dy"));
    const std::string dx = o.out("dx", "pd.diff_src_desc()", at(mp.dx, "dx"));
    l << "    const memory workspace(hint.workspace_desc(), eng);\n";
    l << "    c.pre_args = {{DNNL_ARG_SRC, " << x << "}, {DNNL_ARG_DST, memory(hint.dst_desc(), eng)}, "
         "{DNNL_ARG_WORKSPACE, workspace}};\n";
    l << "    c.args = {{DNNL_ARG_DIFF_DST, " << dy << "}, {DNNL_ARG_DIFF_SRC, " << dx
      << "}, {DNNL_ARG_WORKSPACE, workspace}};\n";
  }
  return {"c", l.str(), "    " + threads(c) + "    c.run(strm);\n", after, true};
}

// Batch norm in training, as the onednn backend runs it (backends/onednn/batch_norm.cpp): the
// primitive, with gamma and beta as its scale and shift, the batch's mean and variance in the
// call's own memory, then strata's loop for the saved and running statistics.
CallText OneDnnEmitter::batch_norm_fwd(const RecordedCall& c, const ops::BatchNormFwdArgs& a, BufferMap& b) {
  const std::string op = "batch_norm_fwd (" + c.layer + ")";
  require_plain_training(a.training, a.sync, a.z.defined || a.relu || a.relu_mask.defined, op);
  STRATA_CHECK(a.gamma.defined && a.beta.defined, "strata_codegen: ", op, " has no gamma or beta; the onednn "
               "emitter writes out an affine batch norm only (not supported yet)");
  const int64_t ch = a.x.sizes[1];
  std::ostringstream l;
  Operands o{l};
  auto at = [&](const TensorView& v, const char* arg) { return operand(b, v, op, arg); };
  l << "    " << threads(c);
  l << "    const memory::desc x = " << desc_of(a.x) << ", y = " << desc_of(a.y) << ";\n";
  l << "    const memory::desc gamma = " << desc_of(a.gamma) << ", beta = " << desc_of(a.beta) << ";\n";
  l << "    const memory::desc chan({" << ch << "}, dt::f32, memory::format_tag::a);\n";
  l << "    const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;\n";
  l << "    const dnnl::batch_normalization_forward::primitive_desc pd({prop_kind::forward_training, x, "
       "static_cast<float>("
    << num(a.eps) << "), flags}, eng);\n";
  l << "    c.prim = dnnl::batch_normalization_forward(pd);\n";
  const std::string x = o.in("x", "pd.src_desc()", at(a.x, "x"));
  const std::string scale = o.in("gamma", "chan", at(a.gamma, "gamma"));
  const std::string shift = o.in("beta", "chan", at(a.beta, "beta"));
  const std::string y = o.out("y", "pd.dst_desc()", at(a.y, "y"));
  l << "    c.args = {{DNNL_ARG_SRC, " << x << "}, {DNNL_ARG_DST, " << y << "}, {DNNL_ARG_SCALE, " << scale
    << "}, {DNNL_ARG_SHIFT, " << shift << "},\n";
  l << "        {DNNL_ARG_MEAN, memory(pd.mean_desc(), eng)}, {DNNL_ARG_VARIANCE, memory(pd.variance_desc(), eng)}};\n";
  CallText t{"c", l.str(), "    " + threads(c) + "    c.run(strm);\n", "", true};
  t.after = "    // the saved and running statistics from the batch's: strata's loop\n"
            "    batch_norm_train_stats(static_cast<const float*>(c.args.at(DNNL_ARG_MEAN).get_data_handle()),\n"
            "                           static_cast<const float*>(c.args.at(DNNL_ARG_VARIANCE).get_data_handle()), "
            "int64_t{" +
            std::to_string(ch) + "}, int64_t{" + std::to_string(a.x.numel() / std::max<int64_t>(ch, 1)) + "}, " +
            num(a.eps) + ", " + num(a.momentum) + ",\n                           " +
            channel(b, a.save_mean, op + " argument save_mean") + ",\n                           " +
            channel(b, a.save_invstd, op + " argument save_invstd") + ",\n                           " +
            channel(b, a.running_mean, op + " argument running_mean") + ",\n                           " +
            channel(b, a.running_var, op + " argument running_var") + ");\n";
  return t;
}

// Its backward: the mean and variance given back from the saved statistics (strata's loop),
// the primitive with epsilon 0, then strata's loop for dgamma and dbeta.
CallText OneDnnEmitter::batch_norm_bwd(const RecordedCall& c, const ops::BatchNormBwdArgs& a, BufferMap& b) {
  const std::string op = "batch_norm_bwd (" + c.layer + ")";
  require_plain_training(a.training, a.sync, a.relu_mask.defined || a.dz.defined, op);
  STRATA_CHECK(a.gamma.defined && a.dx.defined, "strata_codegen: ", op, " has no gamma or no dx; the onednn "
               "emitter writes out an affine batch norm's full backward only (not supported yet)");
  std::ostringstream l;
  Operands o{l};
  auto at = [&](const TensorView& v, const char* arg) { return operand(b, v, op, arg); };
  const int64_t ch = a.x.sizes[1];
  l << "    " << threads(c);
  l << "    const memory::desc x = " << desc_of(a.x) << ", dx = " << desc_of(a.dx) << ", dy = " << desc_of(a.dy)
    << ";\n";
  l << "    const memory::desc gamma = " << desc_of(a.gamma) << ";\n";
  l << "    const memory::desc chan({" << ch << "}, dt::f32, memory::format_tag::a);\n";
  l << "    const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;\n";
  l << "    const dnnl::batch_normalization_forward::primitive_desc hint({prop_kind::forward_training, x, 0.f, flags}, "
       "eng);\n";
  l << "    const dnnl::batch_normalization_backward::primitive_desc pd({prop_kind::backward, dx, x, 0.f, flags}, eng, "
       "hint);\n";
  l << "    c.prim = dnnl::batch_normalization_backward(pd);\n";
  const std::string x = o.in("x", "pd.src_desc()", at(a.x, "x"));
  const std::string dy = o.in("dy", "pd.diff_dst_desc()", at(a.dy, "dy"));
  const std::string scale = o.in("gamma", "chan", at(a.gamma, "gamma"));
  const std::string dx = o.out("dx", "pd.diff_src_desc()", at(a.dx, "dx"));
  l << "    // oneDNN 2.6 checks for a shift argument in backward although it never reads it\n";
  l << "    const memory shift(chan, eng);\n";
  l << "    std::fill_n(static_cast<float*>(shift.get_data_handle()), " << ch << ", 0.f);\n";
  l << "    c.args = {{DNNL_ARG_SRC, " << x << "}, {DNNL_ARG_DIFF_DST, " << dy << "}, {DNNL_ARG_DIFF_SRC, " << dx
    << "},\n        {DNNL_ARG_SCALE, " << scale << "}, {DNNL_ARG_SHIFT, shift}, {DNNL_ARG_MEAN, memory(pd.mean_desc(), "
       "eng)},\n        {DNNL_ARG_VARIANCE, memory(pd.variance_desc(), eng)}, {DNNL_ARG_DIFF_SCALE, memory(chan, eng)},\n"
       "        {DNNL_ARG_DIFF_SHIFT, memory(chan, eng)}};\n";
  const auto handle = [](const char* arg) {
    return std::string("static_cast<float*>(c.args.at(") + arg + ").get_data_handle())";
  };
  CallText t{"c", l.str(), "", "", true};
  t.run = "    " + threads(c) + "    // the mean and variance from the saved statistics: strata's loop\n" +
          "    batch_norm_bwd_stats(" + channel(b, a.save_mean, op + " argument save_mean") + ",\n                         " +
          channel(b, a.save_invstd, op + " argument save_invstd") + ", int64_t{" + std::to_string(ch) + "}, " +
          handle("DNNL_ARG_MEAN") + ",\n                         " + handle("DNNL_ARG_VARIANCE") + ");\n" +
          "    c.run(strm);\n";
  t.after = "    batch_norm_param_grads(" + handle("DNNL_ARG_DIFF_SCALE") + ", " + handle("DNNL_ARG_DIFF_SHIFT") +
            ", int64_t{" + std::to_string(ch) + "},\n                           " +
            channel(b, a.dgamma, op + " argument dgamma") + ",\n                           " +
            channel(b, a.dbeta, op + " argument dbeta") + ");\n";
  return t;
}

// The plain loops of a training step: strata's own (the train_loops snippets) on dense buffers.
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
      two_inputs("add_of", {&a.a, "x0"}, {&a.b, "x1"}, {&a.y, "y"});  // (a is the arena)
      break;
    }
    case OpId::copy: {
      const auto& a = std::get<ops::CopyArgs>(c.args);
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
    default:
      STRATA_FAIL("strata_codegen: op ", op, " of the training step is not supported by the onednn emitter (it "
                  "writes out LeNet-5's and ResNet-18's: convolution, linear, ReLU, max pooling, global average "
                  "pooling, batch norm, add, dropout, softmax cross-entropy, their backward, fill and SGD)");
  }
  CallText t;
  t.run = r.str();
  return t;
}

// The dropout calls of a training step, in order: each keeps its {seed, offset} in the state.
std::vector<const ops::DropoutFwdArgs*> dropouts(const RecordedStep& step) {
  std::vector<const ops::DropoutFwdArgs*> d;
  for (const RecordedCall& c : step.calls)
    if (const auto* a = std::get_if<ops::DropoutFwdArgs>(&c.args)) d.push_back(a);
  return d;
}

// A weights file: header (magic, payload size, FNV-1a checksum), then the payload.
std::string weights_file(const std::string& payload) {
  const uint64_t header[2] = {payload.size(), fnv1a(payload.data(), static_cast<int64_t>(payload.size()))};
  std::string f(kWeightsMagic, 8);
  f.append(reinterpret_cast<const char*>(header), sizeof header);
  return f + payload;
}

// A member name per call: the layer's, or for a call without weights the layer before it and the op.
std::vector<std::string> member_names(const RecordedStep& step) {
  std::vector<std::string> names;
  std::set<std::string> used;
  for (size_t i = 0; i < step.calls.size(); ++i) {
    const RecordedCall& c = step.calls[i];
    std::string m = c.layer;
    if (m.rfind("after ", 0) == 0) {
      m.erase(0, 6);
      m += '_';
      m += ops::op_name(c.op);
    }
    m = identifier(m);
    // A layer's second call (a training step's backward) gets its op's name, then its index.
    if (used.count(m)) m += std::string("_") + std::string(ops::op_name(c.op));
    if (!used.insert(m).second) {
      m += '_';
      m += std::to_string(i);
      used.insert(m);
    }
    names.push_back(m);
  }
  return names;
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
  STRATA_CHECK(step.input.dtype == DType::f32 && step.output.dtype == DType::f32 && step.labels.dtype == DType::i64 &&
                   step.labels.dim() == 1 && step.labels.is_contiguous(),
               "strata_codegen: the training step takes ", dtype_name(step.input.dtype), " images and ",
               dtype_name(step.labels.dtype), " labels; the onednn emitter writes out f32 images with contiguous i64 "
               "labels only");
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
  const int64_t batch = step.labels.sizes[0];
  int64_t classes = 0;
  for (const RecordedCall& c : step.calls)
    if (const auto* x = std::get_if<ops::SoftmaxXentFwdArgs>(&c.args)) classes = x->logits.sizes[1];

  const std::string version = backends::onednn::library_version();
  std::ostringstream h;
  h << "#pragma once\n// Generated by strata_codegen: a training step of " << step.model << ", input "
    << shape(step.input) << " f32, backend onednn.\n// Needs oneDNN only; bitwise equal to strata's direct mode on its "
       "onednn backend with oneDNN "
    << version << " on the same CPU and thread count.\n#include <cstdint>\n#include <memory>\n#include <string>\n\n"
    << "namespace generated {\n\n"
    << "inline constexpr int64_t kInputSizes[" << step.input.dim() << "] = "
    << ints(std::vector<int64_t>(step.input.sizes.begin(), step.input.sizes.end())) << ";\n"
    << "inline constexpr int64_t kLabelSizes[1] = {" << batch << "};\n"
    << "inline constexpr int64_t kClasses = " << classes << ";\n"
    << "inline constexpr const char* kOneDnnVersion = \"" << version << "\";  // generated with\n\n"
    << "class Model {\n public:\n"
    << "  // Reads the state (parameters, gradients, momentum buffers, dropout's counters) and makes every\n"
    << "  // primitive; throws std::runtime_error or dnnl::error.\n"
    << "  explicit Model(const std::string& weights_path);\n  ~Model();\n  Model(const Model&) = delete;\n"
    << "  Model& operator=(const Model&) = delete;\n"
    << "  // One step of SGD on a batch: input kInputSizes f32 (NCHW), labels kLabelSizes i64 in [0, kClasses).\n"
    << "  // Returns the batch's mean softmax cross-entropy before the step; throws std::invalid_argument\n"
    << "  // naming a label out of range. Not thread-safe.\n"
    << "  float train_step(const float* input, const int64_t* labels);\n"
    << "  // Writes the state as it is now, in the format the constructor reads.\n"
    << "  void save(const std::string& weights_path) const;\n\n"
    << " private:\n  struct State;\n  std::unique_ptr<State> s_;\n};\n\n}  // namespace generated\n";

  std::ostringstream cpp;
  cpp << "// Generated by strata_codegen: a training step of " << step.model << ", input " << shape(step.input)
      << " f32, backend onednn (oneDNN " << version << ").\n"
      << "// strata's direct-mode training step written out: every primitive made once at load, as strata's onednn\n"
      << "// backend makes it, then forward, loss, backward and SGD run in order; every intermediate at the offset\n"
      << "// strata's memory planner chose in one arena of " << step.arena.bytes << " bytes. State: "
      << buffers.constants().size() << " tensors and " << dropout_index << " dropout counters, " << payload_bytes
      << " bytes in the weights file:\n";
  for (const Constant& k : buffers.constants())
    cpp << "//   w + " << k.file_offset << ": " << k.name << " (" << k.bytes << " bytes)\n";
  cpp << "//   w + " << counters_at << ": dropout's {seed, offset}, 16 bytes per dropout layer\n";
  cpp << model_cpp_prologue("#include <cmath>\n#include <string>\n#include <vector>\n") << train_prologue();
  cpp << "\nconstexpr int64_t kCountersAt = " << counters_at << ";\n";
  write_state(cpp, step, texts, std::to_string(payload_bytes) + ", 0", false, true);
  cpp << "  }\n};\n\nModel::Model(const std::string& weights_path) : s_(std::make_unique<State>(weights_path)) {}\n"
      << "Model::~Model() = default;\n\n"
      << "void Model::save(const std::string& weights_path) const { s_->weights.save(weights_path); }\n\n"
      << "float Model::train_step(const float* input, const int64_t* labels) {\n"
      << "  for (int64_t i = 0; i < kLabelSizes[0]; ++i)\n"
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
        << (c.primitive || c.op == OpId::copy ? "" : " (plain loop: strata's own)") << "\n";
    cpp << texts[i].run << texts[i].after << "  " << block_close(true) << "\n";
  }
  cpp << "  return *reinterpret_cast<const float*>(" << loss_at << ");\n}\n\n}  // namespace generated\n";

  return {{"model.h", h.str(), false},
          {"model.cpp", cpp.str(), false},
          {"weights.h", weights_h(), false},
          {"weights.cpp", weights_cpp(), false},
          {"main.cpp", train_main_cpp(), false},
          {"CMakeLists.txt", cmake_lists("generated_train_step", "model_train"), false},
          {"weights.bin", weights, true}};
}

std::vector<GeneratedFile> OneDnnEmitter::emit(const RecordedStep& step, BufferMap& buffers) {
  if (step.training) return emit_train(step, buffers);
  STRATA_CHECK(step.input.dtype == DType::f32 && step.output.dtype == DType::f32, "strata_codegen: the model takes ",
               dtype_name(step.input.dtype), " and returns ", dtype_name(step.output.dtype),
               "; the onednn emitter writes out f32 models only (bf16 is not supported yet)");
  std::vector<CallText> texts;
  const std::vector<std::string> members = member_names(step);
  for (size_t i = 0; i < step.calls.size(); ++i) {
    const RecordedCall& c = step.calls[i];
    const std::string& m = members[i];
    // A call's blocks name its member `c`, bound to it here.
    CallText t;
    switch (c.op) {
      case OpId::copy: t = copy(c, step, buffers); break;
      case OpId::conv2d_fwd: t = conv(c, "c", buffers); break;
      case OpId::linear_fwd: t = linear(c, "c", buffers); break;
      case OpId::relu_fwd: t = c.primitive ? unary(c, "c", buffers) : relu_loop(c, buffers); break;
      case OpId::max_pool2d_fwd:
      case OpId::avg_pool2d_fwd:
      case OpId::global_avg_pool_fwd: t = unary(c, "c", buffers); break;
      default:
        STRATA_FAIL("strata_codegen: op ", ops::op_name(c.op), " (", c.layer,
                    ") is not supported by the onednn emitter (it writes out conv2d_fwd, linear_fwd, relu_fwd, "
                    "max_pool2d_fwd, avg_pool2d_fwd, global_avg_pool_fwd and copy)");
    }
    if (!t.member.empty()) {
      t.member = m;
      t.load = "    Call& c = " + m + ";\n" + t.load;
      t.run = "    Call& c = s." + m + ";\n" + t.run;
    }
    texts.push_back(std::move(t));
  }
  const std::string out = where(buffers, step.output, "the model's output", BufferKind::arena);
  const int64_t out_bytes = step.output.numel() * 4;

  // The weights file: header, then each constant at its offset.
  std::string payload(static_cast<size_t>(buffers.constants_bytes()), '\0');
  for (const Constant& k : buffers.constants())
    std::memcpy(payload.data() + k.file_offset, k.data, static_cast<size_t>(k.bytes));
  const uint64_t checksum = fnv1a(payload.data(), static_cast<int64_t>(payload.size()));
  std::string weights(kWeightsMagic, 8);
  const uint64_t header[2] = {payload.size(), checksum};
  weights.append(reinterpret_cast<const char*>(header), sizeof header);
  weights += payload;

  const std::string version = backends::onednn::library_version();
  std::ostringstream h;
  h << "#pragma once\n// Generated by strata_codegen: " << step.model << ", input " << shape(step.input)
    << " f32, backend onednn.\n// Needs oneDNN only; bitwise equal to strata's direct mode on its onednn backend "
       "with oneDNN "
    << version << " on the same CPU and thread count.\n#include <cstdint>\n#include <memory>\n#include <string>\n\n"
    << "namespace generated {\n\n"
    << "inline constexpr int64_t kInputSizes[" << step.input.dim() << "] = " << ints(std::vector<int64_t>(step.input.sizes.begin(), step.input.sizes.end())) << ";\n"
    << "inline constexpr int64_t kOutputSizes[" << step.output.dim() << "] = " << ints(std::vector<int64_t>(step.output.sizes.begin(), step.output.sizes.end())) << ";\n"
    << "inline constexpr const char* kOneDnnVersion = \"" << version << "\";  // generated with\n\n"
    << "class Model {\n public:\n  // Reads the weights file and makes every primitive; throws std::runtime_error or dnnl::error.\n"
    << "  explicit Model(const std::string& weights_path);\n  ~Model();\n  Model(const Model&) = delete;\n"
    << "  Model& operator=(const Model&) = delete;\n"
    << "  // input: kInputSizes, f32, contiguous (NCHW); output: kOutputSizes, f32. Not thread-safe.\n"
    << "  void run(const float* input, float* output);\n\n private:\n  struct State;\n  std::unique_ptr<State> s_;\n};\n\n"
    << "}  // namespace generated\n";

  std::ostringstream cpp;
  cpp << "// Generated by strata_codegen: " << step.model << ", input " << shape(step.input)
      << " f32, backend onednn (oneDNN " << version << ").\n"
      << "// strata's direct-mode prediction written out: every primitive made once at load, as strata's onednn\n"
      << "// backend makes it, then run in order; every intermediate at the offset strata's memory planner chose\n"
      << "// in one arena of " << step.arena.bytes << " bytes. Weights: " << buffers.constants().size()
      << " constants, " << buffers.constants_bytes() << " bytes in the weights file:\n";
  for (const Constant& k : buffers.constants())
    cpp << "//   w + " << k.file_offset << ": " << k.name << " (" << k.bytes << " bytes)\n";
  cpp << model_cpp_prologue();
  write_state(cpp, step, texts, std::to_string(buffers.constants_bytes()) + ", " + std::to_string(checksum) + "ull",
              true, false);
  cpp << "  }\n};\n\nModel::Model(const std::string& weights_path) : s_(std::make_unique<State>(weights_path)) {}\n"
      << "Model::~Model() = default;\n\n"
      << "void Model::run(const float* input, float* output) {\n  State& s = *s_;\n  dnnl::stream& strm = s.strm;\n"
      << "  std::byte* a = s.arena.get();\n  std::byte* in = s.input_buffer.get();\n  (void)in;\n";
  for (size_t i = 0; i < texts.size(); ++i) {
    const RecordedCall& c = step.calls[i];
    std::string io;
    std::visit([&](const auto& args) {
      if constexpr (requires { args.x; args.y; }) io = shape(args.x) + " -> " + shape(args.y);
    }, c.args);
    cpp << "  {  // " << c.layer << ": " << ops::op_name(c.op) << " " << io
        << (c.primitive || c.op == OpId::copy ? "" : " (plain loop: strata's below its primitive threshold)") << "\n";
    cpp << texts[i].run << "  }\n";
  }
  cpp << "  std::memcpy(output, " << out << ", " << out_bytes << ");\n}\n\n}  // namespace generated\n";

  return {{"model.h", h.str(), false},
          {"model.cpp", cpp.str(), false},
          {"weights.h", weights_h(), false},
          {"weights.cpp", weights_cpp(), false},
          {"main.cpp", main_cpp(), false},
          {"CMakeLists.txt", cmake_lists("generated_model"), false},
          {"weights.bin", weights, true}};
}

}  // namespace

std::unique_ptr<Emitter> make_onednn_emitter() { return std::make_unique<OneDnnEmitter>(); }

}  // namespace strata::codegen::onednn
