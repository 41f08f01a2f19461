#pragma once
// A synthetic ImageNet-shaped image folder for loader benchmarks: JPEGs of ImageNet's typical sizes
// (500x375 landscape, 375x500 portrait, 3 in 4 landscape), quality 90 with 4:2:0 chroma like most of its
// files, in class folders as torchvision's ImageFolder reads them (data/image_folder.h). The content is
// smooth random shapes plus grain, tuned so the files are about as large as ImageNet's (~110 KB on
// average), since decoding time follows the entropy-coded size.
#include <cstdint>
#include <filesystem>

namespace strata::bench {

struct SyntheticFolderSpec {
  int64_t train_images = 20000;
  int64_t val_images = 1000;
  int64_t classes = 100;
  int quality = 90;
  double grain = 48.0;  // amplitude of the per-pixel noise, in 0..255 units: sets the file size (~110 KB)
  uint64_t seed = 1;
  int threads = 0;  // 0: every hardware thread
};

struct SyntheticFolderStats {
  int64_t files = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

// Writes root/train/<class>/<n>.jpg and root/val/<class>/<n>.jpg (images spread round-robin over the
// classes). Refuses a root that exists and is not an empty folder: nothing already there is overwritten.
SyntheticFolderStats write_synthetic_image_folder(const std::filesystem::path& root, const SyntheticFolderSpec& s);

}  // namespace strata::bench
