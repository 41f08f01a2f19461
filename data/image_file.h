#pragma once
// One image file as a u8 [C,H,W] tensor (C = 1 for greyscale, 3 for colour), for
// programs that take a picture from the user (strata_infer). JPEG goes through
// libjpeg-turbo (data/jpeg.h), as the VOC reader's images do, so a JPEG decodes to the
// same pixels here as in training; PNG and binary PGM/PPM go through stb_image
// (Debian's libstb). No stb header leaks out of this file.
//
// PNG: any bit depth and colour type; 16-bit samples are scaled to 8 bits, palettes
// expanded, and an alpha channel is dropped (not composited: a transparent
// background keeps whatever colour its pixels hold). Errors are strata::Error naming
// the file and what is wrong (unknown format, corrupt or truncated data).
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/tensor.h"

namespace strata::data {

// Decodes `size` bytes of a JPEG, PNG or binary PGM/PPM; the format is decided by the
// content, not a file name. `what` names the source in error messages.
Tensor decode_image(const uint8_t* data, size_t size, const std::string& what);

// read_file(path), then decode_image().
Tensor read_image_file(const std::filesystem::path& path);

}  // namespace strata::data
