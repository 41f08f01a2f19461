#include "strata/data/cifar10.h"

#include <cstring>

#include "strata/data/file_io.h"

namespace strata::data {

namespace fs = std::filesystem;

InMemoryDataset read_cifar10_batches(const std::vector<fs::path>& files, std::string name) {
  STRATA_CHECK(!files.empty(), name, ": no CIFAR-10 batch files given");
  std::vector<std::vector<uint8_t>> contents;
  int64_t total = 0;
  for (const auto& path : files) {
    std::vector<uint8_t> bytes = read_regular_file(path);
    const int64_t n = static_cast<int64_t>(bytes.size());
    STRATA_CHECK(n > 0, "CIFAR-10 batch '", path.string(), "': file is empty");
    STRATA_CHECK(n % kCifar10RecordBytes == 0, "CIFAR-10 batch '", path.string(), "': size ", n,
                 " bytes is not a whole number of ", kCifar10RecordBytes, "-byte records (", n / kCifar10RecordBytes,
                 " records and ", n % kCifar10RecordBytes, " bytes left over: truncated or not a CIFAR-10 file)");
    total += n / kCifar10RecordBytes;
    contents.push_back(std::move(bytes));
  }
  Tensor images = Tensor::empty(Shape{total, 3, 32, 32}, DType::u8);
  Tensor labels = Tensor::empty(Shape{total}, DType::i64);
  uint8_t* img = images.data<uint8_t>();
  int64_t* lab = labels.data<int64_t>();
  int64_t item = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const auto& bytes = contents[f];
    const int64_t records = static_cast<int64_t>(bytes.size()) / kCifar10RecordBytes;
    for (int64_t r = 0; r < records; ++r, ++item) {
      const uint8_t* rec = bytes.data() + r * kCifar10RecordBytes;
      STRATA_CHECK(rec[0] < 10, "CIFAR-10 batch '", files[f].string(), "': record ", r, " has label ", int(rec[0]),
                   ", outside 0..9");
      lab[item] = rec[0];
      std::memcpy(img + item * (kCifar10RecordBytes - 1), rec + 1, kCifar10RecordBytes - 1);
    }
  }
  return InMemoryDataset(std::move(name), images, labels, 10, files);
}

InMemoryDataset load_cifar10(const fs::path& dir, Split split) {
  fs::path root = dir;
  std::error_code ec;
  if (!fs::exists(root / "test_batch.bin", ec) && fs::exists(root / "cifar-10-batches-bin", ec))
    root = root / "cifar-10-batches-bin";
  std::vector<fs::path> files;
  if (split == Split::train) {
    for (int i = 1; i <= 5; ++i) files.push_back(root / ("data_batch_" + std::to_string(i) + ".bin"));
  } else {
    files.push_back(root / "test_batch.bin");
  }
  return read_cifar10_batches(files, std::string("cifar-10 ") + split_name(split));
}

}  // namespace strata::data
