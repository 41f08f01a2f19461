#include <atomic>
#include <queue>
#include <unordered_map>

#include "strata/autograd/node.h"

namespace strata::autograd {

namespace {
std::atomic<uint64_t> g_next_seq{0};
std::atomic<uint64_t> g_next_pass{1};
}

Node::Node() : seq(g_next_seq.fetch_add(1, std::memory_order_relaxed)) {}

Edge edge_of(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn(), nullptr};
  return {nullptr, t.impl_ptr()};
}

bool any_requires_grad(std::initializer_list<const Tensor*> ts) {
  if (!GradMode::enabled()) return false;
  for (const Tensor* t : ts)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

bool any_requires_grad(std::span<const Tensor> ts) {
  if (!GradMode::enabled()) return false;
  for (const Tensor& t : ts)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void attach(const std::shared_ptr<Node>& node, std::span<const Tensor> inputs, const Tensor& output) {
  node->next.reserve(inputs.size());
  for (const Tensor& t : inputs) node->next.push_back(edge_of(t));
  output.impl().grad_fn = node;
  output.impl().requires_grad = true;
}

void attach(const std::shared_ptr<Node>& node, std::initializer_list<const Tensor*> inputs, const Tensor& output) {
  node->next.reserve(inputs.size());
  for (const Tensor* t : inputs) node->next.push_back(edge_of(*t));
  output.impl().grad_fn = node;
  output.impl().requires_grad = true;
}

namespace detail {
struct BackwardPass {
  const Tensor& root;
  const Tensor& grad;
  const LeafDone& leaf_done;
  bool retain_graph;
  // When given, the only leaves whose .grad() the pass writes (autograd::grad's inputs).
  const std::vector<Tensor>* only = nullptr;
};

void run_backward(const BackwardPass& bp) {
  const Tensor& root = bp.root;
  const Tensor& grad = bp.grad;
  const LeafDone& leaf_done = bp.leaf_done;
  const bool retain_graph = bp.retain_graph;
  auto wanted = [&](const std::shared_ptr<TensorImpl>& leaf) {
    if (!bp.only) return true;
    for (const Tensor& t : *bp.only)
      if (t.impl_ptr() == leaf) return true;
    return false;
  };
  STRATA_CHECK(root.defined(), "backward: root is an undefined tensor");
  STRATA_CHECK(root.requires_grad(), "backward: ", root.str(), " does not require grad (no op on its path recorded a tape)");
  STRATA_CHECK(grad.defined() || root.numel() == 1, "backward: root ", root.str(),
               " is not a scalar; pass its gradient explicitly");
  if (grad.defined())
    STRATA_CHECK(grad.sizes() == root.sizes(), "backward: gradient ", grad.str(), " does not match root ", root.str());
  const std::shared_ptr<Node>& root_fn = root.grad_fn();
  STRATA_CHECK(root_fn != nullptr, "backward: root ", root.str(), " is a leaf; nothing to differentiate");

  // Count, for each node, how many edges of the graph point at it.
  const uint64_t pass = g_next_pass.fetch_add(1);
  // With leaf_done, also how many edges point at each leaf (a count only: no sum runs
  // in this map's order).
  std::unordered_map<const TensorImpl*, int> leaf_edges;
  std::vector<Node*> stack{root_fn.get()};
  root_fn->dependencies_ = 0;
  root_fn->pass_ = pass;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next) {
      if (e.leaf && leaf_done) ++leaf_edges[e.leaf.get()];
      if (!e.fn) continue;
      Node* m = e.fn.get();
      if (m->pass_ != pass) {
        m->pass_ = pass;
        m->dependencies_ = 0;
        stack.push_back(m);
      }
      ++m->dependencies_;
    }
  }

  // One edge into `leaf` is done: tell leaf_done when it was the last.
  auto leaf_edge_done = [&](const std::shared_ptr<TensorImpl>& leaf) {
    if (leaf_done && --leaf_edges.at(leaf.get()) == 0) leaf_done(Tensor(leaf));
  };

  auto later_first = [](const Node* a, const Node* b) { return a->seq < b->seq; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  root_fn->pending_grad_ = grad.defined() ? grad : root_fn->ones_like(root);
  ready.push(root_fn.get());
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    Tensor g = std::move(n->pending_grad_);
    n->pending_grad_ = Tensor();
    if (!g.defined()) {  // no gradient reached this node: its inputs get none from it
      for (const Edge& e : n->next) {
        if (e.leaf) leaf_edge_done(e.leaf);
        if (e.fn && --e.fn->dependencies_ == 0) ready.push(e.fn.get());
      }
      if (!retain_graph) n->release(), n->released_ = true;
      continue;
    }
    STRATA_CHECK(!n->released_, "backward: trying to backward through the graph a second time (node ", n->name(),
                 "): its saved tensors were freed when the first backward() ran. Pass retain_graph = true to the "
                 "first backward() (x.backward(grad, true)) to backward through the graph a second time");
    std::vector<Tensor> grads = n->apply(g);
    STRATA_CHECK(grads.size() == n->next.size(), "backward: node ", n->name(), " returned ", grads.size(),
                 " gradients for ", n->next.size(), " inputs");
    for (size_t i = 0; i < grads.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.valid()) continue;
      const Tensor& gi = grads[i];
      if (e.leaf) {
        if (gi.defined() && wanted(e.leaf)) {
          Tensor leaf(e.leaf);
          leaf.set_grad(leaf.grad().defined() ? n->accumulate(leaf.grad(), gi) : gi);
        }
        leaf_edge_done(e.leaf);
        continue;
      }
      Node* m = e.fn.get();
      if (gi.defined()) m->pending_grad_ = m->pending_grad_.defined() ? n->accumulate(m->pending_grad_, gi) : gi;
      if (--m->dependencies_ == 0) ready.push(m);
    }
    if (!retain_graph) n->release(), n->released_ = true;
  }
}
}  // namespace detail

void backward(const Tensor& root, const Tensor& grad, const LeafDone& leaf_done, bool retain_graph) {
  detail::run_backward(detail::BackwardPass{root, grad, leaf_done, retain_graph});
}

std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad_output,
                         bool retain_graph, bool create_graph) {
  STRATA_CHECK(!create_graph, "autograd::grad: create_graph (differentiable gradients) is not supported");
  for (size_t i = 0; i < inputs.size(); ++i) {
    STRATA_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "autograd::grad: input ", i,
                 " does not require grad");
    STRATA_CHECK(inputs[i].is_leaf(), "autograd::grad: input ", i, " (", inputs[i].str(),
                 ") is not a leaf; strata computes gradients with respect to leaves only");
  }
  // Each leaf's .grad() set aside for the pass and put back after it, whatever happens.
  std::vector<Tensor> kept;
  kept.reserve(inputs.size());
  for (const Tensor& t : inputs) kept.push_back(t.grad()), t.impl().grad = nullptr;
  struct Restore {
    const std::vector<Tensor>& ins;
    std::vector<Tensor>& kept;
    ~Restore() {
      for (size_t i = 0; i < ins.size(); ++i) ins[i].impl().grad = kept[i].impl_ptr();
    }
  } restore{inputs, kept};
  const LeafDone none;
  detail::run_backward(detail::BackwardPass{output, grad_output, none, retain_graph, &inputs});
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor& t : inputs) out.push_back(t.grad());
  return out;
}

}  // namespace strata::autograd
