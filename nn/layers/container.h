#pragma once
// Flatten ([N, ...] -> [N, prod(...)], torch.nn.Flatten) and Sequential.
#include <memory>

#include "strata/nn/layers/direct_layer.h"

namespace strata::nn {

namespace detail {
// Flatten's direct step: a view of x, or a planned contiguous copy when x is not
// contiguous; the gradient a view of dy, rebound when dy moves.
template <class Impl>
class FlattenStep {
 public:
  void plan(Impl& impl, const Tensor& x, const Shape& out);
  const Tensor& run(const Shape& out);
  void plan_backward(const Tensor& dy, bool need_dx);
  const Tensor& run_backward() { return dx_; }

 private:
  Impl* impl_ = nullptr;
  Shape in_sizes_;
  Tensor y_, dx_;
  ops::CopyArgs copy_;
  bool copies_ = false;
};
struct FlattenStepOf {
  template <backends::BackendImpl Impl>
  using type = FlattenStep<Impl>;
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
