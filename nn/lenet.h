#pragma once
// LeNet-5 as in Gu, Gozum & Lam, "Performance and User-friendliness of low-level and higher-level deep neural network frameworks" (Gu, Gozum & Lam, "Performance comparisons of various
// neural network frameworks"): conv 5x5 -> pool -> conv 5x5 -> pool -> dense -> dense.
//  tensorflow (default), the seed's TensorFlow model:
//    conv1 5x5x32 'same' + ReLU, max-pool 2, conv2 5x5x64 'same' + ReLU, max-pool 2,
//    flatten, fc1 1024 + ReLU, dropout 0.4, fc2 -> classes
//  keras, the seed's Keras model:
//    conv1 5x5x5 'valid' + ReLU, max-pool 2, conv2 5x5x12 'valid' + ReLU, max-pool 2,
//    dropout 0.25, flatten, fc1 128 + ReLU, dropout 0.5, fc2 -> classes
// (The seed's Keras model ends in softmax; strata's losses take logits.)
// input_size is the square input's side (28 for MNIST), which fixes fc1's width.
#include <memory>
#include <string>
#include <string_view>

#include "strata/nn/init.h"
#include "strata/nn/layers/activation.h"
#include "strata/nn/layers/container.h"
#include "strata/nn/layers/conv2d.h"
#include "strata/nn/layers/linear.h"
#include "strata/nn/layers/pool.h"

namespace strata::nn {

enum class LeNetVariant { tensorflow, keras };
LeNetVariant parse_lenet_variant(std::string_view s);  // "tensorflow" | "keras"

struct LeNetConfig {
  LeNetVariant variant = LeNetVariant::tensorflow;
  int64_t num_classes = 10;
  int64_t in_channels = 1;
  int64_t input_size = 28;
  InitConfig init{InitPolicy::pytorch_default, false, 0};
  uint64_t dropout_seed = 0;
  DType dtype = DType::f32;
};

std::string describe(const LeNetConfig& c);

template <class P>
class LeNet final : public Module {
 public:
  LeNet(const P& p, const LeNetConfig& c);
  std::string_view type_name() const override { return "LeNet"; }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dlogits) override;  // direct mode
  const LeNetConfig& config() const { return c_; }

 private:
  LeNetConfig c_;
  Conv2d<P>*conv1_, *conv2_;
  ReLU<P>*relu1_, *relu2_, *relu3_;
  MaxPool2d<P>*pool1_, *pool2_;
  Dropout<P>* drop_conv_ = nullptr;  // keras only
  Flatten<P>* flatten_;
  Linear<P>*fc1_, *fc2_;
  Dropout<P>* drop_fc_;
};

}  // namespace strata::nn
