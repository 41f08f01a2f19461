#pragma once
// How an image of any size becomes a fixed-size sample, as ImageNet training and evaluation do it
// (torchvision's RandomResizedCrop, and Resize + CenterCrop). Datasets whose images differ in size
// (ImageFolderDataset) apply one while reading an item, on the decoded u8 pixels: the full-size image is
// never converted to f32, and the loader's per-image transforms (flip, normalise) then see fixed-size images.
// The random one draws from the loader's per-sample generator, so samples do not depend on num_workers.
//
// Resampling is strata's bilinear resize (resize.h) without antialiasing: torchvision's default for
// tensors before 0.17; its PIL path and later tensor path antialias when shrinking, so pixels differ
// from those, while the boxes are the same.
#include <cstdint>
#include <random>
#include <utility>
#include <variant>
#include <vector>

#include "strata/data/resize.h"

namespace strata::data {

// torchvision's RandomResizedCrop(size, scale, ratio): up to `attempts` draws of an area fraction
// uniform in [scale_min, scale_max] and a log-uniform aspect ratio (width / height) in
// [ratio_min, ratio_max]; the first box that fits is placed uniformly at random. When none fits, the
// central crop of the largest box whose aspect ratio is clamped to the range. The box is resized to
// size x size.
struct RandomResizedCrop {
  int64_t size = 224;
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  int attempts = 10;
};

// torchvision's Resize(resize) then CenterCrop(crop): the shorter side scaled to `resize` (the longer
// one to int(resize * long / short)), then the central crop x crop.
struct ResizeCenterCrop {
  int64_t resize = 256;
  int64_t crop = 224;
};

using CropGeometry = std::variant<RandomResizedCrop, ResizeCenterCrop>;

// Throws strata::Error naming the geometry and the parameter that is out of range: sizes outside 1..8192,
// scale bounds not in (0, 1] or reversed, ratio bounds not positive and finite or reversed, attempts outside
// 1..1000, a crop larger than the resize.
void check_crop_geometry(const CropGeometry& g);
// The side of the square samples `g` makes.
int64_t crop_output_side(const CropGeometry& g);

// The box RandomResizedCrop keeps from an H x W image (H, W > 0).
CropBox random_resized_crop_box(const RandomResizedCrop& p, int64_t H, int64_t W, std::mt19937_64& rng);
// (height, width) after scaling the shorter side of H x W to `side`.
std::pair<int64_t, int64_t> resize_shorter_side(int64_t H, int64_t W, int64_t side);
// The central crop_h x crop_w box of an H x W image; offsets round half to even, as torchvision's round().
CropBox center_crop_box(int64_t H, int64_t W, int64_t crop_h, int64_t crop_w);

// Applies `g` to src (C x H x W pixels in `layout`, contiguous) and writes C x S x S pixels (CHW) to dst,
// S = crop_output_side(g). `scratch` holds ResizeCenterCrop's resized image between calls.
void apply_crop_geometry(const CropGeometry& g, const uint8_t* src, int64_t C, int64_t H, int64_t W,
                         PixelLayout layout, uint8_t* dst, std::mt19937_64& rng, std::vector<uint8_t>& scratch);

}  // namespace strata::data
