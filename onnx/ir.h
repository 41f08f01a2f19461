#pragma once
// Internal to onnx/: the graphs strata writes to and reads from ONNX, in strata's own
// terms. A node is one forward op of strata's op table with its argument struct; values
// are named; parameters are named f32 host tensors (ONNX initializers). Export fills a
// Graph from a module tree (from_module.cpp), import from an ONNX file (proto_read.cpp);
// proto_write.cpp and to_module.cpp turn a Graph into an ONNX file and into an nn module.
// No ONNX or protobuf type appears here.
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/nn/module.h"
#include "strata/ops/table/op_args.h"

namespace strata::onnx::ir {

// global_avg_pool is strata's [N,C,H,W] -> [N,C] (ONNX: GlobalAveragePool + Flatten);
// flatten is [N, ...] -> [N, prod(...)]; linear is Gemm with a transposed weight.
enum class Op { conv2d, batch_norm, relu, max_pool2d, avg_pool2d, global_avg_pool, flatten, linear, add };
std::string_view op_name(Op op);

// The parameters of an op, in order: conv2d and linear "weight" and optionally "bias";
// batch_norm "weight", "bias", "running_mean", "running_var" (strata's and PyTorch's names).
std::span<const std::string_view> param_roles(Op op);

struct Node {
  Op op = Op::relu;
  std::string name;    // ONNX node name
  std::string module;  // the nn module's name: its parameters are "<module>.<role>" in its state dict
  std::vector<std::string> inputs;  // activations: one, two for add
  std::string output;
  std::vector<std::string> params;  // initializer names, in param_roles order
  ops::Conv2dParams conv;
  ops::Pool2dParams pool;
  double eps = 1e-5, momentum = 0.1;  // batch_norm; momentum as PyTorch's (ONNX's is 1 - it)
};

struct Graph {
  std::string input, output;
  Shape input_sizes;        // dim 0 is the batch, -1 when the file leaves it open
  std::vector<Node> nodes;  // in topological order
  nn::StateDict initializers;  // f32, CPU, contiguous; names unique
};

// The output shape of node n for inputs of `inputs` sizes (in n.inputs order), by
// strata's own shape rules (ops/shape_rules.h) on tensors without data; a strata::Error
// from the rule when they do not fit.
Shape infer_node(const Graph& g, const Node& n, const std::vector<Shape>& inputs);

// The shape of every value for a batch of one (a batch of -1 in input_sizes is taken as
// one), checked by strata's own shape rules (ops/shape_rules.h) on tensors without data.
// A node that fails its rule, or reads a value of unknown shape, is reported through
// on_problem (when given; else its strata::Error propagates) and its output left out.
std::map<std::string, Shape> infer_shapes(const Graph& g,
                                          const std::function<void(const Node&, const std::string&)>& on_problem = {});

// Folds each batch_norm that follows a conv2d (whose output nothing else reads) into the
// conv2d: weight * gamma / sqrt(var + eps) and (bias - mean) * gamma / sqrt(var + eps) + beta,
// computed in double and rounded once to f32. The folded parameters keep the conv's names
// ("<conv>.weight", "<conv>.bias"); the batch norm's initializers are dropped.
void fold_batch_norm(Graph& g);

// The initializer called `name`, or nullptr.
const Tensor* find_param(const Graph& g, std::string_view name);

}  // namespace strata::onnx::ir
