#pragma once
// CIFAR-10 binary version (cifar-10-batches-bin): each file is a sequence of
// 3073-byte records, 1 label byte (0..9) followed by 3072 pixel bytes in CHW order
// (1024 red, 1024 green, 1024 blue, each 32x32 row-major).
#include <filesystem>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/data/dataset.h"

namespace strata::data {

inline constexpr int64_t kCifar10RecordBytes = 1 + 3 * 32 * 32;

// Reads and concatenates the given batch files -> images u8 [N,3,32,32], labels i64 [N].
// Throws strata::Error naming the file for a missing/empty file, a size that is not a
// whole number of records, or a label outside 0..9.
InMemoryDataset read_cifar10_batches(const std::vector<std::filesystem::path>& files, std::string name);

// `dir` holds data_batch_1.bin ... data_batch_5.bin (train, 50000 items) and
// test_batch.bin (test, 10000 items); `dir/cifar-10-batches-bin` is tried too.
InMemoryDataset load_cifar10(const std::filesystem::path& dir, Split split);

inline constexpr const char* kCifar10Classes[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                    "dog",      "frog",       "horse", "ship", "truck"};

}  // namespace strata::data
