#pragma once
// Pooling: MaxPool2d and AvgPool2d (square window, as torch.nn.MaxPool2d /
// AvgPool2d with count_include_pad=True), and GlobalAvgPool ([N,C,H,W] -> [N,C],
// i.e. torchvision's AdaptiveAvgPool2d(1) followed by flatten).
#include "strata/nn/layers/direct_layer.h"

namespace strata::nn {

// stride 0 means stride = kernel_size (PyTorch's default).
template <class P>
class MaxPool2d final : public Module {
 public:
  MaxPool2d(const P& p, int kernel_size, int stride = 0, int padding = 0);
  std::string_view type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  const ops::Pool2dParams& window() const { return pp_; }  // kernel, stride, padding

 private:
  P p_;
  ops::Pool2dParams pp_;
  [[no_unique_address]] detail::DirectLayer<P, detail::PlanOf<ops::direct::MaxPool2dPlan>> direct_;
};

template <class P>
class AvgPool2d final : public Module {
 public:
  AvgPool2d(const P& p, int kernel_size, int stride = 0, int padding = 0);
  std::string_view type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  const ops::Pool2dParams& window() const { return pp_; }  // kernel, stride, padding

 private:
  P p_;
  ops::Pool2dParams pp_;
  [[no_unique_address]] detail::DirectLayer<P, detail::PlanOf<ops::direct::AvgPool2dPlan>> direct_;
};

template <class P>
class GlobalAvgPool final : public Module {
 public:
  explicit GlobalAvgPool(const P& p) : p_(p) {}
  std::string_view type_name() const override { return "GlobalAvgPool"; }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

 private:
  P p_;
  [[no_unique_address]] detail::DirectLayer<P, detail::PlanOf<ops::direct::GlobalAvgPoolPlan>> direct_;
};

}  // namespace strata::nn
