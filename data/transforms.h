#pragma once
// Per-image transforms the Loader applies after converting u8 pixels to f32 in
// [0,1] (x / 255, as torchvision's ToTensor). They run in the order given; the
// random ones draw from the per-image generator the loader seeds from
// (seed, epoch, dataset index), so a run is reproducible whatever the worker count.
#include <cstdint>
#include <random>
#include <variant>
#include <vector>

#include "strata/core/shape.h"

namespace strata::data {

// (x - mean[c]) / std[c] per channel. One value applies to every channel.
struct Normalize {
  std::vector<float> mean, std;
};

// Zero-pads each side by `padding`, then crops height x width (0: the input size) at
// a uniformly random offset — torchvision's RandomCrop(size, padding).
struct PadRandomCrop {
  int64_t padding = 0;
  int64_t height = 0, width = 0;
};

// Mirrors left-right with probability p.
struct RandomHorizontalFlip {
  double p = 0.5;
};

// Bilinear resize to height x width (see resize.h).
struct Resize {
  int64_t height = 0, width = 0;
};

using Transform = std::variant<Normalize, PadRandomCrop, RandomHorizontalFlip, Resize>;

// Image shape [C,H,W] after `ts`; throws strata::Error for a transform that does not
// fit the shape (mean/std count vs channels, crop larger than the padded image, ...).
Shape transformed_shape(const Shape& chw, const std::vector<Transform>& ts);

// Applies `ts` to a CHW f32 image held in `img` with shape `chw`; both are updated.
// `scratch` is reused between calls to avoid allocation.
void apply_transforms(const std::vector<Transform>& ts, std::vector<float>& img, Shape& chw,
                      std::mt19937_64& rng, std::vector<float>& scratch);

// Standard per-channel statistics of the training sets, for images in [0,1].
namespace norm {
inline Normalize mnist() { return {{0.1307f}, {0.3081f}}; }
inline Normalize fashion_mnist() { return {{0.2860f}, {0.3530f}}; }
// Per-pixel std over the training set (not the often-quoted 0.2023/0.1994/0.2010,
// which is the mean of per-image stds).
inline Normalize cifar10() { return {{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}}; }
inline Normalize stl10() { return {{0.4467f, 0.4398f, 0.4066f}, {0.2603f, 0.2566f, 0.2713f}}; }
inline Normalize imagenet() { return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}; }
// VOC models are ImageNet-pretrained by convention: the same statistics.
inline Normalize voc() { return imagenet(); }
}  // namespace norm

}  // namespace strata::data
