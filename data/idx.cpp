#include "strata/data/idx.h"

#include <cstring>

#include "strata/data/file_io.h"

namespace strata::data {

namespace fs = std::filesystem;

namespace {

struct Header {
  std::vector<int64_t> dims;
  size_t data_offset = 0;
  uint64_t data_bytes = 0;  // saturates at 2^62, far beyond any file
  std::string dims_str;
};

struct IdxFile {
  std::vector<uint8_t> bytes;  // whole (inflated) file
  Header header;
};

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

// The magic, the element type and the dims, from the first bytes of `b`.
Header parse_header(const std::vector<uint8_t>& b, int expected_ndims, const char* kind, const std::string& file) {
  STRATA_CHECK(!b.empty(), "IDX ", kind, " file ", file, ": file is empty");
  STRATA_CHECK(b.size() >= 4, "IDX ", kind, " file ", file, ": truncated header (", b.size(), " bytes)");
  STRATA_CHECK(b[0] == 0 && b[1] == 0, "IDX ", kind, " file ", file, ": bad magic number 0x", std::hex,
               be32(b.data()), " (the first two bytes must be zero)");
  STRATA_CHECK(b[2] == 0x08, "IDX ", kind, " file ", file, ": unsupported element type 0x", std::hex, int(b[2]),
               " (only 0x08, unsigned byte, is supported)");
  const int ndims = b[3];
  STRATA_CHECK(ndims == expected_ndims, "IDX ", kind, " file ", file, ": bad magic number 0x", std::hex,
               be32(b.data()), std::dec, ": ", ndims, " dimensions, expected ", expected_ndims, " for ", kind);
  Header h;
  h.data_offset = 4 + 4 * static_cast<size_t>(ndims);
  STRATA_CHECK(b.size() >= h.data_offset, "IDX ", kind, " file ", file, ": truncated header (", b.size(),
               " bytes, the ", ndims, " sizes need ", h.data_offset, ")");
  constexpr uint64_t kSaturated = uint64_t{1} << 62;
  h.data_bytes = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint32_t s = be32(b.data() + 4 + 4 * d);
    STRATA_CHECK(s <= 0x7fffffffu, "IDX ", kind, " file ", file, ": dimension ", d, " has implausible size ", s);
    STRATA_CHECK(d == 0 || s > 0, "IDX ", kind, " file ", file, ": dimension ", d, " has size 0");
    h.dims.push_back(s);
    h.data_bytes = s != 0 && h.data_bytes > kSaturated / s ? kSaturated : h.data_bytes * s;
    if (!h.dims_str.empty()) h.dims_str += 'x';
    h.dims_str += std::to_string(s);
  }
  return h;
}

IdxFile parse_idx(const fs::path& path, int expected_ndims, const char* kind) {
  const std::string file = quoted(path);
  IdxFile f;
  f.bytes = read_regular_file(path);
  if (is_gzip(f.bytes)) {
    // Inflate the header, then only what its dims need (and one byte more, to tell a
    // longer file): a small file that inflates to gigabytes is never inflated.
    const std::vector<uint8_t> compressed = std::move(f.bytes);
    const Header h = parse_header(gunzip(compressed, file, 4 + 4 * static_cast<uint64_t>(expected_ndims)),
                                  expected_ndims, kind, file);
    f.bytes = gunzip(compressed, file, h.data_offset + h.data_bytes);
  }
  const auto& b = f.bytes;
  f.header = parse_header(b, expected_ndims, kind, file);
  const Header& h = f.header;
  const uint64_t have = b.size() - h.data_offset;
  STRATA_CHECK(have >= h.data_bytes, "IDX ", kind, " file ", file, ": truncated: dims ", h.dims_str, " need ",
               h.data_bytes, " data bytes but the file has ", have);
  STRATA_CHECK(have == h.data_bytes, "IDX ", kind, " file ", file, ": file is longer than its dims say: dims ",
               h.dims_str, " need ", h.data_bytes, " data bytes but the file has ", have == h.data_bytes + 1 ? "at least " : "",
               have);
  return f;
}

}  // namespace

Tensor read_idx_images(const fs::path& path) {
  IdxFile f = parse_idx(path, 3, "images");
  const auto& d = f.header.dims;
  Tensor t = Tensor::empty(Shape{d[0], 1, d[1], d[2]}, DType::u8);
  if (t.numel() > 0) std::memcpy(t.data<uint8_t>(), f.bytes.data() + f.header.data_offset, t.nbytes());
  return t;
}

Tensor read_idx_labels(const fs::path& path, int64_t num_classes) {
  IdxFile f = parse_idx(path, 1, "labels");
  const int64_t n = f.header.dims[0];
  Tensor t = Tensor::empty(Shape{n}, DType::i64);
  int64_t* out = t.data<int64_t>();
  const uint8_t* in = f.bytes.data() + f.header.data_offset;
  for (int64_t i = 0; i < n; ++i) {
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
  return InMemoryDataset(std::move(name), x, y, num_classes, {images, labels});
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
