// Model::describe(verbose): the per-module table that Keras's model.summary() and torchinfo
// print: name, type and configuration, output shape, parameters.
//
// Output shapes are observed, not declared: modules have no shape rule of their own, and their
// forward() calls each other directly (typed networks are not Sequentials), so nothing can hook
// a child's call. The model runs forward once on zeros of the input sizes (predict: gradients
// off, eval mode); then each module's children are run one after another, in the order they
// were registered, on the module's input. A Sequential runs its children exactly so. For any
// other module the chain is kept only when it ends in the module's own output shape without an
// error (LeNet, and ResNet's top level and stages, are such chains; so is a residual block
// without a downsample branch, whose children then show the shapes they do have; a block with
// one is not, and its children's shapes are shown as "-"). A module whose forward took its
// children in another order but with the same shapes in and out would be shown with the chain's
// shapes: strata's layers register their children in the order their forward calls them.
// A network of token ids (nn/token_inputs.h) runs on zero ids. Where a module's input is ids, a
// child that fails on the chain's value but runs on the ids is a lookup beside the chain (GPT's
// position embedding, added to the token embedding): it shows its own output and the chain goes
// on from the value before it; and the chain may end in the module's output shape but for the
// last dim, which a head after the last child sets (GPT's output projection, tied to wte).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/factories.h"
#include "strata/nn/layers/container.h"
#include "strata/nn/model.h"
#include "strata/nn/restore_training.h"
#include "strata/nn/token_inputs.h"

namespace strata::nn {

namespace {

struct Row {
  std::string name;  // dotted path; "" for the network itself
  int depth = 0;
  std::string what;  // "Linear(in_features=16, ...)"
  std::string shape = "-";
  int64_t params = 0;
};

std::string what_of(const Module& m) {
  const std::string extra = m.extra_repr();
  return std::string(m.type_name()) + (extra.empty() ? "" : "(" + extra + ")");
}

// Rows for `m` and its descendants, depth first; out: m's output shape when known.
void rows_of(const Module& m, const std::string& name, int depth, std::vector<Row>& rows) {
  rows.push_back({name, depth, what_of(m), "-", m.num_parameters()});
  for (const auto& [child_name, child] : m.children())
    rows_of(*child, name.empty() ? child_name : name + "." + child_name, depth + 1, rows);
}

// Fills the shapes of m's descendants, whose rows follow `at` (m's row) in `rows`: the chain of
// m's children from `in` (see the top of the file). Returns the row after m's subtree.
size_t shapes_below(Module& m, const Tensor& in, const Shape& out, std::vector<Row>& rows, size_t at) {
  size_t next = at + 1;
  struct Link {
    size_t row;
    Tensor x, y;  // the child's input and output
  };
  std::vector<Link> links;
  const bool ids = in.defined() && !is_floating(in.dtype());
  bool chain = !m.children().empty();
  Tensor h = in;
  for (const auto& [child_name, child] : m.children()) {
    size_t end = next + 1;
    while (end < rows.size() && rows[end].depth > rows[next].depth) ++end;
    if (chain) {
      try {
        links.push_back({next, h, child->forward(h)});
        h = links.back().y;
      } catch (const Error&) {
        chain = false;
      }
      if (!chain && ids && h.dim() > in.dim()) {
        try {
          const Tensor beside = child->forward(in);
          chain = beside.sizes() == h.sizes();
          if (chain) links.push_back({next, in, beside});
        } catch (const Error&) {
        }
      }
    }
    next = end;
  }
  const bool head_after = ids && h.dim() == static_cast<int64_t>(out.size()) && h.dim() > 0 &&
                          std::equal(out.begin(), out.end() - 1, h.sizes().begin());
  if (!chain || !(dynamic_cast<const Sequential*>(&m) != nullptr || h.sizes() == out || head_after)) return next;
  // The chain holds: each child's output and, below it, its own children.
  for (const Link& l : links) {
    rows[l.row].shape = l.y.sizes().str();
    Module& child = *m.children()[static_cast<size_t>(&l - links.data())].second;
    if (!child.children().empty()) shapes_below(child, l.x, l.y.sizes(), rows, l.row);
  }
  return next;
}


}  // namespace

std::string Model::describe(bool verbose, const Shape& input) {
  if (!verbose) return describe_;
  std::vector<Row> rows;
  rows_of(module(), "", 0, rows);
  rows[0].name = "(model)";
  const Shape sizes = !input.empty() ? input : latest_input_sizes_;
  if (!sizes.empty()) {
    detail::RestoreTraining restore(module());
    module().eval();
    autograd::NoGradGuard no_grad;
    const Tensor x = zeros(sizes, detail::takes_token_ids(module()) ? DType::i64 : dtype());
    const Shape out = predict(x).sizes();
    rows[0].shape = out.str();
    shapes_below(module(), network_input(x), out, rows, 0);
  }
  size_t name_w = 5, what_w = 4, shape_w = 12;
  for (const Row& r : rows) {
    name_w = std::max(name_w, r.name.size() + 2 * static_cast<size_t>(r.depth));
    what_w = std::max(what_w, r.what.size());
    shape_w = std::max(shape_w, r.shape.size());
  }
  what_w = std::min<size_t>(what_w, 72);
  auto line = [&](const std::string& name, const std::string& what, const std::string& shape,
                  const std::string& params) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%-*s  %-*s  %-*s  %s\n", static_cast<int>(name_w), name.c_str(),
                  static_cast<int>(what_w), what.substr(0, what_w).c_str(), static_cast<int>(shape_w), shape.c_str(),
                  params.c_str());
    return std::string(buf);
  };
  std::string s = describe_ + "\n";
  s += line("layer", "type", "output shape", "parameters");
  for (const Row& r : rows)
    s += line(std::string(2 * static_cast<size_t>(r.depth), ' ') + r.name, r.what, r.shape,
              group_thousands(r.params));
  s += "total parameters: " + group_thousands(module().num_parameters());
  if (!sizes.empty())
    s += " | shapes for input " + sizes.str();
  else
    s += " | no output shapes: give an input shape, or run the model once";
  return s + "\n";
}

}  // namespace strata::nn
