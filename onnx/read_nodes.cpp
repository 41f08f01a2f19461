// One reader per ONNX op strata imports (the Reader's graph side is proto_read.cpp). Each
// maps the op's inputs and attributes to a strata op and its argument struct, or reports
// what it cannot express.
#include <algorithm>
#include <charconv>
#include <climits>

#include "strata/onnx/proto_reader.h"

namespace strata::onnx::detail {

namespace {

// The ops read here, with what part of each strata takes.
const std::map<std::string, std::string, std::less<>> kOps = {
    {"Add", ""},        {"AveragePool", ""}, {"BatchNormalization", ""},       {"Constant", ""},
    {"Conv", ""},       {"Dropout", "at inference"}, {"Flatten", ""},          {"Gemm", ""},
    {"GlobalAveragePool", ""}, {"Identity", ""}, {"MatMul", "by a constant"},  {"MaxPool", ""},
    {"ReduceMean", "over H and W"}, {"Relu", ""}, {"Reshape", "to [N, features]"}};

// The double a float attribute was written from: its shortest decimal form read as a
// double (epsilon 1e-5, stored as the float 9.99999975e-06, comes back as 1e-5, so a
// strata model exported and imported again computes bitwise the same batch norm).
double decimal_of(double attr) {
  const float f = static_cast<float>(attr);
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  double d = f;
  std::from_chars(buf, r.ptr, d);
  return d;
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "]";
}

}  // namespace

std::string supported_ops() {
  std::string s;
  for (const auto& [op, note] : kOps) {
    if (!s.empty()) s += ", ";
    s += op;
    if (!note.empty()) s += " (" + note + ")";
  }
  return s;
}

Window Reader::window(Attrs& a) {
  Window w;
  const std::string auto_pad = a.s("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") {
    node_problem("auto_pad " + auto_pad + " is not supported (strata takes explicit pads)");
    w.ok = false;
  }
  auto equal = [&](const std::vector<int64_t>& v, size_t n, const char* what, int64_t lo) -> int64_t {
    if (v.size() == n && std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end() && v[0] >= lo &&
        v[0] <= INT_MAX / 4)
      return v[0];
    node_problem(std::string(what) + " " + list(v) + " is not supported (strata's layers take " + std::to_string(n) +
                 " equal values, at least " + std::to_string(lo) + ")");
    w.ok = false;
    return lo;
  };
  if (a.has("kernel_shape")) w.kernel = equal(a.ints("kernel_shape", {}), 2, "kernel_shape", 1);
  w.stride = equal(a.ints("strides", {1, 1}), 2, "strides", 1);
  w.pad = equal(a.ints("pads", {0, 0, 0, 0}), 4, "pads", 0);
  w.dilation = equal(a.ints("dilations", {1, 1}), 2, "dilations", 1);
  if (auto_pad == "VALID" && w.pad != 0) {
    node_problem("auto_pad VALID with non-zero pads");
    w.ok = false;
  }
  return w;
}

void Reader::read_conv(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
  const Window w = window(a);
  const int64_t group = a.i("group", 1);
  a.finish();
  bool ok = w.ok;
  if (group < 1 || group > INT_MAX) {
    node_problem("group " + std::to_string(group) + " is not supported");
    ok = false;
  }
  out.op = ir::Op::conv2d;
  const bool weight = take_param(n, 1, 4, "weight", out.params);
  if (weight && n.input_size() >= 3 && !n.input(2).empty()) ok = take_param(n, 2, 1, "bias", out.params) && ok;
  ok = weight && ok;
  if (weight) {
    const Tensor& wt = *ir::find_param(g_, out.params[0]);
    if (wt.size(2) != wt.size(3) || (w.kernel && *w.kernel != wt.size(2))) {
      node_problem("weight " + wt.sizes().str() + " and kernel_shape " + (w.kernel ? std::to_string(*w.kernel) : "-") +
                   " do not make a square kernel (strata's Conv2d takes square kernels)");
      ok = false;
    }
  }
  out.conv.stride_h = out.conv.stride_w = static_cast<int>(w.stride);
  out.conv.pad_h = out.conv.pad_w = static_cast<int>(w.pad);
  out.conv.dilation_h = out.conv.dilation_w = static_cast<int>(w.dilation);
  out.conv.groups = static_cast<int>(std::clamp<int64_t>(group, 1, INT_MAX));
  if (has_rank(x, 4) && not_squeezed(x)) out.inputs = {x};
  emit(std::move(out), ok, 4);
}

void Reader::read_batch_norm(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
  out.op = ir::Op::batch_norm;
  out.eps = decimal_of(a.f("epsilon", 1e-5));
  out.momentum = decimal_of(1.0 - decimal_of(a.f("momentum", 0.9)));  // PyTorch's convention
  bool ok = true;
  if (a.i("training_mode", 0) != 0) {
    node_problem("training_mode 1 is not supported (strata imports inference graphs)");
    ok = false;
  }
  a.finish();
  const char* roles[] = {"scale", "B", "input_mean", "input_var"};
  for (int k = 1; k < 5; ++k) ok = take_param(n, k, 1, roles[k - 1], out.params) && ok;
  if (n.input_size() > 5) node_problem("has " + std::to_string(n.input_size()) + " inputs (5 expected)");
  if (has_rank(x, 4) && not_squeezed(x)) out.inputs = {x};
  emit(std::move(out), ok, 4);
}

void Reader::read_pool(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
  const bool max = n.op_type() == "MaxPool";
  const Window w = window(a);
  bool ok = w.ok;
  if (!w.kernel) {
    node_problem("has no kernel_shape");
    ok = false;
  }
  if (a.i("ceil_mode", 0) != 0) {
    node_problem("ceil_mode 1 is not supported");
    ok = false;
  }
  if (w.dilation != 1) {
    node_problem("dilations other than 1 are not supported by strata's pooling");
    ok = false;
  }
  if (max && a.i("storage_order", 0) != 0) node_problem("storage_order 1 is not supported");
  if (!max && a.i("count_include_pad", 0) == 0 && w.pad != 0) {
    node_problem("count_include_pad 0 with padding is not supported (strata's AvgPool2d counts the padding)");
    ok = false;
  }
  a.finish();
  out.op = max ? ir::Op::max_pool2d : ir::Op::avg_pool2d;
  out.pool.kernel_h = out.pool.kernel_w = static_cast<int>(w.kernel.value_or(1));
  out.pool.stride_h = out.pool.stride_w = static_cast<int>(w.stride);
  out.pool.pad_h = out.pool.pad_w = static_cast<int>(w.pad);
  out.pool.count_include_pad = true;
  if (has_rank(x, 4) && not_squeezed(x)) out.inputs = {x};
  emit(std::move(out), ok, 4);
}

void Reader::read_global_pool(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
  bool keep_dims = true, ok = true;
  if (n.op_type() == "ReduceMean") {
    std::vector<int64_t> axes = a.ints("axes", {});
    if (n.input_size() >= 2 && !n.input(1).empty()) {
      if (const auto* given = ints_of(n.input(1)))
        axes = *given;
      else
        node_problem("axes '" + n.input(1) + "' must be an INT64 constant");
    }
    for (int64_t& ax : axes) ax = ax < 0 ? ax + 4 : ax;
    std::sort(axes.begin(), axes.end());
    if (axes != std::vector<int64_t>{2, 3}) {
      node_problem("axes " + list(axes) + " are not supported (strata's global average pool reduces H and W: 2, 3)");
      ok = false;
    }
    keep_dims = a.i("keepdims", 1) != 0;
    a.i("noop_with_empty_axes", 0);
  }
  a.finish();
  out.op = ir::Op::global_avg_pool;
  if (has_rank(x, 4) && not_squeezed(x)) out.inputs = {x};
  emit(std::move(out), ok, 2, keep_dims);
}

bool Reader::flattens(const std::string& x, const std::vector<int64_t>& shape, bool allow_zero) const {
  if (shape.size() != 2) return false;
  int64_t features = -1;
  if (shapes_.count(x)) {
    const Shape& s = shapes_.at(x);
    features = s.numel() / std::max<int64_t>(s[0], 1);
  }
  const int64_t batch = g_.input_sizes.size() > 0 ? g_.input_sizes[0] : -1;
  const bool first = (shape[0] == 0 && !allow_zero) || (batch > 0 && shape[0] == batch) ||
                     (shape[0] == -1 && features > 0 && shape[1] == features);
  return first && (shape[1] == -1 || (features > 0 && shape[1] == features));
}

void Reader::read_flatten(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
  bool ok = true;
  if (n.op_type() == "Flatten") {
    int64_t axis = a.i("axis", 1);
    if (axis < 0 && !x.empty()) axis += squeezed_.count(x) ? 4 : rank_of(x);
    if (axis != 1) {
      node_problem("axis " + std::to_string(axis) + " is not supported (strata flattens after the batch: axis 1)");
      ok = false;
    }
  } else {
    const bool allow_zero = a.i("allowzero", 0) != 0;
    const std::vector<int64_t>* shape = n.input_size() >= 2 ? ints_of(n.input(1)) : nullptr;
    if (!shape) {
      node_problem("the shape must be an INT64 constant (an initializer or a Constant node)");
      ok = false;
    } else if (!x.empty() && !flattens(x, *shape, allow_zero)) {
      node_problem("shape " + list(*shape) + " is not supported (strata reshapes only to [N, features])");
      ok = false;
    }
  }
  a.finish();
  if (x.empty() || !ok) return define_failed(out.output);
  if (rank_of(x) == 2 || squeezed_.count(x)) return alias(out.output, x);  // already [N, features] in strata
  out.op = ir::Op::flatten;
  out.inputs = {x};
  emit(std::move(out), true, 2);
}

void Reader::read_gemm(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
  bool ok = true;
  if (a.f("alpha", 1.0) != 1.0 || a.f("beta", 1.0) != 1.0) {
    node_problem("alpha and beta other than 1 are not supported");
    ok = false;
  }
  if (a.i("transA", 0) != 0) {
    node_problem("transA 1 is not supported");
    ok = false;
  }
  const bool trans_b = a.i("transB", 0) != 0;
  a.finish();
  out.op = ir::Op::linear;
  const bool weight = take_param(n, 1, 2, "B", out.params);
  ok = weight && ok;
  if (weight && !trans_b) {  // B is [in, out]; strata's weight is [out, in]
    Tensor& t = g_.initializers.back().second;
    t = t.permute({1, 0}).contiguous();
  }
  if (n.input_size() >= 3 && !n.input(2).empty()) {
    auto c = constants_.find(n.input(2));
    if (c != constants_.end() && !c->second.is_i64 && c->second.f32.dim() == 2 && c->second.f32.size(0) == 1)
      c->second.f32 = c->second.f32.view(Shape{c->second.f32.size(1)});  // [1, out] broadcasts as [out]
    ok = take_param(n, 2, 1, "C", out.params) && ok;
  }
  if (has_rank(x, 2)) out.inputs = {x};
  emit(std::move(out), ok, 2);
}

void Reader::read_matmul(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
  a.finish();
  out.op = ir::Op::linear;
  const bool weight = take_param(n, 1, 2, "B", out.params);
  if (weight) {  // B is [in, out]; strata's weight is [out, in]
    Tensor& t = g_.initializers.back().second;
    t = t.permute({1, 0}).contiguous();
  }
  if (has_rank(x, 2)) out.inputs = {x};
  emit(std::move(out), weight, 2);
}

void Reader::read_bias_add(const pb::NodeProto& n, Attrs& a, const std::string& output) {
  a.finish();
  const int c = is_constant(n.input(1)) ? 1 : 0;
  const std::string& v = n.input(1 - c);
  ir::Node* linear = g_.nodes.empty() ? nullptr : &g_.nodes.back();
  if (!linear || linear->output != resolve(v) || linear->op != ir::Op::linear || linear->params.size() != 1 ||
      readers_[v] != 1) {
    node_problem("adds the constant '" + n.input(c) + "'; strata adds a constant only as the bias of the MatMul or " +
                 "Gemm without bias just before it, whose output nothing else reads");
    return define_failed(output);
  }
  auto it = constants_.find(n.input(c));
  if (it != constants_.end() && !it->second.is_i64 && it->second.f32.dim() == 2 && it->second.f32.size(0) == 1)
    it->second.f32 = it->second.f32.view(Shape{it->second.f32.size(1)});  // [1, out] broadcasts as [out]
  std::vector<std::string> bias;
  if (!take_param(n, c, 1, "bias", bias)) return define_failed(output);
  const int64_t outputs = ir::find_param(g_, linear->params[0])->size(0);
  const int64_t given = ir::find_param(g_, bias[0])->size(0);
  if (given != outputs) {
    node_problem("bias '" + bias[0] + "' has " + std::to_string(given) + " values for " + std::to_string(outputs) +
                 " outputs");
    return define_failed(output);
  }
  linear->params.push_back(bias[0]);
  alias(output, linear->output);
}

void Reader::read_constant_node(Attrs& a, const std::string& output) {
  const pb::TensorProto* t = a.tensor("value");
  const bool one = a.has("value_int");
  const int64_t value = a.i("value_int", 0);
  const std::vector<int64_t> ints = a.ints("value_ints", {});
  const bool many = !ints.empty();
  a.finish();
  if (t) {
    pb::TensorProto named = *t;
    named.set_name(output);
    return read_constant(named, where_ + " output");
  }
  if (!one && !many) return node_problem("holds no tensor or integers (strata reads value, value_int, value_ints)");
  if (!fresh_name(output)) return;
  TensorData d;
  d.is_i64 = true;
  d.i64 = many ? ints : std::vector<int64_t>{value};
  constants_.emplace(output, std::move(d));
}

void Reader::read_node(const pb::NodeProto& n) {
  const std::string& op = n.op_type();
  const std::string label = n.name().empty() ? "#" + std::to_string(index_) : "'" + n.name() + "'";
  where_ = "node " + label + " (" + op + ")";
  const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
  if (!default_domain || !kOps.count(op)) {
    unsupported_[default_domain ? op : n.domain() + "::" + op].push_back(label);
    for (const std::string& o : n.output())
      if (!o.empty() && !ranks_.count(o)) ranks_.emplace(o, -1);
    return;
  }
  if (n.output_size() < 1) return node_problem("has no output");
  for (int k = 1; k < n.output_size(); ++k)
    if (!n.output(k).empty() && op != "Dropout")
      node_problem("output " + std::to_string(k) + " ('" + n.output(k) + "') is not supported");
  Attrs a(n, [this](const std::string& s) { node_problem(s); });
  if (op == "Constant") return read_constant_node(a, n.output(0));
  ir::Node out;
  out.name = n.name().empty() ? op + "_" + std::to_string(index_) : n.name();
  out.output = n.output(0);
  if (op == "Add" && n.input_size() == 2 && (is_constant(n.input(0)) || is_constant(n.input(1))))
    return read_bias_add(n, a, out.output);
  const std::string x = activation(n, 0);
  if (op == "Conv") return read_conv(n, a, std::move(out), x);
  if (op == "BatchNormalization") return read_batch_norm(n, a, std::move(out), x);
  if (op == "MaxPool" || op == "AveragePool") return read_pool(n, a, std::move(out), x);
  if (op == "GlobalAveragePool" || op == "ReduceMean") return read_global_pool(n, a, std::move(out), x);
  if (op == "Flatten" || op == "Reshape") return read_flatten(n, a, std::move(out), x);
  if (op == "Gemm") return read_gemm(n, a, std::move(out), x);
  if (op == "MatMul") return read_matmul(n, a, std::move(out), x);
  if (op == "Relu" || op == "Add") {
    a.finish();
    out.op = op == "Relu" ? ir::Op::relu : ir::Op::add;
    const std::string y = op == "Add" ? activation(n, 1) : x;
    if (op == "Add" && !x.empty() && !y.empty() && rank_of(x) >= 0 && rank_of(y) >= 0 && rank_of(x) != rank_of(y))
      node_problem("adds values of ranks " + std::to_string(rank_of(x)) + " and " + std::to_string(rank_of(y)) +
                   " (strata's add takes equal shapes)");
    if (op == "Relu" && not_squeezed(x)) out.inputs = {x};
    if (op == "Add" && not_squeezed(x) && not_squeezed(y)) out.inputs = {x, y};
    return emit(std::move(out), true, rank_of(x));
  }
  // Identity, and Dropout at inference.
  if (op == "Dropout") {
    a.i("seed", 0);
    if (a.has("ratio")) a.f("ratio", 0.5);
    if (n.input_size() >= 3 && !n.input(2).empty()) {
      const std::vector<int64_t>* tm = ints_of(n.input(2));
      if (!tm || tm->size() != 1 || (*tm)[0] != 0)
        node_problem("training_mode '" + n.input(2) + "' must be a constant false (strata imports inference graphs)");
    }
  }
  a.finish();
  if (x.empty()) return define_failed(out.output);
  alias(out.output, x);
}

}  // namespace strata::onnx::detail
