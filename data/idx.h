#pragma once
// IDX files (MNIST, Fashion-MNIST, KMNIST ...), plain or gzip-compressed.
// Format (big-endian): magic = 0x00 0x00 <type> <ndims>, then ndims uint32 sizes,
// then the data. Only type 0x08 (unsigned byte) is accepted, which is what every
// image/label file of these datasets uses.
//
// Every reader checks the magic, the type, the dims, that the file length matches the
// dims exactly, and (for a dataset) that image and label counts agree; failures are
// strata::Error naming the file.
#include <filesystem>

#include "strata/core/tensor.h"
#include "strata/data/dataset.h"

namespace strata::data {

// An idx3 image file -> u8 [N,1,rows,cols].
Tensor read_idx_images(const std::filesystem::path& path);
// An idx1 label file -> i64 [N]. Labels are checked to be < num_classes.
Tensor read_idx_labels(const std::filesystem::path& path, int64_t num_classes = 10);

// Images and labels as one dataset; throws if the counts differ.
InMemoryDataset read_idx_dataset(const std::filesystem::path& images, const std::filesystem::path& labels,
                                 std::string name, int64_t num_classes = 10);

// MNIST-layout directory: {train,t10k}-{images-idx3,labels-idx1}-ubyte, each with or
// without ".gz" (also the "train-images.idx3-ubyte" spelling of some mirrors).
// `name` is the dataset name used in messages ("mnist", "fashion-mnist").
InMemoryDataset load_mnist_dir(const std::filesystem::path& dir, Split split, const std::string& name);
inline InMemoryDataset load_mnist(const std::filesystem::path& dir, Split split) {
  return load_mnist_dir(dir, split, "mnist");
}
inline InMemoryDataset load_fashion_mnist(const std::filesystem::path& dir, Split split) {
  return load_mnist_dir(dir, split, "fashion-mnist");
}

// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr const char* kDebianFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace strata::data
