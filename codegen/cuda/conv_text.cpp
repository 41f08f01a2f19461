// A convolution as the cuda backend ran it (backends/cuda/conv.cpp, conv_graph.cpp): from a
// cuDNN graph-API plan of the engine its heuristics or timing chose, with the bias, residual and
// ReLU inside the graph where an engine took them, else after it in strata's epilogue kernel; or
// through the legacy cudnnConvolutionForward with the algorithm and math type it chose.
#include "strata/codegen/cuda/call_text.h"
#include "strata/core/error.h"

namespace strata::codegen::cuda {

using backends::cuda::LibraryCall;
using Kind = LibraryCall::Kind;
using ops::TensorView;

namespace {

// The bias [K] as the graph's [1, K, 1, 1] operand, broadcast over N, H and W (conv_graph.cpp).
TensorView bias_4d(const TensorView& b) {
  TensorView v = b;
  const int64_t k = b.sizes[0], st = b.strides[0];
  v.sizes = Shape{1, k, 1, 1};
  v.strides = Shape{k * st, st, st, st};
  return v;
}

std::string tensor4(const TensorView& v, Places& p, const std::string& what) {
  return std::string("{") + dims_of(v) + ", " + strides_of(v) + ", " + std::to_string(p.align(v, what)) + "}";
}


// "residual, bias, ReLU": the epilogue's parts, in the order they apply.
std::string epilogue_parts(const ops::Conv2dFwdArgs& a) {
  std::string s;
  for (const auto& [on, name] : {std::pair{a.z.defined, "residual"}, {a.b.defined, "bias"}, {a.relu, "ReLU"}})
    if (on) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

}  // namespace

CallText conv_text(const RecordedCall& c, const std::string& m, Places& p) {
  const auto& a = std::get<ops::Conv2dFwdArgs>(c.args);
  const std::string op = "conv2d_fwd (" + c.layer + ")";
  refuse_staging(c);
  STRATA_CHECK(a.p.groups == 1, "strata_codegen: ", op, " has ", a.p.groups, " groups; the cuda emitter writes out "
               "convolutions of one group (strata's graph path takes no others)");
  require_dense_f32(a.x, op + " x");
  require_dense_f32(a.w, op + " w");
  require_dense_f32(a.y, op + " y");
  if (a.z.defined) require_dense_f32(a.z, op + " z");
  STRATA_CHECK(!a.b.defined || (a.b.dtype == DType::f32 && a.b.dim() == 1 && a.b.strides[0] == 1),
               "strata_codegen: ", op, ": the bias must be a dense f32 vector");
  const LibraryCall* conv = nullptr;
  bool epilogue_kernel = false;
  for (const LibraryCall& l : c.library) {
    if (l.kind == Kind::conv_graph || l.kind == Kind::conv_legacy) {
      STRATA_CHECK(!conv, "strata_codegen: ", op, " ran two convolutions (internal error)");
      conv = &l;
    } else {
      STRATA_CHECK(l.kind == Kind::conv_epilogue, "strata_codegen: ", op, " ran a library call the cuda emitter "
                   "does not expect of a convolution (kind ", static_cast<int>(l.kind), ")");
      epilogue_kernel = true;
    }
  }
  STRATA_CHECK(conv, "strata_codegen: ", op, ": the cuda backend reported no convolution it ran (internal error)");
  const bool epilogue = a.b.defined || a.z.defined || a.relu;
  const bool fused = conv->kind == Kind::conv_graph && conv->fused;
  STRATA_CHECK(epilogue == (fused || epilogue_kernel), "strata_codegen: ", op, ": the bias, residual and ReLU ran "
               "neither inside the convolution's graph nor in strata's epilogue kernel (internal error)");
  const std::string x = p.ptr(a.x, op + " x"), w = p.ptr(a.w, op + " w"), y = p.ptr(a.y, op + " y");
  const std::string b = a.b.defined ? p.ptr(a.b, op + " bias") : "nullptr";
  const std::string z = a.z.defined ? p.ptr(a.z, op + " z") : "nullptr";
  const std::string pad = pairs(a.p.pad_h, a.p.pad_w), stride = pairs(a.p.stride_h, a.p.stride_w),
                    dilation = pairs(a.p.dilation_h, a.p.dilation_w);
  CallText t;
  if (conv->kind == Kind::conv_graph) {
    t.member = "ConvGraph " + m + ";";
    std::string knobs = "{";
    for (size_t i = 0; i < conv->knobs.size(); ++i)
      knobs += (i ? ", {" : "{") + std::to_string(conv->knobs[i].first) + ", " + std::to_string(conv->knobs[i].second) +
               "}";
    knobs += "}";
    std::string operands;
    if (fused && a.z.defined) t.load += "    const Tensor4 z = " + tensor4(a.z, p, op + " z") + ";\n";
    if (fused && a.b.defined) t.load += "    const Tensor4 bias = " + tensor4(bias_4d(a.b), p, op + " bias") + ";\n";
    t.load += "    " + m + " = conv_graph(cudnn, \"" + c.layer + "\", " + tensor4(a.x, p, op + " x") + ",\n        " +
              tensor4(a.w, p, op + " w") + ", " + tensor4(a.y, p, op + " y") + ",\n        " +
              (fused && a.z.defined ? "&z" : "nullptr") + ", " + (fused && a.b.defined ? "&bias" : "nullptr") + ", " +
              (fused && a.relu ? "true" : "false") + ", " + pad + ", " + stride + ", " + dilation + ", " +
              std::to_string(conv->engine) + ", " + knobs + ");\n    need_workspace(" + m + ".workspace);\n";
    t.run = "  run_conv(cudnn, " + m + ", workspace, " + x + ", " + w + ", " + y + ", " + (fused ? b : "nullptr") +
            ", " + (fused ? z : "nullptr") + ");\n";
    t.how = "cuDNN graph, engine " + std::to_string(conv->engine) + (fused ? "; " + epilogue_parts(a) + " in it" : "");
  } else {
    t.member = "LegacyConv " + m + ";";
    t.load = "    " + m + " = {legacy.tensor(" + dims_of(a.x) + ", " + strides_of(a.x) + "), legacy.filter(" +
             dims_of(a.w) + "),\n          legacy.conv(" + pairs(a.p.pad_h, a.p.pad_w) + ", " +
             pairs(a.p.stride_h, a.p.stride_w) + ", " + pairs(a.p.dilation_h, a.p.dilation_w) +
             ", static_cast<cudnnMathType_t>(" + std::to_string(conv->math) + ")), legacy.tensor(" + dims_of(a.y) +
             ", " + strides_of(a.y) + ")};\n    need_workspace(" + std::to_string(conv->workspace) + ");\n";
    const std::string ws = conv->workspace ? "workspace, " + std::to_string(conv->workspace) : "nullptr, 0";
    t.run = "  CHECK(cudnnConvolutionForward(cudnn, &kOne, " + m + ".x, " + x + ", " + m + ".w, " + w + ", " + m +
            ".conv,\n                               static_cast<cudnnConvolutionFwdAlgo_t>(" +
            std::to_string(conv->algo) + "), " + ws + ", &kZero, " + m + ".y, " + y + "));\n";
    t.how = "cudnnConvolutionForward, algorithm " + std::to_string(conv->algo);
  }
  if (epilogue_kernel) {
    const int64_t n = a.y.numel(), ch = a.y.sizes[1], hw = a.y.sizes[2] * a.y.sizes[3];
    STRATA_CHECK(n < (int64_t{1} << 31), "strata_codegen: ", op, ": an output of 2^31 elements or more takes "
                 "strata's strided epilogue kernel, which the cuda emitter does not write out");
    t.run += "  kernels::conv_epilogue(stream, " + p.fptr(a.y, op + " y") + ", " +
             (a.b.defined ? p.fptr(a.b, op + " bias") : "nullptr") + ", " +
             (a.z.defined ? p.fptr(a.z, op + " z") : "nullptr") + ", " + std::to_string(n) + ", " +
             std::to_string(ch) + ", " + std::to_string(hw) + ", " + (a.relu ? "true" : "false") + ");\n";
    t.how += "; then " + epilogue_parts(a) + " in strata's epilogue kernel";
  }
  return t;
}

CallText conv_bwd_text(const RecordedCall& c, const std::string& m, Places& p) {
  // In cuDNN's roles: x (x, or dx for backward data), w (w, or dw), y (dy); `dir` as conv_graph takes it.
  const auto* bd = std::get_if<ops::Conv2dBwdDataArgs>(&c.args);
  const auto* bw = std::get_if<ops::Conv2dBwdWeightArgs>(&c.args);
  const TensorView& x = bd ? bd->dx : bw->x;
  const TensorView& w = bd ? bd->w : bw->dw;
  const TensorView& y = bd ? bd->dy : bw->dy;
  const ops::Conv2dParams& cp = bd ? bd->p : bw->p;
  const int dir = bd ? 1 : 2;
  const std::string op = std::string(ops::op_name(c.op)) + " (" + c.layer + ")";
  refuse_staging(c);
  STRATA_CHECK(cp.groups == 1, "strata_codegen: ", op, " has ", cp.groups, " groups; the cuda emitter writes out "
               "convolutions of one group (strata's graph path takes no others)");
  for (const auto& [v, name] : {std::pair{&x, bd ? " dx" : " x"}, {&w, bd ? " w" : " dw"}, {&y, " dy"}})
    require_dense_f32(*v, op + name);
  STRATA_CHECK(c.library.size() == 1 && (c.library[0].kind == Kind::conv_graph ||
                                         c.library[0].kind == Kind::conv_legacy),
               "strata_codegen: ", op, ": the cuda backend ran it otherwise than by one cuDNN convolution, which is "
               "all the cuda emitter writes out for it");
  const LibraryCall& conv = c.library[0];
  const std::string xs = p.ptr(x, op + " x"), ws = p.ptr(w, op + " w"), ys = p.ptr(y, op + " dy");
  const std::string pad = pairs(cp.pad_h, cp.pad_w), stride = pairs(cp.stride_h, cp.stride_w),
                    dilation = pairs(cp.dilation_h, cp.dilation_w);
  CallText t;
  if (conv.kind == Kind::conv_graph) {
    std::string knobs = "{";
    for (size_t i = 0; i < conv.knobs.size(); ++i)
      knobs += (i ? ", {" : "{") + std::to_string(conv.knobs[i].first) + ", " +
               std::to_string(conv.knobs[i].second) + "}";
    knobs += "}";
    t.member = "ConvGraph " + m + ";";
    t.load = "    " + m + " = conv_graph(cudnn, \"" + c.layer + "\", " + tensor4(x, p, op + " x") + ",\n        " +
             tensor4(w, p, op + " w") + ", " + tensor4(y, p, op + " dy") + ",\n        nullptr, nullptr, false, " +
             pad + ", " + stride + ", " + dilation + ", " + std::to_string(conv.engine) + ", " + knobs + ", " +
             std::to_string(dir) + ");\n    need_workspace(" + m + ".workspace);\n";
    t.run = "  run_conv(cudnn, " + m + ", workspace, " + xs + ", " + ws + ", " + ys + ", nullptr, nullptr);\n";
    t.how = "cuDNN graph, engine " + std::to_string(conv.engine);
    return t;
  }
  t.member = "LegacyConv " + m + ";";
  t.load = "    " + m + " = {legacy.tensor(" + dims_of(x) + ", " + strides_of(x) + "), legacy.filter(" + dims_of(w) +
           "),\n          legacy.conv(" + pad + ", " + stride + ", " + dilation + ", static_cast<cudnnMathType_t>(" +
           std::to_string(conv.math) + ")), legacy.tensor(" + dims_of(y) + ", " + strides_of(y) +
           ")};\n    need_workspace(" + std::to_string(conv.workspace) + ");\n";
  const std::string wsp = conv.workspace ? "workspace, " + std::to_string(conv.workspace) : "nullptr, 0";
  const std::string algo = std::to_string(conv.algo);
  if (bd)
    t.run = "  CHECK(cudnnConvolutionBackwardData(cudnn, &kOne, " + m + ".w, " + ws + ", " + m + ".y, " + ys + ", " + m +
            ".conv,\n      static_cast<cudnnConvolutionBwdDataAlgo_t>(" + algo + "), " + wsp + ", &kZero, " + m +
            ".x, " + xs + "));\n";
  else
    t.run = "  CHECK(cudnnConvolutionBackwardFilter(cudnn, &kOne, " + m + ".x, " + xs + ", " + m + ".y, " + ys + ", " +
            m + ".conv,\n      static_cast<cudnnConvolutionBwdFilterAlgo_t>(" + algo + "), " + wsp + ", &kZero, " +
            m + ".w, " + ws + "));\n";
  t.how = std::string(bd ? "cudnnConvolutionBackwardData" : "cudnnConvolutionBackwardFilter") + ", algorithm " + algo;
  return t;
}

}  // namespace strata::codegen::cuda
