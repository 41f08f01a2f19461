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
#include "strata/codegen/onednn/support_files.h"
#include "strata/core/error.h"

// The onednn emitter's training step (record_train_step's recording written out): each
// primitive staged as the backend stages it, strata's loops for the rest, the state file.
namespace strata::codegen::onednn::detail {

namespace {

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

// The dropout calls of a training step, in order: each keeps its {seed, offset} in the state.
std::vector<const ops::DropoutFwdArgs*> dropouts(const RecordedStep& step) {
  std::vector<const ops::DropoutFwdArgs*> d;
  for (const RecordedCall& c : step.calls)
    if (const auto* a = std::get_if<ops::DropoutFwdArgs>(&c.args)) d.push_back(a);
  return d;
}

}  // namespace

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

}  // namespace strata::codegen::onednn::detail
