#pragma once
// Pooling: MaxPool2d and AvgPool2d (square window, as torch.nn.MaxPool2d /
// AvgPool2d with count_include_pad=True), and GlobalAvgPool ([N,C,H,W] -> [N,C],
// i.e. torchvision's AdaptiveAvgPool2d(1) followed by flatten).
#include "strata/nn/layers/direct_layer.h"

namespace strata::nn {

namespace detail {
// What tells the two windowed pools apart: their name, their direct plan and their tape formula.
struct MaxPoolKind {
  static constexpr std::string_view kName = "MaxPool2d";
  template <class D>
  static Tensor tape(const D& d, const Tensor& x, const ops::Pool2dParams& p) {
    return autograd::max_pool2d(d, x, p);
  }
  using Plan = ops::direct::PlanOf<ops::direct::MaxPool2dPlan>;
};
struct AvgPoolKind {
  static constexpr std::string_view kName = "AvgPool2d";
  template <class D>
  static Tensor tape(const D& d, const Tensor& x, const ops::Pool2dParams& p) {
    return autograd::avg_pool2d(d, x, p);
  }
  using Plan = ops::direct::PlanOf<ops::direct::AvgPool2dPlan>;
};
}  // namespace detail

// A square-window pool (Kind: max or average); stride 0 means stride = kernel_size (PyTorch's default).
template <class P, class Kind>
class Pool2d final : public Module {
 public:
  Pool2d(const P& p, int kernel_size, int stride = 0, int padding = 0);
  std::string_view type_name() const override { return Kind::kName; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  const ops::Pool2dParams& window() const { return pp_; }  // kernel, stride, padding

 private:
  P p_;
  ops::Pool2dParams pp_;
  [[no_unique_address]] detail::DirectLayer<P, typename Kind::Plan> direct_;
};
template <class P>
using MaxPool2d = Pool2d<P, detail::MaxPoolKind>;
template <class P>
using AvgPool2d = Pool2d<P, detail::AvgPoolKind>;

template <class P>
class GlobalAvgPool final : public Module {
 public:
  explicit GlobalAvgPool(const P& p) : p_(p) {}
  std::string_view type_name() const override { return "GlobalAvgPool"; }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

 private:
  P p_;
  [[no_unique_address]] detail::DirectLayer<P, ops::direct::PlanOf<ops::direct::GlobalAvgPoolPlan>> direct_;
};

}  // namespace strata::nn
