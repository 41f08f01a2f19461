#include "strata/data/image.h"

#include <stb_image.h>

#include <algorithm>
#include <climits>
#include <memory>

#include "strata/core/file.h"
#include "strata/data/jpeg.h"

namespace strata::data {

namespace {

bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_jpeg(const uint8_t* d, size_t n) { return n >= 3 && d[0] == 0xFF && d[1] == 0xD8; }
bool is_png(const uint8_t* d, size_t n) {
  static constexpr uint8_t kMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return n >= 8 && std::equal(kMagic, kMagic + 8, d);
}
bool is_binary_pnm(const uint8_t* d, size_t n) { return n >= 2 && d[0] == 'P' && (d[1] == '5' || d[1] == '6'); }

// stb_image: 1 or 2 channels (grey, grey+alpha) -> grey, 3 or 4 -> RGB.
Tensor decode_png(const uint8_t* data, size_t size, const std::string& what) {
  STRATA_CHECK(size <= static_cast<size_t>(INT_MAX), what, ": PNG file of ", size,
               " bytes is larger than stb_image reads (2 GiB)");
  const int len = static_cast<int>(size);
  int w = 0, h = 0, comp = 0;
  STRATA_CHECK(stbi_info_from_memory(data, len, &w, &h, &comp), what, ": not a readable PNG (",
               stbi_failure_reason(), ")");
  const int channels = comp <= 2 ? 1 : 3;
  std::unique_ptr<stbi_uc, void (*)(void*)> px(stbi_load_from_memory(data, len, &w, &h, &comp, channels),
                                               stbi_image_free);
  STRATA_CHECK(px != nullptr, what, ": corrupt or truncated PNG (stb_image: ", stbi_failure_reason(), ")");
  Tensor t = Tensor::empty(Shape{channels, h, w}, DType::u8);
  uint8_t* out = t.data<uint8_t>();
  const int64_t plane = static_cast<int64_t>(h) * w;
  for (int64_t i = 0; i < plane; ++i)
    for (int c = 0; c < channels; ++c) out[c * plane + i] = px.get()[i * channels + c];
  return t;
}

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

Tensor decode_image(const uint8_t* b, size_t size, const std::string& what) {
  if (is_binary_pnm(b, size)) return decode_pnm(b, size, what);
  if (is_jpeg(b, size)) return decode_jpeg_chw(b, size, what);
  if (is_png(b, size)) return decode_png(b, size, what);
  STRATA_FAIL(what, ": ", size == 0 ? "the file is empty, " : "",
              "not a JPEG, PNG or binary PGM/PPM image (the format is read from the content, not the file name)");
}

Tensor read_image_file(const std::filesystem::path& path) {
  const std::vector<uint8_t> b = read_regular_file(path);
  return decode_image(b.data(), b.size(), quoted(path));
}

}  // namespace strata::data
