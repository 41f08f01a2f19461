#include "strata/data/crop.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "strata/core/error.h"
#include "strata/core/random.h"

namespace strata::data {

namespace {

constexpr int64_t kMaxSide = 8192;

// Python's round(): to nearest, ties to even (std::nearbyint in the default rounding mode).
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

double uniform(std::mt19937_64& rng, double lo, double hi) { return lo + (hi - lo) * uniform01(rng); }

void check_side(const char* what, const char* name, int64_t v) {
  STRATA_CHECK(v >= 1 && v <= kMaxSide, what, ": ", name, " must be in 1..", kMaxSide, ", got ", v);
}

}  // namespace

void check_crop_geometry(const CropGeometry& g) {
  if (const auto* r = std::get_if<RandomResizedCrop>(&g)) {
    constexpr const char* what = "RandomResizedCrop";
    check_side(what, "size", r->size);
    STRATA_CHECK(r->scale_min > 0 && r->scale_min <= r->scale_max && r->scale_max <= 1, what,
                 ": scale must satisfy 0 < min <= max <= 1, got (", r->scale_min, ", ", r->scale_max, ")");
    STRATA_CHECK(r->ratio_min > 0 && r->ratio_min <= r->ratio_max && std::isfinite(r->ratio_max), what,
                 ": ratio must satisfy 0 < min <= max < infinity, got (", r->ratio_min, ", ", r->ratio_max, ")");
    STRATA_CHECK(r->attempts >= 1 && r->attempts <= 1000, what, ": attempts must be in 1..1000, got ", r->attempts);
    return;
  }
  const auto& c = std::get<ResizeCenterCrop>(g);
  constexpr const char* what = "ResizeCenterCrop";
  check_side(what, "resize", c.resize);
  check_side(what, "crop", c.crop);
  STRATA_CHECK(c.crop <= c.resize, what, ": crop ", c.crop, " is larger than the resized shorter side ", c.resize);
}

int64_t crop_output_side(const CropGeometry& g) {
  if (const auto* r = std::get_if<RandomResizedCrop>(&g)) return r->size;
  return std::get<ResizeCenterCrop>(g).crop;
}

// torchvision.transforms.RandomResizedCrop.get_params, step by step.
CropBox random_resized_crop_box(const RandomResizedCrop& p, int64_t H, int64_t W, std::mt19937_64& rng) {
  STRATA_CHECK(H > 0 && W > 0, "RandomResizedCrop: the image has no pixels (", H, "x", W, ")");
  const double area = static_cast<double>(H) * static_cast<double>(W);
  const double log_lo = std::log(p.ratio_min), log_hi = std::log(p.ratio_max);
  for (int k = 0; k < p.attempts; ++k) {
    const double target_area = area * uniform(rng, p.scale_min, p.scale_max);
    const double aspect = std::exp(uniform(rng, log_lo, log_hi));
    const int64_t w = round_half_even(std::sqrt(target_area * aspect));
    const int64_t h = round_half_even(std::sqrt(target_area / aspect));
    if (w > 0 && w <= W && h > 0 && h <= H) {
      const auto top = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(H - h + 1)));
      const auto left = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(W - w + 1)));
      return CropBox{top, left, h, w};
    }
  }
  const double in_ratio = static_cast<double>(W) / static_cast<double>(H);
  int64_t w = W, h = H;
  if (in_ratio < p.ratio_min) {
    h = round_half_even(static_cast<double>(w) / p.ratio_min);
  } else if (in_ratio > p.ratio_max) {
    w = round_half_even(static_cast<double>(h) * p.ratio_max);
  }
  // Within the image already (W / ratio_min < H in the first case, H * ratio_max < W in the second); the
  // clamp keeps a box of at least one pixel for extreme ratios where torchvision would return an empty one.
  h = std::clamp<int64_t>(h, 1, H);
  w = std::clamp<int64_t>(w, 1, W);
  return CropBox{(H - h) / 2, (W - w) / 2, h, w};
}

std::pair<int64_t, int64_t> resize_shorter_side(int64_t H, int64_t W, int64_t side) {
  STRATA_CHECK(H > 0 && W > 0 && side > 0, "Resize: sizes must be positive, got ", H, "x", W, " to ", side);
  const int64_t shorter = std::min(H, W), longer = std::max(H, W);
  // torchvision: int(side * long / short), a float division truncated.
  const auto scaled = static_cast<int64_t>(static_cast<double>(side * longer) / static_cast<double>(shorter));
  return H <= W ? std::pair{side, scaled} : std::pair{scaled, side};
}

CropBox center_crop_box(int64_t H, int64_t W, int64_t crop_h, int64_t crop_w) {
  STRATA_CHECK(crop_h > 0 && crop_w > 0 && crop_h <= H && crop_w <= W, "CenterCrop: cannot crop ", crop_h, "x",
               crop_w, " from a ", H, "x", W, " image");
  return CropBox{round_half_even(static_cast<double>(H - crop_h) / 2.0),
                 round_half_even(static_cast<double>(W - crop_w) / 2.0), crop_h, crop_w};
}

void apply_crop_geometry(const CropGeometry& g, const uint8_t* src, int64_t C, int64_t H, int64_t W,
                         PixelLayout layout, uint8_t* dst, std::mt19937_64& rng, std::vector<uint8_t>& scratch) {
  if (const auto* r = std::get_if<RandomResizedCrop>(&g)) {
    const CropBox box = random_resized_crop_box(*r, H, W, rng);
    resize_bilinear_crop(src, C, H, W, layout, box, dst, r->size, r->size);
    return;
  }
  const auto& c = std::get<ResizeCenterCrop>(g);
  const auto [rh, rw] = resize_shorter_side(H, W, c.resize);
  scratch.resize(static_cast<size_t>(C * rh * rw));
  resize_bilinear(src, C, H, W, layout, scratch.data(), rh, rw);
  const CropBox box = center_crop_box(rh, rw, c.crop, c.crop);
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t y = 0; y < c.crop; ++y)
      std::memcpy(dst + (ch * c.crop + y) * c.crop, scratch.data() + (ch * rh + box.top + y) * rw + box.left,
                  static_cast<size_t>(c.crop));
}

}  // namespace strata::data
