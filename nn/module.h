#pragma once
// Module: the base of every layer and model. It holds, in registration order,
// named parameters, named buffers and named children, so state_dict() order is
// deterministic and follows PyTorch's (own parameters, own buffers, then each child
// recursively), which makes strata's names and order those of torchvision.
//
// Parameters and buffers are Tensor handles owned by the module; load_state_dict()
// and the optimizers write into them in place, so direct-mode plans that bound
// their pointers stay valid.
//
// forward()/backward() are virtual for containers (Sequential) and the type-erased
// model; concrete layers are `final`, so a typed network calls them directly.
// backward() exists in direct mode only: it takes dL/d(output) of the latest
// forward(), writes parameter gradients into each parameter's .grad() (accumulating,
// as the tape does, when a gradient is already there) and returns dL/d(input)
// (undefined when set_input_grad(false)).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::nn {

// Name -> tensor, ordered. Names are dotted paths ("layer1.0.conv1.weight").
using StateDict = std::vector<std::pair<std::string, Tensor>>;

// A tensor from a state dict, or nullptr.
const Tensor* find_entry(const StateDict& sd, std::string_view name);

class Module {
 public:
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // "Conv2d", "BatchNorm2d", "ResNet", ...: used by init policies and error messages.
  virtual std::string_view type_name() const = 0;
  // One-line description of the layer's configuration ("Conv2d(64, 128, kernel=3, stride=2)").
  virtual std::string extra_repr() const { return {}; }

  virtual Tensor forward(const Tensor& x);
  virtual Tensor backward(const Tensor& dy);  // direct mode only
  // Whether backward() computes dL/d(input); the first layer of a network needs none.
  virtual void set_input_grad(bool on) { input_grad_ = on; }
  bool input_grad() const { return input_grad_; }

  // Recursive. Training is on after construction.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Own entries only.
  const std::vector<std::pair<std::string, Tensor>>& own_parameters() const { return params_; }
  const std::vector<std::pair<std::string, Tensor>>& own_buffers() const { return buffers_; }
  const std::vector<std::pair<std::string, Module*>>& children() const { return children_; }
  // The own parameter or buffer called `name`; throws naming the module if absent.
  const Tensor& param(std::string_view name) const;
  const Tensor& buffer(std::string_view name) const;

  // Recursive, with dotted names, in registration order.
  StateDict named_parameters() const;
  StateDict named_buffers() const;
  std::vector<Tensor> parameters() const;
  // Every module of the tree, this one first (name ""), depth first.
  std::vector<std::pair<std::string, Module*>> named_modules();
  int64_t num_parameters() const;  // elements, as sum(p.numel() for p in parameters())

  // Parameters and buffers (handles to the live tensors, not copies).
  StateDict state_dict() const;
  // Copies every entry into the module's tensors (any dtype or device; converted).
  // strict: missing or unexpected names are errors. Shape mismatches always are.
  // All problems are collected and reported together in one strata::Error, and no
  // tensor is written unless the whole dict fits.
  void load_state_dict(const StateDict& sd, bool strict = true);

  // Recursive: layers that keep copies derived from their parameters (Conv2d's folded
  // weights) bring them up to date, in place, where a parameter was written since they were
  // made (Tensor::version). forward() does it itself; graph mode calls this before replaying
  // a captured evaluation, which runs no forward().
  void refresh_derived();

  // Sets every parameter's .grad() to undefined (PyTorch's set_to_none).
  void zero_grad();
  // Every 4-D parameter and buffer re-laid out in `fmt`, in place (every handle sees it),
  // as PyTorch's module.to(memory_format=...): a channels-last network's convolutions then
  // read weights, and write their gradients, in the activations' layout, with no staging.
  void to_memory_format(MemoryFormat fmt);

  // Direct mode: `fn` is called (on this module and its descendants) with each module
  // whose parameters' gradients backward has just completed, while the rest of
  // backward is still to run: data-parallel training starts averaging them then
  // (dist/data_parallel.h). Networks that report this: ResNet (per block, the stem and
  // the classifier); others report nothing, and their gradients are averaged when
  // backward ends. Empty: off.
  void set_grad_ready_hook(const std::function<void(const Module&)>& fn);

  // A PyTorch-style printout of the tree.
  std::string repr() const;

 protected:
  Module() = default;
  // Registration: the returned reference is the module's own handle.
  Tensor& register_parameter(std::string name, Tensor t);
  Tensor& register_buffer(std::string name, Tensor t);
  template <class M>
  M& register_module(std::string name, std::unique_ptr<M> m) {
    M& ref = *m;
    add_child(std::move(name), std::move(m));
    return ref;
  }
  // A child the module owns but does not list (torchvision reuses one ReLU several
  // times per forward; direct mode needs one module per call site).
  template <class M>
  M& own_unlisted(std::unique_ptr<M> m) {
    M& ref = *m;
    unlisted_.push_back(std::move(m));
    return ref;
  }
  virtual void on_train(bool) {}
  // This module's part of refresh_derived().
  virtual void on_refresh_derived() {}
  // Called on every module of the tree after load_state_dict wrote its tensors.
  virtual void on_load() {}
  // After to_memory_format re-laid this module's parameters out: tensors the module keeps
  // beside them (Conv2d's folded copies) follow.
  virtual void on_memory_format(MemoryFormat) {}
  // Direct-mode backward: `m`'s parameter gradients are complete (see set_grad_ready_hook).
  void grads_ready(const Module& m) const {
    if (grad_ready_) grad_ready_(m);
  }

  bool input_grad_ = true;

 private:
  void add_child(std::string name, std::unique_ptr<Module> m);
  void collect(const std::string& prefix, bool params, bool buffers, StateDict& out) const;
  void repr_into(std::string& out, const std::string& name, int indent) const;

  bool training_ = true;
  std::function<void(const Module&)> grad_ready_;
  std::vector<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, Module*>> children_;
  std::vector<std::unique_ptr<Module>> owned_;     // listed children
  std::vector<std::unique_ptr<Module>> unlisted_;  // see own_unlisted
};

// Formats 25557032 as "25,557,032".
std::string group_thousands(int64_t n);

}  // namespace strata::nn
