#pragma once
// JPEG decoding/encoding through libjpeg-turbo's TurboJPEG API. No libjpeg-turbo
// header leaks out of this file. Handles are per thread, so both functions may be
// called from the loader's workers concurrently.
#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::data {

struct DecodedImage {
  std::vector<uint8_t> pixels;  // height x width x 3, RGB, interleaved (HWC)
  int64_t height = 0, width = 0;
};

// Decodes any baseline/progressive JPEG (greyscale is expanded to RGB). Corrupt or
// truncated data — including what libjpeg only reports as a warning, e.g. "premature
// end of JPEG file", which would otherwise leave grey pixels — throws strata::Error
// with `what` (the file name) and libjpeg-turbo's message.
DecodedImage decode_jpeg(const uint8_t* data, size_t size, const std::string& what);
// The same into `out`, reusing its pixel buffer: a loader worker decoding image after image allocates
// (and the kernel zeroes) the buffer once instead of per image.
void decode_jpeg_into(const uint8_t* data, size_t size, const std::string& what, DecodedImage& out);

// Decodes into u8 [3,H,W] (CHW).
Tensor decode_jpeg_chw(const uint8_t* data, size_t size, const std::string& what);

// Chroma resolution of an encoded colour JPEG: full (4:4:4, colours round-trip closely) or half in
// each direction (4:2:0, what cameras and most of ImageNet's files use; smaller and faster to decode).
enum class JpegChroma : uint8_t { full, half };

// Encodes a u8 [3,H,W] (RGB) or [1,H,W] (greyscale) CPU tensor; quality 1..100.
std::vector<uint8_t> encode_jpeg(const Tensor& chw, int quality = 95, JpegChroma chroma = JpegChroma::full);

}  // namespace strata::data
