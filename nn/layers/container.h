#pragma once
// Flatten ([N, ...] -> [N, prod(...)], torch.nn.Flatten) and Sequential.
#include <memory>

#include "strata/nn/layers/direct_layer.h"
#include "strata/ops/direct/reshape_plan.h"

namespace strata::nn {

namespace detail {
struct FlattenStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::ReshapePlan<Impl>;
};
}  // namespace detail

// A view when the input is contiguous, a copy otherwise (channels-last input). The
// gradient is a contiguous view of dy in the input's sizes, as autograd::reshape's.
template <class P>
class Flatten final : public Module {
 public:
  explicit Flatten(const P& p) : p_(p) {}
  std::string_view type_name() const override { return "Flatten"; }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

 private:
  P p_;
  [[no_unique_address]] detail::DirectLayer<P, detail::FlattenStepOf> direct_;
};

// Children named "0", "1", ... run in order; backward (direct mode) in reverse.
// Calls go through Module's virtual forward/backward (one per child); the models
// (ResNet, LeNet) hold typed layers instead and call them directly.
class Sequential final : public Module {
 public:
  Sequential() = default;
  std::string_view type_name() const override { return "Sequential"; }
  template <class M>
  M& add(std::unique_ptr<M> m) {
    M& ref = register_module(std::to_string(layers_.size()), std::move(m));
    layers_.push_back(&ref);
    if (layers_.size() == 1) ref.set_input_grad(input_grad_);
    return ref;
  }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  void set_input_grad(bool on) override;
  size_t size() const { return layers_.size(); }
  Module& operator[](size_t i) const { return *layers_.at(i); }

 private:
  std::vector<Module*> layers_;
};

}  // namespace strata::nn
