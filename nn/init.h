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
// Values are drawn on the host from one std::mt19937_64 seeded with `seed`, in f64,
// parameter by parameter in state-dict order, with strata's own uniform and normal
// transforms (not <random>'s distributions, whose algorithms differ between standard
// libraries), then converted and copied to the device. Same seed, same weights, on
// every backend and in every dispatch mode.
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include "nn/module.h"

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
// The host random source, exposed for tests: uniform in [0, 1) from the top 53 bits;
// standard normals by Box-Muller, in pairs (the cosine value, then the sine value).
class HostRng {
 public:
  explicit HostRng(uint64_t seed) : gen_(seed) {}
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal();

 private:
  std::mt19937_64 gen_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};
// fan_in and fan_out of a conv ([K, C/g, R, S]) or linear ([out, in]) weight, as
// torch.nn.init._calculate_fan_in_and_fan_out.
int64_t fan_in(const Tensor& w);
int64_t fan_out(const Tensor& w);
}  // namespace init

}  // namespace strata::nn
