#include "data/image.h"

#include <algorithm>

#include "core/file.h"
#include "data/jpeg.h"

namespace strata::data {

namespace {

bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

}  // namespace

Tensor decode_pnm(const uint8_t* b, size_t size, const std::string& what) {
  STRATA_CHECK(size >= 2 && b[0] == 'P' && (b[1] == '5' || b[1] == '6'), what,
               ": not a binary PGM/PPM image (it must start with P5 or P6)");
  constexpr int64_t kMaxSide = int64_t{1} << 24;
  size_t pos = 2;
  auto next_int = [&](const char* field) -> int64_t {
    while (pos < size) {
      if (b[pos] == '#') {
        while (pos < size && b[pos] != '\n') ++pos;
      } else if (is_space(b[pos])) {
        ++pos;
      } else {
        break;
      }
    }
    int64_t v = 0;
    bool any = false;
    while (pos < size && b[pos] >= '0' && b[pos] <= '9') {
      v = std::min<int64_t>(v * 10 + (b[pos++] - '0'), kMaxSide + 1);  // saturates: no overflow
      any = true;
    }
    STRATA_CHECK(any, what, ": malformed PGM/PPM header: no ", field);
    return v;
  };
  const int64_t c = b[1] == '5' ? 1 : 3;
  const int64_t w = next_int("width"), h = next_int("height"), maxval = next_int("maxval");
  STRATA_CHECK(w > 0 && h > 0, what, ": the image has no pixels (", w, "x", h, ")");
  STRATA_CHECK(w <= kMaxSide && h <= kMaxSide, what, ": ", w > kMaxSide ? "width" : "height",
               " is larger than 2^24 pixels");
  STRATA_CHECK(maxval > 0, what, ": maxval 0 is invalid (it must be 1..255)");
  STRATA_CHECK(maxval <= 255, what, ": only 8-bit PGM/PPM is supported (maxval ",
               maxval <= kMaxSide ? std::to_string(maxval) : "above 2^24", "; 8-bit files have 1..255)");
  STRATA_CHECK(pos < size && is_space(b[pos]), what, ": malformed PGM/PPM header: no whitespace after maxval");
  ++pos;  // the single whitespace after maxval
  const uint64_t need = static_cast<uint64_t>(w) * static_cast<uint64_t>(h) * static_cast<uint64_t>(c);
  STRATA_CHECK(size - pos >= need, what, ": truncated PGM/PPM: ", w, "x", h, "x", c, " needs ", need,
               " bytes of pixels, the file has ", size - pos);
  Tensor t = Tensor::empty(Shape{c, h, w}, DType::u8);
  uint8_t* d = t.data<uint8_t>();
  const uint8_t* px = b + pos;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k) {
        const int64_t v = std::min<int64_t>(px[(y * w + x) * c + k], maxval);
        d[(k * h + y) * w + x] = static_cast<uint8_t>((v * 255 + maxval / 2) / maxval);
      }
  return t;
}

Tensor read_image_file(const std::filesystem::path& path) {
  const std::vector<uint8_t> b = read_regular_file(path);
  const std::string what = quoted(path);
  if (b.size() >= 2 && b[0] == 'P' && (b[1] == '5' || b[1] == '6')) return decode_pnm(b.data(), b.size(), what);
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8) return decode_jpeg_chw(b.data(), b.size(), what);
  STRATA_FAIL(what, ": ", b.empty() ? "the file is empty, " : "", "not a JPEG or binary PGM/PPM image");
}

}  // namespace strata::data
