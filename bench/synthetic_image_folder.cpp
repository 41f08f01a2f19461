#include "synthetic_image_folder.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "strata/core/error.h"
#include "strata/core/file.h"
#include "strata/core/random.h"
#include "strata/data/jpeg.h"
#include "strata/data/random.h"

namespace strata::bench {

namespace fs = std::filesystem;

namespace {

// One image: per channel a sum of separable waves (cx[x] * cy[y], cheap to evaluate per pixel) of random
// low frequencies, plus uniform grain. Separable waves keep generation well below the encode's cost.
Tensor synthetic_image(int64_t h, int64_t w, double grain, std::mt19937_64& rng) {
  constexpr int kWaves = 6;
  Tensor t = Tensor::empty(Shape{3, h, w}, DType::u8);
  uint8_t* px = t.data<uint8_t>();
  std::vector<float> cx(static_cast<size_t>(kWaves * w)), cy(static_cast<size_t>(kWaves * h));
  for (int64_t c = 0; c < 3; ++c) {
    const double base = 40 + 170 * uniform01(rng);
    for (int k = 0; k < kWaves; ++k) {
      const double fx = 0.002 + 0.06 * uniform01(rng), fy = 0.002 + 0.06 * uniform01(rng);
      const double px0 = 6.283 * uniform01(rng), py0 = 6.283 * uniform01(rng);
      const double amp = 30 * uniform01(rng);
      for (int64_t x = 0; x < w; ++x) cx[k * w + x] = static_cast<float>(amp * std::sin(fx * x + px0));
      for (int64_t y = 0; y < h; ++y) cy[k * h + y] = static_cast<float>(std::cos(fy * y + py0));
    }
    uint64_t state = rng() | 1;  // xorshift grain: one draw per pixel would dominate the time
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        float v = static_cast<float>(base);
        for (int k = 0; k < kWaves; ++k) v += cx[k * w + x] * cy[k * h + y];
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        v += static_cast<float>(grain * (static_cast<double>(state >> 40) * 0x1.0p-24 - 0.5) * 2);
        px[(c * h + y) * w + x] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
  }
  return t;
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  STRATA_CHECK(f.good(), "synthetic image folder: cannot write ", quoted(p));
}

}  // namespace

SyntheticFolderStats write_synthetic_image_folder(const fs::path& root, const SyntheticFolderSpec& s) {
  STRATA_CHECK(s.train_images >= s.classes && s.val_images >= s.classes && s.classes >= 1,
               "synthetic image folder: need at least one image per class in each split (", s.classes, " classes, ",
               s.train_images, " train and ", s.val_images, " val images)");
  STRATA_CHECK(s.quality >= 1 && s.quality <= 100, "synthetic image folder: quality must be in 1..100");
  std::error_code ec;
  if (fs::exists(root, ec))
    STRATA_CHECK(fs::is_directory(root, ec) && fs::is_empty(root, ec), "synthetic image folder: ", quoted(root),
                 " exists and is not an empty folder; give a new path (nothing there is overwritten)");
  const auto t0 = std::chrono::steady_clock::now();
  char name[32];
  for (const char* split : {"train", "val"})
    for (int64_t c = 0; c < s.classes; ++c) {
      std::snprintf(name, sizeof name, "class_%05lld", static_cast<long long>(c));
      fs::create_directories(root / split / name);
    }
  const int64_t total = s.train_images + s.val_images;
  std::atomic<int64_t> next{0};
  std::atomic<uint64_t> bytes{0};
  auto work = [&] {
    char file[64];
    for (int64_t i; (i = next.fetch_add(1)) < total;) {
      // Each image from its own seed: the folder does not depend on the thread count.
      std::mt19937_64 rng(data::mix_seed(s.seed, static_cast<uint64_t>(i)));
      const bool landscape = uniform_below(rng, 4) != 0;
      const Tensor img = synthetic_image(landscape ? 375 : 500, landscape ? 500 : 375, s.grain, rng);
      const std::vector<uint8_t> jpg = data::encode_jpeg(img, s.quality, data::JpegChroma::half);
      const bool train = i < s.train_images;
      const int64_t n = train ? i : i - s.train_images;
      std::snprintf(file, sizeof file, "class_%05lld/%08lld.jpg", static_cast<long long>(n % s.classes),
                    static_cast<long long>(n));
      write_bytes(root / (train ? "train" : "val") / file, jpg);
      bytes += jpg.size();
    }
  };
  const int threads = s.threads > 0 ? s.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  std::exception_ptr error;
  std::mutex error_mu;
  for (int k = 0; k < threads; ++k)
    pool.emplace_back([&] {
      try {
        work();
      } catch (...) {
        std::lock_guard lk(error_mu);
        if (!error) error = std::current_exception();
        next = total;  // the others stop too
      }
    });
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return {total, bytes.load(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

}  // namespace strata::bench
