#include "data/idx.h"

#include <cstring>

#include "data/file_io.h"

namespace strata::data {

namespace fs = std::filesystem;

namespace {

struct IdxFile {
  std::vector<uint8_t> bytes;  // whole (inflated) file
  std::vector<int64_t> dims;
  size_t data_offset = 0;
};

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

IdxFile parse_idx(const fs::path& path, int expected_ndims, const char* kind) {
  const std::string file = quoted(path);
  IdxFile f;
  f.bytes = read_file_maybe_gzip(path);
  const auto& b = f.bytes;
  STRATA_CHECK(!b.empty(), "IDX ", kind, " file ", file, ": file is empty");
  STRATA_CHECK(b.size() >= 4, "IDX ", kind, " file ", file, ": truncated header (", b.size(), " bytes)");
  STRATA_CHECK(b[0] == 0 && b[1] == 0, "IDX ", kind, " file ", file, ": bad magic number 0x", std::hex,
               be32(b.data()), " (the first two bytes must be zero)");
  STRATA_CHECK(b[2] == 0x08, "IDX ", kind, " file ", file, ": unsupported element type 0x", std::hex, int(b[2]),
               " (only 0x08, unsigned byte, is supported)");
  const int ndims = b[3];
  STRATA_CHECK(ndims == expected_ndims, "IDX ", kind, " file ", file, ": bad magic number 0x", std::hex,
               be32(b.data()), std::dec, ": ", ndims, " dimensions, expected ", expected_ndims, " for ", kind);
  f.data_offset = 4 + 4 * static_cast<size_t>(ndims);
  STRATA_CHECK(b.size() >= f.data_offset, "IDX ", kind, " file ", file, ": truncated header (", b.size(),
               " bytes, the ", ndims, " sizes need ", f.data_offset, ")");
  uint64_t expected = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint32_t s = be32(b.data() + 4 + 4 * d);
    STRATA_CHECK(s <= 0x7fffffffu, "IDX ", kind, " file ", file, ": dimension ", d, " has implausible size ", s);
    STRATA_CHECK(d == 0 || s > 0, "IDX ", kind, " file ", file, ": dimension ", d, " has size 0");
    f.dims.push_back(s);
    // Dims are < 2^31 each; stop multiplying once past the file size (no overflow).
    if (expected <= b.size()) expected *= s;
  }
  const uint64_t have = b.size() - f.data_offset;
  std::string dims_str;
  for (int64_t s : f.dims) {
    if (!dims_str.empty()) dims_str += 'x';
    dims_str += std::to_string(s);
  }
  STRATA_CHECK(have >= expected, "IDX ", kind, " file ", file, ": truncated: dims ", dims_str, " need ", expected,
               " data bytes but the file has ", have);
  STRATA_CHECK(have == expected, "IDX ", kind, " file ", file, ": file is longer than its dims say: dims ",
               dims_str, " need ", expected, " data bytes but the file has ", have);
  return f;
}

}  // namespace

Tensor read_idx_images(const fs::path& path) {
  IdxFile f = parse_idx(path, 3, "images");
  Tensor t = Tensor::empty(Shape{f.dims[0], 1, f.dims[1], f.dims[2]}, DType::u8);
  if (t.numel() > 0) std::memcpy(t.data<uint8_t>(), f.bytes.data() + f.data_offset, t.nbytes());
  return t;
}

Tensor read_idx_labels(const fs::path& path, int64_t num_classes) {
  IdxFile f = parse_idx(path, 1, "labels");
  Tensor t = Tensor::empty(Shape{f.dims[0]}, DType::i64);
  int64_t* out = t.data<int64_t>();
  const uint8_t* in = f.bytes.data() + f.data_offset;
  for (int64_t i = 0; i < f.dims[0]; ++i) {
    STRATA_CHECK(in[i] < num_classes, "IDX labels file '", path.string(), "': label ", int(in[i]), " of item ", i,
                 " is outside [0, ", num_classes, ")");
    out[i] = in[i];
  }
  return t;
}

InMemoryDataset read_idx_dataset(const fs::path& images, const fs::path& labels, std::string name,
                                 int64_t num_classes) {
  Tensor x = read_idx_images(images);
  Tensor y = read_idx_labels(labels, num_classes);
  STRATA_CHECK(x.size(0) == y.size(0), name, ": image file '", images.string(), "' has ", x.size(0),
               " images but label file '", labels.string(), "' has ", y.size(0), " labels");
  return InMemoryDataset(std::move(name), x, y, num_classes);
}

InMemoryDataset load_mnist_dir(const fs::path& dir, Split split, const std::string& name) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  auto candidates = [&](const std::string& kind, int n) {
    std::vector<fs::path> c;
    for (const std::string sep : {"-", "."})
      for (const std::string ext : {".gz", ""})
        c.push_back(dir / (prefix + "-" + kind + sep + "idx" + std::to_string(n) + "-ubyte" + ext));
    return c;
  };
  const fs::path images = first_existing(candidates("images", 3), name + " " + split_name(split) + " images");
  const fs::path labels = first_existing(candidates("labels", 1), name + " " + split_name(split) + " labels");
  return read_idx_dataset(images, labels, name + " " + split_name(split), 10);
}

}  // namespace strata::data
