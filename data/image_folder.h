#pragma once
// An image classification set stored as torchvision's ImageFolder reads it (ImageNet's train/ and val/):
//   root/<class>/<file>   one folder per class, files in it or in folders below it.
//  - Classes: the sub-folders of root (symbolic links followed), sorted by name (byte order, as Python
//    sorts str); a class's index is its position.
//  - Samples: the files of each class folder, searched recursively as os.walk(followlinks=True), folder by
//    folder in sorted order and by name within a folder, whose extension is .jpg, .jpeg, .png, .pgm or .ppm
//    in any case. Other files are skipped as torchvision skips them (README, .DS_Store), except images of
//    formats strata does not decode (.bmp, .gif, .tif, .tiff, .webp): those are refused, since skipping
//    them would silently drop part of the data.
//  - Files are listed when the dataset is built and read lazily, one per sample in read() (ImageNet does not
//    fit in memory). The content decides the format (image.h), not the extension; greyscale becomes RGB and
//    an alpha channel is dropped (PIL's convert("RGB"), which torchvision's loader applies). Every sample is
//    brought to [3,S,S] by the dataset's CropGeometry (crop.h): RandomResizedCrop for training, drawing from
//    the loader's per-sample generator; Resize + CenterCrop for evaluation.
// Errors are strata::Error naming the path: a missing root or one that is not a folder, no class folder, a
// class folder without images, a folder reached twice through symbolic links, an image format strata does
// not read; and when a sample is read, a file that is unreadable, corrupt, or not an image. JPEGs in CMYK
// are refused by the decoder, naming the file (ImageNet's training set holds 22: convert them to RGB first,
// as the usual preparation scripts do; Pillow's CMYK conversion has changed between versions).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "strata/data/crop.h"
#include "strata/data/dataset.h"

namespace strata::data {

struct ImageFolderOptions {
  CropGeometry geometry = RandomResizedCrop{};
};

class ImageFolderDataset final : public Dataset {
 public:
  explicit ImageFolderDataset(const std::filesystem::path& root, ImageFolderOptions opts = {});

  std::string name() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  Shape image_shape() const override { return Shape{3, side_, side_}; }
  Shape target_shape() const override { return Shape{}; }
  DType target_dtype() const override { return DType::i64; }
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  // Reads, decodes and crops sample i (thread-safe). read() draws RandomResizedCrop's box from a generator
  // seeded by i alone; the loader calls read_random() with its per-sample generator.
  void read(int64_t i, uint8_t* image, void* target) const override;
  void read_random(int64_t i, uint8_t* image, void* target, std::mt19937_64& rng) const override;
  // Every image file of the dataset.
  std::vector<std::filesystem::path> source_files() const override;

  const std::filesystem::path& root() const { return root_; }
  const std::vector<std::string>& classes() const { return classes_; }
  std::filesystem::path path(int64_t i) const;
  int64_t label(int64_t i) const;

 private:
  std::filesystem::path root_;
  std::string name_;
  ImageFolderOptions opts_;
  int64_t side_ = 0;
  std::vector<std::string> classes_;
  // Sample paths relative to root, end to end in one string (ImageNet's 1.28 million paths cost about a
  // third of what as many std::filesystem::path objects do); sample i is [ends_[i-1], ends_[i]).
  std::string relative_paths_;
  std::vector<uint64_t> ends_;
  std::vector<int32_t> labels_;
};

}  // namespace strata::data
