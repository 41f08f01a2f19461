#pragma once
// Image files for inference on single pictures, told apart by their first bytes, not the file name:
// JPEG through libjpeg-turbo (data/jpeg.h, as the VOC reader's images, so a JPEG decodes to the same
// pixels here as in training), PNG through stb_image (Debian's libstb; any bit depth and colour type:
// 16-bit samples scaled to 8 bits, palettes expanded, an alpha channel dropped, not composited), and
// binary PGM/PPM (netpbm P5/P6) here: Debian 12's stb_image reads a truncated PGM/PPM without an error
// and does not rescale a maxval below 255.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::data {

// Decodes a binary PGM (P5, greyscale) or PPM (P6, RGB) into u8 [C,H,W]. maxval
// 1..255; values are rescaled to 0..255 when maxval is below 255. Refuses (naming
// `what` and the reason) a malformed header, an image without pixels, 16-bit files
// (maxval above 255), sides above 2^24 and truncated pixel data.
Tensor decode_pnm(const uint8_t* data, size_t size, const std::string& what);

// Decodes `size` bytes of a JPEG, PNG or binary PGM/PPM into u8 [C,H,W] (C = 1 for greyscale, 3 for
// colour); `what` names the source in errors. Anything else is refused naming the formats read.
Tensor decode_image(const uint8_t* data, size_t size, const std::string& what);

// The image in the regular file `path` (core/file.h), decode_image()d.
Tensor read_image_file(const std::filesystem::path& path);

}  // namespace strata::data
