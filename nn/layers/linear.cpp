#include "strata/nn/layers/linear.h"

#include "strata/autograd/functions.h"
#include "strata/autograd/grad_mode.h"
#include "strata/nn/init.h"
#include "strata/nn/layers/layer_util.h"
#include "strata/nn/layers/residual_add.h"
#include "strata/ops/functional.h"

namespace strata::nn {

template <class P>
Linear<P>::Linear(const P& p, int64_t in_features, int64_t out_features, const LinearOptions& o)
    : p_(p), in_(in_features), out_(out_features) {
  STRATA_CHECK(in_features > 0 && out_features > 0, "Linear: invalid configuration in_features=", in_features,
               " out_features=", out_features);
  const Device dev = p_.device();
  weight_ = register_parameter("weight", detail::make_filled(dev, Shape{out_features, in_features}, o.dtype, 0.0));
  if (o.bias) bias_ = register_parameter("bias", detail::make_filled(dev, Shape{out_features}, o.dtype, 0.0));
  init::reset_parameters(*this);  // torch's default, so a layer is usable without a policy
}

template <class P>
std::string Linear<P>::extra_repr() const {
  return "in_features=" + std::to_string(in_) + ", out_features=" + std::to_string(out_) +
         ", bias=" + (bias_.defined() ? "True" : "False");
}

template <class P>
Tensor Linear<P>::forward(const Tensor& x) {
  return direct_.forward(
      p_, x,
      [&](const auto& tape) {
        return autograd::linear(tape, x, weight_cast_(tape, weight_, x), bias_cast_(tape, bias_, x));
      },
      weight_, bias_);
}

template <class P>
Tensor Linear<P>::forward_add(const Tensor& x, const Tensor& z) {
  return direct_.forward_keyed(
      p_, x, detail::plan_key_of(z),
      [&](const auto& tape) {
        return autograd::linear_add(tape, x, weight_cast_(tape, weight_, x), bias_cast_(tape, bias_, x), z);
      },
      weight_, bias_, z);
}

template <class P>
Tensor Linear<P>::forward_normed(const Tensor& x, const Tensor& norm_w, const Tensor& norm_b, double eps) {
  STRATA_CHECK(!autograd::GradMode::enabled(), "Linear: a product with a layer-norm prologue is for inference; run "
               "it under autograd::NoGradGuard");
  return normed_.forward(
      p_, x,
      [&](const auto& d) {
        return ops::linear_norm(d, x, detail::compute_cast(d, norm_w, x), detail::compute_cast(d, norm_b, x), eps,
                                weight_cast_(d, weight_, x), bias_cast_(d, bias_, x));
      },
      weight_, bias_, norm_w, norm_b, eps);
}

template <class P>
Tensor Linear<P>::backward(const Tensor& dy) {
  return direct_.backward(*this, dy);
}

template <class P>
int64_t Linear<P>::plans_made() const {
  return direct_.plans_made();
}

#define STRATA_NN_INSTANTIATE(P) template class Linear<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
