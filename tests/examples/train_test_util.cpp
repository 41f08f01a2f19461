#include "train_test_util.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <random>
#include <vector>

namespace strata::testing {

namespace {
void write_idx(const std::filesystem::path& path, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::ofstream f(path, std::ios::binary);
  const uint8_t magic[4] = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  f.write(reinterpret_cast<const char*>(magic), 4);
  for (uint32_t d : dims) {
    const uint8_t be[4] = {static_cast<uint8_t>(d >> 24), static_cast<uint8_t>(d >> 16), static_cast<uint8_t>(d >> 8),
                           static_cast<uint8_t>(d)};
    f.write(reinterpret_cast<const char*>(be), 4);
  }
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(f.good()) << path;
}

void write_split(const std::filesystem::path& dir, const std::string& prefix, int64_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> images(static_cast<size_t>(n * 28 * 28)), labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng() % 10);
    labels[static_cast<size_t>(i)] = static_cast<uint8_t>(c);
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x) {
        // Class c: a horizontal bar at rows 2c..2c+3 and, for odd c, a vertical one.
        const bool on = (y >= 2 * c + 2 && y < 2 * c + 6) || (c % 2 == 1 && x >= 10 && x < 14);
        const int noise = static_cast<int>(rng() % 64);
        images[static_cast<size_t>((i * 28 + y) * 28 + x)] = static_cast<uint8_t>(on ? 191 + noise : noise);
      }
  }
  write_idx(dir / (prefix + "-images-idx3-ubyte"), {static_cast<uint32_t>(n), 28, 28}, images);
  write_idx(dir / (prefix + "-labels-idx1-ubyte"), {static_cast<uint32_t>(n)}, labels);
}
}  // namespace

std::filesystem::path temp_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info->name();
  for (char& ch : test)
    if (ch == '/') ch = '_';  // parameterised tests: "Suite/Name/param"
  std::filesystem::path d = std::filesystem::temp_directory_path() /
                            ("strata_examples_" + std::to_string(::getpid()) + "_" + test + "_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::filesystem::path write_synthetic_idx(const std::filesystem::path& dir, int64_t train, int64_t test, uint64_t seed) {
  std::filesystem::create_directories(dir);
  std::mt19937_64 rng(seed);
  write_split(dir, "train", train, rng);
  write_split(dir, "t10k", test, rng);
  return dir;
}

void write_bytes(const std::filesystem::path& p, const void* data, size_t n) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  ASSERT_TRUE(f.good()) << p;
}

void write_cifar(const std::filesystem::path& dir, int64_t per_file, int64_t test, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto records = [&](int64_t n) {
    std::vector<uint8_t> v;
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t c = static_cast<uint8_t>(rng() % 10);
      v.push_back(c);
      for (int k = 0; k < 3 * 32 * 32; ++k) v.push_back(static_cast<uint8_t>(c * 25 + rng() % 16));
    }
    return v;
  };
  for (int b = 1; b <= 5; ++b) {
    const auto v = records(per_file);
    write_bytes(dir / ("data_batch_" + std::to_string(b) + ".bin"), v.data(), v.size());
  }
  const auto v = records(test);
  write_bytes(dir / "test_batch.bin", v.data(), v.size());
}

train::TrainOptions tiny_options(const std::string& data_dir, const std::string& backend, const std::string& dispatch) {
  train::TrainOptions o;
  o.dataset = "fashion-mnist";
  o.data_dir = data_dir;
  o.model = "lenet";
  o.lenet_variant = "keras";
  o.backend = backend;
  o.dispatch = dispatch;
  o.progress = false;
  return o;
}

}  // namespace strata::testing
