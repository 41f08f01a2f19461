#pragma once
// One-line factories for every layer, so a network reads like PyTorch's:
//
//   auto net = nn::sequential(nn::conv2d(p, 1, 8, 3, {.padding = 1}), nn::relu(p), nn::max_pool2d(p, 2),
//                             nn::flatten(p), nn::linear(p, 8 * 14 * 14, 10));
//
// `p` is the dispatch policy the layers are built for (nn/policy.h): the builder that
// nn::make_model (nn/custom_model.h) calls once with the policy of the chosen mode and
// backend. Each factory returns the layer as a std::unique_ptr, ready for sequential()
// or Module::register_module.
#include <cstdint>
#include <memory>
#include <utility>

#include "strata/nn/layers/activation.h"
#include "strata/nn/layers/batch_norm.h"
#include "strata/nn/layers/container.h"
#include "strata/nn/layers/conv2d.h"
#include "strata/nn/layers/linear.h"
#include "strata/nn/layers/pool.h"

namespace strata::nn {

template <class P>
std::unique_ptr<Linear<P>> linear(const P& p, int64_t in_features, int64_t out_features,
                                  const LinearOptions& o = {}) {
  return std::make_unique<Linear<P>>(p, in_features, out_features, o);
}
template <class P>
std::unique_ptr<Conv2d<P>> conv2d(const P& p, int64_t in_channels, int64_t out_channels, int kernel_size,
                                  const Conv2dOptions& o = {}) {
  return std::make_unique<Conv2d<P>>(p, in_channels, out_channels, kernel_size, o);
}
template <class P>
std::unique_ptr<BatchNorm2d<P>> batch_norm2d(const P& p, int64_t channels, const BatchNormOptions& o = {}) {
  return std::make_unique<BatchNorm2d<P>>(p, channels, o);
}
template <class P>
std::unique_ptr<ReLU<P>> relu(const P& p) {
  return std::make_unique<ReLU<P>>(p);
}
template <class P>
std::unique_ptr<Dropout<P>> dropout(const P& p, double prob, uint64_t seed = 0) {
  return std::make_unique<Dropout<P>>(p, prob, seed);
}
template <class P>
std::unique_ptr<MaxPool2d<P>> max_pool2d(const P& p, int kernel_size, int stride = 0, int padding = 0) {
  return std::make_unique<MaxPool2d<P>>(p, kernel_size, stride, padding);
}
template <class P>
std::unique_ptr<AvgPool2d<P>> avg_pool2d(const P& p, int kernel_size, int stride = 0, int padding = 0) {
  return std::make_unique<AvgPool2d<P>>(p, kernel_size, stride, padding);
}
template <class P>
std::unique_ptr<GlobalAvgPool<P>> global_avg_pool(const P& p) {
  return std::make_unique<GlobalAvgPool<P>>(p);
}
template <class P>
std::unique_ptr<Flatten<P>> flatten(const P& p) {
  return std::make_unique<Flatten<P>>(p);
}

// The layers in order, as children "0", "1", ...
template <class... M>
std::unique_ptr<Sequential> sequential(std::unique_ptr<M>... layers) {
  auto s = std::make_unique<Sequential>();
  (s->add(std::move(layers)), ...);
  return s;
}

}  // namespace strata::nn
