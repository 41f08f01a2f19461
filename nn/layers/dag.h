#pragma once
// Dag: a module that runs a directed acyclic graph of modules, for networks that are
// not a chain (an imported ONNX model, onnx/onnx.h). Value 0 is the input; each step
// makes one new value, either a child module applied to one earlier value or the sum of
// two earlier values (as ResidualAdd). forward runs the steps in the order they were
// added, which is a topological order by construction, and returns the output value.
//
// backward (direct mode) runs the steps in reverse. A value read by several steps gets
// the sum of their gradients, accumulated as the autograd engine does (the gradient
// that arrives first, from the latest step, plus each later one, existing + new) with a
// planned add per extra gradient. Values that do not reach the output get no gradient
// and their steps no backward call.
#include <memory>
#include <string>
#include <vector>

#include "strata/nn/layers/blocks.h"

namespace strata::nn {

template <class P>
class Dag final : public Module {
 public:
  static constexpr int kInput = 0;

  explicit Dag(const P& p) : p_(p) {}
  std::string_view type_name() const override { return "Dag"; }

  // A new value, module(value `input`); the module becomes a listed child named `name`
  // (dots allowed: its parameters are then "<name>.<param>" in the state dict).
  int add_module(std::string name, std::unique_ptr<Module> m, int input);
  // A new value, value a + value b (same sizes).
  int add_sum(int a, int b);
  // The value forward returns; the latest value until set.
  void set_output(int value);
  int output() const { return output_ < 0 ? num_values() - 1 : output_; }
  int num_values() const { return static_cast<int>(steps_.size()) + 1; }
  // The structure, for readers such as the ONNX exporter: step i makes value i + 1 from
  // value step_input(i, 0), and for a sum (step_module(i) == nullptr) step_input(i, 1).
  int num_steps() const { return static_cast<int>(steps_.size()); }
  const Module* step_module(int i) const { return steps_.at(static_cast<size_t>(i)).module; }
  int step_input(int i, int k) const { return k == 0 ? steps_.at(static_cast<size_t>(i)).a : steps_.at(static_cast<size_t>(i)).b; }

  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;  // direct mode
  void set_input_grad(bool on) override;

 private:
  struct Step {
    Module* module = nullptr;  // nullptr: a sum
    int a = 0, b = -1;
    std::unique_ptr<ResidualAdd<P>> add;
  };
  void check_value(int v, const char* what) const;
  // Direct mode: grads[v] = g, or grads[v] + g through the next planned add of v.
  void accumulate(std::vector<Tensor>& grads, std::vector<int>& arrived, int v, const Tensor& g);

  P p_;
  std::vector<Step> steps_;  // step i makes value i + 1
  int output_ = -1;
  std::vector<std::vector<std::unique_ptr<ResidualAdd<P>>>> accumulators_;  // per value, per extra gradient
};

}  // namespace strata::nn
