// Module tree -> ir::Graph. Each layer type of nn/ maps to its ops; containers map to the
// ops of their children in the order their forward runs them:
//  - Sequential, ResNet's stages and downsample, ResNet and LeNet run their children in
//    registration order (their forward is that chain; the round-trip tests in
//    tests/onnx hold the two together);
//  - BasicBlock and Bottleneck: the residual branch, the identity (downsample or input),
//    their sum and the last ReLU, as in nn/layers/blocks.cpp;
//  - nn::Dag: its steps.
// Dropout is the identity at inference and leaves no node. Anything else is an error
// naming the module and its type.
#include <optional>
#include <set>

#include "strata/nn/layers/dag.h"
#include "strata/nn/lenet.h"
#include "strata/nn/resnet.h"
#include "strata/onnx/convert.h"
#include "strata/onnx/layer_access.h"

namespace strata::onnx::detail {

namespace {

template <class P>
using ResNetBasic = nn::ResNetT<P, nn::BasicBlock<P>>;
template <class P>
using ResNetBottleneck = nn::ResNetT<P, nn::Bottleneck<P>>;
template <class P>
using StageBasic = nn::detail::Stage<nn::BasicBlock<P>>;
template <class P>
using StageBottleneck = nn::detail::Stage<nn::Bottleneck<P>>;

std::string join(const std::string& path, std::string_view name) {
  return path.empty() ? std::string(name) : path + "." + std::string(name);
}

// f32, CPU, contiguous copy of a parameter or buffer.
Tensor host_f32(const Tensor& t) {
  Tensor src = t;
  if (!t.device().is_cpu()) {
    src = Tensor::empty(t.sizes(), t.dtype());
    copy_into(t, src);
  }
  Tensor out = Tensor::empty(t.sizes(), DType::f32);
  copy_into(src, out);
  return out;
}

class Emitter {
 public:
  Emitter(const Shape& input_sizes, const std::string& input_name) {
    g_.input = input_name;
    g_.input_sizes = input_sizes;
    used_.insert(input_name);
  }

  std::string emit(const nn::Module& m, const std::string& path, const std::string& x) {
    std::string y;
    if (emit_leaf(m, path, x, y)) return y;
    if (is_chain(m)) {
      y = x;
      for (const auto& [name, child] : m.children()) y = emit(*child, join(path, name), y);
      return y;
    }
    if (detail::is_a<nn::BasicBlock>(m) || detail::is_a<nn::Bottleneck>(m)) return emit_block(m, path, x);
    bool graph = false;
    detail::visit_as<nn::Dag>(m, [&](const auto& gm) {
      graph = true;
      y = emit_graph(gm, path, x);
    });
    if (graph) return y;
    STRATA_FAIL("onnx export: module '", path.empty() ? "<root>" : path, "' of type ", m.type_name(),
                " has no ONNX form (strata exports Conv2d, BatchNorm2d, ReLU, MaxPool2d, AvgPool2d, GlobalAvgPool, "
                "Linear, Flatten, Dropout, and Sequential, Dag, BasicBlock, Bottleneck, ResNet and LeNet built "
                "of them; a GPT exports as the whole model)");
  }

  ir::Graph finish(const std::string& output, const std::string& output_name) {
    // The last node writes the graph output under its public name.
    if (!g_.nodes.empty() && g_.nodes.back().output == output && !used_.count(output_name)) {
      g_.nodes.back().output = output_name;
      g_.output = output_name;
    } else {
      g_.output = output;
    }
    return std::move(g_);
  }

 private:
  static bool is_chain(const nn::Module& m) {
    return dynamic_cast<const nn::Sequential*>(&m) || is_a<nn::Downsample>(m) || is_a<StageBasic>(m) ||
           is_a<StageBottleneck>(m) || is_a<ResNetBasic>(m) || is_a<ResNetBottleneck>(m) || is_a<nn::LeNet>(m);
  }

  // A node name (also its output value's name) not used yet: the module path, or the
  // op's name for the root, with _1, _2, ... when a module runs several times.
  std::string unique(const std::string& base) {
    std::string name = base;
    for (int i = 1; used_.count(name); ++i) name = base + "_" + std::to_string(i);
    used_.insert(name);
    return name;
  }

  std::string add_node(ir::Op op, const std::string& path, std::vector<std::string> inputs,
                       const nn::Module* layer = nullptr, std::vector<std::pair<std::string_view, Tensor>> params = {},
                       const ir::Node& attrs = {}) {
    ir::Node n = attrs;
    n.op = op;
    n.name = unique(path.empty() ? std::string(ir::op_name(op)) : path);
    n.module = path;
    n.inputs = std::move(inputs);
    n.output = n.name;
    for (auto& [role, t] : params) {
      if (!t.defined()) continue;
      const std::string pname = join(path, role);
      STRATA_CHECK(!ir::find_param(g_, pname), "onnx export: module '", path, "' (", layer->type_name(),
                   ") runs more than once with its parameters; exported graphs have one node per parameter set");
      g_.initializers.emplace_back(pname, host_f32(t));
      n.params.push_back(pname);
    }
    g_.nodes.push_back(std::move(n));
    return g_.nodes.back().output;
  }

