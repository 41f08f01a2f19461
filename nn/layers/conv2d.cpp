#include "strata/nn/layers/conv2d.h"

#include "strata/autograd/functions.h"
#include "strata/nn/init.h"

namespace strata::nn {

template <class P>
Conv2d<P>::Conv2d(const P& p, int64_t in_channels, int64_t out_channels, int kernel_size, const Conv2dOptions& o)
    : p_(p), in_(in_channels), out_(out_channels), kernel_(kernel_size) {
  STRATA_CHECK(in_channels > 0 && out_channels > 0 && kernel_size > 0 && o.groups > 0 &&
                   in_channels % o.groups == 0 && out_channels % o.groups == 0,
               "Conv2d: invalid configuration in_channels=", in_channels, " out_channels=", out_channels,
               " kernel_size=", kernel_size, " groups=", o.groups);
  cp_.stride_h = cp_.stride_w = o.stride;
  cp_.pad_h = cp_.pad_w = o.padding;
  cp_.dilation_h = cp_.dilation_w = o.dilation;
  cp_.groups = o.groups;
  const Device dev = p_.device();
  weight_ = register_parameter(
      "weight", detail::make_filled(dev, Shape{out_channels, in_channels / o.groups, kernel_size, kernel_size}, o.dtype, 0.0));
  if (o.bias) bias_ = register_parameter("bias", detail::make_filled(dev, Shape{out_channels}, o.dtype, 0.0));
  init::reset_parameters(*this);  // torch's default, so a layer is usable without a policy
}

template <class P>
std::string Conv2d<P>::extra_repr() const {
  std::string s = std::to_string(in_) + ", " + std::to_string(out_) + ", kernel_size=" + std::to_string(kernel_);
  if (cp_.stride_h != 1) s += ", stride=" + std::to_string(cp_.stride_h);
  if (cp_.pad_h != 0) s += ", padding=" + std::to_string(cp_.pad_h);
  if (cp_.dilation_h != 1) s += ", dilation=" + std::to_string(cp_.dilation_h);
  if (cp_.groups != 1) s += ", groups=" + std::to_string(cp_.groups);
  if (!bias_.defined()) s += ", bias=False";
  return s;
}

// Mixed precision: the layer computes in its input's dtype; in the tape modes f32 master
// weights are cast per call (their gradients come back in f32 through the cast).
template <class P>
Tensor Conv2d<P>::forward(const Tensor& x) {
  return direct_.forward(
      p_, x,
      [&](const auto& tape) {
        return autograd::conv2d(tape, x, detail::compute_cast(tape, weight_, x), detail::compute_cast(tape, bias_, x),
                                cp_);
      },
      weight_, bias_, cp_);
}

template <class P>
Tensor Conv2d<P>::backward(const Tensor& dy) {
  return direct_.backward(*this, dy);
}

template <class P>
int64_t Conv2d<P>::plans_made() const {
  return direct_.plans_made();
}

#define STRATA_NN_INSTANTIATE(P) template class Conv2d<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
