// ir::Graph -> an nn::Dag of strata layers, and a GPT read back -> nn::Gpt, for any
// dispatch mode and backend.
#include <map>

#include "strata/nn/layers/container.h"
#include "strata/nn/layers/dag.h"
#include "strata/nn/layers/linear.h"
#include "strata/nn/layers/pool.h"
#include "strata/onnx/convert.h"

namespace strata::onnx::detail {

namespace {

template <class P>
std::unique_ptr<nn::Module> make_layer(const P& p, const ir::Graph& g, const ir::Node& n) {
  const Tensor* w = n.params.empty() ? nullptr : ir::find_param(g, n.params[0]);
  switch (n.op) {
    case ir::Op::conv2d: {
      nn::Conv2dOptions o;
      o.stride = n.conv.stride_h;
      o.padding = n.conv.pad_h;
      o.dilation = n.conv.dilation_h;
      o.groups = n.conv.groups;
      o.bias = n.params.size() == 2;
      return std::make_unique<nn::Conv2d<P>>(p, w->size(1) * n.conv.groups, w->size(0), static_cast<int>(w->size(2)), o);
    }
    case ir::Op::batch_norm: {
      nn::BatchNormOptions o;
      o.eps = n.eps;
      o.momentum = n.momentum;
      return std::make_unique<nn::BatchNorm2d<P>>(p, w->size(0), o);
    }
    case ir::Op::linear: {
      nn::LinearOptions o;
      o.bias = n.params.size() == 2;
      return std::make_unique<nn::Linear<P>>(p, w->size(1), w->size(0), o);
    }
    case ir::Op::relu: return std::make_unique<nn::ReLU<P>>(p);
    case ir::Op::max_pool2d: return std::make_unique<nn::MaxPool2d<P>>(p, n.pool.kernel_h, n.pool.stride_h, n.pool.pad_h);
    case ir::Op::avg_pool2d: return std::make_unique<nn::AvgPool2d<P>>(p, n.pool.kernel_h, n.pool.stride_h, n.pool.pad_h);
    case ir::Op::global_avg_pool: return std::make_unique<nn::GlobalAvgPool<P>>(p);
    case ir::Op::flatten: return std::make_unique<nn::Flatten<P>>(p);
    case ir::Op::add: break;
  }
  STRATA_FAIL("onnx import: no layer for ", ir::op_name(n.op));
}

}  // namespace

std::unique_ptr<nn::Module> module_of_graph(const ir::Graph& g, ops::DispatchMode mode, std::string_view backend) {
  return nn::with_policy(mode, backend, [&](const auto& p) -> std::unique_ptr<nn::Module> {
    using P = std::decay_t<decltype(p)>;
    auto graph = std::make_unique<nn::Dag<P>>(p);
    std::map<std::string, int> ids{{g.input, nn::Dag<P>::kInput}};
    nn::StateDict state;
    for (const ir::Node& n : g.nodes) {
      const int a = ids.at(n.inputs.at(0));
      if (n.op == ir::Op::add) {
        ids[n.output] = graph->add_sum(a, ids.at(n.inputs.at(1)));
        continue;
      }
      ids[n.output] = graph->add_module(n.module, make_layer(p, g, n), a);
      const auto roles = ir::param_roles(n.op);
      for (size_t i = 0; i < n.params.size(); ++i)
        state.emplace_back(n.module + "." + std::string(roles[i]), *ir::find_param(g, n.params[i]));
    }
    graph->set_output(ids.at(g.output));
    // Not strict: batch norm's num_batches_tracked is no part of an ONNX graph.
    graph->load_state_dict(state, false);
    graph->eval();
    return graph;
  });
}

std::unique_ptr<nn::Module> module_of_gpt(const GptRead& r, ops::DispatchMode mode, std::string_view backend) {
  return nn::with_policy(mode, backend, [&](const auto& p) -> std::unique_ptr<nn::Module> {
    using P = std::decay_t<decltype(p)>;
    auto gpt = std::make_unique<nn::Gpt<P>>(p, r.config);
    gpt->load_state_dict(r.weights, true);
    gpt->eval();
    return gpt;
  });
}

}  // namespace strata::onnx::detail
