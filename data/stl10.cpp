#include "strata/data/stl10.h"

#include "strata/data/file_io.h"

namespace strata::data {

namespace fs = std::filesystem;

Tensor read_stl10_images(const fs::path& path) {
  const std::vector<uint8_t> bytes = read_regular_file(path);
  const int64_t n = static_cast<int64_t>(bytes.size());
  STRATA_CHECK(n > 0, "STL-10 images '", path.string(), "': file is empty");
  STRATA_CHECK(n % kStl10ImageBytes == 0, "STL-10 images '", path.string(), "': size ", n,
               " bytes is not a whole number of ", kStl10ImageBytes, "-byte (3x96x96) images (",
               n / kStl10ImageBytes, " images and ", n % kStl10ImageBytes, " bytes left over: truncated?)");
  const int64_t count = n / kStl10ImageBytes;
  const int64_t S = kStl10Side;
  Tensor t = Tensor::empty(Shape{count, 3, S, S}, DType::u8);
  uint8_t* out = t.data<uint8_t>();
  // Each plane is column-major in the file: pixel (row r, col c) sits at c*S + r.
  for (int64_t p = 0; p < count * 3; ++p) {
    const uint8_t* src = bytes.data() + p * S * S;
    uint8_t* dst = out + p * S * S;
    for (int64_t c = 0; c < S; ++c)
      for (int64_t r = 0; r < S; ++r) dst[r * S + c] = src[c * S + r];
  }
  return t;
}

Tensor read_stl10_labels(const fs::path& path) {
  const std::vector<uint8_t> bytes = read_regular_file(path);
  STRATA_CHECK(!bytes.empty(), "STL-10 labels '", path.string(), "': file is empty");
  const int64_t n = static_cast<int64_t>(bytes.size());
  Tensor t = Tensor::empty(Shape{n}, DType::i64);
  int64_t* out = t.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    STRATA_CHECK(bytes[i] >= 1 && bytes[i] <= 10, "STL-10 labels '", path.string(), "': label ", int(bytes[i]),
                 " of item ", i, " is outside 1..10");
    out[i] = bytes[i] - 1;
  }
  return t;
}

InMemoryDataset read_stl10(const fs::path& images, const fs::path& labels, std::string name) {
  Tensor x = read_stl10_images(images);
  Tensor y = read_stl10_labels(labels);
  STRATA_CHECK(x.size(0) == y.size(0), name, ": image file '", images.string(), "' has ", x.size(0),
               " images but label file '", labels.string(), "' has ", y.size(0), " labels");
  return InMemoryDataset(std::move(name), x, y, 10, {images, labels});
}

InMemoryDataset load_stl10(const fs::path& dir, Split split) {
  fs::path root = dir;
  std::error_code ec;
  if (!fs::exists(root / "test_X.bin", ec) && fs::exists(root / "stl10_binary", ec)) root = root / "stl10_binary";
  const std::string s = split_name(split);
  return read_stl10(root / (s + "_X.bin"), root / (s + "_y.bin"), "stl-10 " + s);
}

}  // namespace strata::data
