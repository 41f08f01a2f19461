#pragma once
// PASCAL VOC 2007/2012 as 20-class multi-label image classification.
//
// Layout (as extracted from VOCtrainval_*.tar, e.g. VOCdevkit/VOC2007):
//   root/ImageSets/Main/<image_set>.txt   one image id per line (first token used)
//   root/Annotations/<id>.xml             <annotation><object><name>cat</name>...
//   root/JPEGImages/<id>.jpg
// Target of an image: f32 [20], 1 for every class that names at least one <object>,
// 0 otherwise, classes in the standard order (kVocClasses). By default objects marked
// <difficult>1</difficult> count too (as in the usual multi-label VOC setup, where
// difficult objects are still present in the picture); VocOptions can exclude them.
//
// Annotations are parsed and file existence checked when the dataset is built, so a
// broken tree fails at once; JPEGs are decoded lazily in read() (on the loader's
// worker threads) and resized bilinearly (aspect ratio not kept) to
// resolution x resolution -> u8 [3,res,res].
#include <array>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "strata/data/dataset.h"

namespace strata::data {

inline constexpr int64_t kVocNumClasses = 20;
inline constexpr std::array<std::string_view, kVocNumClasses> kVocClasses = {
    "aeroplane", "bicycle", "bird",  "boat",        "bottle", "bus",   "car",  "cat",   "chair",     "cow",
    "diningtable", "dog",   "horse", "motorbike",   "person", "pottedplant", "sheep", "sofa", "train", "tvmonitor"};

// Index of a VOC class name in kVocClasses, or -1.
int voc_class_index(std::string_view name);

struct VocOptions {
  int64_t resolution = 224;       // output images are [3, resolution, resolution]
  bool include_difficult = true;  // count objects marked difficult
};

// The 20-element target of one annotation file; throws strata::Error naming the file
// for a missing file, malformed XML, a missing <annotation> root, an <object>
// without <name>, an unknown class name, or no <object> at all.
std::array<float, kVocNumClasses> parse_voc_annotation(const std::filesystem::path& xml_file,
                                                       bool include_difficult = true);

class VocDataset final : public Dataset {
 public:
  // image_set: "train", "val", "trainval", "test" (any ImageSets/Main/<name>.txt).
  VocDataset(const std::filesystem::path& root, const std::string& image_set, VocOptions opts = {});

  std::string name() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(ids_.size()); }
  Shape image_shape() const override { return Shape{3, opts_.resolution, opts_.resolution}; }
  Shape target_shape() const override { return Shape{kVocNumClasses}; }
  DType target_dtype() const override { return DType::f32; }
  int64_t num_classes() const override { return kVocNumClasses; }
  // Reads, decodes and resizes the JPEG of item i (thread-safe); target = the f32[20].
  void read(int64_t i, uint8_t* image, void* target) const override;
  // The image set, and every annotation and JPEG it names.
  std::vector<std::filesystem::path> source_files() const override;

  const std::vector<std::string>& ids() const { return ids_; }
  std::filesystem::path image_path(int64_t i) const;
  std::filesystem::path annotation_path(int64_t i) const;
  const Tensor& targets() const { return targets_; }  // f32 [N,20]

 private:
  std::filesystem::path root_;
  std::filesystem::path image_set_file_;
  std::string name_;
  VocOptions opts_;
  std::vector<std::string> ids_;
  Tensor targets_;
};

}  // namespace strata::data
