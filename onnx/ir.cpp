#include "strata/onnx/ir.h"

#include <array>
#include <cmath>
#include <set>

#include "strata/ops/checks.h"
#include "strata/ops/shape_rules.h"

namespace strata::onnx::ir {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::conv2d: return "conv2d";
    case Op::batch_norm: return "batch_norm";
    case Op::relu: return "relu";
    case Op::max_pool2d: return "max_pool2d";
    case Op::avg_pool2d: return "avg_pool2d";
    case Op::global_avg_pool: return "global_avg_pool";
    case Op::flatten: return "flatten";
    case Op::linear: return "linear";
    case Op::add: return "add";
  }
  return "?";
}

std::span<const std::string_view> param_roles(Op op) {
  static constexpr std::array<std::string_view, 2> kWeightBias{"weight", "bias"};
  static constexpr std::array<std::string_view, 4> kBatchNorm{"weight", "bias", "running_mean", "running_var"};
  if (op == Op::conv2d || op == Op::linear) return kWeightBias;
  if (op == Op::batch_norm) return kBatchNorm;
  return {};
}

const Tensor* find_param(const Graph& g, std::string_view name) { return nn::find_entry(g.initializers, name); }

namespace {

// A tensor of `sizes` without data (every stride 0 over one element): enough for the
// shape rules, whatever the sizes.
Tensor meta(const Shape& sizes) {
  static const Tensor one = Tensor::empty(Shape{1});
  Shape zeros;
  for (int i = 0; i < sizes.size(); ++i) zeros.push_back(0);
  return one.as_strided(sizes, zeros, 0);
}

Tensor param(const Graph& g, const Node& n, size_t i) {
  if (i >= n.params.size()) return Tensor();
  const Tensor* t = find_param(g, n.params[i]);
  STRATA_CHECK(t != nullptr, "parameter '", n.params[i], "' is not an initializer of the graph");
  return *t;
}

}  // namespace

Shape infer_node(const Graph& g, const Node& n, const std::vector<Shape>& in) {
  STRATA_CHECK(in.size() == n.inputs.size() && !in.empty(), op_name(n.op), ": ", in.size(), " input shapes for ",
               n.inputs.size(), " inputs");
  const Tensor x = meta(in[0]);
  switch (n.op) {
    case Op::conv2d: return ops::conv2d_out_shape(x, param(g, n, 0), param(g, n, 1), n.conv);
    case Op::batch_norm:
      ops::batch_norm_channels(x, param(g, n, 0), param(g, n, 1), param(g, n, 2), param(g, n, 3));
      return in[0];
    case Op::relu: return in[0];
    case Op::max_pool2d: return ops::pool2d_out_shape("max_pool2d", x, n.pool);
    case Op::avg_pool2d: return ops::pool2d_out_shape("avg_pool2d", x, n.pool);
    case Op::global_avg_pool: return ops::global_avg_pool_out_shape(x);
    case Op::flatten:
      STRATA_CHECK(x.dim() >= 2, "flatten: input ", x.sizes().str(), " must have a batch and a feature dimension");
      return Shape{x.size(0), x.numel() / x.size(0)};
    case Op::linear: return ops::linear_out_shape(x, param(g, n, 0), param(g, n, 1));
    case Op::add: ops::check_same_shape("add", "a", x, "b", meta(in[1])); return in[0];
  }
  STRATA_FAIL("unknown op");
}

