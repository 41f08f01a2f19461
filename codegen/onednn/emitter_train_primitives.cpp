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

// The onednn emitter's training step, its primitives: the convolution, linear, pooling and batch
// norm calls of a recorded training step as model.cpp's TrainCall blocks.
namespace strata::codegen::onednn::detail {

namespace {

// A training step's primitives live in a TrainCall (model.cpp's training helpers): every
// operand staged as the backend stages it, inputs pulled at each call (a trained weight changes
// every step, so it is re-laid out at every call as the backend does), the output pushed.

std::string dims2(int a, int b) {
  // Appended, not "{" + std::to_string(a): GCC 12 warns (-Wrestrict, a false positive) on that form here.
  std::string s = "{";
  s += std::to_string(a);
  s += ", ";
  s += std::to_string(b);
  s += "}";
  return s;
}

// A convolution's strides, dilations (oneDNN counts them from 0) and padding, as its descriptors take them.
std::string conv_geometry(const ops::Conv2dParams& p) {
  return dims2(p.stride_h, p.stride_w) + ", " + dims2(p.dilation_h - 1, p.dilation_w - 1) + ", " +
         dims2(p.pad_h, p.pad_w);
}

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
    l << "    const auto pd = conv_pd(prop_kind::forward_training, false, src, wei, bias, dst, " << conv_geometry(a->p)
      << ", post_ops(false, false), eng);\n";
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
    const std::string geom = conv_geometry(a->p);
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
    const std::string geom = conv_geometry(a->p);
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
      refuse_linear_extras(*a, "linear_fwd (" + c.layer + ")", "onednn");
      src = &a->x, wei = &a->w, dst = &a->y, src_md = desc_of(a->x), wei_md = transposed(a->w);
      if (a->b.defined) bias = &a->b;
    } else if (const auto* a = std::get_if<ops::LinearBwdDataArgs>(&c.args)) {
      STRATA_CHECK(!a->act, "strata_codegen: linear_bwd_data (", c.layer, ") has an activation epilogue, which the "
                   "onednn emitter does not write out yet");
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
}  // namespace strata::codegen::onednn::detail
