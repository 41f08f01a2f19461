// Decoding part of a JPEG through libjpeg-turbo's libjpeg API (the TurboJPEG API of Debian 12's 2.1 cannot
// crop): jpeg_crop_scanline narrows the columns that are inverse-transformed, upsampled and converted to
// RGB, jpeg_skip_scanlines entropy-decodes the rows above without reconstructing them, and the rows below
// are never read. tests/data/jpeg_region_test.cpp checks the pixels against a full decode.
// jpeglib.h uses size_t and FILE without including their headers.
#include <cstddef>
#include <cstdio>
#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <cstring>

#include "strata/data/jpeg.h"

namespace strata::data {

namespace {

struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// libjpeg reports truncation and bad entropy data as warnings and fills in grey; as decode_jpeg does with
// TJFLAG_STOPONWARNING, a warning is an error here.
void on_message(j_common_ptr cinfo, int level) {
  if (level < 0) on_error(cinfo);
}

// The C part: no object with a destructor lives in this frame, since libjpeg's errors leave it by longjmp.
// `out` holds rows x the image's width x 3 bytes. On failure returns false with libjpeg's message.
bool decode_rows(const uint8_t* data, size_t size, JDIMENSION top, JDIMENSION rows, JDIMENSION* left,
                 JDIMENSION* width, uint8_t* out, ErrorManager* err) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&err->pub);
  err->pub.error_exit = on_error;
  err->pub.emit_message = on_message;
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;  // the defaults otherwise: accurate integer DCT, fancy upsampling
  jpeg_start_decompress(&cinfo);
  jpeg_crop_scanline(&cinfo, left, width);
  if (top > 0 && jpeg_skip_scanlines(&cinfo, top) != top) {
    std::snprintf(err->message, sizeof err->message, "could not skip to row %u", top);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  for (JDIMENSION r = 0; r < rows; ++r) {
    JSAMPROW row = out + static_cast<size_t>(r) * *width * 3;
    if (jpeg_read_scanlines(&cinfo, &row, 1) != 1) {
      std::snprintf(err->message, sizeof err->message, "premature end of data at row %u", top + r);
      jpeg_destroy_decompress(&cinfo);
      return false;
    }
  }
  jpeg_abort_decompress(&cinfo);  // the rows below the box are never decoded
  jpeg_destroy_decompress(&cinfo);
  return true;
}

}  // namespace

CropBox decode_jpeg_region(const uint8_t* data, size_t size, const std::string& what, int64_t image_height,
                           int64_t image_width, const CropBox& box, DecodedImage& out) {
  STRATA_CHECK(size > 0, "corrupt JPEG ", what, ": file is empty");
  STRATA_CHECK(box.top >= 0 && box.left >= 0 && box.height > 0 && box.width > 0 &&
                   box.top + box.height <= image_height && box.left + box.width <= image_width,
               "decode_jpeg_region: window (top ", box.top, ", left ", box.left, ", ", box.height, "x", box.width,
               ") is not within the ", image_height, "x", image_width, " image ", what);
  // Fancy upsampling of subsampled chroma reads the neighbouring rows and columns, which a cropped or
  // skipped decode does not have at its edges: a margin of one iMCU (16 pixels at most) on every side
  // keeps the box's pixels those of a full decode.
  constexpr int64_t kMargin = 16;
  const int64_t top = std::max<int64_t>(0, box.top - kMargin);
  const int64_t bottom = std::min(image_height, box.top + box.height + kMargin);
  const int64_t rows = bottom - top;
  auto left = static_cast<JDIMENSION>(std::max<int64_t>(0, box.left - kMargin));
  auto width = static_cast<JDIMENSION>(std::min(image_width, box.left + box.width + kMargin) - left);
  jpeg_dimensions(data, size, what);  // refuses CMYK with its own message (libjpeg's would say "corrupt")
  out.pixels.resize(static_cast<size_t>(rows * image_width * 3));
  ErrorManager err{};
  if (!decode_rows(data, size, static_cast<JDIMENSION>(top), static_cast<JDIMENSION>(rows), &left, &width,
                   out.pixels.data(), &err))
    STRATA_FAIL("corrupt JPEG ", what, ": ", err.message);
  out.height = rows;
  out.width = width;
  out.pixels.resize(static_cast<size_t>(out.height * out.width * 3));
  return CropBox{top, static_cast<int64_t>(left), rows, static_cast<int64_t>(width)};
}

}  // namespace strata::data
