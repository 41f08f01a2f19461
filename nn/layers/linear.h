#pragma once
// Linear: y[N,out] = x[N,in] weight[out,in]^T + bias[out], as torch.nn.Linear;
// parameters start as torch.nn.Linear's (nn/init.h, init::reset_parameters).
#include "strata/nn/layers/direct_layer.h"

namespace strata::nn {

struct LinearOptions {
  bool bias = true;
  DType dtype = DType::f32;
};

template <class P>
class Linear final : public Module {
 public:
  Linear(const P& p, int64_t in_features, int64_t out_features, const LinearOptions& o = {});
  std::string_view type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  // x weight^T + bias + z, the residual z added in the product where the backend can
  // (ops::linear_add); in direct mode backward() returns dL/dx and z's gradient is dy, the caller's.
  Tensor forward_add(const Tensor& x, const Tensor& z);
  // LN(x) weight^T + bias, x's rows layer-normalised (norm_w, norm_b, eps: a LayerNorm's) in the
  // product's prologue (ops::linear_norm): inference only, no tape and no backward.
  Tensor forward_normed(const Tensor& x, const Tensor& norm_w, const Tensor& norm_b, double eps);
  Tensor backward(const Tensor& dy) override;

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  int64_t plans_made() const;

 private:
  P p_;
  int64_t in_, out_;
  Tensor weight_, bias_;
  detail::EvalCast weight_cast_, bias_cast_;  // mixed-precision evaluation in the tape modes
  [[no_unique_address]] detail::DirectLayer<P, detail::LinearStepOf> direct_;
  [[no_unique_address]] detail::DirectLayer<P, detail::NormedLinearStepOf> normed_;
};

}  // namespace strata::nn