  bool emit_leaf(const nn::Module& m, const std::string& path, const std::string& x, std::string& y) {
    auto param = [&](std::string_view name) { return m.param(name); };
    ir::Node a;
    if (visit_as<nn::Conv2d>(m, [&](const auto& l) {
          a.conv = l.conv_params();
          y = add_node(ir::Op::conv2d, path, {x}, &m,
                       {{"weight", param("weight")}, {"bias", l.bias().defined() ? param("bias") : Tensor()}}, a);
        }))
      return true;
    if (visit_as<nn::BatchNorm2d>(m, [&](const auto& l) {
          a.eps = l.options().eps;
          a.momentum = l.options().momentum;
          y = add_node(ir::Op::batch_norm, path, {x}, &m,
                       {{"weight", param("weight")},
                        {"bias", param("bias")},
                        {"running_mean", m.buffer("running_mean")},
                        {"running_var", m.buffer("running_var")}},
                       a);
        }))
      return true;
    if (visit_as<nn::Linear>(m, [&](const auto& l) {
          y = add_node(ir::Op::linear, path, {x}, &m,
                       {{"weight", param("weight")}, {"bias", l.bias().defined() ? param("bias") : Tensor()}});
        }))
      return true;
    if (visit_as<nn::MaxPool2d>(m, [&](const auto& l) {
          a.pool = l.window();
          y = add_node(ir::Op::max_pool2d, path, {x}, &m, {}, a);
        }))
      return true;
    if (visit_as<nn::AvgPool2d>(m, [&](const auto& l) {
          a.pool = l.window();
          y = add_node(ir::Op::avg_pool2d, path, {x}, &m, {}, a);
        }))
      return true;
    std::optional<ir::Op> op;
    if (is_a<nn::ReLU>(m)) op = ir::Op::relu;
    if (is_a<nn::GlobalAvgPool>(m)) op = ir::Op::global_avg_pool;
    if (is_a<nn::Flatten>(m)) op = ir::Op::flatten;
    if (op) {
      y = add_node(*op, path, {x});
      return true;
    }
    if (is_a<nn::Dropout>(m)) {
      y = x;
      return true;
    }
    return false;
  }

  static const nn::Module* child(const nn::Module& m, std::string_view name) {
    for (const auto& [n, c] : m.children())
      if (n == name) return c;
    return nullptr;
  }

  // out = relu(branch(x) + identity), identity = downsample(x) or x (nn/layers/blocks.cpp).
  std::string emit_block(const nn::Module& m, const std::string& path, const std::string& x) {
    const bool bottleneck = is_a<nn::Bottleneck>(m);
    const std::vector<std::string_view> branch =
        bottleneck ? std::vector<std::string_view>{"conv1", "bn1", "relu", "conv2", "bn2", "relu", "conv3", "bn3"}
                   : std::vector<std::string_view>{"conv1", "bn1", "relu", "conv2", "bn2"};
    std::string h = x;
    for (std::string_view name : branch) {
      const nn::Module* c = child(m, name);
      STRATA_CHECK(c, "onnx export: ", m.type_name(), " '", path, "' has no child '", name, "'");
      h = emit(*c, join(path, name), h);
    }
    const nn::Module* down = child(m, "downsample");
    const std::string identity = down ? emit(*down, join(path, "downsample"), x) : x;
    const std::string sum = add_node(ir::Op::add, join(path, "add"), {h, identity});
    return add_node(ir::Op::relu, join(path, "relu"), {sum});
  }

  template <class G>
  std::string emit_graph(const G& gm, const std::string& path, const std::string& x) {
    std::vector<std::string> values{x};
    for (int i = 0; i < gm.num_steps(); ++i) {
      const nn::Module* step = gm.step_module(i);
      const std::string& a = values.at(static_cast<size_t>(gm.step_input(i, 0)));
      if (!step) {
        values.push_back(add_node(ir::Op::add, join(path, "add"), {a, values.at(static_cast<size_t>(gm.step_input(i, 1)))}));
        continue;
      }
      std::string name;
      for (const auto& [n, c] : gm.children())
        if (c == step) name = n;
      values.push_back(emit(*step, join(path, name), a));
    }
    return values.at(static_cast<size_t>(gm.output()));
  }

  ir::Graph g_;
  std::set<std::string> used_;
};

}  // namespace

ir::Graph graph_of_module(const nn::Module& m, const Shape& input_sizes, const std::string& input_name,
                          const std::string& output_name) {
  Emitter e(input_sizes, input_name);
  const std::string out = e.emit(m, "", input_name);
  ir::Graph g = e.finish(out, output_name);
  STRATA_CHECK(!g.nodes.empty(), "onnx export: ", m.type_name(), " computes nothing at inference (no op to export)");
  return g;
}

}  // namespace strata::onnx::detail
