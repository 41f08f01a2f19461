#include "data/image_file.h"

#include <stb_image.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <memory>

#include "data/file_io.h"
#include "data/jpeg.h"

namespace strata::data {

namespace {

bool is_jpeg(const uint8_t* d, size_t n) { return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF; }
bool is_png(const uint8_t* d, size_t n) {
  static constexpr uint8_t kMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return n >= 8 && std::equal(kMagic, kMagic + 8, d);
}
bool is_binary_pnm(const uint8_t* d, size_t n) { return n >= 2 && d[0] == 'P' && (d[1] == '5' || d[1] == '6'); }

// Bytes of a binary PGM/PPM header: "P5" or "P6", then width, height and maxval, each
// after whitespace and '#' comments, then one whitespace byte. 0 when it is malformed.
size_t pnm_header_bytes(const uint8_t* d, size_t n) {
  size_t pos = 2;
  for (int field = 0; field < 3; ++field) {
    while (pos < n && (std::isspace(d[pos]) || d[pos] == '#')) {
      if (d[pos] == '#')
        while (pos < n && d[pos] != '\n') ++pos;
      else
        ++pos;
    }
    const size_t start = pos;
    while (pos < n && std::isdigit(d[pos])) ++pos;
    if (pos == start) return 0;
  }
  return pos < n && std::isspace(d[pos]) ? pos + 1 : 0;
}

// stb_image for PNG and PGM/PPM: 1 or 2 channels (grey, grey+alpha) -> grey, 3 or 4 -> RGB.
Tensor decode_with_stb(const uint8_t* data, size_t size, const std::string& what, const char* format) {
  STRATA_CHECK(size <= static_cast<size_t>(INT_MAX), what, ": ", format, " file of ", size,
               " bytes is larger than stb_image reads (2 GiB)");
  const int len = static_cast<int>(size);
  int w = 0, h = 0, comp = 0;
  STRATA_CHECK(stbi_info_from_memory(data, len, &w, &h, &comp), what, ": not a readable ", format, " (",
               stbi_failure_reason(), ")");
  const int channels = comp <= 2 ? 1 : 3;
  if (is_binary_pnm(data, size)) {
    // stb_image (Debian 12's) reads a truncated PGM/PPM without an error, leaving the
    // missing pixels uninitialised: the size is checked here instead.
    const size_t header = pnm_header_bytes(data, size);
    const size_t sample = stbi_is_16_bit_from_memory(data, len) ? 2 : 1;
    const size_t need = static_cast<size_t>(w) * static_cast<size_t>(h) * static_cast<size_t>(comp) * sample;
    STRATA_CHECK(header > 0 && size >= header + need, what, ": truncated ", format, " (", w, "x", h, "x", comp,
                 " needs ", need, " bytes of pixels after its header, the file has ", header ? size - header : 0,
                 ")");
  }
  std::unique_ptr<stbi_uc, void (*)(void*)> px(stbi_load_from_memory(data, len, &w, &h, &comp, channels),
                                               stbi_image_free);
  STRATA_CHECK(px != nullptr, what, ": corrupt or truncated ", format, " (stb_image: ", stbi_failure_reason(), ")");
  Tensor t = Tensor::empty(Shape{channels, h, w}, DType::u8);
  uint8_t* out = t.data<uint8_t>();
  const int64_t plane = static_cast<int64_t>(h) * w;
  for (int64_t i = 0; i < plane; ++i)
    for (int c = 0; c < channels; ++c) out[c * plane + i] = px.get()[i * channels + c];
  return t;
}

}  // namespace

Tensor decode_image(const uint8_t* data, size_t size, const std::string& what) {
  if (is_jpeg(data, size)) return decode_jpeg_chw(data, size, what);
  if (is_png(data, size)) return decode_with_stb(data, size, what, "PNG");
  if (is_binary_pnm(data, size)) return decode_with_stb(data, size, what, "PGM/PPM");
  STRATA_FAIL(what, ": not a JPEG, PNG or binary PGM/PPM image (", size, " bytes; the format is read from the "
              "content, not the file name)");
}

Tensor read_image_file(const std::filesystem::path& path) {
  const std::vector<uint8_t> bytes = read_file(path);
  return decode_image(bytes.data(), bytes.size(), path.string());
}

}  // namespace strata::data
