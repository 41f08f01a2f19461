#include "strata/codegen/onednn/emitter.h"
#include "strata/codegen/onednn/emitter_parts.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "strata/backends/onednn/call_observer.h"
#include "strata/backends/onednn/descriptor_rules.h"
#include "strata/codegen/onednn/record.h"
#include "strata/codegen/record_util.h"
#include "strata/codegen/onednn/support_files.h"
#include "strata/core/error.h"

namespace strata::codegen::onednn {
namespace detail {

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

std::string identifier(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0]))) r = "m_" + r;
  return r;
}

std::string run_primitive(const std::string& m, const std::string& threads_line, bool residual) {
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
  refuse_linear_extras(a, op, "onednn");
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
  // The caller's input, a buffer of the arena, or a constant (a GPT's table copied into its padded rows).
  const BufferKind from = a.x.data == step.input.data ? BufferKind::input
                          : b.locate(a.x, op + " argument x").kind == BufferKind::constant ? BufferKind::constant
                                                                                           : BufferKind::arena;
  CallText t;
  t.run = "    std::memcpy(" + where(b, a.y, op + " argument y", BufferKind::arena) + ", " +
          where(b, a.x, op + " argument x", from) + ", " +
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

std::string weights_file(const std::string& payload) {
  const uint64_t header[2] = {payload.size(), fnv1a(payload.data(), static_cast<int64_t>(payload.size()))};
  std::string f(kWeightsMagic, 8);
  f.append(reinterpret_cast<const char*>(header), sizeof header);
  return f + payload;
}

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

std::vector<GeneratedFile> OneDnnEmitter::emit(const RecordedStep& step, BufferMap& buffers) {
  if (step.training) return emit_train(step, buffers);
  // A language model takes token ids (i64), every other model its compute dtype.
  const bool tokens = step.input.dtype == DType::i64;
  STRATA_CHECK((tokens || step.input.dtype == DType::f32) && step.output.dtype == DType::f32,
               "strata_codegen: the model takes ", dtype_name(step.input.dtype), " and returns ",
               dtype_name(step.output.dtype), "; the onednn emitter writes out f32 models only (bf16 is not supported "
               "yet)");
  const bool transformer = runs_transformer_ops(step);
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
        if (is_transformer_op(c.op)) {
          t = transformer_call(c, step, buffers);
          break;
        }
        STRATA_FAIL("strata_codegen: op ", ops::op_name(c.op), " (", c.layer,
                    ") is not supported by the onednn emitter (it writes out conv2d_fwd, linear_fwd, relu_fwd, "
                    "max_pool2d_fwd, avg_pool2d_fwd, global_avg_pool_fwd, copy, and a GPT's index_select, "
                    "layer_norm_fwd, attention_fwd, unary_fwd, add and bmm)");
    }
    if (!t.member.empty()) {
      const std::string type = t.train_call ? "TrainCall& c = " : "Call& c = ";
      t.member = m;
      t.load = "    " + type + m + ";\n" + t.load;
      t.run = "    " + type + "s." + m + ";\n" + t.run;
    }
    texts.push_back(std::move(t));
  }
  const std::string out = where(buffers, step.output, "the model's output", BufferKind::arena);
  // The output is the arena's bytes, or the first columns of its rows (a GPT's padded vocabulary).
  const int64_t out_cols = step.output.sizes[step.output.dim() - 1];
  const int64_t out_row = step.output.dim() > 1 ? step.output.strides[step.output.dim() - 2] : out_cols;
  const std::string copy_out =
      step.output.is_contiguous()
          ? "  std::memcpy(output, " + out + ", " + std::to_string(step.output.numel() * 4) + ");\n"
          : "  for (int64_t r = 0; r < " + std::to_string(step.output.numel() / out_cols) + "; ++r)  // rows of " +
                std::to_string(out_row) + ", the first " + std::to_string(out_cols) + " columns\n" +
                "    std::memcpy(output + r * " + std::to_string(out_cols) + ", " + out + " + r * " +
                std::to_string(out_row * 4) + ", " + std::to_string(out_cols * 4) + ");\n";
  // Token ids index the table the input is looked up in (a GPT's wte): the program refuses others.
  int64_t id_limit = 0;
  for (const RecordedCall& c : step.calls)
    if (const auto* a = std::get_if<ops::IndexSelectArgs>(&c.args); a && a->index.data == step.input_buffer.data)
      id_limit = a->x.sizes[0];
  STRATA_CHECK(!tokens || id_limit > 0, "strata_codegen: the model takes i64 input ", shape(step.input),
               " that no lookup reads as token ids; the onednn emitter writes out token ids read by an embedding only");
  const char* in_type = tokens ? "int64_t" : "float";
  const char* in_what = tokens ? " token ids (i64)" : " f32";

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
    << in_what << ", backend onednn.\n// Needs oneDNN only; bitwise equal to strata's direct mode on its onednn backend "
       "with oneDNN "
    << version << " on the same CPU and thread count.\n#include <cstdint>\n#include <memory>\n#include <string>\n\n"
    << "namespace generated {\n\n"
    << "inline constexpr int64_t kInputSizes[" << step.input.dim() << "] = " << ints(std::vector<int64_t>(step.input.sizes.begin(), step.input.sizes.end())) << ";\n"
    << "inline constexpr int64_t kOutputSizes[" << step.output.dim() << "] = " << ints(std::vector<int64_t>(step.output.sizes.begin(), step.output.sizes.end())) << ";\n"
    << (tokens ? "// The input's token ids are in [0, kInputLimit).\ninline constexpr int64_t kInputLimit = " +
                     std::to_string(id_limit) + ";\n"
               : std::string())
    << "inline constexpr const char* kOneDnnVersion = \"" << version << "\";  // generated with\n\n"
    << "class Model {\n public:\n  // Reads the weights file and makes every primitive; throws std::runtime_error or dnnl::error.\n"
    << "  explicit Model(const std::string& weights_path);\n  ~Model();\n  Model(const Model&) = delete;\n"
    << "  Model& operator=(const Model&) = delete;\n"
    << (tokens ? "  // input: kInputSizes token ids, i64 in [0, kInputLimit) (std::invalid_argument names one that\n"
                 "  // is not); output: kOutputSizes, f32 logits. Not thread-safe.\n"
               : "  // input: kInputSizes, f32, contiguous (NCHW); output: kOutputSizes, f32. Not thread-safe.\n")
    << "  void run(const " << in_type << "* input, float* output);\n\n private:\n  struct State;\n"
    << "  std::unique_ptr<State> s_;\n};\n\n"
    << "}  // namespace generated\n";

  std::ostringstream cpp;
  cpp << "// Generated by strata_codegen: " << step.model << ", input " << shape(step.input)
      << in_what << ", backend onednn (oneDNN " << version << ").\n"
      << "// strata's direct-mode prediction written out: every primitive made once at load, as strata's onednn\n"
      << "// backend makes it, then run in order; every intermediate at the offset strata's memory planner chose\n"
      << "// in one arena of " << step.arena.bytes << " bytes. Weights: " << buffers.constants().size()
      << " constants, " << buffers.constants_bytes() << " bytes in the weights file:\n";
  for (const Constant& k : buffers.constants())
    cpp << "//   w + " << k.file_offset << ": " << k.name << " (" << k.bytes << " bytes)\n";
  // A GPT's plain loops come with the training step's (add's element, TrainCall for the add primitive).
  if (transformer)
    cpp << model_cpp_prologue("#include <cmath>\n#include <limits>\n#include <string>\n#include <vector>\n")
        << train_prologue() << transformer_prologue();
  else
    cpp << model_cpp_prologue();
  write_state(cpp, step, texts, std::to_string(buffers.constants_bytes()) + ", " + std::to_string(checksum) + "ull",
              true, false);
  cpp << "  }\n};\n\nModel::Model(const std::string& weights_path) : s_(std::make_unique<State>(weights_path)) {}\n"
      << "Model::~Model() = default;\n\n"
      << "void Model::run(const " << in_type << "* input, float* output) {\n  State& s = *s_;\n"
      << "  dnnl::stream& strm = s.strm;\n  std::byte* a = s.arena.get();\n  std::byte* in = s.input_buffer.get();\n"
      << (transformer ? "  const std::byte* w = s.weights.data();  // the plain loops read the weights in place\n"
                        "  (void)w;\n  (void)strm;\n"
                      : "")
      << "  (void)in;\n";
  for (size_t i = 0; i < texts.size(); ++i) {
    const RecordedCall& c = step.calls[i];
    std::string io;
    std::visit([&](const auto& args) {
      if constexpr (requires { args.x; args.y; })
        io = shape(args.x) + " -> " + shape(args.y);
      else if constexpr (requires { args.a; args.b; args.y; })  // add, bmm
        io = shape(args.a) + ", " + shape(args.b) + " -> " + shape(args.y);
      else if constexpr (requires { args.q; args.y; })  // attention
        io = shape(args.q) + " -> " + shape(args.y);
    }, c.args);
    cpp << "  {  // " << c.layer << ": " << ops::op_name(c.op) << " " << io
        << (c.primitive || c.op == OpId::copy ? ""
            : c.op == OpId::bmm               ? " (oneDNN's sgemm, as the backend calls it)"
            : c.op == OpId::relu_fwd || c.op == OpId::add ? " (plain loop: strata's below its primitive threshold)"
                                                          : " (plain loop: strata's own)")
        << "\n";
    cpp << texts[i].run << "  }\n";
  }
  cpp << copy_out << "}\n\n}  // namespace generated\n";

  return {{"model.h", h.str(), false},
          {"model.cpp", cpp.str(), false},
          {"weights.h", weights_h(), false},
          {"weights.cpp", weights_cpp(), false},
          {"main.cpp", main_cpp(tokens), false},
          {"CMakeLists.txt", cmake_lists("generated_model"), false},
          {"weights.bin", weights, true}};
}

}  // namespace detail

std::unique_ptr<Emitter> make_onednn_emitter() { return std::make_unique<detail::OneDnnEmitter>(); }

}  // namespace strata::codegen::onednn
