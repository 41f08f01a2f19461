#pragma once
// Bilinear resize with half-pixel centres (PyTorch's interpolate(mode="bilinear",
// align_corners=False, antialias=False), OpenCV's INTER_LINEAR): output pixel x maps
// to source coordinate (x + 0.5) * in/out - 0.5, clamped to the image.
// Downscaling by large factors aliases, as in those libraries without antialias.
#include <cstdint>

namespace strata::data {

enum class PixelLayout : uint8_t { chw, hwc };

// src: C x H x W pixels in `src_layout` (contiguous); dst: C x OH x OW, CHW contiguous.
// u8 results are rounded to nearest.
void resize_bilinear(const uint8_t* src, int64_t C, int64_t H, int64_t W, PixelLayout src_layout, uint8_t* dst,
                     int64_t OH, int64_t OW);
void resize_bilinear(const float* src, int64_t C, int64_t H, int64_t W, PixelLayout src_layout, float* dst,
                     int64_t OH, int64_t OW);

// A window of an image: rows [top, top + height), columns [left, left + width).
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};

// Resizes the window `box` of src (C x H x W in `src_layout`) to dst (C x OH x OW, CHW), exactly as cropping
// the window out and then calling resize_bilinear (torchvision's resized_crop): samples never reach outside
// the window. Throws strata::Error for a window that does not lie within the image.
void resize_bilinear_crop(const uint8_t* src, int64_t C, int64_t H, int64_t W, PixelLayout src_layout,
                          const CropBox& box, uint8_t* dst, int64_t OH, int64_t OW);

}  // namespace strata::data
