#pragma once
// Conv2d: y = conv2d(x, weight, bias), weight [out, in/groups, k, k], bias [out]
// (optional), as torch.nn.Conv2d with square kernel, stride, padding and dilation.
#include "strata/nn/layers/direct_layer.h"

namespace strata::nn {

struct Conv2dOptions {
  int stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = true;
  DType dtype = DType::f32;
};

template <class P>
class Conv2d final : public Module {
 public:
  // Parameters start as torch.nn.Conv2d's (nn/init.h, init::reset_parameters).
  Conv2d(const P& p, int64_t in_channels, int64_t out_channels, int kernel_size, const Conv2dOptions& o = {});
  std::string_view type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias
  const ops::Conv2dParams& conv_params() const { return cp_; }
  int64_t plans_made() const;  // direct mode: how many plans this layer made; 0 otherwise

 private:
  P p_;
  int64_t in_, out_;
  int kernel_;
  ops::Conv2dParams cp_;
  Tensor weight_, bias_;
  [[no_unique_address]] detail::DirectLayer<P, detail::Conv2dStepOf> direct_;
};

}  // namespace strata::nn
