#pragma once
// Image files for inference on single pictures: JPEG (data/jpeg.h) and binary
// PGM/PPM (netpbm P5/P6), told apart by their first bytes, not the file name.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace strata::data {

// Decodes a binary PGM (P5, greyscale) or PPM (P6, RGB) into u8 [C,H,W]. maxval
// 1..255; values are rescaled to 0..255 when maxval is below 255. Refuses (naming
// `what` and the reason) a malformed header, an image without pixels, 16-bit files
// (maxval above 255), sides above 2^24 and truncated pixel data.
Tensor decode_pnm(const uint8_t* data, size_t size, const std::string& what);

// The image in the regular file `path` (core/file.h) as u8 [C,H,W]: C = 1 for PGM,
// 3 for JPEG (greyscale JPEGs are expanded) and PPM. Anything else is refused naming
// the file and the formats read.
Tensor read_image_file(const std::filesystem::path& path);

}  // namespace strata::data