std::map<std::string, Shape> infer_shapes(const Graph& g,
                                          const std::function<void(const Node&, const std::string&)>& on_problem) {
  std::map<std::string, Shape> shapes;
  std::set<std::string> failed;
  Shape in = g.input_sizes;
  if (in.size() > 0 && in[0] < 0) in[0] = 1;
  shapes.emplace(g.input, in);
  for (const Node& n : g.nodes) {
    std::vector<Shape> ins;
    bool known = true;
    for (const std::string& v : n.inputs) {
      auto it = shapes.find(v);
      if (it != shapes.end()) {
        ins.push_back(it->second);
        continue;
      }
      known = false;
      if (failed.count(v)) continue;  // reported where it failed
      const std::string msg = "reads '" + v + "', which neither the graph input nor an earlier node provides";
      if (!on_problem) STRATA_FAIL("node '", n.name, "': ", msg);
      on_problem(n, msg);
    }
    if (!known || ins.empty()) {
      failed.insert(n.output);
      continue;
    }
    try {
      shapes[n.output] = infer_node(g, n, ins);
    } catch (const Error& e) {
      if (!on_problem) throw;
      on_problem(n, e.what());
      failed.insert(n.output);
    }
  }
  return shapes;
}

void fold_batch_norm(Graph& g) {
  std::map<std::string, int> readers;
  for (const Node& n : g.nodes)
    for (const std::string& v : n.inputs) ++readers[v];
  ++readers[g.output];
  std::map<std::string, int> param_users;
  for (const Node& n : g.nodes)
    for (const std::string& p : n.params) ++param_users[p];

  auto set_param = [&](const std::string& name, Tensor t) {
    for (auto& [n, v] : g.initializers)
      if (n == name) {
        v = std::move(t);
        return;
      }
    g.initializers.emplace_back(name, std::move(t));
  };

  std::vector<Node> kept;
  std::set<std::string> dropped;
  for (Node& n : g.nodes) {
    Node* conv = nullptr;
    if (n.op == Op::batch_norm && readers[n.inputs[0]] == 1)
      for (Node& k : kept)
        if (k.op == Op::conv2d && k.output == n.inputs[0] && param_users[k.params[0]] == 1 &&
            (k.params.size() < 2 || param_users[k.params[1]] == 1))
          conv = &k;
    if (!conv) {
      kept.push_back(std::move(n));
      continue;
    }
    const Tensor w = param(g, *conv, 0), b = param(g, *conv, 1);
    const Tensor gamma = param(g, n, 0), beta = param(g, n, 1), mean = param(g, n, 2), var = param(g, n, 3);
    const int64_t k = w.size(0), per = w.numel() / k;
    STRATA_CHECK(gamma.numel() == k, "fold_batch_norm: batch norm '", n.name, "' has ", gamma.numel(),
                 " channels after conv '", conv->name, "' with ", k);
    const float* wp = w.data<float>();
    std::vector<float> w2(static_cast<size_t>(w.numel())), b2(static_cast<size_t>(k));
    for (int64_t c = 0; c < k; ++c) {
      const double s = static_cast<double>(gamma.data<float>()[c]) /
                       std::sqrt(static_cast<double>(var.data<float>()[c]) + n.eps);
      for (int64_t i = 0; i < per; ++i) w2[static_cast<size_t>(c * per + i)] = static_cast<float>(wp[c * per + i] * s);
      const double bias = b.defined() ? b.data<float>()[c] : 0.0;
      b2[static_cast<size_t>(c)] =
          static_cast<float>((bias - mean.data<float>()[c]) * s + static_cast<double>(beta.data<float>()[c]));
    }
    set_param(conv->params[0], Tensor::from_vector(w2, w.sizes()));
    if (conv->params.size() < 2) {
      const std::string bias_name = conv->module + ".bias";
      STRATA_CHECK(!find_param(g, bias_name), "fold_batch_norm: conv '", conv->name, "' has no bias but an initializer '",
                   bias_name, "' exists");
      conv->params.push_back(bias_name);
    }
    set_param(conv->params[1], Tensor::from_vector(b2, Shape{k}));
    conv->output = n.output;
    for (const std::string& p : n.params)
      if (--param_users[p] == 0) dropped.insert(p);
  }
  g.nodes = std::move(kept);
  std::erase_if(g.initializers, [&](const auto& e) { return dropped.count(e.first) > 0; });
}

}  // namespace strata::onnx::ir
