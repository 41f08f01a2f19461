#pragma once
// JPEG decoding/encoding through libjpeg-turbo's TurboJPEG API (jpeg.cpp), and decoding part of an
// image through its libjpeg API (jpeg_region.cpp). No libjpeg-turbo header leaks out of these files.
// Handles are per thread or per call, so every function may be called from the loader's workers
// concurrently.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/data/resize.h"  // CropBox

namespace strata::data {

struct DecodedImage {
  std::vector<uint8_t> pixels;  // height x width x 3, RGB, interleaved (HWC)
  int64_t height = 0, width = 0;
};

// Decodes any baseline/progressive RGB or greyscale JPEG (greyscale is expanded to RGB; CMYK is
// refused, naming the file). Corrupt or truncated data — including what libjpeg only reports as a
// warning, e.g. "premature end of JPEG file", which would otherwise leave grey pixels — throws
// strata::Error with `what` (the file name) and libjpeg-turbo's message.
DecodedImage decode_jpeg(const uint8_t* data, size_t size, const std::string& what);
// The same into `out`, reusing its pixel buffer: a loader worker decoding image after image allocates
// (and the kernel zeroes) the buffer once instead of per image.
void decode_jpeg_into(const uint8_t* data, size_t size, const std::string& what, DecodedImage& out);

// The part of the JPEG around `box` into `out`, and where that part lies in the image (it holds the box and
// a margin). Its pixels are those a full decode_jpeg gives there, for less work: the rows below the part
// are not decoded, those above it and the columns beside it only entropy-decoded. image_height,
// image_width: the JPEG's size (jpeg_dimensions). Errors as decode_jpeg's.
CropBox decode_jpeg_region(const uint8_t* data, size_t size, const std::string& what, int64_t image_height,
                           int64_t image_width, const CropBox& box, DecodedImage& out);

// (height, width) from the JPEG's header, without decoding; errors as decode_jpeg's.
std::pair<int64_t, int64_t> jpeg_dimensions(const uint8_t* data, size_t size, const std::string& what);

// Decodes into u8 [3,H,W] (CHW).
Tensor decode_jpeg_chw(const uint8_t* data, size_t size, const std::string& what);

// Chroma resolution of an encoded colour JPEG: full (4:4:4, colours round-trip closely) or half in
// each direction (4:2:0, what cameras and most of ImageNet's files use; smaller and faster to decode).
enum class JpegChroma : uint8_t { full, half };

// Encodes a u8 [3,H,W] (RGB), [1,H,W] (greyscale) or [4,H,W] (CMYK, written as YCCK: what the decoders
// refuse, for tests) CPU tensor; quality 1..100.
std::vector<uint8_t> encode_jpeg(const Tensor& chw, int quality = 95, JpegChroma chroma = JpegChroma::full);

}  // namespace strata::data
