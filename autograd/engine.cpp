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

void attach(const std::shared_ptr<Node>& node, std::initializer_list<const Tensor*> inputs, const Tensor& output) {
  node->next.reserve(inputs.size());
  for (const Tensor* t : inputs) node->next.push_back(edge_of(*t));
  output.impl().grad_fn = node;
  output.impl().requires_grad = true;
}

void backward(const Tensor& root, const Tensor& grad, const LeafDone& leaf_done) {
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
      n->release();
      continue;
    }
    std::vector<Tensor> grads = n->apply(g);
    STRATA_CHECK(grads.size() == n->next.size(), "backward: node ", n->name(), " returned ", grads.size(),
                 " gradients for ", n->next.size(), " inputs");
    for (size_t i = 0; i < grads.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.valid()) continue;
      const Tensor& gi = grads[i];
      if (e.leaf) {
        if (gi.defined()) {
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
    n->release();
  }
}

}  // namespace strata::autograd
