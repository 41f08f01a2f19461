#pragma once
// Helpers of the examples tests: a small synthetic dataset in Fashion-MNIST's IDX
// layout, and options for tiny, fast training runs.
#include <filesystem>
#include <string>

#include "examples/train/options.h"

namespace strata::testing {

// A fresh directory under the test temp dir, removed by the caller if wanted.
std::filesystem::path temp_dir(const std::string& name);

// Writes {train,t10k}-{images-idx3,labels-idx1}-ubyte with `train` and `test` 28x28
// images whose class (0..9) is drawn as a class-dependent bar pattern plus noise, so a
// network can learn it. Returns `dir`.
std::filesystem::path write_synthetic_idx(const std::filesystem::path& dir, int64_t train, int64_t test, uint64_t seed);

// CIFAR-10 binary batches in `dir`: data_batch_{1..5}.bin with `per_file` records
// each and test_batch.bin with `test`; each record's colour encodes its class.
void write_cifar(const std::filesystem::path& dir, int64_t per_file, int64_t test, uint64_t seed);

// Writes `n` bytes to `p`, creating its folder.
void write_bytes(const std::filesystem::path& p, const void* data, size_t n);

// Options for a tiny run: keras LeNet (cheap on the reference backend), given backend
// and dispatch mode, no progress bar.
train::TrainOptions tiny_options(const std::string& data_dir, const std::string& backend, const std::string& dispatch);

}  // namespace strata::testing
