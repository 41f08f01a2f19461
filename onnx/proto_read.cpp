// ONNX ModelProto bytes -> ir::Graph. Every problem with the file is collected (every
// unsupported op by type with the nodes that use it, every unsupported attribute, input,
// output or tensor, every shape that does not fit) and reported together in one
// strata::Error. Values computed by a node that could not be read still count as
// defined, so one bad node is reported once, not again by each node after it.
#include <algorithm>
#include <charconv>
#include <climits>
#include <optional>
#include <set>

#include "onnx/convert.h"
#include "onnx/proto_fields.h"

namespace strata::onnx::detail {

namespace {

constexpr int64_t kMinOpset = 11, kMaxOpset = 22;
constexpr std::string_view kSupported =
    "Add, AveragePool, BatchNormalization, Constant, Conv, Dropout (inference), Flatten, Gemm, GlobalAveragePool, "
    "Identity, MaxPool, ReduceMean (over H and W), Relu, Reshape (to [N, features])";
const std::set<std::string, std::less<>> kOps = {
    "Add",  "AveragePool", "BatchNormalization", "Constant", "Conv", "Dropout", "Flatten", "Gemm", "GlobalAveragePool",
    "Identity", "MaxPool", "ReduceMean", "Relu", "Reshape"};
constexpr size_t kMaxListed = 100;  // problems listed one by one (unsupported ops are always all listed)

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

// A square window with equal strides and dilations and the same padding on every side:
// what strata's Conv2d and pooling layers take.
struct Window {
  std::optional<int64_t> kernel;
  int64_t stride = 1, pad = 0, dilation = 1;
  bool ok = true;
};

class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  ReadResult read(std::string_view bytes) {
    STRATA_CHECK(bytes.size() <= static_cast<size_t>(INT_MAX), "onnx import ", source_, ": ", bytes.size(),
                 " bytes is past protobuf's 2 GiB limit");
    pb::ModelProto model;
    STRATA_CHECK(model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())), "onnx import ", source_,
                 ": not an ONNX model (protobuf cannot parse its ", bytes.size(), " bytes)");
    ReadResult r;
    r.producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
    if (model.ir_version() < 3)
      problem("the model has IR version " + std::to_string(model.ir_version()) +
              " (strata reads 3 or later; is this an ONNX file?)");
    for (const pb::OperatorSetIdProto& o : model.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") r.opset = o.version();
    if (r.opset == 0)
      problem("the model imports no version of the default operator set (ai.onnx)");
    else if (r.opset < kMinOpset || r.opset > kMaxOpset)
      problem("the model uses opset " + std::to_string(r.opset) + "; strata reads opsets " +
              std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset));
    if (!model.has_graph())
      problem("the model has no graph");
    else
      read_graph(model.graph());
    report();
    r.graph = std::move(g_);
    return r;
  }

 private:
  // ---- problems ----------------------------------------------------------------------
  void problem(std::string what) { problems_.push_back(std::move(what)); }
  void node_problem(const std::string& what) { problem(where_ + ": " + what); }

  void report() {
    if (problems_.empty() && unsupported_.empty()) return;
    std::string msg;
    for (const auto& [op, nodes] : unsupported_) {
      msg += "\n  op " + op + " is not supported (" + std::to_string(nodes.size()) + " node" +
             (nodes.size() == 1 ? "" : "s") + ": ";
      for (size_t i = 0; i < nodes.size() && i < 5; ++i) msg += (i ? ", " : "") + nodes[i];
      msg += nodes.size() > 5 ? ", ...)" : ")";
    }
    for (size_t i = 0; i < problems_.size() && i < kMaxListed; ++i) msg += "\n  " + problems_[i];
    if (problems_.size() > kMaxListed) msg += "\n  ... and " + std::to_string(problems_.size() - kMaxListed) + " more";
    const size_t count = problems_.size() + unsupported_.size();
    STRATA_FAIL("onnx import ", source_, ": ", count, " problem", count == 1 ? "" : "s", ":", msg, "\n  (strata imports ",
                kSupported, "; opsets ", kMinOpset, " to ", kMaxOpset, ")");
  }

  // ---- constants ---------------------------------------------------------------------
  void read_constant(const pb::TensorProto& t, const std::string& what) {
    const std::string& name = t.name();
    if (name.empty()) return problem(what + " has no name");
    if (constants_.count(name) || bad_constants_.count(name) || ranks_.count(name))
      return problem(what + " '" + name + "' is defined twice");
    TensorData d = read_tensor(t);
    if (!d.problem.empty())
      bad_constants_[name] = what + " '" + name + "' " + d.problem;
    else
      constants_.emplace(name, std::move(d));
  }

  // Whether `name` is a constant; an unreadable one is reported (once) where it is used.
  bool is_constant(const std::string& name) {
    auto bad = bad_constants_.find(name);
    if (bad != bad_constants_.end()) {
      if (!bad->second.empty()) problem(bad->second);
      bad->second.clear();
      return true;
    }
    return constants_.count(name) > 0;
  }

  const std::vector<int64_t>* ints_of(const std::string& name) {
    auto it = constants_.find(name);
    return it != constants_.end() && it->second.is_i64 ? &it->second.i64 : nullptr;
  }

  // Input k of the current node as the f32 parameter `role` of the given rank, used by no
  // other node; appended to params. False (reported) otherwise.
  bool take_param(const pb::NodeProto& n, int k, int rank, const std::string& role, std::vector<std::string>& params) {
    if (k >= n.input_size() || n.input(k).empty()) {
      node_problem("has no " + role);
      return false;
    }
    const std::string& name = n.input(k);
    if (!is_constant(name)) {
      node_problem(role + " '" + name + "' must be an initializer (strata's layers own their parameters)");
      return false;
    }
    auto it = constants_.find(name);
    if (it == constants_.end()) return false;  // unreadable: reported
    const TensorData& d = it->second;
    if (d.is_i64 || d.f32.dim() != rank) {
      node_problem(role + " '" + name + "' must be FLOAT of rank " + std::to_string(rank) + ", not " +
                   (d.is_i64 ? "INT64" : d.f32.sizes().str()));
      return false;
    }
    auto [user, fresh] = param_user_.emplace(name, where_);
    if (!fresh) {
      node_problem(role + " '" + name + "' is also a parameter of " + user->second + " (shared parameters are not "
                   "supported)");
      return false;
    }
    g_.initializers.emplace_back(name, d.f32);
    params.push_back(name);
    return true;
  }

  // ---- values ------------------------------------------------------------------------
  std::string resolve(const std::string& v) const {
    auto it = alias_.find(v);
    return it == alias_.end() ? v : it->second;
  }

  // The computed value read as input k, or "" (reported) when there is none.
  std::string activation(const pb::NodeProto& n, int k) {
    if (k >= n.input_size() || n.input(k).empty()) {
      node_problem("input " + std::to_string(k) + " is missing");
      return "";
    }
    const std::string v = resolve(n.input(k));
    if (ranks_.count(v)) return v;
    if (constants_.count(v) || bad_constants_.count(v))
      node_problem("input " + std::to_string(k) + " is the constant '" + v + "' where strata's op takes a computed value");
    else
      node_problem("input " + std::to_string(k) + " '" + v + "' is neither the graph input nor an earlier node's output");
    return "";
  }
  int rank_of(const std::string& v) const { return ranks_.count(v) ? ranks_.at(v) : -1; }

  // Whether x (non-empty) has rank r, as far as known; reported if not.
  bool has_rank(const std::string& x, int r) {
    if (x.empty()) return false;
    if (rank_of(x) < 0 || rank_of(x) == r) return true;
    node_problem("input '" + x + "' has rank " + std::to_string(rank_of(x)) + "; strata's op takes rank " +
                 std::to_string(r));
    return false;
  }

  // A global average pool's output is [N,C] in strata but [N,C,1,1] in the file: only
  // Flatten or Reshape to [N,C] may read it.
  bool not_squeezed(const std::string& v) {
    if (v.empty()) return false;
    if (!squeezed_.count(v)) return true;
    node_problem("reads '" + v + "', a global average pool's output ([N,C,1,1] in ONNX, [N,C] in strata): only "
                 "Flatten or Reshape to [N,C] may follow it");
    return false;
  }

  bool fresh_name(const std::string& name) {
    if (name.empty()) {
      node_problem("has an empty output name");
      return false;
    }
    if (ranks_.count(name) || constants_.count(name) || bad_constants_.count(name) || alias_.count(name)) {
      node_problem("writes '" + name + "', which already exists (ONNX values are written once)");
      return false;
    }
    return true;
  }
  // The output exists for later nodes (they are not reported again), but has no node.
  void define_failed(const std::string& name) {
    if (fresh_name(name)) ranks_.emplace(name, -1);
  }
  void alias(const std::string& name, const std::string& of) {
    if (fresh_name(name)) alias_[name] = of;
  }

  // "<prefix>" when every parameter is "<prefix>.<role>" (state dict names then are the
  // file's), else the node's name; unique among the modules.
  std::string module_name(const ir::Node& n) {
    std::string base;
    const auto roles = ir::param_roles(n.op);
    for (size_t i = 0; i < n.params.size(); ++i) {
      std::string suffix = ".";
      suffix += roles[i];
      const std::string& p = n.params[i];
      const std::string prefix = p.size() > suffix.size() && p.ends_with(suffix) ? p.substr(0, p.size() - suffix.size()) : "";
      if (prefix.empty() || (i > 0 && prefix != base)) {
        base.clear();
        break;
      }
      base = prefix;
    }
    if (base.empty() || modules_.count(base)) base = n.name;
    std::string name = base;
    for (int i = 1; modules_.count(name); ++i) name = base + "_" + std::to_string(i);
    modules_.insert(name);
    return name;
  }

  // Adds the node when it is complete (its inputs and parameters read), with its output's
  // rank and shape (strata's shape rules, when the input's sizes are known).
  void emit(ir::Node n, bool complete, int rank, bool squeezed = false) {
    if (!complete || n.inputs.empty() || !fresh_name(n.output)) return define_failed(n.output);
    std::vector<Shape> in;
    for (const std::string& v : n.inputs)
      if (shapes_.count(v)) in.push_back(shapes_.at(v));
    if (in.size() == n.inputs.size()) {
      try {
        shapes_[n.output] = ir::infer_node(g_, n, in);
      } catch (const Error& e) {
        node_problem(e.what());
      }
    }
    n.module = module_name(n);
    ranks_.emplace(n.output, rank);
    if (squeezed) squeezed_.insert(n.output);
    g_.nodes.push_back(std::move(n));
  }

  // ---- nodes -------------------------------------------------------------------------
  Window window(Attrs& a) {
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

  void read_conv(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
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

  void read_batch_norm(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
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

  void read_pool(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
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

  void read_global_pool(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
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

  // Whether Reshape(x, shape) is x flattened after the batch dimension.
  bool flattens(const std::string& x, const std::vector<int64_t>& shape, bool allow_zero) const {
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

  void read_flatten(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
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

  void read_gemm(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x) {
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

  void read_constant_node(Attrs& a, const std::string& output) {
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

  void read_node(const pb::NodeProto& n) {
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
    const std::string x = activation(n, 0);
    if (op == "Conv") return read_conv(n, a, std::move(out), x);
    if (op == "BatchNormalization") return read_batch_norm(n, a, std::move(out), x);
    if (op == "MaxPool" || op == "AveragePool") return read_pool(n, a, std::move(out), x);
    if (op == "GlobalAveragePool" || op == "ReduceMean") return read_global_pool(n, a, std::move(out), x);
    if (op == "Flatten" || op == "Reshape") return read_flatten(n, a, std::move(out), x);
    if (op == "Gemm") return read_gemm(n, a, std::move(out), x);
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

  // ---- the graph -----------------------------------------------------------------------
  void read_input(const pb::ValueInfoProto& v) {
    g_.input = v.name();
    ranks_[v.name()] = -1;
    if (!v.type().has_tensor_type()) return problem("input '" + v.name() + "' is not a tensor");
    const auto& tt = v.type().tensor_type();
    if (tt.elem_type() != pb::TensorProto::FLOAT)
      problem("input '" + v.name() + "' has elements of type " + data_type_name(tt.elem_type()) + " (strata takes FLOAT)");
    if (!tt.has_shape()) return problem("input '" + v.name() + "' has no shape (strata needs at least its rank)");
    const int rank = tt.shape().dim_size();
    if (rank != 2 && rank != 4)
      return problem("input '" + v.name() + "' has rank " + std::to_string(rank) + " (strata takes [N,C,H,W] or [N,F])");
    bool known = true;
    for (const auto& d : tt.shape().dim()) {
      const bool fixed = d.has_dim_value() && d.dim_value() > 0 && d.dim_value() <= (int64_t{1} << 31);
      if (!fixed && g_.input_sizes.size() > 0) known = false;
      g_.input_sizes.push_back(fixed ? d.dim_value() : -1);
    }
    ranks_[v.name()] = rank;
    if (known) {  // shapes are followed for a batch of one
      Shape s = g_.input_sizes;
      s[0] = 1;
      shapes_[v.name()] = s;
    }
  }

  void read_graph(const pb::GraphProto& graph) {
    if (graph.sparse_initializer_size() > 0) problem("the graph has sparse initializers (not supported)");
    for (const pb::TensorProto& t : graph.initializer()) read_constant(t, "initializer");
    std::vector<const pb::ValueInfoProto*> inputs;
    for (const pb::ValueInfoProto& v : graph.input())
      if (!constants_.count(v.name()) && !bad_constants_.count(v.name())) inputs.push_back(&v);
    if (inputs.size() == 1) {
      read_input(*inputs[0]);
    } else {
      std::string names;
      for (auto* v : inputs) names += (names.empty() ? "'" : ", '") + v->name() + "'";
      problem("the graph has " + std::to_string(inputs.size()) + " inputs" + (names.empty() ? "" : " (" + names + ")") +
              "; strata models take one");
    }
    for (index_ = 0; index_ < graph.node_size(); ++index_) read_node(graph.node(index_));
    if (graph.output_size() != 1) {
      problem("the graph has " + std::to_string(graph.output_size()) + " outputs; strata models give one");
      return;
    }
    const std::string out = resolve(graph.output(0).name());
    if (!ranks_.count(out) || (out == g_.input && !g_.input.empty()))
      problem("the graph output '" + out + "' is not computed by any node");
    else if (squeezed_.count(out))
      problem("the graph output '" + out + "' is a global average pool's [N,C,1,1], which is [N,C] in strata (add a "
              "Flatten)");
    g_.output = out;
  }

  std::string source_, where_;
  ir::Graph g_;
  std::vector<std::string> problems_;
  std::map<std::string, std::vector<std::string>> unsupported_;  // op type -> nodes
  std::map<std::string, TensorData> constants_;
  std::map<std::string, std::string> bad_constants_;  // name -> why it cannot be used (cleared once said)
  std::map<std::string, std::string> param_user_;     // initializer -> the node it is a parameter of
  std::map<std::string, int> ranks_;                  // computed values -> rank (-1: unknown)
  std::map<std::string, std::string> alias_;          // Identity, Dropout, no-op Flatten
  std::map<std::string, Shape> shapes_;               // for a batch of one, where known
  std::set<std::string> squeezed_, modules_;
  int index_ = 0;
};

}  // namespace

ReadResult read_model(std::string_view bytes, std::string_view source) { return Reader(source).read(bytes); }

}  // namespace strata::onnx::detail
