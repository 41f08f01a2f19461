#pragma once
// Named, explicit initialisation policies. Every run prints the one it used
// (describe()): hidden init changes results (Levental & Orlova 2020 found PyTorch's Kaiming
// default doing exactly that).
//
//  pytorch_default        PyTorch's reset_parameters, reproduced exactly:
//                         Conv2d/Linear weight ~ U(-b, b), b = gain * sqrt(3 / fan_in) with
//                         kaiming_uniform(a = sqrt(5)), i.e. b = 1 / sqrt(fan_in);
//                         bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)); BatchNorm gamma 1, beta 0.
//  kaiming_normal_fan_out torchvision's ResNet: conv weight ~ N(0, 2 / fan_out) (fan_out =
//                         out_channels * k * k), conv bias 0; Linear keeps pytorch_default
//                         (torchvision leaves fc at nn.Linear's default); BN 1 / 0.
//  xavier_uniform         conv and linear weight ~ U(-a, a), a = sqrt(6 / (fan_in + fan_out));
//                         biases 0; BN 1 / 0.
//  fixup                  Zhang, Dauphin & Ma, "Fixup Initialization" (ICLR 2019), as their
//                         reference code (hongyi-zhang/Fixup, fixup_resnet_imagenet.py):
//                         in each of the L residual blocks with m convs, the first m-1 convs
//                         ~ N(0, 2 / fan_out) * L^(-1/(2m-2)), the last conv 0, downsample
//                         conv N(0, 2 / fan_out); the final Linear weight and bias 0; the
//                         stem conv keeps pytorch_default. (strata keeps BatchNorm, 1 / 0;
//                         Fixup's scalar biases and multipliers are not modelled.) Needs a
//                         network with residual blocks.
// Option zero_last_bn_gamma (Goyal et al., "Accurate, Large Minibatch SGD", 2017;
// torchvision's zero_init_residual): gamma of the last BN of every residual block = 0.
//
// Values are drawn on the host from a Generator (core/random.h) seeded with `seed`,
// in f64, parameter by parameter in state-dict order, then converted and copied to
// the device. Same seed, same weights, on every backend and in every dispatch mode.
//
// Layers need no policy to be usable: Conv2d and Linear are constructed with
// pytorch_default's values (init::reset_parameters, drawn from the default
// generator, as torch's layers draw from torch's), BatchNorm2d with 1 / 0. A named
// policy applied by initialize() re-draws every layer of a model from its own seed,
// so a model's weights then depend on the policy and seed only, not on what was
// constructed before it.
#include <cstdint>
#include <string>
#include <string_view>

#include "strata/core/random.h"
#include "strata/nn/module.h"

namespace strata::nn {

enum class InitPolicy { pytorch_default, kaiming_normal_fan_out, xavier_uniform, fixup };

InitPolicy parse_init_policy(std::string_view s);  // the names above
std::string_view init_policy_name(InitPolicy p);

struct InitConfig {
  InitPolicy policy = InitPolicy::pytorch_default;
  bool zero_last_bn_gamma = false;
  uint64_t seed = 0;
};

// "kaiming_normal_fan_out (seed 0, zero_last_bn_gamma)".
std::string describe(const InitConfig& c);

// (Re)initialises every Conv2d, Linear and BatchNorm2d of the tree rooted at `root`
// (BN running statistics reset to 0 / 1 and num_batches_tracked to 0).
void initialize(Module& root, const InitConfig& c);

namespace init {
// PyTorch's reset_parameters for one Conv2d or Linear (its own "weight" and optional
// "bias"), drawn from `gen`, or from the default generator under its mutex.
void reset_parameters(const Module& layer, Generator* gen = nullptr);
// fan_in and fan_out of a conv ([K, C/g, R, S]) or linear ([out, in]) weight, as
// torch.nn.init._calculate_fan_in_and_fan_out.
int64_t fan_in(const Tensor& w);
int64_t fan_out(const Tensor& w);
}  // namespace init

}  // namespace strata::nn
