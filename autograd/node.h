#pragma once
// The tape. Each differentiable op output records a Node: what backward needs
// (saved tensors, parameters) plus edges to the nodes (or leaf tensors) its inputs
// came from. Nodes run their backward through the same dispatcher the forward used.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/tensor.h"

namespace strata::autograd {

class Node;
namespace detail {
struct BackwardPass;
void run_backward(const BackwardPass& pass);
}  // namespace detail

// Called with a leaf once the pass has accumulated its last contribution into its
// .grad() (which stays undefined when no gradient reached it), while the rest of the
// pass still runs: data-parallel training starts averaging gradients then (PyTorch's
// post-accumulate-grad hooks). Leaves are reported in a deterministic order, the same
// for the same graph.
using LeafDone = std::function<void(const Tensor& leaf)>;

// Where an input's gradient goes: the node that produced it, or a leaf tensor.
struct Edge {
  std::shared_ptr<Node> fn;
  std::shared_ptr<TensorImpl> leaf;
  bool valid() const { return fn != nullptr || leaf != nullptr; }
};

class Node {
 public:
  Node();
  virtual ~Node() = default;
  virtual std::string_view name() const = 0;
  // Gradients for each entry of `next` (undefined where an input needs none).
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  // a + b on this node's backend, for gradient accumulation.
  virtual Tensor accumulate(const Tensor& a, const Tensor& b) const = 0;
  // A tensor of ones like t on this node's backend (the seed gradient).
  virtual Tensor ones_like(const Tensor& t) const = 0;
  // Drops saved tensors once backward has run through this node.
  virtual void release() = 0;

  std::vector<Edge> next;
  uint64_t seq;  // creation order: later nodes run first among those ready

 private:
  friend void detail::run_backward(const detail::BackwardPass&);
  Tensor pending_grad_;
  bool released_ = false;  // a pass without retain_graph ran through it
  int dependencies_ = 0;
  uint64_t pass_ = 0;  // which backward pass last visited this node
};

Edge edge_of(const Tensor& t);
bool any_requires_grad(std::initializer_list<const Tensor*> ts);
bool any_requires_grad(std::span<const Tensor> ts);
// Makes `node` the grad_fn of `output` with edges to `inputs`.
void attach(const std::shared_ptr<Node>& node, std::initializer_list<const Tensor*> inputs, const Tensor& output);
void attach(const std::shared_ptr<Node>& node, std::span<const Tensor> inputs, const Tensor& output);

// Reverse-mode pass from `root`. With no `grad`, root must have one element and
// the seed gradient is 1. Gradients accumulate into the .grad of leaf tensors that
// require grad; `leaf_done`, when given, is told as each leaf's is complete. The
// graph's saved tensors are released afterwards unless retain_graph (a second pass
// through a released graph is an error that says so).
void backward(const Tensor& root, const Tensor& grad = Tensor(), const LeafDone& leaf_done = {},
              bool retain_graph = false);
// The gradients of `output` (one element unless grad_output is given) with respect to each
// of `inputs` (leaves that require grad), returned instead of accumulated into their .grad()
// (which stays as it was); undefined for an input the output does not depend on.
// create_graph (gradients that are themselves differentiable) is not supported.
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad_output = Tensor(),
                         bool retain_graph = false, bool create_graph = false);

}  // namespace strata::autograd
